#!/bin/sh
# tests/e2e/repl.sh: `ember repl` end to end, on the Go profiles of
# tests/data/pprof imported into a fresh database.
#   1. as a script from stdin: results equal `ember query`'s, multi-line
#      statements, dot commands, an error the REPL survives (exit 1), .quit;
#   2. at a terminal (tests/e2e/lib/pty_drive.py, a pseudo-terminal): the
#      prompt, tab completion of a function, a type, a label and a value,
#      multi-line input, history recalled with up-arrow in a later session,
#      .timing, ^C, and long output cut with a note on a small screen.
set -eu
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/db
drive="python3 tests/e2e/lib/pty_drive.py"
CPU=process_cpu:samples:count:cpu:nanoseconds:delta
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
die() { echo "FAIL: $*" >&2; exit 1; }

# numeric labels as series labels: the heap's "bytes" makes the long list
# of values the small-screen check below needs
$EMBER import -d "$db" --numeric-labels series tests/data/pprof/*.pb.gz \
    > "$tmp/imp" 2>&1 ||
    die "import: $(cat "$tmp/imp")"

# repl SCRIPT-TEXT OUT ERR: runs the REPL on the script; sets $st.
repl() {
    st=0
    printf '%s\n' "$1" | $EMBER repl -d "$db" > "$2" 2> "$3" || st=$?
    if grep -q 'Sanitizer' "$3"; then
        fail "sanitizer report:"; cat "$3" >&2
    fi
}

# ---- 1. scripts through stdin -------------------------------------------

# A query's result equals ember query's, in one line or over several with
# a comment, and with sqlite3's trailing ';'.
$EMBER query -d "$db" -o collapsed "$CPU{worker=\"hash\"}" > "$tmp/want" ||
    die "ember query"
[ -s "$tmp/want" ] || die "ember query printed nothing for worker=hash"
repl ".format collapsed
merge($CPU{worker=\"hash\"})" "$tmp/got" "$tmp/err"
[ "$st" = 0 ] || fail "script exit status $st: $(cat "$tmp/err")"
cmp -s "$tmp/want" "$tmp/got" || fail "script merge differs from ember query"
[ ! -s "$tmp/err" ] || fail "clean script wrote to stderr: $(cat "$tmp/err")"
repl ".format collapsed
merge(   # the profile of one worker
  $CPU{
    worker=\"hash\"
  }
);" "$tmp/got" "$tmp/err"
[ "$st" = 0 ] || fail "multi-line script: exit $st: $(cat "$tmp/err")"
cmp -s "$tmp/want" "$tmp/got" || fail "multi-line statement differs"

# The default format of a profile is top, as ember query's.
$EMBER query -d "$db" "$CPU{worker=\"sort\"}" > "$tmp/want"
repl "$CPU{worker=\"sort\"}" "$tmp/got" "$tmp/err"
cmp -s "$tmp/want" "$tmp/got" || fail "default format is not top"

# .limit N: rows of top, as ember query --limit.
$EMBER query -d "$db" --limit 3 "$CPU" > "$tmp/want"
repl ".limit 3
$CPU" "$tmp/got" "$tmp/err"
cmp -s "$tmp/want" "$tmp/got" || fail ".limit 3 differs from --limit 3"

# Series show as sparklines by default; .format does the rest.
$EMBER query -d "$db" -o spark "total($CPU)" > "$tmp/want" 2> "$tmp/err" ||
    fail "ember query -o spark: $(cat "$tmp/err")"
repl "total($CPU)" "$tmp/got" "$tmp/err"
cmp -s "$tmp/want" "$tmp/got" || fail "series default is not spark"
$EMBER query -d "$db" -o csv "total($CPU)" > "$tmp/want"
repl ".format csv
total($CPU)" "$tmp/got" "$tmp/err"
cmp -s "$tmp/want" "$tmp/got" || fail ".format csv on a series"
repl ".format flame
total($CPU)" "$tmp/got" "$tmp/err"
[ "$st" = 0 ] || fail "a format that does not fit failed the statement"
grep -q 'does not fit' "$tmp/err" || fail "no note for flame on a series"

# A query that matches nothing says why, as ember query does, and the
# statement still succeeds.
repl "$CPU{worker=\"hsah\"}" "$tmp/got" "$tmp/err"
[ "$st" = 0 ] || fail "a query that matched nothing failed the statement"
grep -q '^ember repl: line [0-9]*: note: .*has worker="hsah" (did you mean "hash"?)' \
    "$tmp/err" || fail "no note for worker=hsah: $(cat "$tmp/err")"

# Metadata commands.
repl ".types" "$tmp/got" "$tmp/err"
grep -qx "$CPU" "$tmp/got" || fail ".types lacks $CPU: $(cat "$tmp/got")"
grep -qx 'memory:inuse_space:bytes:space:bytes' "$tmp/got" ||
    fail ".types lacks memory:inuse_space"
repl ".labels" "$tmp/got" "$tmp/err"
grep -qx worker "$tmp/got" || fail ".labels lacks worker: $(cat "$tmp/got")"
repl ".values worker $CPU" "$tmp/got" "$tmp/err"
grep -qx hash "$tmp/got" || fail ".values worker lacks hash: $(cat "$tmp/got")"
grep -q '^idle' "$tmp/got" &&
    fail ".values worker under $CPU lists goroutine's idle workers"
repl ".values worker {worker=~\"s.*\"}" "$tmp/got" "$tmp/err"
[ "$(cat "$tmp/got")" = sort ] ||
    fail ".values with a selector: $(cat "$tmp/got")"

# Settings: shown with no argument, refused when wrong.
repl ".range
.range 2024-11-21T00:00:00Z 2024-11-22
.range
.step 1m
.step
.timing
.limit" "$tmp/got" "$tmp/err"
[ "$st" = 0 ] || fail "settings script failed: $(cat "$tmp/err")"
grep -q 'range: all time' "$tmp/got" || fail ".range shows: $(cat "$tmp/got")"
grep -q '2024-11-21T00:00:00Z .. 2024-11-22' "$tmp/got" ||
    fail ".range with two times: $(cat "$tmp/got")"
grep -q 'step: 60000 ms' "$tmp/got" || fail ".step 1m: $(cat "$tmp/got")"
for bad in ".range yesterday" ".step often" ".format pdf" ".timing maybe" \
           ".limit -1" ".nosuch" ".values" ".format pprof"; do
    repl "$bad" "$tmp/got" "$tmp/err"
    [ "$st" = 1 ] || fail "\"$bad\" exit status $st"
    grep -q 'line 1' "$tmp/err" || fail "\"$bad\": $(cat "$tmp/err")"
done

# .help lists every command of the table.
repl ".help" "$tmp/got" "$tmp/err"
for c in .help .range .step .format .types .labels .values .timing .output \
         .limit .quit .exit; do
    grep -q "^$c" "$tmp/got" || fail ".help lacks $c"
done

# A failing statement: a caret message naming the line, the statements
# after it still run, and the exit status is 1.
repl "merge($CPU{worker=\"hash\"})
mege($CPU)
.format collapsed
merge($CPU{worker=\"hash\"})" "$tmp/got" "$tmp/err"
[ "$st" = 1 ] || fail "a failed statement: exit status $st"
grep -q 'line 2' "$tmp/err" || fail "error without its line: $(cat "$tmp/err")"
grep -q 'unknown function' "$tmp/err" || fail "error message: $(cat "$tmp/err")"
grep -q '\^' "$tmp/err" || fail "error without a caret"
$EMBER query -d "$db" -o collapsed "$CPU{worker=\"hash\"}" > "$tmp/want"
tail -n "$(wc -l < "$tmp/want")" "$tmp/got" > "$tmp/tail"
cmp -s "$tmp/want" "$tmp/tail" || fail "statements after an error did not run"

# An unfinished statement at the end of the script fails, not hangs.
repl "merge($CPU" "$tmp/got" "$tmp/err"
[ "$st" = 1 ] || fail "unfinished statement: exit status $st"

# .output writes to a file until .output alone; pprof only goes to one.
repl ".output $tmp/out.txt
.format collapsed
merge($CPU{worker=\"hash\"})
.output
.format pprof
.output $tmp/out.pb.gz
.format pprof
merge($CPU)
.quit
.nosuch" "$tmp/got" "$tmp/err"
[ "$st" = 1 ] || fail ".format pprof to stdout was not refused: exit $st"
[ "$(grep -c 'line' "$tmp/err")" = 1 ] ||
    fail "expected one failure (line 5), got: $(cat "$tmp/err")"
cmp -s "$tmp/want" "$tmp/out.txt" || fail ".output file differs"
[ ! -s "$tmp/got" ] ||
    fail ".output left output on stdout: $(head -3 "$tmp/got")"
[ "$(head -c 2 "$tmp/out.pb.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ] ||
    fail ".format pprof did not write gzip'd pprof"

# .timing on: each query's time on stderr, stdout stays data.
repl ".timing on
.format collapsed
merge($CPU{worker=\"hash\"})" "$tmp/got" "$tmp/err"
grep -qE '^time: [0-9.]+ ms' "$tmp/err" || fail ".timing: $(cat "$tmp/err")"
cmp -s "$tmp/want" "$tmp/got" || fail ".timing changed stdout"

# usage
st=0; $EMBER repl 2> /dev/null < /dev/null || st=$?
[ "$st" = 2 ] || fail "ember repl without -d: exit $st"
st=0; $EMBER repl -d "$tmp/nodb" 2> /dev/null < /dev/null || st=$?
[ "$st" = 1 ] || fail "ember repl on a missing database: exit $st"

# ---- 2. at a terminal ---------------------------------------------------

if ! command -v python3 > /dev/null; then
    die "python3 is needed to drive the REPL in a pseudo-terminal"
fi
mkdir -p "$tmp/home"
# total WORKER: the "N total" of top for one worker, as a regex
total() {
    $EMBER query -d "$db" "$CPU{worker=\"$1\"}" |
        grep -o 'of [0-9.]* total' | sed 's/\./\\./g'
}
hash_total=$(total hash)
sort_total=$(total sort)
[ -n "$hash_total" ] && [ -n "$sort_total" ] || die "no top totals"

# term NAME [driver options]: plays the scenario on stdin in a terminal.
term() {
    name=$1; shift
    if ! env TERM=xterm HOME="$tmp/home" EMBER_HISTORY="$tmp/hist" \
         $drive --log "$tmp/$name.log" "$@" -- \
         $EMBER repl -d "$db" 2> "$tmp/$name.err"; then
        fail "terminal: $name: $(cat "$tmp/$name.err")"
    fi
}

# Completion of a function, a type, a label name and a label value: the
# query built only by tabs runs and gives worker hash's total.
term complete <<EOF
expect ember> \$
send mer\t
sleep 0.2
send process_cpu:s\t
sleep 0.2
send {wor\t
sleep 0.2
send ="h\t
sleep 0.2
send })\r
expect $hash_total
expect ember> \$
send {worker="\t
expect alloc +hash +idle-a
send \x03
expect ember> \$
send .f\t
sleep 0.2
send co\t
sleep 0.2
send \r.format\r
expect format: collapsed
send \x04
exit 0
EOF

# Multi-line input with its prompt, and ^C dropping an unfinished one.
term multiline <<EOF
expect ember> \$
send merge(\r
expect \.\.\.> \$
send   $CPU{worker="hash"}  # one worker\r
expect \.\.\.> \$
send )\r
expect $hash_total
expect ember> \$
send merge(\r
expect \.\.\.> \$
send \x03
expect ember> \$
send .quit\r
exit 0
EOF
grep -q 'error' "$tmp/multiline.log" && fail "^C ran the dropped statement"

# History: a query typed in one session comes back with up-arrow in the
# next; the file is $EMBER_HISTORY.
rm -f "$tmp/hist"
term hist1 <<EOF
expect ember> \$
send merge($CPU{worker="sort"})\r
expect $sort_total
send .quit\r
exit 0
EOF
grep -q 'worker="sort"' "$tmp/hist" ||
    fail "history file: $(cat "$tmp/hist" 2>&1)"
term hist2 <<EOF
expect ember> \$
send \x1b[A\x1b[A\r
expect $sort_total
send .quit\r
exit 0
EOF

# Without EMBER_HISTORY the file is ~/.ember_history; a HOME that cannot
# hold it is no reason to fail.
printf 'expect ember> $\nsend .types\\r\nexpect %s\nsend .quit\\r\nexit 0\n' \
    "$CPU" > "$tmp/types.scn"
env -u EMBER_HISTORY TERM=xterm HOME="$tmp/home" \
    $drive -- $EMBER repl -d "$db" < "$tmp/types.scn" > /dev/null 2>&1 ||
    fail "terminal with HOME"
grep -q '^\.types' "$tmp/home/.ember_history" 2> /dev/null ||
    fail "no ~/.ember_history"
env -u EMBER_HISTORY TERM=xterm HOME="$tmp/nonexistent" \
    $drive -- $EMBER repl -d "$db" < "$tmp/types.scn" > /dev/null 2>&1 ||
    fail "terminal with a HOME that does not exist"

# .timing, and a long result and a long list cut at the height of a small
# screen, until .limit says how many rows to show.
term small --rows 10 <<EOF
expect ember> \$
send .timing on\r
send merge($CPU)\r
expect \.\.\. [0-9]+ more rows
expect time: [0-9.]+ ms
expect ember> \$
send .values bytes\r
expect \.\.\. [0-9]+ more rows
expect ember> \$
send .limit 50\r
send merge($CPU)\r
expect ember> \$
send .quit\r
exit 0
EOF
grep -c 'more rows' "$tmp/small.log" | grep -qx 2 ||
    fail ".limit did not lift the cut at the screen's height"

if [ "$failures" -gt 0 ]; then
    echo "repl: $failures checks failed" >&2
    exit 1
fi
echo "repl: ok"
