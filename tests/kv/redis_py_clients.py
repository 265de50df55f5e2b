#!/usr/bin/env python3
"""tests/kv/redis_py_clients.py — redis-py (Debian's python3-redis) against kv_server, run by
sentinel_clients_test.sh, which says what is checked. Two commands:

  redis_py_clients.py info PORT NAME KEY=VALUE...
      INFO and INFO all of the replica at PORT parsed by redis-py's parser (no error, no line
      left unparsed), every line checked against Redis's format, and each KEY=VALUE expected
      in what redis-py parsed (NAME says which replica this is, for the messages).
  redis_py_clients.py collections PORT FOLLOWER_PORT
      Hashes, lists, sets and sorted sets through redis-py's own methods on the replica at
      PORT (hset/hget/hgetall/hincrby, lpush/rpush/lrange/lpop, sadd/smembers/sismember/srem,
      zadd/zrange with scores/zscore/zpopmin), TYPE of each, WRONGTYPE raised as
      redis.ResponseError, a MULTI/EXEC transaction (pipeline) over a list and a set, and
      the same contents read back through the replica at FOLLOWER_PORT.
  redis_py_clients.py sentinel --ports P1,P2,P3 --pids PID1,PID2,PID3 [--name zab]
      redis-py's Sentinel: finds the master, writes through it, kills it (kill -9), writes on
      through its own discovery (the application retries a refused write, as one must with
      any Redis client); prints the time until writes resumed; every acknowledged write must
      be present on both survivors. Exits 0 when every check passed.
"""
import argparse
import os
import re
import signal
import sys
import time

import redis
from redis.sentinel import Sentinel

# Redis's INFO format: a "# Title" line, or `key:value` where the value is plain (no comma,
# colon, space or '=') or sub-fields `k=v` separated by commas, each v plain.
PLAIN = r"[^,:= \r\n]*"
SUB = r"[A-Za-z0-9_.\-]+=" + PLAIN
LINE = re.compile(r"^[a-z][a-z0-9_]*:(" + PLAIN + "|" + SUB + "(," + SUB + ")*)$")
TITLE = re.compile(r"^# [A-Z][A-Za-z ]*$")


def log(*what):
    print(time.strftime("[%H:%M:%S]"), *what, flush=True)


def fail(what):
    print("FAILED:", what, file=sys.stderr, flush=True)
    sys.exit(1)


def check_info(port, name, expected):
    r = redis.Redis(port=port, socket_timeout=5)
    plain = redis.Redis(port=port, socket_timeout=5)
    plain.set_response_callback("INFO", lambda response, **options: response)
    raw = plain.execute_command("INFO", "all").decode()
    lines = raw.split("\r\n")
    if lines[-1] == "":
        lines.pop()
    bad = [line for line in lines if not (TITLE.match(line) or LINE.match(line))]
    if bad:
        fail(f"{name}: {len(bad)} INFO lines not in Redis's format, first: {bad[0]!r}")
    keys = [line.split(":", 1)[0] for line in lines if not line.startswith("#")]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        fail(f"{name}: INFO keys given twice: {duplicates}")
    for parsed in (r.info(), r.info("all")):  # redis-py's parser (parse_info)
        if "__raw__" in parsed:
            fail(f"{name}: redis-py left lines unparsed: {parsed['__raw__'][:3]}")
        for item in expected:
            key, value = item.split("=", 1)
            if str(parsed.get(key)) != value:
                fail(f"{name}: INFO {key} is {parsed.get(key)!r}, expected {value}")
    sections = {line[2:].lower().replace(" ", "_") for line in lines if line.startswith("# ")}
    for section in sections:
        got = r.info(section)
        if not got:
            fail(f"{name}: INFO {section} is empty")
    if r.info("replication").get("role") not in ("master", "slave"):
        fail(f"{name}: INFO replication has no Redis role")
    zab = r.info("zab")
    if zab and not isinstance(zab.get("zab_syncs_total"), dict):
        fail(f"{name}: zab_syncs_total did not parse as sub-fields: {zab.get('zab_syncs_total')!r}")
    parsed = r.info()
    for key, value in parsed.items():
        if re.match(r"^(follower|member|slave)\d*_?\d*$", key) and not isinstance(value, dict):
            fail(f"{name}: {key} did not parse as sub-fields: {value!r}")
    log(f"{name}: {len(lines)} INFO lines in Redis's format, parsed by redis-py "
        f"{redis.__version__} ({len(sections)} sections)")


def expect(what, got, want):
    if got != want:
        fail(f"{what}: got {got!r}, expected {want!r}")


def check_collections(port, follower_port):
    r = redis.Redis(port=port, socket_timeout=5, decode_responses=True)
    k = lambda name: f"py:coll:{name}"  # noqa: E731
    r.delete(k("h"), k("l"), k("s"), k("z"), k("str"), k("tl"), k("ts"))

    expect("hset", r.hset(k("h"), mapping={"f1": "a", "f2": "b"}), 2)
    expect("hset of an existing field", r.hset(k("h"), "f1", "A"), 0)
    expect("hget", r.hget(k("h"), "f1"), "A")
    expect("hget of a missing field", r.hget(k("h"), "none"), None)
    expect("hincrby", r.hincrby(k("h"), "n", 5), 5)
    expect("hincrby again", r.hincrby(k("h"), "n", -2), 3)
    expect("hgetall", r.hgetall(k("h")), {"f1": "A", "f2": "b", "n": "3"})

    expect("rpush", r.rpush(k("l"), "b", "c"), 2)
    expect("lpush", r.lpush(k("l"), "a"), 3)
    expect("lrange", r.lrange(k("l"), 0, -1), ["a", "b", "c"])
    expect("lrange 1 1", r.lrange(k("l"), 1, 1), ["b"])
    expect("lpop", r.lpop(k("l")), "a")
    expect("lrange after lpop", r.lrange(k("l"), 0, -1), ["b", "c"])

    expect("sadd", r.sadd(k("s"), "x", "y", "z"), 3)
    expect("sadd of a member present", r.sadd(k("s"), "x"), 0)
    expect("smembers", r.smembers(k("s")), {"x", "y", "z"})
    expect("sismember", bool(r.sismember(k("s"), "y")), True)
    expect("srem", r.srem(k("s"), "y", "none"), 1)
    expect("sismember after srem", bool(r.sismember(k("s"), "y")), False)
    expect("smembers after srem", r.smembers(k("s")), {"x", "z"})

    expect("zadd", r.zadd(k("z"), {"one": 1, "two": 2, "half": 0.5}), 3)
    expect("zadd of a new score", r.zadd(k("z"), {"two": 2.5}), 0)
    expect("zrange withscores", r.zrange(k("z"), 0, -1, withscores=True),
           [("half", 0.5), ("one", 1.0), ("two", 2.5)])
    expect("zscore", r.zscore(k("z"), "two"), 2.5)
    expect("zscore of a missing member", r.zscore(k("z"), "none"), None)
    expect("zpopmin", r.zpopmin(k("z")), [("half", 0.5)])
    expect("zrange after zpopmin", r.zrange(k("z"), 0, -1), ["one", "two"])

    r.set(k("str"), "v")
    for key, kind in (("h", "hash"), ("l", "list"), ("s", "set"), ("z", "zset"), ("str", "string"),
                      ("none", "none")):
        expect(f"TYPE {k(key)}", r.type(k(key)), kind)

    wrong = "WRONGTYPE Operation against a key holding the wrong kind of value"
    for what, call in (("LPUSH on a hash", lambda: r.lpush(k("h"), "x")),
                       ("GET on a list", lambda: r.get(k("l"))),
                       ("SADD on a string", lambda: r.sadd(k("str"), "x")),
                       ("HGET on a sorted set", lambda: r.hget(k("z"), "f"))):
        try:
            call()
        except redis.ResponseError as e:
            if not str(e).startswith(wrong):
                fail(f"{what}: the error is {e!r}, not WRONGTYPE")
        else:
            fail(f"{what}: no error raised")
    expect("the hash after the refused LPUSH", r.hgetall(k("h")), {"f1": "A", "f2": "b", "n": "3"})

    p = r.pipeline(transaction=True)
    p.rpush(k("tl"), "1", "2").lpop(k("tl")).lrange(k("tl"), 0, -1)
    p.sadd(k("ts"), "m1", "m2").srem(k("ts"), "m1").smembers(k("ts")).type(k("ts"))
    expect("MULTI/EXEC over a list and a set", p.execute(), [2, "1", ["2"], 2, 1, {"m2"}, "set"])
    # A block with a WRONGTYPE command: EXEC answers every reply, the error in its place
    # (Redis applies the others); redis-py raises it.
    p = r.pipeline(transaction=True)
    p.rpush(k("tl"), "3").sadd(k("tl"), "x").llen(k("tl"))
    try:
        p.execute()
        fail("a block with SADD on a list raised no error")
    except redis.ResponseError as e:
        if wrong not in str(e):
            fail(f"a block with SADD on a list: the error is {e!r}, not WRONGTYPE")
    expect("the list after that block", r.lrange(k("tl"), 0, -1), ["2", "3"])

    f = redis.Redis(port=follower_port, socket_timeout=5, decode_responses=True)
    f.execute_command("ZSYNC")
    expect("hgetall on the follower", f.hgetall(k("h")), {"f1": "A", "f2": "b", "n": "3"})
    expect("lrange on the follower", f.lrange(k("tl"), 0, -1), ["2", "3"])
    expect("smembers on the follower", f.smembers(k("s")), {"x", "z"})
    expect("zrange on the follower", f.zrange(k("z"), 0, -1, withscores=True),
           [("one", 1.0), ("two", 2.5)])
    expect("TYPE on the follower", [f.type(k(n)) for n in ("h", "l", "s", "z")],
           ["hash", "list", "set", "zset"])
    log(f"redis-py {redis.__version__}: hashes, lists, sets, sorted sets, TYPE, WRONGTYPE, "
        f"MULTI/EXEC over collections; read back through a follower")


def sentinel_failover(args):
    ports = [int(p) for p in args.ports.split(",")]
    pids = dict(zip(ports, (int(p) for p in args.pids.split(","))))
    sentinel = Sentinel([("127.0.0.1", p) for p in ports], socket_timeout=2)
    host, port = sentinel.discover_master(args.name)
    if host != "127.0.0.1" or port not in ports:
        fail(f"discover_master gave {host}:{port}, not a replica's client address")
    slaves = sentinel.discover_slaves(args.name)
    if sorted(p for _, p in slaves) != sorted(p for p in ports if p != port):
        fail(f"discover_slaves gave {slaves}, expected the other two of {ports}")
    master = sentinel.master_for(args.name, socket_timeout=2)
    if master.info("replication")["role"] != "master":
        fail("the discovered master's INFO role is not master")
    log(f"redis-py Sentinel: master {host}:{port}, replicas {slaves}")
    acked = []
    killed_at = resumed_at = None
    errors = 0
    i = 0
    deadline = time.monotonic() + 30
    while len(acked) < 400:
        if time.monotonic() > deadline:
            fail(f"writes did not resume within 30 s ({len(acked)} acknowledged, {errors} errors)")
        if i == 200 and killed_at is None:
            os.kill(pids[port], signal.SIGKILL)
            killed_at = time.monotonic()
            log(f"killed the master (pid {pids[port]}, port {port}) after {len(acked)} writes")
        try:
            if master.set(f"py:{i}", f"v{i}") is not True:
                fail(f"SET py:{i} did not answer OK")
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
            # A refused or lost write: not acknowledged; the same (idempotent) SET again.
            if isinstance(e, redis.ResponseError) and not str(e).startswith(("NOQUORUM", "UNKNOWN")):
                fail(f"SET py:{i}: {e}")
            errors += 1
            time.sleep(0.02)
            continue
        if killed_at is not None and resumed_at is None:
            resumed_at = time.monotonic()
        acked.append(i)
        i += 1
    new_host, new_port = sentinel.discover_master(args.name)
    if new_port == port:
        fail("the killed master is still discovered")
    log(f"redis-py Sentinel: writes resumed {1000 * (resumed_at - killed_at):.0f} ms after the "
        f"kill (new master {new_host}:{new_port}, {errors} writes refused or lost meanwhile, "
        f"retried)")
    for survivor in (p for p in ports if p != port):
        r = redis.Redis(port=survivor, socket_timeout=5)
        r.execute_command("ZSYNC")
        values = r.mget([f"py:{n}" for n in acked])
        missing = [n for n, v in zip(acked, values) if v != f"v{n}".encode()]
        if missing:
            fail(f"replica at {survivor}: {len(missing)} acknowledged writes missing, first py:{missing[0]}")
    log(f"redis-py Sentinel: all {len(acked)} acknowledged writes on both survivors")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "info":
        if len(sys.argv) < 4:
            fail("usage: redis_py_clients.py info PORT NAME KEY=VALUE...")
        check_info(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "collections":
        if len(sys.argv) != 4:
            fail("usage: redis_py_clients.py collections PORT FOLLOWER_PORT")
        check_collections(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["sentinel"])
    parser.add_argument("--ports", required=True)
    parser.add_argument("--pids", required=True)
    parser.add_argument("--name", default="zab")
    sentinel_failover(parser.parse_args())


if __name__ == "__main__":
    main()
