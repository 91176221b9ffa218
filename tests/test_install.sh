#!/usr/bin/env bash
# Installs the library into a scratch folder and builds the ctrain.h worked
# example against it through pkg-config, as a user of the library would.
set -eu
build=$1
src=$2
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --no-rebuild --destdir "$dest" >/dev/null
pc=$(find "$dest" -name ctrain.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: ctrain.pc was not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$dest
flags=$(pkg-config --cflags --libs ctrain)
echo "pkg-config: $flags"
libdir=$(dirname "$(find "$dest" -name 'libctrain.so' | head -n 1)")
# Only the harness comes from the source tree; ctrain.h and everything it
# includes must come from the installed headers.
mkdir -p "$dest/t/tests"
cp "$src/tests/harness.h" "$dest/t/tests/"
cp "$src/tests/test_example.c" "$dest/t/"
# A library built with sanitizers needs them in the program too (their
# runtime must come first in the list of libraries it loads).
sanitize=$(readelf -d "$libdir/libctrain.so" 2>/dev/null |
  sed -n 's/.*Shared library: \[lib\(asan\|ubsan\)\.so.*/\1/p' |
  sed 's/asan/address/; s/ubsan/undefined/' | sort -u | paste -sd, -)
[ -n "$sanitize" ] && echo "the library uses -fsanitize=$sanitize: so does the example"
cc -std=c11 -o "$dest/example" "$dest/t/test_example.c" -I"$dest/t" $flags -lm \
  ${sanitize:+-fsanitize=$sanitize}
LD_LIBRARY_PATH=$libdir "$dest/example"
