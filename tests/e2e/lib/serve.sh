# tests/e2e/lib/serve.sh: a test's own `ember serve`, sourced by the end
# to end tests of the server and by bench/serve.sh (which set EMBER):
#
#   serve_init           $tmp, a scratch directory removed at exit, when a
#                        server still running is killed (SIGKILL when
#                        SERVE_KILL=9)
#   fail MSG...          says FAIL (and the server log's end) and exits 1
#   serve_start DB ARGS...
#                        `ember serve -d DB ARGS`, its stderr in $tmp/log,
#                        waited for until it listens on each --listen (one
#                        when none is given); $pid, and $port when one
#                        listener is tcp:...
#   serve_stop           SIGTERM, then its exit status must be 0
serve_init() {
  tmp=$(mktemp -d)
  pid=
  trap serve_cleanup EXIT
}
serve_cleanup() {
  [ -z "$pid" ] || kill "-${SERVE_KILL:-TERM}" "$pid" 2> /dev/null || true
  rm -rf "$tmp"
}
fail() {
  echo "FAIL: $*" >&2
  [ ! -s "$tmp/log" ] || tail -5 "$tmp/log" >&2
  exit 1
}
serve_start() {
  db=$1
  shift
  want=$(printf '%s\n' "$@" | grep -c '^--listen$') || true
  [ "$want" -gt 0 ] || want=1
  : > "$tmp/log"     # here: the child truncates it only once it runs
  $EMBER serve -d "$db" "$@" 2> "$tmp/log" &
  pid=$!
  port=
  for _ in $(seq 400); do
    if [ "$(grep -c 'listening on' "$tmp/log" 2> /dev/null)" -ge "$want" ]; then
      port=$(sed -n 's/.*listening on tcp:[^ ]*:\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
      return 0
    fi
    kill -0 "$pid" 2> /dev/null || fail "the server exited: $(cat "$tmp/log")"
    sleep 0.05
  done
  fail "the server did not start: $(cat "$tmp/log")"
}
serve_stop() {
  kill -TERM "$pid"
  st=0
  wait "$pid" || st=$?
  pid=
  [ "$st" = 0 ] || fail "the server's exit status $st"
}
