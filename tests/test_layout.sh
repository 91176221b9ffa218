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
for h in core/*.h autograd/*.h nn/*.h optim/*.h data/*.h train/*.h bench/*.h \
         tests/*.h tests/ref/*.h; do
  [ -f "$h" ] || continue
  want="CT_$(echo "${h%.h}" | tr 'a-z/.' 'A-Z__')_H"
  guard=$(grep -m1 '^#ifndef' "$h" | awk '{print $2}')
  define=$(grep -m1 '^#define' "$h" | awk '{print $2}')
  if [ "$guard" != "$want" ] || [ "$define" != "$want" ]; then
    echo "FAIL: $h: include guard '$guard' / '$define', want $want"
    bad=1
  fi
done
# Layers each layer may include (besides itself).
declare -A allowed=(
  [core]="core" [autograd]="core autograd" [nn]="core autograd nn"
  [optim]="core autograd nn optim" [data]="core data"
  [train]="core autograd nn optim data train")
for layer in "${!allowed[@]}"; do
  for f in "$layer"/*.c "$layer"/*.h; do
    [ -f "$f" ] || continue
    while IFS= read -r inc; do
      dir=${inc%%/*}
      case " ${allowed[$layer]} " in
        *" $dir "*) ;;
        *) echo "FAIL: $f includes $inc ($layer may use: ${allowed[$layer]})"
           bad=1 ;;
      esac
    done < <(sed -n 's/^#include "\([a-z_]*\/[^"]*\)".*/\1/p' "$f")
  done
done
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
