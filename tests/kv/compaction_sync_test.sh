#!/usr/bin/env bash
# tests/kv/compaction_sync_test.sh KV_SERVER — a sync that runs across the leader's
# compactions (issue 34 defect 2). Three kv_server replicas with --snapshot-every 1000; a
# follower is killed (SIGKILL); 3,000 acknowledged writes and 60,000 more of 1 KB values
# from redis-benchmark commit (sixty compactions); the follower restarts while another
# 60,000 run, and is paused for 1 s as soon as the leader syncs it, so that the leader
# compacts past the history its sync stream still has to send. The leader must stay healthy
# (INFO storage_failure none on every replica, never "storage failed" in its log, still the
# leader); the follower must be established within 30 s and end with every acknowledged
# write and the leader's digest. About 15 s.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli or redis-benchmark).
set -euo pipefail

server="${1:?usage: compaction_sync_test.sh PATH/TO/kv_server}"
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

every=1000
started=$SECONDS
say "starting 3 replicas in $work (--snapshot-every $every)"
for id in 1 2 3; do start "$id" --snapshot-every "$every"; done
leader=$(wait_leader 1 2 3)
follower=$((leader % 3 + 1))
say "leader $leader; killing follower $follower"
stop "$follower"

write_acked "$leader" 3000 acked- "$work/acked"
timeout 60 redis-benchmark -p "${client_port[$leader]}" -t set -n 60000 -r 50000 -d 1024 -c 8 -P 16 \
    -q >/dev/null || fail "redis-benchmark against the leader"

say "restarting follower $follower while 60,000 more writes run"
timeout 60 redis-benchmark -p "${client_port[$leader]}" -t set -n 60000 -r 50000 -d 1024 -c 4 -P 8 \
    -q >"$work/benchmark.out" 2>&1 &
benchmark=$!
mark_logs
start "$follower" --snapshot-every "$every"
restarted=$SECONDS
# Paused (SIGSTOP) for 1 s once the leader syncs it (INFO follower_<id>:serving=0), within
# the sync's bound (initLimit, 2 s at 20 ms ticks): the stream waits for its
# acknowledgements while the leader compacts several times, so the history it still has to
# send is below the leader's snapshot by the time the follower reads again — what a slow
# follower or network does by chance.
deadline=$((SECONDS + 20))
until cli "$leader" INFO 2>/dev/null | tr -d '\r' | grep -q "^follower_$follower:serving=0"; do
    ((SECONDS < deadline)) || fail "the leader did not start syncing replica $follower within 20 s"
    sleep 0.02
done
kill -STOP "${pids[$follower]}"
sleep 1
kill -CONT "${pids[$follower]}"
established_within "$follower" 30 "replica $follower (restarted during compactions)"
say "replica $follower established after $((SECONDS - restarted)) s"
benchmark_status=0
wait "$benchmark" || benchmark_status=$?

# The leader's health first: a leader stopped by its storage fails the benchmark too.
for id in 1 2 3; do
    failure=$(info_field "$id" storage_failure)
    [[ "$failure" == none ]] || fail "replica $id: storage_failure '$failure'" \
        "($(grep -m 2 -F -e "committed history" -e "storage failed" "$work/replica-$id.log" |
            tr '\n' ' '))"
done
if grep -F "storage failed" "$work/replica-$leader.log"; then
    fail "the leader's storage failed during the sync"
fi
((benchmark_status == 0)) ||
    fail "redis-benchmark during the restart: $(tail -c 300 "$work/benchmark.out")"
expect "the leader after the sync" "$leader" "$(wait_leader 1 2 3)"
set_within "$leader" last-key written "the last write"
caught_up_within "$follower" last-key written "replica $follower"
values_on "$follower" "$work/acked" "after its sync"
digests_equal_within 1 2 3
say "compaction sync test passed: $((SECONDS - started)) s"
