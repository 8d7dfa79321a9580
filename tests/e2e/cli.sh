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
$EMBER query -d "$db" -o top 'process_cpu:samples:count:cpu:nanoseconds:delta{env="test"}' > "$tmp/top"
grep -q "of $total total" "$tmp/top" || fail "top total: $(head -3 "$tmp/top")"
leaf=$(awk '{v=$NF; $NF=""; sub(/ +$/,""); n=split($0,f,";"); l[f[n]]+=v} END {for (k in l) print l[k], k}' "$tmp/want" | sort -rn | head -1 | cut -d' ' -f2-)
sed -n 4p "$tmp/top" | grep -qF "$leaf" || fail "top leaf is not $leaf: $(sed -n 4p "$tmp/top")"

# no match is an empty answer, not an error
$EMBER query -d "$db" -o collapsed '{service="nope"}' > "$tmp/none"
[ ! -s "$tmp/none" ] || fail "unmatched selector printed something"

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

# a selector error points at the column
if $EMBER query -d "$db" '{service=}' 2> "$tmp/perr"; then fail "bad selector exited 0"; fi
grep -q 'column' "$tmp/perr" || fail "parse error without column: $(cat "$tmp/perr")"
grep -q '\^' "$tmp/perr" || fail "parse error without caret"

# two types under one selector are refused with their names
$EMBER import -d "$db" --type memory:inuse_space:bytes:space:bytes -l service=demo $data/1732170000000.txt 2>/dev/null
if $EMBER query -d "$db" '{service="demo"}' 2> "$tmp/types"; then fail "ambiguous types accepted"; fi
grep -q 'memory:inuse_space' "$tmp/types" || fail "types message: $(cat "$tmp/types")"

# usage errors exit 2; help lists every command
set +e
$EMBER query 2>/dev/null; [ $? = 2 ] || fail "usage exit status"
set -e
$EMBER --help | grep -q '^  verify' || fail "help lacks verify"
$EMBER verify -d "$db" > /dev/null || fail "final verify"
echo "cli: ok"
