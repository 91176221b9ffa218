#!/usr/bin/env bash
# Deformable DETR ([model] arch = deformable_detr of the detection task)
# through the program: a tiny model trained on 8 generated images overfits
# them (mAP@0.5 >= 0.8 evaluated on the same images); eval prints the size
# split; detect prints boxes; export writes the reference's names; a run
# resumed from its middle checkpoint under another thread count ends with
# the parameters of the run never stopped (params_digest), with dropout,
# flips and box refinement on; bad configs are refused naming the key.
#
# usage: test_deformable_detr_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
cd "$tmp" || exit 1

"$ctrain" toy detection --out det --size 32 --classes 2 --train 8 --val 4 >/dev/null
: >empty.ini
# Maps of 16x16 and 8x8 (the last two of three stages of width 8).
model=(run.task=detection run.seed=1 model.arch=deformable_detr
       model.d_model=32 model.heads=2 model.ff=64 model.encoder_layers=1
       model.decoder_layers=2 model.width=8 model.stages=3 model.blocks=1
       model.queries=8 model.n_levels=2 model.n_points=2)
sets=("${model[@]}" run.dir="$tmp/runs" run.name=dd model.dropout=0
      data.source=files data.coco_train=det/train.json data.coco_train_images=det/train
      data.coco_val=det/train.json data.coco_val_images=det/train data.channels=1
      data.batch_size=8 train.steps=300 schedule.warmup=20 optim.lr=1e-3
      optim.clip_norm=1 train.log_every=100 train.checkpoint_every=1000)
args=()
for s in "${sets[@]}"; do args+=(--set "$s"); done
last=$("$ctrain" train empty.ini "${args[@]}" --threads 2 2>train.log | tail -n 1)
map50=$(jnum "$last" map50)
expect "a tiny Deformable DETR overfits 8 images (mAP@0.5 $map50 >= 0.8)" "ge '${map50:-0}' 0.8"
ckpt=$(jstr "$last" checkpoint)
expect "the resolved config names the arch and the focal recipe" \
  "grep -q '^arch = deformable_detr' runs/dd/config.ini && grep -q '^cost_class = 2' runs/dd/config.ini"
expect "the resolved config holds the reference's learning-rate multipliers" \
  "grep -q '^lr_mult = sampling_offsets:0.1,reference_points:0.1$' runs/dd/config.ini"
out=$("$ctrain" eval "$ckpt" | tail -n 1)
expect "eval prints map50 and the size split" \
  "[ -n \"\$(jnum '$out' map50)\" ] && [ -n \"\$(jnum '$out' map50_large)\" ]"
out=$("$ctrain" detect "$ckpt" det/train/*.png --threshold 0.3)
expect "detect prints boxes" "grep -q '^det/train/[0-9]*.png: [a-z]* 0\.[0-9]* \[' <<<\"\$out\""
# With the focal loss every (query, class) pair is a detection (the
# reference's top-100 of them; here 8 queries x 2 classes), best first.
one=$(ls det/train/*.png | head -n 1)
out=$("$ctrain" detect "$ckpt" "$one" --threshold 0 | head -n 1)
n=$(grep -o '\[' <<<"$out" | wc -l)
expect "detect --threshold 0 lists all 16 (query, class) pairs ($n)" "[ '$n' -eq 16 ]"
expect "detect lists them by score, highest first" \
  "grep -oE '[0-9]\.[0-9]{3} \[' <<<\"\$out\" | tr -d ' [' | sort -c -r -g"
"$ctrain" export "$ckpt" dd.safetensors >/dev/null
expect "export writes the reference's names" \
  "grep -aq 'transformer.level_embed' dd.safetensors && grep -aq 'input_proj.1.1.weight' dd.safetensors && grep -aq 'transformer.decoder.layers.1.cross_attn.sampling_offsets.weight' dd.safetensors && grep -aq 'query_embed.weight' dd.safetensors"

# Exact resume: 60 steps straight on one thread, against 30 + 30 resumed on
# two, with dropout, flips and box refinement.
digest() { jstr "$("$ctrain" inspect "$1" 2>/dev/null | tail -n 1)" params_digest; }
rsets=("${model[@]}" run.name=r model.dropout=0.1 model.box_refine=true
       data.source=toy data.toy_image_size=32 data.toy_classes=3
       data.toy_train=32 data.toy_val=8 data.batch_size=8 data.hflip=true
       train.steps=60 schedule.warmup=10 optim.lr=1e-3 train.log_every=10
       train.checkpoint_every=30 train.keep_checkpoints=3)
rargs=()
for s in "${rsets[@]}"; do rargs+=(--set "$s"); done
"$ctrain" train empty.ini "${rargs[@]}" --set run.dir="$tmp/a" --threads 1 >/dev/null 2>a.log
mkdir -p b && cp -r a/r b/r && rm -f b/r/ckpt-00000060.ct
"$ctrain" train empty.ini "${rargs[@]}" --set run.dir="$tmp/b" --threads 2 \
  --resume "$tmp/b/r/ckpt-00000030.ct" >/dev/null 2>b.log
da=$(digest a/r/ckpt-00000060.ct)
db=$(digest b/r/ckpt-00000060.ct)
expect "resumed at 30 on 2 threads = straight on 1 (params_digest $da, $db)" \
  "[ -n '$da' ] && [ '$da' = '$db' ]"

# Bad configs.
fails_with "d_model not a multiple of 32" "d_model = 48: deformable_detr needs" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b1 --set model.d_model=48 --set model.heads=2
fails_with "n_levels out of range" "n_levels" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b2 --set model.n_levels=9
fails_with "box_refine with DETR" "box_refine" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b3 --set model.arch=detr --set model.box_refine=true
fails_with "a classification arch" "not a detection model" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b4 --set model.arch=vit
fails_with "focal_alpha above 1" "focal_alpha" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b5 --set train.focal_alpha=1.5
fails_with "n_points 0" "n_points" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b6 --set model.n_points=0
fails_with "lr_mult with a bad name" "lr_mult: the name 'sampling-offsets' holds '-'" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b7 --set optim.lr_mult=sampling-offsets:0.1
fails_with "lr_mult with a bad number" "lr_mult: 'backbone.0:0.1x': '0.1x' is not a finite number" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b8 --set optim.lr_mult=backbone.0:0.1x
fails_with "lr_mult negative" "the multiplier must not be negative" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b9 --set optim.lr_mult=backbone.0:-1
fails_with "lr_mult matching no parameter" "'sampling_offset_typo' is part of no trainable parameter" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b10 --set optim.lr_mult=sampling_offset_typo:0.1

if [ $fails -gt 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
