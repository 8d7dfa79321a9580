#!/bin/sh
# bench/serve.sh BUILD: `ember serve` against the same calls in process
# (issue 14, "Benchmark"), on the 600 real Go CPU profiles of
# bench/go600.sh, over TCP on loopback, driven by wrk (Debian's). Called
# by bench/run.sh; alone: `sh bench/serve.sh build` after make bench-bin.
#
#   ingest   POST /api/v1/import of the profiles in turn (wrk_push.lua) by
#            1, 8 and 64 concurrent connections for SECS seconds, into a
#            fresh database each, against bench_serve import: ember_import
#            of the same files in turn in one thread (one transaction and
#            fsync per file either way). MB/s of the files as sent
#            (gzipped), and the ratio to in-process.
#   latency  p50 and p99 of one client's requests over LAT_SECS seconds
#            (wrk --latency) against N in-process calls (bench_serve
#            latency): label values, a merge of the whole hour of data
#            rendered as top, and the flame graph (json); the difference
#            of the p50s is what HTTP adds.
#   conns    1,000 keep-alive connections doing label values for LONG
#            seconds: requests/s, errors (socket errors and non-2xx) and
#            the server's peak RSS (VmHWM).
# Prints a Markdown table, also kept in BUILD/bench-serve.md.
set -eu
build=${1:-build}
SECS=${SECS:-10}
LAT_SECS=${LAT_SECS:-5}
LONG=${LONG:-60}
N=${N:-2000}
ember=$build/ember
bs=$build/bench/bench_serve
out=$build/bench-serve.md
type='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta'

note() { echo "bench serve: $*" >&2; }
die() { note "$*"; exit 1; }
for f in "$ember" "$bs"; do
    [ -x "$f" ] || die "$f is missing: run make bench-bin first"
done
command -v wrk > /dev/null || die "wrk is missing: install wrk (make deps)"
ulimit -n 8192 2> /dev/null || ulimit -n "$(ulimit -Hn)"
EMBER=$ember
. tests/e2e/lib/serve.sh
serve_init

data=$(sh bench/go600.sh "$build")
files=$(ls "$data"/cpu-*.pb.gz)
avg=$(cat $files | wc -c)
avg=$((avg / 600))

# serve DB: starts a server on a free port ($port, $pid)
serve() {
    serve_start "$1" --listen tcp:0 --access-log off --max-connections 4096
}
unserve() { serve_stop; }
# errors WRKOUT: socket errors plus non-2xx answers
errors() {
    awk '/Socket errors/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) e += $i }
         /Non-2xx/ { e += $NF } END { print e + 0 }' "$1"
}
rps() { awk '/^Requests\/sec/ { print $2 }' "$1"; }
# pct WRKOUT P: wrk's P% latency in microseconds
pct() {
    awk -v p="$2%" '$1 == p { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
        m = u == "us" ? 1 : u == "ms" ? 1000 : u == "s" ? 1e6 : u == "m" ? 6e7 : 1
        printf "%.1f\n", v * m }' "$1"
}

# ---- ingest -----------------------------------------------------------------
note "ingest in process, ${SECS}s"
rm -rf "$tmp/in.db"
$bs import "$tmp/in.db" "$SECS" $files > "$tmp/in"
in_mbs=$(awk '/^bytes/ { b = $2 } /^seconds/ { s = $2 } END { printf "%.2f", b / s / 1e6 }' "$tmp/in")
in_rps=$(awk '/^requests/ { r = $2 } /^seconds/ { s = $2 } END { printf "%.0f", r / s }' "$tmp/in")
rows=""
for c in 1 8 64; do
    note "ingest over HTTP, $c connections, ${SECS}s"
    rm -rf "$tmp/http.db"
    serve "$tmp/http.db"
    t=2; [ "$c" -lt 2 ] && t=1
    wrk -t "$t" -c "$c" -d "${SECS}s" -s bench/wrk_push.lua \
        "http://127.0.0.1:$port/api/v1/import?label=service=bench" -- $files \
        > "$tmp/wrk_in_$c" 2>&1
    unserve
    r=$(rps "$tmp/wrk_in_$c")
    mbs=$(echo "$r $avg" | awk '{ printf "%.2f", $1 * $2 / 1e6 }')
    ratio=$(echo "$mbs $in_mbs" | awk '{ printf "%.2f", $1 / $2 }')
    rows="$rows| ingest, $c connection(s) | $mbs MB/s, $r req/s, $(errors "$tmp/wrk_in_$c") errors | $in_mbs MB/s, $in_rps req/s | ${ratio}x |
"
done

# ---- latency ------------------------------------------------------------------
db=$tmp/lat.db
$ember import -d "$db" -l service=bench "$data" 2> /dev/null
serve "$db"
lat() {  # lat NAME PATH BENCH-ARGS...
    name=$1 path=$2
    shift 2
    wrk -t 1 -c 1 -d "${LAT_SECS}s" --latency "http://127.0.0.1:$port$path" > "$tmp/wrk_lat" 2>&1
    $bs latency "$db" "$N" "$@" > "$tmp/bs_lat"
    h50=$(pct "$tmp/wrk_lat" 50) h99=$(pct "$tmp/wrk_lat" 99)
    i50=$(awk '/^p50_us/ { print $2 }' "$tmp/bs_lat")
    i99=$(awk '/^p99_us/ { print $2 }' "$tmp/bs_lat")
    add=$(echo "$h50 $i50" | awk '{ printf "%.0f", $1 - $2 }')
    rows="$rows| $name | p50 $h50 us, p99 $h99 us, $(errors "$tmp/wrk_lat") errors | p50 $i50 us, p99 $i99 us | +$add us at p50 |
"
}
q=$(printf '%s{service="bench"}' "$type")
qenc=$(printf '%s' "$q" | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g')
note "latency over HTTP and in process"
lat "label values" /api/v1/label/service/values values service
lat "merge of the hour, top" "/api/v1/query?format=top&query=$qenc" query top "$q"
lat "flame graph (json)" "/api/v1/query?format=json&query=$qenc" query json "$q"

# ---- 1,000 connections ----------------------------------------------------------
note "1000 keep-alive connections, ${LONG}s"
wrk -t 2 -c 1000 -d "${LONG}s" --timeout 10s \
    "http://127.0.0.1:$port/api/v1/label/service/values" > "$tmp/wrk_conns" 2>&1
rss=$(awk '/^VmHWM/ { printf "%.1f MB", $2 / 1024 }' "/proc/$pid/status")
unserve
rows="$rows| 1000 connections, ${LONG}s, label values | $(rps "$tmp/wrk_conns") req/s, $(errors "$tmp/wrk_conns") errors, server peak RSS $rss | | |
"

{
    echo "| what | over HTTP | in process | HTTP / in process |"
    echo "|---|---|---|---|"
    printf '%s' "$rows"
} > "$out"
cat "$out"
