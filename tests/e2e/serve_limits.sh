#!/bin/sh
# tests/e2e/serve_limits.sh: a query's limits and streamed answers in
# `ember serve` (docs/protocol.md, "Limits" and the query endpoint), on a
# real server over 100k distinct stacks: a query past its time is 504 with
# errorType timeout (the server's --query-timeout, and a request's own
# timeout, which may lower the server's but never raise it), past its
# memory 422 with errorType limit; an answer is sent chunked and equals
# `ember query -d` of the same query; the access log and the metrics count
# its bytes; a HEAD gets the headers; clients that go away mid-answer leave
# the server answering, and it stops cleanly (under ASan: nothing leaked).
# No check reads a clock: 1 ms is a thousandth of what the query needs.
set -eu
EMBER=${EMBER:-build/ember}
. tests/e2e/lib/serve.sh
serve_init
db=$tmp/db
type='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta'
query="$type{service=\"big\"}"

start() { serve_start "$db" --listen tcp:0 "$@"; }
stop() { serve_stop; }
url() { echo "http://127.0.0.1:$port$1"; }
# q ARGS...: the query over HTTP with ARGS added; body in $tmp/body,
# status printed
q() {
  curl -s -o "$tmp/body" -w '%{http_code}' -G --data-urlencode "query=$query" "$@" "$(url /api/v1/query)" || true
}
expect() {  # expect STATUS TYPE TEXT ARGS...
  want=$1 etype=$2 text=$3
  shift 3
  got=$(q "$@")
  [ "$got" = "$want" ] || fail "$*: status $got, not $want ($(head -c 300 "$tmp/body"))"
  grep -q "\"errorType\":\"$etype\"" "$tmp/body" || fail "$*: $(cat "$tmp/body")"
  grep -q "$text" "$tmp/body" || fail "$*: no '$text' in $(cat "$tmp/body")"
}

# 100k distinct stacks of 5 frames: a merge resolves each one
awk 'BEGIN { for (i = 0; i < 100000; i++)
  printf "main;svc%d;handler%d;fn%d;leaf%d %d\n", i % 13, i % 97, i % 1009, i, 1 + i % 50 }' > "$tmp/big.txt"
$EMBER import -d "$db" -l service=big --type "$type" "$tmp/big.txt" 2> /dev/null
$EMBER query -d "$db" -o collapsed "$query" > "$tmp/cli"
[ "$(wc -l < "$tmp/cli")" = 100000 ] || fail "the CLI's merge has $(wc -l < "$tmp/cli") stacks"

# ---- time: the server's limit, and a request's own ------------------------
start --query-timeout 1ms
expect 504 timeout 'query time limit of 1 ms exceeded' -d format=collapsed
grep -q 'service=' "$tmp/body" || fail "the timeout does not name the query: $(cat "$tmp/body")"
expect 504 timeout 'query time limit of 1 ms' -d timeout=10m    # not more
stop
start
expect 504 timeout 'query time limit of 2 ms exceeded' -d timeout=2ms
expect 400 bad_data 'timeout=soon' -d timeout=soon
[ "$(q -d format=collapsed)" = 200 ] || fail "the default limits refused the query"
# the metadata endpoints' queries take the same limits
[ "$(curl -s -o "$tmp/body" -w '%{http_code}' "$(url '/api/v1/labels?timeout=10s')")" = 200 ] &&
  grep -q '"service"' "$tmp/body" || fail "labels with a timeout: $(cat "$tmp/body")"
[ "$(curl -s -o "$tmp/body" -w '%{http_code}' "$(url '/api/v1/types?timeout=never')")" = 400 ] ||
  fail "types with a bad timeout: $(cat "$tmp/body")"
# the querier's Connect calls: Connect-Timeout-Ms lowers the limit, past
# it deadline_exceeded (504), a malformed one invalid_argument
connect() {  # connect TIMEOUT-MS: SelectMergeStacktraces of the big stacks
  curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    -H "Connect-Timeout-Ms: $1" -d '{"profileTypeID":"process_cpu:cpu:nanoseconds:cpu:nanoseconds",
      "labelSelector":"{service=\"big\"}","start":"0","end":"4102444800000"}' \
    "$(url /querier.v1.QuerierService/SelectMergeStacktraces)" || true
}
[ "$(connect 2)" = 504 ] && grep -q '"code":"deadline_exceeded"' "$tmp/body" &&
  grep -q 'query time limit of 2 ms' "$tmp/body" || fail "Connect-Timeout-Ms 2: $(cat "$tmp/body")"
[ "$(connect soon)" = 400 ] && grep -q '"code":"invalid_argument"' "$tmp/body" ||
  fail "a bad Connect-Timeout-Ms: $(cat "$tmp/body")"
[ "$(connect 600000)" = 200 ] && grep -q '"flamegraph"' "$tmp/body" ||
  fail "SelectMergeStacktraces within its time: $(head -c 300 "$tmp/body")"

# ---- streaming ----------------------------------------------------------------
curl -sv -G --data-urlencode "query=$query" -d format=collapsed "$(url /api/v1/query)" \
  -o "$tmp/http" 2> "$tmp/headers" || fail "streamed query: curl failed"
grep -qi '^< Transfer-Encoding: chunked' "$tmp/headers" || fail "not chunked: $(cat "$tmp/headers")"
cmp -s "$tmp/http" "$tmp/cli" || fail "the streamed answer differs from ember query -d"
size=$(wc -c < "$tmp/cli")
# the log line is written when the request completes, after curl's end
for _ in $(seq 100); do
  grep -q "\"GET /api/v1/query HTTP/1.1\" 200 $size " "$tmp/log" && break
  sleep 0.1
done
grep -q "\"GET /api/v1/query HTTP/1.1\" 200 $size " "$tmp/log" ||
  fail "the access log does not count the $size bytes streamed: $(grep query "$tmp/log" | tail -2)"
for _ in $(seq 100); do   # counted just after the log line
  sent=$(curl -s "$(url /metrics)" |
    sed -n 's/^ember_http_response_body_bytes_total{path="\/api\/v1\/query"} //p')
  [ "$sent" -ge "$size" ] && break
  sleep 0.1
done
[ "$sent" -ge "$size" ] || fail "metrics count $sent response bytes, below $size"
for fmt in json svg top tree; do
  q -d format=$fmt > /dev/null
  $EMBER query -d "$db" -o $fmt "$query" > "$tmp/cli_$fmt"
  cmp -s "$tmp/body" "$tmp/cli_$fmt" || fail "format $fmt over HTTP differs from the CLI's"
done
# pprof streams too, the CLI's bytes, and go tool pprof reads it by URL
curl -sv -G --data-urlencode "query=$query" -d format=pprof "$(url /api/v1/query)" \
  -o "$tmp/http.pb.gz" 2> "$tmp/headers" || fail "pprof query: curl failed"
grep -qi '^< Transfer-Encoding: chunked' "$tmp/headers" || fail "pprof not chunked"
$EMBER query -d "$db" -o pprof "$query" > "$tmp/cli.pb.gz"
cmp -s "$tmp/http.pb.gz" "$tmp/cli.pb.gz" || fail "pprof over HTTP differs from the CLI's"
if command -v go > /dev/null 2>&1; then
  . tests/e2e/lib/pprof_compare.sh
  enc=$(printf '%s' "$query" | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g')
  PPROF_TMPDIR=$tmp HOME=$tmp GOCACHE=$tmp/gocache \
    pc_top "$(url "/api/v1/query?format=pprof&query=$enc")" | pc_rows > "$tmp/go_rows"
  $EMBER query -d "$db" -o top "$query" | pc_rows > "$tmp/ember_rows"
  [ -s "$tmp/go_rows" ] || fail "go tool pprof read nothing from the URL"
  cmp -s "$tmp/go_rows" "$tmp/ember_rows" || fail "go tool pprof -top URL differs"
fi
# a format that does not fit the result is refused before anything streams
expect 400 bad_data 'csv' -d format=csv
# HEAD answers the headers alone
curl -s -I -G --data-urlencode "query=$query" -d format=collapsed "$(url /api/v1/query)" |
  grep -q '^HTTP/1.1 200' || fail "HEAD of a query"

# ---- clients that go away mid-answer ----------------------------------------
for _ in 1 2; do
  curl -s -G --data-urlencode "query=$query" -d format=collapsed --limit-rate 20k \
    -m 2 "$(url /api/v1/query)" -o /dev/null && fail "a 20 kB/s client read $size bytes in 2 s"
done
[ "$(curl -s "$(url /healthz)")" = ok ] || fail "healthz after clients went away"
[ "$(q -d format=collapsed)" = 200 ] && cmp -s "$tmp/body" "$tmp/cli" ||
  fail "a query after clients went away"
stop

# ---- memory -----------------------------------------------------------------
start --query-memory 64K
expect 422 limit 'query memory limit of 65536 bytes exceeded in ' -d format=collapsed
stop
start --query-memory 0 --query-timeout 0
[ "$(q -d format=collapsed)" = 200 ] && cmp -s "$tmp/body" "$tmp/cli" ||
  fail "no limits: the query"
stop

# ---- refusals on the command line -------------------------------------------
for bad in '--query-timeout soon' '--query-timeout -1s' '--query-memory lots'; do
  # shellcheck disable=SC2086
  if $EMBER serve -d "$db" --listen tcp:0 $bad 2> "$tmp/err"; then
    fail "serve $bad started"
  fi
  grep -qe "${bad%% *}" "$tmp/err" || fail "serve $bad: $(cat "$tmp/err")"
done
echo "serve_limits: ok"
