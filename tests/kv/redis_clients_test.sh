#!/usr/bin/env bash
# tests/kv/redis_clients_test.sh KV_SERVER CACHE_DIR — kv_server with the two most used
# Node.js Redis clients (issue 22): node-redis (npm `redis`) and ioredis, each with its
# default options, against three replicas started with --client-addresses. The node script
# (redis_clients.js) connects, runs the string and key commands, the collections through each
# client's own methods (hashes, lists, sets, sorted sets, TYPE, WRONGTYPE as the client's
# error class, MULTI/EXEC over them; node-redis on its default RESP3 connection and on a
# RESP2 one, as kv_server sends the collections' replies in RESP2's shapes), a 10,000-command pipeline
# through a follower, MULTI/EXEC (an aborted block applies nothing, a WATCHed key changed
# makes EXEC answer null), expiry, and kills the leader while writing through a follower:
# every acknowledged write must read back afterwards, and a key due after the kill is removed
# by the new leader (its TICK) alike on both survivors.
#
# The clients are installed with npm into CACHE_DIR (under the build directory) once; a
# re-run reuses them. Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed;
# 77: skipped (no node, npm or redis-cli, or npm cannot reach its registry).
set -euo pipefail

server="${1:?usage: redis_clients_test.sh PATH/TO/kv_server CACHE_DIR}"
cache="${2:?usage: redis_clients_test.sh PATH/TO/kv_server CACHE_DIR}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
for tool in node npm redis-cli; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipped: $tool is not installed"
        exit 77
    fi
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"
npm_clients "$cache"
addresses="1=127.0.0.1:${client_port[1]},2=127.0.0.1:${client_port[2]},3=127.0.0.1:${client_port[3]}"
say "starting 3 replicas in $work (client ports ${client_port[*]})"
for id in 1 2 3; do start "$id" --client-addresses "$addresses"; done
leader=$(wait_leader 1 2 3)
say "leader $leader"

NODE_PATH="$cache/node_modules" timeout 90 node "$here/redis_clients.js" \
    --ports "${client_port[1]},${client_port[2]},${client_port[3]}" \
    --leader "$leader" --leader-pid "${pids[$leader]}" || fail "the client script"
say "passed"
