#!/usr/bin/env bash
# benchmarks/leader_change_bench.sh KV_SERVER [TRIALS] — how long a client cannot write while
# the leader changes: by ZTRANSFER (docs/protocol.md §6.4), by kill -9 of the leader (its
# connections close at once: the followers start an election right away) and by SIGSTOP of
# the leader (a hung machine: its connections stay open, the followers notice its silence).
# Three kv_server replicas with file logs on loopback (tests/kv/cluster_lib.sh, --tick-ms 20:
# a dead leader is noticed after sync_limit, 50 ticks = 1 s). Each trial measures, from just
# before the change, the time until a SET through another replica is acknowledged again
# (redis-cli in a loop: the resolution is one redis-cli run, a few ms). The killed replica
# restarts and catches up before the next trial. Prints each trial and the medians.
#
# A benchmark, not a test: it asserts nothing but that the cluster comes back.
set -euo pipefail

server="${1:?usage: leader_change_bench.sh PATH/TO/kv_server [TRIALS]}"
trials="${2:-10}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
command -v redis-cli >/dev/null 2>&1 || { echo "error: redis-cli is not installed" >&2; exit 1; }

# shellcheck source=tests/kv/cluster_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/kv/cluster_lib.sh"

now_us() { echo $(($(date +%s%N) / 1000)); }

# write_gap_from T0 ID: polls SET through replica ID until OK; prints microseconds since T0.
write_gap_from() {
    local t0="$1" id="$2" deadline=$((SECONDS + 60)) n=0
    while ((SECONDS < deadline)); do
        n=$((n + 1))
        if [[ "$(timeout 5 redis-cli -p "${client_port[$id]}" SET bench "v$n" 2>/dev/null)" == OK ]]; then
            echo $(($(now_us) - t0))
            return 0
        fi
    done
    fail "no write acknowledged through replica $id within 60 s"
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

for id in 1 2 3; do start "$id"; done
leader=$(wait_leader 1 2 3)
set_within "$leader" warm up "the first write"

transfer_gaps=() kill_gaps=() stop_gaps=()
for ((trial = 1; trial <= trials; trial++)); do
    leader=$(wait_leader 1 2 3)
    t0=$(now_us)
    reply=$(cli "$leader" ZTRANSFER ANY)
    [[ "$reply" == OK ]] || fail "ZTRANSFER at replica $leader: $reply"
    gap=$(write_gap_from "$t0" "$leader")
    transfer_gaps+=("$gap")
    say "transfer $trial: replica $leader handed over; writes back after $gap us"
done

for ((trial = 1; trial <= trials; trial++)); do
    leader=$(wait_leader 1 2 3)
    other=$((leader % 3 + 1))
    t0=$(now_us)
    kill -9 "${pids[$leader]}"
    wait "${pids[$leader]}" 2>/dev/null || true
    unset "pids[$leader]"
    gap=$(write_gap_from "$t0" "$other")
    kill_gaps+=("$gap")
    say "kill -9 $trial: replica $leader killed; writes back after $gap us"
    start "$leader"
    caught_up_within "$leader" bench "$(cli "$other" GET bench)" "the restarted replica $leader"
done

for ((trial = 1; trial <= trials; trial++)); do
    leader=$(wait_leader 1 2 3)
    other=$((leader % 3 + 1))
    t0=$(now_us)
    kill -STOP "${pids[$leader]}"
    gap=$(write_gap_from "$t0" "$other")
    stop_gaps+=("$gap")
    say "SIGSTOP $trial: replica $leader paused; writes back after $gap us"
    kill -CONT "${pids[$leader]}"
    caught_up_within "$leader" bench "$(cli "$other" GET bench)" "the resumed replica $leader"
done

t=$(printf '%s\n' "${transfer_gaps[@]}" | median)
k=$(printf '%s\n' "${kill_gaps[@]}" | median)
p=$(printf '%s\n' "${stop_gaps[@]}" | median)
echo "leader change, $trials trials each, 3 replicas, --tick-ms 20: write unavailability" \
    "median ${t} us by ZTRANSFER, ${k} us by kill -9 of the leader, ${p} us by SIGSTOP of the leader"
