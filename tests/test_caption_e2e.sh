#!/usr/bin/env bash
# The captioning use case through the program: `ctrain toy captions` writes
# a generated set (train/val/test captions files with object boxes and
# heldout flags; seed 9 gives 4 training images whose captions all have
# 4-grams); a tiny Show-Attend-Tell captioner trained on those 4 images
# overfits them (decoded, not teacher-forced: BLEU-4 >= 50 evaluated
# on the same images); eval's last line is JSON with bleu1..bleu4,
# bleu4_heldout and grounding; caption prints a caption per PNG and draws
# the per-word attention panels; a run resumed from its middle checkpoint
# (on 1 thread, the first run on 2) ends with bit-identical parameters;
# encoder_init takes a classification ResNet; 2 MPI ranks give the bits of
# one process accumulating 2; bad input gives clear errors.
#
# usage: test_caption_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/e2e_lib.sh"
cd "$tmp" || exit 1

"$ctrain" toy captions --out cap --size 32 --grid 2 --count 4 --val 2 --test 6 --seed 9 >/dev/null
expect "toy captions writes three splits" \
  "[ -s cap/train.json ] && [ -s cap/val.json ] && [ -s cap/test/000005.png ]"
expect "the test split carries objects" "grep -q '\"objects\"' cap/test.json"
fails_with "toy captions refuses to overwrite" "already exists" \
  "$ctrain" toy captions --out cap --size 32 --grid 2 --count 4 --val 2 --test 6 --seed 9
"$ctrain" toy captions --out again --size 32 --grid 2 --count 4 --val 2 --test 6 --seed 9 >/dev/null
expect "toy captions is deterministic" "cmp -s cap/train.json again/train.json && cmp -s cap/test/000003.png again/test/000003.png"

: >empty.ini
sets=(run.task=captioning run.dir="$tmp/runs" run.name=cap run.seed=1
      data.source=files data.captions_train=cap/train.json data.captions_train_images=cap/train
      data.captions_val=cap/train.json data.captions_val_images=cap/train
      data.captions_test=cap/test.json data.captions_test_images=cap/test
      data.batch_size=8 model.width=8 model.stages=3 model.blocks=1 model.hidden=48
      model.embed_dim=32 model.attn_dim=32 model.dropout=0 train.steps=80
      schedule.warmup=10 optim.lr=3e-3 train.log_every=20 train.eval_every=0
      train.checkpoint_every=40 train.final_beam=1)
args=()
for s in "${sets[@]}"; do args+=(--set "$s"); done
last=$("$ctrain" train empty.ini "${args[@]}" --threads 2 2>train.log | tail -n 1)
bleu4=$(jnum "$last" bleu4)
expect "a tiny captioner overfits 4 images (BLEU-4 $bleu4 >= 50)" "ge '${bleu4:-0}' 50"
ckpt=$(jstr "$last" checkpoint)
out=$("$ctrain" eval "$ckpt" --split test | tail -n 1)
for key in bleu1 bleu2 bleu3 bleu4 bleu4_heldout grounding heldout_images; do
  expect "eval prints $key" "[ -n \"\$(jnum '$out' $key)\" ]"
done
expect "eval counts the test images" "[ \"\$(jnum '$out' images)\" = 6 ]"
out=$("$ctrain" caption "$ckpt" cap/train/000000.png cap/train/000001.png --attention att.png)
expect "caption prints a caption per image" \
  "[ \$(grep -c '^cap/train/00000[01].png: [a-z]' <<<\"\$out\") = 2 ]"
first=$(sed -n 's/^cap\/train\/000000.png: //p' <<<"$out")
expect "the caption is one of the image's references ('$first')" \
  "grep -q \"\\\"image_id\\\": 1, \\\"caption\\\": \\\"$first\\\"\" cap/train.json"
expect "caption --attention writes a PNG" "[ -s att.png ] && head -c 8 att.png | grep -q PNG"

# Exact resume: the run continued from its step-40 checkpoint, on one
# thread instead of two, ends where the uninterrupted one did.
cp -r runs/cap runs/half
rm runs/half/ckpt-00000080.ct
"$ctrain" train empty.ini "${args[@]}" --set run.name=half --resume auto \
  --threads 1 >/dev/null 2>resume.log
digest() { "$ctrain" inspect "$1" | tail -n 1 | sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'; }
a=$(digest runs/cap/ckpt-00000080.ct)
b=$(digest runs/half/ckpt-00000080.ct)
expect "resumed run is bit-identical ($a = $b)" "[ -n '$a' ] && [ '$a' = '$b' ]"

# [model] encoder_init: a classification ResNet of the same shape (RGB
# PNGs) initializes the encoder; another width is refused naming a tensor.
"$ctrain" toy images --out png --size 32 --classes 2 --train 8 --test 4 >/dev/null
"$ctrain" train empty.ini --set run.task=classification --set run.dir="$tmp/runs" \
  --set run.name=cls --set data.source=files --set data.image_format=png \
  --set data.png_train=png/train --set data.png_test=png/test --set data.channels=3 \
  --set data.val_holdout=0 --set data.batch_size=4 --set model.arch=resnet \
  --set model.width=8 --set model.stages=3 --set model.blocks=1 --set train.steps=2 \
  --set schedule.warmup=0 >/dev/null 2>cls.log
"$ctrain" train empty.ini "${args[@]}" --set run.name=init --set train.steps=1 \
  --set schedule.warmup=0 --set model.encoder_init=runs/cls >/dev/null 2>init.log
expect "encoder_init takes a classification run's ResNet" "grep -q 'encoder initialized from runs/cls' init.log"
fails_with "encoder_init of another width names a tensor" "conv1.weight has another shape" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b6 --set model.width=16 \
  --set model.encoder_init=runs/cls

# Data-parallel: 2 ranks of one micro-batch each end with the bits of one
# process accumulating 2 (dropout on, so its masks are keyed the same).
if ! "$ctrain" info | grep -q '^MPI: none'; then
  . "$here/mpi_env.sh"
  if mpi_env >/dev/null; then
    mpi=(--set train.steps=6 --set schedule.warmup=2 --set train.checkpoint_every=6 --set model.dropout=0.2
         --set data.batch_size=4)
    "$launcher" -np 2 --bind-to none "$ctrain" train empty.ini "${args[@]}" "${mpi[@]}" \
      --set run.name=np2 --threads 1 >/dev/null 2>mpi.log
    "$ctrain" train empty.ini "${args[@]}" "${mpi[@]}" --set run.name=one2 \
      --set train.accum=2 --threads 1 >/dev/null 2>&1
    want=$(digest runs/one2/ckpt-00000006.ct)
    expect "mpirun -np 2 = one process with accum 2 (digest $want)" \
      "[ -n '$want' ] && [ '$(digest runs/np2/ckpt-00000006.ct)' = '$want' ]"
  fi
fi

# bad input
mkdir -p broken && cp -r cap/train broken/ && printf '{"images": [{"id": 1,}' >broken/train.json
fails_with "malformed captions JSON names the file and place" "broken/train.json:1:" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b1 --set data.captions_train=broken/train.json
sed 's/"image_id": 2,/"image_id": 77,/' cap/train.json >unknown.json
fails_with "an unknown image_id is an error" "unknown.json:.*unknown image_id 77" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b2 --set data.captions_train=unknown.json
fails_with "missing captions keys" "captions_val" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b3 --set data.captions_val=
fails_with "a bpe tokenizer is refused" "tokenizer = bpe" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b4 --set data.tokenizer=bpe
fails_with "encoder_init must be a classification checkpoint" "not a classification resnet" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b5 --set model.encoder_init="$ckpt"
fails_with "caption a missing image" "nothing.png" "$ctrain" caption "$ckpt" nothing.png
fails_with "detect with a captioning checkpoint" "not a detection" \
  "$ctrain" detect "$ckpt" cap/train/000001.png

if [ $fails -gt 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
