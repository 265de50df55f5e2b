#!/usr/bin/env bash
# tests/kv/corruption_test.sh KV_SERVER — a log damaged on a majority of replicas never
# elects a leader from the damaged histories, and the recovery docs/operating.md documents loses
# no acknowledged write (issue 15, defect 3). Three kv_server replicas on 127.0.0.1.
#
# For each kind of damage — a flipped byte in the payload of the middle record of a segment
# (500 records were written after it, each naming a synced offset past it: not a torn
# tail), a flipped byte in that segment's header (records after it name synced offsets
# past 0), and the newest segment truncated to half its records (what a file system or disk
# that loses a synced tail leaves: the records that would prove the cut data synced are
# gone, and only the synced watermark, DATA/synced, says the log reached further; issue 34,
# defect 10) — on fresh directories:
#   1. 1,000 writes, one after another, through the leader; the acknowledged ones (+OK)
#      are kept. After the first 500 every replica is stopped and its directory copied (the
#      backup), then restarted. All three reach the same digest.
#   2. Every replica is killed (SIGKILL: a crash; every acknowledged write had been fsynced
#      by a quorum, and here by all three, before its +OK), then one byte is flipped (or the
#      segment truncated) on two of the three: the leader and a follower for the record and
#      truncated kinds, both followers for the header kind.
#   3. All three restarted with --on-corruption refuse (the default): the damaged ones exit 1
#      naming the segment file and the offset (the damaged record's, or 0 for the header;
#      for the truncation the length the watermark vouched for and the file's length);
#      the intact one is never established and logs why (the stalled-election warning:
#      nobody else heard from).
#   4. The damaged ones restarted with --on-corruption resync: they move their files to
#      DATA/damaged-1/ and come up empty as non-voters; still no leader (one voter is not a
#      quorum), and the intact one says so (two voters voting for nobody).
#   5. Recovery: every replica stopped; a copy of the intact replica's directory is refused
#      by a damaged one (it belongs to another replica: identity and segment headers); each
#      damaged directory is restored from its backup (500 writes behind), and started one at
#      a time after the intact replica, each established before the next starts (two
#      restored replicas started together could elect their older history without it, and
#      truncate it). The intact one leads; every acknowledged write reads back (after ZSYNC)
#      on every replica; equal digests.
# Then the available case: one follower damaged (record kind) and restarted with
# --on-corruption resync while the other two run is synced: established, the leader's
# digest, every acknowledged write.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli). About 45 s.
set -euo pipefail

server="${1:?usage: corruption_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "skipped: redis-cli is not installed"
    exit 77
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

writes=1000
# How long "no leader" is watched. The replicas run with --tick-ms 20: Fast Leader
# Election resends its vote after 40 ms of silence, doubling (resends at 0.04, 0.12, 0.28,
# 0.6, 1.24, 2.52 s), a dropped peer connection is redialled within 0.5 s, and initLimit is
# 100 ticks = 2 s, when the stalled-election warning is due; three healthy replicas elect
# within a second here. 4 s: two initLimits, six resends.
no_leader_seconds=4

# --- the segment format (include/zab/storage/format.hpp) -----------------------------------
# A segment: a 64-byte header (u32 magic, u32 format version, ..., CRC32C of bytes [0, 60)
# at 60), then records: a 20-byte header (u32 CRC32C, u32 payload length, u64 zxid, u32 sync
# distance; little-endian) and the payload. Format version 1 (releases before issue 15: the
# test also runs against them) had 16-byte record headers, without the sync distance.
segment_header_bytes=64
record_header_bytes=20

segment_of() {  # segment_of DIR: the newest log segment of DIR, in $segment
    local found=("$1"/log.*)
    [[ -f "${found[-1]}" ]] || fail "no log segment in $1"
    segment=${found[-1]}
}

# content_end FILE: where a segment's content ends, to a multiple of 16 bytes: the log
# reserves room after its records (zeros, the file's length synced ahead of them).
content_end() {
    od -Ad -tu1 -w16 "$1" |
        awk '$1 != "*" { for (i = 2; i <= NF; i++) if ($i != 0) end = $1 + 16 } END { print end + 0 }'
}

# middle_record FILE: the middle record of a segment: $record_offset, $record_length, and
# $records_after (how many follow it).
middle_record() {
    local -a b offsets=() lengths=()
    mapfile -t b < <(head -c "$(content_end "$1")" "$1" | od -An -v -tu1 -w1)
    local offset=$segment_header_bytes length
    if ((b[4] == 1 && b[5] == 0 && b[6] == 0 && b[7] == 0)); then record_header_bytes=16; fi
    while ((offset + record_header_bytes <= ${#b[@]})); do
        length=$((b[offset + 4] | b[offset + 5] << 8 | b[offset + 6] << 16 | b[offset + 7] << 24))
        ((length == 0 && b[offset] == 0 && b[offset + 1] == 0)) && break  # reserved zeros
        offsets+=("$offset") lengths+=("$length")
        offset=$((offset + record_header_bytes + length))
    done
    ((${#offsets[@]} >= 3)) || fail "$1 holds ${#offsets[@]} records"
    local middle=$((${#offsets[@]} / 2))
    record_offset=${offsets[middle]} record_length=${lengths[middle]}
    records_after=$((${#offsets[@]} - middle - 1))
}

flip_byte() {  # flip_byte FILE OFFSET: inverts every bit of the byte at OFFSET
    local byte
    byte=$(od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' ')
    # shellcheck disable=SC2059  # the format is the byte's octal escape
    printf "\\$(printf '%03o' $((byte ^ 255)))" |
        dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# --- the synced watermark (format.hpp): DATA/synced, two 48-byte slots at 0 and 512 -------
# (u32 magic, u32 version, u64 sequence, u64 generation, u64 segment, u64 offset, u32
# window, u32 CRC32C; little-endian). The slot with the higher sequence is current.
u64_at() {  # u64_at FILE OFFSET: the little-endian u64 at OFFSET of FILE
    local -a b
    mapfile -t b < <(od -An -v -tu1 -w1 -j "$2" -N 8 "$1")
    echo $((b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24 | b[4] << 32 | b[5] << 40 |
        b[6] << 48 | b[7] << 56))
}
# watermark DIR: the current slot of DIR/synced: $mark_generation, $mark_segment, $mark_offset.
watermark() {
    local file="$1/synced" slot=0
    [[ -f "$file" ]] || fail "$file is missing"
    (($(u64_at "$file" 520) > $(u64_at "$file" 8))) && slot=512
    mark_generation=$(u64_at "$file" $((slot + 16)))
    mark_segment=$(u64_at "$file" $((slot + 24)))
    mark_offset=$(u64_at "$file" $((slot + 32)))
}

# damage ID KIND: flips one byte of replica ID's segment (or truncates it); what its
# refusal must say goes to refusal[ID], and the words that say it is not a torn tail to
# not_torn[ID].
declare -A refusal=() not_torn=()
damage() {
    segment_of "$work/replica-$1"
    not_torn[$1]="not a torn tail: corruption"
    if [[ "$2" == record ]]; then
        middle_record "$segment"
        flip_byte "$segment" $((record_offset + record_header_bytes + record_length / 2))
        refusal[$1]="$segment: offset $record_offset: record checksum mismatch"
    elif [[ "$2" == header ]]; then
        flip_byte "$segment" 32  # the base zxid's low byte: the header's CRC no longer matches
        refusal[$1]="$segment: offset 0: segment header: header checksum mismatch"
    else
        # Half of the records go: cut at half of where the content ends (the reserved
        # zeros after it go too), well inside the length the watermark vouches for.
        local size half
        size=$(stat -c %s "$segment")
        half=$(($(content_end "$segment") / 2))
        watermark "$work/replica-$1"
        expect "[$2] replica $1's watermark names the newest segment" \
            "$(basename "$segment")" "$(printf 'log.%016x' "$mark_segment")"
        expect "[$2] replica $1's watermark vouches for the file's length" "$size" "$mark_offset"
        ((half > segment_header_bytes)) || fail "[$2] $segment holds no records"
        truncate -s "$half" "$segment"
        refusal[$1]="$work/replica-$1/synced says segment $(basename "$segment") of generation"
        refusal[$1]+=" $(printf '%016x' "$mark_generation") had been synced at a length of"
        refusal[$1]+=" $mark_offset bytes, but the file is $half bytes long"
        not_torn[$1]="a synced tail was lost (the file system or the disk lost synced data;"
        not_torn[$1]+=" records in it may have been acknowledged), not a torn write"
    fi
    cp "$segment" "$work/damaged-segment-$1"
}

fresh() {  # fresh: nothing running, no data; the logs so far move to old/
    local id
    for id in 1 2 3; do stop "$id"; done
    mkdir -p "$work/old"
    for id in 1 2 3; do
        if [[ -e "$work/replica-$id.log" ]]; then
            mv "$work/replica-$id.log" "$work/old/$SECONDS-replica-$id.log"
        fi
    done
    rm -rf "$work"/replica-* "$work"/backup-* "$work"/damaged-segment-*
    mark_logs
}

# Steps 1 and 2: fresh replicas; half of $writes writes, a backup of every directory (all
# stopped for it: $work/backup-N; not with "nobackup"), the other half; their "key value"
# lines, all acknowledged, in $work/KIND.acked; all killed. $leader is the one that led last.
write_and_kill() {  # write_and_kill KIND [nobackup]
    local id half=$((writes / 2))
    fresh
    for id in 1 2 3; do start "$id"; done
    leader=$(wait_leader 1 2 3)
    write_acked "$leader" "$half" "$1-a" "$work/$1.acked"
    if [[ "${2:-}" != nobackup ]]; then
        digests_equal_within 1 2 3
        for id in 1 2 3; do
            stop "$id"
            cp -a "$work/replica-$id" "$work/backup-$id"
        done
        for id in 1 2 3; do start "$id"; done
        leader=$(wait_leader 1 2 3)
    fi
    write_acked "$leader" $((writes - half)) "$1-b" "$work/$1.acked-b"
    cat "$work/$1.acked-b" >>"$work/$1.acked"
    expect "[$1] writes acknowledged" "$writes" "$(wc -l <"$work/$1.acked")"
    digests_equal_within 1 2 3
    for id in 1 2 3; do stop "$id"; done
    local backup=" ($half before the backup)"
    [[ "${2:-}" != nobackup ]] || backup=" (no backup)"
    say "[$1] $writes writes acknowledged$backup," \
        "last leader $leader, digest $(sed -n 's/^digest://p' <<<"$digest"); all killed"
}

majority_damaged() {  # majority_damaged KIND (record | header | truncated)
    local kind=$1 id d records_after=
    write_and_kill "$kind"
    local -a damaged
    if [[ "$kind" != header ]]; then
        damaged=("$leader" $((leader % 3 + 1)))
    else
        damaged=($((leader % 3 + 1)) $(((leader + 1) % 3 + 1)))
    fi
    mapfile -t damaged < <(printf '%s\n' "${damaged[@]}" | sort -n)
    local intact=$((6 - damaged[0] - damaged[1]))
    for d in "${damaged[@]}"; do damage "$d" "$kind"; done
    local who="replicas ${damaged[0]} and ${damaged[1]}"
    say "[$kind] damaged $who (leader was $leader): ${refusal[${damaged[0]}]}" \
        "${records_after:+($records_after records after it)}"

    # 3. --on-corruption refuse: the damaged exit 1 naming file and offset; no leader.
    mark_logs
    for id in 1 2 3; do start "$id"; done
    no_leader_for "$no_leader_seconds" 1 2 3
    for d in "${damaged[@]}"; do
        exited_within "$d" 1
        expect "[$kind] exit status of damaged replica $d" 1 "$exit_status"
        logged "$d" "kv_server: cannot open the data directory $work/replica-$d: ${refusal[$d]}"
        logged "$d" "${not_torn[$d]}"
    done
    # The stalled-election warning comes at initLimit (2 s), 4 s, 8 s ... after the start.
    logged_within "$intact" 8 "voting for a candidate: $intact; voting for nobody (not synced since their data was wiped or found damaged): none; not heard from: ${damaged[0]}, ${damaged[1]}"
    say "[$kind] refused: $who exited 1; replica $intact unestablished for ${no_leader_seconds}+ s, and says why"

    # 4. --on-corruption resync: non-voters; still no leader. The intact one restarts after
    # them, so that its first stalled-election warning (at initLimit) sees them.
    stop "$intact"
    mark_logs
    for d in "${damaged[@]}"; do start "$d" --on-corruption resync; done
    for d in "${damaged[@]}"; do serving_within "$d" 10; done
    start "$intact"
    serving_within "$intact" 10
    no_leader_for "$no_leader_seconds" 1 2 3
    for d in "${damaged[@]}"; do
        logged "$d" "${refusal[$d]}"
        logged "$d" "moved to $work/replica-$d/damaged-1; joining as a non-voter until a leader syncs it"
        logged_within "$d" 8 "this replica itself votes for nobody until a leader syncs it"
        segment_of "$work/replica-$d/damaged-1"
        [[ -e "$work/replica-$d/damaged-1/identity" && -e "$work/replica-$d/damaged-1/epochs" ]] ||
            fail "[$kind] $work/replica-$d/damaged-1 lacks the identity or epochs file"
        cmp -s "$work/damaged-segment-$d" "$segment" ||
            fail "[$kind] $segment is not the segment damaged on replica $d"
    done
    logged_within "$intact" 8 "voting for a candidate: $intact; voting for nobody (not synced since their data was wiped or found damaged): ${damaged[0]}, ${damaged[1]}; not heard from: none"
    say "[$kind] resync: $who non-voters, files in damaged-1/; no leader for ${no_leader_seconds}+ s"

    # 5. The recovery. Another replica's directory is not a backup: it is refused.
    for id in 1 2 3; do stop "$id"; done
    if [[ "$kind" == record ]]; then
        mark_logs
        rm -rf "$work/replica-${damaged[0]}"
        cp -a "$work/replica-$intact" "$work/replica-${damaged[0]}"
        start "${damaged[0]}"
        exited_within "${damaged[0]}" 10
        expect "[$kind] exit status with replica $intact's directory" 1 "$exit_status"
        logged "${damaged[0]}" "belongs to cluster 27510 replica $intact, not to cluster 27510 replica ${damaged[0]}"
        say "[$kind] replica $intact's directory copied to replica ${damaged[0]}: refused (exit 1, another replica's)"
    fi
    # Each damaged directory restored from its backup (half the writes older), started one
    # at a time behind the intact replica: each election then has the intact history in it,
    # the newest, and the restored one is brought up to date from it.
    for d in "${damaged[@]}"; do
        rm -rf "$work/replica-$d"
        cp -a "$work/backup-$d" "$work/replica-$d"
    done
    start "$intact"
    for d in "${damaged[@]}"; do
        start "$d"
        established_within "$d" 20 "[$kind] restored replica $d"
    done
    leader=$(wait_leader 1 2 3)
    expect "[$kind] the leader after the recovery" "$intact" "$leader"
    for id in 1 2 3; do values_on "$id" "$work/$kind.acked" "[$kind] after the recovery"; done
    digests_equal_within 1 2 3
    say "[$kind] restored from backups, started one at a time behind replica $intact: it" \
        "leads; all $writes acknowledged writes on every replica; digests equal"
}

say "3 replicas in $work (client ports ${client_port[*]})"
majority_damaged record
majority_damaged header
majority_damaged truncated

# 6. One of three damaged: it resyncs from the leader while the other two run.
write_and_kill single nobackup
for id in 1 2 3; do start "$id"; done
leader=$(wait_leader 1 2 3)
follower=$((leader % 3 + 1))
stop "$follower"
damage "$follower" record
mark_logs
start "$follower" --on-corruption resync
established_within "$follower" 30 "the resynced replica $follower"
logged "$follower" "moved to $work/replica-$follower/damaged-1; joining as a non-voter"
digests_equal_within "$leader" "$follower"
values_on "$follower" "$work/single.acked" "[single] the resynced replica"
say "[single] replica $follower damaged, resynced from leader $leader: established, all $writes writes, digest equal"
echo "corruption test passed"
