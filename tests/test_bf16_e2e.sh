#!/usr/bin/env bash
# Mixed precision through the program ([train] precision = bf16):
# - a tiny ViT on the generated shape images learns in bf16 (val accuracy
#   well above chance);
# - bf16 training is deterministic: 1 and 2 threads end in the same weights
#   (params_digest of `ctrain inspect`);
# - the switch does something: the same run in fp32 ends elsewhere;
# - eval of a bf16 checkpoint runs its products in bf16 as well (its
#   accuracy line matches the run's last evaluation exactly);
# - [train] bf16_activations = false gives other weights (deterministic at
#   any thread count); in fp32 it changes nothing;
# - a bad value is refused with the allowed ones.
#
# usage: test_bf16_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
cd "$tmp" || exit 1
digest() { "$ctrain" inspect "$1" | sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'; }

vit=(
  run.task=classification run.dir="$tmp/runs" run.seed=3
  data.source=toy data.toy_image_size=16 data.toy_classes=4
  data.toy_train=1600 data.toy_val=200 data.toy_test=200 data.batch_size=64
  model.arch=vit model.patch=4 model.dim=32 model.depth=2 model.heads=2
  model.mlp_dim=64 model.drop_path=0 model.dropout=0
  optim.lr=2e-3 schedule.warmup=20 train.epochs=0 train.log_every=20
  train.checkpoint_every=1000 train.eval_every=0 train.precision=bf16
)
empty=$tmp/empty.ini
: >"$empty"

# ---- learns -------------------------------------------------------------------
mapfile -t args < <(sets "${vit[@]}" run.name=learn train.steps=500)
last=$("$ctrain" train "$empty" "${args[@]}" 2>"$tmp/train.log" | tail -n 1)
acc=$(jnum "$last" accuracy)
expect "bf16 vit learns (val accuracy $acc >= 0.85, chance 0.25)" "ge '${acc:-0}' 0.85"
ckpt=$(jstr "$last" checkpoint)
out=$("$ctrain" eval "$ckpt" | tail -n 1)
expect "eval of the bf16 checkpoint repeats the run's accuracy ($(jnum "$out" accuracy))" \
  "[ '$(jnum "$out" accuracy)' = '$acc' ] && [ '$(jnum "$out" loss)' = '$(jnum "$last" loss)' ]"

# ---- deterministic at any thread count; differs from fp32 -------------------------
run_digest() {  # NAME THREADS [extra sets...]
  local name=$1 threads=$2
  shift 2
  mapfile -t args < <(sets "${vit[@]}" run.name="$name" train.steps=40 "$@")
  local last
  last=$("$ctrain" train "$empty" "${args[@]}" --threads "$threads" 2>/dev/null | tail -n 1)
  digest "$(jstr "$last" checkpoint)"
}
d1=$(run_digest t1 1)
d2=$(run_digest t2 2)
d32=$(run_digest fp32 2 train.precision=fp32)
expect "bf16: 1 and 2 threads give the same weights ($d1)" "[ -n '$d1' ] && [ '$d1' = '$d2' ]"
expect "fp32 and bf16 runs end in different weights" "[ -n '$d32' ] && [ '$d32' != '$d1' ]"

# ---- bf16 activations: the switch does something, deterministically --------------
# (fc1's output is rounded before the GELU with them, so the runs part.)
a1=$(run_digest act1 1 train.bf16_activations=false)
a2=$(run_digest act2 2 train.bf16_activations=false)
expect "bf16_activations = false: 1 and 2 threads agree ($a1), and differ from the default" \
  "[ -n '$a1' ] && [ '$a1' = '$a2' ] && [ '$a1' != '$d1' ]"
f32a=$(run_digest fp32a 2 train.precision=fp32 train.bf16_activations=false)
expect "in fp32 the setting changes nothing ($f32a)" "[ -n '$f32a' ] && [ '$f32a' = '$d32' ]"

# ---- bad value ------------------------------------------------------------------
mapfile -t args < <(sets "${vit[@]}" run.name=bad train.precision=fp16)
"$ctrain" train "$empty" "${args[@]}" >/dev/null 2>"$tmp/err"
rc=$?
expect "precision = fp16 is refused, naming fp32, bf16 (exit $rc)" \
  "[ $rc -ne 0 ] && grep -q 'precision.*fp32, bf16' '$tmp/err' && [ ! -e runs/bad/metrics.jsonl ]"

mapfile -t args < <(sets "${vit[@]}" run.name=bad2 train.bf16_activations=maybe)
"$ctrain" train "$empty" "${args[@]}" >/dev/null 2>"$tmp/err"
rc=$?
expect "bf16_activations = maybe is refused (exit $rc): $(head -c 160 "$tmp/err")" \
  "[ $rc -ne 0 ] && grep -q 'bf16_activations' '$tmp/err' && [ ! -e runs/bad2/metrics.jsonl ]"

echo "$fails failed"
[ "$fails" -eq 0 ]
