#!/usr/bin/env bash
# tests/kv/rejoin_test.sh KV_SERVER — a replica that missed more writes than a compaction
# rejoins (issue 15 defect 2). Three kv_server replicas on 127.0.0.1 with the default
# compaction (every 100,000 writes); a follower is killed (SIGKILL) while 190,000 writes
# commit through the leader, then restarted from its files. Its sync is a SNAP followed by
# the ~90,000 records after the leader's snapshot: 180,000 frames, past the 100,000-frame
# learner backlog it used to be dropped for, about 12 times a second, for good. It must be
# established again within 30 s, stay so, and end with the same state digest as the leader;
# the leader must never have dropped it for its backlog.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli or redis-benchmark).
set -euo pipefail

server="${1:?usage: rejoin_test.sh PATH/TO/kv_server}"
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

say "starting 3 replicas in $work (client ports ${client_port[*]})"
for id in 1 2 3; do start "$id"; done
leader=$(wait_leader 1 2 3)
follower=$((leader % 3 + 1))
say "leader $leader; killing follower $follower"
stop "$follower"

say "190,000 writes through the leader while $follower is down"
timeout 120 redis-benchmark -p "${client_port[$leader]}" -t set -n 190000 -r 100000 -c 8 -P 16 \
    -q >/dev/null || fail "redis-benchmark against the leader"
set_within "$leader" last-key written "the last write"

say "restarting $follower from its files"
start "$follower"
restarted=$SECONDS
established_within "$follower" 30 "replica $follower (restarted)"
say "replica $follower established after $((SECONDS - restarted)) s"
caught_up_within "$follower" last-key written "replica $follower"

# Digests compared at one zxid: write nothing more, and let every replica apply the last.
digests_equal_within "$leader" "$follower"
say "digests equal: $digest"
if grep -q "frames held" "$work/replica-$leader.log"; then
    fail "the leader dropped a learner for its backlog: $(grep -m1 'frames held' "$work/replica-$leader.log")"
fi
expect "replica $follower still established" 1 "$(info_field "$follower" established)"
echo "rejoin test passed"
