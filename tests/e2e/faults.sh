#!/bin/sh
# tests/e2e/faults.sh: directories Ember must not take for its own, and
# files it must name rightly (issue 12):
# - another program's LMDB environment, made by lmdb-utils' mdb_load (keys
#   in the main database; named sub-databases; sub-databases named like
#   Ember's tables): `ember import` and `ember query` refuse it with "not an
#   Ember database", exit 1, and leave data.mdb as it was, byte for byte
#   (lock.mdb is LMDB's lock, rewritten by every program that opens the
#   environment, mdb_stat included, so only its presence is compared);
# - an empty data.mdb: "empty file", not "Bad file descriptor";
# - a data.mdb cut short: "truncated", not a fault.
# The full disk and the reader without write access have their own scripts
# (faults_full.sh, faults_rdonly.sh): each needs what a machine may lack.
set -eu
EMBER=${EMBER:-build/ember}
data=tests/data/collapsed
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
command -v mdb_load > /dev/null || skip "mdb_load (lmdb-utils) is missing"

# foreign NAME: an LMDB environment in $tmp/NAME from the mdb_load text on
# stdin (one "database=" header per named sub-database)
foreign() {
  mkdir "$tmp/$1"
  cat > "$tmp/$1.txt"
  mdb_load -f "$tmp/$1.txt" "$tmp/$1" 2> /dev/null ||
    mdb_load -f "$tmp/$1.txt" "$tmp/$1"
}

# kv DB KEY VALUE...: an mdb_load print-format section
kv() {
  printf 'VERSION=3\nformat=print\ntype=btree\nmapsize=1048576\n'
  [ -z "$1" ] || printf 'database=%s\n' "$1"
  printf 'HEADER=END\n'
  shift
  while [ $# -ge 2 ]; do printf ' %s\n %s\n' "$1" "$2"; shift 2; done
  printf 'DATA=END\n'
}

# dump DIR: the main database and every sub-database as mdb_dump prints
# them, but for the reader count, which is the lock file's
dump() {
  { mdb_dump "$1"; mdb_dump -a "$1"; } | grep -v '^maxreaders=' || :
}

# refused NAME NEEDLE: import and query exit 1 naming NEEDLE; data.mdb and
# the list of files stay as they were
refused() {
  d=$tmp/$1
  sum=$(sha256sum < "$d/data.mdb")
  files=$(ls "$d")
  dump=$(dump "$d")
  if $EMBER import -d "$d" -l service=x $data/1732170000000.txt \
      2> "$tmp/$1.err"; then
    fail "$1: import into another program's environment exited 0"
  fi
  grep -q "not an Ember database" "$tmp/$1.err" ||
    fail "$1: import: $(cat "$tmp/$1.err")"
  grep -qF "$2" "$tmp/$1.err" || fail "$1: import does not name $2: $(cat "$tmp/$1.err")"
  if $EMBER query -d "$d" '{service="x"}' > /dev/null 2> "$tmp/$1.qerr"; then
    fail "$1: query of another program's environment exited 0"
  fi
  grep -q "not an Ember database" "$tmp/$1.qerr" ||
    fail "$1: query: $(cat "$tmp/$1.qerr")"
  [ "$(sha256sum < "$d/data.mdb")" = "$sum" ] || fail "$1: data.mdb changed"
  [ "$(ls "$d")" = "$files" ] || fail "$1: files changed: $(ls "$d")"
  [ "$(dump "$d")" = "$dump" ] || fail "$1: the dump changed"
}

kv "" key1 value1 key2 value2 | foreign main
refused main '"key1"'

{ kv users ann 1 bob 2; kv orders 17 ann; } | foreign named
refused named '"orders"'

{ kv chunk c1 'not a chunk'; kv meta version 7; } | foreign collide
refused collide '"chunk" with content'

{ kv str s t; kv zzz k v; } | foreign mixed
refused mixed '"str" with content'

# an empty environment is one Ember may take: it becomes a database
mkdir "$tmp/emptyenv"
kv "" | sed '/^ /d' > "$tmp/emptyenv.txt"
mdb_load -n -f "$tmp/emptyenv.txt" "$tmp/emptyenv/data.mdb" 2> /dev/null ||
  mdb_load -f "$tmp/emptyenv.txt" "$tmp/emptyenv"
[ -f "$tmp/emptyenv/data.mdb" ] || fail "mdb_load made no environment"
$EMBER import -d "$tmp/emptyenv" -l service=x $data/1732170000000.txt 2> /dev/null ||
  fail "import into an empty environment failed"
$EMBER verify -d "$tmp/emptyenv" > /dev/null || fail "verify after import"

# an empty data.mdb: nothing to read, said so
mkdir "$tmp/empty"
: > "$tmp/empty/data.mdb"
if $EMBER query -d "$tmp/empty" '{service="x"}' 2> "$tmp/empty.err"; then
  fail "query of an empty data.mdb exited 0"
fi
grep -q "empty file (0 bytes)" "$tmp/empty.err" || fail "empty: $(cat "$tmp/empty.err")"

# a data.mdb cut to half: named as such, no fault
$EMBER import -d "$tmp/db" -l service=x $data/17*.txt 2> /dev/null
size=$(wc -c < "$tmp/db/data.mdb")
truncate -s $((size / 2)) "$tmp/db/data.mdb"
set +e
$EMBER query -d "$tmp/db" '{service="x"}' > /dev/null 2> "$tmp/cut.err"
rc=$?
set -e
[ "$rc" = 1 ] || fail "query of a truncated data.mdb: exit $rc: $(cat "$tmp/cut.err")"
grep -q "truncated file" "$tmp/cut.err" || fail "cut: $(cat "$tmp/cut.err")"
echo "ok: faults"
