#!/bin/sh
# run-tests.sh BUILD RESULTS: runs the core suite of one build tree (the
# cmocka unit tests, the end-to-end scripts and the fuzz corpus replays) and
# appends "pass NAME" / "fail NAME" lines to RESULTS, one per test case
# ("skip NAME" for an end-to-end script that exits 77: it cannot run here).
build=$1; results=$2
logs=$build/logs
mkdir -p "$logs"
export EMBER="$build/ember" BUILD="$build" CMOCKA_MESSAGE_OUTPUT=stdout

record() { echo "$1 $2" >> "$results"; }

# cmocka prints "[       OK ] name" and "[  FAILED  ] name" per test case.
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    log=$logs/$name.log
    "$t" > "$log" 2>&1; rc=$?
    grep -E '^\[       OK \] ' "$log" | sed 's/^\[       OK \] /pass '"$name"'./' >> "$results"
    nfail=$(grep -cE '^\[  FAILED  \] [a-z_]' "$log")
    grep -E '^\[  FAILED  \] [a-z_]' "$log" | sed 's/^\[  FAILED  \] /fail '"$name"'./' >> "$results"
    if [ "$rc" != 0 ] && [ "$nfail" = 0 ]; then
        record fail "$name (exit $rc)"
    fi
    if [ "$rc" != 0 ]; then
        echo "--- $name failed (exit $rc), log $log:" >&2
        tail -n 30 "$log" >&2
    fi
done

for e in tests/e2e/*.sh; do
    [ -f "$e" ] || continue
    name=e2e.$(basename "$e" .sh)
    log=$logs/$name.log
    # exit 77 is a skip (automake's habit): a test that cannot run here
    # says why on its last line, and the run goes on without failing
    sh "$e" > "$log" 2>&1
    rc=$?
    if [ "$rc" = 0 ]; then
        record pass "$name"
    elif [ "$rc" = 77 ]; then
        record skip "$name"
        echo "--- $name skipped: $(tail -n 1 "$log")" >&2
    else
        record fail "$name"
        echo "--- $name failed, log $log:" >&2
        tail -n 30 "$log" >&2
    fi
done

for r in "$build"/fuzz/replay_fuzz_*; do
    [ -x "$r" ] || continue
    target=${r##*/replay_}
    log=$logs/replay_$target.log
    if "$r" fuzz/corpus/"$target" > "$log" 2>&1; then
        record pass "replay.$target"
    else
        record fail "replay.$target"
        echo "--- replay $target failed, log $log:" >&2
        tail -n 30 "$log" >&2
    fi
done
exit 0
