#!/usr/bin/env bash
# Loading weights by name from a safetensors file (`ctrain forward
# --weights`, `[model] init_from`): a tensor the model lacks is an error
# that names it and the option that allows it; with the option
# (--allow-unexpected, init_from_strict = false) such tensors are skipped
# with a warning listing them and the rest is loaded; a parameter the file
# lacks is an error either way. Weights of a 2-block ViT loaded into a
# 1-block ViT have the extra tensors of block 1.
#
# usage: test_load_weights.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
cd "$tmp" || exit 1
export OMP_WAIT_POLICY=passive
: >empty.ini
vit=(run.task=classification run.dir="$tmp/runs" data.source=toy
     data.toy_train=64 data.toy_val=16 data.toy_test=16 data.toy_image_size=8
     data.toy_classes=2 data.batch_size=8 model.arch=vit model.patch=4
     model.dim=16 model.heads=2 model.mlp_dim=16 train.steps=2 train.epochs=0
     schedule.warmup=0)
train() {  # train NAME DEPTH [KEY=VALUE...]
  local name=$1 depth=$2
  shift 2
  mapfile -t args < <(sets "${vit[@]}" run.name="$name" model.depth="$depth" "$@")
  "$ctrain" train empty.ini "${args[@]}" >"$name.out" 2>"$name.err"
}
train one 1 && train two 2 || bad "the tiny ViTs train: $(tail -n 2 one.err two.err)"
"$ctrain" export runs/one/ckpt-00000002.ct one.safetensors >/dev/null &&
  "$ctrain" export runs/two/ckpt-00000002.ct two.safetensors >/dev/null ||
  bad "export"
# One gray 8x8 image: an 8-byte header length, the JSON header, 64 floats.
header='{"images":{"dtype":"F32","shape":[1,1,8,8],"data_offsets":[0,256]}}'
{
  printf "\\x$(printf %02x ${#header})\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
  printf '%s' "$header"
  head -c 256 /dev/zero | tr '\0' '\100'
} >in.safetensors
one=runs/one/ckpt-00000002.ct
"$ctrain" forward $one in.safetensors own.safetensors >/dev/null 2>own.err
expect "forward of the 1-block model" "[ -s own.safetensors ]"

# ---- ctrain forward --weights ----------------------------------------------------
fails_with "forward --weights with extra tensors: an error naming them and the option" \
  "two.safetensors: has [0-9]* tensor(s) the model does not: 'blocks.1.*(pass --allow-unexpected to skip them)" \
  "$ctrain" forward $one in.safetensors x.safetensors --weights two.safetensors
expect "no output after the error" "[ ! -e x.safetensors ]"
"$ctrain" forward $one in.safetensors skipped.safetensors --weights two.safetensors \
  --allow-unexpected >skipped.out 2>skipped.err
rc=$?
expect "--allow-unexpected skips them with a warning listing them (exit $rc)" \
  "[ $rc -eq 0 ] && grep -q \"^ctrain: warning: two.safetensors: skipped [0-9]* tensor(s) the model does not have: 'blocks.1.\" skipped.err"
expect "... and loads the rest (other logits than the model's own)" \
  "[ -s skipped.safetensors ] && ! cmp -s own.safetensors skipped.safetensors"
"$ctrain" forward $one in.safetensors same.safetensors --weights one.safetensors \
  >/dev/null 2>same.err
expect "the model's own weights: the same logits, no warning" \
  "cmp -s own.safetensors same.safetensors && ! grep -q warning same.err"
fails_with "missing tensors stay an error with --allow-unexpected" \
  "one.safetensors: lacks [0-9]* model parameter(s): 'blocks.1." \
  "$ctrain" forward runs/two/ckpt-00000002.ct in.safetensors y.safetensors \
  --weights one.safetensors --allow-unexpected
"$ctrain" forward $one in.safetensors z.safetensors --allow-unexpected \
  >/dev/null 2>usage.err
rc=$?
expect "--allow-unexpected without --weights is a usage error (exit $rc)" \
  "[ $rc -eq 2 ] && grep -q 'applies to the file of --weights' usage.err"

# ---- [model] init_from ---------------------------------------------------------
train strict 1 model.init_from="$tmp/two.safetensors"
rc=$?
expect "init_from with extra tensors: an error naming the key to set (exit $rc)" \
  "[ $rc -eq 1 ] && grep -q 'has [0-9]* tensor(s) the model does not: .blocks\.1\..*(set \[model\] init_from_strict = false to skip them)' strict.err && [ ! -e runs/strict ]"
train loose 1 model.init_from="$tmp/two.safetensors" model.init_from_strict=false
rc=$?
expect "init_from_strict = false: trains, warning of the skipped tensors (exit $rc)" \
  "[ $rc -eq 0 ] && grep -q \"warning: $tmp/two.safetensors: skipped [0-9]* tensor(s) the model does not have: 'blocks.1.\" loose.err"
train short 2 model.init_from="$tmp/one.safetensors" model.init_from_strict=false
rc=$?
expect "init_from_strict = false: a missing tensor is still an error (exit $rc)" \
  "[ $rc -eq 1 ] && grep -q 'lacks [0-9]* model parameter(s)' short.err && [ ! -e runs/short ]"

echo "load_weights: $fails failed"
[ $fails -eq 0 ]
