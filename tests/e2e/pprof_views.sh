#!/bin/sh
# tests/e2e/pprof_views.sh: the views pprof users reach for, against go tool
# pprof on the same real Go profiles (issue 16):
#
# - callees(P, re): `-o top` equals `go tool pprof -top -show_from=re` row
#   for row (pprof drops the frames above the outermost match, as callees
#   cuts its stacks there, and keeps the other samples' value in the
#   total); callers(P, re) has the matched functions' pprof cum as its
#   total and as the matched leaf's flat.
# - peek(P, re): its text, from the "Showing nodes" line to the end, is
#   `go tool pprof -peek=re` byte for byte (sorted by flat, and by cum with
#   --cum as pprof's -cum; with --unit as -unit).
# - granularity(P, g): `-o top` equals `go tool pprof -top -g` (-lines,
#   -files, ...) row for row for every granularity, on both sample types
#   of the CPU profile and with filters, which match functions before the
#   names are aggregated, as pprof's do.
# - list(P, re): its text is `go tool pprof -list=re` byte for byte, on a
#   CPU profile profgen (tests/go/profgen) records now, whose source files
#   are this checkout's and Go's own, and on the committed one where pprof
#   can read the sources it names (where it cannot, both say so under
#   the same headers).
# - normalize(diff(A, B)): written with -o pprof, go tool pprof -top of it
#   has the rows (flat and cum) of `go tool pprof -top -diff_base=A
#   -normalize B`, on the committed profile and the one recorded now.
#
# Over the committed CPU profile tests/data/pprof/cpu.pb.gz (go 1.19). The
# query names the type by its short name, `cpu`, as -sample_index=cpu
# does. Without go the test fails.
set -eu
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
. tests/e2e/lib/pprof_compare.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }
pc_go_env "$tmp" || die "go is missing: install golang-go (make deps does)"

prof=tests/data/pprof/cpu.pb.gz
heap=tests/data/pprof/heap.pb.gz
db=$tmp/db
$EMBER import -d "$db" "$prof" "$heap" > "$tmp/imp" 2>&1 ||
    die "ember import $prof $heap: $(cat "$tmp/imp")"

failures=0
checks=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# q QUERY [ARGS...]: ember query -o top (every row) on the database.
q() {
    query=$1
    shift
    $EMBER query -d "$db" "$@" "$query"
}

# esc RE: RE inside a double-quoted query string.
esc() { printf '%s' "$1" | sed 's/\\/\\\\/g'; }

# table < TOP: the "Showing nodes" line and the rows after the header,
# sorted (rows of equal flat may come in either order).
table() {
    awk '/^Showing nodes accounting/ { print; next }
         go && NF > 0 { print }
         /^ *flat  flat%/ { go = 1 }' | LC_ALL=C sort
}

# same_top QUERY PPROF_FLAGS...: `ember query -o top QUERY` equals
# `go tool pprof -top FLAGS` (its rows and its "Showing nodes" line), on
# $on (the CPU profile) with -sample_index=$index (cpu).
on=$prof
index=cpu
same_top() {
    checks=$((checks + 1))
    query=$1
    shift
    pc_top -sample_index="$index" "$@" "$on" | table > "$tmp/want"
    q "$query" -o top 2> "$tmp/err" | table > "$tmp/got"
    if [ "$(wc -l < "$tmp/want")" -lt 2 ]; then
        fail "$*: go tool pprof printed no rows"
    elif ! cmp -s "$tmp/want" "$tmp/got"; then
        fail "$query differs from go tool pprof -top $* (- pprof, + ember):" \
             "$(cat "$tmp/err")"
        diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -10 >&2
    fi
}

# ---- callers and callees ----------------------------------------------------

# cum_of NAME < TOP: the cum column of NAME's row, as printed.
cum_of() { awk -v n="$1" '$6 == n { print $4 }'; }
flat_of() { awk -v n="$1" '$6 == n { print $1 }'; }

for re in 'main\.work\.func1' '^main\.fib$' 'sort\.' '^runtime\.mallocgc$' \
          '^main\.mix$'; do
    same_top "callees(cpu, \"$(esc "$re")\")" -show_from="$re"
done

# callers of one function: it is every stack's leaf, so its flat is its
# cum in the whole profile, and the total shown is that cum too
for fn in main.fib sort.pdqsort main.hashWork runtime.mallocgc; do
    checks=$((checks + 1))
    re="^$(printf '%s' "$fn" | sed 's/\./\\./g')\$"
    want=$(pc_top -sample_index=cpu "$prof" | cum_of "$fn")
    got=$(q "callers(cpu, \"$(esc "$re")\")" -o top | flat_of "$fn")
    shown=$(q "callers(cpu, \"$(esc "$re")\")" -o top |
            sed -n 's/^Showing nodes accounting for \([^,]*\),.*/\1/p')
    [ -n "$want" ] && [ "$want" = "$got" ] && [ "$want" = "$shown" ] ||
        fail "callers of $fn: flat $got and shown $shown, want pprof's cum $want"
done

# ---- peek -------------------------------------------------------------------

# same_text WHAT WANT GOT: the files are equal and WANT has rows.
same_text() {
    checks=$((checks + 1))
    if [ "$(wc -l < "$2")" -lt 3 ]; then
        fail "$1: go tool pprof printed nothing to compare"
    elif ! cmp -s "$2" "$3"; then
        fail "$1 differs from go tool pprof (- pprof, + ember):"
        diff "$2" "$3" | grep '^[<>]' | head -10 >&2
    fi
}

from_showing() { sed -n '/^Showing nodes accounting/,$p'; }

# same_peek RE [EMBER_FLAGS [PPROF_FLAGS]]
same_peek() {
    pc_pprof -sample_index=cpu -peek="$1" ${3:-} "$prof" | from_showing \
        > "$tmp/want"
    q "peek(cpu, \"$(esc "$1")\")" ${2:-} | from_showing > "$tmp/got"
    same_text "peek(cpu, \"$1\") ${2:-}" "$tmp/want" "$tmp/got"
}

same_peek 'main\.fib|sort\.pdqsort'
same_peek '^main\.mix$'                 # inlined: its in-edge says (inline)
same_peek 'runtime\.'
same_peek 'main\.work'
same_peek '.'                           # every node
same_peek 'sort\.' --cum -cum
same_peek 'main\.' '--unit ms' '-unit=ms'

# ---- granularity --------------------------------------------------------------

for g in functions filefunctions files lines addresses; do
    same_top "granularity(cpu, \"$g\")" -"$g"
done
same_top 'granularity(hide(cpu, "^runtime\\."), "lines")' -lines \
    -hide='^runtime\.'
same_top 'granularity(focus(cpu, "fib"), "files")' -files -focus=fib
same_top 'granularity(show(cpu, "main\\."), "addresses")' -addresses \
    -show='main\.'
same_top 'granularity(callees(cpu, "^sort\\.Sort$"), "lines")' -lines \
    -show_from='^sort\.Sort$'
index=samples
same_top 'granularity(samples, "lines")' -lines
on=$heap
for index in inuse_space alloc_objects; do
    same_top "granularity($index, \"files\")" -files
    same_top "granularity($index, \"addresses\")" -addresses
done
on=$prof
index=cpu

# ---- list -------------------------------------------------------------------

# same_list DB PROFILE RE [EMBER_FLAGS [PPROF_FLAGS]]
same_list() {
    pc_pprof -sample_index=cpu -list="$3" ${5:-} "$2" > "$tmp/want"
    $EMBER query -d "$1" ${4:-} "list(cpu, \"$(esc "$3")\")" \
        > "$tmp/got" 2> "$tmp/err"
    if grep -q '^ Error: ' "$tmp/want"; then   # sources pprof cannot read
        checks=$((checks + 1))
        heads() { grep -E '^(Total:|ROUTINE|No source| Error: )' "$1" |
                  sed 's/^ Error: .*/ Error:/'; }
        heads "$tmp/want" > "$tmp/want.h"
        heads "$tmp/got" > "$tmp/got.h"
        cmp -s "$tmp/want.h" "$tmp/got.h" ||
            fail "list(cpu, \"$3\") headers differ from go tool pprof's"
    else
        same_text "list(cpu, \"$3\") on $2" "$tmp/want" "$tmp/got"
    fi
}

for re in 'main\.fib|main\.mix' '^main\.' 'sort\.' '.'; do
    same_list "$db" "$prof" "$re"
done

go build -o "$tmp/profgen" tests/go/profgen/main.go ||
    die "go build tests/go/profgen/main.go"
"$tmp/profgen" -out "$tmp/gen" -cpu 500ms -seed 3 > /dev/null ||
    die "profgen"
gen=$tmp/gen/cpu.pb.gz
$EMBER import -d "$tmp/gendb" "$gen" > "$tmp/imp" 2>&1 ||
    die "ember import $gen: $(cat "$tmp/imp")"
for re in '^main\.' 'runtime\.mallocgc' '.'; do
    same_list "$tmp/gendb" "$gen" "$re"
done
# the checkout's own source was read, or the comparison proved little
grep -q "^ *[0-9.a-z]* *[0-9.a-z]* *[0-9]*:func fib(n int) int {" "$tmp/got" ||
    fail "list(cpu, \".\") on $gen shows no line of tests/go/profgen/main.go"
same_list "$tmp/gendb" "$gen" 'main\.' '--unit ms' '-unit=ms'
same_list "$tmp/gendb" "$gen" 'main\.(fib|work)' '--cum' '-cum'

# ---- list over HTTP: a server reads sources only with --source-path -----------

sock=$tmp/s.sock
# serve_list OUT ARGS...: list(cpu, `^main\.fib$`) from `ember serve ARGS`
serve_list() {
    out=$1
    shift
    rm -f "$sock"
    $EMBER serve -d "$tmp/gendb" --listen "unix:$sock" --access-log off \
        --compact-every 0 "$@" 2> "$tmp/slog" &
    spid=$!
    for _ in $(seq 200); do
        grep -q 'listening on' "$tmp/slog" 2> /dev/null && break
        sleep 0.05
    done
    curl -s --unix-socket "$sock" -G http://ember/api/v1/query \
        --data-urlencode 'query=list(cpu, `^main\.fib$`)' -d format=top > "$out" ||
        die "curl: list over HTTP"
    kill -TERM "$spid"
    wait "$spid" || die "ember serve $*: exit $?: $(tail -3 "$tmp/slog")"
}
serve_list "$tmp/http_plain"
serve_list "$tmp/http_src" --source-path ""
$EMBER query -d "$tmp/gendb" 'list(cpu, `^main\.fib$`)' > "$tmp/cli_src"
checks=$((checks + 1))
cmp -s "$tmp/http_src" "$tmp/cli_src" ||
    fail "list() over HTTP with --source-path differs from ember query's"
grep -q 'func fib(n int) int {' "$tmp/http_src" ||
    fail "list() over HTTP with --source-path shows no source text"
if grep -q 'func fib' "$tmp/http_plain"; then
    fail "ember serve read a source file without --source-path"
fi
grep -q ' Error: ' "$tmp/http_plain" ||
    fail "list() over HTTP without --source-path does not say why no text"

# ---- normalize ------------------------------------------------------------------

ndb=$tmp/ndb
# The recorded profile's total is the CPU it got, which may come within
# rounding of the committed one's (800ms): -normalize would then change no
# printed value and prove nothing. The base side is K copies of the
# committed profile, K chosen so the two totals differ by 1.5x at least.
pc_total() {
    pc_top -sample_index=cpu "$@" |
        sed -n 's/.* of \([0-9.]*\)\(ms\|s\) total$/\1 \2/p' | head -1 |
        awk '{ print $2 == "s" ? $1 * 1000 : $1 }'
}
g=$(pc_total "$gen")
p=$(pc_total "$prof")
k=$(awk -v g="$g" -v p="$p" 'BEGIN { print (g > p / 1.5 && g < p * 1.5) ? 3 : 1 }')
$EMBER import -d "$ndb" -l side=target "$gen" > "$tmp/imp" 2>&1 ||
    die "ember import: $(cat "$tmp/imp")"
for _ in $(seq "$k"); do
    $EMBER import -d "$ndb" -l side=base "$prof" >> "$tmp/imp" 2>&1 ||
        die "ember import: $(cat "$tmp/imp")"
done
# pprof's side of the K copies: one profile they merge into
basek=$prof
if [ "$k" != 1 ]; then
    basek=$tmp/base$k.pb.gz
    # shellcheck disable=SC2046 # K copies of one path, split on purpose
    pc_pprof -proto $(for _ in $(seq "$k"); do echo "$prof"; done) > "$basek" ||
        die "go tool pprof -proto: merging $k copies of $prof"
fi
# same_diff INDEX BASE TARGET
same_diff() {
    checks=$((checks + 1))
    $EMBER query -d "$ndb" -o pprof "normalize(diff($1{side=\"$2\"}, \
        $1{side=\"$3\"}))" > "$tmp/n.pb.gz" 2> "$tmp/err" ||
        { fail "normalize: $(cat "$tmp/err")"; return 0; }
    base=$basek
    target=$gen
    if [ "$2" = target ]; then base=$gen; target=$basek; fi
    pc_top -sample_index="$1" "$tmp/n.pb.gz" | pc_rows > "$tmp/got"
    pc_top -sample_index="$1" -diff_base="$base" -normalize "$target" |
        pc_rows > "$tmp/want"
    pc_top -sample_index="$1" -diff_base="$base" "$target" | pc_rows \
        > "$tmp/plain"
    if cmp -s "$tmp/want" "$tmp/plain"; then
        fail "normalize: -normalize changed nothing to compare ($g ms against $k x $p ms)"
    fi
    pc_same "$tmp/want" "$tmp/got" "normalize(diff($1, base x$k))" ||
        failures=$((failures + 1))
}
same_diff cpu base target
same_diff cpu target base
same_diff samples base target

[ "$failures" = 0 ] || { echo "pprof_views: $failures of $checks differ" >&2; exit 1; }
echo "pprof_views: ok ($checks views equal go tool pprof's)"
