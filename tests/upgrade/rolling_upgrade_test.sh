#!/usr/bin/env bash
# tests/upgrade/rolling_upgrade_test.sh NEW_KV_SERVER REPOSITORY BASELINE_COMMIT CACHE_DIR —
# a rolling upgrade under load (issue 36 item 3, docs/protocol.md §0.2).
#
# Builds the kv_server of BASELINE_COMMIT from REPOSITORY's history (build_baseline.sh,
# cached in CACHE_DIR) and starts three replicas of it with file logs (--snapshot-every 500,
# so each replica compacts several times on the way). Under a steady write load through all
# three (steady_writer.py: pipelined rounds of 8 SETs, so an upgraded follower forwards each
# round as one REQUESTS frame when its leader speaks protocol 0x10001), it replaces one
# replica at a time with NEW_KV_SERVER on the same data directory: the two followers first
# (stop, start the new build, wait until it is established), then the leader, transferred
# to an upgraded replica first (ZTRANSFER) and replaced last. After each step it checks what
# INFO says each replica speaks (zab_protocol, zab_leader_protocol) and that no replica
# logged a refused frame. At the end: every acknowledged write is read back on every replica
# (after ZSYNC), and their INFO DIGESTs are equal. Prints the unavailability of each step:
# the longest time between two acknowledged writes while it ran.
#
# Registered with ctest (label upgrade). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli or redis-py).
set -euo pipefail

new_server="${1:?usage: rolling_upgrade_test.sh NEW_KV_SERVER REPOSITORY BASELINE_COMMIT CACHE_DIR}"
repository="${2:?usage: rolling_upgrade_test.sh NEW_KV_SERVER REPOSITORY BASELINE_COMMIT CACHE_DIR}"
baseline="${3:?usage: rolling_upgrade_test.sh NEW_KV_SERVER REPOSITORY BASELINE_COMMIT CACHE_DIR}"
cache="${4:?usage: rolling_upgrade_test.sh NEW_KV_SERVER REPOSITORY BASELINE_COMMIT CACHE_DIR}"
[[ -x "$new_server" ]] || { echo "error: $new_server is not executable" >&2; exit 1; }
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "skipped: redis-cli is not installed"
    exit 77
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
server="$new_server"
# shellcheck source=tests/kv/cluster_lib.sh
source "$here/../kv/cluster_lib.sh"
python=$(redis_py_python)
[[ -n "$python" ]] || { echo "skipped: redis-py is not installed (Debian: python3-redis)"; exit 77; }
started=$SECONDS
echo "building the baseline kv_server ($baseline) into $cache"
old_server=$("$here/build_baseline.sh" "$repository" "$baseline" "$cache")
echo "baseline built or reused in $((SECONDS - started)) s: $old_server"


every=500
run() {  # run ID BINARY: starts replica ID with BINARY on its data directory
    server="$2"
    start "$1" --snapshot-every "$every"
}
for id in 1 2 3; do run "$id" "$old_server"; done
leader=$(wait_leader 1 2 3)
say "three replicas of $baseline; leader $leader"
for id in 1 2 3; do
    expect "replica $id's zab_protocol (the baseline reports none)" "" "$(info_field "$id" zab_protocol)"
done

acked="$work/acked"
stop_file="$work/stop-writer"
: >"$acked"
"$python" "$here/steady_writer.py" "${client_port[1]},${client_port[2]},${client_port[3]}" \
    "$acked" "$stop_file" 2>"$work/writer.log" &
writer=$!
trap 'touch "$stop_file"; wait "$writer" 2>/dev/null || true; cleanup' EXIT

# acked_count: acknowledged writes so far.
acked_count() { wc -l <"$acked"; }
# more_acked_within N SECONDS WHAT: at least N more acknowledged writes within SECONDS.
more_acked_within() {
    local target=$(($(acked_count) + $1)) deadline=$((SECONDS + $2))
    until (($(acked_count) >= target)); do
        ((SECONDS < deadline)) || fail "$3: fewer than $1 writes acknowledged in $2 s"
        sleep 0.2
    done
}
# longest_gap FROM_LINE: the longest time (ms) between consecutive acknowledgements after
# line FROM_LINE of the acknowledged writes.
longest_gap() {
    tail -n +"$(($1 + 1))" "$acked" | awk '{ if (NR > 1 && $3 - t > g) g = $3 - t; t = $3 }
                                          END { printf "%.0f", g * 1000 }'
}
no_refused_frames() {  # no_refused_frames WHAT: no replica logged a refused frame or version
    local id
    for id in 1 2 3; do
        if grep -qE "bad frame|refusing (leader|learner) .* protocol version" "$work/replica-$id.log"; then
            fail "$1: replica $id: $(grep -E "bad frame|protocol version" "$work/replica-$id.log" | head -n 1)"
        fi
    done
}

more_acked_within 2000 30 "the baseline group"
declare -a report=()
upgrade() {  # upgrade ID WHAT: replica ID stopped (SIGTERM) and started as the new build
    local id="$1" from
    from=$(acked_count)
    say "$2: replica $id stopped, started again as the new build"
    stop "$id" TERM
    run "$id" "$new_server"
    established_within "$id" 30 "replica $id (new build)"
    more_acked_within 2000 30 "after upgrading replica $id"
    expect "replica $id's zab_protocol" 0x10001 "$(info_field "$id" zab_protocol)"
    report+=("$2: replica $id, longest pause between acknowledged writes $(longest_gap "$from") ms")
    no_refused_frames "after upgrading replica $id"
}

leader=$(wait_leader 1 2 3)
old_leader=$leader
followers=()
for id in 1 2 3; do [[ "$id" == "$leader" ]] || followers+=("$id"); done
upgrade "${followers[0]}" "step 1 (a follower)"
# An upgraded follower of the baseline leader speaks the baseline's protocol with it.
expect "replica ${followers[0]}'s zab_leader_protocol (leader of the baseline)" 0x10000 \
    "$(info_field "${followers[0]}" zab_leader_protocol)"
upgrade "${followers[1]}" "step 2 (the other follower)"

from=$(acked_count)
say "step 3: leadership transferred from $old_leader to ${followers[0]}"
transferred=$(cli "$old_leader" ZTRANSFER "${followers[0]}" 2>&1 | tr -d '\r')
expect "ZTRANSFER ${followers[0]} through $old_leader" OK "$transferred"
leader=$(wait_leader 1 2 3)
expect "the leader after the transfer" "${followers[0]}" "$leader"
more_acked_within 2000 30 "after the transfer"
report+=("step 3 (transfer to an upgraded replica): longest pause $(longest_gap "$from") ms")
expect "replica ${followers[1]}'s zab_leader_protocol (an upgraded leader)" 0x10001 \
    "$(info_field "${followers[1]}" zab_leader_protocol)"
upgrade "$old_leader" "step 4 (the former leader)"
for id in "${followers[1]}" "$old_leader"; do
    expect "replica $id's zab_leader_protocol at the end" 0x10001 "$(info_field "$id" zab_leader_protocol)"
done
batches=0
for id in 1 2 3; do
    n=$(cli "$id" INFO 2>/dev/null | tr -d '\r' | sed -n 's/^forwarded_batches://p')
    batches=$((batches + ${n:-0}))
done
((batches > 0)) || fail "no upgraded follower forwarded a REQUESTS frame to the upgraded leader"
more_acked_within 2000 30 "the upgraded group"

touch "$stop_file"
wait "$writer" || fail "the writer failed: $(tail -n 3 "$work/writer.log")"
say "$(tail -n 1 "$work/writer.log")"
cut -d ' ' -f 1,2 "$acked" >"$work/acked-pairs"
for id in 1 2 3; do values_on "$id" "$work/acked-pairs" "after the upgrade"; done
digests_equal_within 1 2 3
no_refused_frames "at the end"
for line in "${report[@]}"; do echo "$line"; done
say "rolling upgrade passed: $(wc -l <"$work/acked-pairs") acknowledged writes, every one on" \
    "the three replicas, digests equal, $batches REQUESTS frames; $((SECONDS - started)) s"
