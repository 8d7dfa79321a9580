#!/bin/sh
# tests/e2e/pyroscope_node.sh: a real Pyroscope SDK pushes to `ember
# serve`. tests/node/app.js, a small Node program, runs under
# @pyroscope/nodejs (installed from npm into BUILD/node, pinned by
# tests/node/package-lock.json) with the server as its serverAddress; its
# uploads go to Pyroscope's POST /ingest. Ember must then hold the
# program's series (service_name=nodeapp, its tags as labels) and its own
# function, emberHotLoop, as the hottest one of the wall profile.
set -eu
EMBER=${EMBER:-build/ember}
BUILD=${BUILD:-build}
. tests/e2e/lib/serve.sh
serve_init

command -v node > /dev/null && command -v npm > /dev/null ||
  fail "node and npm are missing (make deps installs nodejs)"
node_dir=$BUILD/node
stamp=$(cat tests/node/package.json tests/node/package-lock.json | cksum)
if [ "$(cat "$node_dir/stamp" 2> /dev/null)" != "$stamp" ]; then
  rm -rf "$node_dir"
  mkdir -p "$node_dir"
  cp tests/node/package.json tests/node/package-lock.json "$node_dir/"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) > "$tmp/npm" 2>&1 ||
    fail "npm ci: $(tail -5 "$tmp/npm")"
  echo "$stamp" > "$node_dir/stamp"
fi

db=$tmp/db
serve_start "$db" --listen tcp:0

EMBER_URL=http://127.0.0.1:$port NODE_PATH=$node_dir/node_modules RUN_MS=3000 \
  node tests/node/app.js > "$tmp/node" 2>&1 || fail "the Node program: $(tail -5 "$tmp/node")"
grep -q '"POST /ingest HTTP/1.1" 200 ' "$tmp/log" || fail "no ingest arrived: $(cat "$tmp/log")"
! grep -q '"POST /ingest HTTP/1.1" [45]' "$tmp/log" || fail "an ingest was refused: $(grep ' /ingest ' "$tmp/log")"
serve_stop

$EMBER query -d "$db" 'label_values(service_name)' | grep -qx nodeapp || fail "no service_name=nodeapp"
$EMBER query -d "$db" 'label_values(env)' | grep -qx test || fail "the SDK's tag env=test is not a label"
wall=$($EMBER query -d "$db" 'profile_types()' | grep '^wall:samples:count:' | head -1)
[ -n "$wall" ] || fail "no wall profile type: $($EMBER query -d "$db" 'profile_types()')"
# the row of the hottest flat function names emberHotLoop
$EMBER query -d "$db" -o top "$wall{service_name=\"nodeapp\"}" 2> /dev/null > "$tmp/top"
sed -n 4p "$tmp/top" | grep -q 'emberHotLoop' || fail "emberHotLoop is not the hottest: $(head -6 "$tmp/top")"
echo "pyroscope_node: ok"
