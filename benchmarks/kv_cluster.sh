# shellcheck shell=bash
# benchmarks/kv_cluster.sh — what the kv_server benchmarks share. Source it after setting
# `build` (where examples/kv_server was built):
#
#   kv_setup NAME TOOL...        checks kv_server and the tools, makes $work, cleans up at exit
#   kv_start_cluster file|memory three replicas on random loopback ports; sets $leader_port
#   kv_stop_all                  SIGTERM to everything started, and waits
#   kv_benchmark PORT ARGS...    one redis-benchmark run (100-byte values, CSV);
#                                prints "requests/s p50_ms p99_ms"
#   kv_benchmark_tail PORT ARGS... the same, and the maximum: "requests/s p50_ms p99_ms max_ms"
# Set before kv_start_cluster / kv_benchmark (kv_tls_bench.sh does): kv_server_flags, extra
# kv_server options ("{id}" in them becomes the replica's id), and kv_client_flags, extra
# redis-cli / redis-benchmark options (--tls --cacert F -a P), and kv_server_env, variables
# for kv_server's environment (LD_PRELOAD=…, as kv_alloc_bench.sh does).

kv_setup() {
    local name="$1" tool
    shift
    server="$build/examples/kv_server"
    [[ -x "$server" ]] || {
        echo "error: $server not built (cmake --build --preset release --target kv_server)" >&2
        exit 2
    }
    # The tools come from Debian's packages: installed here when missing (redis-cli and
    # redis-benchmark are redis-tools; any other tool is the package of its name).
    local -a packages=()
    for tool in redis-benchmark redis-cli "$@"; do
        command -v "$tool" >/dev/null && continue
        case "$tool" in
            redis-benchmark | redis-cli) packages+=(redis-tools) ;;
            *) packages+=("$tool") ;;
        esac
    done
    if ((${#packages[@]})); then
        # shellcheck source=scripts/lib.sh
        source "$root/scripts/lib.sh"
        zab_install_missing "${packages[@]}"
    fi
    for tool in redis-benchmark redis-cli "$@"; do
        command -v "$tool" >/dev/null || { echo "error: $tool missing" >&2; exit 2; }
    done
    work="$(mktemp -d "/tmp/zab-$name-XXXXXX")"
    pids=()
    kv_server_flags=()
    kv_client_flags=()
    kv_server_env=()
    base=$((20000 + RANDOM % 20000))
    peers="1=127.0.0.1:$((base + 1)),2=127.0.0.1:$((base + 2)),3=127.0.0.1:$((base + 3))"
    trap 'kv_stop_all; rm -rf "$work"' EXIT
}

kv_stop_all() {
    local pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}

kv_start_cluster() {
    local mode="$1" id storage=()
    for id in 1 2 3; do
        if [[ "$mode" == memory ]]; then
            storage=(--memory)
        else
            mkdir -p "$work/$mode-$id"
            storage=(--data "$work/$mode-$id")
        fi
        env "${kv_server_env[@]}" "$server" --id "$id" --peers "$peers" --client-port $((base + 10 + id)) \
            "${storage[@]}" "${kv_server_flags[@]//\{id\}/$id}" >"$work/$mode-$id.log" 2>&1 &
        pids+=($!)
    done
    # INFO on each replica until one says replica_role:leading.
    leader_port=""
    for _ in $(seq 1 100); do
        for id in 1 2 3; do
            if redis-cli "${kv_client_flags[@]}" -p $((base + 10 + id)) INFO 2>/dev/null |
                grep -q '^replica_role:leading'; then
                leader_port=$((base + 10 + id))
            fi
        done
        [[ -n "$leader_port" ]] && return 0
        sleep 0.1
    done
    echo "error: no leader elected ($mode); logs in $work" >&2
    exit 1
}

# redis-benchmark 7's CSV: test, rps, avg, min, p50, p95, p99, max.
kv_benchmark() {
    local port="$1"
    shift
    redis-benchmark "${kv_client_flags[@]}" -p "$port" -d 100 -r 100000 --csv -q "$@" 2>/dev/null |
        awk -F'","' 'NR == 2 { gsub(/"/, "", $2); gsub(/"/, "", $5); gsub(/"/, "", $7);
                               print $2, $5, $7 }'
}

kv_benchmark_tail() {
    local port="$1"
    shift
    redis-benchmark "${kv_client_flags[@]}" -p "$port" -d 100 -r 100000 --csv -q "$@" 2>/dev/null |
        awk -F'","' 'NR == 2 { gsub(/"/, "", $2); gsub(/"/, "", $5); gsub(/"/, "", $7);
                               gsub(/"/, "", $8); print $2, $5, $7, $8 }'
}
