#!/bin/sh
# check-layers.sh: fails when a file includes a header from a layer above
# its own. Order, lowest first: engine and proto/ (the generated pprof wire
# format, which includes nothing of ours) < query, ingest (side by side,
# never each other) < client (the HTTP client and pusher, over query and
# ingest), bpf < repl. tests/, bench/, fuzz/ may include anything.
bad=0
check() {   # check DIR FORBIDDEN-DIR...
    dir=$1; shift
    for up in "$@"; do
        hits=$(grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$up/" \
               "$dir"/*.c "$dir"/*.h 2>/dev/null)
        if [ -n "$hits" ]; then
            echo "layering: $dir/ must not include $up/:" >&2
            echo "$hits" >&2
            bad=1
        fi
    done
}
check engine proto query ingest client bpf repl
check query ingest client bpf repl
check ingest query client bpf repl
check client bpf repl
check bpf repl
[ "$bad" = 0 ] && echo "layers: ok"
exit $bad
