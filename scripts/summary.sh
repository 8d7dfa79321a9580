#!/bin/sh
# summary.sh RESULTS...: prints the failures, then the closing line
# "N passed, N failed"; exits 1 when anything failed or nothing ran.
pass=0; fail=0
for f in "$@"; do
    [ -f "$f" ] || continue
    p=$(grep -c '^pass ' "$f"); x=$(grep -c '^fail ' "$f")
    pass=$((pass + p)); fail=$((fail + x))
    grep '^fail ' "$f" | sed "s|^fail |FAILED ($f): |"
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
