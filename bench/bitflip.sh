#!/bin/sh
# bench/bitflip.sh [N] [SEED]: the bit-flip probe on the LMDB file (issue
# 15, point 4). Imports the real profiles of tests/data (Go's CPU, heap,
# mutex, block and goroutine pprof, three collapsed files) into a fresh
# database, then N times (default 490, the issue's first probe) copies its
# data.mdb, flips one bit of the copy, chosen by a generator seeded with
# SEED (default 1, so a run is repeatable), and runs `ember verify` and a
# fixed set of queries (top, collapsed, totals) on it, each under a 20 s
# timeout. Each flip is classified, separately for verify and the queries:
#   crash         killed by a signal (SIGSEGV, SIGBUS, an abort)
#   hang          still running after 20 s
#   wrong, exit 0 verify: said ok, yet a query answered differently, failed
#                 or crashed; queries: exit 0 with output that differs from
#                 the undamaged database's
#   error         exit 1 with a message (the damage was reported)
#   no effect     verify said ok and every query answered as before
# Prints one line per flip that was not "no effect" for both, then the
# counts as a Markdown table, then a last line for scripts:
#   bitflip: N flips: verify crash C hang H wrong W error E none X;
#   queries crash C hang H wrong W error E none X
# EMBER (default build/ember) is the binary under test; KEEP=DIR keeps a
# copy of every database that crashed or fooled verify in DIR.
set -eu
n=${1:-490}
seed=${2:-1}
EMBER=${EMBER:-build/ember}
KEEP=${KEEP:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
die() { echo "bitflip: $*" >&2; exit 1; }
[ -x "$EMBER" ] || die "$EMBER is missing: build it first (make cli)"

# The fixed queries: a merge printed as top (stacks, locations, functions,
# strings, mappings), another as collapsed stacks, and the totals of every
# series of every type (label postings, series, chunks).
q1='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{}'
q2='memory:alloc_space:bytes:space:bytes{}'
q3='total({__type__=~".+"})'

# queries DB OUT: runs the three queries on DB into OUT.1 to OUT.3 (stdout,
# then the exit status on the last line); prints the worst status class.
queries() {
    worst=ok
    i=0
    for spec in "top|$q1" "collapsed|$q2" "csv|$q3"; do
        i=$((i + 1))
        fmt=${spec%%|*}
        q=${spec#*|}
        set +e
        timeout 20 "$EMBER" query -d "$1" -o "$fmt" "$q" > "$2.$i" 2> /dev/null
        rc=$?
        set -e
        echo "exit $rc" >> "$2.$i"
        class=$(classify "$rc")
        if [ "$class" = ok ] && [ -f "$tmp/want.$i" ] &&
           ! cmp -s "$2.$i" "$tmp/want.$i"; then
            class=wrong
        fi
        worst=$(worse "$worst" "$class")
    done
    echo "$worst"
}

# classify RC: the class of an exit status
classify() {
    case $1 in
        0) echo ok ;;
        1) echo error ;;
        124) echo hang ;;
        *) echo crash ;;        # 128 + signal, or timeout's own 125-137
    esac
}

# worse A B: the worse of two classes (crash > hang > wrong > error > ok)
worse() {
    for c in crash hang wrong error; do
        if [ "$1" = "$c" ] || [ "$2" = "$c" ]; then echo "$c"; return; fi
    done
    echo ok
}

# rand: the next draw of a 31-bit LCG (glibc's constants) in $x; the sums
# stay below 2^62, so any POSIX shell computes them exactly.
x=$seed
rand() { x=$(( (x * 1103515245 + 12345) % 2147483648 )); }

# flip FILE BIT: inverts bit BIT (0 = the low bit of byte 0) of FILE
flip() {
    off=$(($2 / 8))
    byte=$(od -An -tu1 -j "$off" -N1 "$1" | tr -d ' ')
    new=$((byte ^ (1 << ($2 % 8))))
    # shellcheck disable=SC2059
    printf "\\$(printf %o "$new")" |
        dd of="$1" bs=1 seek="$off" conv=notrunc 2> /dev/null
}

orig=$tmp/orig
db=$tmp/db
"$EMBER" import -d "$orig" tests/data/pprof/*.pb.gz \
    tests/data/collapsed/*.txt > /dev/null 2>&1 || die "import failed"
"$EMBER" verify -d "$orig" > /dev/null || die "the fresh database fails verify"
mkdir "$db"
cp "$orig/data.mdb" "$db/data.mdb"
[ "$(queries "$db" "$tmp/want")" = ok ] || die "a query fails undamaged"
size=$(wc -c < "$orig/data.mdb")
bits=$((size * 8))
psize=$(od -An -tu4 -j 40 -N4 "$orig/data.mdb" | tr -d ' ')  # LMDB's page

vc=0; vh=0; vw=0; ve=0; vn=0
qc=0; qh=0; qw=0; qe=0; qn=0
k=0
while [ "$k" -lt "$n" ]; do
    k=$((k + 1))
    rand; hi=$((x / 65536))
    rand; bit=$(( (hi * 32768 + x / 65536) % bits ))
    rm -f "$db/lock.mdb"
    cp "$orig/data.mdb" "$db/data.mdb"
    flip "$db/data.mdb" "$bit"
    set +e
    timeout 20 "$EMBER" verify -d "$db" > "$tmp/verify" 2>&1
    vrc=$?
    set -e
    v=$(classify "$vrc")
    qcls=$(queries "$db" "$tmp/got")
    if [ "$v" = ok ] && [ "$qcls" != ok ]; then v=wrong; fi
    case $v in
        crash) vc=$((vc + 1)) ;; hang) vh=$((vh + 1)) ;;
        wrong) vw=$((vw + 1)) ;; error) ve=$((ve + 1)) ;; *) vn=$((vn + 1)) ;;
    esac
    case $qcls in
        crash) qc=$((qc + 1)) ;; hang) qh=$((qh + 1)) ;;
        wrong) qw=$((qw + 1)) ;; error) qe=$((qe + 1)) ;; *) qn=$((qn + 1)) ;;
    esac
    if [ "$v" != ok ] || [ "$qcls" != ok ]; then
        printf 'flip %d: byte %d bit %d (page %d +%d): verify %s, queries %s: %s\n' \
            "$k" $((bit / 8)) $((bit % 8)) $((bit / 8 / psize)) \
            $((bit / 8 % psize)) "$v" "$qcls" \
            "$(head -c 160 "$tmp/verify" | tr '\n' ' ')"
    fi
    if [ -n "$KEEP" ] && { [ "$v" = crash ] || [ "$v" = wrong ] ||
                           [ "$qcls" = crash ]; }; then
        mkdir -p "$KEEP/flip$k"
        cp "$db/data.mdb" "$KEEP/flip$k/data.mdb"
    fi
done

echo
echo "$n flips of one bit each in a $size-byte data.mdb (seed $seed):"
echo
echo "| outcome | ember verify | queries (top, collapsed, totals) |"
echo "|---|---|---|"
echo "| crash (signal) | $vc | $qc |"
echo "| hang (20 s) | $vh | $qh |"
echo "| wrong answer, exit 0 | $vw | $qw |"
echo "| error reported | $ve | $qe |"
echo "| no effect | $vn | $qn |"
echo
echo "bitflip: $n flips: verify crash $vc hang $vh wrong $vw error $ve" \
     "none $vn; queries crash $qc hang $qh wrong $qw error $qe none $qn"
