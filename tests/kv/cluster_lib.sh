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
free_port() {
    local port
    while :; do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 9<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
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
        role=$(info_field "$id" role)
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

