#!/bin/sh
# bench/run.sh BUILD [ARGS...]: the engine benchmark behind `make bench`.
# Runs BUILD/bench/bench_engine (Ember against an SQLite baseline on the
# same generated profiles) with ARGS, or else $BENCH_ARGS, e.g.
#   make bench BENCH_ARGS=--quick        (about a minute)
#   sh bench/run.sh build --series 400 --hours 24
# Progress goes to stderr; the Markdown table is printed at the end and
# kept in BUILD/bench-results.md. The full run takes a few minutes and needs
# about 2 GB free under BUILD/bench-data (removed at the end).
build=${1:-build}
[ $# -gt 0 ] && shift
bin=$build/bench/bench_engine
out=$build/bench-results.md

if [ ! -x "$bin" ]; then
    echo "bench: $bin is missing: run make bench-bin first" >&2
    exit 1
fi
[ $# -eq 0 ] && set -- $BENCH_ARGS
echo "bench: $bin --dir $build/bench-data $*" >&2
"$bin" --dir "$build/bench-data" "$@" > "$out"
rc=$?
cat "$out"
if [ "$rc" != 0 ]; then
    echo "bench: bench_engine failed (exit $rc)" >&2
fi
sh bench/pprof.sh "$build" || rc=1     # pprof import and merge (issue 3)
sh bench/serve.sh "$build" || rc=1     # ember serve against in process (issue 14)
sh bench/compact.sh "$build" || rc=1   # bytes before and after ember compact (issue 15)
exit $rc
