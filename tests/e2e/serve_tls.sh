#!/bin/sh
# tests/e2e/serve_tls.sh: `ember serve --tls-cert --tls-key` over TCP: a
# certificate made here by openssl for 127.0.0.1, curl trusting it gets
# the same answers as over the Unix socket (which TLS leaves plain), curl
# not trusting it fails the handshake, plain HTTP on the TLS port gets no
# answer, and a query's top over https is the CLI's. A key that does not match the certificate, or a certificate
# without its key, stops the server from starting with a message.
set -eu
EMBER=${EMBER:-build/ember}
. tests/e2e/lib/serve.sh
serve_init
command -v openssl > /dev/null || fail "openssl is missing (make deps installs it)"

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" \
  -out "$tmp/cert.pem" 2> /dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other \
  -keyout "$tmp/other.pem" -out "$tmp/other_cert.pem" 2> /dev/null
db=$tmp/db
sock=$tmp/ember.sock
$EMBER import -d "$db" -l service=tls tests/data/pprof/cpu.pb.gz 2> /dev/null
serve_start "$db" --listen "unix:$sock" --listen tcp:0 \
  --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem"
grep -q "tcp:127.0.0.1:$port (TLS)" "$tmp/log" || fail "the log does not say TLS: $(cat "$tmp/log")"

https=https://127.0.0.1:$port
[ "$(curl -s --cacert "$tmp/cert.pem" "$https/healthz")" = ok ] || fail "healthz over TLS"
a=$(curl -s --cacert "$tmp/cert.pem" "$https/api/v1/label/service/values")
b=$(curl -s --unix-socket "$sock" http://ember/api/v1/label/service/values)
[ "$a" = '{"status":"success","data":["tls"]}' ] && [ "$a" = "$b" ] ||
  fail "label values over TLS ($a) and the socket ($b)"
curl -s -o /dev/null "$https/healthz" && fail "an untrusted certificate was accepted"
curl -s -m 5 -o /dev/null "http://127.0.0.1:$port/healthz" && fail "plain HTTP on the TLS port was answered"
q='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{service="tls"}'
curl -s --cacert "$tmp/cert.pem" -G --data-urlencode "query=$q" -d format=top "$https/api/v1/query" > "$tmp/tls_top"
$EMBER query -d "$db" -o top "$q" > "$tmp/cli_top"
cmp -s "$tmp/tls_top" "$tmp/cli_top" || fail "top over TLS differs from the CLI's"
serve_stop

# a mismatched key, or a certificate alone, does not start
$EMBER serve -d "$db" --listen tcp:0 --tls-cert "$tmp/cert.pem" \
  --tls-key "$tmp/other.pem" 2> "$tmp/err" && fail "a mismatched key started"
[ -s "$tmp/err" ] || fail "no message for a mismatched key"
$EMBER serve -d "$db" --listen tcp:0 --tls-cert "$tmp/cert.pem" 2> "$tmp/err" &&
  fail "a certificate without its key started"
grep -q 'tls-key' "$tmp/err" || fail "no message for a lone certificate: $(cat "$tmp/err")"
echo "serve_tls: ok"
