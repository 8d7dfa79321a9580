#!/bin/sh
# tests/e2e/pyroscope_push.sh: Pyroscope's push API on `ember serve`, the
# Connect unary call /push.v1.PusherService/Push, with requests built by an
# independent encoder (Python's protobuf over protoc's compile of
# proto/pyroscope/*.proto, tests/e2e/lib/pyroscope_push.py). A push stores
# each series' pprof profiles under its labels (__name__ naming the type),
# a gzipped body too; a push with one bad profile stores nothing and
# answers Connect's invalid_argument. JSON bodies (protobuf's JSON mapping,
# by Python's json_format) give the same answers as protobuf ones. The
# querier's calls as Grafana makes them, against the CLI on the same data:
# flame graph levels, SelectSeries, SelectMergeProfile's pprof, and Diff.
set -eu
EMBER=${EMBER:-build/ember}
PY=/usr/bin/python3         # Debian's, which python3-protobuf is for
. tests/e2e/lib/serve.sh
serve_init
command -v protoc > /dev/null && $PY -c 'import google.protobuf' 2> /dev/null ||
  fail "protoc and python3-protobuf are missing (make deps installs them)"

protoc --python_out="$tmp" -I. proto/profile.proto proto/pyroscope/*.proto
db=$tmp/db
serve_start "$db" --listen tcp:0
url=http://127.0.0.1:$port/push.v1.PusherService/Push
push() { $PY tests/e2e/lib/pyroscope_push.py "$tmp" "$url" "$@"; }
samples() { curl -s "http://127.0.0.1:$port/api/v1/status" | sed 's/.*"samples":\([0-9]*\).*/\1/'; }
cpu=tests/data/pprof/cpu.pb.gz

out=$(push good $cpu $cpu)
[ "$out" = "200 " ] || fail "good push: $out"
after_good=$(samples)
[ "$after_good" -gt 0 ] || fail "nothing stored"
out=$(push gzip $cpu)
[ "$out" = "200 " ] || fail "gzip push: $out"
after_gzip=$(samples)

out=$(push partial $cpu)
case $out in
  400*'"code":"invalid_argument"'*'series 1'*) ;;
  *) fail "partial push: $out" ;;
esac
[ "$(samples)" = "$after_gzip" ] || fail "a refused push stored samples"
out=$(push garbage)
case $out in 400*invalid_argument*) ;; *) fail "garbage push: $out" ;; esac
out=$(push json $cpu)
case $out in 200*) ;; *) fail "json push: $out" ;; esac
out=$(push badjson)
case $out in 400*invalid_argument*rawProfile*) ;; *) fail "bad json push: $out" ;; esac

# the querier, as Grafana calls it, against the CLI on the same data
query() {  # through a file: grep -q may stop reading early
  $PY tests/e2e/lib/pyroscope_query.py "$tmp" "http://127.0.0.1:$port" "$@" > "$tmp/q.out"
  cat "$tmp/q.out"
}
id=process_cpu:cpu:nanoseconds:cpu:nanoseconds
query health | grep -q "^$id process_cpu cpu nanoseconds cpu nanoseconds$" ||
  fail "ProfileTypes: $(query health)"
[ "$(query labels '{service_name="pushed"}' | tr '\n' ' ')" = "file service_name worker " ] ||
  fail "LabelNames: $(query labels '{service_name="pushed"}')"
[ "$(query values file "{__profile_type__=\"$id\"}" | tr '\n' ' ')" = "0 1 " ] ||
  fail "LabelValues: $(query values file)"
query series '{file="1"}' | grep -q "^__name__=process_cpu,__profile_type__=$id,file=1,service_name=pushed,worker=" ||
  fail "Series: $(query series '{file="1"}')"
query flame $id '{service_name="pushed",file="1"}' 1048576 > "$tmp/flame"
query totals $id '{service_name="pushed"}' 60 file > "$tmp/totals"
CODEC=json query flame $id '{service_name="pushed",file="1"}' 1048576 > "$tmp/flame.json"
CODEC=json query totals $id '{service_name="pushed"}' 60 file > "$tmp/totals.json"
cmp -s "$tmp/flame" "$tmp/flame.json" || fail "the flame graph as JSON differs"
cmp -s "$tmp/totals" "$tmp/totals.json" || fail "SelectSeries as JSON differs"
query profile $id '{service_name="pushed",file="1"}' > "$tmp/profile"
CODEC=json query profile $id '{service_name="pushed",file="1"}' > "$tmp/profile.json"
cmp -s "$tmp/profile" "$tmp/profile.json" || fail "SelectMergeProfile as JSON differs"
end=4102444800000
query diff $id '{service_name="pushed",file="0"}' 0 $end \
  '{service_name="pushed",file="1"}' 0 $end > "$tmp/diff"
CODEC=json query diff $id '{service_name="pushed",file="0"}' 0 $end \
  '{service_name="pushed",file="1"}' 0 $end > "$tmp/diff.json"
cmp -s "$tmp/diff" "$tmp/diff.json" || fail "Diff as JSON differs"
query bad | grep -q '^501 unimplemented$' || fail "an unserved method: $(query bad)"
serve_stop

# what was pushed is what the file holds: each push of cpu.pb.gz under
# its series, the same stacks as an import of the file
t='process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta'
$EMBER query -d "$db" 'label_values(file)' | grep -qx 1 || fail "series file=1 missing"
$EMBER import -d "$tmp/ref" $cpu 2> /dev/null
$EMBER query -d "$tmp/ref" -o collapsed "$t{}" | LC_ALL=C sort > "$tmp/want"
$EMBER query -d "$db" -o collapsed "$t{service_name=\"pushed\",file=\"1\"}" |
  LC_ALL=C sort > "$tmp/got"
[ -s "$tmp/want" ] && cmp -s "$tmp/want" "$tmp/got" || fail "pushed stacks differ from the file's"

# the flame graph's stacks and total are the CLI's merge of the same data
awk '{ v = $NF; $NF = ""; sub(/ $/, ""); s[$0] += v; t += v }
     END { for (k in s) print k, s[k]; print "total", t }' "$tmp/got" |
  LC_ALL=C sort > "$tmp/want_flame"
LC_ALL=C sort "$tmp/flame" > "$tmp/got_flame"
cmp -s "$tmp/want_flame" "$tmp/got_flame" || { diff "$tmp/want_flame" "$tmp/got_flame" | head; fail "flame graph levels differ from the CLI's merge"; }
# SelectSeries: per file, the points sum to that file's total
total=$(sed -n 's/^total //p' "$tmp/got_flame")
grep -q "^file=1 $total$" "$tmp/totals" || fail "SelectSeries file=1: $(cat "$tmp/totals"), want $total"
# SelectMergeProfile's pprof holds the same stacks as the CLI's merge
grep -v '^total ' "$tmp/want_flame" > "$tmp/want_profile"
LC_ALL=C sort "$tmp/profile" > "$tmp/got_profile"
cmp -s "$tmp/want_profile" "$tmp/got_profile" || { diff "$tmp/want_profile" "$tmp/got_profile" | head; fail "SelectMergeProfile differs from the CLI's merge"; }
# Diff's two sides are the CLI's diff of the same selectors: file=0 was
# pushed twice (plain and gzipped), file=1 once
$EMBER query -d "$db" -o collapsed \
  "diff($t{service_name=\"pushed\",file=\"0\"}, $t{service_name=\"pushed\",file=\"1\"})" |
  awk '{ t = $NF; $NF = ""; b = $(NF - 1); $(NF - 1) = ""; sub(/ +$/, "")
         s[$0] += b; g[$0] += t; tb += b; tt += t }
       END { for (k in s) print k, s[k], g[k]; print "ticks", tb, tt }' |
  LC_ALL=C sort > "$tmp/want_diff"
LC_ALL=C sort "$tmp/diff" > "$tmp/got_diff"
[ -s "$tmp/want_diff" ] && cmp -s "$tmp/want_diff" "$tmp/got_diff" || { diff "$tmp/want_diff" "$tmp/got_diff" | head; fail "Diff differs from the CLI's diff"; }
grep -q '^ticks [1-9][0-9]* [1-9][0-9]*$' "$tmp/got_diff" || fail "Diff ticks: $(grep ticks "$tmp/got_diff")"
echo "pyroscope_push: ok"
