#!/usr/bin/env bash
# benchmarks/kv_alloc_bench.sh — kv_server under three general-purpose allocators: glibc's
# malloc, jemalloc and mimalloc (the latter two loaded with LD_PRELOAD, so one binary serves
# all three). A three-process cluster (file logs, fsync on) per allocator and round; closed-loop
# redis-benchmark SETs (100-byte values, 100,000 keys) to the leader, by default at 256
# outstanding (256 clients, one request each); writes/s, p50 and p99, the CPU time (user + system, from /proc/PID/stat) the
# three replicas spent per write during the run, and the largest replica's peak resident
# memory (VmHWM). Rounds alternate the allocators, so noise on a
# shared machine falls on all of them alike; the table gives medians over rounds.
#
# Usage: benchmarks/kv_alloc_bench.sh [BUILD_DIR] [REQUESTS] [ROUNDS] [CLIENTS] [PIPELINE]
#   BUILD_DIR  where examples/kv_server was built (default: build/release), with
#              -DZAB_KV_ALLOCATOR=glibc: a binary linked with another allocator keeps it
#              whatever is preloaded
#   REQUESTS   writes per run (default: 200000)
#   ROUNDS     clusters started per allocator (default: 3)
#   CLIENTS, PIPELINE  redis-benchmark -c and -P (default: 256 and 1; 64 and 64 is 4096
#              outstanding)
# Needs redis-benchmark and redis-cli (Debian: redis-tools), and the allocators' shared
# libraries (Debian: libjemalloc2, libmimalloc2.0); a missing one is skipped.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
requests="${2:-200000}"
rounds="${3:-3}"
clients="${4:-256}"
pipeline="${5:-1}"
# shellcheck source=benchmarks/kv_cluster.sh
source "$root/benchmarks/kv_cluster.sh"
kv_setup kv-alloc-bench

if ldd "$server" | grep -qE 'jemalloc|mimalloc'; then
    echo "warning: $server is linked with $(ldd "$server" | grep -oE 'libjemalloc|libmimalloc' | head -1):" \
        "the glibc row is that allocator too (build with -DZAB_KV_ALLOCATOR=glibc)" >&2
fi

declare -A preload=([glibc]="")
for candidate in jemalloc:libjemalloc.so.2 mimalloc:libmimalloc.so.2; do
    name="${candidate%%:*}"
    path=$(ldconfig -p | awk -v lib="${candidate#*:}" '$1 == lib { print $NF; exit }')
    if [[ -n "$path" ]]; then
        preload[$name]="$path"
    else
        echo "skipping $name: ${candidate#*:} not found (ldconfig -p)" >&2
    fi
done
allocators=()
for name in glibc jemalloc mimalloc; do [[ -v preload[$name] ]] && allocators+=("$name"); done

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# cpu_ticks: user + system clock ticks of every started process, summed
cpu_ticks() {
    local pid total=0
    for pid in "${pids[@]}"; do
        # Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
        read -r -a f <<<"$(sed 's/^.*) //' "/proc/$pid/stat")"
        total=$((total + f[11] + f[12]))
    done
    echo "$total"
}
hz=$(getconf CLK_TCK)
# peak_rss_mb: the largest VmHWM of the started processes, in MiB
peak_rss_mb() {
    local pid
    for pid in "${pids[@]}"; do awk '$1 == "VmHWM:" { print int($2 / 1024) }' "/proc/$pid/status"; done |
        sort -n | tail -1
}

declare -A figures
uptime >&2
for round in $(seq 1 "$rounds"); do
    for name in "${allocators[@]}"; do
        kv_server_env=()
        [[ -n "${preload[$name]}" ]] && kv_server_env=("LD_PRELOAD=${preload[$name]}")
        kv_start_cluster file
        before=$(cpu_ticks)
        read -r rps p50 p99 _ <<<"$(kv_benchmark_tail "$leader_port" -t set -c "$clients" -P "$pipeline" \
            -n "$requests")"
        after=$(cpu_ticks)
        rss=$(peak_rss_mb)
        cpu=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$requests" 'BEGIN { printf "%.1f", t / hz / n * 1e6 }')
        for field in rps p50 p99 cpu rss; do figures[$name,$field]+="${!field} "; done
        printf 'round %s, %s: %s writes/s, p50 %s ms, p99 %s ms, %s us CPU per write, peak RSS %s MiB\n' \
            "$round" "$name" "$rps" "$p50" "$p99" "$cpu" "$rss" >&2
        kv_stop_all
        rm -rf "$work"/file-*
    done
done
uptime >&2

printf 'SET -d 100 -r 100000 -c %s -P %s, %s writes; 3 kv_server processes, file logs (fsync); median of %s rounds\n' \
    "$clients" "$pipeline" "$requests" "$rounds"
printf '%-9s %10s %8s %8s %22s %13s\n' allocator "writes/s" "p50 ms" "p99 ms" "CPU us/write (3 repl.)" "peak RSS MiB"
for name in "${allocators[@]}"; do
    declare -A m=()
    for field in rps p50 p99 cpu rss; do
        m[$field]=$(tr ' ' '\n' <<<"${figures[$name,$field]}" | grep . | median)
    done
    printf '%-9s %10s %8s %8s %22s %13s\n' "$name" "${m[rps]}" "${m[p50]}" "${m[p99]}" "${m[cpu]}" "${m[rss]}"
done
