#!/usr/bin/env bash
# benchmarks/e2e_bench.sh — end to end on loopback: three kv_server processes (one zab replica
# each), 100-byte SETs sent to the leader with redis-benchmark, at 1, 16, 256 and 4096
# outstanding writes (clients × pipeline: 1×1, 16×1, 16×16, 64×64); once with file logs
# (fsync) and once with the in-memory log. In the same run, the two figures the latency is
# bounded by: the fsync latency of a 100-byte append with three fsync loops at once (the
# three replicas share one disk here) and the loopback round trip (a Python echo pair, so
# an upper bound).
#
# Usage: benchmarks/e2e_bench.sh [BUILD_DIR] [REQUESTS]
#   BUILD_DIR  where examples/kv_server was built (default: build/release)
#   REQUESTS   requests per redis-benchmark run (default: 50000)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
requests="${2:-50000}"
server="$build/examples/kv_server"
[[ -x "$server" ]] || { echo "error: $server not built (cmake --build --preset release --target kv_server)" >&2; exit 2; }
command -v redis-benchmark >/dev/null || { echo "error: redis-benchmark missing (apt-get install redis-tools)" >&2; exit 2; }

work="$(mktemp -d /tmp/zab-e2e-bench-XXXXXX)"
pids=()
stop_all() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

# --- the bounds: fsync latency (three loops at once) and the loopback round trip -----------
python3 - "$work" <<'EOF'
import os, socket, statistics, sys, threading, time
work = sys.argv[1]

def fsync_loop(path, out, n=300):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for _ in range(n):
        os.write(fd, b"x" * 100)
        t = time.perf_counter()
        os.fdatasync(fd)
        out.append(time.perf_counter() - t)
    os.close(fd)

samples = [[] for _ in range(3)]
threads = [threading.Thread(target=fsync_loop, args=(f"{work}/fsync-{i}", samples[i])) for i in range(3)]
for t in threads: t.start()
for t in threads: t.join()
every = sorted(s for loop in samples for s in loop)
print(f"fdatasync of a 100-byte append, 3 loops at once: p50 {statistics.median(every)*1e6:.0f} us, "
      f"p99 {every[int(len(every)*0.99)]*1e6:.0f} us")

server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
port = server.getsockname()[1]
def echo():
    c, _ = server.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(64)
        if not d: return
        c.sendall(d)
threading.Thread(target=echo, daemon=True).start()
client = socket.create_connection(("127.0.0.1", port)); client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range(3000):
    t = time.perf_counter(); client.sendall(b"p"); client.recv(64); rtts.append(time.perf_counter() - t)
rtts.sort()
print(f"loopback round trip (Python echo, an upper bound): p50 {statistics.median(rtts)*1e6:.0f} us")
EOF

base=$((20000 + RANDOM % 20000))
peers="1=127.0.0.1:$((base + 1)),2=127.0.0.1:$((base + 2)),3=127.0.0.1:$((base + 3))"

# start_cluster MODE (file|memory): three replicas; sets $leader_port.
start_cluster() {
    local mode="$1" id storage=()
    for id in 1 2 3; do
        if [[ "$mode" == memory ]]; then
            storage=(--memory)
        else
            mkdir -p "$work/$mode-$id"
            storage=(--data "$work/$mode-$id")
        fi
        "$server" --id "$id" --peers "$peers" --client-port $((base + 10 + id)) \
            "${storage[@]}" >"$work/$mode-$id.log" 2>&1 &
        pids+=($!)
    done
    leader_port=""
    for _ in $(seq 1 100); do
        for id in 1 2 3; do
            if redis-cli -p $((base + 10 + id)) INFO 2>/dev/null | grep -q '^role:leading'; then
                leader_port=$((base + 10 + id))
            fi
        done
        [[ -n "$leader_port" ]] && return 0
        sleep 0.1
    done
    echo "error: no leader elected ($mode); logs in $work" >&2
    exit 1
}

printf '\n%-7s %11s %12s %9s %9s\n' log outstanding "writes/s" "p50 ms" "p99 ms"
for mode in file memory; do
    start_cluster "$mode"
    for shape in "1 1" "16 1" "16 16" "64 64"; do
        read -r clients pipeline <<<"$shape"
        redis-benchmark -p "$leader_port" -t set -d 100 -c "$clients" -P "$pipeline" \
            -n "$requests" -r 100000 --csv -q 2>/dev/null |
            awk -F'","' -v mode="$mode" -v out=$((clients * pipeline)) 'NR == 2 {
                gsub(/"/, "", $2); gsub(/"/, "", $5); gsub(/"/, "", $7);
                printf "%-7s %11d %12s %9s %9s\n", mode, out, $2, $5, $7 }'
    done
    stop_all
done
