#!/usr/bin/env bash
# benchmarks/kv_lease_bench.sh — linearizable read points per second on a three-process
# kv_server cluster (file logs, fsync on): ZSYNC answered by a quorum heartbeat round (§7)
# against ZSYNC answered under the leader's read lease (--lease-reads, docs/protocol.md §7.1),
# in the same run. A linearizable read is ZSYNC and then a local GET: the ZSYNC is what
# costs. Each round starts a fresh cluster without, then with --lease-reads, and runs
# redis-benchmark ZSYNC against the leader with 1 and with 64 clients (1 and 64 outstanding);
# the table gives the median of the rounds' requests/s and p50 latency, and the ratio.
#
# Usage: benchmarks/kv_lease_bench.sh [BUILD_DIR] [REQUESTS] [ROUNDS]
#   BUILD_DIR  where examples/kv_server was built (default: build/release)
#   REQUESTS   requests per redis-benchmark run with 64 clients (default: 200000; a tenth
#              with one client)
#   ROUNDS     clusters started per mode (default: 3)
# Needs redis-benchmark and redis-cli (Debian: redis-tools).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
requests="${2:-200000}"
rounds="${3:-3}"
# shellcheck source=benchmarks/kv_cluster.sh
source "$root/benchmarks/kv_cluster.sh"
kv_setup kv-lease-bench

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A rps p50
for round in $(seq 1 "$rounds"); do
    for mode in quorum lease; do
        kv_server_flags=()
        [[ "$mode" == lease ]] && kv_server_flags=(--lease-reads)
        kv_start_cluster file
        sleep 1  # the leader's first rounds: its lease is held from then on
        for clients in 1 64; do
            n=$requests
            [[ "$clients" == 1 ]] && n=$((requests / 10))
            read -r r p _ <<<"$(kv_benchmark "$leader_port" -c "$clients" -n "$n" ZSYNC)"
            rps[$mode,$clients]+="$r "
            p50[$mode,$clients]+="$p "
        done
        served=$(redis-cli -p "$leader_port" INFO | tr -d '\r' | awk -F: '$1 == "lease_syncs_served" { print $2 }')
        printf 'round %s, %s: lease syncs served at the leader: %s\n' "$round" "$mode" "${served:-?}" >&2
        kv_stop_all
        rm -rf "$work"/file-*
    done
done

printf 'ZSYNC at the leader, redis-benchmark -c C; kv_server: 3 processes, file logs (fsync); median of %s rounds\n' "$rounds"
printf '%-4s %14s %8s %14s %8s %7s\n' C "quorum rps" "p50 ms" "lease rps" "p50 ms" ratio
for clients in 1 64; do
    q=$(tr ' ' '\n' <<<"${rps[quorum,$clients]}" | grep . | median)
    qp=$(tr ' ' '\n' <<<"${p50[quorum,$clients]}" | grep . | median)
    l=$(tr ' ' '\n' <<<"${rps[lease,$clients]}" | grep . | median)
    lp=$(tr ' ' '\n' <<<"${p50[lease,$clients]}" | grep . | median)
    ratio=$(awk -v a="$l" -v b="$q" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    printf '%-4s %14s %8s %14s %8s %7s\n' "$clients" "$q" "$qp" "$l" "$lp" "$ratio"
    printf 'all rounds, C=%s: quorum %s| lease %s\n' "$clients" "${rps[quorum,$clients]}" "${rps[lease,$clients]}" >&2
done
