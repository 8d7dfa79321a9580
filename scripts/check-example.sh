#!/bin/sh
# check-example.sh BUILD: installs into a scratch prefix, builds
# docs/examples/embed.c with pkg-config against that installed copy (as a
# user would), and runs it.
set -e
build=$1
prefix=$(cd "$build" && pwd)/install
rm -rf "$prefix"
make --no-print-directory install BUILD="$build" PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c11 -Wall -Werror docs/examples/embed.c \
   $(pkg-config --cflags --libs ember) -o "$build/embed-example"
db=$(mktemp -d)
LD_LIBRARY_PATH="$prefix/lib" "$build/embed-example" "$db/example.db"
rm -rf "$db"
