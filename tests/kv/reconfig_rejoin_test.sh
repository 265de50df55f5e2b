#!/usr/bin/env bash
# tests/kv/reconfig_rejoin_test.sh KV_SERVER — a replica restarted after a reconfiguration
# rejoins (issue 34 defect 1). Three kv_server replicas with the defaults; a follower is
# stopped (SIGTERM); 1,500 writes commit; a fourth replica starts with --new-member and is
# added by ZRECONFIG ADD (it commits: the last transaction the group applied is a system
# transaction, which the kv state machine does not model); the stopped follower restarts
# with the new member list. The leader syncs it (a SNAP, as it is far behind): it must become
# established within 20 s, read back every acknowledged write, agree on the configuration,
# and restart once more from its own files (the snapshot it stored must restore).
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli).
set -euo pipefail

server="${1:?usage: reconfig_rejoin_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "skipped: redis-cli is not installed"
    exit 77
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

started=$SECONDS
ports_for 4
say "starting 3 replicas in $work"
for id in 1 2 3; do start "$id"; done
leader=$(wait_leader 1 2 3)
follower=$((leader % 3 + 1))
say "leader $leader; stopping follower $follower"
stop "$follower" TERM

write_acked "$leader" 1500 before- "$work/acked-before"
[[ "$(wc -l <"$work/acked-before")" -eq 1500 ]] ||
    fail "only $(wc -l <"$work/acked-before") of 1,500 writes were acknowledged"

say "adding replica 4 (--new-member) by ZRECONFIG ADD through $leader"
start_new 4 "$peers,4=$(address 4)"
established_within 4 20 "joiner 4"
version=$(reconfig "$leader" ADD 4 "$(address 4)")
live=()
for id in 1 2 3; do [[ "$id" == "$follower" ]] || live+=("$id"); done
versions_equal_within "$version" "${live[@]}" 4

peers="$peers,4=$(address 4)"  # the member list from now on
say "restarting follower $follower (configuration version $version)"
mark_logs
start "$follower"
restarted=$SECONDS
established_within "$follower" 20 "replica $follower (restarted after the reconfiguration)"
say "replica $follower established after $((SECONDS - restarted)) s"
versions_equal_within "$version" "$follower"
values_on "$follower" "$work/acked-before" "after its restart"

write_acked "$leader" 50 after- "$work/acked-after"
cat "$work/acked-before" "$work/acked-after" >"$work/acked-all"
say "restarting follower $follower once more, from its own files"
stop "$follower" TERM
start "$follower"
established_within "$follower" 20 "replica $follower (restarted from its own files)"
for id in 1 2 3 4; do values_on "$id" "$work/acked-all" "at the end"; done
digests_equal_within 1 2 3 4
say "reconfig rejoin test passed: $(wc -l <"$work/acked-all") acknowledged writes on 4" \
    "replicas, configuration $version, $((SECONDS - started)) s"
