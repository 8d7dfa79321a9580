# tests/e2e/lib/pprof_compare.sh: helpers that compare Ember's answers with
# `go tool pprof`'s, sourced by tests/e2e/pprof_go.sh (POSIX sh + awk).
#
# Two kinds of text are compared:
# - `-top` tables, `go tool pprof -top` and `ember query -o top`: a row is
#   "FLAT FLAT% SUM% CUM CUM%  NAME [(inline)|(partial-inline)]". Rows are
#   recognised by their three percentage fields, so headers and the
#   "Showing nodes ..." lines drop out. The inline mark is a note on the
#   row, not part of the function's name (pprof keys rows by name alone),
#   so it is left out; FLAT and CUM are compared as printed, unit and all.
# - `go tool pprof -raw` dumps (the profile as pprof's loader sees it):
#   locations by address and lines ("FUNC FILE:LINE s=START[(SYSNAME)]",
#   innermost inline frame first), mappings without their ids and flags.
#
# Every helper reads files and writes to stdout; pc_same prints what
# differs to stderr and returns 1.

# go tool pprof without symbolization: it must judge only what the file
# says (an Ember export that lost function names must not be rescued by
# pprof reading the binary). Its notes go to $PC_LOG.
pc_pprof() {
    go tool pprof -symbolize=none "$@" 2>> "${PC_LOG:-/dev/null}"
}

# pc_top FILES...: `go tool pprof -top` with no trimming at all.
# Pass -sample_index=X and -unit=U before the files.
pc_top() {
    pc_pprof -top -nodecount=1000000 -nodefraction=0 -edgefraction=0 "$@"
}

# pc_rows < TOP: "NAME<TAB>FLAT<TAB>CUM" per row, sorted bytewise.
pc_rows() {
    awk '
    function pct(s) { return s ~ /^-?[0-9.]+(e[-+]?[0-9]+)?%$/ }
    NF >= 6 && pct($2) && pct($3) && pct($5) {
        name = $0
        f = "[^ \t]+[ \t]+"
        sub("^[ \t]*" f f f f f, "", name)
        sub(/ \((partial-)?inline\)$/, "", name)
        print name "\t" $1 "\t" $4
    }' | LC_ALL=C sort
}

# pc_same WANT GOT WHAT: WANT and GOT (sorted row files) are equal and
# WANT is not empty; otherwise prints up to 20 differing rows ("-" only in
# WANT, "+" only in GOT) and returns 1.
pc_same() {
    if [ ! -s "$1" ]; then
        echo "FAIL: $3: nothing to compare against (empty $1)" >&2
        return 1
    fi
    if cmp -s "$1" "$2"; then
        return 0
    fi
    echo "FAIL: $3: $(wc -l < "$1") rows wanted, $(wc -l < "$2") got;" \
         "differences (- go tool pprof, + ember):" >&2
    LC_ALL=C comm -3 "$1" "$2" | head -20 |
        awk -F'\t' '{ if (/^\t/) { sub(/^\t/, ""); print "  + " $0 }
                      else print "  - " $0 }' >&2
    return 1
}

# pc_rows_sum < ROWS: the sum of the FLAT column of pc_rows output (its
# digits: values are printed unscaled), for totals.
pc_rows_sum() {
    awk -F'\t' '{ v = $2; gsub(/[^-0-9]/, "", v); s += v }
                END { printf "%d\n", s }'
}

# pc_types RAW: the sample types of a -raw dump, "TYPE UNIT" per line in
# order (the index is pprof's -sample_index).
pc_types() {
    awk '/^Samples:$/ { getline; n = split($0, t, " ")
                        for (i = 1; i <= n; i++) {
                            sub(/\[dflt\]$/, "", t[i]); sub(/\//, " ", t[i])
                            print t[i]
                        }
                        exit }' "$1"
}

# pc_locs RAW COL: the locations that samples with a non-zero value in
# column COL (1-based) use, one per line: "ADDRESS LINE | LINE ...", sorted.
pc_locs() {
    awk -v col="$2" '
    /^Samples:$/ { sec = "s"; getline; next }
    /^Locations$/ { sec = "l"; next }
    /^Mappings$/ { sec = "m"; next }
    sec == "s" && /^ *-?[0-9]+( +-?[0-9]+)*: / {
        split($0, parts, ":")
        n = split(parts[1], v, " ")
        if (v[col] + 0 != 0) {
            rest = substr($0, index($0, ":") + 1)
            k = split(rest, ids, " ")
            for (i = 1; i <= k; i++) used[ids[i]] = 1
        }
        next
    }
    sec == "l" && /^ *[0-9]+: 0x[0-9a-f]+ / {
        id = $1; sub(/:$/, "", id)
        line = $0
        sub(/^ *[0-9]+: /, "", line)
        sub(/ M=[0-9]+ /, " ", line)
        key[id] = line; order[++nloc] = id; cur = id
        next
    }
    sec == "l" && /^             / {
        line = $0; sub(/^ +/, "", line)
        key[cur] = key[cur] " | " line
        next
    }
    END { for (i = 1; i <= nloc; i++) if (order[i] in used) print key[order[i]] }
    ' "$1" | LC_ALL=C sort -u
}

# pc_funcs LOCS: the function names in pc_locs output, sorted, unique.
pc_funcs() {
    awk '{ n = split($0, ln, / \| /)
           for (i = 1; i <= n; i++) {
               s = ln[i]
               if (i == 1) sub(/^0x[0-9a-f]+ ([[]F[]] )?/, "", s)
               if (s == "" || s == "??") continue
               # "NAME FILE:LINE s=N": the name ends before the last two fields
               k = split(s, w, " ")
               name = w[1]
               for (j = 2; j <= k - 2; j++) name = name " " w[j]
               print name
           } }' "$1" | LC_ALL=C sort -u
}

# pc_maps RAW: the mappings "START/LIMIT/OFFSET FILE BUILDID", sorted.
pc_maps() {
    awk '/^Mappings$/ { m = 1; next }
         m && /^[0-9]+: / { sub(/^[0-9]+: /, ""); gsub(/[[][A-Z][A-Z][]]/, "")
                            sub(/ +$/, ""); print }' "$1" | LC_ALL=C sort
}

# pc_frames < COLLAPSED: every frame name in `ember query -o collapsed`.
pc_frames() {
    awk '{ sub(/ -?[0-9]+$/, ""); n = split($0, f, ";")
           for (i = 1; i <= n; i++) print f[i] }' | LC_ALL=C sort -u
}

# pc_labels RAW KEY: the values of string label KEY on samples, sorted.
pc_labels() {
    awk -v key="$2" '{ for (i = 1; i <= NF; i++)
                           if (index($i, key ":[") == 1) {
                               v = substr($i, length(key) + 3)
                               sub(/[]]$/, "", v); print v } }' "$1" |
        LC_ALL=C sort -u
}

# pc_go_env TMP: go tool pprof's environment for a test whose scratch
# directory is TMP (GOPATH mode, the build's Go cache, pprof's own files in
# TMP); returns 1 when go is missing.
pc_go_env() {
    command -v go > /dev/null || return 1
    case ${BUILD:-build} in
    /*) pc_cache=${BUILD:-build}/gocache ;;
    *) pc_cache=$PWD/${BUILD:-build}/gocache ;;
    esac
    export GO111MODULE=off GOFLAGS= GOCACHE="$pc_cache" PPROF_TMPDIR="$1" \
           HOME="${HOME:-$1}"
}
