#!/usr/bin/env python3
"""tests/kv/hostile_client.py — clients that misbehave against a live kv_server on 127.0.0.1,
each checking that the server stays bounded and keeps serving (tests/kv/client_limits_test.sh).

  hostile_client.py unread PORT PID KEY COUNT BOUND_MB   COUNT pipelined GETs, replies unread
  hostile_client.py mget PORT PID KEY COPIES BOUND_MB    one MGET naming KEY COPIES times
  hostile_client.py partial PORT PID CONNS MB BOUND_MB   CONNS connections, MB of a value each
  hostile_client.py maxclients PORT N                    N clients served, the next refused
  hostile_client.py nofile PORT PID CPU_MS               at the descriptor limit: no spinning
  hostile_client.py timeout PORT SECONDS                 an idle client closed, an active kept
  hostile_client.py pipeline PORT BYSTANDER_PORT COUNT   COUNT SETs in one pipeline, no -BUSY
  hostile_client.py crowd PORT CONNS COUNT               CONNS pipelines of COUNT SETs and a
                                                         bystander on one replica, no -BUSY
  hostile_client.py outputs PORT PID CONNS KEY COPIES BOUND_MB
                                                         CONNS unread MGETs of KEY COPIES times

Memory is the server's resident set (VmRSS in /proc/PID/status), CPU its utime + stime
(/proc/PID/stat): what the process used, not wall time. Exit 0: passed; 1: failed, with the
reason on stderr. Standard library only.
"""
import os
import socket
import sys
import threading
import time


def fail(message):
    print("FAILED: " + message, file=sys.stderr)
    sys.exit(1)


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    fail(f"the server (process {pid}) exited")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (proc(5)).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def command(*args):
    out = b"*%d\r\n" % len(args)
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        out += b"$%d\r\n%s\r\n" % (len(arg), arg)
    return out


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_line(s):
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = s.recv(1)
        if not chunk:
            return data if data else None
        data += chunk
    return data


def ping(port, timeout=5.0):
    """True if a fresh connection gets +PONG."""
    try:
        with connect(port, timeout) as s:
            s.sendall(command("PING"))
            return read_line(s) == b"+PONG\r\n"
    except OSError:
        return False


def check_alive(port, what):
    if not ping(port):
        fail(f"{what}: the server no longer answers PING")


def watch_rss(pid, seconds, baseline):
    """The largest RSS growth (MB) over `seconds`, sampled every 50 ms."""
    peak = 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_mb(pid) - baseline)
        time.sleep(0.05)
    return peak


def unread(port, pid, key, count, bound_mb):
    baseline = rss_mb(pid)
    s = connect(port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and never read it
    requests = command("GET", key) * count
    s.sendall(requests)
    peak = watch_rss(pid, 2.0, baseline)
    print(f"unread: {count} GETs ({len(requests)} bytes) of {key}: RSS grew at most "
          f"{peak:.0f} MB (bound {bound_mb} MB)")
    if peak > bound_mb:
        fail(f"unread pipeline: RSS grew {peak:.0f} MB, above {bound_mb} MB")
    check_alive(port, "unread pipeline")
    s.close()


def mget(port, pid, key, copies, bound_mb):
    baseline = rss_mb(pid)
    with connect(port, timeout=20) as s:
        request = command("MGET", *([key] * copies))
        s.sendall(request)
        first = read_line(s)
        peak = max(watch_rss(pid, 0.5, baseline), rss_mb(pid) - baseline)
    print(f"mget: {copies} copies of {key} ({len(request)} bytes): first reply line "
          f"{first[:80]!r}; RSS grew at most {peak:.0f} MB (bound {bound_mb} MB)")
    if first is None or not first.startswith(b"-ERR reply too large"):
        fail(f"huge MGET: expected the reply-too-large error, got {first[:80]!r}")
    if peak > bound_mb:
        fail(f"huge MGET: RSS grew {peak:.0f} MB, above {bound_mb} MB")
    check_alive(port, "huge MGET")


def partial(port, pid, conns, mb, bound_mb):
    baseline = rss_mb(pid)
    declared = (mb + 10) << 20
    clients = []
    for i in range(conns):
        s = connect(port)
        s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\npartial-%d\r\n$%d\r\n" % (
            len(b"partial-%d" % i), i, declared))
        clients.append(s)
    chunk = b"v" * (1 << 20)
    for s in clients:  # each holds `mb` MB of a value it never finishes
        try:
            for _ in range(mb):
                s.sendall(chunk)
        except OSError:
            pass  # closed by the server: what the cap is for
    peak = watch_rss(pid, 1.0, baseline)
    refused = 0
    for s in clients:
        s.settimeout(0.5)
        try:
            reply = s.recv(200)
            if reply == b"" or reply.startswith(b"-ERR client input limit reached"):
                refused += 1
        except socket.timeout:
            pass
        except OSError:
            refused += 1
    print(f"partial: {conns} connections x {mb} MB of unfinished values: {refused} closed, "
          f"RSS grew at most {peak:.0f} MB (bound {bound_mb} MB)")
    if peak > bound_mb:
        fail(f"partial values: RSS grew {peak:.0f} MB, above {bound_mb} MB")
    if refused == 0:
        fail("partial values: no connection was closed at the input cap")
    check_alive(port, "partial values")
    for s in clients:
        s.close()


def maxclients(port, n):
    clients = []
    for i in range(n):
        s = connect(port)
        s.sendall(command("PING"))
        if read_line(s) != b"+PONG\r\n":
            fail(f"max-clients: client {i + 1} of {n} was not served")
        clients.append(s)
    extra = connect(port, timeout=2)
    try:
        reply = read_line(extra)
    except socket.timeout:
        reply = None  # served: it waits for a command
    print(f"maxclients: {n} served; client {n + 1} got {reply!r}")
    if reply != b"-ERR max number of clients reached\r\n":
        fail(f"max-clients: client {n + 1} expected the max-clients error, got {reply!r}")
    if extra.recv(1) != b"":
        fail("max-clients: the refused connection was not closed")
    clients.pop().close()
    deadline = time.monotonic() + 5
    while not ping(port):  # the server notices the close at once; allow it the round trip
        if time.monotonic() > deadline:
            fail("max-clients: no client served after one disconnected")
        time.sleep(0.05)
    for s in clients:
        s.close()


def nofile(port, pid, cpu_ms):
    served, pending = [], None
    for _ in range(200):
        s = connect(port)
        s.settimeout(0.5)
        s.sendall(command("PING"))
        try:
            if read_line(s) == b"+PONG\r\n":
                served.append(s)
                continue
        except socket.timeout:
            pass
        pending = s  # in the listen queue: the server is out of descriptors
        break
    if pending is None:
        fail("nofile: 200 clients served; the descriptor limit was never reached")
    before = cpu_seconds(pid)
    time.sleep(2.0)
    used_ms = (cpu_seconds(pid) - before) * 1000
    print(f"nofile: {len(served)} clients served, the next waits; the server used "
          f"{used_ms:.0f} ms of CPU in 2 s (bound {cpu_ms} ms)")
    if used_ms > cpu_ms:
        fail(f"nofile: the server used {used_ms:.0f} ms of CPU in 2 s while out of descriptors")
    for s in served[: len(served) // 2]:
        s.close()
    pending.settimeout(5)
    try:
        reply = read_line(pending)
    except socket.timeout:
        reply = None
    if reply != b"+PONG\r\n":
        fail(f"nofile: the waiting client was not served once descriptors were free ({reply!r})")
    check_alive(port, "nofile")
    for s in served[len(served) // 2:] + [pending]:
        s.close()


def timeout(port, seconds):
    idle, active = connect(port), connect(port)
    idle.settimeout(seconds + 5)
    start = time.monotonic()
    closed_after = None
    while time.monotonic() - start < seconds + 3:
        active.sendall(command("PING"))
        if read_line(active) != b"+PONG\r\n":
            fail("timeout: the active client was closed")
        if closed_after is None:
            idle.setblocking(False)
            try:
                if idle.recv(1) == b"":
                    closed_after = time.monotonic() - start
            except BlockingIOError:
                pass
            except OSError:
                closed_after = time.monotonic() - start
        time.sleep(0.25)
    print(f"timeout: --timeout {seconds}: idle client closed after "
          f"{closed_after if closed_after is None else round(closed_after, 1)} s, active kept")
    if closed_after is None:
        fail(f"timeout: the idle client was still open after {seconds + 3} s")
    if closed_after < seconds - 0.5:
        fail(f"timeout: the idle client was closed after {closed_after:.1f} s, before {seconds}")
    idle.close()
    active.close()


def pipeline(port, bystander_port, count):
    requests = b"".join(command("SET", b"pipe-%d" % (i % 1000), i) for i in range(count))
    s = connect(port, timeout=60)
    sender = threading.Thread(target=s.sendall, args=(requests,))
    bystander = {"writes": 0, "busy": 0, "errors": []}
    done = threading.Event()

    def bystand():
        with connect(bystander_port, timeout=30) as b:
            while not done.is_set():
                b.sendall(command("SET", "bystander", bystander["writes"]))
                reply = read_line(b)
                bystander["writes"] += 1
                if reply.startswith(b"-BUSY"):
                    bystander["busy"] += 1
                elif reply != b"+OK\r\n":
                    bystander["errors"].append(reply)
                time.sleep(0.02)

    other = threading.Thread(target=bystand)
    start = time.monotonic()
    sender.start()
    other.start()
    replies, busy, errors, buffered = 0, 0, 0, b""
    while replies < count:
        chunk = s.recv(1 << 16)
        if not chunk:
            fail(f"pipeline: the connection closed after {replies} replies")
        buffered += chunk
        lines = buffered.split(b"\r\n")
        buffered = lines.pop()
        for line in lines:
            replies += 1
            if line.startswith(b"-BUSY"):
                busy += 1
            elif line != b"+OK":
                errors += 1
    elapsed = time.monotonic() - start
    done.set()
    sender.join()
    other.join()
    s.close()
    print(f"pipeline: {count} SETs in {elapsed:.1f} s: {busy} -BUSY, {errors} other errors; "
          f"bystander: {bystander['writes']} writes, {bystander['busy']} -BUSY, "
          f"{len(bystander['errors'])} other errors")
    if busy or errors:
        fail(f"pipeline: {busy} -BUSY and {errors} other errors among {count} replies")
    if bystander["busy"] or bystander["errors"]:
        fail(f"pipeline: the bystander got {bystander['busy']} -BUSY, "
             f"errors {bystander['errors'][:3]}")
    if bystander["writes"] == 0:
        fail("pipeline: the bystander wrote nothing meanwhile")


def pipe_replies(s, count, what):
    """Reads `count` replies of SETs from `s`: (-BUSY count, other errors)."""
    replies, busy, errors, buffered = 0, 0, 0, b""
    while replies < count:
        chunk = s.recv(1 << 16)
        if not chunk:
            fail(f"{what}: the connection closed after {replies} replies")
        buffered += chunk
        lines = buffered.split(b"\r\n")
        buffered = lines.pop()
        for line in lines:
            replies += 1
            if line.startswith(b"-BUSY"):
                busy += 1
            elif line != b"+OK":
                errors += 1
    return busy, errors


def crowd(port, conns, count):
    """`conns` connections each pipelining `count` SETs through one replica (a follower), and
    a bystander on the same replica writing one SET at a time: nobody gets -BUSY (the
    replica's forwarding budget is shared in turn: write_pool.hpp)."""
    results = [None] * conns
    done = threading.Event()
    bystander = {"writes": 0, "busy": 0, "errors": [], "slowest": 0.0}

    def pipeline_one(i):
        requests = b"".join(command("SET", b"crowd-%d-%d" % (i, j % 500), j)
                            for j in range(count))
        with connect(port, timeout=120) as s:
            sender = threading.Thread(target=s.sendall, args=(requests,))
            sender.start()
            results[i] = pipe_replies(s, count, f"crowd connection {i}")
            sender.join()

    def bystand():
        with connect(port, timeout=60) as b:
            while not done.is_set():
                started = time.monotonic()
                b.sendall(command("SET", "crowd-bystander", bystander["writes"]))
                reply = read_line(b)
                bystander["slowest"] = max(bystander["slowest"], time.monotonic() - started)
                bystander["writes"] += 1
                if reply.startswith(b"-BUSY"):
                    bystander["busy"] += 1
                elif reply != b"+OK\r\n":
                    bystander["errors"].append(reply)
                time.sleep(0.01)

    start = time.monotonic()
    threads = [threading.Thread(target=pipeline_one, args=(i,)) for i in range(conns)]
    other = threading.Thread(target=bystand)
    other.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    other.join()
    elapsed = time.monotonic() - start
    busy = sum(r[0] for r in results if r)
    errors = sum(r[1] for r in results if r)
    print(f"crowd: {conns} x {count} pipelined SETs in {elapsed:.1f} s: {busy} -BUSY, "
          f"{errors} other errors; bystander: {bystander['writes']} writes, "
          f"{bystander['busy']} -BUSY, {len(bystander['errors'])} other errors, slowest "
          f"{bystander['slowest'] * 1000:.0f} ms")
    if None in results:
        fail("crowd: a pipelining connection did not finish")
    if busy or errors:
        fail(f"crowd: {busy} -BUSY and {errors} other errors among {conns * count} replies")
    if bystander["busy"] or bystander["errors"]:
        fail(f"crowd: the bystander got {bystander['busy']} -BUSY, "
             f"errors {bystander['errors'][:3]}")
    if bystander["writes"] == 0:
        fail("crowd: the bystander wrote nothing meanwhile")


def outputs(port, pid, conns, key, copies, bound_mb):
    """`conns` connections each send one MGET naming `key` `copies` times and never read:
    the replies held for all of them stay bounded (--max-output-bytes: the biggest holders
    closed, the rest refused), the server keeps serving."""
    baseline = rss_mb(pid)
    request = command("MGET", *([key] * copies))
    clients = []
    for _ in range(conns):
        s = connect(port, timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(request)
        clients.append(s)
    peak = watch_rss(pid, 2.0, baseline)
    # Each connection's fate, from its first bytes: refused (the error), or its reply begun
    # (held, or closed with it unread: the kernel delivers what it had buffered, then the
    # close). Nothing at all within 5 s: the server is not serving it.
    started = refused = stuck = 0
    for s in clients:
        s.settimeout(5.0)
        try:
            first = s.recv(80)
        except socket.timeout:
            stuck += 1
            continue
        except OSError:
            first = b"*"  # reset: closed with its reply unread
        if first.startswith(b"-ERR reply refused"):
            refused += 1
        elif first.startswith(b"*") or not first:
            started += 1
        else:
            fail(f"outputs: unexpected first reply bytes {first!r}")
    print(f"outputs: {conns} unread MGETs of {copies} x {key} ({len(request)} bytes each): "
          f"{refused} refused, {started} begun (held or closed), {stuck} stuck; RSS grew at "
          f"most {peak:.0f} MB (bound {bound_mb} MB)")
    if stuck:
        fail(f"outputs: {stuck} connections got neither a reply nor an error in 5 s")
    if peak > bound_mb:
        fail(f"outputs: RSS grew {peak:.0f} MB, above {bound_mb} MB")
    check_alive(port, "outputs")
    for s in clients:
        s.close()


def main(argv):
    if len(argv) < 2:
        fail(__doc__)
    mode, args = argv[1], argv[2:]
    numbers = [int(a) if a.isdigit() else a for a in args]
    modes = {"unread": unread, "mget": mget, "partial": partial, "maxclients": maxclients,
             "nofile": nofile, "timeout": timeout, "pipeline": pipeline, "crowd": crowd,
             "outputs": outputs}
    if mode not in modes:
        fail(f"unknown mode {mode}\n{__doc__}")
    modes[mode](*numbers)


if __name__ == "__main__":
    main(sys.argv)
