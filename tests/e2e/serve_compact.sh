#!/bin/sh
# tests/e2e/serve_compact.sh: compaction in the background of `ember serve`
# (issue 15), a server with --compact-every 500ms --compact-head 0 (every
# run moves the whole head into blocks):
#   1. while a client imports the real pprof files of tests/data/pprof
#      (and collapsed files hours apart, for several block windows) round
#      after round, every query answer, before and after each round's
#      compaction, equals the same query on a copy that `ember import`
#      filled with the same files and nothing compacted (collapsed output,
#      lines sorted); a querier running all the while on the first
#      round's data always gets the first round's answers;
#   2. /api/v1/status shows the runs, no failure, the blocks and an empty
#      head; /metrics counts the runs; the log has a line per run, and
#      runs merged the blocks of past days; `ember verify` passes once the
#      server stopped;
#   3. SIGTERM while a compaction runs: the server says it waits, the run
#      ends, the exit status is 0, verify passes and the answers are the
#      ones of before; SIGKILL while one runs: verify passes and the
#      answers are the ones of before (each step of the run committed
#      whole or not at all);
#   4. a run while another process holds the compaction lock is skipped,
#      said and counted as busy; the options refuse what they cannot do
#      (--compact-merge, --compact-retention and --compact-downsample
#      too); --compact-every 0 runs none; `ember stats --server` shows the
#      blocks `ember stats -d` does.
set -eu
EMBER=${EMBER:-build/ember}
pprof=tests/data/pprof
collapsed=tests/data/collapsed
ROUNDS=${ROUNDS:-4}
. tests/e2e/lib/serve.sh
serve_init
db=$tmp/db                      # serve_start sets it too
copy=$tmp/copy
sock=$tmp/s.sock
base=1795000000000              # collapsed input: round R at base + R * 3h

status() { curl -s --unix-socket "$sock" http://ember/api/v1/status; }
# num FIELD: a number of the status's "compaction" object, "last" aside
num() {
  status | sed -n 's/.*"compaction":{\(.*\),"last":.*/\1/p' |
    sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
top() { status | sed -n "s/.*\"data\":{.*\"$1\":\([0-9]*\),.*\"compaction\".*/\1/p"; }

# import R DIR...: round R's files into the server and into the copy
import() {
  r=$1
  $EMBER import --server "unix:$sock" -l round="$r" $pprof/*.pb.gz 2> /dev/null ||
    fail "import round $r into the server"
  $EMBER import --server "unix:$sock" -l round="$r" --time $((base + r * 10800000)) \
    $collapsed/*.txt 2> /dev/null || fail "import round $r (collapsed) into the server"
  $EMBER import -d "$copy" -l round="$r" $pprof/*.pb.gz 2> /dev/null ||
    fail "import round $r into the copy"
  $EMBER import -d "$copy" -l round="$r" --time $((base + r * 10800000)) \
    $collapsed/*.txt 2> /dev/null || fail "import round $r (collapsed) into the copy"
}

# answer SOURCE QUERY OUT: the query's collapsed lines, sorted
answer() {
  $EMBER query $1 -o collapsed "$2" 2> /dev/null | LC_ALL=C sort > "$3"
}
# same QUERY: the server answers as the uncompacted copy does
same() {
  answer "--server unix:$sock" "$1" "$tmp/got" || fail "query $1 on the server"
  answer "-d $copy" "$1" "$tmp/want" || fail "query $1 on the copy"
  [ -s "$tmp/want" ] || fail "the copy's answer to $1 is empty"
  cmp -s "$tmp/got" "$tmp/want" ||
    { diff "$tmp/got" "$tmp/want" | head -5; fail "$1: the server's answer differs from the copy's"; }
}
# every R: each type, over everything and over round R and round 1
every() {
  for t in $types; do
    same "$t"
    same "$t{round=\"$1\"}"
    same "$t{round=\"1\"}"
  done
}
# runs_past N: waits until more than N runs ended
runs_past() {
  for _ in $(seq 200); do
    [ "$(num runs)" -gt "$1" ] && return 0
    sleep 0.05
  done
  fail "no compaction ran in 10 s (runs $(num runs), wanted more than $1)"
}

# ---- 1. imports, queries and compactions together ------------------------------
mkdir -p "$db"
serve_start "$db" --listen "unix:$sock" --access-log off \
  --compact-every 500ms --compact-head 0
grep -q 'compacting every 500ms' "$tmp/log" || fail "no line announcing the compaction"
import 1
# a delta, a gauge, a cumulative type and collapsed input
types="process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta
memory:inuse_space:bytes:space:bytes
mutex:delay:nanoseconds:contentions:count
collapsed:samples:count:samples:count:delta"
for t in $types; do
  $EMBER query -d "$copy" -o csv 'profile_types()' | grep -qx "$t" || fail "no type $t"
done

# the querier: round 1's answers, again and again, until told to stop
for t in $types; do
  answer "-d $copy" "$t{round=\"1\"}" "$tmp/r1.$(echo "$t" | tr ':' _)"
done
(
  n=0
  while [ ! -e "$tmp/stop" ]; do
    for t in $types; do
      answer "--server unix:$sock" "$t{round=\"1\"}" "$tmp/q.got"
      cmp -s "$tmp/q.got" "$tmp/r1.$(echo "$t" | tr ':' _)" || echo "$t" >> "$tmp/q.bad"
      n=$((n + 1))
    done
    sleep 0.1                   # the machine is shared
  done
  echo "$n" > "$tmp/q.n"
) &
qpid=$!

r=1
while :; do
  every "$r"                    # the head, maybe mid-compaction
  n=$(num runs)
  runs_past $((n + 1))          # a whole run after the import
  every "$r"                    # the blocks
  r=$((r + 1))
  [ "$r" -le "$ROUNDS" ] || break
  import "$r"
done
touch "$tmp/stop"
wait "$qpid"
[ ! -s "$tmp/q.bad" ] || fail "the querier's answer changed: $(sort -u "$tmp/q.bad" | head -3 | tr '\n' ' ')"
[ "$(cat "$tmp/q.n")" -gt 0 ] || fail "the querier asked nothing"

# ---- 2. what the server says ---------------------------------------------------
runs=$(num runs)
[ "$runs" -ge "$ROUNDS" ] || fail "$runs runs for $ROUNDS rounds"
[ "$(num failed)" = 0 ] || fail "failed runs: $(status)"
[ "$(num busy)" = 0 ] || fail "busy runs: $(status)"
[ "$(num blocks_written)" -gt 0 ] || fail "no block written: $(status)"
[ "$(top blocks)" -gt 0 ] || fail "no blocks in the status: $(status)"
[ "$(top head_chunks)" = 0 ] && [ "$(top chunks)" = 0 ] ||
  fail "the head still holds chunks: $(status)"
status | grep -q '"last":{"time":"[0-9T:.-]*Z","result":"ok","error":null,' ||
  fail "the last run: $(status)"
curl -s --unix-socket "$sock" http://ember/metrics > "$tmp/metrics"
grep -q "^ember_compactions_total [1-9]" "$tmp/metrics" || fail "metrics: runs"
grep -q '^ember_compactions_failed_total 0$' "$tmp/metrics" || fail "metrics: failed"
grep -q '^ember_compaction_freed_bytes_total [1-9]' "$tmp/metrics" || fail "metrics: freed bytes"
grep -q '^ember_db_blocks [1-9]' "$tmp/metrics" || fail "metrics: blocks"
lines=$(grep -c 'ember serve: compacted: .* MiB -> .* MiB on disk; [0-9]* blocks cut from the head, [0-9]* profiles moved out of it, [0-9]* blocks removed; [0-9]* ms$' "$tmp/log") || true
[ "$lines" -ge "$runs" ] || fail "$lines log lines for $runs runs"
# the collapsed rounds lie in past days: their blocks were merged
grep -q 'profiles moved out of it, [1-9][0-9]* blocks removed' "$tmp/log" ||
  fail "no run merged blocks"
serve_stop
$EMBER verify -d "$db" > "$tmp/verify" 2>&1 || fail "verify: $(tail -3 "$tmp/verify")"
for t in $types; do
  answer "-d $db" "$t" "$tmp/a" && answer "-d $copy" "$t" "$tmp/b"
  cmp -s "$tmp/a" "$tmp/b" || fail "$t differs from the copy after the stop"
done

# ---- 3. a signal while a compaction runs ------------------------------------------
# big DB: enough data for a run of about a second
big() {
  rm -rf "$1"
  for r in $(seq 30); do
    $EMBER import -d "$1" -l round="$r" --numeric-labels series $pprof/*.pb.gz 2> /dev/null
    $EMBER import -d "$1" -l round="$r" --time $((base + r * 3600000)) $collapsed/*.txt 2> /dev/null
  done
  for t in $types; do answer "-d $1" "$t" "$1.$(echo "$t" | tr ':' _)"; done
}
# unchanged DB: verify passes and every type answers as before the server
unchanged() {
  $EMBER verify -d "$1" > "$tmp/verify" 2>&1 || fail "$2: verify: $(tail -3 "$tmp/verify")"
  for t in $types; do
    answer "-d $1" "$t" "$tmp/a"
    cmp -s "$tmp/a" "$1.$(echo "$t" | tr ':' _)" || fail "$2: $t changed"
  done
}
# during SIG DB: starts a server, sends SIG once a compaction runs
during() {
  serve_start "$2" --listen "unix:$sock" --access-log off \
    --compact-every 1s --compact-head 0
  for _ in $(seq 600); do
    status | grep -q '"running":true' && break
    sleep 0.01
  done
  status | grep -q '"running":true' || fail "$1: no compaction seen running"
  kill "-$1" "$pid"
}

big "$tmp/big1"
during TERM "$tmp/big1"
st=0
wait "$pid" || st=$?
pid=
[ "$st" = 0 ] || fail "SIGTERM during a compaction: exit status $st"
grep -q 'waiting for the compaction in progress to end' "$tmp/log" ||
  fail "SIGTERM: no word of the compaction in progress"
sed -n '/SIGTERM: stopping/,$p' "$tmp/log" | grep -q 'ember serve: compacted: ' ||
  fail "SIGTERM: the compaction in progress did not end well: $(tail -3 "$tmp/log")"
unchanged "$tmp/big1" "SIGTERM"
$EMBER stats -d "$tmp/big1" | grep -q '^blocks  *[1-9]' || fail "SIGTERM: no blocks"

big "$tmp/big2"
during KILL "$tmp/big2"
wait "$pid" 2> /dev/null || true
pid=
rm -f "$sock"
unchanged "$tmp/big2" "SIGKILL"

# ---- 4. the options --------------------------------------------------------------
for bad in "--compact-every 10ms" "--compact-every soon" "--compact-head -1h" \
           "--compact-block 0" "--compact-merge x" "--compact-retention 7x" \
           "--compact-retention {a=}=1d" "--compact-downsample 1m:x" \
           "--compact-zstd-level 0" "--compact-zstd-level 23"; do
  st=0
  # shellcheck disable=SC2086
  timeout 10 $EMBER serve -d "$tmp/db" $bad 2> "$tmp/err" || st=$?
  [ "$st" = 2 ] || fail "serve $bad: exit $st, not 2"
  grep -q "^ember serve: --compact-" "$tmp/err" || fail "serve $bad: $(cat "$tmp/err")"
done
# another compaction holds the directory: each run is skipped, said,
# counted as busy, and the next goes on
if command -v flock > /dev/null; then
  mkdir -p "$tmp/db/blocks"
  flock "$tmp/db/blocks/LOCK" sleep 3 & lpid=$!
  sleep 0.2
  serve_start "$tmp/db" --listen "unix:$sock" --access-log off --compact-every 200ms
  for _ in $(seq 100); do
    [ "$(num busy)" -ge 2 ] && break
    sleep 0.05
  done
  [ "$(num busy)" -ge 2 ] && [ "$(num failed)" = 0 ] || fail "busy: $(status)"
  status | grep -q '"result":"busy","error":"[^"]*another compaction is running"' ||
    fail "busy: the last run: $(status)"
  grep -q '^ember serve: compact: skipped: .*another compaction is running; the next try in 200ms$' \
    "$tmp/log" || fail "busy: no line in the log"
  serve_stop
  wait "$lpid"
fi
# --compact-every 0: no scheduler, and the status says so (the other
# options are taken all the same)
serve_start "$tmp/db" --listen "unix:$sock" --access-log off --compact-every 0 \
  --compact-retention 'memory:*{round="1"}=7d,30d' --compact-downsample raw:2d,1m:14d,1h
status | grep -q '"compaction":{"every_s":0,"running":false,"runs":0,.*"next":null,"last":null}' ||
  fail "--compact-every 0: $(status)"
grep -q compacting "$tmp/log" && fail "--compact-every 0 announced a compaction"
# nothing compacts now: the server's stats are the directory's, blocks too
$EMBER stats -d "$tmp/db" > "$tmp/st_d"
$EMBER stats --server "unix:$sock" > "$tmp/st_s"
grep -q '^blocks  *[1-9]' "$tmp/st_s" || fail "stats over the server: no blocks"
cmp -s "$tmp/st_d" "$tmp/st_s" || fail "stats differ: $(diff "$tmp/st_d" "$tmp/st_s")"
serve_stop
echo "serve_compact: ok ($runs runs over $ROUNDS rounds, $(cat "$tmp/q.n") queries of round 1 meanwhile)"
