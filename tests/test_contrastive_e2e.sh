#!/usr/bin/env bash
# The contrastive (CLIP) use case through the program: a tiny CLIP trained
# on the generated captioned canvases (shapes, 32x32, 2x2 grid) learns (the
# training loss falls); eval's last line is JSON with recall@1/5/10 in both
# directions, on the split and on the held-out combinations, and the
# temperature; a run resumed from its middle checkpoint on 1 thread (the
# first on 2) ends with bit-identical parameters; AdamW's weight decay
# never touches logit_scale and the temperature is clamped to [1, 100]
# after every step; zeroshot classifies PNGs (a canvas as it is, a smaller
# image as an item placed on canvases); eval --zeroshot on IDX and PNG
# folders; inspect and export work on its checkpoints; bad configs and
# prompts give clear errors; source = files reads the captions files;
# 2 MPI ranks of batch 8 follow one process of batch 16 (the same global
# batch) to a stated tolerance.
#
# usage: test_contrastive_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/e2e_lib.sh"
cd "$tmp" || exit 1

: >empty.ini
sets=(run.task=contrastive run.dir="$tmp/runs" run.name=clip run.seed=1
      data.source=toy data.toy_items=shapes data.toy_image_size=32 data.toy_grid=2
      data.toy_train=64 data.toy_val=16 data.toy_test=16 data.batch_size=16
      model.arch=vit model.patch=8 model.dim=32 model.depth=1 model.heads=2
      model.mlp_dim=64 model.embed_dim=16 model.text_width=32 model.text_layers=1
      model.text_heads=2 model.text_mlp=64 train.steps=40 schedule.warmup=4
      optim.lr=3e-3 train.log_every=4 train.eval_every=0 train.checkpoint_every=20)
args=()
for s in "${sets[@]}"; do args+=(--set "$s"); done
last=$("$ctrain" train empty.ini "${args[@]}" --threads 2 2>train.log | tail -n 1)
ckpt=$(jstr "$last" checkpoint)
expect "training writes a checkpoint" "[ -s '$ckpt' ]"
first_loss=$(head -n 1 runs/clip/metrics.jsonl | sed -n 's/.*"loss": \([-0-9.eE+]*\).*/\1/p')
last_loss=$(grep '"loss"' runs/clip/metrics.jsonl | tail -n 1 | sed -n 's/.*"loss": \([-0-9.eE+]*\).*/\1/p')
expect "the training loss falls ($first_loss -> $last_loss)" \
  "awk -v a='$first_loss' -v b='$last_loss' 'BEGIN { exit !(b + 0 < a - 0.3) }'"
out=$("$ctrain" eval "$ckpt" --split test | tail -n 1)
for key in r1_i2t r5_i2t r10_i2t r1_t2i r5_t2i r10_t2i r1_i2t_heldout r5_i2t_heldout \
  r10_i2t_heldout r1_t2i_heldout r5_t2i_heldout r10_t2i_heldout temperature heldout_images; do
  expect "eval prints $key" "[ -n \"\$(jnum '$out' $key)\" ]"
done
expect "eval counts the test images" "[ \"\$(jnum '$out' images)\" = 16 ]"
r1=$(jnum "$out" r1_i2t) r10=$(jnum "$out" r10_i2t)
expect "recall@1 <= recall@10 <= 1 ($r1, $r10)" "ge '$r10' '$r1' && ge 1 '$r10'"
expect "inspect names the task and open_clip's tensors" \
  "\"\$ctrain\" inspect '$ckpt' | grep -q 'task: contrastive' && \"\$ctrain\" inspect '$ckpt' | grep -q 'text_projection'"
"$ctrain" export "$ckpt" clip.safetensors >/dev/null 2>&1
expect "export writes the parameters" "[ -s clip.safetensors ] && grep -q logit_scale clip.safetensors"

# Exact resume: the run continued from its step-20 checkpoint, on one
# thread instead of two, ends where the uninterrupted one did.
cp -r runs/clip runs/half
rm runs/half/ckpt-00000040.ct
"$ctrain" train empty.ini "${args[@]}" --set run.name=half --resume auto \
  --threads 1 >/dev/null 2>resume.log
digest() { "$ctrain" inspect "$1" | tail -n 1 | sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'; }
a=$(digest runs/clip/ckpt-00000040.ct)
b=$(digest runs/half/ckpt-00000040.ct)
expect "resumed run is bit-identical ($a = $b)" "[ -n '$a' ] && [ '$a' = '$b' ]"

# logit_scale: AdamW's decay (p *= 1 - lr wd, here 0.5 a step) would take
# the temperature exp(s) from 14.3 to about 1 in 5 steps; it is not decayed.
t=$("$ctrain" train empty.ini "${args[@]}" --set run.name=wd --set optim.optimizer=adamw \
  --set optim.weight_decay=500 --set optim.lr=1e-3 --set schedule.kind=constant \
  --set schedule.warmup=0 --set train.steps=5 2>/dev/null | tail -n 1)
temp=$(jnum "$t" temperature)
expect "weight decay leaves logit_scale alone (temperature $temp)" \
  "ge '${temp:-0}' 14 && ge 14.6 '${temp:-99}'"
# The clamp: a learning rate of 1 moves s by about 1 a step (Adam), far
# past a bound; after every step s is clamped, so exp(s) ends at 1 or 100.
t=$("$ctrain" train empty.ini "${args[@]}" --set run.name=clamp --set optim.lr=1 \
  --set schedule.kind=constant --set schedule.warmup=0 --set optim.clip_norm=0 \
  --set train.steps=12 2>/dev/null | tail -n 1)
temp=$(jnum "$t" temperature)
expect "the temperature is clamped to [1, 100] ($temp)" \
  "awk -v t='${temp:-0}' 'BEGIN { exit !(t == 1 || (t > 99.9999 && t < 100.0001)) }'"

# zeroshot: a canvas of the model's size as it is; a 16x16 image is an item
# placed in each of the 4 cells.
"$ctrain" toy captions --out cap --size 32 --grid 2 --count 24 --val 8 --test 8 --seed 3 >/dev/null
"$ctrain" toy images --out png --format png --size 16 --classes 3 --train 3 --test 6 >/dev/null
"$ctrain" toy images --out idx --format idx --size 16 --classes 3 --train 3 --test 6 >/dev/null
labels="square,disk,triangle,plus,ring,bar"
out=$("$ctrain" zeroshot "$ckpt" --labels "$labels" cap/test/000001.png png/test/square/*.png --top 3)
expect "zeroshot prints the top 3 classes of each image" \
  "[ \$(grep -c '^[^:]*\\.png: [a-z]* [01]\\.[0-9]*, [a-z]* [01]\\.[0-9]*, [a-z]* [01]\\.[0-9]*\$' <<<\"\$out\") = 3 ]"
"$ctrain" zeroshot "$ckpt" --labels "$labels" cap/test/000001.png png/test/square/000003.png \
  --out panels.png >/dev/null
expect "zeroshot --out draws the panels" "[ -s panels.png ] && head -c 8 panels.png | grep -q PNG"
out=$("$ctrain" zeroshot "$ckpt" --labels "disk,ring" --template "a red {}" --template "there is a blue {}" cap/test/000002.png)
expect "zeroshot takes templates" "grep -q '^cap/test/000002.png: [a-z]* [01]\\.[0-9]*, [a-z]* [01]\\.[0-9]*\$' <<<\"\$out\""
# "{colour}": an image of the model's size has one view, so the template
# stands for one prompt per palette colour, ensembled; a gray item is drawn
# in each colour (6 views) and each view meets its colour's prompts.
one=$("$ctrain" zeroshot "$ckpt" --labels "$labels" --template "a {colour} {}" cap/test/000002.png)
six=$("$ctrain" zeroshot "$ckpt" --labels "$labels" --template "a red {}" --template "a green {}" \
  --template "a blue {}" --template "a yellow {}" --template "a purple {}" --template "a white {}" \
  cap/test/000002.png)
expect "'{colour}' ensembles the palette's colours ($one)" "[ -n '$one' ] && [ '$one' = '$six' ]"
views=$("$ctrain" eval "$ckpt" --zeroshot idx --labels "square,bar,bar" 2>&1 | grep -c '(6 views per image)')
expect "a gray item is seen in the 6 palette colours" "[ '$views' = 1 ]"
fails_with "a word outside the vocabulary is named" "the word 'sneaker'" \
  "$ctrain" zeroshot "$ckpt" --labels "disk,sneaker" cap/test/000001.png
fails_with "the toy images' own class names are checked too" "the word 'hbar'" \
  "$ctrain" eval "$ckpt" --zeroshot png/test
out=$("$ctrain" eval "$ckpt" --zeroshot png/test --labels "bar,square,bar" | tail -n 1)
acc=$(jnum "$out" accuracy)
expect "eval --zeroshot on PNG folders ($acc)" \
  "[ \"\$(jnum '$out' images)\" = 6 ] && ge '${acc:-2}' 0 && ge 1 '${acc:-2}'"
out=$("$ctrain" eval "$ckpt" --zeroshot idx --labels "square,bar,bar" --template "a {}, white" | tail -n 1)
expect "eval --zeroshot on IDX files" "[ \"\$(jnum '$out' images)\" = 6 ] && [ -n \"\$(jnum '$out' top5)\" ]"
"$ctrain" toy images --out cif --format cifar10 --size 32 --classes 3 --train 3 --test 6 >/dev/null
out=$("$ctrain" eval "$ckpt" --zeroshot cif --labels "square,bar,bar" | tail -n 1)
expect "eval --zeroshot on CIFAR-10 binary files" "[ \"\$(jnum '$out' images)\" = 6 ]"
fails_with "eval --zeroshot wants as many labels as classes" "2 labels given" \
  "$ctrain" eval "$ckpt" --zeroshot idx --labels "square,bar"
fails_with "eval --zeroshot of a missing folder" "nowhere is not a folder" \
  "$ctrain" eval "$ckpt" --zeroshot nowhere
"$ctrain" zeroshot "$ckpt" --labels "disk,,ring" x.png >/dev/null 2>err.txt
rc=$?
expect "an empty label is a usage error (exit $rc)" "[ $rc = 2 ] && grep -q 'empty name' err.txt"
fails_with "one label is not a classifier" "at least two classes" \
  "$ctrain" zeroshot "$ckpt" --labels "disk" cap/test/000001.png
fails_with "zeroshot of a missing image" "nothing.png" \
  "$ctrain" zeroshot "$ckpt" --labels "disk,ring" nothing.png
"$ctrain" zeroshot "$ckpt" x.png >/dev/null 2>err.txt
rc=$?
expect "zeroshot without --labels is a usage error (exit $rc)" "[ $rc = 2 ] && grep -q 'needs --labels' err.txt"
"$ctrain" eval "$ckpt" --labels "a,b" >/dev/null 2>err.txt
rc=$?
expect "--labels without --zeroshot is a usage error (exit $rc)" "[ $rc = 2 ] && grep -q 'go with --zeroshot' err.txt"

# source = files: the generated set written as captions files.
"$ctrain" train empty.ini "${args[@]}" --set run.name=files --set data.source=files \
  --set data.captions_train=cap/train.json --set data.captions_train_images=cap/train \
  --set data.captions_val=cap/val.json --set data.captions_val_images=cap/val \
  --set data.batch_size=8 --set train.steps=2 --set schedule.warmup=0 >files.out 2>files.log
expect "source = files trains and evaluates" "tail -n 1 files.out | grep -q '\"r1_i2t\"'"
# A model trained on files converts and resizes any image (no canvases).
out=$("$ctrain" zeroshot runs/files/ckpt-00000002.ct --labels "$labels" png/test/square/*.png cap/test/000001.png 2>&1)
expect "zeroshot of a files model resizes 16x16 gray PNGs" \
  "[ \$(grep -c '\\.png: [a-z]* [01]\\.[0-9]*,' <<<\"\$out\") = 3 ]"

# bad configs
fails_with "a classification-only arch is refused" "not a contrastive model" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b1 --set model.arch=swin
fails_with "a bpe tokenizer is refused" "tokenizer = bpe" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b2 --set data.tokenizer=bpe
fails_with "text_width must split into heads" "text_width = 33 is not a multiple" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b3 --set model.text_width=33
fails_with "a batch larger than the training images" "batch_size = 100 is larger" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b4 --set data.batch_size=100
fails_with "a context too short for a word" "context_length = 2" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b5 --set model.context_length=2
fails_with "toy_max_objects out of range" "toy_max_objects" \
  "$ctrain" train empty.ini "${args[@]}" --set run.name=b6 --set data.toy_max_objects=5

# Data-parallel: each rank's features are gathered with their gradient, so
# 2 ranks of batch 8 train on the global batch of one process of batch 16
# (the same 16 images and captions per step). Not its bits (the features'
# gradients are summed over ranks and the encoders' parameter gradients
# over two half batches); the losses of 6 steps agree to 1e-4 relative.
if ! "$ctrain" info | grep -q '^MPI: none'; then
  . "$here/mpi_env.sh"
  if mpi_env >/dev/null; then
    # Under AddressSanitizer: Open MPI's own allocations, never freed, are
    # suppressed (as in tests/test_mpi.sh; naming them needs the slow unwinder).
    export LSAN_OPTIONS="suppressions=$here/lsan_mpi.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
    mpi=(--set train.steps=6 --set schedule.warmup=2 --set train.log_every=1
         --set train.checkpoint_every=6)
    "$launcher" -np 2 --bind-to none "$ctrain" train empty.ini "${args[@]}" "${mpi[@]}" \
      --set data.batch_size=8 --set run.name=np2 --threads 1 >np2.out 2>mpi.log
    rc=$?
    expect "mpirun -np 2 trains (exit $rc)" "[ $rc = 0 ]"
    "$ctrain" train empty.ini "${args[@]}" "${mpi[@]}" --set data.batch_size=16 \
      --set run.name=one16 --threads 1 >/dev/null 2>&1
    losses() { sed -n 's/.*"loss": \([-0-9.eE+]*\).*/\1/p' "$1" | head -n 6; }
    losses runs/np2/metrics.jsonl >np2.loss
    losses runs/one16/metrics.jsonl >one16.loss
    worst=$(paste np2.loss one16.loss | awk '{ d = $1 - $2; if (d < 0) d = -d; d /= ($2 < 0 ? -$2 : $2); if (d > m) m = d } END { printf "%.2g", m }')
    expect "mpirun -np 2 (batch 8) follows one process of batch 16 (6 losses, worst relative difference $worst <= 1e-4)" \
      "[ \$(wc -l <np2.loss) = 6 ] && [ \$(wc -l <one16.loss) = 6 ] && ge 1e-4 '$worst'"
    fails_with "a time budget under mpirun is refused" "max_minutes" \
      "$launcher" -np 2 --bind-to none "$ctrain" train empty.ini "${args[@]}" \
      --set run.name=np2b --set train.max_minutes=1 --threads 1
  fi
fi

if [ $fails -gt 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
