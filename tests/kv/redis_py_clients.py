#!/usr/bin/env python3
"""tests/kv/redis_py_clients.py — redis-py (Debian's python3-redis) against kv_server, run by
sentinel_clients_test.sh, which says what is checked. Two commands:

  redis_py_clients.py info PORT NAME KEY=VALUE...
      INFO and INFO all of the replica at PORT parsed by redis-py's parser (no error, no line
      left unparsed), every line checked against Redis's format, and each KEY=VALUE expected
      in what redis-py parsed (NAME says which replica this is, for the messages).
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
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["sentinel"])
    parser.add_argument("--ports", required=True)
    parser.add_argument("--pids", required=True)
    parser.add_argument("--name", default="zab")
    sentinel_failover(parser.parse_args())


if __name__ == "__main__":
    main()
