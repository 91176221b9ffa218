#!/usr/bin/env bash
# The house rules that a reader relies on, checked on the source tree:
#  - every header's include guard is its path (core/gemm.h: CT_CORE_GEMM_H);
#  - each layer includes only itself and the layers before it
#    (core < autograd < nn < optim < data < train; data may use core only);
#  - the C sources are formatted by .clang-format (checked when clang-format
#    14, the version the layout was made with, is installed).
# Prints each violation and fails if there is any.
set -u
root=${1:?usage: test_layout.sh SOURCE_ROOT}
cd "$root" || exit 1
bad=0
# One awk pass over all headers and one over all includes: spawning tools
# per file made this test slow on a loaded machine.
shopt -s nullglob
headers=(core/*.h autograd/*.h nn/*.h optim/*.h data/*.h train/*.h bench/*.h
         tests/*.h tests/ref/*.h)
guards=$(awk '
  FNR == 1 { files[++n] = FILENAME }
  /^#ifndef/ && !(FILENAME in g) { g[FILENAME] = $2 }
  /^#define/ && !(FILENAME in d) { d[FILENAME] = $2 }
  END {
    for (i = 1; i <= n; i++) {
      f = files[i]; want = f; sub(/\.h$/, "", want)
      gsub(/[\/.]/, "_", want); want = "CT_" toupper(want) "_H"
      if (g[f] != want || d[f] != want)
        printf "FAIL: %s: include guard '\''%s'\'' / '\''%s'\'', want %s\n", f, g[f], d[f], want
    }
  }' "${headers[@]}")
if [ -n "$guards" ]; then
  echo "$guards"
  bad=1
fi
# Layers each layer may include (besides itself).
includes=$(grep -H '^#include "[a-z_]*/' core/*.[ch] autograd/*.[ch] nn/*.[ch] \
             optim/*.[ch] data/*.[ch] train/*.[ch] | awk '
  BEGIN {
    allowed["core"] = " core "; allowed["autograd"] = " core autograd "
    allowed["nn"] = " core autograd nn "; allowed["optim"] = " core autograd nn optim "
    allowed["data"] = " core data "
    allowed["train"] = " core autograd nn optim data train "
  }
  {
    f = $0; sub(/:.*/, "", f); layer = f; sub(/\/.*/, "", layer)
    inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    dir = inc; sub(/\/.*/, "", dir)
    if (index(allowed[layer], " " dir " ") == 0)
      printf "FAIL: %s includes %s (%s may use:%s)\n", f, inc, layer, allowed[layer]
  }')
if [ -n "$includes" ]; then
  echo "$includes"
  bad=1
fi
if clang-format --version 2>/dev/null | grep -q 'version 14\.'; then
  unformatted=$(git ls-files '*.c' '*.h' 2>/dev/null | grep -v '^tests/ref/' |
                xargs -r clang-format --dry-run 2>&1 | grep -c 'warning:')
  if [ "$unformatted" -gt 0 ]; then
    echo "FAIL: $unformatted places not formatted by .clang-format" \
         "(run: git ls-files '*.c' '*.h' | xargs clang-format -i)"
    bad=1
  fi
else
  echo "layout: clang-format 14 not installed, formatting not checked"
fi
[ $bad -eq 0 ] && echo "layout: guards, layer includes and formatting ok"
exit $bad
