#!/usr/bin/env bash
# tests/kv/sentinel_clients_test.sh KV_SERVER CLIENT [CACHE_DIR] — a Redis client's own
# Sentinel support against three kv_server replicas started with --client-addresses (issue 33
# items 1 and 2). CLIENT is one of:
#   redis-py    Debian's python3-redis (redis_py_clients.py). First INFO: on the leader, a
#               follower, and a fourth replica while joining (--new-member, before its
#               ZRECONFIG ADD commits), as an observer once added, and once removed, each
#               parsed by redis-py's parser (INFO and INFO all, every section alone) and
#               every line checked against Redis's format. The collections through
#               redis-py's own methods (hashes, lists, sets, sorted sets, TYPE, WRONGTYPE,
#               MULTI/EXEC), read back through a follower. Then redis-py's Sentinel.
#   ioredis     ioredis's `sentinels` option (sentinel_clients.js), its own INFO parser too.
#   node-redis  node-redis's createSentinel (sentinel_clients.js), its ROLE parser too.
# With each: the master discovered through SENTINEL on the replicas' client ports, 200 writes
# through it, the leader killed (kill -9), writes go on through the client's own discovery
# (a refused or lost write is retried by the test, as an application must); the time until
# writes resumed is printed, and every acknowledged write must be on both survivors.
#
# The npm clients are installed into CACHE_DIR once (cluster_lib.sh, npm_clients). Registered
# with ctest (label kv-cluster), one test per client. Exit 0: passed; 1: failed; 77: skipped
# (the client, node, npm or redis-cli missing, or npm cannot reach its registry).
set -euo pipefail

server="${1:?usage: sentinel_clients_test.sh PATH/TO/kv_server redis-py|ioredis|node-redis [CACHE_DIR]}"
client="${2:?usage: sentinel_clients_test.sh PATH/TO/kv_server redis-py|ioredis|node-redis [CACHE_DIR]}"
cache="${3:-}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v redis-cli >/dev/null 2>&1 || { echo "skipped: redis-cli is not installed"; exit 77; }
# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

case "$client" in
    redis-py)
        python=$(redis_py_python)
        [[ -n "$python" ]] || { echo "skipped: redis-py is not installed (Debian: python3-redis)"; exit 77; }
        ;;
    ioredis | node-redis)
        [[ -n "$cache" ]] || { echo "error: $client needs CACHE_DIR" >&2; exit 1; }
        for tool in node npm; do
            command -v "$tool" >/dev/null 2>&1 || { echo "skipped: $tool is not installed"; exit 77; }
        done
        ;;
    *) echo "error: unknown client '$client' (redis-py, ioredis or node-redis)" >&2; exit 1 ;;
esac

[[ "$client" == redis-py ]] || npm_clients "$cache"
addresses="1=127.0.0.1:${client_port[1]},2=127.0.0.1:${client_port[2]},3=127.0.0.1:${client_port[3]}"
say "starting 3 replicas in $work (client ports ${client_port[*]})"
for id in 1 2 3; do start "$id" --client-addresses "$addresses"; done
leader=$(wait_leader 1 2 3)
follower=$((leader % 3 + 1))
say "leader $leader"
set_within "$leader" before:kill 1 "a first write"

if [[ "$client" == redis-py ]]; then
    check_info() {  # check_info ID NAME KEY=VALUE...
        timeout 30 "$python" "$here/redis_py_clients.py" info "${client_port[$1]}" "$2" "${@:3}" ||
            fail "INFO of $2"
    }
    check_info "$leader" leader role=master replica_role=leading established=1 \
        connected_slaves=2 sentinel_masters=1
    check_info "$follower" follower role=slave replica_role=following master_link_status=up \
        "master_port=${client_port[$leader]}" joining=0
    say "replica 4 joins (--new-member), is added as an observer, then removed"
    ports_for 4
    start_new 4 "$peers,4=$(address 4)"
    established_within 4 20 "joiner 4"
    check_info 4 "joining replica" joining=1 role=slave removed=0
    version=$(reconfig "$leader" ADD 4 "$(address 4)" OBSERVER CLIENT "127.0.0.1:${client_port[4]}")
    versions_equal_within "$version" 1 2 3 4
    established_within 4 20 "observer 4"
    check_info 4 observer joining=0 replica_role=observing role=slave master_link_status=up
    check_info "$leader" "leader with an observer" member_count=4 voters=3
    version=$(reconfig "$leader" REMOVE 4)
    versions_equal_within "$version" 1 2 3
    deadline=$((SECONDS + 20))
    until [[ "$(info_field 4 removed)" == 1 ]]; do
        ((SECONDS < deadline)) || fail "replica 4 does not say removed:1 within 20 s"
        sleep 0.2
    done
    check_info 4 "removed replica" removed=1 role=slave sentinel_masters=0
    stop 4
    say "redis-py: collections on the leader, read back through follower $follower"
    timeout 30 "$python" "$here/redis_py_clients.py" collections "${client_port[$leader]}" \
        "${client_port[$follower]}" || fail "redis-py's collection commands"
    say "redis-py Sentinel through a leader kill"
    timeout 90 "$python" "$here/redis_py_clients.py" sentinel \
        --ports "${client_port[1]},${client_port[2]},${client_port[3]}" \
        --pids "${pids[1]},${pids[2]},${pids[3]}" || fail "redis-py Sentinel"
else
    say "$client through a leader kill"
    NODE_PATH="$cache/node_modules" timeout 90 node "$here/sentinel_clients.js" --client "$client" \
        --ports "${client_port[1]},${client_port[2]},${client_port[3]}" \
        --pids "${pids[1]},${pids[2]},${pids[3]}" || fail "$client through SENTINEL"
fi
unset "pids[$leader]"  # killed by the client script
say "passed"
