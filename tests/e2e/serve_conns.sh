#!/bin/sh
# tests/e2e/serve_conns.sh: `ember serve` holding 1,000 keep-alive
# connections open at once (tests/e2e/lib/many_conns.py), each asking for
# label values several times: every answer is 200, none is refused, the
# server reports the connections it holds, and it stays healthy after.
# Then --max-connections: past it a client is refused with 503, and the
# server serves again once connections close.
set -eu
EMBER=${EMBER:-build/ember}
. tests/e2e/lib/serve.sh
serve_init
ulimit -n 8192 2> /dev/null || true
[ "$(ulimit -n)" -ge 2100 ] || { echo "serve_conns: skipped (ulimit -n $(ulimit -n))"; exit 0; }

db=$tmp/db
$EMBER import -d "$db" -l service=conns tests/data/pprof/cpu.pb.gz 2> /dev/null
start() { serve_start "$db" --listen tcp:0 --access-log off "$@"; }
stop() { serve_stop; }

start
python3 tests/e2e/lib/many_conns.py 127.0.0.1 "$port" 1000 5 \
  /api/v1/label/service/values > "$tmp/out" || fail "1000 connections: $(cat "$tmp/out")"
[ "$(cat "$tmp/out")" = "ok 1000 5000" ] || fail "1000 connections: $(cat "$tmp/out")"
curl -s "http://127.0.0.1:$port/metrics" > "$tmp/metrics"
grep -q '^ember_http_connections_total [0-9]*$' "$tmp/metrics" || fail "metrics"
total=$(sed -n 's/^ember_http_connections_total //p' "$tmp/metrics")
[ "$total" -ge 1000 ] || fail "connections counted: $total"
[ "$(curl -s "http://127.0.0.1:$port/healthz")" = ok ] || fail "healthz after"
stop

# past --max-connections: 503, then served again
start --max-connections 50
python3 tests/e2e/lib/many_conns.py 127.0.0.1 "$port" 60 1 /healthz > "$tmp/out" && fail "60 connections past 50 were all served"
grep -q '^10 of 60 connections failed$' "$tmp/out" || fail "over the limit: $(cat "$tmp/out")"
[ "$(curl -s "http://127.0.0.1:$port/healthz")" = ok ] || fail "healthz after the refusals"
stop
echo "serve_conns: ok"
