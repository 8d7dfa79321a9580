#!/bin/sh
# bench/pprof.sh BUILD: pprof import and merge against go tool pprof, on
# real Go CPU profiles (issue 3, "Benchmark"). Called by bench/run.sh;
# alone: `sh bench/pprof.sh build` (BUILD holds ember and bench/bench_pprof:
# run make bench-bin first).
#
# Data: 600 real Go CPU profiles of 100 ms of varied work each, made and
# cached by bench/go600.sh. Times are medians (RUNS, MERGE_RUNS, GO_RUNS runs)
# of the wall clock and of the process's CPU time (user + system, from
# wait4), process start included on both sides; the CPU figures are the
# ones to trust on a busy machine. Measured:
#   import   `ember import -d DB DIR` of the 600 files into a fresh database
#            (fsync at commit): MB/s of pprof after gunzip and samples/s
#            (Ember samples: one per pprof sample and sample type); also
#            bench_pprof, the same decode and batched writes in-process;
#   merge    `ember query TYPE{} -o pprof` and `-o top` over the 600 stored
#            profiles against `go tool pprof -proto FILES` over the files,
#            and the two answers are checked to be the same (go tool pprof
#            -top of both, every row);
#   size     `ember stats` file and used bytes against the .pb.gz files.
# Prints a Markdown table, also kept in BUILD/bench-pprof.md.
set -eu
build=${1:-build}
RUNS=${RUNS:-11}                # imports
MERGE_RUNS=${MERGE_RUNS:-21}    # Ember merges (a few ms each)
GO_RUNS=${GO_RUNS:-7}           # go tool pprof merges (slow)
ember=$build/ember
bp=$build/bench/bench_pprof
bench=$build/bench-data
db=$bench/pprof.db
sealed=$bench/pprof-sealed.db
out=$build/bench-pprof.md
type='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta'

note() { echo "bench pprof: $*" >&2; }
die() { note "$*"; exit 1; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
for f in "$ember" "$bp"; do
    [ -x "$f" ] || die "$f is missing: run make bench-bin first"
done
command -v go > /dev/null || die "go is missing: install golang-go (make deps)"
export GO111MODULE=off GOFLAGS= GOCACHE="$(abs "$build/gocache")" \
       GOPATH="$(abs "$build/gopath")" HOME="${HOME:-/tmp}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- the 600 profiles -------------------------------------------------------

data=$(sh bench/go600.sh "$build")
files=$(ls "$data"/cpu-*.pb.gz)
nfiles=$(echo "$files" | wc -l)
[ "$nfiles" = 600 ] || die "$data holds $nfiles profiles, not 600"
[ "$(ls "$data" | wc -l)" = 600 ] || die "$data holds more than the profiles"
gz_bytes=$(cat $files | wc -c)
raw_bytes=$(cat $files | gzip -dc | wc -c)

# ---- timing ---------------------------------------------------------------------

# timeit N [--prep SHELLCMD] CMD...: runs CMD N times (SHELLCMD before each,
# untimed), stdout to /dev/null, the last run's stderr in $tmp/err; prints
# "WALL CPU", the medians in seconds: wall clock around the child, and its
# user + system time from wait4 (exact, and blind to other processes'
# turns on a busy machine). python3 only for the clocks: date(1) forks
# cost as much as an ember query takes.
cat > "$tmp/timeit.py" <<'PY'
import os, statistics, subprocess, sys, time
n, args, prep = int(sys.argv[1]), sys.argv[2:], None
if args[0] == "--prep":
    prep, args = args[1], args[2:]
walls, cpus = [], []
for _ in range(n):
    if prep:
        subprocess.run(prep, shell=True, check=True)
    with open(os.environ["TIMEIT_ERR"], "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        walls.append(time.perf_counter() - t0)
    cpus.append(ru.ru_utime + ru.ru_stime)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("failed: " + " ".join(args))
print("%.6f %.6f" % (statistics.median(walls), statistics.median(cpus)))
PY
export TIMEIT_ERR="$tmp/err"
timeit() {
    python3 "$tmp/timeit.py" "$@" || die "$*: $(tail -3 "$tmp/err")"
}

# ---- import -------------------------------------------------------------------

note "import: $nfiles files, $gz_bytes bytes gzip'd, $raw_bytes after gunzip"
set -- $(timeit "$RUNS" --prep "rm -rf '$db'" $ember import -d "$db" "$data")
t_import=$1 c_import=$2
summary=$(cat "$tmp/err")
samples=$(echo "$summary" | sed -n 's/.* \([0-9][0-9]*\) samples,.*/\1/p')
profiles=$(echo "$summary" | sed -n 's/.* \([0-9][0-9]*\) profiles,.*/\1/p')
[ -n "$samples" ] || die "no sample count in: $summary"
note "import: median $t_import s wall, $c_import s CPU ($summary)"

note "import in process: bench_pprof --runs $RUNS"
$bp --runs "$RUNS" --dir "$bench/pprof-bp.db" "$data" > "$tmp/bp" ||
    die "bench_pprof failed"
bpv() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/bp"; }

# ---- merge ----------------------------------------------------------------------

note "merge: ember query -o pprof and -o top, $MERGE_RUNS runs each"
set -- $(timeit "$MERGE_RUNS" $ember query -d "$db" -o pprof "$type{}")
t_eprof=$1 c_eprof=$2
set -- $(timeit "$MERGE_RUNS" $ember query -d "$db" -o top --unit ns "$type{}")
t_etop=$1 c_etop=$2
note "merge: go tool pprof -proto over $nfiles files, $GO_RUNS runs"
set -- $(timeit "$GO_RUNS" go tool pprof -symbolize=none -proto $files)
t_go=$1 c_go=$2

# The 600 profiles span two minutes, so they all sit in open head chunks
# (one record per profile) until their window closes; a copy sealed at
# once (ember_seal) is what the same data looks like a window later.
note "merge: the same after ember_seal"
rm -rf "$sealed"
cp -r "$db" "$sealed"
$bp --seal "$sealed" || die "bench_pprof --seal failed"
set -- $(timeit "$MERGE_RUNS" $ember query -d "$sealed" -o pprof "$type{}")
t_sprof=$1
set -- $(timeit "$MERGE_RUNS" $ember query -d "$sealed" -o top --unit ns "$type{}")
t_stop=$1

# The same answer: go tool pprof -top of go's merge (cpu values) against
# go tool pprof -top of Ember's export and against Ember's own top, both
# databases.
. tests/e2e/lib/pprof_compare.sh
go tool pprof -symbolize=none -proto $files > "$tmp/merged.pb.gz" 2> /dev/null
pc_top -sample_index=cpu -unit=ns "$tmp/merged.pb.gz" | pc_rows > "$tmp/want"
same=yes
for d in "$db" "$sealed"; do
    $ember query -d "$d" -o pprof "$type{}" > "$tmp/ember.pb.gz"
    pc_top -unit=ns "$tmp/ember.pb.gz" | pc_rows > "$tmp/got"
    $ember query -d "$d" -o top --unit ns "$type{}" | pc_rows > "$tmp/got_top"
    pc_same "$tmp/want" "$tmp/got" "$d: export against go's merge" || same=NO
    pc_same "$tmp/want" "$tmp/got_top" "$d: top against go's merge" || same=NO
done

# ---- size -----------------------------------------------------------------------

stat_of() { $ember stats -d "$1" | awk -v k="$2" '$1 " " $2 == k { print $3 }'; }
file_bytes=$(stat_of "$db" "file bytes")
used_bytes=$(stat_of "$db" "used bytes")
chunk_bytes=$(stat_of "$db" "chunk bytes")
schunk_bytes=$(stat_of "$sealed" "chunk bytes")

# ---- the table ------------------------------------------------------------------

awk -v n="$nfiles" -v gz="$gz_bytes" -v raw="$raw_bytes" \
    -v samples="$samples" -v profiles="$profiles" \
    -v t_imp="$t_import" -v c_imp="$c_import" \
    -v bp_dec="$(bpv decode_mb_per_s)" -v bp_dec_s="$(bpv decode_samples_per_s)" \
    -v bp_imp="$(bpv import_mb_per_s)" -v bp_imp_s="$(bpv import_samples_per_s)" \
    -v bp_cpu="$(bpv import_cpu_mb_per_s)" -v bp_cpu_s="$(bpv import_cpu_samples_per_s)" \
    -v t_eprof="$t_eprof" -v c_eprof="$c_eprof" -v t_etop="$t_etop" \
    -v c_etop="$c_etop" -v t_go="$t_go" -v c_go="$c_go" -v same="$same" \
    -v fileb="$file_bytes" -v usedb="$used_bytes" -v chunkb="$chunk_bytes" \
    -v schunkb="$schunk_bytes" -v t_sprof="$t_sprof" -v t_stop="$t_stop" \
    -v runs="$RUNS" -v mruns="$MERGE_RUNS" -v gruns="$GO_RUNS" '
function ok(c) { return c ? "ok" : "MISS" }
function row(m, v, t, c) { printf "| %s | %s | %s | %s |\n", m, v, t, t == "" ? "" : ok(c) }
BEGIN {
    mb = raw / 1e6
    printf "| metric | value | target | |\n|---|---:|---|---|\n"
    row(sprintf("input: %d Go CPU profiles (%d Ember profiles, %d samples), .pb.gz / after gunzip", n, profiles, samples),
        sprintf("%.2f MB / %.2f MB", gz / 1e6, mb))
    row(sprintf("`ember import DIR`, wall / CPU (median of %d)", runs), sprintf("%.3f s / %.3f s", t_imp, c_imp))
    row("`ember import`, MB/s of pprof after gunzip, wall", sprintf("%.1f MB/s", mb / t_imp), ">= 50 MB/s", mb / t_imp >= 50)
    row("`ember import`, MB/s per CPU second (one core)", sprintf("%.1f MB/s", mb / c_imp), ">= 50 MB/s", mb / c_imp >= 50)
    row("`ember import`, samples/s, wall / per CPU second", sprintf("%.0f / %.0f", samples / t_imp, samples / c_imp))
    row("bench_pprof (in process), decode only: MB/s, samples/s", sprintf("%.1f MB/s, %.0f", bp_dec, bp_dec_s))
    row("bench_pprof, decode + write, wall: MB/s, samples/s", sprintf("%.1f MB/s, %.0f", bp_imp, bp_imp_s), ">= 50 MB/s", bp_imp >= 50)
    row("bench_pprof, decode + write, per CPU second: MB/s, samples/s", sprintf("%.1f MB/s, %.0f", bp_cpu, bp_cpu_s), ">= 50 MB/s", bp_cpu >= 50)
    row(sprintf("merge, `go tool pprof -proto` over the %d files, wall / CPU (median of %d)", n, gruns), sprintf("%.4f s / %.4f s", t_go, c_go))
    row(sprintf("merge, `ember query -o pprof` over the %d stored profiles, wall / CPU (median of %d)", n, mruns), sprintf("%.4f s / %.4f s", t_eprof, c_eprof))
    row(sprintf("merge, `ember query -o top`, wall / CPU (median of %d)", mruns), sprintf("%.4f s / %.4f s", t_etop, c_etop))
    row("merge speed-up of `-o pprof` against go tool pprof, wall", sprintf("%.1fx", t_go / t_eprof), ">= 50x", t_go / t_eprof >= 50)
    row("merge speed-up of `-o top` against go tool pprof, wall", sprintf("%.1fx", t_go / t_etop), ">= 50x", t_go / t_etop >= 50)
    row("merge after ember_seal, `-o pprof` / `-o top`, wall", sprintf("%.4f s / %.4f s", t_sprof, t_stop))
    row("merge speed-up after ember_seal, `-o pprof` against go tool pprof, wall", sprintf("%.1fx", t_go / t_sprof), ">= 50x", t_go / t_sprof >= 50)
    row("merge speed-up after ember_seal, `-o top` against go tool pprof, wall", sprintf("%.1fx", t_go / t_stop), ">= 50x", t_go / t_stop >= 50)
    row("same merged answer (every `go tool pprof -top` row, flat and cum)", same)
    row("bytes on disk, file / used (`ember stats`)", sprintf("%d / %d", fileb, usedb))
    row("bytes on disk against the .pb.gz files, file / used", sprintf("%.2fx / %.2fx", fileb / gz, usedb / gz))
    row("sample data (chunk bytes), head / after ember_seal", sprintf("%d / %d", chunkb, schunkb))
}' > "$out"
cat "$out"
rm -rf "$db" "$sealed"
[ "$same" = yes ] || die "Ember's merged answer differs from go tool pprof's"
