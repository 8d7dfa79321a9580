#!/bin/sh
# bench/corpus15.sh BUILD: makes sure BUILD/bench-data/corpus15 holds the
# real corpus of the storage benchmark (issue 15) and prints its path: ten
# minutes of three Go services (bench/svcgen: api, ingest, search), each
# writing a CPU and a heap profile every 10 s into corpus15/SERVICE/, and
# perf's call stacks of the same processes over the same minutes
# (`perf record -e cpu-clock -F 199 -g`, then `perf script --header -F
# +pid`, gzip'd) in corpus15/perf/perf.txt.gz. Generated once (the ten
# minutes, with about one core busy, and a minute of perf script) and
# cached: the stamp beside the directory names the configuration, and a
# run cut short is redone from the start. Without perf, or where perf may
# not record, the corpus has no perf part: the stamp says so and the
# benchmark's figures say which corpus they are of.
#   CORPUS_SECS=60 sh bench/corpus15.sh build    (a short corpus, its own stamp)
set -eu
build=${1:-build}
bench=$build/bench-data
secs=${CORPUS_SECS:-600}
data=$bench/corpus15
[ "$secs" = 600 ] || data=$bench/corpus15-${secs}s
src=bench/svcgen/main.go
freq=199
flags="-every 10s -memrate 4096 -idle 4ms"
die() { echo "bench corpus15: $*" >&2; exit 1; }
note() { echo "bench corpus15: $*" >&2; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
command -v go > /dev/null || die "go is missing: install golang-go (make deps)"
export GO111MODULE=off GOFLAGS= GOCACHE="$(abs "$build/gocache")" \
       GOPATH="$(abs "$build/gopath")" HOME="${HOME:-/tmp}"

# perf_ok: perf is there and may record a process with call graphs here.
perf_ok() {
    command -v perf > /dev/null || return 1
    perf record -q -e cpu-clock -g -o "$data.tmp/probe.data" -- true \
        > /dev/null 2>&1 || return 1
    rm -f "$data.tmp/probe.data"
}

# run_services [PERF...]: the three services side by side for $secs
# seconds, under PERF... (perf record follows the shell's children). One
# line of shell: perf script --header prints the command line as it is,
# and ember import reads a line of it that is not a comment as an event.
run_services() {
    "$@" sh -c 'for s in api ingest search; do "$0" -name "$s" -out "$1/$s" -for "$2" $3 & done; wait' \
        "$bench/svcgen" "$data.tmp" "${secs}s" "$flags"
}

stamp_of() { echo "svcgen ${secs}s $flags perf=$1@${freq}Hz $(cksum < "$src")"; }
have=$(cat "$data.stamp" 2> /dev/null || true)
if [ "$have" != "$(stamp_of yes)" ] && [ "$have" != "$(stamp_of no)" ]; then
    note "generating $secs s of three Go services' profiles and perf stacks (once)"
    rm -rf "$data" "$data.tmp" "$data.stamp"
    mkdir -p "$data.tmp"
    go build -o "$bench/svcgen" "$src" || die "go build $src"
    if perf_ok; then
        perf=yes
        run_services perf record -q -e cpu-clock -F $freq -g \
            -o "$data.tmp/perf.data" -- || die "perf record of the services failed"
        note "perf script of the recording"
        mkdir -p "$data.tmp/perf"
        perf script --header -F +pid -i "$data.tmp/perf.data" 2> /dev/null |
            gzip -1 > "$data.tmp/perf/perf.txt.gz" || die "perf script failed"
        rm -f "$data.tmp/perf.data"
    else
        perf=no
        note "perf is missing or may not record here: the corpus has no perf stacks"
        run_services || die "the services failed"
    fi
    mkdir -p "$data"
    for d in api ingest search perf; do
        if [ -d "$data.tmp/$d" ]; then mv "$data.tmp/$d" "$data/"; fi
    done
    rm -rf "$data.tmp"
    stamp_of $perf > "$data.stamp"          # last: a cut-short run redoes all
fi
for s in api ingest search; do
    n=$(ls "$data/$s" | grep -c '^cpu-' || true)
    [ "$n" -ge $((secs / 10 - 1)) ] || die "$data/$s holds $n CPU profiles, not $((secs / 10))"
done
echo "$data"
