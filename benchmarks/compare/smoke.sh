#!/usr/bin/env bash
# benchmarks/compare/smoke.sh — the ctest smoke of zab_compare_load (not a measurement): one
# in-memory redis-server on a random loopback port; populate, then every operation for 0.3 s,
# then a command redis refuses (READMODE), which must fail with exit status 1.
#
#   benchmarks/compare/smoke.sh build/dev/benchmarks/zab_compare_load
#
# Exit 77 (ctest: skipped) when redis-server is not installed.
set -euo pipefail

tool="${1:?usage: smoke.sh ZAB_COMPARE_LOAD}"
if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis-server not installed: skipped"
    exit 77
fi
dir="$(mktemp -d "${TMPDIR:-/tmp}/zab-compare-smoke-XXXXXX")"
pid=""
cleanup() {
    if [[ -n "$pid" ]]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

answers_ping() {
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf 'PING\r\n' >&3
        IFS= read -r -t 1 reply <&3 && [[ "$reply" == +PONG* ]]
    ) 2>/dev/null
}

for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue  # in use
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
        --daemonize no >"$dir/redis.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 50); do
        answers_ping "$port" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    answers_ping "$port" && break
    wait "$pid" 2>/dev/null || true
    pid=""
done
[[ -n "$pid" ]] || { cat "$dir/redis.log"; echo "error: redis-server did not start"; exit 1; }

common=(--protocol resp --endpoints "127.0.0.1:$port" --keys 100)
"$tool" "${common[@]}" --op populate --outstanding 4
"$tool" "${common[@]}" --op write --outstanding 4 --warmup 0.1 --duration 0.3 \
    --server-pids "$pid" --header
"$tool" "${common[@]}" --op read --outstanding 16 --warmup 0.1 --duration 0.3 --server-pids "$pid"
"$tool" "${common[@]}" --op read-linearizable --resp-linearizable get --outstanding 1 \
    --warmup 0.1 --duration 0.3 --server-pids "$pid"
status=0
"$tool" "${common[@]}" --op read-linearizable --warmup 0.1 --duration 0.3 2>"$dir/err" || status=$?
if [[ $status -ne 1 ]] || ! grep -q "error reply" "$dir/err"; then
    cat "$dir/err"
    echo "error: READMODE against redis-server: exit status $status, expected 1 and an error reply"
    exit 1
fi
echo "ok: $(cat "$dir/err")"
