#!/bin/sh
# tests/e2e/pprof_filters.sh: focus, ignore, hide and show against go tool
# pprof's -focus, -ignore, -hide and -show (issue 12). Over the committed
# Go CPU profile tests/data/pprof/cpu.pb.gz, `ember query -o top` of each
# filter equals `go tool pprof -top` with the flag: every row (flat, cum,
# percentages and the "(inline)" marks) and the "Showing nodes accounting
# for X, Y% of Z total" line, whose Z is the whole profile's total for
# focus and ignore too (pprof computes the total before those filters, and
# so does Ember, pushed into the engine or not); then filters combined.
# The query names the type by its short name, `cpu`, as -sample_index=cpu
# does. The patterns avoid source file and mapping names, which pprof
# matches too and Ember does not (docs/query-language.md, 4.1). Without go
# the test fails.
set -eu
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
. tests/e2e/lib/pprof_compare.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }
pc_go_env "$tmp" || die "go is missing: install golang-go (make deps does)"

prof=tests/data/pprof/cpu.pb.gz
db=$tmp/db
$EMBER import -d "$db" "$prof" > "$tmp/imp" 2>&1 ||
    die "ember import $prof: $(cat "$tmp/imp")"

# table < TOP: the "Showing nodes" line and the rows after the header,
# sorted (rows of equal flat may come in either order).
table() {
    awk '/^Showing nodes accounting/ { print; next }
         go && NF > 0 { print }
         /^ *flat  flat%/ { go = 1 }' | LC_ALL=C sort
}

failures=0
checks=0
# same QUERY FLAGS...: `ember query -o top QUERY` equals pprof -top FLAGS.
same() {
    checks=$((checks + 1))
    q=$1
    shift
    pc_top -sample_index=cpu "$@" "$prof" | table > "$tmp/want"
    $EMBER query -d "$db" -o top --limit 100000 "$q" 2> "$tmp/err" |
        table > "$tmp/got"
    if [ "$(wc -l < "$tmp/want")" -lt 2 ]; then
        echo "FAIL: $*: go tool pprof printed no rows" >&2
        failures=$((failures + 1))
    elif ! cmp -s "$tmp/want" "$tmp/got"; then
        echo "FAIL: $q differs from go tool pprof $*" \
             "(- pprof, + ember): $(cat "$tmp/err")" >&2
        diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -10 >&2
        failures=$((failures + 1))
    fi
}

# check FLAG RE: the filter FLAG (focus, ignore, hide, show) with RE.
check() {
    same "$1(cpu, \"$(printf '%s' "$2" | sed 's/\\/\\\\/g')\")" -"$1"="$2"
}

check focus 'fib'                   # anywhere in the name, as pprof
check focus '^main\.work\.func1$'
check ignore 'runtime\.m'
check hide 'fib|sort'
check hide '^main\.mix$'            # inlined into: main.sq stays inline
check show 'main\.'
check show 'sort\.|main\.fib'
check show '^main\.(mix|sq)$'
# percentages of the whole profile however the filters run: both pushed
# into the engine, one pushed and one on the resolved stacks, none pushed
# (a focus after a show is applied to the resolved stacks)
same 'ignore(focus(cpu, "main\\."), "fib")' -focus='main\.' -ignore=fib
same 'ignore(ignore(cpu, "runtime\\.m"), "fib")' -ignore='runtime\.m|fib'
same 'focus(show(cpu, "."), "fib")' -focus=fib -show=.

[ "$failures" = 0 ] || { echo "pprof_filters: $failures of $checks differ" >&2; exit 1; }
echo "pprof_filters: ok ($checks filters equal go tool pprof's)"
