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
# shellcheck source=benchmarks/kv_cluster.sh
source "$root/benchmarks/kv_cluster.sh"
kv_setup kv-bench redis-server

kv_start_cluster file
redis_port=$((base + 20))
redis-server --port "$redis_port" --dir "$work" --appendonly yes --appendfsync always \
    --save '' --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)
until redis-cli -p "$redis_port" PING >/dev/null 2>&1; do sleep 0.1; done

# run PORT TEST PIPELINE -> "requests/s p50_ms"
run() {
    kv_benchmark "$1" -t "$2" -c 50 -P "$3" -n "$requests" | cut -d' ' -f1,2
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
