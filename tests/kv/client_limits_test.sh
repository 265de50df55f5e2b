#!/usr/bin/env bash
# tests/kv/client_limits_test.sh KV_SERVER — hostile clients against live kv_server processes
# on 127.0.0.1 (issues 16 and 34): one client must not take the process's memory, its
# descriptors, the CPU or the cluster's forwarding budget. Three replicas (replica 2 with
# --timeout 2, replica 3 with --max-clients 8, all with --max-input-bytes 40000000), a
# single-replica kv_server under `ulimit -v 800000` with --max-output-bytes 134217728, and
# one under `ulimit -n 32`; the clients are tests/kv/hostile_client.py:
# - 200 pipelined GETs of a 4 MB value, never read: RSS grows < 100 MB, PING still answered;
# - one MGET naming that value 2,000 times (14 KB): refused "reply too large", RSS < 100 MB;
# - 30 connections each sending one MGET of a 1 MiB value 60 times, never read (1.8 GB of
#   replies, unbounded, in 800 MB of address space): the biggest holders closed or the
#   replies refused, the replica alive and serving, never out of memory;
# - 10 connections each holding 16 MB of an unfinished value: some closed at the input cap,
#   RSS grows < 80 MB;
# - --max-clients 8: the 9th client gets "-ERR max number of clients reached";
# - at the descriptor limit the acceptor uses < 200 ms of CPU in 2 s (/proc/PID/stat) and
#   serves the waiting client once descriptors are free;
# - --timeout 2: an idle client is closed, an active one kept;
# - MULTI/EXEC in one pipeline: a block with a bad command applies nothing, a good one
#   all of it, on every replica;
# - 100,000 pipelined SETs through a follower: no -BUSY, and none for a bystander writing
#   through the other follower meanwhile;
# - 6 connections each pipelining 10,000 SETs through one follower (60,000 at once, past
#   the 1,000 the leader takes from one replica), and a bystander on the same follower: no
#   -BUSY for anyone.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed (the message says
# which check, and the replicas' logs are printed); 77: skipped (no redis-cli or python3).
set -euo pipefail

server="${1:?usage: client_limits_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
for tool in redis-cli python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipped: $tool is not installed"
        exit 77
    fi
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hostile() { timeout 60 python3 "$here/hostile_client.py" "$@" || fail "hostile_client.py $*"; }

# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

say "starting 3 replicas in $work (client ports ${client_port[*]})"
start 1 --max-input-bytes 40000000
start 2 --max-input-bytes 40000000 --timeout 2
start 3 --max-input-bytes 40000000 --max-clients 8
leader=$(wait_leader 1 2 3)
followers=()
for id in 1 2 3; do [[ "$id" == "$leader" ]] || followers+=("$id"); done
say "leader: replica $leader"

say "memory: unread pipelined GETs and one huge MGET on replica 1"
head -c 4000000 /dev/zero | tr '\0' v >"$work/value"
expect "SET a 4 MB value" OK "$(cli 1 -x SET big <"$work/value")"
hostile unread "${client_port[1]}" "${pids[1]}" big 200 100
hostile mget "${client_port[1]}" "${pids[1]}" big 2000 100

say "memory: 30 unread MGETs of 60 MB each, a single replica under ulimit -v 800000 (--max-output-bytes 128 MiB)"
# 1.8 GB of replies asked for, in 15 KB of requests: unbounded, the process dies of
# std::bad_alloc (issue 34 defect 11); bounded, the biggest holders are closed.
big_port=$(free_port)
client_port[big]=$(free_port)
(
    ulimit -v 800000
    exec "$server" --id 1 --peers "1=127.0.0.1:$big_port" --client-port "${client_port[big]}" \
        --memory --tick-ms 20 --max-output-bytes 134217728
) >>"$work/big.log" 2>&1 &
pids[big]=$!
head -c 1048576 /dev/zero | tr '\0' m >"$work/value-1m"
deadline=$((SECONDS + 10))
until [[ "$(cli big -x SET mb <"$work/value-1m" 2>/dev/null)" == OK ]]; do
    ((SECONDS < deadline)) || fail "the ulimit -v replica took no write within 10 s"
    sleep 0.1
done
hostile outputs "${client_port[big]}" "${pids[big]}" 30 mb 60 600
[[ -d "/proc/${pids[big]}" ]] || fail "the ulimit -v replica exited: $(tail -n 3 "$work/big.log")"
! grep -q "out of memory" "$work/big.log" || fail "the ulimit -v replica ran out of memory"
[[ "$(info_field big output_evicted_clients)" -ge 1 || "$(info_field big replies_refused)" -ge 1 ]] ||
    fail "INFO counted neither evicted clients nor refused replies for --max-output-bytes"
held=$(info_field big client_output_bytes)
((held <= 134217728)) || fail "INFO client_output_bytes $held is above --max-output-bytes"
expect "GET on the ulimit -v replica" 1048576 "$(cli big STRLEN mb)"
kill "${pids[big]}"

say "input: 10 connections holding 16 MB of unfinished values each (cap 40 MB)"
hostile partial "${client_port[1]}" "${pids[1]}" 10 16 80
[[ "$(info_field 1 evicted_clients)" -ge 1 ]] || fail "INFO evicted_clients did not count the closed clients"

say "--max-clients 8 on replica 3"
hostile maxclients "${client_port[3]}" 8
[[ "$(info_field 3 rejected_connections)" -ge 1 ]] || fail "INFO rejected_connections is 0"

say "--timeout 2 on replica 2"
hostile timeout "${client_port[2]}" 2

say "the descriptor limit: a single replica under ulimit -n 32"
solo_peer=$(free_port)
client_port[solo]=$(free_port)
(
    ulimit -n 32
    exec "$server" --id 1 --peers "1=127.0.0.1:$solo_peer" --client-port "${client_port[solo]}" \
        --memory --tick-ms 20
) >>"$work/solo.log" 2>&1 &
pids[solo]=$!
deadline=$((SECONDS + 10))
until [[ "$(cli solo PING 2>/dev/null)" == PONG ]]; do
    ((SECONDS < deadline)) || fail "the single replica did not answer within 10 s"
    sleep 0.1
done
hostile nofile "${client_port[solo]}" "${pids[solo]}" 200
grep -q "retrying every 100 ms" "$work/solo.log" || fail "the acceptor did not report the descriptor limit"

say "an aborted MULTI block applies nothing, a good one all of it (every replica)"
raw_pipeline() {  # raw_pipeline ID: stdin on one connection, every reply until the close
    exec 8<>"/dev/tcp/127.0.0.1/${client_port[$1]}"
    cat >&8
    timeout 10 cat <&8
    exec 8<&-
}
printf 'MULTI\r\nSET in-multi x\r\nINCRBY multi-counter x\r\nEXEC\r\nMULTI\r\nSET in-good x\r\nINCR good-counter\r\nEXEC\r\nSET after-multi done\r\nQUIT\r\n' |
    raw_pipeline "${followers[0]}" | tr -d '\r' >"$work/multi.out"
expect "replies to the MULTI pipeline" \
    "+OK
+QUEUED
-ERR value is not an integer or out of range
-EXECABORT Transaction discarded because of previous errors.
+OK
+QUEUED
+QUEUED
*2
+OK
:1
+OK
+OK" "$(cat "$work/multi.out")"
for id in 1 2 3; do
    caught_up_within "$id" after-multi "done" "replica $id after the MULTI pipeline"
    expect "keys of the aborted MULTI block on replica $id" 0 "$(cli "$id" EXISTS in-multi multi-counter)"
    expect "keys of the applied MULTI block on replica $id" 2 "$(cli "$id" EXISTS in-good good-counter)"
done

say "100,000 pipelined SETs through follower ${followers[0]}, a bystander on ${followers[1]}"
hostile pipeline "${client_port[${followers[0]}]}" "${client_port[${followers[1]}]}" 100000

say "6 connections pipelining 10,000 SETs each through follower ${followers[0]}, a bystander on it"
hostile crowd "${client_port[${followers[0]}]}" 6 10000

for id in 1 2 3; do
    [[ -d "/proc/${pids[$id]}" ]] || fail "replica $id exited"
done
say "PASSED"
