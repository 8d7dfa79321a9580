#!/bin/sh
# tests/e2e/pprof_go.sh: real Go profiles through Ember, judged by
# `go tool pprof` (issue 3, "Real data in the tests").
#
# tests/go/profgen (built here with Debian's golang-go) writes CPU, heap,
# mutex, block and goroutine profiles of varied, labelled work. They are
# imported with `ember import DIR`, and for every sample type:
#   a. `ember query -o top --unit U` equals `go tool pprof -top -unit=U`
#      over the same files, function by function, flat and cum exactly;
#      also over three CPU profiles merged;
#   b. `ember query -o pprof` round-trips: go tool pprof -top over the
#      export equals go tool pprof over the originals, and the export
#      imported into a fresh database gives the same top again;
#   c. every function, file and line survives: the locations (address and
#      every inline line: function, file, line, start line) go tool pprof
#      -raw sees in the export are those of the original, and every
#      function is a frame of `ember query -o collapsed`;
#   d. labels: TYPE{worker="V"} equals go tool pprof -tagfocus=worker=V,
#      for every worker value profgen set, and is less than the whole;
#   e. top(merge(TYPE{}), N) -o top over 24 CPU profiles is, line for line
#      from "Showing nodes accounting for" on, go tool pprof -top
#      -nodecount=N over the same files (N = 1, 3, 10, 20): the same rows,
#      percentages of the whole total, "Dropped" and "Showing top" lines.
# The profgen binary and its profiles are cached in $BUILD/go-data (or an
# up-to-date build/go-data is reused, so the ASan pass need not regenerate).
# Without go the test fails: it never passes by skipping.
set -eu
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
. tests/e2e/lib/pprof_compare.sh

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PC_LOG=$tmp/pprof.log
failures=0
checks=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# same WANT GOT WHAT: one comparison (pc_same) counted as a check.
same() {
    checks=$((checks + 1))
    pc_same "$@" || failures=$((failures + 1))
}
die() { echo "FAIL: $*" >&2; exit 1; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

command -v go > /dev/null ||
    die "go is missing: install golang-go (make deps does)"
export GO111MODULE=off GOFLAGS= GOCACHE="$(abs "$BUILD/gocache")" \
       GOPATH="$(abs "$BUILD/gopath")" PPROF_TMPDIR="$tmp"
export HOME="${HOME:-$tmp}"

# ---- the profiles, generated once per version of profgen ------------------

src=tests/go/profgen/main.go
stamp="v2 $(cksum < "$src")"
data=$BUILD/go-data
fresh() { [ "$(cat "$1/stamp" 2> /dev/null)" = "$stamp" ]; }
if ! fresh "$data" && fresh build/go-data; then
    data=build/go-data
fi
if ! fresh "$data"; then
    rm -rf "$data"
    mkdir -p "$data"
    go build -o "$data/profgen" "$src" || die "go build $src"
    "$data/profgen" -out "$data/one" -cpu 1s -seed 1 || die "profgen one"
    "$data/profgen" -out "$tmp/three" -n 3 -cpu 400ms -seed 7 ||
        die "profgen three"
    mkdir "$data/three"
    mv "$tmp"/three/cpu-*.pb.gz "$data/three/"
    "$data/profgen" -out "$tmp/many" -n 24 -cpu 150ms -seed 11 ||
        die "profgen many"
    mkdir "$data/many"
    mv "$tmp"/many/cpu-*.pb.gz "$data/many/"
    echo "$stamp" > "$data/stamp"
fi
one=$data/one
three=$data/three
many=$data/many
for f in cpu heap mutex block goroutine; do
    [ -s "$one/$f.pb.gz" ] || die "profgen wrote no $one/$f.pb.gz"
done

# ---- import: the directory of five files, and each file alone ----------

db=$tmp/db
$EMBER import -d "$db" "$one" > "$tmp/imp" 2>&1 ||
    die "ember import $one: $(cat "$tmp/imp")"
for k in cpu heap mutex block goroutine; do
    $EMBER import -d "$tmp/db-$k" "$one/$k.pb.gz" > "$tmp/imp" 2>&1 ||
        die "ember import $k.pb.gz: $(cat "$tmp/imp")"
    pc_pprof -raw "$one/$k.pb.gz" > "$tmp/$k.raw" || die "go tool pprof -raw $k"
done

# The profile-type name part per file (the Parca names of issue 3).
type_name() {
    case $1 in
    cpu) echo process_cpu ;; heap) echo memory ;; *) echo "$1" ;;
    esac
}

# type_of KIND SAMPLE_TYPE UNIT: the full profile type Ember stored the
# sample type under, "name:type:unit:period_type:period_unit[:delta]";
# runs in a subshell, so it only prints why it failed.
type_of() {
    pt=$(sed -n 's/^PeriodType: //p' "$tmp/$1.raw" | tr ' ' ':')
    base="$(type_name "$1"):$2:$3:$pt"
    for t in "$base:delta" "$base"; do
        if [ -n "$($EMBER query -d "$tmp/db-$1" -o collapsed "$t{}" 2> /dev/null)" ]; then
            echo "$t"
            return 0
        fi
    done
    $EMBER query -d "$tmp/db-$1" -o collapsed '{__type__=~".+"}' \
        > /dev/null 2> "$tmp/types" || true
    echo "FAIL: $1.pb.gz: no profile type $base[:delta] with data;" \
         "$(cat "$tmp/types")" >&2
    return 1
}

# unit_of UNIT: the -unit that prints UNIT's values unscaled.
unit_of() {
    case $1 in nanoseconds) echo ns ;; bytes) echo B ;; *) echo "" ;; esac
}

# ember_top DB SELECTOR U: `ember query -o top` rows, in unit U.
ember_top() {
    if [ -n "$3" ]; then
        $EMBER query -d "$1" -o top --unit "$3" "$2" 2>> "$tmp/ember.log"
    else
        $EMBER query -d "$1" -o top "$2" 2>> "$tmp/ember.log"
    fi | pc_rows
}

# go_top U ARGS...: go tool pprof -top rows in unit U.
go_top() {
    u=$1
    shift
    if [ -n "$u" ]; then pc_top -unit="$u" "$@"; else pc_top "$@"; fi | pc_rows
}

# check_type KIND INDEX SAMPLE_TYPE UNIT: parts a, b and c for one type.
check_type() {
    k=$1 i=$2 st=$3 unit=$4
    t=$(type_of "$k" "$st" "$unit") || { failures=$((failures + 1)); return 0; }
    u=$(unit_of "$unit")
    w=$tmp/$k-$st
    go_top "$u" -sample_index="$st" "$one/$k.pb.gz" > "$w.want"
    # a. the top table
    ember_top "$db" "$t{}" "$u" > "$w.got"
    same "$w.want" "$w.got" "a: $t top against go tool pprof"
    # b. the export, read by go tool pprof, and imported again
    if ! $EMBER query -d "$db" -o pprof "$t{}" > "$w.pb.gz" 2>> "$tmp/ember.log"; then
        fail "b: $t: ember query -o pprof failed: $(tail -1 "$tmp/ember.log")"
        return 0
    fi
    gzip -t "$w.pb.gz" 2> /dev/null || fail "b: $t: the export is not gzip"
    go_top "$u" "$w.pb.gz" > "$w.exp"
    same "$w.want" "$w.exp" "b: $t export read by go tool pprof"
    $EMBER import -d "$w.db" "$w.pb.gz" > /dev/null 2>> "$tmp/ember.log" ||
        fail "b: $t: importing the export failed: $(tail -1 "$tmp/ember.log")"
    # the same profile type again: the export says the sample and period
    # types, and the name part follows from them
    ember_top "$w.db" "$t{}" "$u" > "$w.re"
    same "$w.want" "$w.re" "b: $t export imported again"
    # c. locations (address, functions, files, lines), mappings, functions
    pc_pprof -raw "$w.pb.gz" > "$w.raw"
    pc_locs "$tmp/$k.raw" "$i" > "$w.locs"
    pc_locs "$w.raw" 1 > "$w.elocs"
    same "$w.locs" "$w.elocs" "c: $t locations in the export"
    pc_maps "$tmp/$k.raw" > "$w.maps"
    pc_maps "$w.raw" > "$w.emaps"
    if [ ! -s "$w.emaps" ] || [ -n "$(LC_ALL=C comm -13 "$w.maps" "$w.emaps")" ]; then
        fail "c: $t: export mappings $(tr '\n' ';' < "$w.emaps") not in the original's"
    fi
    grep -A 1000 '^Mappings$' "$w.raw" | grep -q '[[]FN[]]' ||
        fail "c: $t: export mappings lack has_functions"
    pc_funcs "$w.locs" > "$w.funcs"
    $EMBER query -d "$db" -o collapsed "$t{}" 2>> "$tmp/ember.log" |
        pc_frames > "$w.frames"
    same "$w.funcs" "$w.frames" "c: $t functions as collapsed frames"
}

# d. TYPE{worker="V"} for each worker value of KIND's file, against
# go tool pprof -tagfocus, and the subset below the whole.
check_labels() {
    k=$1 st=$2 unit=$3
    t=$(type_of "$k" "$st" "$unit") || { failures=$((failures + 1)); return 0; }
    u=$(unit_of "$unit")
    pc_labels "$tmp/$k.raw" worker > "$tmp/workers"
    [ -s "$tmp/workers" ] || { fail "d: $k.pb.gz has no worker labels"; return 0; }
    total=$(ember_top "$db" "$t{}" "$u" | pc_rows_sum)
    for v in $(cat "$tmp/workers"); do
        w=$tmp/$k-$st-$v
        go_top "$u" -sample_index="$st" -tagfocus="worker=^$v\$" \
            "$one/$k.pb.gz" > "$w.want"
        ember_top "$db" "$t{worker=\"$v\"}" "$u" > "$w.got"
        same "$w.want" "$w.got" "d: $t{worker=\"$v\"} against -tagfocus"
        part=$(pc_rows_sum < "$w.got")
        [ "$part" -gt 0 ] && [ "$part" -lt "$total" ] ||
            fail "d: $t{worker=\"$v\"} sums to $part of $total"
    done
}

# The flat sum of pc_rows output.
pc_rows_sum() {
    awk -F'\t' '{ v = $2; gsub(/[^-0-9]/, "", v); s += v } END { printf "%d\n", s }'
}

for k in cpu heap mutex block goroutine; do
    i=0
    pc_types "$tmp/$k.raw" > "$tmp/$k.types"
    [ -s "$tmp/$k.types" ] || die "no sample types in $k.pb.gz"
    while read -r st unit; do
        i=$((i + 1))
        check_type "$k" "$i" "$st" "$unit" < /dev/null
    done < "$tmp/$k.types"
done
check_labels cpu cpu nanoseconds
check_labels cpu samples count
check_labels goroutine goroutine count

# The issue names the two CPU types exactly.
for t in process_cpu:samples:count:cpu:nanoseconds:delta \
         process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta; do
    [ -n "$($EMBER query -d "$db" -o collapsed "$t{}" 2> /dev/null)" ] ||
        fail "no data under $t"
done

# ---- three CPU profiles merged --------------------------------------------

$EMBER import -d "$tmp/db3" "$three" > "$tmp/imp" 2>&1 ||
    die "ember import $three: $(cat "$tmp/imp")"
for st in samples cpu; do
    case $st in samples) u= t=process_cpu:samples:count ;;
                cpu) u=ns t=process_cpu:cpu:nanoseconds ;; esac
    t=$t:cpu:nanoseconds:delta
    w=$tmp/three-$st
    go_top "$u" -sample_index=$st "$three"/cpu-*.pb.gz > "$w.want"
    ember_top "$tmp/db3" "$t{}" "$u" > "$w.got"
    same "$w.want" "$w.got" "a: $t over 3 files merged"
    if $EMBER query -d "$tmp/db3" -o pprof "$t{}" > "$w.pb.gz" 2>> "$tmp/ember.log"; then
        go_top "$u" "$w.pb.gz" > "$w.exp"
        same "$w.want" "$w.exp" "b: $t merged export read by go tool pprof"
    else
        fail "b: $t: merged export failed: $(tail -1 "$tmp/ember.log")"
    fi
done

# ---- e. top(P, N) against -nodecount=N, over many CPU profiles --------------

# The report from its "Showing nodes accounting for" line on.
from_showing() { sed -n '/^Showing nodes accounting for /,$p'; }

$EMBER import -d "$tmp/dbm" "$many" > "$tmp/imp" 2>&1 ||
    die "ember import $many: $(cat "$tmp/imp")"
for st in samples cpu; do
    case $st in samples) t=process_cpu:samples:count ;;
                cpu) t=process_cpu:cpu:nanoseconds ;; esac
    t=$t:cpu:nanoseconds:delta
    for n in 1 3 10 20; do
        w=$tmp/many-$st-$n
        pc_pprof -top -nodecount="$n" -sample_index=$st "$many"/cpu-*.pb.gz |
            from_showing > "$w.want"
        $EMBER query -d "$tmp/dbm" -o top "top(merge($t{}), $n)" \
            2>> "$tmp/ember.log" | from_showing > "$w.got"
        checks=$((checks + 1))
        if [ ! -s "$w.want" ] || ! cmp -s "$w.want" "$w.got"; then
            fail "e: top(merge($t{}), $n) against -nodecount=$n:" \
                 "$(diff "$w.want" "$w.got" | head -20)"
        fi
    done
done

if [ "$failures" -gt 0 ]; then
    if [ -s "$tmp/ember.log" ]; then
        echo "ember said (last lines):" >&2
        tail -5 "$tmp/ember.log" >&2
    fi
    echo "pprof_go: $failures checks failed" >&2
    exit 1
fi
echo "pprof_go: ok ($checks comparisons with go tool pprof)"
