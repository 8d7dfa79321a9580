#!/bin/sh
# check-symbols.sh LIB: fails if the shared library exports a symbol whose
# name does not start with ember_ (SQLite's checksymbols).
lib=$1
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRW]/ {print $3}' \
      | grep -vE '^(ember_|_init$|_fini$|_edata$|_end$|__bss_start$)')
if [ -n "$bad" ]; then
    echo "check-symbols: $lib exports names without ember_:" >&2
    echo "$bad" >&2
    exit 1
fi
echo "symbols: ok ($(nm -D --defined-only "$lib" | grep -c ' T ember_') ember_ functions)"
