#!/usr/bin/env bash
# Weights move between ctrain and PyTorch both ways and both compute the
# same logits (max |diff| <= 1e-4) for a ViT, a DeiT, a Swin, a CvT and three
# translators (two Transformers, the attention GRU):
# tests/ref/interop.py does the work and prints every difference. With
# SCRIPT, tests/ref/SCRIPT instead (ddetr_interop.py: an exported Deformable
# DETR loads strictly into its twin).
# Skipped (exit 77) when /usr/bin/python3 cannot import torch (Debian's
# python3-torch is enough; the `safetensors` package is optional).
#
# usage: test_interop.sh CTRAIN [SOURCE_ROOT] [SCRIPT]
set -u
ctrain=$1
case $ctrain in */*) ctrain=$(cd "$(dirname "$ctrain")" && pwd)/$(basename "$ctrain") ;; esac
src_root=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
script=${3:-interop.py}
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 cannot import torch (apt install python3-torch)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$src_root/tests/ref/$script" "$ctrain" "$tmp"
