#!/usr/bin/env bash
# The detection use case through the program: `ctrain toy detection` writes
# a generated set as COCO files; a tiny DETR trained on 8 of those images
# overfits them (matched boxes converge: mAP@0.5 >= 0.8 evaluated on the
# same images); eval prints map50/map; detect prints boxes and writes a PNG;
# bad input gives clear errors.
#
# usage: test_detect_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
cd "$tmp" || exit 1

"$ctrain" toy detection --out det --size 32 --classes 2 --train 8 --val 4 >/dev/null
expect "toy detection writes COCO files" "[ -s det/train.json ] && [ -s det/val/000001.png ]"
fails_with "toy detection refuses to overwrite" "already exists" \
  "$ctrain" toy detection --out det --size 32 --classes 2 --train 8 --val 4
# The size options: their defaults spelled out give the same files; a set of
# many small objects keeps its sides; bad sizes are refused.
"$ctrain" toy detection --out same --size 32 --classes 2 --train 8 --val 4 \
  --min-size 8 --max-size 16 --objects 6 >/dev/null
expect "toy detection's default sizes spelled out: the same files" \
  "cmp -s det/train.json same/train.json && cmp -s det/val.json same/val.json && cmp -s det/train/000007.png same/train/000007.png"
"$ctrain" toy detection --out small --size 32 --classes 2 --train 20 --val 4 \
  --min-size 4 --max-size 6 --objects 12 >/dev/null
sides=$(grep -o '"bbox": *\[[^]]*\]' small/train.json | awk -F'[][,]' '{if ($4 + 0 > m) m = $4 + 0; if ($5 + 0 > m) m = $5 + 0; n++} END {print n, m}')
expect "a small-object set: many boxes of sides <= 6 ($sides)" \
  "[ \"\${sides%% *}\" -gt 60 ] && [ \"\${sides##* }\" -le 6 ]"
fails_with "toy detection refuses min > max size" "20..10" \
  "$ctrain" toy detection --out bad --min-size 20 --max-size 10

: >empty.ini
sets=(run.task=detection run.dir="$tmp/runs" run.name=detr run.seed=1
      data.source=files data.coco_train=det/train.json data.coco_train_images=det/train
      data.coco_val=det/train.json data.coco_val_images=det/train data.channels=1
      data.batch_size=8 model.d_model=32 model.heads=2 model.ff=64
      model.encoder_layers=1 model.decoder_layers=2 model.width=8 model.stages=2
      model.blocks=1 model.queries=8 model.dropout=0 train.steps=400
      schedule.warmup=20 optim.lr=1e-3 optim.clip_norm=1 train.log_every=100
      train.checkpoint_every=1000)
args=()
for s in "${sets[@]}"; do args+=(--set "$s"); done
last=$("$ctrain" train empty.ini "${args[@]}" 2>train.log | tail -n 1)
map50=$(jnum "$last" map50)
expect "a tiny DETR overfits 8 images (mAP@0.5 $map50 >= 0.8)" "ge '${map50:-0}' 0.8"
ckpt=$(jstr "$last" checkpoint)
out=$("$ctrain" eval "$ckpt" | tail -n 1)
expect "eval prints map50 and map" "[ -n \"\$(jnum '$out' map50)\" ] && [ -n \"\$(jnum '$out' map)\" ]"
expect "eval prints the small/medium/large split" \
  "[ -n \"\$(jnum '$out' map50_small)\" ] && [ -n \"\$(jnum '$out' map50_medium)\" ] && [ -n \"\$(jnum '$out' map_large)\" ]"
out=$("$ctrain" detect "$ckpt" det/train/*.png --out boxes.png --threshold 0.3)
expect "detect prints boxes" "grep -q '^det/train/[0-9]*.png: [a-z]* 0\.[0-9]* \[' <<<\"\$out\""
expect "detect writes a PNG" "[ -s boxes.png ] && head -c 8 boxes.png | grep -q PNG"

# bad input
mkdir -p broken && cp -r det/train broken/ && printf '{"images": [{"id": 1,}' >broken/train.json
fails_with "malformed COCO JSON names the file and place" "broken/train.json:1:" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b1 --set data.coco_train=broken/train.json
sed 's/"bbox": \[/"bbox": [900, /' det/train.json | sed 's/\(\[900, [0-9.]*\), [0-9.]*\]/\1]/' >outside.json
fails_with "a box outside its image is an error" "outside.json" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b2 --set data.coco_train=outside.json
fails_with "missing COCO keys" "coco_val" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b3 --set data.coco_val=
fails_with "a bad toy object size names its keys" "toy_min_object" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b4 --set data.source=toy \
  --set data.toy_image_size=32 --set data.toy_min_object=40
fails_with "detect a missing image" "nothing.png" "$ctrain" detect "$ckpt" nothing.png
fails_with "classify a detection checkpoint" "not a classification" \
  "$ctrain" classify "$ckpt" det/train/000001.png

if [ $fails -gt 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
