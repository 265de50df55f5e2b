#!/usr/bin/env bash
# tests/kv/redis_diff_test.sh KV_SERVER — kv_server against redis-server, reply by reply: three
# kv_server replicas and one redis-server on free loopback ports, the same commands (strings,
# keys, hashes, lists, sets, sorted sets, MULTI/EXEC, errors) sent to the leader and to
# redis-server in RESP2 and after HELLO 3 (tests/kv/redis_diff.py); every reply must have
# Redis's RESP type all the way down (a RESP3 map, set, double, null) and its value.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed (each differing reply
# printed with both servers' forms); 77: skipped (no redis-server, redis-cli or python3).
set -euo pipefail

server="${1:?usage: redis_diff_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
for tool in redis-server redis-cli python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipped: $tool is not installed (Debian: redis-server, redis-tools, python3)"
        exit 77
    fi
done

# shellcheck source=tests/kv/cluster_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$work" --logfile "$work/redis-server.log" &
redis_pid=$!
trap 'kill -9 "$redis_pid" 2>/dev/null || true; cleanup' EXIT

say "starting 3 replicas in $work and redis-server on port $redis_port"
for id in 1 2 3; do start "$id"; done
leader=$(wait_leader 1 2 3)
deadline=$((SECONDS + 20))
until [[ "$(redis-cli -p "$redis_port" PING 2>/dev/null)" == PONG ]]; do
    ((SECONDS < deadline)) || fail "redis-server did not answer within 20 s"
    sleep 0.1
done

say "the same commands to replica $leader and to redis-server $(redis-server --version | cut -d' ' -f3)"
python3 "$(dirname "${BASH_SOURCE[0]}")/redis_diff.py" "${client_port[$leader]}" "$redis_port" ||
    fail "kv_server's replies differ from redis-server's (above)"
say "passed"
