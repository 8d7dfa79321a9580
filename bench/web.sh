#!/bin/sh
# bench/web.sh BUILD: the page of `ember serve` measured in headless
# Chromium (issue 16; bench/RESULTS.md, "Issue 16"), printed, not asserted:
#
#   first flame graph  the 600 real Go CPU profiles of bench/go600.sh
#                      imported and served; the page opened on their merge
#                      over all time (?q=TYPE{}&from=&to=) five times, each
#                      a fresh navigation: milliseconds from navigation
#                      start to the end of the first draw (the page's
#                      ember.timing.firstFlame), and what the server takes
#                      for the same levels and totals (curl).
#   100,000 nodes      two collapsed profiles, imported and opened:
#                      "wide", 100,000 distinct leaves under 1,110 inner
#                      frames (101,112 nodes with the root: most leaves
#                      are under a pixel), and "deep", 1,000 stacks of 100
#                      distinct frames (100,001 nodes, every one at least
#                      a pixel wide: the most a redraw can have to fill);
#                      ember.flame.draw() 30 times each, whole, zoomed and
#                      with a search: median and max ms, as the script
#                      runs and once rasterized.
set -eu
build=${1:-build}
ember=$build/ember
type=process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta
note() { echo "bench web: $*" >&2; }
[ -x "$ember" ] || { note "$ember is missing: make first"; exit 1; }
data=$(sh bench/go600.sh "$build")
tmp=$(mktemp -d)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2> /dev/null; rm -rf "$tmp"' EXIT

$ember import -d "$tmp/db" "$data" > /dev/null 2>&1
# 10 x 10 x 10 inner frames, 100 leaves under each: 100,000 distinct stacks
awk 'BEGIN { srand(16); for (a = 0; a < 10; a++) for (b = 0; b < 10; b++)
  for (c = 0; c < 10; c++) for (d = 0; d < 100; d++)
    printf "big;a%d;b%d.%d;c%d.%d.%d;leaf%d.%d.%d.%d %d\n", a, a, b, a, b, c,
      a, b, c, d, 1 + int(rand() * 1000) }' > "$tmp/big.txt"
awk 'BEGIN { for (s = 0; s < 1000; s++) { line = "s" s;
    for (f = 1; f < 100; f++) line = line ";f" f "." s; print line, 1 + s % 7 } }' > "$tmp/deep.txt"
$ember import -d "$tmp/db" --format collapsed --type big:samples:count:samples:count:delta \
  -l service=big "$tmp/big.txt" > /dev/null 2>&1
$ember import -d "$tmp/db" --format collapsed --type deep:samples:count:samples:count:delta \
  -l service=deep "$tmp/deep.txt" > /dev/null 2>&1
big=big:samples:count:samples:count:delta
deep=deep:samples:count:samples:count:delta

$ember serve -d "$tmp/db" --listen tcp:0 2> "$tmp/log" &
pid=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's/.*listening on tcp:[^ ]*:\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { note "the server did not start: $(cat "$tmp/log")"; exit 1; }
url=http://127.0.0.1:$port
enc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1"; }
levels() {
  curl -s -o "$tmp/l.json" -w '%{time_total} %{size_download}' -G "$url/api/v1/query" \
    --data-urlencode "query=$1" -d format=levels
}
srv=$(levels "$type{}"); srv=$(levels "$type{}")
tot=$(curl -s -o /dev/null -w '%{time_total}' -G "$url/api/v1/query" \
  --data-urlencode "query=sum(total($type{}))")
bigsrv=$(levels "$big{}"); bigsrv=$(levels "$big{}")
deepsrv=$(levels "$deep{}"); deepsrv=$(levels "$deep{}")

note "chromium: first flame graph of 600 profiles, 100,000-node redraws"
python3 bench/web_bench.py "$url/?q=$(enc "$type{}")&from=&to=" \
  "$url/?q=$(enc "$big{}")&from=&to=&v=flame" \
  "$url/?q=$(enc "$deep{}")&from=&to=&v=flame" > "$tmp/r.json"
python3 - "$tmp/r.json" "$srv" "$tot" "$bigsrv" "$deepsrv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
srv_s, srv_b = sys.argv[2].split()
print("| what | figure |")
print("|---|---|")
print("| first flame graph, 600 Go CPU profiles merged, from navigation start (5 loads) | %s ms (median %.0f ms) |"
      % (", ".join("%.0f" % x for x in r["first_ms"]), r["first_median_ms"]))
print("| ... its levels from the server (curl, warm) | %.0f ms, %.0f kB, %d nodes |"
      % (float(srv_s) * 1000, int(srv_b) / 1000, r["first_nodes"]))
print("| ... its totals over time (curl, warm) | %.0f ms |" % (float(sys.argv[3]) * 1000))
for name, rd, srv in (("wide", r["big"][0], sys.argv[4]), ("deep", r["big"][1], sys.argv[5])):
    s_s, s_b = srv.split()
    print("| %s 100,000-node graph: levels from the server (curl, warm) | %.0f ms, %.1f MB |"
          % (name, float(s_s) * 1000, int(s_b) / 1e6))
    print("| ... first flame graph from navigation start | %.0f ms |" % rd["first_ms"])
    print("| ... parse into typed arrays (set) | %.1f ms, %d nodes |" % (rd["parse_ms"], rd["nodes"]))
    for k, what in (("whole", "redraw, whole graph"), ("zoomed", "redraw, zoomed into the widest child"),
                    ("search", "redraw with a search highlighting")):
        x = rd[k]
        print("| ... %s (30 draws, %dx%d canvas, %d nodes drawn) | script median %.1f ms (max %.1f); "
              "rasterized median %.1f ms (max %.1f) |"
              % (what, rd["canvas"][0], rd["canvas"][1], x["drawn"], x["median"], x["max"],
                 x["raster_median"], x["raster_max"]))
PY
