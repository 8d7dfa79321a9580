#!/bin/sh
# summary.sh RESULTS...: prints the failures and skips, then the closing
# line "N passed, N failed" (with ", N skipped" when some were); exits 1
# when anything failed or nothing ran.
pass=0; fail=0; skip=0
for f in "$@"; do
    [ -f "$f" ] || continue
    p=$(grep -c '^pass ' "$f"); x=$(grep -c '^fail ' "$f")
    k=$(grep -c '^skip ' "$f")
    pass=$((pass + p)); fail=$((fail + x)); skip=$((skip + k))
    grep '^fail ' "$f" | sed "s|^fail |FAILED ($f): |"
    grep '^skip ' "$f" | sed "s|^skip |skipped ($f): |"
done
if [ "$skip" -gt 0 ]; then
    echo "$pass passed, $fail failed, $skip skipped"
else
    echo "$pass passed, $fail failed"
fi
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
