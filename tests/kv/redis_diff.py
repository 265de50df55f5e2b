#!/usr/bin/env python3
"""tests/kv/redis_diff.py KV_PORT REDIS_PORT — the same commands against kv_server and
redis-server, in RESP2 and after HELLO 3, each reply compared by its RESP type and value.

Both servers start empty. Each script below runs on one connection per server and protocol;
the replies must have the same types all the way down (a map is not an array, a double is
not a bulk string, `_` is not `$-1`) and the same values, except: an error compares by its
code (the first word: ERR, WRONGTYPE, ...), sets and KEYS compare unordered. Prints each
difference with both replies; exit 0 if none, 1 otherwise.
"""
import socket
import sys


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Connection:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n", 1)
        return head

    def exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def value(self):
        """One reply as (type, value): arrays, sets and maps hold lists of values."""
        head = self.line()
        t, rest = chr(head[0]), head[1:]
        if t in "+:,#(":
            return (t, rest)
        if t == "-":
            return ("-", rest.split(b" ", 1)[0])
        if t == "_":
            return ("_", None)
        if t in "$=!":
            n = int(rest)
            return ("_resp2", None) if n < 0 else (t, self.exact(n))
        if t in "*~>":
            n = int(rest)
            if n < 0:
                return ("_resp2", None)
            items = [self.value() for _ in range(n)]
            return (t, sorted(items, key=repr) if t == "~" else items)
        if t == "%" or t == "|":
            n = int(rest)
            pairs = [(self.value(), self.value()) for _ in range(n)]
            return (t, pairs)
        raise ValueError("unknown RESP type %r" % head)

    def call(self, args):
        self.sock.sendall(encode(args))
        return self.value()


UNORDERED = {"KEYS", "SMEMBERS"}  # sets are unordered in RESP2 too (arrays there)

# Each script: commands run in order on a fresh connection (the keys are per script).
SCRIPTS = [
    [("SET", "s:a", "1"), ("GET", "s:a"), ("GET", "s:none"), ("MGET", "s:a", "s:none"),
     ("SETNX", "s:a", "2"), ("SETNX", "s:b", "2"), ("GETSET", "s:a", "3"), ("GETDEL", "s:b"),
     ("GETDEL", "s:b"), ("MSET", "s:c", "x", "s:d", "y"), ("MSETNX", "s:c", "1", "s:e", "2"),
     ("INCR", "s:n"), ("INCRBY", "s:n", "41"), ("DECR", "s:n"), ("DECRBY", "s:n", "2"),
     ("INCRBYFLOAT", "s:f", "10.5"), ("INCRBYFLOAT", "s:f", "-0.25"), ("INCR", "s:c"),
     ("APPEND", "s:c", "yz"), ("STRLEN", "s:c"), ("STRLEN", "s:none"), ("EXISTS", "s:a", "s:c",
     "s:none"), ("TYPE", "s:a"), ("TYPE", "s:none"), ("DEL", "s:a", "s:none"),
     ("UNLINK", "s:c"), ("SET", "s:x", "v", "NX"), ("SET", "s:x", "w", "XX", "GET"),
     ("SET", "s:y", "v", "XX"), ("SET", "s:x", "v", "EX", "100"), ("PERSIST", "s:x"),
     ("PERSIST", "s:x"), ("TTL", "s:x"), ("PTTL", "s:none"), ("EXPIRE", "s:none", "10"),
     ("KEYS", "s:*"), ("DBSIZE",), ("PING",), ("PING", "hi"), ("ECHO", "e"),
     ("SET", "s:x"), ("INCR", "s:x"), ("NOSUCH", "k")],
    [("HSET", "h:a", "f1", "1", "f2", "2"), ("HSET", "h:a", "f1", "9"), ("HGET", "h:a", "f1"),
     ("HGET", "h:a", "none"), ("HMGET", "h:a", "f1", "none", "f2"), ("HGETALL", "h:a"),
     ("HGETALL", "h:none"), ("HLEN", "h:a"), ("HEXISTS", "h:a", "f2"), ("HINCRBY", "h:a", "f1",
     "5"), ("HDEL", "h:a", "f2", "none"), ("HMSET", "h:a", "g", "1"), ("HGETALL", "h:a"),
     ("TYPE", "h:a"), ("GET", "h:a"), ("HGET", "s:none", "f")],
    [("RPUSH", "l:a", "1", "2", "3"), ("LPUSH", "l:a", "0"), ("LRANGE", "l:a", "0", "-1"),
     ("LLEN", "l:a"), ("LINDEX", "l:a", "1"), ("LINDEX", "l:a", "9"), ("LPOP", "l:a"),
     ("RPOP", "l:a"), ("LPOP", "l:a", "5"), ("LPOP", "l:a"), ("LPOP", "l:a", "2"),
     ("RPUSH", "l:b", "x", "y", "x", "z"), ("LREM", "l:b", "0", "x"), ("LTRIM", "l:b", "0", "0"),
     ("LRANGE", "l:b", "0", "-1"), ("TYPE", "l:b"), ("LRANGE", "l:none", "0", "-1")],
    [("SADD", "t:a", "x", "y", "z"), ("SADD", "t:a", "x"), ("SMEMBERS", "t:a"),
     ("SMEMBERS", "t:none"), ("SISMEMBER", "t:a", "y"), ("SCARD", "t:a"), ("SREM", "t:a", "y",
     "w"), ("SPOP", "t:none"), ("SPOP", "t:none", "2"), ("SADD", "t:b", "only"),
     ("SPOP", "t:b", "1"), ("SADD", "t:b", "only"), ("SPOP", "t:b"), ("TYPE", "t:a")],
    [("ZADD", "z:a", "1.5", "m", "2", "n"), ("ZSCORE", "z:a", "m"), ("ZSCORE", "z:a", "q"),
     ("ZINCRBY", "z:a", "1", "m"), ("ZADD", "z:a", "INCR", "1", "m"),
     ("ZADD", "z:a", "XX", "INCR", "1", "q"), ("ZADD", "z:a", "NX", "5", "m"),
     ("ZADD", "z:a", "CH", "7", "m"), ("ZADD", "z:a", "-3", "m"),
     ("ZRANGE", "z:a", "0", "-1"), ("ZRANGE", "z:a", "0", "-1", "WITHSCORES"),
     ("ZRANGE", "z:a", "0", "-1", "REV", "WITHSCORES"),
     ("ZRANGE", "z:a", "(1", "+inf", "BYSCORE", "WITHSCORES"),
     ("ZRANGEBYSCORE", "z:a", "-inf", "+inf", "WITHSCORES"),
     ("ZRANGEBYSCORE", "z:a", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "1"),
     ("ZRANK", "z:a", "n"), ("ZRANK", "z:a", "q"), ("ZCARD", "z:a"), ("ZPOPMIN", "z:a"),
     ("ZADD", "z:a", "1", "a", "2", "b", "inf", "c"), ("ZSCORE", "z:a", "c"),
     ("ZPOPMIN", "z:a", "1"), ("ZPOPMIN", "z:a", "9"), ("ZPOPMIN", "z:a"),
     ("ZPOPMIN", "z:none", "2"), ("ZREM", "z:a", "x"), ("ZADD", "z:a", "x", "m"),
     ("ZSCORE", "h:a", "f")],
    [("SET", "m:k", "1"), ("HSET", "m:h", "f", "v"), ("ZADD", "m:z", "2.5", "e"),
     ("MULTI",), ("HGETALL", "m:h"), ("ZSCORE", "m:z", "e"), ("ZRANGE", "m:z", "0", "-1",
     "WITHSCORES"), ("GET", "m:none"), ("SMEMBERS", "m:none"), ("INCR", "m:k"), ("EXEC",),
     ("WATCH", "m:k"), ("MULTI",), ("GET", "m:k"), ("EXEC",), ("MULTI",), ("INCR", "m:h"),
     ("EXEC",), ("MULTI",), ("NOSUCH",), ("EXEC",), ("DISCARD",)],
]


def run(port, proto, script):
    c = Connection(port)
    if proto == 3:
        kind, _ = c.call(("HELLO", "3"))
        if kind != "%":
            raise RuntimeError("HELLO 3 did not answer a map on port %d" % port)
    replies = []
    for args in script:
        reply = c.call(args)
        if args[0].upper() in UNORDERED and reply[0] == "*":
            reply = (reply[0], sorted(reply[1], key=repr))
        replies.append(reply)
    c.sock.close()
    return replies


def main():
    kv_port, redis_port = int(sys.argv[1]), int(sys.argv[2])
    differences = 0
    compared = 0
    for proto in (2, 3):
        for number, script in enumerate(SCRIPTS):
            # Both servers empty for the script's keys: each script uses its own prefix, run
            # once per protocol, so clear them first.
            for port in (kv_port, redis_port):
                c = Connection(port)
                c.call(("FLUSHALL",))
                c.sock.close()
            ours = run(kv_port, proto, script)
            theirs = run(redis_port, proto, script)
            for args, a, b in zip(script, ours, theirs):
                compared += 1
                if a != b:
                    differences += 1
                    print("RESP%d script %d: %s\n  kv_server:    %r\n  redis-server: %r"
                          % (proto, number, " ".join(args), a, b))
    print("redis_diff: %d replies compared, %d differences" % (compared, differences))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
