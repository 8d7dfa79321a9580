#!/bin/sh
# tests/e2e/ingest_prev.sh: POST /ingest with a prev_profile (issue 14), as
# Pyroscope's older Go SDK sends cumulative profiles: the multipart fields
# profile, prev_profile and sample_type_config. Two successive heap and
# mutex profiles of one Go process (tests/go/cumgen, committed in
# tests/data/pprof_cum) go in; what is stored must be, per stack, cur minus
# prev for the cumulative types (those with "cumulative": true, Go's
# alloc_*, contentions and delay without a config), computed here apart
# from the server: each file imported alone by `ember import` and the
# collapsed stacks subtracted by awk, keeping what grew. The other types
# are stored as the current profile holds them. A bad sample_type_config
# or prev_profile answers 400 naming it and stores nothing.
set -eu
EMBER=${EMBER:-build/ember}
. tests/e2e/lib/serve.sh
serve_init
d=tests/data/pprof_cum
db=$tmp/db
serve_start "$db" --listen tcp:0
url="http://127.0.0.1:$port/ingest?format=pprof&from=1764201600"

ingest() {  # NAME FIELDS...: the status, and the body in $tmp/body
  n=$1; shift
  curl -s -o "$tmp/body" -w '%{http_code}' "$@" "$url&name=$n"
}
samples() { curl -s "http://127.0.0.1:$port/api/v1/status" | sed 's/.*"samples":\([0-9]*\).*/\1/'; }

cat > "$tmp/config.json" <<'JSON'
{"alloc_objects":{"units":"objects","cumulative":true},
 "alloc_space":{"units":"bytes","cumulative":true},
 "inuse_objects":{"units":"objects","aggregation":"average"},
 "inuse_space":{"units":"bytes","aggregation":"average"}}
JSON
st=$(ingest heap -F profile=@$d/heap-cur.pb.gz -F prev_profile=@$d/heap-prev.pb.gz \
  -F sample_type_config=@"$tmp/config.json")
[ "$st" = 200 ] || fail "heap with prev_profile: $st $(cat "$tmp/body")"
# as pyroscope-go sends its mutex profile: the display names tell it from
# a block profile, whose sample types are the same
cat > "$tmp/mutex.json" <<'JSON'
{"contentions":{"units":"lock_samples","display-name":"mutex_count","cumulative":true},
 "delay":{"units":"lock_nanoseconds","display-name":"mutex_duration","cumulative":true}}
JSON
st=$(ingest mutex -F profile=@$d/mutex-cur.pb.gz -F prev_profile=@$d/mutex-prev.pb.gz \
  -F sample_type_config=@"$tmp/mutex.json")
[ "$st" = 200 ] || fail "mutex with prev_profile: $st $(cat "$tmp/body")"
serve_stop

# the expected deltas, from each file alone
for f in heap-cur heap-prev mutex-cur mutex-prev; do
  $EMBER import -d "$tmp/$f" -l service_name=x "$d/$f.pb.gz" 2> /dev/null ||
    fail "ember import $f"
done
collapsed() {  # DB TYPE SERVICE: sorted "stack value" lines
  $EMBER query -d "$1" -o collapsed "{__type__=\"$2\", service_name=\"$3\"}" \
    2> /dev/null | sort
}
delta() {  # CUR PREV: per stack cur - prev, where positive
  awk 'function key(l) { sub(/ [-0-9]+$/, "", l); return l }
       NR == FNR { prev[key($0)] = $NF; next }
       { d = $NF - prev[key($0)]; if (d > 0) print key($0) " " d }' "$2" "$1" | sort
}
check() {  # SERVED-TYPE FILE-TYPE FILE SERVICE CUMULATIVE
  collapsed "$db" "$1" "$4" > "$tmp/got"
  collapsed "$tmp/$3-cur" "$2" x > "$tmp/cur"
  collapsed "$tmp/$3-prev" "$2" x > "$tmp/prev"
  if [ "$5" = yes ]; then delta "$tmp/cur" "$tmp/prev" > "$tmp/want"
  else cp "$tmp/cur" "$tmp/want"; fi
  [ -s "$tmp/want" ] || fail "$1: nothing expected (the test data?)"
  cmp -s "$tmp/got" "$tmp/want" ||
    fail "$1: stored stacks differ: $(diff "$tmp/want" "$tmp/got" | head -8)"
}
m=memory; b=mutex; c=contentions:count
check $m:alloc_objects:count:space:bytes:delta $m:alloc_objects:count:space:bytes heap heap yes
check $m:alloc_space:bytes:space:bytes:delta $m:alloc_space:bytes:space:bytes heap heap yes
check $m:inuse_objects:count:space:bytes $m:inuse_objects:count:space:bytes heap heap no
check $m:inuse_space:bytes:space:bytes $m:inuse_space:bytes:space:bytes heap heap no
check $b:contentions:count:$c:delta mutex:contentions:count:$c mutex mutex yes
check $b:delay:nanoseconds:$c:delta mutex:delay:nanoseconds:$c mutex mutex yes
# a stack that did not grow is not stored: allocOnce ran before prev only
collapsed "$db" $m:alloc_objects:count:space:bytes:delta heap | grep -q allocOnce &&
  fail "allocOnce, unchanged, was stored"
collapsed "$db" $m:inuse_objects:count:space:bytes heap | grep -q allocOnce ||
  fail "allocOnce is missing from inuse_objects"

# refusals store nothing
serve_start "$db" --listen tcp:0
url="http://127.0.0.1:$port/ingest?format=pprof&from=1764201600"
before=$(samples)
printf '{"alloc_objects":{"cumulative":"yes"}}' > "$tmp/bad.json"
st=$(ingest bad -F profile=@$d/heap-cur.pb.gz -F prev_profile=@$d/heap-prev.pb.gz \
  -F sample_type_config=@"$tmp/bad.json")
[ "$st" = 400 ] && grep -q 'sample_type_config.*cumulative' "$tmp/body" ||
  fail "bad sample_type_config: $st $(cat "$tmp/body")"
printf '{"alloc_objects":' > "$tmp/cut.json"
st=$(ingest bad -F profile=@$d/heap-cur.pb.gz -F prev_profile=@$d/heap-prev.pb.gz \
  -F sample_type_config=@"$tmp/cut.json")
[ "$st" = 400 ] && grep -q 'sample_type_config' "$tmp/body" ||
  fail "cut sample_type_config: $st $(cat "$tmp/body")"
printf 'not a profile at all' > "$tmp/junk.pb"
st=$(ingest bad -F profile=@$d/heap-cur.pb.gz -F prev_profile=@"$tmp/junk.pb")
[ "$st" = 400 ] && grep -q 'prev_profile' "$tmp/body" ||
  fail "bad prev_profile: $st $(cat "$tmp/body")"
st=$(curl -s -o "$tmp/body" -w '%{http_code}' -F profile=@$d/heap-cur.pb.gz \
  -F prev_profile=@$d/heap-prev.pb.gz "http://127.0.0.1:$port/ingest?name=bad&format=folded")
[ "$st" = 400 ] && grep -q 'prev_profile.*format=pprof' "$tmp/body" ||
  fail "prev_profile with folded: $st $(cat "$tmp/body")"
[ "$(samples)" = "$before" ] || fail "a refused request stored samples"
serve_stop
echo "ingest_prev: ok"
