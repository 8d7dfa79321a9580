#!/bin/sh
# tests/e2e/regex_go.sh: Ember's regex engine against Go's regexp package,
# the engine of Prometheus's matchers (issue 12, point 6).
#
# tests/go/regexdiff generates patterns from a grammar of RE2 syntax and
# subjects for each (seeded: the same cases every run), and says for each
# whether regexp.MustCompile("^(?s:" + re + ")$") compiles and matches, as
# Prometheus compiles a matcher. `test_regex --go-cases` runs Ember on the
# same cases and fails on any difference: a pattern one accepts and the
# other rejects, or a subject one matches and the other does not. Intended
# differences (docs/regex.md) are not generated. No timing is measured.
# The generated cases are kept in $BUILD/regex-go/ for a failing run.
set -eu
BUILD=${BUILD:-build}

fail() { echo "FAIL: $*" >&2; exit 1; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

command -v go > /dev/null || { echo "go is missing: install golang-go (make deps does)"; exit 77; }
[ -x "$BUILD/tests/test_regex" ] || fail "$BUILD/tests/test_regex is not built"
out=$(abs "$BUILD/regex-go")
mkdir -p "$out"
export GO111MODULE=off GOFLAGS= GOCACHE="$(abs "$BUILD/gocache")" \
       GOPATH="$(abs "$BUILD/gopath")"
go build -o "$out/regexdiff" tests/go/regexdiff/main.go || fail "go build regexdiff"

total=0
for seed in 1 2 3; do
    cases=$out/cases-$seed.txt
    "$out/regexdiff" -seed "$seed" -n 3000 > "$cases" || fail "regexdiff -seed $seed"
    "$BUILD/tests/test_regex" --go-cases "$cases" > "$out/result-$seed.txt" || {
        grep '^DIFF' "$out/result-$seed.txt" | head -n 20 >&2
        tail -n 1 "$out/result-$seed.txt" >&2
        fail "seed $seed: Ember and Go differ (cases in $cases)"
    }
    tail -n 1 "$out/result-$seed.txt"
    total=$((total + 1))
done
# The oracle itself must see both answers often, or the test proves little.
for seed in 1 2 3; do
    m=$(grep -c ' 1$' "$out/cases-$seed.txt") || true
    e=$(grep -c '^p .* err$' "$out/cases-$seed.txt") || true
    [ "$m" -ge 1000 ] || fail "seed $seed: only $m matching subjects"
    [ "$e" -ge 100 ] || fail "seed $seed: only $e rejected patterns"
done
echo "regex_go: ok ($total seeds, no differences from Go's regexp)"
