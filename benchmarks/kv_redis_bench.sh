#!/usr/bin/env bash
# benchmarks/kv_redis_bench.sh — redis-benchmark against a three-process kv_server cluster
# (file logs, fsync on) and, in the same run, against one redis-server with `appendonly yes`
# and `appendfsync always` (the reference for one durable node). Prints requests/s and p50
# latency for SET and GET with 100-byte values, 50 clients, pipelining 1 and 16, and the
# ratio kv_server / redis-server.
#
# Usage: benchmarks/kv_redis_bench.sh [BUILD_DIR] [REQUESTS]
#   BUILD_DIR  where examples/kv_server was built (default: build/release)
#   REQUESTS   requests per redis-benchmark run (default: 100000)
# Needs redis-benchmark and redis-server (Debian: redis-tools, redis-server).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
requests="${2:-100000}"
server="$build/examples/kv_server"
[[ -x "$server" ]] || { echo "error: $server not built (cmake --build --preset release --target kv_server)" >&2; exit 2; }
command -v redis-benchmark >/dev/null || { echo "error: redis-benchmark missing (apt-get install redis-tools)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "error: redis-server missing (apt-get install redis-server)" >&2; exit 2; }

work="$(mktemp -d /tmp/zab-kv-bench-XXXXXX)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

base=$((20000 + RANDOM % 20000))
peers="1=127.0.0.1:$((base + 1)),2=127.0.0.1:$((base + 2)),3=127.0.0.1:$((base + 3))"
for id in 1 2 3; do
    mkdir -p "$work/replica-$id"
    "$server" --id "$id" --peers "$peers" --client-port $((base + 10 + id)) \
        --data "$work/replica-$id" >"$work/replica-$id.log" 2>&1 &
    pids+=($!)
done
redis_port=$((base + 20))
redis-server --port "$redis_port" --dir "$work" --appendonly yes --appendfsync always \
    --save '' --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)

# Wait for a leader: INFO on each replica until one says role:leading.
leader_port=""
for _ in $(seq 1 100); do
    for id in 1 2 3; do
        if redis-cli -p $((base + 10 + id)) INFO 2>/dev/null | grep -q '^role:leading'; then
            leader_port=$((base + 10 + id))
        fi
    done
    [[ -n "$leader_port" ]] && break
    sleep 0.1
done
[[ -n "$leader_port" ]] || { echo "error: no leader elected; logs in $work" >&2; exit 1; }
until redis-cli -p "$redis_port" PING >/dev/null 2>&1; do sleep 0.1; done

# run PORT TEST PIPELINE -> "requests/s p50_ms" (redis-benchmark 7's CSV: test, rps,
# avg, min, p50, p95, p99, max)
run() {
    redis-benchmark -p "$1" -t "$2" -d 100 -c 50 -P "$3" -n "$requests" -r 100000 --csv -q 2>/dev/null |
        awk -F'","' 'NR == 2 { gsub(/"/, "", $2); gsub(/"/, "", $5); print $2, $5 }'
}

printf 'redis-benchmark -d 100 -c 50 -n %s; kv_server: 3 processes, file logs (fsync), leader on port %s\n' \
    "$requests" "$leader_port"
printf '%-5s %-3s %14s %10s %16s %10s %7s\n' test P "kv_server rps" "p50 ms" "redis-server rps" "p50 ms" ratio
for test in set get; do
    for pipeline in 1 16; do
        read -r kv_rps kv_p50 <<<"$(run "$leader_port" "$test" "$pipeline")"
        read -r rd_rps rd_p50 <<<"$(run "$redis_port" "$test" "$pipeline")"
        ratio=$(awk -v a="$kv_rps" -v b="$rd_rps" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
        printf '%-5s %-3s %14s %10s %16s %10s %7s\n' "$test" "$pipeline" "$kv_rps" "$kv_p50" "$rd_rps" "$rd_p50" "$ratio"
    done
done
