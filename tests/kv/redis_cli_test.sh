#!/usr/bin/env bash
# tests/kv/redis_cli_test.sh KV_SERVER — three kv_server processes on free loopback ports in a
# temporary directory, driven with redis-cli: PING; a SET on a follower read on another
# replica after ZSYNC; one leader in INFO; Redis-style errors; a 10 MB value and the
# too-large error; binary keys; CAS and INCR; ZTRANSFER to a follower and to ANY; kill -9 of
# the leader, a new leader, writes
# going on; the killed replica restarted from its data directory and caught up; the leader
# paused (SIGSTOP), a new leader, writes going on, the paused one resumed (SIGCONT) and
# caught up; a follower whose data directory is deleted restarts with --join (ZOOKEEPER-261),
# catches up, rejoins as a follower, and its ACKs make the quorum with the other one down.
# First, bad command lines: exit status 2 and a message naming the flag.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed (the message says
# which check, and the replicas' logs are printed); 77: skipped (no redis-cli).
# Environment: KV_TEST_KEEP=1 keeps the temporary directory.
set -euo pipefail

server="${1:?usage: redis_cli_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "skipped: redis-cli is not installed (Debian: apt-get install redis-tools)"
    exit 77
fi

# shellcheck source=tests/kv/cluster_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

say "bad command lines: exit status 2 and the reason"
bad_args() {  # bad_args EXPECTED-TEXT FLAGS...
    local want="$1" out status=0
    shift
    out=$("$server" --id 1 --peers "$peers" --client-port 1 --memory "$@" 2>&1) || status=$?
    expect "exit status of kv_server $*" 2 "$status"
    [[ "$out" == *"$want"* ]] || fail "kv_server $*: expected '$want' in: $out"
}
bad_args "--snapshot-every: 'often' is not a number" --snapshot-every often
bad_args "--snapshot-every-bytes: '-1' is not a number" --snapshot-every-bytes -1
bad_args "--cluster-id: '1x' is not a number" --cluster-id 1x
bad_args "unknown option '--joint'" --joint
bad_args "--snapshot-every needs a value" --snapshot-every
bad_args "--max-clients: '0' is not 1..1000000" --max-clients 0
bad_args "--timeout: 'never' is not a number of seconds" --timeout never
bad_args "--max-input-bytes must be at least 33554432" --max-input-bytes 1000
bad_args "--output-hard-limit must be at least --output-soft-limit + 67108864" \
    --output-hard-limit 1000000

say "starting 3 replicas in $work (client ports ${client_port[*]})"
for id in 1 2 3; do start "$id"; done
leader=$(wait_leader 1 2 3)
say "leader: replica $leader"
followers=()
for id in 1 2 3; do [[ "$id" == "$leader" ]] || followers+=("$id"); done

expect "PING" PONG "$(cli 1 PING)"
expect "PING message" hello "$(cli 2 PING hello)"

say "SET on follower ${followers[0]}, GET on follower ${followers[1]} after ZSYNC"
expect "SET via follower" OK "$(cli "${followers[0]}" SET greeting hello-zab)"
expect "GET after ZSYNC" $'OK\nhello-zab' "$(printf 'ZSYNC\nGET greeting\n' | cli "${followers[1]}")"

leaders=0
for id in 1 2 3; do [[ "$(info_field "$id" replica_role)" == leading ]] && leaders=$((leaders + 1)); done
expect "replicas reporting role:leading" 1 "$leaders"
expect "INFO leader field on a follower" "$leader" "$(info_field "${followers[0]}" leader)"

say "Redis-style errors"
expect "unknown command" "ERR unknown command 'FOO', with args beginning with: 'a' 'b' " \
    "$(cli 1 FOO a b)"
expect "wrong arity" "ERR wrong number of arguments for 'get' command" "$(cli 1 GET)"
expect "wrong arity (set)" "ERR wrong number of arguments for 'set' command" "$(cli 1 SET k)"

say "CONFIG GET (the settings, glob patterns), CLIENT LIST / KILL in Redis's formats (issue 33)"
expect "CONFIG GET maxclients" $'maxclients\n10000' "$(cli 1 CONFIG GET maxclients)"
expect "CONFIG GET appendonly (file log)" $'appendonly\nyes' "$(cli 1 CONFIG GET appendonly)"
expect "CONFIG GET save, databases" $'databases\n1\nsave' "$(cli 1 CONFIG GET save databases)"
expect "CONFIG GET timeout" $'timeout\n0' "$(cli 1 CONFIG GET timeout)"
expect "CONFIG GET maxmemory*" $'maxmemory\n0\nmaxmemory-policy\nnoeviction\nmaxmemory-clients\n536870912' \
    "$(cli 1 CONFIG GET 'MAXMEMORY*')"
expect "CONFIG GET of nothing" "" "$(cli 1 CONFIG GET nosuchsetting)"
exec 7<>"/dev/tcp/127.0.0.1/${client_port[1]}"
printf 'CLIENT SETNAME victim\r\n' >&7
read -r -t 5 reply <&7 || fail "CLIENT SETNAME: no reply"
expect "CLIENT SETNAME" $'+OK\r' "$reply"
line=$(cli 1 CLIENT LIST | grep ' name=victim ') || fail "CLIENT LIST does not show the named client"
[[ "$line" =~ ^id=([0-9]+)\ addr=127\.0\.0\.1:([0-9]+)\ laddr=127\.0\.0\.1:${client_port[1]}\ fd=[0-9]+\ name=victim\ age=[0-9]+\ idle=[0-9]+\ flags=N\ db=0\ .*\ cmd=client\|setname\ user=default\  ]] ||
    fail "CLIENT LIST line not in Redis's format: $line"
victim_id=${BASH_REMATCH[1]}
expect "CLIENT KILL ID" 1 "$(cli 1 CLIENT KILL ID "$victim_id")"
read -r -t 5 reply <&7 && fail "the killed client still reads: $reply"
exec 7<&-
exec 7<>"/dev/tcp/127.0.0.1/${client_port[1]}"
printf 'CLIENT SETNAME victim2\r\n' >&7
read -r -t 5 reply <&7 || fail "CLIENT SETNAME: no reply"
addr=$(cli 1 CLIENT LIST | grep ' name=victim2 ' | sed 's/.* addr=\([^ ]*\) .*/\1/')
expect "CLIENT KILL addr:port (the old form)" OK "$(cli 1 CLIENT KILL "$addr")"
read -r -t 5 reply <&7 && fail "the killed client still reads: $reply"
exec 7<&-
expect "CLIENT KILL of no client" "ERR No such client" "$(cli 1 CLIENT KILL 127.0.0.1:1)"
expect "CLIENT KILL skips the asking client" 0 "$(cli 1 CLIENT KILL USER default TYPE normal)"

say "a 10 MB value round-trips; 20 MB gets the too-large error"
head -c 10000000 /dev/urandom >"$work/big"
expect "SET 10 MB" OK "$(cli "${followers[0]}" -x SET big <"$work/big")"
printf 'ZSYNC\nGET big\n' | cli "$leader" | tail -c +4 | head -c 10000000 >"$work/big.read"
cmp -s "$work/big" "$work/big.read" || fail "the 10 MB value read back differs"
too_large=$(head -c 20000000 /dev/zero | cli 1 -x SET huge)
[[ "$too_large" == "ERR value too large (limit "*" bytes)" ]] ||
    fail "20 MB value: expected the value-too-large error, got '${too_large:0:200}'"
expect "connection still usable after too-large" PONG "$(cli 1 PING)"

say "binary keys (CR, LF and NUL inside) over a raw RESP connection"
raw() {  # raw ID: sends stdin on a fresh connection, prints every reply until the close
    local id="$1"
    exec 8<>"/dev/tcp/127.0.0.1/${client_port[$id]}"
    cat >&8
    timeout 10 cat <&8
    exec 8<&-
}
# The key is a CR LF b NUL c \x01 (7 bytes), the value v NUL CR LF 1 (5 bytes): printf writes
# them (bash strings cannot hold a NUL). The '$' are RESP length prefixes, not expansions.
# shellcheck disable=SC2016
printf '*3\r\n$3\r\nSET\r\n$7\r\na\r\nb\0c\x01\r\n$5\r\nv\0\r\n1\r\n*1\r\n$4\r\nQUIT\r\n' |
    raw "${followers[0]}" >"$work/binary.set"
printf '+OK\r\n+OK\r\n' | cmp -s - "$work/binary.set" || fail "binary SET: $(od -c "$work/binary.set")"
# shellcheck disable=SC2016
printf '*1\r\n$5\r\nZSYNC\r\n*2\r\n$3\r\nGET\r\n$7\r\na\r\nb\0c\x01\r\n*1\r\n$4\r\nQUIT\r\n' |
    raw "${followers[1]}" >"$work/binary.get"
# shellcheck disable=SC2016
printf '+OK\r\n$5\r\nv\0\r\n1\r\n+OK\r\n' | cmp -s - "$work/binary.get" ||
    fail "binary GET: $(od -c "$work/binary.get")"

say "CAS and INCR"
expect "CAS.ABSENT on a missing key" 1 "$(cli 1 CAS.ABSENT c v1)"
expect "CAS.ABSENT on a present key" 0 "$(cli 2 CAS.ABSENT c v2)"
expect "CAS matching" 1 "$(cli 3 CAS c v1 v3)"
expect "CAS mismatching" 0 "$(cli 1 CAS c v1 v4)"
expect "GET after CAS" $'OK\nv3' "$(printf 'ZSYNC\nGET c\n' | cli 2)"
expect "INCR new" 1 "$(cli 1 INCR n)"
expect "INCR again" 2 "$(cli 2 INCR n)"
expect "INCR not integer" "ERR value is not an integer or out of range" "$(cli 3 INCR c)"
expect "TAGGED first" 3 "$(cli 1 TAGGED 42 1 INCR n)"
expect "TAGGED retry (applied once)" 3 "$(cli 2 TAGGED 42 1 INCR n)"
# The value INCR answers is what apply computed on the replica that took the write,
# delivered with the write's completion (docs/protocol.md §6.6): a follower's is forwarded
# and applied there too.
expect "INCR through follower ${followers[0]}" 4 "$(cli "${followers[0]}" INCR n)"
expect "INCR through follower ${followers[1]}" 5 "$(cli "${followers[1]}" INCR n)"
expect "TAGGED INCR through a follower" 6 "$(cli "${followers[1]}" TAGGED 43 1 INCR n)"
expect "TAGGED retry through the other follower" 6 "$(cli "${followers[0]}" TAGGED 43 1 INCR n)"
expect "TAGGED older sequence (applied earlier, reply not kept)" \
    "APPLIED earlier: the request's sequence number is older than the client's last applied request, so it was applied before that one (one tagged request per client at a time); its reply is not kept" \
    "$(cli "$leader" TAGGED 43 0 INCR n)"
expect "pipelined writes then read (read-your-writes)" $'OK\nOK\nOK\nthird' \
    "$(printf 'SET p first\nSET p second\nSET p third\nGET p\n' | cli "${followers[0]}")"

say "ZTRANSFER: the leader hands over to follower ${followers[0]}, then to ANY; writes go on"
at_follower=$(cli "${followers[1]}" ZTRANSFER "${followers[0]}")
[[ "$at_follower" == "NOQUORUM "* ]] || fail "ZTRANSFER at a follower: got '$at_follower'"
expect "ZTRANSFER to the leader itself" "ERR invalid argument" "$(cli "$leader" ZTRANSFER "$leader")"
expect "ZTRANSFER to a replica that does not exist" "ERR invalid argument" \
    "$(cli "$leader" ZTRANSFER 9)"
expect "ZTRANSFER without a target" "ERR ZTRANSFER takes a replica id or ANY" \
    "$(cli "$leader" ZTRANSFER none)"
expect "ZTRANSFER to ${followers[0]}" OK "$(cli "$leader" ZTRANSFER "${followers[0]}")"
expect "leader after ZTRANSFER" "${followers[0]}" "$(wait_leader 1 2 3)"
set_within "$leader" after-transfer moved "SET through the old leader after the transfer"
expect "ZTRANSFER ANY" OK "$(cli "${followers[0]}" ZTRANSFER ANY)"
leader=$(wait_leader 1 2 3)
[[ "$leader" != "${followers[0]}" ]] || fail "ZTRANSFER ANY left the leadership where it was"
say "leader: replica $leader"
caught_up_within "$leader" after-transfer moved "the leader after two transfers"
followers=()
for id in 1 2 3; do [[ "$id" == "$leader" ]] || followers+=("$id"); done

say "kill -9 the leader (replica $leader)"
kill -9 "${pids[$leader]}"
wait "${pids[$leader]}" 2>/dev/null || true
unset "pids[$leader]"
new_leader=$(wait_leader "${followers[@]}")
say "new leader: replica $new_leader"
[[ "$new_leader" != "$leader" ]] || fail "the killed replica is still reported leading"
set_within "${followers[0]}" after-kill survived "SET after the leader's kill"

say "restart replica $leader from its data directory"
start "$leader"
caught_up_within "$leader" after-kill survived "restarted replica $leader"
expect "restarted replica keeps old data" $'OK\nhello-zab' \
    "$(printf 'ZSYNC\nGET greeting\n' | cli "$leader")"

current=$(wait_leader 1 2 3)
say "SIGSTOP the leader (replica $current): the other two elect a leader and go on"
kill -STOP "${pids[$current]}"
others=()
for id in 1 2 3; do [[ "$id" == "$current" ]] || others+=("$id"); done
next=$(wait_leader "${others[@]}")
say "leader while $current is paused: replica $next"
set_within "${others[0]}" during-pause written "SET while replica $current is paused"
say "SIGCONT replica $current: it rejoins and catches up"
kill -CONT "${pids[$current]}"
caught_up_within "$current" during-pause written "resumed replica $current"

current=$(wait_leader 1 2 3)
others=()
for id in 1 2 3; do [[ "$id" == "$current" ]] || others+=("$id"); done
wiped=${others[0]}
other=${others[1]}
say "replica $wiped loses its data directory and restarts with --join (ZOOKEEPER-261)"
kill -9 "${pids[$wiped]}"
wait "${pids[$wiped]}" 2>/dev/null || true
rm -rf "$work/replica-$wiped"
start "$wiped" --join --log-level info
caught_up_within "$wiped" during-pause written "wiped replica $wiped"
deadline=$((SECONDS + 30))
until [[ "$(info_field "$wiped" replica_role)" == following ]]; do
    ((SECONDS < deadline)) || fail "synced replica $wiped did not rejoin as a follower within 30 s"
    sleep 0.3
done
grep -q "an observer until a leader syncs it" "$work/replica-$wiped.log" ||
    fail "replica $wiped did not start as a non-voter"
grep -q "rejoining as a voter" "$work/replica-$wiped.log" ||
    fail "replica $wiped did not report rejoining as a voter"
say "replica $other down: the leader's quorum now needs replica $wiped's vote and ACKs"
kill -9 "${pids[$other]}"
wait "${pids[$other]}" 2>/dev/null || true
unset "pids[$other]"
set_within "$wiped" after-wipe counted "SET with replica $other down"
start "$other"
caught_up_within "$other" after-wipe counted "restarted replica $other"

say "graceful stop (SIGTERM) exits 0"
for id in 1 2 3; do
    kill -TERM "${pids[$id]}"
    status=0
    wait "${pids[$id]}" || status=$?
    unset "pids[$id]"
    expect "exit status of replica $id after SIGTERM" 0 "$status"
done
say "PASSED"
