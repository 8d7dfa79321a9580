#!/bin/sh
# stage.sh RESULTS NAME CMD...: runs CMD and records "pass NAME" or
# "fail NAME" in RESULTS, so that `make test` can sum every stage at the end.
results=$1; name=$2; shift 2
mkdir -p "$(dirname "$results")"
if "$@"; then
    echo "pass $name" >> "$results"
else
    echo "fail $name" >> "$results"
    echo "FAILED: $name" >&2
fi
exit 0
