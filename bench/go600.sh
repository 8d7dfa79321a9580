#!/bin/sh
# bench/go600.sh BUILD: makes sure BUILD/bench-data/go600 holds the 600
# real Go CPU profiles the pprof and server benchmarks use, and prints its
# path. tests/go/profgen writes 600 successive CPU profiles of 100 ms of
# varied work each (-n 600 -cpu 100ms; the work's seed changes per
# profile); they are cached, so reruns skip the minute and a half it takes.
# The stamp sits beside the directory, which holds the profiles only, so
# that ember import can read the directory itself.
set -eu
build=${1:-build}
bench=$build/bench-data
data=$bench/go600
src=tests/go/profgen/main.go
stamp="600x100ms $(cksum < "$src")"
die() { echo "bench go600: $*" >&2; exit 1; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
command -v go > /dev/null || die "go is missing: install golang-go (make deps)"
export GO111MODULE=off GOFLAGS= GOCACHE="$(abs "$build/gocache")" \
       GOPATH="$(abs "$build/gopath")" HOME="${HOME:-/tmp}"
if [ "$(cat "$data.stamp" 2> /dev/null)" != "$stamp" ]; then
    echo "bench go600: generating 600 CPU profiles with profgen (about 90 s, once)" >&2
    rm -rf "$data" "$data.tmp" "$data.stamp"
    mkdir -p "$data.tmp"
    go build -o "$bench/profgen" "$src" || die "go build $src"
    "$bench/profgen" -out "$data.tmp" -n 600 -cpu 100ms -seed 1 ||
        die "profgen failed"
    mkdir -p "$data"
    mv "$data.tmp"/cpu-*.pb.gz "$data/"
    rm -rf "$data.tmp"
    echo "$stamp" > "$data.stamp"           # last: a cut-short run redoes all
fi
[ "$(ls "$data" | wc -l)" = 600 ] || die "$data holds $(ls "$data" | wc -l) files, not 600"
echo "$data"
