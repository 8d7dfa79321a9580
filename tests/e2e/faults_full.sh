#!/bin/sh
# tests/e2e/faults_full.sh: a full file system is named as one. LMDB
# reports a write cut short by a full disk as EIO (mdb_page_flush's "short
# write, filesystem full?"), which Ember printed as "Input/output error";
# it must say "no space left on device". Three tmpfs mounts: 64 KiB (too
# small for LMDB's lock file), 1 MiB (full in the middle of an import) and
# one already full (LMDB's first store to its sparse lock file was a
# SIGBUS there). After the failure the database still verifies. Needs root
# to mount: exit 77.
set -eu
EMBER=${EMBER:-build/ember}
tmp=$(mktemp -d)
mounted=
cleanup() {
  for m in $mounted; do umount "$m" 2> /dev/null || :; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# many distinct stacks: more than 1 MiB of database
awk 'BEGIN { for (i = 0; i < 20000; i++)
               printf "main;f%d;g%d;h%d %d\n", i, i * 7, i * 13, i + 1 }' \
  > "$tmp/big.txt"

for size in 64k 1m full; do
  m=$tmp/fs$size
  mkdir "$m"
  case $size in full) opt=1m ;; *) opt=$size ;; esac
  mount -t tmpfs -o size=$opt tmpfs "$m" 2> /dev/null ||
    skip "cannot mount a tmpfs (not root, or no mount in this container)"
  mounted="$mounted $m"
  [ $size != full ] || dd if=/dev/zero of="$m/fill" bs=4k 2> /dev/null || :
  set +e
  $EMBER import -d "$m/db" -l service=x "$tmp/big.txt" 2> "$tmp/err$size"
  rc=$?
  set -e
  [ $rc = 1 ] ||
    fail "$size: import into a full file system: exit $rc: $(cat "$tmp/err$size")"
  grep -q "no space left on device" "$tmp/err$size" ||
    fail "$size: the message does not name the full disk: $(cat "$tmp/err$size")"
  ! grep -q "Input/output error" "$tmp/err$size" ||
    fail "$size: a full disk reported as an I/O error: $(cat "$tmp/err$size")"
  if [ -s "$m/db/data.mdb" ]; then
    $EMBER verify -d "$m/db" > "$tmp/verify$size" 2>&1 ||
      fail "$size: verify after the failed import: $(cat "$tmp/verify$size")"
  fi
done
echo "ok: faults_full"
