# shellcheck shell=bash
# tests/kv/cluster_lib.sh — what the kv_server shell tests share: three replicas on free
# loopback ports in a temporary directory, redis-cli helpers, leader discovery, checks.
# Source it after setting `server` (the kv_server binary), with `set -euo pipefail`:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"
#   for id in 1 2 3; do start "$id"; done
#   leader=$(wait_leader 1 2 3)
#
# Every replica started with `start` is killed on exit; on failure their logs are printed.
# Environment: KV_TEST_KEEP=1 keeps the temporary directory.

work="$(mktemp -d "${TMPDIR:-/tmp}/zab-kv-test.XXXXXX")"
declare -A pids=() client_port=() peer_port=()
failed=0

cleanup() {
    local id
    for id in "${!pids[@]}"; do
        kill -9 "${pids[$id]}" 2>/dev/null || true
        wait "${pids[$id]}" 2>/dev/null || true
    done
    if [[ "$failed" -ne 0 ]]; then
        local log
        for log in "$work"/*.log; do
            [[ -e "$log" ]] || continue
            echo "--- $(basename "$log" .log) log (last 20 lines) ---"
            tail -n 20 "$log"
        done
    fi
    if [[ "${KV_TEST_KEEP:-0}" == 1 ]]; then echo "kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

fail() {
    failed=1
    echo "FAILED: $*" >&2
    exit 1
}
say() { printf '[%s] %s\n' "$(date +%T)" "$*"; }

# A port nobody listens on (parallel ctest runs pick different random ones).
# Ports are drawn below the kernel's ephemeral range (ip_local_port_range, 32768 and up by
# default): a port in it may be taken as the local end of any outgoing connection between
# this check and the replica's bind. Each port is handed out once per test (listed in
# $work/ports: free_port runs in a subshell, $(free_port), so a variable would not keep them).
free_port() {
    local port low=10000 high=32767
    if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
        read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range
        ((ephemeral_low - 1 < high)) && high=$((ephemeral_low - 1))
    fi
    while :; do
        port=$((low + RANDOM % (high - low + 1)))
        grep -qx "$port" "$work/ports" 2>/dev/null && continue
        if ! (exec 9<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port" >>"$work/ports"
            echo "$port"
            return
        fi
    done
}

for id in 1 2 3; do
    peer_port[$id]=$(free_port)
    client_port[$id]=$(free_port)
done
peers="1=127.0.0.1:${peer_port[1]},2=127.0.0.1:${peer_port[2]},3=127.0.0.1:${peer_port[3]}"

start() {  # start ID [extra kv_server flags...]
    local id="$1"
    "$server" --id "$id" --peers "$peers" --client-port "${client_port[$id]}" \
        --data "$work/replica-$id" --tick-ms 20 "${@:2}" >>"$work/replica-$id.log" 2>&1 &
    pids[$id]=$!
}

# --- membership (tests that add replicas 4 and up) -------------------------------------------

ports_for() {  # ports_for ID...: peer and client ports for replicas beyond the first three
    local id
    for id in "$@"; do
        peer_port[$id]=$(free_port)
        client_port[$id]=$(free_port)
    done
}
address() { echo "127.0.0.1:${peer_port[$1]}"; }

# start_new ID PEERS [flags...]: a replica that is no member yet, joining (--new-member).
start_new() {
    local id="$1"
    "$server" --id "$id" --peers "$2" --new-member --client-port "${client_port[$id]}" \
        --data "$work/replica-$id" --tick-ms 20 "${@:3}" >>"$work/replica-$id.log" 2>&1 &
    pids[$id]=$!
}

# reconfig ID ARGS...: ZRECONFIG ARGS through replica ID until it answers +OK <version>
# (printed), retrying the definite refusals (no leader yet, another change in progress, a
# transfer) for 20 s; anything else fails the test.
reconfig() {
    local deadline=$((SECONDS + 20)) out
    while :; do
        out=$(cli "$1" ZRECONFIG "${@:2}" 2>&1 | tr -d '\r')
        if [[ "$out" =~ ^OK\ ([0-9]+)$ ]]; then
            echo "${BASH_REMATCH[1]}"
            return 0
        fi
        case "$out" in
            NOQUORUM* | BUSY* | TRYAGAIN*) ;;
            *) fail "ZRECONFIG ${*:2} through replica $1: $out" ;;
        esac
        ((SECONDS < deadline)) || fail "ZRECONFIG ${*:2} through replica $1: still '$out' after 20 s"
        sleep 0.2
    done
}

# versions_equal_within VERSION ID...: every listed replica's INFO config_version is VERSION
# (within 20 s).
versions_equal_within() {
    local deadline=$((SECONDS + 20)) id version="$1"
    shift
    for id in "$@"; do
        until [[ "$(info_field "$id" config_version)" == "$version" ]]; do
            ((SECONDS < deadline)) ||
                fail "replica $id: config_version $(info_field "$id" config_version), not $version"
            sleep 0.1
        done
    done
}

# redis_py_python: a python3 that imports redis-py, printed (nothing if none): Debian's
# python3-redis is for Debian's python3, which need not be the first python3 on PATH.
redis_py_python() {
    local candidate
    for candidate in python3 /usr/bin/python3; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import redis' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
}

cli() {
    local id="$1"
    shift
    timeout 30 redis-cli -p "${client_port[$id]}" "$@"
}

info_field() { cli "$1" INFO 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"; }

# The id of the one replica that leads while every live replica follows it, else nothing.
leader_of() {
    local id leader="" role
    for id in "$@"; do
        [[ "$(info_field "$id" established)" == 1 ]] || return 0
        role=$(info_field "$id" replica_role)
        if [[ "$role" == leading ]]; then
            [[ -z "$leader" ]] || return 0
            leader="$id"
        fi
    done
    echo "$leader"
}

# wait_leader ID... — waits (20 s) until the listed replicas agree on one leader.
wait_leader() {
    local deadline=$((SECONDS + 20)) leader
    while ((SECONDS < deadline)); do
        leader=$(leader_of "$@")
        if [[ -n "$leader" ]]; then
            echo "$leader"
            return 0
        fi
        sleep 0.2
    done
    fail "no single established leader among replicas $* within 20 s"
}

expect() {  # expect WHAT EXPECTED ACTUAL
    [[ "$3" == "$2" ]] || fail "$1: expected '$2', got '$3'"
}

set_within() {  # set_within ID KEY VALUE WHAT: SET through ID until OK, within 20 s
    local deadline=$((SECONDS + 20))
    until [[ "$(cli "$1" SET "$2" "$3" 2>&1)" == OK ]]; do
        ((SECONDS < deadline)) || fail "$4 did not succeed within 20 s"
        sleep 0.2
    done
}

caught_up_within() {  # caught_up_within ID KEY VALUE WHAT: ZSYNC + GET on ID sees VALUE, within 30 s
    local deadline=$((SECONDS + 30))
    until [[ "$(printf 'ZSYNC\nGET %s\n' "$2" | cli "$1" 2>/dev/null)" == "OK"$'\n'"$3" ]]; do
        ((SECONDS < deadline)) || fail "$4 did not catch up within 30 s"
        sleep 0.3
    done
}


stop() {  # stop ID [SIGNAL]: signals replica ID (KILL unless told), if it runs, and reaps it
    [[ -v "pids[$1]" ]] || return 0
    kill -"${2:-KILL}" "${pids[$1]}" 2>/dev/null || true
    wait "${pids[$1]}" 2>/dev/null || true
    unset "pids[$1]"
}

# shellcheck disable=SC2034  # exit_status is the caller's
exited_within() {  # exited_within ID SECONDS: reaps replica ID once it exits; status in $exit_status
    local deadline=$((SECONDS + $2))
    while kill -0 "${pids[$1]}" 2>/dev/null; do
        ((SECONDS < deadline)) || fail "replica $1 still runs $2 s after its start"
        sleep 0.1
    done
    exit_status=0
    wait "${pids[$1]}" || exit_status=$?
    unset "pids[$1]"
}

established_within() {  # established_within ID SECONDS WHAT (fails at once if ID exited)
    local deadline=$((SECONDS + $2))
    until [[ "$(info_field "$1" established)" == 1 ]]; do
        if [[ -v "pids[$1]" ]] && ! kill -0 "${pids[$1]}" 2>/dev/null; then
            fail "$3 exited: $(tail -n 1 "$work/replica-$1.log")"
        fi
        ((SECONDS < deadline)) || fail "$3 not established within $2 s"
        sleep 0.2
    done
}

# no_leader_for SECONDS ID...: for at least SECONDS, no listed replica is ever established.
no_leader_for() {
    local deadline=$((SECONDS + $1 + 1)) id
    shift
    while ((SECONDS < deadline)); do
        for id in "$@"; do
            if [[ "$(info_field "$id" established)" == 1 ]]; then
                fail "replica $id is established ($(info_field "$id" replica_role), leader" \
                     "$(info_field "$id" leader)): a leader was elected"
            fi
        done
        sleep 0.2
    done
}

# digests_equal_within ID...: waits (30 s) until the listed replicas' INFO DIGEST (digest and
# the zxid it was taken at) are equal; the digest is left in $digest. Write nothing meanwhile.
# shellcheck disable=SC2034  # digest is the caller's
digests_equal_within() {
    local deadline=$((SECONDS + 30)) id first all
    while :; do
        first=$(cli "$1" INFO DIGEST 2>&1 | tr -d '\r')
        all=1
        for id in "${@:2}"; do
            [[ "$(cli "$id" INFO DIGEST 2>&1 | tr -d '\r')" == "$first" ]] || all=0
        done
        ((all)) && break
        ((SECONDS < deadline)) || fail "digests of replicas $* still differ after 30 s:$(
            for id in "$@"; do printf ' [%s: %s]' "$id" "$(cli "$id" INFO DIGEST 2>&1 |
                tr -d '\r' | tr '\n' ' ')"; done)"
        sleep 0.3
    done
    digest=$first
}

# write_acked ID N PREFIX FILE: N writes SET <PREFIX><i> <PREFIX>v<i>, one after another on
# one connection to ID; "key value" of each acknowledged one (+OK) goes to FILE.
write_acked() {
    local i
    for ((i = 1; i <= $2; i++)); do echo "SET $3$i $3v$i"; done >"$4.commands"
    cli "$1" <"$4.commands" >"$4.replies" 2>&1 || true
    [[ "$(wc -l <"$4.replies")" -eq "$2" ]] ||
        fail "$2 writes through replica $1: $(wc -l <"$4.replies") replies"
    paste -d ' ' "$4.commands" "$4.replies" | sed -n 's/^SET \([^ ]*\) \([^ ]*\) OK$/\1 \2/p' >"$4"
}

# values_on ID FILE WHAT: after a ZSYNC, ID reads back every "key value" line of FILE.
values_on() {
    local got wrong
    got=$({ echo ZSYNC; sed 's/ .*//; s/^/GET /' "$2"; } | cli "$1" 2>&1 || true)
    [[ "$got" == "OK"$'\n'"$(cut -d ' ' -f 2 "$2")" ]] && return 0
    wrong=$(paste -d ' ' "$2" <(echo "$got" | tail -n +2) |
        awk '$2 != $3 { if (!n++) first = $1 " = \"" $3 "\" (expected " $2 ")" }
             END { print n + 0 " of " NR " keys wrong, first " first }')
    fail "$3: replica $1 (ZSYNC: $(echo "$got" | head -n 1)): $wrong"
}

serving_within() {  # serving_within ID SECONDS: ID answers PING
    local deadline=$((SECONDS + $2))
    until [[ "$(cli "$1" PING 2>/dev/null)" == PONG ]]; do
        ((SECONDS < deadline)) || fail "replica $1 does not answer PING within $2 s"
        sleep 0.1
    done
}

# mark_logs; logged ID TEXT: TEXT (a fixed string) is in replica ID's log since mark_logs.
declare -A log_mark=()
mark_logs() {
    local id
    for id in "${!client_port[@]}"; do
        log_mark[$id]=0
        if [[ -e "$work/replica-$id.log" ]]; then log_mark[$id]=$(wc -l <"$work/replica-$id.log"); fi
    done
}
logged() {
    tail -n +$((${log_mark[$1]:-0} + 1)) "$work/replica-$1.log" 2>/dev/null | grep -qF -- "$2" ||
        fail "replica $1 did not log '$2'"
}
logged_within() {  # logged_within ID SECONDS TEXT: as logged, waiting up to SECONDS for it
    local deadline=$((SECONDS + $2))
    until tail -n +$((${log_mark[$1]:-0} + 1)) "$work/replica-$1.log" 2>/dev/null |
        grep -qF -- "$3"; do
        ((SECONDS < deadline)) || fail "replica $1 did not log '$3' within $2 s"
        sleep 0.2
    done
}

# npm_clients CACHE_DIR: node-redis (npm `redis`) and ioredis installed with npm into
# CACHE_DIR once (a re-run reuses them; the tests that use them hold one lock, so never two
# at once); exits 77 (skipped) when npm cannot install them (no registry access).
npm_clients() {
    local cache="$1" staging stamp
    # The versions the issue was reported with (ioredis: its current major).
    local packages=(redis@6.3.1 ioredis@6.0.0)
    stamp="$cache/installed-${packages[*]// /_}"
    [[ -e "$stamp" ]] && return 0
    staging="$(mktemp -d "${TMPDIR:-/tmp}/zab-kv-npm.XXXXXX")"
    if ! timeout 120 npm install --prefix "$staging" --no-audit --no-fund --no-save \
        "${packages[@]}" >"$staging/npm.log" 2>&1; then
        echo "skipped: npm could not install ${packages[*]} (no registry access?):"
        tail -n 5 "$staging/npm.log"
        rm -rf "$staging"
        exit 77
    fi
    rm -rf "$cache"
    mkdir -p "$(dirname "$cache")"
    mv "$staging" "$cache"
    touch "$stamp"
}
