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
# shellcheck source=benchmarks/kv_cluster.sh
source "$root/benchmarks/kv_cluster.sh"
kv_setup e2e-bench python3

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

printf '\n%-7s %11s %12s %9s %9s\n' log outstanding "writes/s" "p50 ms" "p99 ms"
for mode in file memory; do
    kv_start_cluster "$mode"
    for shape in "1 1" "16 1" "16 16" "64 64"; do
        read -r clients pipeline <<<"$shape"
        read -r rps p50 p99 <<<"$(kv_benchmark "$leader_port" -t set -c "$clients" \
            -P "$pipeline" -n "$requests")"
        printf '%-7s %11d %12s %9s %9s\n' "$mode" $((clients * pipeline)) "$rps" "$p50" "$p99"
    done
    kv_stop_all
done
