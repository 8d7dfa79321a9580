#!/bin/sh
# bench/compact.sh BUILD: bytes on disk before and after `ember compact
# --head 0` (issue 15, "What must hold", point 1), against SQLite and the
# zstd -19 floor. Part of `make bench` (bench/run.sh); alone, after `make
# bench-bin`: `sh bench/compact.sh build`.
#
# Two data sets, each compacted on a fresh copy so reruns measure the same
# thing (rerun it when compaction changes: merging, retention and
# downsampling will move the "after" column):
#   real   bench/corpus15.sh's ten minutes of three Go services' CPU and
#          heap profiles and perf stacks, imported into a fresh database
#          (`ember import`, each service's directory with -l service=NAME);
#   synth  bench_engine's 24 h synthetic set (bench/gen.h, seed 1: the
#          1.81 bytes/sample of bench/RESULTS.md), written by `bench_engine
#          --ember-only --keep` and cached with its SQLite and zstd figures
#          (they take minutes) in BUILD/bench-data/synth15.
# Measured for each:
#   before   `du` of the directory (what the disk holds, lock file and
#            sparse holes as they are), per stored sample; `ember stats`'s
#            tables: chunks, symbols (records, hash indexes and function
#            postings of strings..stacks) per distinct stack, LMDB's free
#            pages (the data file less the pages of all tables);
#   after    `ember compact --head 0` (2 h blocks cut from the head, then
#            merged into one block a day; synth also cut into day blocks
#            at once, `--block 24h`): `du`
#            per sample, and bench/bench_blocks's sum of the block files'
#            sections per distinct stack (the stacks `ember stats` counted
#            before: the same stack in two blocks is paid twice);
#   sqlite   bench/bench_export's normalized SQLite schema (gen_sqlite.c)
#            holding the same rows, file after a checkpoint;
#   floor    bench_export's plain columns (series u32, time i64, stack u32,
#            value i64 per sample; series, stacks, locations, functions,
#            mappings as text), each file through `zstd -19`, summed.
# Prints Markdown, also kept in BUILD/bench-compact.md.
set -eu
build=${1:-build}
ember=$build/ember
bb=$build/bench/bench_blocks
bx=$build/bench/bench_export
be=$build/bench/bench_engine
bench=$build/bench-data
work=$bench/compact15
out=$build/bench-compact.md

note() { echo "bench compact: $*" >&2; }
die() { note "$*"; exit 1; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
for f in "$ember" "$bb" "$bx" "$be"; do
    [ -x "$f" ] || die "$f is missing: run make bench-bin first"
done
command -v zstd > /dev/null || die "zstd is missing: install zstd"
rm -rf "$work"
mkdir -p "$work"

# ---- helpers ----------------------------------------------------------------

du_b() { du -s -B1 "$1" | cut -f1; }
# estat DB KEY: the first number after KEY (words) in `ember stats`
estat() { "$ember" stats -d "$1" | sed -n "s/^$2  *\([0-9][0-9]*\).*/\1/p" | head -1; }
# table DB NAME...: summed bytes of those LMDB tables in `ember stats`
# (NAME "all": every table: the pages in use)
table() {
    db=$1; shift
    "$ember" stats -d "$db" | awk -v names=" $* " '$1 == "table" { t = 1; next }
        t && NF == 3 && (names == " all " || index(names, " " $1 " ")) { n += $3 }
        END { print n + 0 }'
}
div() { awk -v a="$1" -v b="$2" -v p="${3:-2}" 'BEGIN { printf "%.*f", p, b ? a / b : 0 }'; }
mb() { awk -v a="$1" 'BEGIN { printf "%.2f MB", a / 1e6 }'; }
SYM_TABLES="str strh map maph fn fnh loc loch stk stkh fpost"

# A data set's figures live in $work/NAME.fig as KEY=VALUE lines.
# put NAME KEY=VALUE... (words): adds them; get NAME KEY: the last value.
put() { f=$work/$1.fig; shift; for kv in "$@"; do echo "$kv" >> "$f"; done; }
get() { sed -n "s/^$2=//p" "$work/$1.fig" | tail -1; }

# floor NAME DIR: zstd -19 of each file of DIR, a table row each into
# $work/NAME.floor, their sum as NAME's floor
floor() {
    total=0
    : > "$work/$1.floor"
    for f in "$2"/*; do
        z=$(zstd -19 -T2 -q -c "$f" | wc -c)
        total=$((total + z))
        echo "| $(basename "$f") | $(wc -c < "$f") | $z |" >> "$work/$1.floor"
    done
    put "$1" "floor=$total"
}

# ---- one data set ---------------------------------------------------------------

# before NAME DB: the figures of DB as written
before() {
    put "$1" "samples=$(estat "$2" samples)" "stacks=$(estat "$2" stacks)" \
        "du0=$(du_b "$2")" "file0=$(estat "$2" "file bytes")" \
        "used0=$(table "$2" all)" "chunks0=$(table "$2" chunk head)" \
        "sym0=$(table "$2" "$SYM_TABLES")" "fpost0=$(table "$2" fpost)" \
        "ser0=$(table "$2" ser serh post)"
}

# compact NAME DB STACKS [ARGS]: compacts a copy of DB (its report in
# $work/NAME.compact; returns 1 when ember compact fails), then NAME's
# figures after: du1, lmdb1 and bench_blocks's sums (STACKS: the
# distinct stacks before, for its per-stack column)
compact() {
    name=$1 db=$2 stacks=$3; shift 3
    rm -rf "$work/$name.db"
    cp -a "$db" "$work/$name.db"
    "$ember" compact -d "$work/$name.db" --head 0 "$@" > "$work/$name.compact" 2>&1 ||
        return 1
    "$ember" verify -d "$work/$name.db" > /dev/null || die "ember verify $name failed"
    put "$name" "du1=$(du_b "$work/$name.db")" \
        "lmdb1=$(($(du_b "$work/$name.db/data.mdb") + $(du_b "$work/$name.db/lock.mdb")))"
    "$bb" "$work/$name.db" --stacks "$stacks" > "$work/$name.blocks"
    # shellcheck disable=SC2046 # the last line is words KEY=VALUE
    put "$name" $(tail -1 "$work/$name.blocks")
}

# against NAME DB: SQLite and the zstd floor of DB's rows
against() {
    # shellcheck disable=SC2046 # bench_export prints words KEY=VALUE
    put "$1" $("$bx" "$2" --sqlite "$work/$1.sqlite" --columns "$work/$1.cols")
    floor "$1" "$work/$1.cols"
    rm -rf "$work/$1.cols" "$work/$1.sqlite" "$work/$1.sqlite-wal" "$work/$1.sqlite-shm"
}

# ---- the real corpus --------------------------------------------------------------

# import_real DIR: a fresh database $real of the corpus at DIR
import_real() {
    note "importing $1"
    rm -rf "$real"
    for s in api ingest search; do
        "$ember" import -d "$real" -l service=$s "$1/$s" 2> "$work/import-$s.txt" ||
            die "ember import $s: $(cat "$work/import-$s.txt")"
    done
    if [ -d "$1/perf" ]; then
        "$ember" import -d "$real" "$1/perf" 2> "$work/import-perf.txt" ||
            die "ember import perf: $(cat "$work/import-perf.txt")"
    fi
}

corpus=$(sh bench/corpus15.sh "$build")
perf_part=$(sed -n 's/.* perf=\([a-z]*\)@.*/\1/p' "$corpus.stamp")
corpus_bytes=$(cat "$corpus"/*/* | wc -c)
real=$work/real.orig
stripped=""
import_real "$corpus"
before real "$real"
if ! compact real "$real" "$(get real stacks)"; then
    # Real profiles hold a few samples with an empty stack, which ember
    # compact refused when this was written: measure without them, and say so.
    grep -q "an empty stack" "$work/real.compact" ||
        { cat "$work/real.compact" >&2; die "ember compact real failed"; }
    note "ember compact refuses the corpus's empty stacks: measuring without them"
    export GO111MODULE=off GOFLAGS='' GOCACHE="$(abs "$build/gocache")" \
           GOPATH="$(abs "$build/gopath")" HOME="${HOME:-/tmp}"
    go build -o "$bench/nostack" bench/nostack/main.go || die "go build bench/nostack"
    stripped=$("$bench/nostack" "$corpus" "$work/nostack") || die "nostack failed"
    stripped="$stripped samples with an empty stack left out ($(cat "$work/real.compact"))"
    import_real "$work/nostack"
    rm -rf "$work/nostack"
    before real "$real"
    compact real "$real" "$(get real stacks)" || { cat "$work/real.compact" >&2; die "ember compact real failed"; }
fi
note "real corpus: SQLite and the zstd floor"
against real "$real"

# ---- the synthetic 24 h set -------------------------------------------------------

synth=$bench/synth15
sstamp="bench_engine --ember-only seed 1 $(cat bench/gen.c bench/gen_names.c bench/gen_ember.c \
    bench/gen_sqlite.c bench/bench_export.c | cksum) $($ember --version)"
if [ "$(head -1 "$synth/stamp" 2> /dev/null)" != "$sstamp" ]; then
    note "building the 24 h synthetic set and its SQLite and zstd figures (once, minutes)"
    rm -rf "$synth" "$synth.tmp"
    mkdir -p "$synth.tmp"
    "$be" --ember-only --keep --runs 1 --dir "$synth.tmp" > "$synth.tmp/engine.md" ||
        die "bench_engine failed"
    rm -rf "$synth.tmp/ember-labels" "$synth.tmp/ember-new"
    work_keep=$work; work=$synth.tmp
    against synth "$synth.tmp/ember"
    work=$work_keep
    echo "$sstamp" > "$synth.tmp/stamp"
    mv "$synth.tmp" "$synth"
fi
cp "$synth/synth.fig" "$synth/synth.floor" "$work/"
before synth "$synth/ember"
for c in synth synth_day; do
    if [ $c = synth ]; then set --; else set -- --block 24h; fi
    compact $c "$synth/ember" "$(get synth stacks)" "$@" ||
        { cat "$work/$c.compact" >&2; die "ember compact $c failed"; }
done

# ---- report -------------------------------------------------------------------------

# row LABEL BEFORE AFTER TARGET
row() { echo "| $1 | $2 | $3 | $4 |"; }

# report NAME TITLE TARGET_ALLIN: the before/after table of a data set
report() {
    n=$1 s=$(get "$1" samples) st=$(get "$1" stacks)
    du0=$(get "$n" du0) du1=$(get "$n" du1) sqf=$(get "$n" sqlite_file)
    fl=$(get "$n" floor) sym1=$(get "$n" block_symbols)
    echo
    echo "### $2"
    echo
    echo "$s samples in $(get "$n" profiles) profiles of $(get "$n" series) series;" \
         "$st distinct stacks, $(get "$n" locations) locations, $(get "$n" functions)" \
         "functions, $(get "$n" mappings) mappings."
    echo
    echo "| figure | before (head, as written) | after \`ember compact --head 0\` | target |"
    echo "|---|---:|---:|---|"
    row "bytes on disk (\`du\` of the directory)" "$du0 ($(mb "$du0"))" "$du1 ($(mb "$du1"))" ""
    row "**all-in bytes per stored sample**" "$(div "$du0" "$s")" "$(div "$du1" "$s")" "$3"
    row "sample data (chunks) per sample" "$(div "$(get "$n" chunks0)" "$s")" \
        "$(div "$(get "$n" block_chunks)" "$s")" ""
    row "**symbol data per distinct stack** (before: records, hash indexes and function postings; after: the blocks' symbol sections)" \
        "$(div "$(get "$n" sym0)" "$st" 1)" "$(div "$sym1" "$st" 1)" "<= 20"
    row "&nbsp;&nbsp;of which function postings" "$(div "$(get "$n" fpost0)" "$st" 1)" \
        "none in blocks" ""
    row "all block sections per distinct stack (symbols, series, chunk index)" "" \
        "$(div "$((sym1 + $(get "$n" block_series) + $(get "$n" block_index)))" "$st" 1)" ""
    row "series, labels and postings, bytes" "$(get "$n" ser0)" "$(get "$n" block_series)" ""
    row "LMDB free pages (file - the tables' pages), bytes" \
        "$(($(get "$n" file0) - $(get "$n" used0)))" "" ""
    row "LMDB files after (data.mdb, lock.mdb: \`du\`), bytes" "" "$(get "$n" lmdb1)" ""
    row "blocks" "" "$(get "$n" blocks)" ""
    row "SQLite (same rows, normalized schema): file bytes, per sample" \
        "$sqf, $(div "$sqf" "$s")" "Ember after: $(div "$sqf" "$du1" 1)x smaller" ""
    row "zstd -19 floor (plain columns + tables as text): bytes, per sample" \
        "$fl, $(div "$fl" "$s")" "Ember after / floor: $(div "$du1" "$fl")" ""
}

{
    echo "Ember $($ember --version | awk '{print $2}'), $(date -u +%Y-%m-%d);" \
         "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    echo "Real corpus: $corpus ($(mb "$corpus_bytes") of .pb.gz and gzip'd perf script;" \
         "perf stacks: $perf_part)."
    if [ -n "$stripped" ]; then
        echo
        echo "**Measured without empty stacks:** $stripped. Real Go CPU profiles and perf" \
             "recordings hold a few samples whose stack is empty; ember import stores them" \
             "and ember compact refuses them (an engine bug); the figures are of a copy" \
             "of the corpus without them (bench/nostack)."
    fi
    report real "Real corpus: three Go services (CPU, heap) and perf, ten minutes" "<= 4"
    echo
    echo "Where the block bytes go (real corpus):"
    echo
    sed '$d' "$work/real.blocks"
    echo
    echo "Compaction (real corpus):"
    echo
    echo '```'
    cat "$work/real.compact"
    echo '```'
    report synth "Synthetic 24 h set (bench_engine, seed 1), 2 h blocks merged per day" "<= 1.2"
    echo
    echo "The same cut into day blocks at once (\`--block 24h\`, no merge step):" \
         "$(get synth_day du1) bytes, $(div "$(get synth_day du1)" "$(get synth samples)")" \
         "per sample, symbols $(div "$(get synth_day block_symbols)" "$(get synth stacks)" 1) per" \
         "distinct stack, $(get synth_day blocks) block(s) (the set's last step is at midnight," \
         "which opens the next day's window)."
    echo
    echo "Where the block bytes go (synthetic):"
    echo
    sed '$d' "$work/synth.blocks"
    echo
    echo "Compaction (synthetic):"
    echo
    echo '```'
    cat "$work/synth.compact"
    echo '```'
    for n in real synth; do
        echo
        echo "zstd -19 floor, $n:"
        echo
        echo "| file | bytes | zstd -19 |"
        echo "|---|---:|---:|"
        cat "$work/$n.floor"
    done
} > "$out"
cat "$out"
rm -rf "$work"/*.db "$real"
