#!/bin/sh
# tests/e2e/web_page.sh: the page of `ember serve` (docs/web.md) on real Go
# profiles, in headless Chromium through chromedriver.
#
# 24 CPU profiles of tests/go/profgen (the cache tests/e2e/pprof_go.sh
# keeps, made here when it is missing) are imported and served; then:
#   - over HTTP: / and /ui/* answer with their content types, a strong
#     ETag, Cache-Control: no-cache, a 304 to If-None-Match, the page's
#     Content-Security-Policy; the page refers to nothing outside the
#     server (no CDN: it works with no network), and loads without the
#     token a --token-file server asks of the API; format=levels answers a
#     profile and a diff as JSON whose totals are `ember query`'s, and a
#     grouped result is a 400;
#   - in the browser (tests/e2e/lib/web_page.py): a query typed with
#     completion draws the hottest function of `ember query -o top`, a
#     click zooms (reset and back work), search highlights frames and rows,
#     the frame menu opens the sandwich (or says it is not available),
#     a drag selects a range and Compare draws a diff of two ranges, and
#     the URL opened again shows the same view.
# EMBER_WEB_SHOTS=DIR keeps the screenshots (page, zoom, sandwich, compare)
# for docs/web.md. Chromium and chromedriver are dependencies (make deps):
# without them this test fails, it does not skip.
set -eu
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
. tests/e2e/lib/serve.sh
serve_init

for tool in python3 chromium chromedriver curl; do
  command -v "$tool" > /dev/null || fail "$tool is missing (make deps installs it)"
done
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

# ---- the data: 24 real CPU profiles, cached ---------------------------------
src=tests/go/profgen/main.go
stamp="v2 $(cksum < "$src")"
data=
for d in "$BUILD/go-data" build/go-data; do
  [ "$(cat "$d/stamp" 2> /dev/null)" = "$stamp" ] && [ -d "$d/many" ] && data=$d/many && break
done
if [ -z "$data" ]; then
  command -v go > /dev/null || fail "go is missing: install golang-go (make deps does)"
  data=$BUILD/web-data
  if [ "$(cat "$data.stamp" 2> /dev/null)" != "$stamp" ]; then
    rm -rf "$data" && mkdir -p "$data"
    export GO111MODULE=off GOFLAGS= GOCACHE="$(abs "$BUILD/gocache")" \
           GOPATH="$(abs "$BUILD/gopath")" HOME="${HOME:-$tmp}"
    go build -o "$tmp/profgen" "$src" || fail "go build $src"
    "$tmp/profgen" -out "$tmp/many" -n 24 -cpu 150ms -seed 11 || fail "profgen"
    mv "$tmp"/many/cpu-*.pb.gz "$data/"
    echo "$stamp" > "$data.stamp"
  fi
fi

db=$tmp/db
$EMBER import -d "$db" "$data" > "$tmp/imp" 2>&1 || fail "import: $(cat "$tmp/imp")"
type=process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta
# the hottest function: the first row of pprof's top
hottest=$($EMBER query -d "$db" -o top "$type" | awk 'f { print $6; exit } / flat +flat%/ { f = 1 }')
[ -n "$hottest" ] || fail "no hottest function in ember query -o top"
total=$($EMBER query -d "$db" -o json "$type" | sed -n 's/.*"total":\([0-9]*\).*/\1/p' | head -1)

serve_start "$db" --listen tcp:0
url=http://127.0.0.1:$port

# ---- over HTTP -------------------------------------------------------------
curl -s -D "$tmp/h" -o "$tmp/index.html" "$url/" || fail "GET /"
grep -qi '^Content-Type: text/html; charset=utf-8' "$tmp/h" || fail "/ is not html: $(cat "$tmp/h")"
grep -qi '^Cache-Control: no-cache' "$tmp/h" || fail "/ has no Cache-Control: no-cache"
grep -qi "^Content-Security-Policy: default-src 'self'" "$tmp/h" || fail "/ has no CSP"
etag=$(sed -n 's/^[Ee][Tt][Aa][Gg]: \(.*\)\r$/\1/p' "$tmp/h")
[ -n "$etag" ] || fail "/ has no ETag"
st=$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$url/")
[ "$st" = 304 ] || fail "If-None-Match of the ETag gave $st, not 304"
! grep -Eq "(src|href)=[\"']?(https?:)?//" "$tmp/index.html" || fail "the page refers to outside resources"
for f in $(grep -o '"/ui/[^"]*"' "$tmp/index.html" | tr -d '"'); do
  st=$(curl -s -o "$tmp/asset" -w '%{http_code} %{content_type}' "$url$f")
  case "$f:$st" in
  *.js:"200 text/javascript; charset=utf-8" | *.css:"200 text/css; charset=utf-8" | *.svg:"200 image/svg+xml") ;;
  *) fail "GET $f: $st" ;;
  esac
  ! grep -Eq "(src|href|action)=[\"']?(https?:)?//|url\([\"']?(https?:)?//|fetch\([\"'](https?:)?//" \
    "$tmp/asset" || fail "$f refers to an outside address"
done
st=$(curl -s -o /dev/null -w '%{http_code}' "$url/ui/nope.js")
[ "$st" = 404 ] || fail "GET /ui/nope.js gave $st, not 404"

curl -s -G "$url/api/v1/query" --data-urlencode "query=$type" -d format=levels > "$tmp/levels.json"
python3 - "$tmp/levels.json" "$total" <<'EOF' || fail "format=levels: $(head -c 300 "$tmp/levels.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "profile" and d["names"][0] == "total", d["kind"]
assert d["total"] == int(sys.argv[2]), (d["total"], sys.argv[2])
assert d["levels"][0][1] == d["total"] and len(d["levels"][0]) == 4
assert all(len(l) % 4 == 0 for l in d["levels"])
EOF
curl -s -G "$url/api/v1/query" -d format=levels \
  --data-urlencode "query=diff($type{worker=\"hash\"}, $type{worker=\"sort\"})" > "$tmp/diff.json"
python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); assert d["kind"] == "diff" and all(len(l) % 7 == 0 for l in d["levels"]) and d["base_total"] > 0 and d["target_total"] > 0' \
  "$tmp/diff.json" || fail "format=levels of a diff: $(head -c 300 "$tmp/diff.json")"
st=$(curl -s -o "$tmp/err" -w '%{http_code}' -G "$url/api/v1/query" -d format=levels \
  --data-urlencode "query=merge by (worker) ($type)")
[ "$st" = 400 ] && grep -q 'one profile' "$tmp/err" || fail "levels of groups: $st $(cat "$tmp/err")"

# with a token the page still loads (it holds no data), the API does not
serve_stop
printf 'page-token\n' > "$tmp/token"
serve_start "$db" --listen tcp:0 --token-file "$tmp/token"
st=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")
[ "$st" = 200 ] || fail "with a token, GET / gave $st"
st=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/api/v1/types")
[ "$st" = 401 ] || fail "with a token, the API without it gave $st"
serve_stop
serve_start "$db" --listen tcp:0
url=http://127.0.0.1:$port

# ---- in the browser -----------------------------------------------------------
shots=${EMBER_WEB_SHOTS:-}
[ -z "$shots" ] || mkdir -p "$shots"
python3 tests/e2e/lib/web_page.py "$url/" --type "$type" --hottest "$hottest" \
  ${shots:+--shots "$shots"} > "$tmp/out" 2>&1 || fail "the page: $(cat "$tmp/out")"
cat "$tmp/out"
serve_stop
echo "web_page: ok"
