#!/bin/sh
# tests/e2e/repl_complete.sh: tab completion in `ember repl` at a terminal
# (tests/e2e/lib/pty_drive.py), in the spots tests/e2e/repl.sh leaves out:
# a keyword after an expression, label_values' string argument, a label
# inside braces on the second line of a statement (the lines before it are
# the context), no insertion after a number, and nothing, without a crash,
# past the 64 levels of brackets the completer follows (issue 13: it reads
# the query lexer's tolerant-mode tokens). Each query is built with tabs
# and must run, so a wrong completion fails it.
set -eu
EMBER=${EMBER:-build/ember}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/db
CPU=process_cpu:samples:count:cpu:nanoseconds:delta
die() { echo "FAIL: $*" >&2; exit 1; }

command -v python3 > /dev/null ||
    die "python3 is needed to drive the REPL in a pseudo-terminal"
$EMBER import -d "$db" tests/data/pprof/*.pb.gz > "$tmp/imp" 2>&1 ||
    die "import: $(cat "$tmp/imp")"
hash_total=$($EMBER query -d "$db" "$CPU{worker=\"hash\"}" |
             grep -o 'of [0-9.]* total' | sed 's/\./\\./g')
[ -n "$hash_total" ] || die "no top total for worker=hash"
deep=$(printf '%070d' 0 | tr 0 '{')

mkdir -p "$tmp/home"
env TERM=xterm HOME="$tmp/home" EMBER_HISTORY="$tmp/hist" \
    python3 tests/e2e/lib/pty_drive.py --log "$tmp/log" -- \
    $EMBER repl -d "$db" 2> "$tmp/err" <<EOF || die "$(cat "$tmp/err")"
expect ember> \$
send merge($CPU{worker="hash"}) b\t
sleep 0.2
send (worker)\r
expect # \{worker="hash"\}
expect $hash_total
expect ember> \$
send label_values("wor\t
sleep 0.2
send )\r
expect ^hash\$
expect ember> \$
send merge(\r
expect \.\.\.> \$
send $CPU{wor\t
sleep 0.2
send ="hash"})\r
expect $hash_total
expect ember> \$
send top($CPU{worker="hash"}, 1\t
sleep 0.2
send 0)\r
expect Showing top 10 nodes
expect ember> \$
send $deep\t
sleep 0.2
send \x03
expect ember> \$
send .quit\r
exit 0
EOF
grep -q 'error' "$tmp/log" && die "a statement failed: $(grep error "$tmp/log")"
echo "repl_complete: ok"
