#!/bin/sh
# fuzz-smoke.sh TARGET...: a short libFuzzer run of each harness over its
# committed corpus (new inputs go to a scratch directory, not the corpus):
# FUZZ_SECONDS each, 15 by default, so that the twelve targets and their
# build take about four minutes of `make test`.
# Records pass/fail in build/fuzz/results.txt.
secs=${FUZZ_SECONDS:-15}
mkdir -p build/fuzz
for t in "$@"; do
    scratch=$(mktemp -d)
    log=build/fuzz/$t.log
    if build/fuzz/"$t" -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=10 -artifact_prefix=build/fuzz/"$t"- \
        "$scratch" fuzz/corpus/"$t" > "$log" 2>&1; then
        echo "pass fuzz.$t" >> build/fuzz/results.txt
        echo "fuzz $t: $(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1)s"
    else
        echo "fail fuzz.$t" >> build/fuzz/results.txt
        echo "--- fuzz $t failed, log $log:" >&2
        tail -n 40 "$log" >&2
    fi
    rm -rf "$scratch"
done
exit 0
