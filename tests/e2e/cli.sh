#!/bin/sh
# tests/e2e/cli.sh: the `ember` binary end to end: import collapsed files,
# query them (top and collapsed, checked against sums computed here with
# awk), stats, verify, and the error paths (bad file, bad selector, usage).
set -eu
EMBER=${EMBER:-build/ember}
data=tests/data/collapsed
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/db
fail() { echo "FAIL: $*" >&2; exit 1; }

# import: three files named by unix ms, one series
$EMBER import -d "$db" -l service=demo -l env=test $data/17*.txt 2> "$tmp/imp"
grep -q "imported 3 of 3 files" "$tmp/imp" || fail "import summary: $(cat "$tmp/imp")"

# collapsed output equals the inputs summed per stack
cat $data/17*.txt | grep -v '^#' | grep -v '^[[:space:]]*$' |
  awk '{v=$NF; $NF=""; sub(/ +$/,""); s[$0]+=v} END {for (k in s) if (s[k]) print k " " s[k]}' |
  LC_ALL=C sort > "$tmp/want"
$EMBER query -d "$db" -o collapsed '{service="demo"}' | LC_ALL=C sort > "$tmp/got"
cmp -s "$tmp/want" "$tmp/got" || { diff "$tmp/want" "$tmp/got" | head; fail "collapsed differs"; }

# the time range: only the first file
$EMBER query -d "$db" -o collapsed --from 1732170000000 --to 1732170005000 \
  '{service="demo"}' | LC_ALL=C sort > "$tmp/first"
grep -v '^#' $data/1732170000000.txt | grep -v '^[[:space:]]*$' |
  awk '{v=$NF; $NF=""; sub(/ +$/,""); s[$0]+=v} END {for (k in s) if (s[k]) print k " " s[k]}' |
  LC_ALL=C sort > "$tmp/want1"
cmp -s "$tmp/want1" "$tmp/first" || fail "range query differs"

# top: total and the hottest leaf agree with awk
total=$(awk '{s+=$NF} END {print s}' "$tmp/want")
$EMBER query -d "$db" -o top 'collapsed:samples:count:samples:count:delta{env="test"}' > "$tmp/top"
grep -q "of $total total" "$tmp/top" || fail "top total: $(head -3 "$tmp/top")"
leaf=$(awk '{v=$NF; $NF=""; sub(/ +$/,""); n=split($0,f,";"); l[f[n]]+=v} END {for (k in l) print l[k], k}' "$tmp/want" | sort -rn | head -1 | cut -d' ' -f2-)
sed -n 4p "$tmp/top" | grep -qF "$leaf" || fail "top leaf is not $leaf: $(sed -n 4p "$tmp/top")"

# no match is an empty answer, not an error
$EMBER query -d "$db" -o collapsed '{service="nope"}' > "$tmp/none" 2> /dev/null
[ ! -s "$tmp/none" ] || fail "unmatched selector printed something"

# ... but one with a note on stderr saying why, and exit status 0
note() {   # note WANT QUERY-ARGS...: exit 0, nothing out, WANT in a note
  want=$1
  shift
  $EMBER query -d "$db" -o collapsed "$@" > "$tmp/nout" 2> "$tmp/nerr" ||
    fail "$*: exit status $? ($(cat "$tmp/nerr"))"
  [ ! -s "$tmp/nout" ] || fail "$*: printed $(head -1 "$tmp/nout")"
  grep '^ember query: note: ' "$tmp/nerr" | grep -qF "$want" ||
    fail "$*: no note \"$want\": $(cat "$tmp/nerr")"
}
note '{service="demx"} matches nothing: no series of any type has service="demx" (did you mean "demo"?)' \
  '{service="demx"}'
note 'no series of any type has a label servce (did you mean service?)' \
  '{servce="demo"}'
note 'no profile type "collapsed:samples:count:samples:count:delt" is stored (did you mean collapsed:samples:count:samples:count:delta?)' \
  'collapsed:samples:count:samples:count:delt'
note '{service="demo"} holds no profile from 2001-01-01T00:00:00Z to 2001-01-02T00:00:00Z: its profiles are stored from 2024-11-21T06:20:00Z to 2024-11-21T06:20:20Z' \
  --from 2001-01-01 --to 2001-01-02 '{service="demo"}'
note 'focus(..., "no_such_function") matches no function name' \
  'focus({service="demo"}, "no_such_function")'

# stats and verify
$EMBER stats -d "$db" > "$tmp/stats"
grep -qE '^profiles +3$' "$tmp/stats" || fail "stats profiles: $(cat "$tmp/stats")"
grep -qE '^series +1$' "$tmp/stats" || fail "stats series"
$EMBER verify -d "$db" > "$tmp/verify" || fail "verify: $(cat "$tmp/verify")"
grep -q '^ok: ' "$tmp/verify" || fail "verify output"

# errors: a bad file fails alone, the others are stored; exit status 1
printf 'a;b 1\nbroken line\n' > "$tmp/bad.txt"
if $EMBER import -d "$db" -l service=bad "$tmp/bad.txt" $data/1732170000000.txt 2> "$tmp/err"; then
  fail "import of a bad file exited 0"
fi
grep -q "bad.txt:2" "$tmp/err" || fail "bad file message: $(cat "$tmp/err")"
grep -q "imported 1 of 2 files" "$tmp/err" || fail "partial import summary"
$EMBER query -d "$db" -o collapsed '{service="bad"}' | grep -q '^a;b ' && fail "bad file left data"

# a directory of 4101 files spans two batches (4096 files each): every good
# file is stored once, the bad one in the first batch takes nothing down
mkdir "$tmp/many"
awk -v d="$tmp/many" 'BEGIN { for (i = 1; i <= 4100; i++) {
    f = sprintf("%s/%05d.txt", d, i); print "many;f" (i % 7) " " i > f; close(f) } }'
printf 'many;x 1\nbroken\n' > "$tmp/many/00100-bad.txt"
if $EMBER import -d "$db" -l service=many "$tmp/many" 2> "$tmp/manyerr"; then
  fail "import of a directory with a bad file exited 0"
fi
grep -q "imported 4100 of 4101 files" "$tmp/manyerr" || fail "many: $(tail -1 "$tmp/manyerr")"
$EMBER query -d "$db" -o top 'collapsed:samples:count:samples:count:delta{service="many"}' |
  grep -q "of 8407050 total" || fail "many: the total is not 1 + ... + 4100"

# a path that does not exist, and a directory too deep to walk, each get an
# error line and exit 1; the summary counts only the files that were read
mkdir -p "$tmp/deep"
d="$tmp/deep"; for i in $(seq 66); do d="$d/d"; done; mkdir -p "$d"
cp $data/1732170000000.txt "$d/"
if $EMBER import -d "$tmp/db2" "$tmp/nope.pb.gz" "$tmp/deep" \
    $data/1732170000000.txt 2> "$tmp/missing"; then
  fail "import of a missing path exited 0"
fi
grep -q "nope.pb.gz: No such file" "$tmp/missing" || fail "missing: $(cat "$tmp/missing")"
grep -q "more than 64 directories deep" "$tmp/missing" || fail "deep: $(cat "$tmp/missing")"
grep -q "imported 1 of 1 files" "$tmp/missing" || fail "missing summary: $(tail -1 "$tmp/missing")"

# a selector error points at the column
if $EMBER query -d "$db" '{service=}' 2> "$tmp/perr"; then fail "bad selector exited 0"; fi
grep -q 'column' "$tmp/perr" || fail "parse error without column: $(cat "$tmp/perr")"
grep -q '\^' "$tmp/perr" || fail "parse error without caret"

# the full language's options: -o must name a format, and one that does
# not fit the result's kind is refused (exit 2) naming those that do
T=collapsed:samples:count:samples:count:delta
S="$T{service=\"demo\"}"
usage_err() {   # usage_err WHAT PATTERN ARGS...: exit 2, PATTERN in stderr
    what=$1; pat=$2; shift 2
    st=0; $EMBER query -d "$db" "$@" > /dev/null 2> "$tmp/uerr" || st=$?
    [ "$st" = 2 ] || fail "$what: exit status $st, wanted 2"
    grep -q -- "$pat" "$tmp/uerr" || fail "$what: $(cat "$tmp/uerr")"
}
usage_err "-o pdf" "flame" -o pdf "$T"
usage_err "-o spark on a profile" "collapsed" -o spark "$T"
usage_err "-o flame on a series" "csv" -o flame "total($S)"
usage_err "--unit on a series" "--unit" --unit ms "total($S)"
usage_err "--step 5x" "--step" --step 5x "total($S)"
usage_err "--color sometimes" "--color" --color sometimes "$T"
usage_err "--width wide" "--width" --width wide "$T"
usage_err "--limit ten" "--limit" --limit ten "$T"

# a series defaults to table; --step buckets its points (the three files
# are 10 s apart, so 1m sums them in one point, as the merge does)
$EMBER query -d "$db" "total($S)" > "$tmp/s1"
$EMBER query -d "$db" -o table "total($S)" > "$tmp/s2"
[ -s "$tmp/s1" ] && cmp -s "$tmp/s1" "$tmp/s2" || fail "series default is not table"
$EMBER query -d "$db" -o csv "total($S)" > "$tmp/csv"
[ "$(wc -l < "$tmp/csv")" = 4 ] || fail "csv without step: $(cat "$tmp/csv")"
$EMBER query -d "$db" -o csv --step 1m "total($S)" > "$tmp/csv"
[ "$(wc -l < "$tmp/csv")" = 2 ] || fail "csv --step 1m: $(cat "$tmp/csv")"
tail -1 "$tmp/csv" | grep -q ",$total\$" || fail "--step 1m sum: $(tail -1 "$tmp/csv")"
$EMBER query -d "$db" -o csv --step 10s "total($S)" > "$tmp/csv"
[ "$(wc -l < "$tmp/csv")" = 4 ] || fail "csv --step 10s: $(cat "$tmp/csv")"

# --color and --width: colors only when asked off a terminal; the flame
# graph fits the width it is given
esc=$(printf '\033')
$EMBER query -d "$db" -o flame "$S" | grep -q "$esc" && fail "color in a pipe by default"
$EMBER query -d "$db" -o flame --color always "$T" | grep -q "$esc" ||
  fail "--color always drew no color"
$EMBER query -d "$db" -o flame --color never "$T" | grep -q "$esc" &&
  fail "--color never drew color"
widest() { awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }'; }
w40=$($EMBER query -d "$db" -o flame --width 40 "$T" | widest)
w120=$($EMBER query -d "$db" -o flame --width 120 "$T" | widest)
[ "$w40" -gt 0 ] && [ "$w40" -lt "$w120" ] || fail "--width: 40 gives $w40 columns, 120 gives $w120"

# --output-file: the file holds what stdout would
$EMBER query -d "$db" -o collapsed --output-file "$tmp/of.txt" "$T" > "$tmp/of.out"
[ ! -s "$tmp/of.out" ] || fail "--output-file also wrote to stdout"
$EMBER query -d "$db" -o collapsed "$T" | cmp -s - "$tmp/of.txt" || fail "--output-file differs"

# two types under one selector are refused with their names
$EMBER import -d "$db" --type memory:inuse_space:bytes:space:bytes -l service=demo $data/1732170000000.txt 2>/dev/null
if $EMBER query -d "$db" '{service="demo"}' 2> "$tmp/types"; then fail "ambiguous types accepted"; fi
grep -q 'memory:inuse_space' "$tmp/types" || fail "types message: $(cat "$tmp/types")"

# -l is checked before any file is read or the database made: a bad label
# with a missing file is the -l error, exit 2, and no database
bad_label() {   # bad_label WHAT ARGS...: `import ARGS missing-file` fails so
    what=$1; shift
    st=0; $EMBER import -d "$tmp/ldb" "$@" "$tmp/missing.txt" 2> "$tmp/lerr" || st=$?
    [ "$st" = 2 ] || fail "$what: exit status $st, wanted 2: $(cat "$tmp/lerr")"
    grep -q "^ember import: -l" "$tmp/lerr" || fail "$what: $(cat "$tmp/lerr")"
    if grep -q missing "$tmp/lerr"; then fail "$what: a file was read: $(cat "$tmp/lerr")"; fi
    [ ! -e "$tmp/ldb" ] || fail "$what: the database was made"
}
bad_label "-l 1bad=x" -l 1bad=x
bad_label "-l __type__=x" -l __type__=x
bad_label "-l a=1 -l a=2" -l a=1 -l a=2

# usage errors exit 2; help lists every command
set +e
$EMBER query 2>/dev/null; [ $? = 2 ] || fail "usage exit status"
set -e
$EMBER --help | grep -q '^  verify' || fail "help lacks verify"

# one rule for every command (issue 12): `ember CMD --help` prints its
# usage on stdout and exits 0; a bad option exits 2 and a failing run 1,
# and every message line on stderr (continuation lines are indented)
# starts with "ember CMD: "
# run WANT CMD ARGS...: runs ember CMD ARGS, checks the exit status
run() {
  want=$1; shift
  st=0; $EMBER "$@" > "$tmp/rule.out" 2> "$tmp/rule.err" || st=$?
  [ "$st" = "$want" ] ||
    fail "ember $*: exit status $st, wanted $want: $(cat "$tmp/rule.err")"
}
# prefixed CMD ARGS...: every unindented stderr line starts "ember CMD: "
prefixed() {
  [ -s "$tmp/rule.err" ] || fail "ember $*: no message on stderr"
  if grep -v '^ ' "$tmp/rule.err" | grep -qv "^ember $1: "; then
    fail "ember $*: a message without the \"ember $1: \" prefix: $(cat "$tmp/rule.err")"
  fi
}
nodb=$tmp/no-such-db
for cmd in import record agent query repl stats verify help; do
  run 0 $cmd --help
  grep -q "^usage: ember $cmd " "$tmp/rule.out" ||
    fail "ember $cmd --help: $(head -3 "$tmp/rule.out")"
  [ ! -s "$tmp/rule.err" ] || fail "ember $cmd --help wrote to stderr"
  run 2 $cmd --no-such-option
  prefixed $cmd --no-such-option
  grep -q -- '--no-such-option' "$tmp/rule.err" ||
    fail "ember $cmd: the bad option is not named: $(cat "$tmp/rule.err")"
done
# a missing -d, a missing value, a stray argument: usage errors too
for args in "stats" "verify -d" "query -d $db" "import -d $db" \
    "stats -d $db extra" "record -d $nodb --frequency" "help a b"; do
  set -- $args
  run 2 "$@"
  prefixed "$@"
done
# failing runs: exit 1, prefixed
run 1 import -d "$tmp/db3" "$tmp/nope.txt"; prefixed import
run 1 query -d "$nodb" "$T"; prefixed query
run 1 query -d "$db" '{service=}'; prefixed query
run 1 stats -d "$nodb"; prefixed stats
run 1 verify -d "$nodb"; prefixed verify
run 1 repl -d "$nodb" < /dev/null; prefixed repl
echo 'merge({)' > "$tmp/bad.script"
run 1 repl -d "$db" < "$tmp/bad.script"; prefixed repl
# a script's notes too (a .format that does not fit, summed snapshots)
printf '.format spark\nmerge(memory:inuse_space:bytes:space:bytes{service="demo"})\n' \
  > "$tmp/note.script"
run 0 repl -d "$db" < "$tmp/note.script"; prefixed repl
# record and agent fail before touching the database: without root, or
# for a process that does not exist
run 1 record -d "$nodb" --pid 999999999 --duration 1s; prefixed record
run 1 agent -d "$nodb" --pid 999999999; prefixed agent
[ ! -e "$nodb" ] || fail "a failed record created its database"
# -l is checked before any file is read: a bad label name creates nothing
run 2 import -d "$tmp/db4" -l 1x=y $data/1732170000000.txt; prefixed import
[ ! -e "$tmp/db4" ] || fail "import with a bad -l created its database"
# ember --version, listed in ember --help
run 0 --version
grep -q '^ember [0-9]' "$tmp/rule.out" || fail "--version: $(cat "$tmp/rule.out")"
$EMBER --help | grep -q -- '--version' || fail "ember --help does not list --version"
run 2 --no-such-option
run 2 no-such-command
$EMBER verify -d "$db" > /dev/null || fail "final verify"
echo "cli: ok"
