#!/bin/sh
# tests/e2e/compact.sh: `ember compact` on real profiles (issue 15).
#  - the answers (top, collapsed, tree, totals, labels) are the same before
#    and after compaction with retention and downsampling, and after more
#    data lands in windows already in blocks; verify accepts each state;
#  - the head gives its space back: data.mdb's blocks on disk shrink;
#  - a flip of any bit of a block file is found: every flip of a
#    deterministic sample makes `ember query` fail with a message naming
#    the block, or answer exactly as before, and makes `ember verify` fail;
#    none crashes (issue 15, point 4: blocks carry a checksum on every
#    byte).
set -eu
EMBER=${EMBER:-build/ember}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
R="--from 2024-01-01T00:00:00Z --to 2100-01-01T00:00:00Z"
CPU=process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta

answers() {
    for t in $("$EMBER" query -d "$1" 'profile_types()' -o csv | tail -n +2); do
        echo "== $t"
        "$EMBER" query -d "$1" $R "merge($t)" -o top --limit 40
        "$EMBER" query -d "$1" $R "merge($t)" -o collapsed | sort
        "$EMBER" query -d "$1" $R "merge by (worker) ($t)" -o tree | head -200
    done
    "$EMBER" query -d "$1" $R "total($CPU)" --step 1m -o csv
    "$EMBER" query -d "$1" 'label_names()' -o csv
    "$EMBER" query -d "$1" 'label_values(worker)' -o csv
}

"$EMBER" import -d "$T/a" tests/data/pprof/*.pb.gz > /dev/null 2>&1
"$EMBER" import -d "$T/a" tests/data/perf/full.txt > /dev/null 2>&1
"$EMBER" import -d "$T/a" tests/data/collapsed/*.txt > /dev/null 2>&1
cp -r "$T/a" "$T/b"
answers "$T/a" > "$T/before.txt"
[ -s "$T/before.txt" ] || fail "no answers"
du1=$(du -k "$T/b/data.mdb" | cut -f1)
st=0
"$EMBER" compact -d "$T/b" --zstd-level 23 > "$T/compact.txt" 2>&1 || st=$?
[ "$st" = 2 ] || fail "--zstd-level 23: exit $st, not 2"
"$EMBER" compact -d "$T/b" --head 0 --retention 'goroutine:*=0,100y' \
    --downsample raw:0,1m,1h --zstd-level 9 > "$T/compact.txt" ||
    fail "compact: $(cat "$T/compact.txt")"
grep -q '^compacted:' "$T/compact.txt" || fail "no summary: $(cat "$T/compact.txt")"
ls "$T/b/blocks/"*.block > /dev/null 2>&1 || fail "no block written"
"$EMBER" verify -d "$T/b" > /dev/null || fail "verify after compact"
answers "$T/b" > "$T/after.txt"
diff "$T/before.txt" "$T/after.txt" > "$T/diff.txt" ||
    fail "answers changed by compaction: $(head -20 "$T/diff.txt")"
du2=$(du -k "$T/b/data.mdb" | cut -f1)
[ "$du2" -lt "$du1" ] || fail "data.mdb did not shrink: $du1 KiB -> $du2 KiB"
echo "ok: same answers after compaction; data.mdb $du1 KiB -> $du2 KiB"

# late data into windows already compacted, then compacted again
"$EMBER" import -d "$T/a" tests/data/collapsed/*.txt > /dev/null 2>&1
"$EMBER" import -d "$T/b" tests/data/collapsed/*.txt > /dev/null 2>&1
answers "$T/a" > "$T/before2.txt"
answers "$T/b" > "$T/mixed.txt"
diff "$T/before2.txt" "$T/mixed.txt" > /dev/null ||
    fail "answers over head and blocks differ"
"$EMBER" compact -d "$T/b" --head 0 > /dev/null || fail "second compact"
"$EMBER" verify -d "$T/b" > /dev/null || fail "verify after the second"
answers "$T/b" > "$T/after2.txt"
diff "$T/before2.txt" "$T/after2.txt" > /dev/null ||
    fail "answers changed by the second compaction"
echo "ok: late data, head and blocks together, compacted again"

# bit flips in the block files
q() { "$EMBER" query -d "$1" $R "merge($CPU)" -o collapsed 2>&1; }
q "$T/b" > "$T/q.txt" || fail "query before flips"
set -- "$T/b/blocks/"*.block
flips=0 found=0 same=0
for f in "$@"; do
    size=$(stat -c %s "$f")
    n=0
    while [ $n -lt 24 ]; do
        # a deterministic spread of bits over the whole file
        bit=$(( (n * 2654435761 + size) % (size * 8) ))
        rm -rf "$T/c"
        cp -r "$T/b" "$T/c"
        g="$T/c/blocks/$(basename "$f")"
        python3 -c "
import sys
p, bit = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read())
b[bit // 8] ^= 1 << (bit % 8)
open(p, 'wb').write(b)" "$g" "$bit"
        set +e
        out=$(q "$T/c"); qrc=$?
        vout=$("$EMBER" verify -d "$T/c" 2>&1); vrc=$?
        set -e
        [ $qrc -lt 128 ] || fail "query crashed (signal $((qrc - 128))) after flipping bit $bit of $(basename "$f")"
        [ $vrc -lt 128 ] || fail "verify crashed after flipping bit $bit of $(basename "$f")"
        [ $vrc -ne 0 ] || fail "verify said ok after flipping bit $bit of $(basename "$f")"
        if [ $qrc -ne 0 ]; then
            echo "$out" | grep -q "block" ||
                fail "query failed without naming the block: $out"
            found=$((found + 1))
        else
            [ "$out" = "$(cat "$T/q.txt")" ] ||
                fail "query answered differently, exit 0, after flipping bit $bit of $(basename "$f")"
            same=$((same + 1))
        fi
        flips=$((flips + 1))
        n=$((n + 1))
    done
done
echo "ok: $flips flips in $# block files: query failed naming the block $found times, answered as before $same times; verify found every one; no crash"
