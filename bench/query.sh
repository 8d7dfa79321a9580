#!/bin/sh
# bench/query.sh BUILD [ARGS...]: the query benchmark of issue 4. Runs
# BUILD/bench/bench_query (query latency through ember_query and through
# the engine calls behind it, on a generated day of 10 s profiles for 200
# series and on 100k series for label values) with ARGS, or else
# $QUERY_ARGS, e.g.
#   sh bench/query.sh build                    (full: 200 series x 24 h)
#   sh bench/query.sh build --quick            (40 series x 3 h, seconds)
#   sh bench/query.sh build --only focus --runs 15
#   build/bench/bench_query --help
# The databases are built once (about 4 minutes and 0.5 GB for the full
# main one, on 2 cores) and cached in BUILD/bench-data/query-*; a stamp
# names the configuration, so other sizes get their own directory and
# --rebuild forces a new build. Progress goes to stderr; the Markdown
# tables are printed at the end and kept in BUILD/bench-query.md.
build=${1:-build}
[ $# -gt 0 ] && shift
bin=$build/bench/bench_query
out=$build/bench-query.md

if [ ! -x "$bin" ]; then
    echo "bench query: $bin is missing: run make bench-bin first" >&2
    exit 1
fi
[ $# -eq 0 ] && set -- $QUERY_ARGS
mkdir -p "$build/bench-data"
echo "bench query: $bin --dir $build/bench-data $*" >&2
"$bin" --dir "$build/bench-data" "$@" > "$out"
rc=$?
cat "$out"
[ "$rc" = 0 ] || echo "bench query: bench_query failed (exit $rc)" >&2
exit $rc
