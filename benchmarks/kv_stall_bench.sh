#!/usr/bin/env bash
# benchmarks/kv_stall_bench.sh — the tail of write latency, and memory, on a three-process
# kv_server cluster (file logs, fsync on, the default --snapshot-every): closed-loop
# redis-benchmark SETs (100-byte values, 100,000 keys) to the leader at 64 and 256
# outstanding writes (64 and 256 clients, one request each), then at 4096 (64 clients,
# pipelining 64). Each point runs long enough for several compactions, so a stall that comes
# with one (a snapshot taken, a checkpoint written) shows as the maximum. After the 4096
# point, each replica's peak resident memory (VmHWM) so far, to check that it stays bounded.
#
# Usage: benchmarks/kv_stall_bench.sh [BUILD_DIR] [REQUESTS] [ROUNDS] [BUILD_DIR...]
#   BUILD_DIR  where examples/kv_server was built (default: build/release); more than one
#              (e.g. a build of the previous commit, then this one): each round runs every
#              build in turn, so noise on a shared machine falls on all of them alike
#   REQUESTS   writes per point at 64 and 256 outstanding (default: 300000); twice as many
#              at 4096
#   ROUNDS     fresh clusters per build (default: 3); the table gives medians over rounds
# Needs redis-benchmark and redis-cli (Debian: redis-tools).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
requests="${2:-300000}"
rounds="${3:-3}"
builds=("$build" "${@:4}")
# shellcheck source=benchmarks/kv_cluster.sh
source "$root/benchmarks/kv_cluster.sh"
kv_setup kv-stall-bench
for b in "${builds[@]}"; do
    [[ -x "$b/examples/kv_server" ]] || { echo "error: $b/examples/kv_server not built" >&2; exit 2; }
done

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# peak_rss_mb PID: VmHWM in MiB
peak_rss_mb() { awk '$1 == "VmHWM:" { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

points=("64 1" "256 1" "64 64")
declare -A figures  # [build,outstanding,field] -> the rounds' values, space-separated
uptime >&2
for round in $(seq 1 "$rounds"); do
    for b in "${builds[@]}"; do
        server="$b/examples/kv_server"
        kv_start_cluster file
        for point in "${points[@]}"; do
            read -r clients pipeline <<<"$point"
            outstanding=$((clients * pipeline))
            n=$requests
            [[ "$pipeline" -gt 1 ]] && n=$((2 * requests))
            read -r rps p50 p99 max <<<"$(kv_benchmark_tail "$leader_port" -t set -c "$clients" \
                -P "$pipeline" -n "$n")"
            for field in rps p50 p99 max; do figures[$b,$outstanding,$field]+="${!field} "; done
            printf 'round %s, %s, %s outstanding: %s writes/s, p50 %s, p99 %s, max %s ms\n' \
                "$round" "$b" "$outstanding" "$rps" "$p50" "$p99" "$max" >&2
        done
        rss=""
        for pid in "${pids[@]}"; do rss+="$(peak_rss_mb "$pid") "; done
        figures[$b,rss]+="${rss% }/"
        printf 'round %s, %s: peak RSS per replica (MiB): %s\n' "$round" "$b" "$rss" >&2
        kv_stop_all
        rm -rf "$work"/file-*
    done
done
uptime >&2

printf 'SET -d 100 -r 100000, %s writes per point (%s at 4096); 3 kv_server processes, file logs (fsync); median of %s rounds\n' \
    "$requests" $((2 * requests)) "$rounds"
printf '%-40s %11s %10s %8s %8s %8s %9s\n' build outstanding "writes/s" "p50 ms" "p99 ms" "max ms" "max/p99"
for b in "${builds[@]}"; do
    for point in "${points[@]}"; do
        read -r clients pipeline <<<"$point"
        outstanding=$((clients * pipeline))
        declare -A m=()
        for field in rps p50 p99 max; do
            m[$field]=$(tr ' ' '\n' <<<"${figures[$b,$outstanding,$field]}" | grep . | median)
        done
        ratio=$(awk -v a="${m[max]}" -v b="${m[p99]}" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }')
        printf '%-40s %11s %10s %8s %8s %8s %9s\n' "$b" "$outstanding" "${m[rps]}" "${m[p50]}" \
            "${m[p99]}" "${m[max]}" "$ratio"
    done
    printf '%-40s peak RSS per replica (MiB), each round: %s\n' "$b" "${figures[$b,rss]%/}"
done
