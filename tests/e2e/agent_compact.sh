#!/bin/sh
# tests/e2e/agent_compact.sh: `ember agent -d DIR` compacts DIR in the
# background (issue 15). An agent with --window 200ms --compact-every 1s
# --compact-head 0 -v runs for a few seconds while a fixture burns CPU:
#   1. it announces the schedule, and each run is a line on stderr: a
#      success with its bytes, blocks and ms, or a failure with the
#      engine's message and the next try, and runs go on after a failure;
#   2. SIGINT stops it promptly, exit status 0, its last window written,
#      and `ember verify` passes;
#   3. the runs wrote blocks (`ember stats`); the fixture's samples are
#      there, and answer the same once `ember compact --head 0` moved the
#      rest of the head into blocks.
#   4. --compact-* are refused without -d and by `ember record`.
# Exit 77 (skip) with the reason when the sampler cannot run here (not
# root, no BTF or perf events).
set -u
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
FX=$BUILD/fixtures
tmp=$(mktemp -d)
apid=
fpid=
cleanup() {
  [ -z "$apid" ] || kill -9 "$apid" 2> /dev/null
  [ -z "$fpid" ] || kill "$fpid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; [ ! -s "$tmp/err" ] || tail -5 "$tmp/err" >&2; exit 1; }

# ---- 4. refusals, which need no sampler --------------------------------------------
st=0
$EMBER agent --push http://127.0.0.1:1 --compact-every 1s 2> "$tmp/e" || st=$?
[ "$st" = 2 ] && grep -q 'agent compacts its -d DIR' "$tmp/e" ||
  fail "--compact-every without -d: exit $st: $(cat "$tmp/e")"
st=0
$EMBER record -d "$tmp/r.db" --compact-head 0 2> "$tmp/e" || st=$?
[ "$st" = 2 ] && [ ! -e "$tmp/r.db" ] || fail "record --compact-head: exit $st: $(cat "$tmp/e")"
st=0
$EMBER agent -d "$tmp/r.db" --compact-every 5ms 2> "$tmp/e" || st=$?
[ "$st" = 2 ] && [ ! -e "$tmp/r.db" ] || fail "agent --compact-every 5ms: exit $st: $(cat "$tmp/e")"

# ---- preconditions ---------------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "not root: the sampler needs CAP_BPF and CAP_PERFMON"
[ -r /sys/kernel/btf/vmlinux ] || skip "no BTF (/sys/kernel/btf/vmlinux)"
command -v clang > /dev/null || skip "clang is not installed"
if ! $EMBER record -d "$tmp/probe.db" --duration 200ms > /dev/null 2> "$tmp/e"; then
  grep -qi 'perf\|root\|BTF\|BPF' "$tmp/e" && skip "$(cat "$tmp/e")"
  fail "root and BTF are here, yet: $(cat "$tmp/e")"
fi
mkdir -p "$FX"
clang -O2 -g -fno-omit-frame-pointer tests/fixtures/hotcold.c -o "$FX/hotcold.ac" ||
  fail "clang could not build tests/fixtures/hotcold.c"

# ---- 1, 2. the agent, compacting as it samples -------------------------------------
db=$tmp/db
"$FX/hotcold.ac" 6 > /dev/null 2>&1 & fpid=$!
$EMBER agent -d "$db" --window 200ms --compact-every 1s --compact-head 0 -v \
  2> "$tmp/err" & apid=$!
sleep 4.5
t0=$(date +%s%N)
kill -INT "$apid"
st=0
wait "$apid" || st=$?
apid=
ms=$((($(date +%s%N) - t0) / 1000000))
kill "$fpid" 2> /dev/null; wait "$fpid" 2> /dev/null; fpid=
[ "$st" = 0 ] || fail "the agent's exit status $st"
[ "$ms" -lt 5000 ] || fail "the agent took $ms ms to stop"
grep -q '^ember agent: compacting every 1s, the first in [0-9.]*m\?s$' "$tmp/err" ||
  fail "no line announcing the schedule"
ok='^ember agent: compacted: [0-9.]* MiB -> [0-9.]* MiB on disk; [0-9]* blocks cut from the head, [0-9]* profiles moved out of it, [0-9]* blocks removed; [0-9]* ms$'
bad='^ember agent: compact: failed after [0-9]* ms: .*; the next try in 1s$'
nok=$(grep -c "$ok" "$tmp/err") || true
nbad=$(grep -c "$bad" "$tmp/err") || true
[ $((nok + nbad)) -ge 2 ] || fail "$nok runs said done and $nbad failed in 4.5 s at 1s"
# (a SIGINT that lands during a run says it waits for the run to end)
grep '^ember agent: comp' "$tmp/err" | grep -v "$ok" | grep -v "$bad" |
  grep -v 'compacting every' |
  grep -v '^ember agent: compact: waiting for the compaction in progress to end$' \
  > "$tmp/other" || true
[ ! -s "$tmp/other" ] || fail "lines of another shape: $(head -2 "$tmp/other")"
grep -q '^ember agent: [0-9]* windows in ' "$tmp/err" || fail "no summary"
$EMBER verify -d "$db" > "$tmp/verify" 2>&1 || fail "verify: $(tail -3 "$tmp/verify")"
n=$($EMBER query -d "$db" -o collapsed \
  'ebpf_cpu:samples:count:cpu:nanoseconds:delta{comm="hotcold.ac"}' 2> /dev/null |
  awk '{ s += $NF } END { print s + 0 }')
[ "$n" -gt 0 ] || fail "no samples of the fixture"

# ---- 3. blocks --------------------------------------------------------------------
nblk=$(grep "$ok" "$tmp/err" | grep -c '; [1-9][0-9]* blocks cut') || true
[ "$nblk" -gt 0 ] || fail "no run wrote a block: $(grep -m1 "$bad" "$tmp/err")"
$EMBER stats -d "$db" | grep -q '^blocks  *[1-9]' || fail "no blocks: $($EMBER stats -d "$db" | head -14)"
q='ebpf_cpu:samples:count:cpu:nanoseconds:delta{comm="hotcold.ac"}'
$EMBER query -d "$db" -o collapsed "$q" 2> /dev/null | LC_ALL=C sort > "$tmp/before"
$EMBER compact -d "$db" --head 0 > "$tmp/compact" 2>&1 || fail "compact: $(tail -1 "$tmp/compact")"
$EMBER query -d "$db" -o collapsed "$q" 2> /dev/null | LC_ALL=C sort > "$tmp/after"
cmp -s "$tmp/before" "$tmp/after" || fail "the fixture's answer changed once all was in blocks"
echo "agent_compact: ok ($nok runs, $nbad failed, $n samples of the fixture, stopped in $ms ms)"
