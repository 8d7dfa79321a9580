#!/bin/sh
# tests/e2e/serve.sh: `ember serve` as users run it, a real server process
# spoken to with curl: health, the Unix socket (mode 0600) and TCP, import
# over HTTP equal to the CLI's, queries over HTTP equal to `ember query` on
# the same directory (collapsed, top, json), labels and values with
# match[], every error status (400, 401, 404, 405, 413), the token, the
# metrics and access log, refusals on the command line, and SIGTERM
# stopping with exit 0.
set -eu
EMBER=${EMBER:-build/ember}
data=tests/data
. tests/e2e/lib/serve.sh
serve_init
db=$tmp/db
sock=$tmp/s.sock

# start ARGS...: a server on $sock and a free TCP port ($port)
start() {
  serve_start "$db" --listen "unix:$sock" --listen tcp:0 "$@"
}
stop() {
  serve_stop
  grep -q "SIGTERM: stopping" "$tmp/log" || fail "no stop message"
  [ ! -e "$sock" ] || fail "the socket file was left behind"
}
# status WANT CURL-ARGS...: the HTTP status of a request is WANT
status() {
  want=$1
  shift
  got=$(curl -s -o "$tmp/body" -w '%{http_code}' "$@") || true
  [ "$got" = "$want" ] || fail "$*: status $got, not $want ($(cat "$tmp/body"))"
}
url() { echo "http://127.0.0.1:$port$1"; }

$EMBER import -d "$db" -l service=cli $data/collapsed/17*.txt 2> /dev/null
start

# health, and the socket's mode
[ "$(curl -s "$(url /healthz)")" = ok ] || fail "healthz"
[ "$(curl -s --unix-socket "$sock" http://ember/readyz)" = ready ] || fail "readyz"
[ "$(stat -c %a "$sock")" = 600 ] || fail "socket mode $(stat -c %a "$sock")"

# import over HTTP: what the CLI stores from the same file
for f in $data/collapsed/17*.txt; do
  status 200 --unix-socket "$sock" --data-binary "@$f" \
    "http://ember/api/v1/import?label=service=http&time=$(basename "$f" .txt)"
  grep -q '"status":"success"' "$tmp/body" || fail "import answer: $(cat "$tmp/body")"
done
q() {  # q FORMAT SERVICE: the query over HTTP
  curl -s -G --data-urlencode "query={service=\"$2\"}" --data-urlencode "format=$1" "$(url /api/v1/query)"
}
q collapsed http | LC_ALL=C sort > "$tmp/http"
$EMBER query -d "$db" -o collapsed '{service="cli"}' | LC_ALL=C sort > "$tmp/cli"
[ -s "$tmp/cli" ] || fail "the CLI's query is empty"
cmp -s "$tmp/http" "$tmp/cli" || { diff "$tmp/http" "$tmp/cli" | head; fail "HTTP import + query differs from the CLI's"; }
q top http > "$tmp/http_top"
$EMBER query -d "$db" -o top '{service="http"}' > "$tmp/cli_top"
cmp -s "$tmp/http_top" "$tmp/cli_top" || fail "top over HTTP differs from the CLI's"
# a POSTed form is the same query
curl -s --data-urlencode 'query={service="http"}' -d format=collapsed "$(url /api/v1/query)" |
  LC_ALL=C sort | cmp -s - "$tmp/cli" || fail "POST form query differs"
q json http | grep -q '"kind":"profile"' || fail "json query"

# go tool pprof opens a query's URL: its top equals ember query -o top
status 200 --data-binary @$data/pprof/cpu.pb.gz "$(url /api/v1/import?label=service=go)"
. tests/e2e/lib/pprof_compare.sh
gq='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{service="go"}'
genc=$(printf '%s' "$gq" | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g')
PPROF_TMPDIR=$tmp HOME=$tmp GOCACHE=$tmp/gocache pc_top "$(url "/api/v1/query?format=pprof&query=$genc")" |
  pc_rows > "$tmp/go_rows"
$EMBER query -d "$db" -o top "$gq" | pc_rows > "$tmp/ember_rows"
[ -s "$tmp/go_rows" ] || fail "go tool pprof read nothing from the URL"
cmp -s "$tmp/go_rows" "$tmp/ember_rows" || { diff "$tmp/go_rows" "$tmp/ember_rows" | head; fail "go tool pprof -top URL differs"; }

# an import that fails writes nothing
before=$(curl -s "$(url /api/v1/status)" | sed 's/.*"samples":\([0-9]*\).*/\1/')
status 400 --data-binary 'main;f 1
junk line' "$(url /api/v1/import)"
grep -q '"errorType":"bad_data"' "$tmp/body" || fail "bad import body: $(cat "$tmp/body")"
after=$(curl -s "$(url /api/v1/status)" | sed 's/.*"samples":\([0-9]*\).*/\1/')
[ "$before" = "$after" ] || fail "a refused import changed the samples: $before -> $after"

# labels, values, types, with and without match[]
[ "$(curl -s "$(url /api/v1/labels)")" = '{"status":"success","data":["service","worker"]}' ] || fail "labels"
[ "$(curl -s "$(url /api/v1/label/service/values)")" = '{"status":"success","data":["cli","go","http"]}' ] || fail "values"
[ "$(curl -s -G --data-urlencode 'match[]={service="cli"}' "$(url /api/v1/label/service/values)")" = \
  '{"status":"success","data":["cli"]}' ] || fail "values with match[]"
[ "$(curl -s -G --data-urlencode 'match[]={service="cli"}' --data-urlencode 'match[]={service="http"}' \
  "$(url /api/v1/label/service/values)")" = '{"status":"success","data":["cli","http"]}' ] || fail "values, two match[]"
curl -s "$(url /api/v1/types)" | grep -q 'collapsed:samples:count' || fail "types"
# series: the label sets match[] selects, each with its type as __type__:
# every one of service cli, their types what the CLI lists for it
curl -s -G --data-urlencode 'match[]={service="cli"}' "$(url /api/v1/series)" |
  python3 -c 'import json, sys
d = json.load(sys.stdin)["data"]
assert d and all(s["service"] == "cli" for s in d), d
print("\n".join(sorted({s["__type__"] for s in d})))' > "$tmp/series_types" ||
  fail "series: $(curl -s -G --data-urlencode 'match[]={service="cli"}' "$(url /api/v1/series)")"
$EMBER query -d "$db" -o csv 'profile_types({service="cli"})' | tail -n +2 | LC_ALL=C sort > "$tmp/cli_types"
cmp -s "$tmp/series_types" "$tmp/cli_types" || fail "series types differ from the CLI's"
status 400 "$(url /api/v1/series)"

# errors: each status with a JSON body naming what
status 400 -G --data-urlencode 'query=merge({' "$(url /api/v1/query)"
grep -q 'parse error at column' "$tmp/body" || fail "400 body: $(cat "$tmp/body")"
status 400 "$(url /api/v1/query)"
status 400 -G --data-urlencode 'query={service="cli"}' -d from=yesterday-ish "$(url /api/v1/query)"
status 400 -G --data-urlencode 'query={service="cli"}' -d format=nope "$(url /api/v1/query)"
status 400 "$(url '/api/v1/label/bad-name/values')"
status 404 "$(url /api/v2/query)"
grep -q '"errorType":"not_found"' "$tmp/body" || fail "404 body"
status 405 -X DELETE "$(url /api/v1/query)"
many=$(awk 'BEGIN { for (i = 0; i < 600; i++) printf "%sp%d=1", i ? "&" : "", i }')
status 400 "$(url "/api/v1/labels?$many")"
grep -q 'more than 256 parameters' "$tmp/body" || fail "600 parameters: $(cat "$tmp/body")"
status 405 "$(url /api/v1/import)"

# metrics count what was answered; the access log has a line per request
curl -s "$(url /metrics)" > "$tmp/metrics"
grep -q '^ember_http_requests_total{path="/api/v1/import",code="2xx"} 4$' "$tmp/metrics" || fail "metrics: imports"
grep -q '^ember_http_requests_total{path="/api/v1/import",code="4xx"} 1$' "$tmp/metrics" || fail "metrics: refused imports"
grep -q '^ember_http_request_duration_seconds_bucket{path="/api/v1/query",le="+Inf"} ' "$tmp/metrics" || fail "metrics: histogram"
grep -q '^ember_db_samples [1-9]' "$tmp/metrics" || fail "metrics: samples"
grep -q '"POST /api/v1/import HTTP/1.1" 200 ' "$tmp/log" || fail "access log"
grep -q '^unix - - ' "$tmp/log" || fail "access log: unix client"
stop

# a body over --max-body is 413, before or while it is read
head -c 5000 /dev/zero > "$tmp/big"
start --max-body 4096
status 413 --data-binary "@$tmp/big" "$(url /api/v1/import)"
grep -q 'over the limit of 4096' "$tmp/body" || fail "413 body: $(cat "$tmp/body")"
status 413 -H 'Transfer-Encoding: chunked' --data-binary "@$tmp/big" "$(url /api/v1/import)"
status 200 "$(url /healthz)"
stop

# a token: every request but health needs it, compared whole
printf 's3cret-token\n' > "$tmp/token"
start --token-file "$tmp/token"
status 401 "$(url /api/v1/labels)"
status 401 -H 'Authorization: Bearer s3cret' "$(url /api/v1/labels)"
status 401 -H 'Authorization: Bearer s3cret-token-and-more' "$(url /api/v1/labels)"
status 200 -H 'Authorization: Bearer s3cret-token' "$(url /api/v1/labels)"
status 200 "$(url /healthz)"
stop

# the command line refuses what it cannot serve safely
st=0
$EMBER serve -d "$db" --listen tcp:0.0.0.0:0 2> "$tmp/err" || st=$?
[ "$st" = 2 ] && grep -q 'needs --token-file' "$tmp/err" || fail "open TCP without a token: $st $(cat "$tmp/err")"
st=0
$EMBER serve -d "$db" --listen udp:1 2> "$tmp/err" || st=$?
[ "$st" = 2 ] || fail "a bad --listen: exit $st"

# a request in flight when SIGTERM comes still gets its answer: its body
# trickles in (curl --limit-rate), SIGTERM comes once the server has its
# headers (in flight: the status request and it); a connection that has
# sent nothing yet is not a request, and stopping closes it
start
big=$tmp/bigcollapsed
awk 'BEGIN { for (i = 0; i < 50000; i++) printf "main;f%d;g%d %d\n", i % 500, i, i + 1 }' > "$big"
curl -s -o "$tmp/slow" -w '%{http_code}' --limit-rate 400k --data-binary "@$big" \
  "$(url /api/v1/import?label=service=slow)" > "$tmp/slow_status" &
cpid=$!
for _ in $(seq 3000); do
  curl -s "$(url /api/v1/status)" | grep -q '"requests_in_flight":[2-9]' && break
  sleep 0.02
done
stop
wait "$cpid" || true
[ "$(cat "$tmp/slow_status")" = 200 ] || fail "in-flight import: $(cat "$tmp/slow_status") $(cat "$tmp/slow")"
$EMBER query -d "$db" -o collapsed '{service="slow"}' | wc -l | grep -q '^50000$' || fail "in-flight import not stored whole"
$EMBER verify -d "$db" > /dev/null || fail "verify after stop"
echo "serve: ok"
