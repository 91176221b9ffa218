#!/usr/bin/env bash
# Budgeted schedules through the program ([train] max_minutes > 0): a new
# run times a few steps, plans its total (what fits, at most the configured
# total) and its warmup, prints them, writes them into config.ini (steps =
# N, epochs = 0, max_minutes = 0) and into its checkpoints. Then:
# - rerunning that config.ini (no measurement) gives the same bits
#   (params_digest, metrics.jsonl) as the budgeted run: the timed passes
#   changed nothing;
# - resuming the budgeted run from a checkpoint halfway, with another budget
#   (as on a slower machine), keeps the plan and ends with the same bits;
# - a budget that fits the whole configured run keeps its steps and warmup;
# - max_minutes out of range is an error naming the key.
# The runs augment (crops, flips, RandAugment, mixup and cutmix) with a
# strength that follows the planned length and rises over the whole run
# ([data] augment_full_epochs, augment_ramp): the planned total fixes it, so
# the rerun and the resumed run see the same batches; bad values of those
# keys are errors naming them.
#
# usage: test_budget.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
cd "$tmp" || exit 1
export OMP_WAIT_POLICY=passive
: >empty.ini

# A tiny ViT with dropout on generated shapes: a few ms a step.
base=(run.task=classification run.dir="$tmp/runs" run.seed=3 data.source=toy
      data.toy_train=512 data.toy_val=64 data.toy_test=64
      data.toy_image_size=16 data.toy_classes=4 data.batch_size=32
      model.arch=vit model.patch=4 model.dim=32 model.depth=2 model.heads=2
      model.mlp_dim=64 model.dropout=0.1 model.drop_path=0.1 optim.lr=2e-3
      schedule.warmup=40 train.log_every=5 train.eval_every=25
      train.checkpoint_every=10 train.keep_checkpoints=100000
      data.crop_padding=2 data.hflip=true data.randaug_ops=2
      data.mixup_alpha=0.8 data.cutmix_alpha=1.0 data.augment_full_epochs=50
      data.augment_ramp=1)
digest() { "$ctrain" inspect "$1" | sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'; }
last_ckpt() { ls "$1"/ckpt-*.ct | tail -n 1; }

# ---- a budget smaller than the configured run ------------------------------
mapfile -t args < <(sets "${base[@]}" run.name=budget train.epochs=0 \
  train.steps=1000000 train.max_minutes=0.03)
"$ctrain" train empty.ini "${args[@]}" >budget.out 2>budget.err
rc=$?
plan=$(sed -n 's/.*max_minutes = 0.03: a step takes .*; planned \([0-9]*\) steps, what fits of the configured 1000000, warmup \([0-9]*\) (configured 40)$/\1 \2/p' budget.err)
read -r N W <<<"$plan"
expect "a budgeted run plans its total (exit $rc: $(grep planned budget.err))" \
  "[ $rc -eq 0 ] && [ -n '${N:-}' ] && [ ${N:-0} -ge 1 ] && [ ${N:-0} -lt 1000000 ]"
N=${N:-0}
W=${W:-0}
expect "the planned warmup keeps its share ($W of $N)" \
  "[ $W -le 40 ] && { [ $N -le 1 ] || [ $W -ge 1 ]; } && [ $W -lt $N ] || [ $N -le 1 ]"
expect "the progress line and banner show the planned total" \
  "grep -q 'steps 0\.\.$N,' budget.err && grep -q 'step $N/$N ' budget.err"
cfg=runs/budget/config.ini
expect "config.ini holds the plan" \
  "grep -qx 'steps = $N' $cfg && grep -qx 'epochs = 0' $cfg && grep -qx 'max_minutes = 0' $cfg && grep -qx 'warmup = $W' $cfg"
final=$(last_ckpt runs/budget)
expect "the run ends at its planned step" \
  "[ $final = runs/budget/ckpt-$(printf %08d $N).ct ] && [ '$(jnum "$(tail -n 1 budget.out)" step)' = $N ]"
expect "the checkpoint records the plan" \
  "$ctrain inspect $final | grep -qx 'planned for a time budget: $N steps, warmup $W'"
want=$(digest "$final")
note=$(grep '^ctrain: augmentation: a run of' budget.err)
epochs=$(awk -v n=$N 'BEGIN { printf "%.3g", n * 32 / 512 }')
expect "the augmentation follows the planned length ($note)" \
  "grep -q 'augmentation: a run of $epochs epochs gets .* of the configured RandAugment magnitude (9) and mix_prob (1) (all of it from 50 epochs, none up to 0), rising from 0 over the first 1 of the run' budget.err"

# ---- rerunning config.ini: the same run, without measuring -----------------
"$ctrain" train "$cfg" --set run.dir="$tmp/rerun" >rerun.out 2>rerun.err
expect "the rerun does not measure again" "! grep -q 'a step takes' rerun.err"
expect "rerunning config.ini gives the same parameters" \
  "[ -n '$want' ] && [ '$(digest "$(last_ckpt rerun/budget)")' = '$want' ]"
expect "rerunning config.ini gives the same metrics.jsonl" \
  "cmp -s runs/budget/metrics.jsonl rerun/budget/metrics.jsonl"
expect "the rerun's augmentation has the same strength" \
  "[ -n '$note' ] && grep -qxF '$note' rerun.err"

# ---- resuming halfway on a "slower machine" (another budget) ---------------
mid=$(( (N / 2) / 10 * 10 ))
if [ $mid -ge 10 ]; then
  mkdir -p resumed
  cp -r runs/budget resumed/budget
  for c in resumed/budget/ckpt-*.ct; do
    s=$(basename "$c" .ct)
    [ $((10#${s#ckpt-})) -gt $mid ] && rm "$c"
  done
  mapfile -t args < <(sets "${base[@]}" run.name=budget run.dir="$tmp/resumed" \
    train.epochs=0 train.steps=1000000 train.max_minutes=0.001)
  "$ctrain" train empty.ini "${args[@]}" --resume auto >resumed.out 2>resumed.err
  expect "a resumed run keeps its plan" \
    "grep -q 'keeps its planned total of $N steps (warmup $W) from the checkpoint' resumed.err && ! grep -q 'a step takes' resumed.err"
  expect "resumed at step $mid: the same parameters" \
    "[ '$(digest "$(last_ckpt resumed/budget)")' = '$want' ]"
  expect "resumed at step $mid: the same metrics.jsonl" \
    "cmp -s runs/budget/metrics.jsonl resumed/budget/metrics.jsonl"
else
  bad "the budget planned $N steps: too few to resume halfway (a very slow machine?)"
fi

# ---- a budget that fits the configured run ---------------------------------
mapfile -t args < <(sets "${base[@]}" run.name=fits train.epochs=0 \
  train.steps=60 train.max_minutes=30)
"$ctrain" train empty.ini "${args[@]}" >fits.out 2>fits.err
expect "a budget that fits keeps the configured steps and warmup" \
  "grep -q 'planned the configured 60 steps (.* would fit), warmup 40 (configured 40)' fits.err && grep -qx 'steps = 60' runs/fits/config.ini && grep -qx 'warmup = 40' runs/fits/config.ini"

# ---- bad budgets -------------------------------------------------------------
for v in -1 nan 1e9; do
  fails_with "max_minutes = $v is refused" "max_minutes" \
    "$ctrain" train empty.ini --set run.dir="$tmp/bad" --set train.max_minutes=$v
done
for kv in augment_ramp=1.5 augment_full_epochs=-1 augment_off_epochs=3; do
  fails_with "data.$kv is refused" "\[data\] ${kv%=*}" \
    "$ctrain" train empty.ini --set run.dir="$tmp/bad" \
    --set run.task=classification --set data.$kv
done
fails_with "augment_off_epochs not below augment_full_epochs is refused" \
  "augment_off_epochs = 8: must be at least 0 and below augment_full_epochs" \
  "$ctrain" train empty.ini --set run.dir="$tmp/bad" \
  --set run.task=classification --set data.augment_full_epochs=8 \
  --set data.augment_off_epochs=8
expect "a refused budget or augmentation leaves no run folder" "[ ! -e bad ]"

echo "budget: $fails failed"
[ $fails -eq 0 ]
