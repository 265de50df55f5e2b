#!/usr/bin/env bash
# tests/kv/tls_auth_test.sh KV_SERVER — three kv_server processes with mutual TLS between them
# (--peer-tls-*), TLS on their client ports (--tls-cert/--tls-key) and a password
# (--requirepass-file, --requirepass) and an admin user (issue 20 item 4), driven with
# `redis-cli --tls`; certificates made by tests/net/make_member_certificates.sh:
# - bad command lines: exit status 2 and the reason;
# - a leader elected over mutual TLS; SET/GET with the password on the leader and a follower;
# - without the password -NOAUTH (and nothing runs), a wrong one -WRONGPASS (counted), HELLO 3
#   AUTH works; a password given on the command line is not in the process's argv;
# - ZTRANSFER as the default user -NOPERM, as the admin user +OK (the leadership moves);
# - a plaintext redis-cli to a TLS port fails (the connection is closed, counted in INFO) and
#   the replica keeps serving; a connection that never starts its handshake is closed after 5 s;
# - --tls-auth-clients yes (replica 3): a client without a certificate is refused, one with a
#   certificate from the CA served;
# - SIGHUP: the password file and the certificates are read again (new connections use them).
#
# Registered with ctest (labels kv-cluster, tls). Exit 0: passed; 1: failed (the message says
# which check, and the replicas' logs are printed); 77: skipped (no redis-cli with TLS, or no
# openssl). Environment: KV_TEST_KEEP=1 keeps the temporary directory.
set -euo pipefail

server="${1:?usage: tls_auth_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
for tool in redis-cli openssl; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipped: $tool is not installed"
        exit 77
    fi
done
if [[ "$(redis-cli --help 2>&1)" != *--tls* ]]; then
    echo "skipped: this redis-cli has no TLS support"
    exit 77
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

pki="$work/pki"
sh "$here/../net/make_member_certificates.sh" "$pki" 1 2 3 >"$work/pki.log" 2>&1 ||
    { cat "$work/pki.log"; fail "making the certificates"; }
password="data-pass-$RANDOM$RANDOM"
admin_password="admin-pass-$RANDOM$RANDOM"
printf '%s\n' "$password" >"$work/requirepass"
printf '%s\n' "$admin_password" >"$work/adminpass"

tls_flags() {  # tls_flags ID: the peer and client TLS options of replica ID
    echo --peer-tls-cert "$pki/member-$1.pem" --peer-tls-key "$pki/member-$1.key" \
        --peer-tls-ca "$pki/ca.pem" --tls-cert "$pki/member-$1.pem" --tls-key "$pki/member-$1.key"
}
# redis-cli over TLS to replica ID without credentials; replica 3 asks for a client
# certificate: member 1's (signed by the same CA) is sent to it.
tls_cli() {
    local id="$1"
    shift
    local -a client_cert=()
    [[ "$id" != 3 ]] || client_cert=(--cert "$pki/member-1.pem" --key "$pki/member-1.key")
    timeout 30 redis-cli --tls --cacert "$pki/ca.pem" "${client_cert[@]}" \
        -p "${client_port[$id]}" --no-auth-warning "$@"
}
# cluster_lib's helpers (wait_leader, info_field, ...) go through `cli`: with the password.
cli() {
    local id="$1"
    shift
    tls_cli "$id" -a "$password" "$@"
}
admin_cli() {
    local id="$1"
    shift
    tls_cli "$id" --user ops -a "$admin_password" "$@"
}

say "bad command lines: exit status 2 and the reason"
bad_args() {  # bad_args EXPECTED-TEXT FLAGS...
    local want="$1" out status=0
    shift
    out=$("$server" --id 1 --peers "$peers" --client-port 1 --memory "$@" 2>&1) || status=$?
    expect "exit status of kv_server $*" 2 "$status"
    [[ "$out" == *"$want"* ]] || fail "kv_server $*: expected '$want' in: $out"
}
bad_args "--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together" \
    --peer-tls-cert "$pki/member-1.pem"
bad_args "--tls-cert and --tls-key go together" --tls-cert "$pki/member-1.pem"
bad_args "--tls-auth-clients yes|optional needs --tls-ca-cert" \
    --tls-cert "$pki/member-1.pem" --tls-key "$pki/member-1.key" --tls-auth-clients yes
bad_args "--tls-auth-clients: 'maybe' is not yes, no or optional" --tls-auth-clients maybe
bad_args "--tls-min-version: '1.1' is not 1.2 or 1.3" --tls-min-version 1.1
bad_args "--admin-user and --admin-pass (or --admin-pass-file) go together" --admin-user ops
bad_args "--admin-user: 'default' is not a user name" --admin-user default --admin-pass x
bad_args "--requirepass and --requirepass-file exclude each other" \
    --requirepass x --requirepass-file "$work/requirepass"
status=0
out=$("$server" --id 1 --peers "$peers" --client-port "${client_port[1]}" --memory \
    --requirepass-file "$work/missing" 2>&1) || status=$?
expect "exit status with a missing password file" 1 "$status"
[[ "$out" == *"cannot read the password file $work/missing"* ]] || fail "missing file: $out"
status=0
out=$("$server" --id 1 --peers "$peers" --client-port "${client_port[1]}" --memory \
    --tls-cert "$pki/member-1.pem" --tls-key "$pki/member-2.key" 2>&1) || status=$?
expect "exit status with a key that is not the certificate's" 1 "$status"
[[ "$out" == *"--tls-key $pki/member-2.key"* ]] || fail "mismatched key: $out"

say "starting 3 replicas in $work: mutual TLS between them, TLS and a password for clients"
# shellcheck disable=SC2046  # tls_flags's words are meant to split (no spaces in $work)
{
    start 1 $(tls_flags 1) --requirepass-file "$work/requirepass" --admin-user ops \
        --admin-pass-file "$work/adminpass"
    start 2 $(tls_flags 2) --requirepass-file "$work/requirepass" --admin-user ops \
        --admin-pass-file "$work/adminpass"
    start 3 $(tls_flags 3) --requirepass "$password" --admin-user ops \
        --admin-pass "$admin_password" --tls-ca-cert "$pki/ca.pem" --tls-auth-clients yes
}
leader=$(wait_leader 1 2 3)
followers=()
for id in 1 2 3; do [[ "$id" == "$leader" ]] || followers+=("$id"); done
say "leader: replica $leader"
for id in 1 2 3; do
    expect "INFO peer_tls on replica $id" 1 "$(info_field "$id" peer_tls)"
    expect "INFO client_tls on replica $id" 1 "$(info_field "$id" client_tls)"
    expect "INFO requirepass on replica $id" 1 "$(info_field "$id" requirepass)"
done
if tr '\0' ' ' <"/proc/${pids[3]}/cmdline" | grep -qF -- "$password"; then
    fail "replica 3's command line still shows --requirepass's password"
fi
grep -qF -- "$password" "$work"/replica-*.log && fail "a password is in a replica's log"

say "with the password: SET and GET on the leader and on a follower"
expect "SET on the leader" OK "$(cli "$leader" SET k1 v1)"
expect "SET on follower ${followers[0]}" OK "$(cli "${followers[0]}" SET k2 v2)"
expect "GET on follower ${followers[1]} after ZSYNC" $'OK\nv1\nv2' \
    "$(printf 'ZSYNC\nGET k1\nGET k2\n' | cli "${followers[1]}")"
expect "GET on the leader" v2 "$(cli "$leader" GET k2)"

say "without the password: -NOAUTH, nothing runs; a wrong one: -WRONGPASS"
expect "GET without AUTH" "NOAUTH Authentication required." "$(tls_cli "$leader" GET k1)"
expect "SET without AUTH" "NOAUTH Authentication required." "$(tls_cli "$leader" SET k1 bad)"
expect "ZTRANSFER without AUTH" "NOAUTH Authentication required." \
    "$(tls_cli "$leader" ZTRANSFER ANY)"
expect "the refused SET did nothing" v1 "$(cli "$leader" GET k1)"
failures_before=$(info_field "$leader" auth_failures)
wrongpass="WRONGPASS invalid username-password pair or user is disabled."
expect "AUTH with a wrong password" "$wrongpass" "$(tls_cli "$leader" AUTH nope)"
expect "AUTH of an unknown user" "$wrongpass" "$(tls_cli "$leader" AUTH root "$password")"
expect "AUTH then a command" $'OK\nv1' \
    "$(printf 'AUTH %s\nGET k1\n' "$password" | tls_cli "$leader")"
expect "INFO auth_failures counts the refusals" $((failures_before + 2)) \
    "$(info_field "$leader" auth_failures)"
hello=$(tls_cli "$leader" HELLO 3 AUTH default "$password" | tr '\n' ' ')
[[ "$hello" == *"proto 3 "* ]] || fail "HELLO 3 AUTH default <password>: got '$hello'"
expect "RESET logs out" $'RESET\nNOAUTH Authentication required.' \
    "$(printf 'RESET\nGET k1\n' | cli "$leader")"

say "ZTRANSFER: -NOPERM for the default user, +OK for the admin user"
expect "ZTRANSFER as the default user" \
    "NOPERM User default has no permissions to run the 'ztransfer' command" \
    "$(cli "$leader" ZTRANSFER "${followers[0]}")"
expect "ZTRANSFER as the admin user" OK "$(admin_cli "$leader" ZTRANSFER "${followers[0]}")"
new_leader=$(wait_leader 1 2 3)
expect "the leader after ZTRANSFER" "${followers[0]}" "$new_leader"
set_within "$new_leader" k3 v3 "a write through the new leader"

say "a plaintext client to a TLS port is closed; the replica keeps serving"
# A connection that sends nothing at all: closed by the handshake deadline (5 s), checked last.
exec 7<>"/dev/tcp/127.0.0.1/${client_port[1]}"
failed_before=$(info_field 1 tls_handshake_failures)
status=0
out=$(timeout 10 redis-cli -p "${client_port[1]}" PING 2>&1) || status=$?
[[ "$status" -ne 0 && "$status" -ne 124 && "$out" != *PONG* ]] ||
    fail "plaintext redis-cli to a TLS port: status $status, '$out'"
# Raw RESP: the server closes the connection (cat ends well before its timeout).
status=0
exec 8<>"/dev/tcp/127.0.0.1/${client_port[1]}"
# shellcheck disable=SC2016  # '$4' is a RESP length prefix, not an expansion
printf '*1\r\n$4\r\nPING\r\n' >&8
out=$(timeout 10 cat <&8 2>/dev/null | od -c | head -n 3) || status=$?
exec 8<&-
[[ "$status" -eq 0 && "$out" != *P*O*N*G* ]] ||
    fail "raw plaintext RESP to a TLS port: not closed (status $status) or answered: $out"
expect "INFO tls_handshake_failures" $((failed_before + 2)) "$(info_field 1 tls_handshake_failures)"
expect "PING over TLS after the plaintext clients" PONG "$(cli 1 PING)"

say "--tls-auth-clients yes: a client certificate from the CA is required (replica 3)"
status=0
out=$(timeout 10 redis-cli --tls --cacert "$pki/ca.pem" -p "${client_port[3]}" \
    --no-auth-warning -a "$password" PING 2>&1) || status=$?
[[ "$out" != *PONG* ]] || fail "replica 3 served a client without a certificate"
expect "PING with a client certificate" PONG "$(cli 3 PING)"

say "SIGHUP: a new password file and the certificates are read again (replica 1)"
printf '%s\n' "$password-2" >"$work/requirepass"
mark_logs
kill -HUP "${pids[1]}"
logged_within 1 10 "SIGHUP: credentials reloaded (new connections use them)"
expect "the old password after the reload" "$wrongpass" "$(tls_cli 1 AUTH "$password")"
expect "the new password after the reload" $'OK\nv3' \
    "$(printf 'AUTH %s\nGET k3\n' "$password-2" | tls_cli 1)"
password="$password-2"
expect "INFO credential_reloads" 1 "$(info_field 1 credential_reloads)"
expect "INFO peer_tls_reloads" 1 "$(info_field 1 peer_tls_reloads)"
# A broken certificate file: the reload fails, logged; the old credentials stay in use.
cp "$pki/member-1.pem" "$work/member-1.pem.good"
echo broken >"$pki/member-1.pem"
mark_logs
kill -HUP "${pids[1]}"
logged_within 1 10 "credentials reloaded in part"
expect "PING over TLS after a failed reload" PONG "$(cli 1 PING)"
expect "INFO credential_reload_failures" 1 "$(info_field 1 credential_reload_failures)"
cp "$work/member-1.pem.good" "$pki/member-1.pem"

say "a connection that never starts its handshake is closed within the deadline"
deadline=$((SECONDS + 10))
until [[ "$(info_field 1 tls_handshake_timeouts)" -ge 1 ]]; do
    ((SECONDS < deadline)) || fail "the silent connection was not closed within 10 s"
    sleep 0.2
done
exec 7<&-
say "passed"
