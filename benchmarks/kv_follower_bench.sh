#!/usr/bin/env bash
# benchmarks/kv_follower_bench.sh — writes through a follower against writes through the
# leader (issue 37 item 5): three kv_server processes with file logs (fsync on), redis-benchmark
# SET of 100-byte values over 100,000 keys, at each load point alternately against the leader
# and against a follower (which forwards them: REQUESTS frames when both speak protocol
# 0x10001, docs/protocol.md §0.2), ROUNDS rounds; prints each run and the medians, and the
# ratio follower / leader.
#
# Usage: benchmarks/kv_follower_bench.sh [BUILD_DIR] [REQUESTS] [ROUNDS]
#   BUILD_DIR  where examples/kv_server was built (default: build/release)
#   REQUESTS   requests per redis-benchmark run (default: 200000)
#   ROUNDS     rounds per load point (default: 3)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
requests="${2:-200000}"
rounds="${3:-3}"
# shellcheck source=benchmarks/kv_cluster.sh
source "$root/benchmarks/kv_cluster.sh"
kv_setup kv-follower

kv_start_cluster file
follower_port=""
for id in 1 2 3; do
    port=$((base + 10 + id))
    [[ "$port" == "$leader_port" ]] || { follower_port=$port; break; }
done

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '%-26s %12s %12s %8s\n' "load" "leader/s" "follower/s" "ratio"
for load in "-c 16 -P 16" "-c 64 -P 1" "-c 256 -P 1"; do
    : >"$work/leader" && : >"$work/follower"
    for ((round = 1; round <= rounds; round++)); do
        # shellcheck disable=SC2086  # $load is several arguments
        kv_benchmark "$leader_port" -t set -n "$requests" $load | awk '{ print $1 }' >>"$work/leader"
        # shellcheck disable=SC2086
        kv_benchmark "$follower_port" -t set -n "$requests" $load | awk '{ print $1 }' >>"$work/follower"
    done
    at_leader=$(median <"$work/leader")
    at_follower=$(median <"$work/follower")
    printf '%-26s %12.0f %12.0f %8.2f   (leader: %s; follower: %s)\n' "$load" "$at_leader" \
        "$at_follower" "$(awk -v a="$at_follower" -v b="$at_leader" 'BEGIN { print a / b }')" \
        "$(paste -sd ' ' "$work/leader")" "$(paste -sd ' ' "$work/follower")"
done
