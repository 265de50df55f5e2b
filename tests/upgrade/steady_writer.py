#!/usr/bin/env python3
"""tests/upgrade/steady_writer.py PORTS OUT STOP_FILE — a steady write load for the
rolling-upgrade test: until STOP_FILE exists, rounds of 8 pipelined SETs (one turn of the
server, so one submit_batch: forwarded as REQUESTS by an upgraded follower of an upgraded
leader, docs/protocol.md §0.2), each round to the next replica of PORTS (comma-separated
client ports) in turn. Every acknowledged write (+OK) is a line "key value t" in OUT, t the
monotonic time of its reply in seconds. A replica that is down or refuses is skipped until
its turn comes again. Needs redis-py (Debian's python3-redis)."""
import os
import sys
import time

import redis

ports = [int(p) for p in sys.argv[1].split(",")]
out_path, stop_file = sys.argv[2], sys.argv[3]
clients = [redis.Redis(port=p, socket_timeout=2, socket_connect_timeout=1) for p in ports]
written = failed = 0
with open(out_path, "w", buffering=1) as out:
    turn = 0
    while not os.path.exists(stop_file):
        client = clients[turn % len(clients)]
        keys = [f"u{turn}-{i}" for i in range(8)]
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.set(key, f"v-{key}")
        try:
            replies = pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, redis.TimeoutError):
            failed += len(keys)
            time.sleep(0.01)
        else:
            now = time.monotonic()
            for key, reply in zip(keys, replies):
                if reply is True:
                    out.write(f"{key} v-{key} {now:.6f}\n")
                    written += 1
                else:
                    failed += 1
        turn += 1
print(f"steady_writer: {written} writes acknowledged, {failed} not", file=sys.stderr)
