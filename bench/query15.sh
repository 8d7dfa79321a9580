#!/bin/sh
# bench/query15.sh BUILD: speed kept after compaction (issue 15, "What must
# hold", point 2): the query benchmark of issue 4 (bench/bench_query) on the
# same data as written (the head) and compacted (`--compact`: a cached copy
# after ember_compact with no head kept, everything in blocks), then 30
# days of 200 series in both forms. Not part of `make bench`: the first
# run builds two large data sets (about 6 minutes on 2 cores) and compacts
# copies of them (about 10 more), some 40 minutes in all and 3.3 GB under
# BUILD/bench-data/query-*, where later runs (about 8 minutes) find them.
# Run it again when compaction changes (block merging, downsampling):
# --rebuild in the ARGS below remakes the data sets and their copies.
#   sh bench/query15.sh build
#   DAY_ARGS="--quick" MONTH_ARGS="--quick --hours 48 --step 60" sh bench/query15.sh build
# Environment:
#   DAY_ARGS    bench_query arguments of the day's data set (default: its
#               default, 200 series over 24 h, one profile every 10 s)
#   MONTH_ARGS  of the month (default: --pods 100 --hours 720 --step 60
#               --stacks 10:40 --range 720, i.e. 200 series, one profile a
#               minute of 10 to 40 distinct stacks, the long rows over the
#               30 days) and MONTH_ONLY the rows run on it (default "30 d")
#   BLOCK       --block hours of the compacted copies (default: the
#               engine's default, 2 h)
#   DAY_DOWNSAMPLE, MONTH_DOWNSAMPLE  the downsampled copies compaction
#               keeps beside the profiles as stored (bench_query
#               --downsample; default 1m,1h for the day's 10 s profiles, 1h
#               for the month's one a minute; "none": no copies)
# Prints the four Markdown reports, also kept in BUILD/bench-query15.md.
# shellcheck disable=SC2086 # the ARGS are lists of words, split on purpose
build=${1:-build}
bin=$build/bench/bench_query
out=$build/bench-query15.md
DAY_ARGS=${DAY_ARGS:-}
MONTH_ARGS=${MONTH_ARGS:---pods 100 --hours 720 --step 60 --stacks 10:40 --range 720}
MONTH_ONLY=${MONTH_ONLY:-30 d}
block=${BLOCK:+--block $BLOCK}
day_ds=${DAY_DOWNSAMPLE:-1m,1h}
month_ds=${MONTH_DOWNSAMPLE:-1h}
[ "$day_ds" = none ] && day_ds= || day_ds="--downsample $day_ds"
[ "$month_ds" = none ] && month_ds= || month_ds="--downsample $month_ds"

if [ ! -x "$bin" ]; then
    echo "bench query15: $bin is missing: run make bench-bin first" >&2
    exit 1
fi
mkdir -p "$build/bench-data"
rc=0
# run TITLE ARGS...: one bench_query run, its report under TITLE
run() {
    title=$1; shift
    echo "bench query15: $title: $bin --dir $build/bench-data $*" >&2
    {
        echo
        echo "## $title"
        echo
        echo "\`bench_query $*\`"
        echo
        "$bin" --dir "$build/bench-data" "$@" || { rc=1; echo "(bench_query failed)"; }
    } >> "$out"
}

: > "$out"
run "Day, head (as written)" $DAY_ARGS
run "Day, compacted" $DAY_ARGS --compact $block $day_ds
run "Month, head (as written)" $MONTH_ARGS --only "$MONTH_ONLY"
run "Month, compacted" $MONTH_ARGS --only "$MONTH_ONLY" --compact $block $month_ds
cat "$out"
exit $rc
