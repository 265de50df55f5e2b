#!/usr/bin/env bash
# tests/kv/group_restart_test.sh KV_SERVER — every replica restarts after a reconfiguration
# and a compaction (issue 34, "closing the class"; defect 1's second form). Three kv_server
# replicas with --snapshot-every 100; 99 acknowledged writes; a fourth replica started with
# --new-member and added by ZRECONFIG ADD: the change is the 100th transaction, so every
# replica compacts with a system transaction as the last one applied (replicas started
# together compact at the same zxid). 50 more writes, then every replica is killed
# (SIGKILL) and restarted from its files: all four must be established within 20 s, with
# every acknowledged write, one configuration version and one digest; and again after 250
# more writes (two more compactions past the reconfiguration) and a second full restart.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli).
set -euo pipefail

server="${1:?usage: group_restart_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "skipped: redis-cli is not installed"
    exit 77
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

every=100
started=$SECONDS
ports_for 4
say "starting 3 replicas in $work (--snapshot-every $every)"
for id in 1 2 3; do start "$id" --snapshot-every "$every"; done
leader=$(wait_leader 1 2 3)
write_acked "$leader" $((every - 1)) first- "$work/acked-first"
expect "acknowledged writes before the change" $((every - 1)) "$(wc -l <"$work/acked-first")"

say "adding replica 4 (--new-member) by ZRECONFIG ADD through $leader: transaction $every"
start_new 4 "$peers,4=$(address 4)" --snapshot-every "$every"
established_within 4 20 "joiner 4"
version=$(reconfig "$leader" ADD 4 "$(address 4)")
versions_equal_within "$version" 1 2 3 4
peers="$peers,4=$(address 4)"
write_acked "$leader" 50 second- "$work/acked-second"
cat "$work/acked-first" "$work/acked-second" >"$work/acked-all"

# restart_all WHAT: every replica killed, then all started again from their files.
restart_all() {
    local id
    say "$1: killing and restarting every replica"
    for id in 1 2 3 4; do stop "$id"; done
    for id in 1 2 3 4; do start "$id" --snapshot-every "$every"; done
    for id in 1 2 3 4; do established_within "$id" 20 "replica $id ($1)"; done
    leader=$(wait_leader 1 2 3 4)
    versions_equal_within "$version" 1 2 3 4
    for id in 1 2 3 4; do values_on "$id" "$work/acked-all" "$1"; done
    digests_equal_within 1 2 3 4
}
restart_all "after the compaction at the reconfiguration"

write_acked "$leader" $((every * 5 / 2)) third- "$work/acked-third"
cat "$work/acked-third" >>"$work/acked-all"
restart_all "after two more compactions"
say "group restart test passed: $(wc -l <"$work/acked-all") acknowledged writes on 4 replicas," \
    "configuration $version, $((SECONDS - started)) s"
