#!/bin/sh
# tests/e2e/serve_crash.sh: `ember serve` killed with SIGKILL while 64
# clients push at once, several rounds on one database. Each push carries
# a label of its own (push=CLIENT-N); a push whose 200 reached the client
# must be in the database after the kill, every one of them, and
# `ember verify` must find the database clean. A push that got no answer
# may or may not be there: both are right.
set -eu
EMBER=${EMBER:-build/ember}
ROUNDS=${ROUNDS:-4}
CLIENTS=64
SERVE_KILL=9
. tests/e2e/lib/serve.sh
serve_init
db=$tmp/db
sock=$tmp/s.sock

# client C: pushes until the server is gone, recording each push whose
# answer was 200
client() {
  n=0
  while :; do
    n=$((n + 1))
    st=$(printf 'main;work%d;leaf 7\nmain;idle 3\n' "$n" |
      curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" \
        --data-binary @- "http://ember/api/v1/import?label=push=r$1-$n") || st=000
    [ "$st" = 200 ] || break
    echo "r$1-$n" >> "$tmp/acked.$1"
  done
}

for round in $(seq "$ROUNDS"); do
  serve_start "$db" --listen "unix:$sock" --access-log off
  for c in $(seq "$CLIENTS"); do client "$round-$c" & done
  # let the pushes run, a different while each round
  sleep "0.$((3 + round * 2))"
  kill -9 "$pid"
  wait "$pid" 2> /dev/null || true
  pid=
  wait                          # the clients see the server gone
  rm -f "$sock"
done

cat "$tmp"/acked.* 2> /dev/null | LC_ALL=C sort > "$tmp/acked"
[ -s "$tmp/acked" ] || fail "no push was acknowledged"
$EMBER verify -d "$db" > "$tmp/verify" 2>&1 || fail "verify: $(tail -3 "$tmp/verify")"
$EMBER query -d "$db" 'label_values(push)' | sed '1,2d;$d' | LC_ALL=C sort > "$tmp/stored"
LC_ALL=C comm -23 "$tmp/acked" "$tmp/stored" > "$tmp/lost"
[ ! -s "$tmp/lost" ] || fail "$(wc -l < "$tmp/lost") acknowledged pushes lost, e.g. $(head -3 "$tmp/lost" | tr '\n' ' ')"
echo "serve_crash: ok ($(wc -l < "$tmp/acked") acknowledged pushes in $ROUNDS rounds, all stored)"
