#!/usr/bin/env bash
# benchmarks/kv_tls_bench.sh — what TLS costs kv_server's writes: redis-benchmark SET (100-byte
# values) against three kv_server processes in plaintext, and against three with mutual TLS
# between them (--peer-tls-*) and TLS plus a password on their client ports (--tls-cert,
# --requirepass; redis-benchmark --tls -a), in one run, alternating the two clusters ROUNDS
# times. At 1 outstanding write (-c 1 -P 1) and 256 (-c 16 -P 16). Prints each run, then per
# depth the median writes/s and p50 of each and the ratio TLS / plaintext.
#
# Usage: benchmarks/kv_tls_bench.sh [BUILD_DIR] [REQUESTS] [ROUNDS] [file|memory]
#   BUILD_DIR  where examples/kv_server was built (default: build/release)
#   REQUESTS   requests per run at 256 outstanding (default: 100000; a tenth at 1)
#   ROUNDS     plaintext/TLS pairs (default: 3)
#   storage    file logs with fsync (default) or memory logs
# Needs redis-benchmark and redis-cli with TLS (Debian: redis-tools) and openssl.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
requests="${2:-100000}"
rounds="${3:-3}"
log_kind="${4:-file}"
# shellcheck source=benchmarks/kv_cluster.sh
source "$root/benchmarks/kv_cluster.sh"
kv_setup kv-tls-bench openssl

pki="$work/pki"
sh "$root/tests/net/make_member_certificates.sh" "$pki" 1 2 3 >"$work/pki.log" 2>&1
password="bench-$RANDOM$RANDOM"

# cluster plain|tls: starts three replicas (new ports, fresh data) with that configuration.
cluster() {
    kv_stop_all
    rm -rf "$work/$log_kind"-*
    base=$((base + 100))
    peers="1=127.0.0.1:$((base + 1)),2=127.0.0.1:$((base + 2)),3=127.0.0.1:$((base + 3))"
    kv_server_flags=()
    kv_client_flags=()
    if [[ "$1" == tls ]]; then
        kv_server_flags=(--peer-tls-cert "$pki/member-{id}.pem" --peer-tls-key "$pki/member-{id}.key"
                         --peer-tls-ca "$pki/ca.pem" --tls-cert "$pki/member-{id}.pem"
                         --tls-key "$pki/member-{id}.key" --requirepass "$password")
        kv_client_flags=(--tls --cacert "$pki/ca.pem" -a "$password")
    fi
    kv_start_cluster "$log_kind"
}

# measure plain|tls CLIENTS PIPELINE N: one SET run; appends "mode outstanding rps p50" to results
measure() {
    local rps p50
    read -r rps p50 _ <<<"$(kv_benchmark "$leader_port" -t set -c "$2" -P "$3" -n "$4")"
    printf '%-6s %4s %10s %8s\n' "$1" $(($2 * $3)) "$rps" "$p50"
    echo "$1 $(($2 * $3)) $rps $p50" >>"$work/results"
}

printf 'redis-benchmark -t set -d 100; kv_server: 3 processes, %s logs; %s rounds\n' "$log_kind" "$rounds"
printf '%-6s %4s %10s %8s\n' mode out "writes/s" "p50 ms"
: >"$work/results"
for ((round = 1; round <= rounds; round++)); do
    for mode in plain tls; do
        cluster "$mode"
        measure "$mode" 1 1 $((requests / 10))
        measure "$mode" 16 16 "$requests"
    done
done
kv_stop_all

echo
printf '%4s %14s %9s %14s %9s %10s %9s\n' out "plain writes/s" "p50 ms" "TLS writes/s" "p50 ms" "rps ratio" "p50 ratio"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for outstanding in 1 256; do
    plain_rps=$(awk -v o="$outstanding" '$1 == "plain" && $2 == o { print $3 }' "$work/results" | median)
    plain_p50=$(awk -v o="$outstanding" '$1 == "plain" && $2 == o { print $4 }' "$work/results" | median)
    tls_rps=$(awk -v o="$outstanding" '$1 == "tls" && $2 == o { print $3 }' "$work/results" | median)
    tls_p50=$(awk -v o="$outstanding" '$1 == "tls" && $2 == o { print $4 }' "$work/results" | median)
    printf '%4s %14s %9s %14s %9s %10s %9s\n' "$outstanding" "$plain_rps" "$plain_p50" "$tls_rps" \
        "$tls_p50" "$(awk -v a="$tls_rps" -v b="$plain_rps" 'BEGIN { printf "%.2f", a / b }')" \
        "$(awk -v a="$tls_p50" -v b="$plain_p50" 'BEGIN { printf "%.2f", a / b }')"
done
