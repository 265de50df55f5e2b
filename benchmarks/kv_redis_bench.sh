#!/usr/bin/env bash
# benchmarks/kv_redis_bench.sh — redis-benchmark against a three-process kv_server cluster
# (file logs, fsync on) and, in the same run, against one redis-server with `appendonly yes`
# and `appendfsync always` (the reference for one durable node). Prints requests/s and p50
# latency for SET and GET with 100-byte values, 50 clients, pipelining 1 and 16, and the
# ratio kv_server / redis-server. With `default`, instead: redis-benchmark's default test list
# (every test it runs without -t: strings, lists, sets, hashes, sorted sets, MSET), 50 clients,
# its default 3-byte values, against both in the same run, one table row per test.
#
# Usage: benchmarks/kv_redis_bench.sh [BUILD_DIR] [REQUESTS] [default]
#   BUILD_DIR  where examples/kv_server was built (default: build/release)
#   REQUESTS   requests per redis-benchmark run (default: 100000)
# Needs redis-benchmark and redis-server (Debian: redis-tools, redis-server; installed with
# apt-get when missing).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
requests="${2:-100000}"
mode="${3:-}"
# shellcheck source=benchmarks/kv_cluster.sh
source "$root/benchmarks/kv_cluster.sh"
kv_setup kv-bench redis-server

kv_start_cluster file
redis_port=$((base + 20))
redis-server --port "$redis_port" --dir "$work" --appendonly yes --appendfsync always \
    --save '' --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)
until redis-cli -p "$redis_port" PING >/dev/null 2>&1; do sleep 0.1; done

if [[ "$mode" == default ]]; then
    # default_list PORT -> "TEST requests/s p50_ms" lines, in redis-benchmark's order
    default_list() {
        redis-benchmark -p "$1" -c 50 -n "$requests" --csv -q 2>/dev/null |
            awk -F'","' 'NR > 1 { gsub(/"/, "", $1); gsub(/"/, "", $2); gsub(/"/, "", $5);
                                  gsub(/ /, "_", $1); print $1, $2, $5 }'
    }
    default_list "$leader_port" >"$work/kv.txt"
    default_list "$redis_port" >"$work/redis.txt"
    printf 'redis-benchmark -c 50 -n %s (its default test list); kv_server: 3 processes, file logs (fsync), leader on port %s\n' \
        "$requests" "$leader_port"
    printf '%-36s %14s %8s %16s %8s %7s\n' test "kv_server rps" "p50 ms" "redis-server rps" "p50 ms" ratio
    awk 'NR == FNR { rps[$1] = $2; p50[$1] = $3; next }
         { kv = ($1 in rps) ? rps[$1] : "-"; kp = ($1 in p50) ? p50[$1] : "-";
           ratio = (kv != "-" && $2 > 0) ? sprintf("%.2f", kv / $2) : "-";
           printf "%-36s %14s %8s %16s %8s %7s\n", $1, kv, kp, $2, $3, ratio }' \
        "$work/kv.txt" "$work/redis.txt"
    missing=$(awk 'NR == FNR { seen[$1] = 1; next } !($1 in seen) { print $1 }' "$work/kv.txt" "$work/redis.txt")
    [[ -z "$missing" ]] || { echo "error: kv_server answered no rate for: $missing" >&2; exit 1; }
    exit 0
fi

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
