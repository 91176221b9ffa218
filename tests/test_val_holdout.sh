#!/usr/bin/env bash
# [data] val_holdout, the validation images held out of the training files:
# a fraction below 1 (rounded down, at most 5000 images), a whole count, or
# 0 (the test split validates); the default is 0.1. Bad values (negative,
# NaN, not a whole count, none or all of the images) are errors naming the
# key, before anything is written.
#
# usage: test_val_holdout.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
cd "$tmp" || exit 1
export OMP_WAIT_POLICY=passive
: >empty.ini
"$ctrain" toy images --out idx --format idx --size 8 --classes 2 --train 6000 \
  --test 20 >/dev/null

# One step of a tiny ViT; the final validation line counts the images.
base=(run.task=classification run.dir="$tmp/runs" data.source=files
      data.image_format=idx data.image_dir=idx model.arch=vit model.patch=4
      model.dim=8 model.depth=1 model.heads=1 model.mlp_dim=8 train.steps=1
      train.epochs=0 schedule.warmup=0 data.batch_size=8)
# val_images NAME [KEY=VALUE...]: the "images" of the run's final line.
val_images() {
  local name=$1
  shift
  mapfile -t args < <(sets "${base[@]}" run.name="$name" "$@")
  jnum "$("$ctrain" train empty.ini "${args[@]}" 2>"$tmp/$name.err" | tail -n 1)" images
}
expect "the default holds out 10% (600 of 6000)" "[ '$(val_images default)' = 600 ]"
expect "the resolved config says 0.1" "grep -qx 'val_holdout = 0.1' runs/default/config.ini"
expect "a fraction: 0.25 of 6000 is 1500" "[ '$(val_images quarter data.val_holdout=0.25)' = 1500 ]"
expect "a fraction: 0.29 of 6000 is 1740 (1739.9999999999998 in double)" \
  "[ '$(val_images exact data.val_holdout=0.29)' = 1740 ]"
expect "a fraction is capped at 5000 (0.9 of 6000)" "[ '$(val_images capped data.val_holdout=0.9)' = 5000 ]"
expect "a count: 5500" "[ '$(val_images count data.val_holdout=5500)' = 5500 ]"
expect "a count: 1" "[ '$(val_images one data.val_holdout=1)' = 1 ]"
expect "0 validates on the test split (20 images)" "[ '$(val_images test data.val_holdout=0)' = 20 ]"
# Eval takes the same split from the checkpoint's config.
ck=$(ls runs/quarter/ckpt-*.ct | tail -n 1)
expect "eval --split val holds out the same 1500" \
  "[ '$(jnum "$("$ctrain" eval "$ck" --split val 2>/dev/null | tail -n 1)" images)' = 1500 ]"

# CIFAR-10's 50,000 training images: the default holds out 5000, as the
# old default did.
"$ctrain" toy images --out cifar_size --format idx --size 8 --classes 2 \
  --train 50000 --test 10 >/dev/null
expect "the default on 50,000 images: 5000" \
  "[ '$(val_images fifty data.image_dir=cifar_size)' = 5000 ]"

for v in -1 -0.5 nan 2.5 1e10; do
  mapfile -t args < <(sets "${base[@]}" run.name=bad data.val_holdout=$v)
  fails_with "val_holdout = $v is refused" "val_holdout" \
    "$ctrain" train empty.ini "${args[@]}"
done
for v in 6000 7000; do
  mapfile -t args < <(sets "${base[@]}" run.name=bad data.val_holdout=$v)
  fails_with "val_holdout = $v leaves no training images" \
    "val_holdout = $v leaves no training images (the training split has 6000)" \
    "$ctrain" train empty.ini "${args[@]}"
done
mapfile -t args < <(sets "${base[@]}" run.name=bad data.val_holdout=0.0001)
fails_with "a fraction that holds out no image" \
  "val_holdout = 0.0001 of 6000 training images holds out none" \
  "$ctrain" train empty.ini "${args[@]}"
expect "refused values leave no run folder" "[ ! -e runs/bad ]"

echo "val_holdout: $fails failed"
[ $fails -eq 0 ]
