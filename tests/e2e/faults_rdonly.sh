#!/bin/sh
# tests/e2e/faults_rdonly.sh: a user who may read a database's files but
# not write them (lock.mdb included) can still query it: Ember opens it
# read-only without LMDB's lock (it said "cannot lock: Permission denied").
# Writing as that user fails with a message naming the file it may not
# write. Then the same on a read-only file system. Runs as root and drops
# to nobody (setpriv): exit 77 when that cannot be done.
set -eu
EMBER=${EMBER:-build/ember}
data=tests/data/collapsed
tmp=$(mktemp -d)
mounted=
cleanup() {
  [ -z "$mounted" ] || umount "$mounted" 2> /dev/null || :
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

case $EMBER in /*) ;; *) EMBER=$PWD/$EMBER ;; esac
[ "$(id -u)" = 0 ] || skip "not root: cannot act as another user"
command -v setpriv > /dev/null || skip "setpriv is missing"
uid=$(id -u nobody 2> /dev/null) || skip "no user nobody"
gid=$(id -g nobody)
as_nobody() { setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"; }
as_nobody "$EMBER" --version > /dev/null 2>&1 ||
  skip "nobody cannot run $EMBER (a directory on its path is closed)"

chmod 755 "$tmp"
db=$tmp/db
$EMBER import -d "$db" -l service=demo $data/17*.txt 2> /dev/null
$EMBER query -d "$db" -o collapsed '{service="demo"}' | LC_ALL=C sort > "$tmp/want"
[ -s "$tmp/want" ] || fail "nothing imported"
chmod 755 "$db"
chmod 644 "$db"/data.mdb "$db"/lock.mdb

# reading: query, stats and verify work and answer as root does
as_nobody "$EMBER" query -d "$db" -o collapsed '{service="demo"}' \
  > "$tmp/out" 2> "$tmp/err" || fail "query as nobody: $(cat "$tmp/err")"
LC_ALL=C sort "$tmp/out" > "$tmp/got"
cmp -s "$tmp/want" "$tmp/got" || fail "query as nobody answers differently"
as_nobody "$EMBER" stats -d "$db" > "$tmp/stats" 2> "$tmp/err" ||
  fail "stats as nobody: $(cat "$tmp/err")"
# ... and says that it reads without the lock, which root's does not
grep -q '^lock  *none: read-only' "$tmp/stats" ||
  fail "stats as nobody does not say it reads without the lock"
"$EMBER" stats -d "$db" | grep -q '^lock ' &&
  fail "stats as root says it reads without the lock"
as_nobody "$EMBER" verify -d "$db" > /dev/null 2> "$tmp/err" ||
  fail "verify as nobody: $(cat "$tmp/err")"

# writing: refused, naming the file nobody may not write, exit 1
refused_write() {
  set +e
  as_nobody "$EMBER" import -d "$db" -l service=x $data/1732170000000.txt \
    2> "$tmp/err"
  rc=$?
  set -e
  [ $rc = 1 ] || fail "import as nobody ($2): exit $rc"
  grep -q "$1" "$tmp/err" || fail "import as nobody ($2): $(cat "$tmp/err")"
}
refused_write "data.mdb: this user may not write it" "nothing writable"
chmod 666 "$db/data.mdb"
refused_write "lock.mdb: this user may not write LMDB's lock file" \
  "data.mdb writable"
chmod 644 "$db/data.mdb"

# a read-only file system: root reads it too (LMDB opens without a lock)
m=$tmp/ro
mkdir "$m"
if mount -t tmpfs -o size=4m tmpfs "$m" 2> /dev/null; then
  mounted=$m
  cp -r "$db" "$m/db"
  mount -o remount,ro "$m"
  $EMBER query -d "$m/db" -o collapsed '{service="demo"}' > "$tmp/out" \
    2> "$tmp/err" || fail "query on a read-only file system: $(cat "$tmp/err")"
  LC_ALL=C sort "$tmp/out" > "$tmp/got"
  cmp -s "$tmp/want" "$tmp/got" || fail "query on a read-only file system answers differently"
fi
echo "ok: faults_rdonly"
