#!/usr/bin/env bash
# tests/kv/redis_benchmark_test.sh KV_SERVER — redis-benchmark's default test list against
# three kv_server replicas (issue 33 item 3): `redis-benchmark -q` with no -t, once against the
# leader and once through a follower (writes forwarded), small -n. Every test of the list must
# report a rate (an error reply, e.g. `ERR unknown command 'LPUSH'`, stops redis-benchmark or
# leaves a test without one), and afterwards the replicas' digests must be equal and the
# collections the benchmark wrote must be there with their types. A functional check, not a
# measurement: the rates are printed, never compared. About 10 s.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli or redis-benchmark).
set -euo pipefail

server="${1:?usage: redis_benchmark_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
for tool in redis-cli redis-benchmark; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipped: $tool is not installed"
        exit 77
    fi
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

started=$SECONDS
say "starting 3 replicas in $work"
for id in 1 2 3; do start "$id"; done
leader=$(wait_leader 1 2 3)
follower=$((leader % 3 + 1))

# The tests of redis-benchmark's default list (redis 7.0), as its --csv output names them.
expected=(PING_INLINE PING_MBULK SET GET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN
    "LPUSH (needed to benchmark LRANGE)" "LRANGE_100 (first 100 elements)"
    "LRANGE_300 (first 300 elements)"
    "LRANGE_500 (first 500 elements)" "LRANGE_600 (first 600 elements)" "MSET (10 keys)")

# run_default ID WHAT: the default list against replica ID; every expected test has a rate.
run_default() {
    local id="$1" what="$2" out="$work/benchmark-$1.csv" name rate
    say "redis-benchmark's default list against the $what (replica $id)"
    timeout 120 redis-benchmark -p "${client_port[$id]}" -n 2000 -c 10 --csv \
        >"$out" 2>"$work/benchmark-$id.err" ||
        fail "redis-benchmark against the $what exited non-zero: $(tail -c 300 "$work/benchmark-$id.err")"
    if grep -qi "error" "$out" "$work/benchmark-$id.err"; then
        fail "redis-benchmark against the $what saw an error: $(grep -hi -m 3 error "$out" "$work/benchmark-$id.err")"
    fi
    for name in "${expected[@]}"; do
        rate=$(awk -F'","' -v n="\"$name" '$1 == n { print $2 }' "$out")
        [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?$ ]] && [[ "$rate" != 0 && "$rate" != 0.00 ]] ||
            fail "the $what: no rate for '$name' in redis-benchmark's output: $(head -c 600 "$out")"
        printf '  %-36s %s requests/s\n' "$name" "$rate"
    done
}

run_default "$leader" leader
run_default "$follower" follower

# What the list wrote: redis-benchmark's keys (key:__rand_int__ → "key:000000000000" with no -r).
expect "TYPE of the benchmark's list" list "$(cli "$leader" TYPE mylist | tr -d '\r')"
expect "TYPE of the benchmark's hash" hash "$(cli "$leader" TYPE myhash | tr -d '\r')"
expect "TYPE of the benchmark's string" string "$(cli "$leader" TYPE key:__rand_int__ | tr -d '\r')"
length=$(cli "$leader" LLEN mylist | tr -d '\r')
((length >= 600)) || fail "LLEN mylist is $length after the LPUSHes for LRANGE_600"
expect "LRANGE mylist 0 599's length" 600 "$(cli "$leader" LRANGE mylist 0 599 | wc -l)"
digests_equal_within 1 2 3
say "redis-benchmark default list test passed: $((SECONDS - started)) s"
