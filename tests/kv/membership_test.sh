#!/usr/bin/env bash
# tests/kv/membership_test.sh KV_SERVER — membership change with real processes (issue 18
# items 7 and 8, docs/operating.md). Three kv_server replicas; writes; grown
# to five (two replicas started with --new-member, each added by ZRECONFIG ADD through the
# leader); writes through a new member; an original voter, the leader, killed (SIGKILL) and
# removed by ZRECONFIG REMOVE; writes; a machine replaced: a new replica (id 6) added, and an
# old one removed — it says so in INFO and refuses writes, and is stopped. At the end every
# acknowledged write reads back on every remaining replica, and they agree on the
# configuration version and the state's digest.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli).
set -euo pipefail

server="${1:?usage: membership_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "skipped: redis-cli is not installed"
    exit 77
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

ports_for 4 5 6

started=$SECONDS
say "starting 3 replicas in $work"
for id in 1 2 3; do start "$id"; done
leader=$(wait_leader 1 2 3)
expect "config_version at the start" 0 "$(info_field "$leader" config_version)"
write_acked "$leader" 50 three- "$work/acked-three"

say "growing 3 -> 5: replicas 4 and 5 start with --new-member, ZRECONFIG ADD through $leader"
start_new 4 "$peers,4=$(address 4)"
start_new 5 "$peers,5=$(address 5)"  # not told of 4 (not a member yet): learns it once added
established_within 4 20 "joiner 4"
established_within 5 20 "joiner 5"
expect "replica 4 joining" 1 "$(info_field 4 joining)"
version=$(reconfig "$leader" ADD 4 "$(address 4)")
version=$(reconfig "$leader" ADD 5 "$(address 5)")
versions_equal_within "$version" 1 2 3 4 5
for id in 1 2 3 4 5; do
    expect "member $id after growing" "type=voter,peer_host=127.0.0.1,peer_port=${peer_port[$id]}" \
        "$(info_field 5 "member_$id" | cut -d , -f 1-3)"
done
expect "replica 4 joining once added" 0 "$(info_field 4 joining)"
write_acked 4 50 five- "$work/acked-five"

victim=$leader
say "killing the leader, replica $victim (an original voter), and removing it"
stop "$victim"
remaining=()
for id in 1 2 3 4 5; do [[ "$id" == "$victim" ]] || remaining+=("$id"); done
version=$(reconfig 4 REMOVE "$victim")
leader=$(wait_leader "${remaining[@]}")
versions_equal_within "$version" "${remaining[@]}"
expect "member count after the removal" 4 "$(info_field 4 member_count)"
write_acked 5 50 four- "$work/acked-four"

# Replace a machine: the lowest original voter still running gives way to a new replica 6.
for id in 1 2 3; do [[ "$id" == "$victim" ]] || { old=$id; break; }; done
say "replacing replica $old by replica 6 (leader $leader)"
members=""
for id in "${remaining[@]}" 6; do members+="${members:+,}$id=$(address "$id")"; done
start_new 6 "$members"  # the current members, and itself
established_within 6 20 "joiner 6"
version=$(reconfig 6 ADD 6 "$(address 6)")
version=$(reconfig 6 REMOVE "$old")
survivors=()
for id in "${remaining[@]}" 6; do [[ "$id" == "$old" ]] || survivors+=("$id"); done
versions_equal_within "$version" "${survivors[@]}"
deadline=$((SECONDS + 20))
until [[ "$(info_field "$old" removed)" == 1 ]]; do
    ((SECONDS < deadline)) || fail "replica $old does not say it was removed"
    sleep 0.1
done
refused=$(cli "$old" SET after-removal x 2>&1 || true)
[[ "$refused" == REMOVED* ]] || fail "a write to removed replica $old: '$refused'"
stop "$old" TERM
leader=$(wait_leader "${survivors[@]}")
write_acked 6 50 replaced- "$work/acked-replaced"

say "checking every acknowledged write on replicas ${survivors[*]} (leader $leader)"
cat "$work"/acked-{three,five,four,replaced} >"$work/acked-all"
acked=$(wc -l <"$work/acked-all")
((acked >= 150)) || fail "only $acked of 200 writes were acknowledged"
for id in "${survivors[@]}"; do values_on "$id" "$work/acked-all" "after the changes"; done
versions_equal_within "$version" "${survivors[@]}"
expect "members at the end" 4 "$(info_field "${survivors[0]}" member_count)"
for id in "${survivors[@]}"; do expect "replica $id removed" 0 "$(info_field "$id" removed)"; done
digests_equal_within "${survivors[@]}"
say "membership test passed: $acked acknowledged writes on 4 replicas, configuration $version, $((SECONDS - started)) s"
