#!/bin/sh
# tests/e2e/client.sh: the client side of issue 14. `ember query|import|
# repl|stats --server URL` against a real `ember serve` (a Unix socket and
# TCP) must do what they do on -d DIR: the same files imported both ways
# give the same summary; every output format (top, tree, flame, collapsed,
# json, svg, pprof, series with a step, tables) is byte for byte the same
# over the server as on the directory, with the same notes; stats agree;
# a bad query, an unreachable server, a wrong token and an untrusted
# certificate fail with a clear message and exit 1; https works with the
# server's certificate trusted (--ca-file); the REPL runs scripts, dot
# commands and completes labels and values through the server.
set -eu
EMBER=${EMBER:-build/ember}
. tests/e2e/lib/serve.sh
data=tests/data
serve_init
CPU=process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta
ALLOC=memory:alloc_space:bytes:space:bytes
local_db=$tmp/local
served=$tmp/served
sock=$tmp/s.sock

# start ARGS...: a server on $served, $sock and a free TCP port ($port)
# (the port is read again until it is there: serve_start may count the
# tcp line before the server has written all of it)
start() {
  serve_start "$served" --listen "unix:$sock" --listen tcp:0 "$@"
  for _ in $(seq 100); do
    [ -n "$port" ] && return 0
    sleep 0.05
    port=$(sed -n 's/.*listening on tcp:[^ ]*:\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
  done
  fail "no TCP port in the server's log: $(cat "$tmp/log")"
}
stop() { serve_stop; }
# summary FILE: an import summary without its timings
summary() { sed -n 's/ in [0-9.]* s (.*//p' "$1"; }

# ---- import both ways ---------------------------------------------------------
mkdir -p "$served"
start
st=0
$EMBER import -d "$local_db" -l service=api $data/pprof > /dev/null 2> "$tmp/imp_d" || st=$?
[ "$st" = 1 ] || fail "import -d of a directory with a README: status $st"
st=0
$EMBER import --server "unix:$sock" -l service=api $data/pprof > /dev/null 2> "$tmp/imp_s" || st=$?
[ "$st" = 1 ] || fail "import --server: status $st: $(cat "$tmp/imp_s")"
[ -n "$(summary "$tmp/imp_d")" ] || fail "no import summary: $(cat "$tmp/imp_d")"
[ "$(summary "$tmp/imp_d")" = "$(summary "$tmp/imp_s")" ] ||
  fail "import summaries differ: $(cat "$tmp/imp_d") vs $(cat "$tmp/imp_s")"
grep -q 'README.md: not a profile' "$tmp/imp_s" ||
  fail "import --server did not name the bad file: $(cat "$tmp/imp_s")"
for f in $data/collapsed/*; do
  $EMBER import -d "$local_db" -l service=cart --time 1764201600 "$f" 2> "$tmp/c_d" || true
  $EMBER import --server "http://127.0.0.1:$port" -l service=cart \
    --time 1764201600 "$f" 2> "$tmp/c_s" || true
  [ "$(summary "$tmp/c_d")" = "$(summary "$tmp/c_s")" ] ||
    fail "collapsed import over TCP: $(cat "$tmp/c_d") vs $(cat "$tmp/c_s")"
done
# a local import's options over the server too: --comm, --numeric-labels
# (compared by every query below), and --max-size refusing alike
one=$(ls $data/collapsed/* | head -1)
for o in --comm; do
  $EMBER import -d "$local_db" -l service=comm $o --time 1764201600 "$one" 2> "$tmp/o_d"
  $EMBER import --server "unix:$sock" -l service=comm $o --time 1764201600 "$one" 2> "$tmp/o_s" ||
    fail "import --server $o: $(cat "$tmp/o_s")"
  [ "$(summary "$tmp/o_d")" = "$(summary "$tmp/o_s")" ] || fail "import $o: $(cat "$tmp/o_d") vs $(cat "$tmp/o_s")"
done
$EMBER import -d "$local_db" -l service=num --numeric-labels series $data/pprof/cpu.pb.gz 2> "$tmp/o_d"
$EMBER import --server "unix:$sock" -l service=num --numeric-labels series $data/pprof/cpu.pb.gz 2> "$tmp/o_s" ||
  fail "import --server --numeric-labels: $(cat "$tmp/o_s")"
[ "$(summary "$tmp/o_d")" = "$(summary "$tmp/o_s")" ] || fail "import --numeric-labels: $(cat "$tmp/o_d") vs $(cat "$tmp/o_s")"
st=0
$EMBER import --server "unix:$sock" --max-size 100 $data/pprof/cpu.pb.gz 2> "$tmp/o_s" || st=$?
[ "$st" = 1 ] && grep -q '100' "$tmp/o_s" || fail "import --server --max-size 100: $st $(cat "$tmp/o_s")"

# ---- every format, on the directory and over the server ------------------------
# same URL FORMAT QUERY [OPTS...]: `ember query` output and notes equal
# ($token: options for the server side only)
token=
same() {
  url=$1; fmt=$2; q=$3; shift 3
  st_d=0; st_s=0
  $EMBER query -d "$local_db" -o "$fmt" "$@" "$q" > "$tmp/a" 2> "$tmp/ea" || st_d=$?
  $EMBER query --server "$url" $token -o "$fmt" "$@" "$q" > "$tmp/b" 2> "$tmp/eb" || st_s=$?
  [ "$st_d" = "$st_s" ] || fail "-o $fmt $q: status $st_d on -d, $st_s over $url: $(cat "$tmp/eb")"
  cmp -s "$tmp/a" "$tmp/b" || fail "-o $fmt $* $q: output differs over $url"
  cmp -s "$tmp/ea" "$tmp/eb" || fail "-o $fmt $q: messages differ: $(cat "$tmp/ea") vs $(cat "$tmp/eb")"
}
n=0
for url in "unix:$sock" "http://127.0.0.1:$port"; do
  for q in "merge($CPU)" "merge by (service) ($ALLOC)" "diff(merge($ALLOC), merge(memory:inuse_space:bytes:space:bytes))" \
           "focus(merge($CPU), \"runtime\")" "hide(merge($CPU), \"runtime\")" \
           "top(merge($CPU), 3)" 'merge(process_cpu{service="nope"})'; do
    for fmt in top tree flame collapsed json svg; do
      same "$url" "$fmt" "$q"
      n=$((n + 1))
    done
  done
  same "$url" top "merge($CPU)" --limit 5 --cum --unit ms
  same "$url" pprof "merge($CPU)"
  same "$url" pprof "merge($ALLOC)"
  for q in "total($CPU)" "sum by (service) (total($ALLOC))" 'label_values(service)' \
           'label_names()' 'profile_types({service="cart"})'; do
    for fmt in table csv json; do
      same "$url" "$fmt" "$q"
      same "$url" "$fmt" "$q" --step 1h --from 2020-01-01 --to 2030-01-01
      n=$((n + 2))
    done
  done
done
# a query longer than a URL may be goes in a form body
long=$(printf '%*s' 100000 '')
same "unix:$sock" top "merge($CPU)$long"
# the pprof over the server is a profile that decodes
$EMBER query --server "unix:$sock" -o pprof --output-file "$tmp/cpu.pb.gz" "merge($CPU)"
$EMBER import -d "$tmp/re" "$tmp/cpu.pb.gz" 2> "$tmp/re_log" || fail "pprof over the server does not decode: $(cat "$tmp/re_log")"
if command -v go > /dev/null; then
  go tool pprof -top "$tmp/cpu.pb.gz" > "$tmp/go_s" 2>&1 || fail "go tool pprof: $(cat "$tmp/go_s")"
  grep -q 'flat%' "$tmp/go_s" || fail "go tool pprof -top: $(cat "$tmp/go_s")"
fi

# ---- stats -------------------------------------------------------------------------
$EMBER stats -d "$served" > "$tmp/st_d"
$EMBER stats --server "unix:$sock" > "$tmp/st_s"
cmp -s "$tmp/st_d" "$tmp/st_s" || fail "stats differ: $(diff "$tmp/st_d" "$tmp/st_s")"
grep -q '^series *[1-9]' "$tmp/st_s" || fail "stats over the server: $(cat "$tmp/st_s")"

# ---- errors --------------------------------------------------------------------------
st=0
$EMBER query --server "unix:$sock" 'merge(' 2> "$tmp/e" || st=$?
[ "$st" = 1 ] && grep -q 'parse error at column 7' "$tmp/e" || fail "bad query over the server: $st $(cat "$tmp/e")"
st=0
$EMBER query --server "unix:$tmp/none.sock" "merge($CPU)" 2> "$tmp/e" || st=$?
[ "$st" = 1 ] && grep -q "server unix:$tmp/none.sock: cannot connect" "$tmp/e" ||
  fail "unreachable server: $st $(cat "$tmp/e")"
st=0
$EMBER stats --server "http://127.0.0.1:1" 2> "$tmp/e" || st=$?
[ "$st" = 1 ] && grep -q 'server http://127.0.0.1:1: cannot connect' "$tmp/e" ||
  fail "unreachable TCP server: $st $(cat "$tmp/e")"
st=0
$EMBER query --server "ftp://x" "merge($CPU)" 2> "$tmp/e" || st=$?
[ "$st" = 1 ] && grep -q 'expected unix:PATH' "$tmp/e" || fail "bad URL: $st $(cat "$tmp/e")"
st=0
$EMBER query -d "$served" --server "unix:$sock" "merge($CPU)" 2> "$tmp/e" || st=$?
[ "$st" = 2 ] || fail "-d with --server: status $st"

# ---- the REPL: a script, and completion through the server ------------------------------
printf 'merge(%s)\n.format collapsed\nmerge by (service) (%s)\n.types\n.labels {service="cart"}\n.values service\n.values __type__ {service="api"}\n' \
  "$CPU" "$ALLOC" > "$tmp/script"
$EMBER repl -d "$local_db" < "$tmp/script" > "$tmp/r_d" 2>&1 || fail "repl -d: $(cat "$tmp/r_d")"
$EMBER repl --server "unix:$sock" < "$tmp/script" > "$tmp/r_s" 2>&1 || fail "repl --server: $(cat "$tmp/r_s")"
cmp -s "$tmp/r_d" "$tmp/r_s" || fail "repl script output differs: $(diff "$tmp/r_d" "$tmp/r_s" | head)"
if command -v python3 > /dev/null; then
  mkdir -p "$tmp/home"
  env TERM=xterm HOME="$tmp/home" EMBER_HISTORY="$tmp/hist" \
      python3 tests/e2e/lib/pty_drive.py --log "$tmp/plog" -- \
      $EMBER repl --server "unix:$sock" 2> "$tmp/perr" <<EOF || fail "repl completion: $(cat "$tmp/perr") $(tail -5 "$tmp/plog")"
expect ember> \$
send label_values("serv\t
sleep 0.3
send )\r
expect ^cart\$
expect ember> \$
send merge($CPU{service="a\t
sleep 0.3
send })\r
expect flat%
expect ember> \$
send .quit\r
exit 0
EOF
fi

# ---- a token -----------------------------------------------------------------------------
stop
printf 's3cret\n' > "$tmp/token"
printf 'wrong\n' > "$tmp/bad"
start --token-file "$tmp/token"
st=0
$EMBER query --server "http://127.0.0.1:$port" "merge($CPU)" 2> "$tmp/e" > /dev/null || st=$?
[ "$st" = 1 ] && grep -q 'unauthorized' "$tmp/e" || fail "no token: $st $(cat "$tmp/e")"
st=0
$EMBER query --server "http://127.0.0.1:$port" --token-file "$tmp/bad" "merge($CPU)" 2> "$tmp/e" > /dev/null || st=$?
[ "$st" = 1 ] && grep -q 'unauthorized' "$tmp/e" || fail "wrong token: $st $(cat "$tmp/e")"
token="--token-file $tmp/token"
same "http://127.0.0.1:$port" top "merge($CPU)"
stop

# ---- https: the server's own certificate, trusted with --ca-file ------------------
token=
if command -v openssl > /dev/null; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" \
    -out "$tmp/cert.pem" -days 2 -subj "/CN=127.0.0.1" \
    -addext "subjectAltName=IP:127.0.0.1" 2> /dev/null
  start --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem"
  st=0
  $EMBER stats --server "https://127.0.0.1:$port" > /dev/null 2> "$tmp/e" || st=$?
  [ "$st" = 1 ] && grep -q 'certificate' "$tmp/e" || fail "untrusted certificate: $st $(cat "$tmp/e")"
  token="--ca-file $tmp/cert.pem"
  same "https://127.0.0.1:$port" collapsed "merge($CPU)"
  stop
fi
echo "client: ok ($n format comparisons)"
