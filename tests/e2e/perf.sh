#!/bin/sh
# tests/e2e/perf.sh: a real `perf record -g` through Ember, judged by
# `perf report` (issue 3, "Real data in the tests").
#
# tests/data/perf/hot.c (hot() takes most of the time, warm() some, both
# called through level1 -> level2) is built with clang -O1 -g
# -fno-omit-frame-pointer and recorded with perf record -e cpu-clock -F 999
# -g. Its `perf script` text is imported twice: with --format perf, and
# with --header text left to auto-detection. Then, for both databases:
#   a. the sample count equals the sum of perf report's per-symbol counts;
#   b. `ember query -o top` puts hot first, and every function's flat
#      samples (the leaf's) equal perf report --no-children --sort sym's
#      for its symbol, exactly: both read the same samples, so there is
#      no sampling error and no tolerance to flip on;
#   c. the samples carry comm=hot and the event, and a --window split
#      keeps the total.
# Without perf or clang, or where perf_event_open is not allowed, the test
# says why and fails: it never passes by skipping.
set -eu
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
TYPE=perf_cpu:samples:count:cpu:nanoseconds:delta
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v perf > /dev/null || fail "perf is not installed (Debian: linux-perf)"
command -v clang > /dev/null || fail "clang is not installed"
clang -O1 -g -fno-omit-frame-pointer tests/data/perf/hot.c -o "$tmp/hot" ||
  fail "clang could not build tests/data/perf/hot.c"

# record; a refused perf_event_open fails the test with perf's own reason
if ! perf record -q -e cpu-clock -F 999 -g -o "$tmp/x.data" "$tmp/hot" 300 \
     > /dev/null 2> "$tmp/rec.err"; then
  cat "$tmp/rec.err" >&2
  fail "perf record cannot run here (perf_event_paranoid is" \
       "$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo '?');" \
       "run as root or lower it)"
fi
perf script -i "$tmp/x.data" > "$tmp/x.txt" 2> /dev/null
perf script --header -i "$tmp/x.data" > "$tmp/xh.txt" 2> /dev/null
perf report -i "$tmp/x.data" --stdio --no-children --sort sym \
  -F overhead,sample,sym -g none > "$tmp/report" 2> /dev/null
# "    80.00%           804  [.] hot": overhead, samples, [.] or [k], symbol
samples=$(awk '$1 !~ /^#/ && NF >= 4 { n += $2 } END { print n + 0 }' "$tmp/report")
want=$(awk '$3 == "[.]" && $4 == "hot" { sub(/%/, "", $1); print $1 }' "$tmp/report")
[ "$samples" -gt 100 ] || fail "perf report: too few samples ($samples)"
[ -n "$want" ] || fail "perf report does not list hot: $(head -20 "$tmp/report")"
# perf report's flat samples per symbol, "NAME<TAB>COUNT" sorted
perf report -i "$tmp/x.data" --stdio --no-children --sort sym \
  -F sample,sym -q -g none 2> /dev/null |
  awk '$1 ~ /^[0-9]+$/ { n = $1; sub(/^ *[0-9]+ +\[[^]]*\] /, "");
    c[$0] += n } END { for (s in c) print s "\t" c[s] }' |
  LC_ALL=C sort > "$tmp/perf.flat"

$EMBER import -d "$tmp/db" --format perf "$tmp/x.txt" 2> "$tmp/imp" ||
  fail "import --format perf: $(cat "$tmp/imp")"
$EMBER import -d "$tmp/db2" "$tmp/xh.txt" 2> "$tmp/imp2" ||
  fail "import (auto-detected, --header): $(cat "$tmp/imp2")"

# flat DB: Ember's samples per leaf function, as perf.flat
flat() {
  $EMBER query -d "$1" -o collapsed "$TYPE{}" |
    awk '{ v = $NF; s = $0; sub(/ [^ ]+$/, "", s); n = split(s, f, ";");
      c[f[n]] += v } END { for (k in c) print k "\t" c[k] }' | LC_ALL=C sort
}
# check DB: the total, the first row of top and every function's flat samples
check() {
  $EMBER query -d "$1" "$TYPE{}" -o top > "$tmp/top" || fail "query $1"
  grep -q "of $samples total" "$tmp/top" ||
    fail "$1: total is not perf report's $samples: $(sed -n 2p "$tmp/top")"
  first=$(sed -n 4p "$tmp/top" | awk '{ print $NF }')
  got=$(sed -n 4p "$tmp/top" | awk '{ sub(/%/, "", $2); print $2 }')
  [ "$first" = hot ] || fail "$1: first row is not hot: $(sed -n 4p "$tmp/top")"
  flat "$1" > "$tmp/ember.flat" || fail "query -o collapsed $1"
  diff "$tmp/perf.flat" "$tmp/ember.flat" > "$tmp/flat.diff" ||
    fail "$1: flat samples differ from perf report's (< perf, > ember): $(head -10 "$tmp/flat.diff")"
  echo "perf: ${1##*/}: hot $got% flat of $samples samples (perf report: $want%)," \
       "all $(wc -l < "$tmp/perf.flat") functions' flat samples equal"
}
check "$tmp/db"
check "$tmp/db2"

# labels from the headers; a 100 ms window splits the samples, not the total
$EMBER query -d "$tmp/db" "$TYPE{comm=\"hot\",event=\"cpu-clock\"}" -o top |
  grep -q "of $samples total" || fail "comm and event labels"
$EMBER import -d "$tmp/db3" --format perf --window 100ms "$tmp/x.txt" 2> "$tmp/imp3" ||
  fail "import --window: $(cat "$tmp/imp3")"
$EMBER stats -d "$tmp/db3" > "$tmp/stats"
profiles=$(awk '$1 == "profiles" { print $2 }' "$tmp/stats")
[ "${profiles:-0}" -gt 4 ] || fail "--window 100ms made $profiles profiles"
$EMBER query -d "$tmp/db3" "$TYPE{}" -o top | grep -q "of $samples total" ||
  fail "--window changed the total"
$EMBER verify -d "$tmp/db" > /dev/null || fail "verify"
echo "perf: ok"
