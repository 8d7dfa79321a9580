#!/bin/sh
# run.sh BUILD DB DEMO_DB: what `make run` does. Profiles this machine
# with `ember record` (eBPF, every process) for 10 seconds into DB, with a
# busy demo workload (tests/fixtures/busy.c) when the machine is idle,
# then prints the top functions of the whole machine, a flame graph of the
# busiest process, how to open the REPL on DB and how to see it in a
# browser (ember serve's page, docs/web.md). Without root (or BPF,
# BTF, perf events) it says why and shows the generated demo database
# (scripts/demo.sh, `make demo`) instead.
set -eu
build=$1; db=$2; demo=$3
ember=$build/ember
secs=10
type=ebpf_cpu:cpu:nanoseconds:cpu:nanoseconds:delta
busy_pid=

fallback() {
  echo "make run: $1"
  echo "make run: showing the generated demo database instead (make demo)"
  echo
  exec sh scripts/demo.sh "$build" "$demo"
}
cleanup() { [ -n "$busy_pid" ] && kill "$busy_pid" 2> /dev/null; return 0; }
trap cleanup EXIT

[ "$(id -u)" = 0 ] ||
  fallback "profiling the machine with eBPF needs root: try \`sudo make run\`"

# cpu_busy: the share (0..100) of all CPUs in use over half a second.
cpu_busy() {
  a=$(head -n 1 /proc/stat); sleep 0.5; b=$(head -n 1 /proc/stat)
  echo "$a
$b" | awk '{ idle = $5 + $6; t = 0; for (i = 2; i <= NF; i++) t += $i }
    NR == 1 { i0 = idle; t0 = t } NR == 2 { d = t - t0;
    printf "%d\n", (d > 0 ? 100 * (1 - (idle - i0) / d) : 0) }'
}

busy=$(cpu_busy)
if [ "$busy" -lt 25 ] && command -v clang > /dev/null; then
  mkdir -p "$build/fixtures"
  clang -O2 -g -fno-omit-frame-pointer tests/fixtures/busy.c \
    -o "$build/fixtures/busy"
  echo "The machine is idle ($busy% CPU in use): starting a demo workload," \
       "$build/fixtures/busy."
  "$build/fixtures/busy" $((secs + 3)) & busy_pid=$!
fi

rm -rf "$db"
echo "== ember record -d $db --duration ${secs}s --frequency 99"
if ! "$ember" record -d "$db" --duration ${secs}s --frequency 99; then
  [ -e "$db" ] && exit 1          # it failed after it started: a real error
  fallback "ember record cannot sample here (see above)"
fi
cleanup; busy_pid=

echo
echo "== the whole machine: ember query -d $db -o top --limit 15 '$type'"
"$ember" query -d "$db" -o top --limit 15 "$type"

# The busiest process: CPU per (pid, comm), summed over the windows.
top=$("$ember" query -d "$db" -o csv "sum by (pid, comm) (total($type))" |
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { v[$col["pid"] "," $col["comm"]] += $NF }
    END { for (k in v) if (v[k] > best) { best = v[k]; b = k } print b }')
pid=${top%%,*}; comm=${top#*,}
if [ -n "$pid" ]; then
  echo
  echo "== the busiest process, $comm (pid $pid):" \
       "ember query -d $db -o flame '$type{pid=\"$pid\"}'"
  "$ember" query -d "$db" -o flame "$type{pid=\"$pid\"}"
fi
echo
echo "Explore it: $ember repl -d $db"
echo "  then try: top(merge($type{comm=\"$comm\"}), 10)   .help lists the rest"
echo "            sum by (comm) (total($type))"
echo "See it in a browser: $ember serve -d $db --listen tcp:4040" \
     "then open http://127.0.0.1:4040/ (docs/web.md)"
