#!/bin/sh
# check-example.sh BUILD: installs into a scratch prefix, builds the programs
# of docs/examples with pkg-config against that installed copy (as a user
# would), and runs them. import_top imports a pprof file through
# ember_import and prints its top rows through ember_query and
# ember_result_render: its output must be byte for byte what the CLI prints
# for the same query on the database it filled, and on one `ember import`
# filled from the same file.
set -e
build=$1
prefix=$(cd "$build" && pwd)/install
rm -rf "$prefix"
make --no-print-directory install BUILD="$build" PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
for ex in embed import_top; do
    cc -std=c11 -Wall -Werror docs/examples/$ex.c \
       $(pkg-config --cflags --libs ember) -o "$build/$ex-example"
done
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
LD_LIBRARY_PATH="$prefix/lib" "$build/embed-example" "$db/example.db"

fail() { echo "check-example: FAIL: $*" >&2; exit 1; }
ember="$prefix/bin/ember"
pprof=tests/data/pprof/cpu.pb.gz
type=process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta
q="top(merge($type), 7)"
LD_LIBRARY_PATH="$prefix/lib" "$build/import_top-example" "$db/top.db" \
    "$pprof" 7 > "$db/example.txt" 2> "$db/example.err" ||
    fail "import_top: $(cat "$db/example.err")"
grep -q "^Showing top 7 nodes" "$db/example.txt" ||
    fail "import_top printed no top 7: $(cat "$db/example.txt")"
LD_LIBRARY_PATH="$prefix/lib" "$ember" query -d "$db/top.db" -o top "$q" \
    > "$db/cli.txt"
cmp -s "$db/example.txt" "$db/cli.txt" ||
    { diff "$db/cli.txt" "$db/example.txt" >&2; fail "import_top differs from ember query"; }
LD_LIBRARY_PATH="$prefix/lib" "$ember" import -d "$db/cli.db" "$pprof" 2>/dev/null
LD_LIBRARY_PATH="$prefix/lib" "$ember" query -d "$db/cli.db" -o top "$q" \
    > "$db/cli2.txt"
cmp -s "$db/example.txt" "$db/cli2.txt" ||
    { diff "$db/cli2.txt" "$db/example.txt" >&2; fail "import_top differs from ember import + query"; }
echo "check-example: ok"
