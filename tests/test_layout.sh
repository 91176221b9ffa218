#!/usr/bin/env bash
# The house rules that a reader relies on, checked on the source tree:
#  - every header's include guard is its path (core/gemm.h: CT_CORE_GEMM_H);
#  - each layer includes only itself and the layers before it
#    (core < autograd < nn < optim < data < train; data may use core only).
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
[ $bad -eq 0 ] && echo "layout: guards and layer includes ok"
exit $bad
