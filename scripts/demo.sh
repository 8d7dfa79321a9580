#!/bin/sh
# demo.sh BUILD DB: `make demo`, and what `make run` falls back to without root:
# generate half an hour of realistic profiles for a few services as
# collapsed files, import them with `ember import`, and query the result.
set -eu
build=$1; db=$2
ember=$build/ember
work=$build/demo-profiles
rm -rf "$work" "$db"
"$build"/bench/make_demo "$work" > /dev/null
for svc in "$work"/*/; do
    name=$(basename "$svc")
    "$ember" import -d "$db" -l service="$name" -l env=demo "$svc" 2>&1 | sed "s/^/$name: /"
done
echo
echo "== ember stats -d $db"
"$ember" stats -d "$db" | sed -n '1,12p'
svc=$(ls "$work" | head -n 1)
echo
echo "== ember query -d $db -o top --limit 15 '{service=\"$svc\"}'"
"$ember" query -d "$db" -o top --limit 15 "{service=\"$svc\"}"
echo
echo "Explore it: $ember query -d $db -o collapsed '{service=\"$svc\"}'"
echo "            $ember help query"
echo "See it in a browser: $ember serve -d $db --listen tcp:4040" \
     "then open http://127.0.0.1:4040/ (docs/web.md)"
