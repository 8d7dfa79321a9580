#!/bin/sh
# tests/e2e/agent_push.sh: `ember agent --push` against a real `ember
# serve` (issue 14), the hotcold fixture burning CPU meanwhile:
#   1. the agent, without -d, pushes over TCP: the server holds hotcold's
#      functions under service_name="ember_agent";
#   2. an outage: the server stops, the agent's windows wait in the spool,
#      and the agent stopped then says they are queued;
#   3. a restart: a new agent on the same spool, the server back on the
#      same port: the spool empties, and the server holds exactly the
#      profiles the two agents say they sent;
#   4. a --push-buffer too small for an outage: the agent says it dropped
#      windows (a line, the summary, and the push_windows_dropped
#      self-metric of its own database, which -o pprof encodes), and the
#      spool stays in its bound;
#   5. a server with a token, over its Unix socket (unix:PATH): without
#      --push-token-file the pushes are refused (401) and said dropped;
#      with it they arrive.
# No timings are asserted: each wait is a bounded poll for a condition.
# Exit 77 (skip) when not root, without BTF or perf events, or clang.
set -u
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
FX=$BUILD/fixtures
tmp=$(mktemp -d)
pids=
cleanup() {
  for p in $pids; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.err "$tmp"/serve.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 8 "$f" >&2; }
  done
  exit 1
}
ok() { echo "ok: $*"; }

[ "$(id -u)" = 0 ] || skip "not root: the sampler needs CAP_BPF and CAP_PERFMON"
[ -r /sys/kernel/btf/vmlinux ] || skip "no BTF (/sys/kernel/btf/vmlinux)"
command -v clang > /dev/null || skip "clang is not installed"
mkdir -p "$FX"
clang -O2 -g -fno-omit-frame-pointer tests/fixtures/hotcold.c -o "$FX/hotcold" ||
  fail "clang could not build tests/fixtures/hotcold.c"
if ! $EMBER record -d "$tmp/probe.db" --duration 200ms > /dev/null \
     2> "$tmp/probe.err"; then
  grep -qi 'perf' "$tmp/probe.err" && skip "$(cat "$tmp/probe.err")"
  fail "root and BTF are here, yet: $(cat "$tmp/probe.err")"
fi
"$FX/hotcold" 600 & pids="$pids $!"

db=$tmp/srv.db
spool=$tmp/spool
srv=

# wait_for WHAT COMMAND...: polls COMMAND (up to 120 s) until it succeeds
wait_for() {
  what=$1; shift
  for _ in $(seq 1200); do
    "$@" && return 0
    sleep 0.1
  done
  fail "gave up waiting for $what"
}
# serve [ARGS]: the server on $db, on tcp:$port when set, else a free one
serve() {
  # emptied here: the child truncates it only once it runs, and the last
  # server's "listening" line read meanwhile gave a status of no server
  : > "$tmp/serve.log"
  $EMBER serve -d "$db" --listen "unix:$tmp/s.sock" \
    --listen "tcp:${port:-0}" "$@" 2> "$tmp/serve.log" & srv=$!
  pids="$pids $srv"
  for _ in $(seq 200); do
    p=$(sed -n 's/.*listening on tcp:127.0.0.1:\([0-9]*\).*/\1/p' \
          "$tmp/serve.log" 2> /dev/null)
    [ -n "$p" ] && { port=$p; return 0; }
    kill -0 "$srv" 2> /dev/null || fail "the server exited"
    sleep 0.05
  done
  fail "the server did not start"
}
unserve() {
  kill -TERM "$srv"; wait "$srv" 2> /dev/null; srv=
}
# profiles: what the server holds, from its status
profiles() {
  curl -s --unix-socket "$tmp/s.sock" http://ember/api/v1/status |
    sed -n 's/.*"profiles":\([0-9]*\).*/\1/p'
}
has_profiles() { [ "$(profiles)" -gt 0 ] 2> /dev/null; }
spooled() { ls "$1" 2> /dev/null | grep -c '\.win$'; }
# agent NAME ARGS...: an agent in the background, its stderr in NAME.err
agent() {
  name=$1; shift
  $EMBER agent --window 1s "$@" > /dev/null 2> "$tmp/$name.err" & apid=$!
  pids="$pids $apid"
}
# stop_agent: SIGINT, and the agent must exit 0
stop_agent() {
  kill -INT "$apid"
  wait "$apid" || fail "the agent exited $? after SIGINT"
}
# sent FILE: the profiles an agent's summary says it delivered
sent() { sed -n 's/.* sent (\([0-9]*\) profiles.*/\1/p' "$1"; }

# ---- 1. pushing ---------------------------------------------------------------
serve
agent a --push "http://127.0.0.1:$port" --push-spool "$spool"
wait_for "profiles at the server" has_profiles
hot_at_server() {
  curl -s --unix-socket "$tmp/s.sock" -G http://ember/api/v1/query \
    --data-urlencode \
    'query=process_cpu:samples:count:cpu:nanoseconds:delta{service_name="ember_agent"}' \
    -d format=collapsed | grep -q 'hot_leaf'
}
wait_for "hotcold's hot_leaf at the server" hot_at_server
[ ! -e "$tmp/a.db" ] || fail "an agent without -d made a database"
ok "1: the agent pushed hotcold's functions to the server"

# ---- 2. an outage ---------------------------------------------------------------
unserve
queued_3() { [ "$(spooled "$spool")" -ge 3 ]; }
wait_for "3 windows in the spool" queued_3
stop_agent
grep -q 'retrying with backoff' "$tmp/a.err" || fail "the outage was not said"
q=$(sed -n 's/.*, \([0-9]*\) queued (.*/\1/p' "$tmp/a.err")
[ -n "$q" ] && [ "$q" -ge 3 ] || fail "the agent's summary: $q queued"
[ "$(spooled "$spool")" = "$q" ] || fail "$q queued, $(spooled "$spool") in the spool"
ok "2: during the outage $q windows waited in the spool"

# ---- 3. the next agent and the server back --------------------------------------
agent b --push "http://127.0.0.1:$port" --push-spool "$spool"
more() { [ "$(spooled "$spool")" -gt "$q" ]; }
wait_for "a window of the new agent spooled" more
serve
empty() { [ "$(spooled "$spool")" = 0 ]; }
wait_for "the spool to empty" empty
stop_agent
grep -q 'answers again' "$tmp/b.err" || fail "the return was not said"
sa=$(sent "$tmp/a.err"); sb=$(sent "$tmp/b.err"); n=$(profiles)
[ -n "$sa" ] && [ -n "$sb" ] || fail "no sent counts in the summaries"
[ "$n" = $((sa + sb)) ] ||
  fail "the server holds $n profiles, the agents sent $sa + $sb"
grep -q ', 0 queued' "$tmp/b.err" || fail "windows left queued"
ok "3: after the outage the server holds the $n profiles the agents sent ($sa + $sb)"

# ---- 4. a buffer too small ------------------------------------------------------
agent c -d "$tmp/c.db" --push "unix:$tmp/nobody.sock" \
  --push-spool "$tmp/spool-c" --push-buffer 24k
dropped() { grep -qs 'the buffer is full: dropped' "$tmp/c.err"; }
wait_for "a drop for the full buffer" dropped
two_drops() { [ "$(grep -sc 'the buffer is full' "$tmp/c.err")" -ge 2 ]; }
wait_for "a second drop" two_drops
stop_agent
d=$(sed -n 's/.*, \([0-9]*\) dropped for a full buffer.*/\1/p' "$tmp/c.err")
[ -n "$d" ] && [ "$d" -ge 2 ] || fail "the summary says $d dropped"
bytes=$(cat "$tmp/spool-c"/*.win | wc -c)
[ "$bytes" -le 24576 ] || fail "the spool holds $bytes bytes, over 24k"
m=$($EMBER query -d "$tmp/c.db" -o csv \
  'total(ember_self:events:count:window:nanoseconds:delta{metric="push_windows_dropped"})' |
  awk -F, 'NR > 1 { s += $NF } END { print s + 0 }')
[ "$m" -ge 1 ] || fail "the self-metric push_windows_dropped sums to $m"
# the empty stack of a self-metric as pprof (the encoder once refused it)
$EMBER query -d "$tmp/c.db" -o pprof \
  'ember_self:events:count:window:nanoseconds:delta{metric="push_windows_dropped"}' \
  > "$tmp/self.pb" || fail "a self-metric as pprof"
ok "4: a 24k buffer dropped $d windows (self-metric: $m), the spool at $bytes bytes"

# ---- 5. a token, over the Unix socket --------------------------------------------
unserve
printf 'sekret\n' > "$tmp/token"
port=
serve --token-file "$tmp/token"
before=$(curl -s --unix-socket "$tmp/s.sock" -H 'Authorization: Bearer sekret' \
  http://ember/api/v1/status | sed -n 's/.*"profiles":\([0-9]*\).*/\1/p')
agent d --push "unix:$tmp/s.sock" --push-spool "$tmp/spool-d"
refused() { grep -qs 'refused a profile with 401' "$tmp/d.err"; }
wait_for "a 401 refusal" refused
stop_agent
grep -q ', 0 queued' "$tmp/d.err" || fail "refused windows stayed queued"
agent e --push "unix:$tmp/s.sock" --push-spool "$tmp/spool-e" \
  --push-token-file "$tmp/token"
with_token() {
  n=$(curl -s --unix-socket "$tmp/s.sock" -H 'Authorization: Bearer sekret' \
    http://ember/api/v1/status | sed -n 's/.*"profiles":\([0-9]*\).*/\1/p')
  [ "$n" -gt "$before" ]
}
wait_for "pushes with the token" with_token
stop_agent
grep -q '0 profiles refused' "$tmp/e.err" || fail "refusals with the token"
unserve
ok "5: without the token refused and said, with it delivered"
echo "agent_push: all passed"
