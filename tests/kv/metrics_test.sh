#!/usr/bin/env bash
# tests/kv/metrics_test.sh KV_SERVER — kv_server's metrics port (issue 21 item 2;
# docs/operating.md, "Metrics"). Three replicas with --metrics-port, scraped with curl:
# - every replica answers GET /health 200 once established, and GET /metrics in the
#   Prometheus text format (its Content-Type, a TYPE line per family);
# - writes through the leader move its commit counter by as many, and the fsync histogram's
#   count on every replica;
# - hostile requests: an unknown path is 404, a request that is not HTTP or has a header
#   above 8 KiB is 400, and the port still serves afterwards;
# - the leader is killed: another replica's role gauge goes from following to leading;
# - that one is killed too: the replica left alone loses its leader and /health says 503
#   with the reason.
# Every wait polls with a bound; nothing sleeps for a fixed time to let things happen.
#
# Registered with ctest (label kv-cluster). Exit 0: passed; 1: failed; 77: skipped (no
# redis-cli or curl).
set -euo pipefail

server="${1:?usage: metrics_test.sh PATH/TO/kv_server}"
[[ -x "$server" ]] || { echo "error: $server is not executable" >&2; exit 1; }
for tool in redis-cli curl; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipped: $tool is not installed"
        exit 77
    fi
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/kv/cluster_lib.sh
source "$here/cluster_lib.sh"

declare -A metrics_port=()
for id in 1 2 3; do metrics_port[$id]=$(free_port); done

url() { echo "http://127.0.0.1:${metrics_port[$1]}$2"; }
scrape() { curl -s --max-time 5 "$(url "$1" /metrics)" || true; }
# metric ID NAME: the value of sample NAME (with its labels, as printed) on replica ID.
metric() { scrape "$1" | awk -v n="$2" '$1 == n { print $2 }'; }
# http_code ID PATH [curl flags...]: the status code of one request (000: no answer).
http_code() {
    curl -s -o "$work/body" -w '%{http_code}' --max-time 5 "${@:3}" "$(url "$1" "$2")" || true
}
# metric_at_least_within ID NAME MIN SECONDS: polls until NAME >= MIN on ID.
metric_at_least_within() {
    local deadline=$((SECONDS + $4)) value
    while :; do
        value=$(metric "$1" "$2")
        [[ -n "$value" ]] && awk -v v="$value" -v m="$3" 'BEGIN { exit !(v >= m) }' && return 0
        ((SECONDS < deadline)) || fail "replica $1: $2 is '${value}', not >= $3 within $4 s"
        sleep 0.2
    done
}
health_within() {  # health_within ID CODE SECONDS
    local deadline=$((SECONDS + $3))
    until [[ "$(http_code "$1" /health)" == "$2" ]]; do
        ((SECONDS < deadline)) || fail "replica $1: /health is not $2 within $3 s (last: $(cat "$work/body" 2>/dev/null))"
        sleep 0.2
    done
}

say "starting 3 replicas with --metrics-port in $work"
for id in 1 2 3; do start "$id" --metrics-port "${metrics_port[$id]}"; done
leader=$(wait_leader 1 2 3)
say "leader $leader"
for id in 1 2 3; do health_within "$id" 200 20; done
expect "the /health body" ok "$(cat "$work/body")"

# The exposition's format.
content_type=$(curl -s -o /dev/null -w '%{content_type}' --max-time 5 "$(url "$leader" /metrics)")
expect "Content-Type of /metrics" "text/plain; version=0.0.4; charset=utf-8" "$content_type"
scrape "$leader" >"$work/metrics.txt"
for family in "zab_commits_total counter" "zab_role gauge" "zab_fsync_duration_seconds histogram" \
    "zab_learner_lag gauge" "zab_transport_bytes_total counter" "zab_events_total counter" \
    "zab_log_syncs_total counter" "zab_log_records_written_total counter"; do
    grep -qx "# TYPE $family" "$work/metrics.txt" || fail "no '# TYPE $family' in /metrics"
done
bad=$(grep -v '^#' "$work/metrics.txt" |
    grep -Evc '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? [-+0-9.e]+(Inf)?$' || true)
expect "sample lines not in the text format" 0 "$bad"
expect "the leader's role gauge" 1 "$(metric "$leader" 'zab_role{role="leading"}')"
expect "the leader's learners" 2 "$(metric "$leader" zab_learners)"

# Writes move the commit counter and every replica's fsync histogram.
commits=$(metric "$leader" zab_commits_total)
declare -A fsyncs=() records=()
for id in 1 2 3; do
    fsyncs[$id]=$(metric "$id" zab_fsync_duration_seconds_count)
    records[$id]=$(metric "$id" zab_log_records_written_total)
done
say "50 writes through the leader (commits $commits)"
write_acked "$leader" 50 metered "$work/acked"
expect "acknowledged writes" 50 "$(wc -l <"$work/acked")"
metric_at_least_within "$leader" zab_commits_total $((commits + 50)) 10
for id in 1 2 3; do
    metric_at_least_within "$id" zab_fsync_duration_seconds_count $((fsyncs[$id] + 1)) 10
    metric_at_least_within "$id" zab_flush_records_sum 50 10
    # The file log's own count of what it wrote (file_log::stats, zab_log_*).
    metric_at_least_within "$id" zab_log_records_written_total $((records[$id] + 50)) 10
    metric_at_least_within "$id" 'zab_log_syncs_total{what="segment"}' 1 10
done
metric_at_least_within "$leader" zab_commit_latency_seconds_count 50 10
[[ "$(cli "$leader" INFO | tr -d '\r' | sed -n 's/^zab_commits_total://p')" -ge $((commits + 50)) ]] ||
    fail "INFO zab_commits_total did not move"

# Hostile requests: answered, and the port keeps serving.
expect "GET /nope" 404 "$(http_code "$leader" /nope)"
expect "a header above 8 KiB" 400 \
    "$(http_code "$leader" /metrics -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)")"
expect "a request with a body" 400 "$(http_code "$leader" /metrics --data-binary x)"
exec 7<>"/dev/tcp/127.0.0.1/${metrics_port[$leader]}"
printf 'this is not HTTP\r\n\r\n' >&7
IFS= read -r -t 5 status_line <&7 || true
exec 7>&-
[[ "$status_line" == "HTTP/1.1 400"* ]] || fail "garbage at the metrics port: '$status_line'"
expect "GET /health after the hostile requests" 200 "$(http_code "$leader" /health)"

# The leader is killed: another replica's role gauge goes from following to leading.
others=()
for id in 1 2 3; do
    if [[ "$id" != "$leader" ]]; then
        others+=("$id")
        expect "replica $id's role gauge before the kill" 1 "$(metric "$id" 'zab_role{role="following"}')"
    fi
done
say "killing the leader $leader"
stop "$leader"
successor=$(wait_leader "${others[@]}")
metric_at_least_within "$successor" 'zab_role{role="leading"}' 1 10
expect "replica $successor's following gauge" 0 "$(metric "$successor" 'zab_role{role="following"}')"
metric_at_least_within "$successor" 'zab_events_total{kind="role_changed"}' 2 5
say "replica $successor leads; its role gauge says so"

# The replica left alone loses its leader: /health says 503 and why.
alone=${others[0]}
[[ "$alone" == "$successor" ]] && alone=${others[1]}
say "killing $successor: replica $alone is left alone"
stop "$successor"
health_within "$alone" 503 30
grep -q "not established" "$work/body" || fail "replica $alone's 503 reason: $(cat "$work/body")"
expect "replica $alone's established gauge" 0 "$(metric "$alone" zab_established)"
say "replica $alone: /health 503 ($(cat "$work/body"))"
say "passed"
