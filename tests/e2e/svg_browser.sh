#!/bin/sh
# tests/e2e/svg_browser.sh: `ember query -o svg` opened in headless Chromium.
# Imports the Go profiles of tests/data/pprof, writes flame graphs of a
# profile and of a diff, checks that they are well-formed XML with nothing
# fetched from outside, then drives the browser through chromedriver
# (tests/e2e/lib/svg_click.py, W3C WebDriver over HTTP): a real click zooms
# a frame to the full width and hides its row-mates, hovering fills the
# status line, the search box highlights matches, Reset Zoom restores.
# Chromium and chromedriver are dependencies (`make deps` installs them):
# without them this test fails, it does not skip.
set -eu
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
data=tests/data/pprof
lib=tests/e2e/lib
fail() { echo "FAIL: $*" >&2; exit 1; }

for tool in python3 chromium chromedriver; do
  command -v "$tool" > /dev/null ||
    fail "$tool is missing: make deps installs python3, chromium and chromium-driver"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/db
cpu='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta'

$EMBER import -d "$db" $data/cpu.pb.gz $data/heap.pb.gz 2> "$tmp/imp" ||
  fail "import: $(cat "$tmp/imp")"

# well-formed, self-contained, what was asked
check_svg() {
  python3 -c 'import xml.dom.minidom, sys; xml.dom.minidom.parse(sys.argv[1])' "$1" ||
    fail "$1 is not well-formed XML"
  ! grep -q 'href=\|src=' "$1" || fail "$1 refers to outside resources"
  grep -q '<script>' "$1" || fail "$1 has no script"
}

$EMBER query -d "$db" -o svg "$cpu" > "$tmp/cpu.svg" 2> "$tmp/err" ||
  fail "query -o svg: $(cat "$tmp/err")"
check_svg "$tmp/cpu.svg"
grep -q "<title>$cpu</title>" "$tmp/cpu.svg" || fail "cpu.svg: the query is not the title"
grep -q '<title>main.work.func7$' "$tmp/cpu.svg" || fail "cpu.svg: no main.work.func7 frame"
python3 $lib/svg_click.py "$tmp/cpu.svg" --frame main.work.func7 \
  --search 'main\.fib' || fail "cpu flame graph in the browser"

# one group with labels (merge by) is still one svg document, nothing before it
$EMBER query -d "$db" -o svg "merge by (worker) ($cpu{worker=\"hash\"})" \
  > "$tmp/group.svg" 2> "$tmp/err" || fail "merge by svg: $(cat "$tmp/err")"
head -c 5 "$tmp/group.svg" | grep -q '^<?xml' ||
  fail "group.svg does not start with <?xml: $(head -1 "$tmp/group.svg")"
check_svg "$tmp/group.svg"

# a heap profile: another unit, the widest frame chosen automatically
$EMBER query -d "$db" -o svg 'memory:alloc_space:bytes:space:bytes' \
  > "$tmp/heap.svg" 2> "$tmp/err" || fail "heap svg: $(cat "$tmp/err")"
check_svg "$tmp/heap.svg"
grep -q 'B (100.00%)</title>' "$tmp/heap.svg" || fail "heap.svg: root not in bytes"
python3 $lib/svg_click.py "$tmp/heap.svg" --search runtime ||
  fail "heap flame graph in the browser"

# a diff: colored by change, clickable the same way
$EMBER query -d "$db" -o svg \
  "diff($cpu{worker=~\"hash|sort\"}, $cpu{worker=~\"hash|tree\"})" \
  > "$tmp/diff.svg" 2> "$tmp/err" || fail "diff svg: $(cat "$tmp/err")"
check_svg "$tmp/diff.svg"
grep -q 'class="r[1-5]"' "$tmp/diff.svg" || fail "diff.svg: nothing red (grew)"
grep -q 'class="b[1-5]"' "$tmp/diff.svg" || fail "diff.svg: nothing blue (shrank)"
grep -q 'base .*, target .*, change ' "$tmp/diff.svg" || fail "diff.svg: no change in tooltips"
python3 $lib/svg_click.py "$tmp/diff.svg" --search 'sort\.' ||
  fail "diff flame graph in the browser"
echo "ok: svg flame graphs of cpu, heap and a diff work in Chromium"
