#!/usr/bin/env bash
# [model] arch = swin through the program, on the generated shape images
# (data.source = toy, and `ctrain toy images` PNGs for classify):
# - a tiny Swin (patch 2, two stages, window 4, shifted blocks) learns;
#   eval --split test prints JSON; classify prints classes and draws the
#   attention rollout; export has timm's names; forward writes the logits;
# - resume: a run stopped halfway and continued with --resume (dropout, drop
#   path, crops, flips and mixup on) ends with the bits of the run that
#   was never stopped;
# - bf16 precision trains; a Swin distills from a ResNet teacher on its
#   class head (hard and soft); under MPI (when built with it) 2 ranks give
#   the bits of one process with accum 2;
# - `ctrain analyze` on the Swin and on a tiny ViT: the figures and
#   numbers exist, every distance lies in [0, image diagonal]; a ResNet is
#   refused;
# - bad Swin configs are refused with a message naming the key.
#
# usage: test_swin_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
cd "$tmp" || exit 1
empty=$tmp/empty.ini
: >"$empty"
digest() {
  "$ctrain" inspect "$1" 2>/dev/null | tail -n 1 |
    sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'
}

"$ctrain" toy images --out png --size 16 --classes 4 --train 10 --test 20 >/dev/null
hbar=png/test/hbar/$(ls png/test/hbar | head -n 1)
vbar=png/test/vbar/$(ls png/test/vbar | head -n 1)

swin=(
  run.task=classification run.dir="$tmp/runs" run.seed=1
  data.source=toy data.toy_train=1600 data.toy_val=200 data.toy_test=200
  data.toy_image_size=16 data.toy_classes=4 data.batch_size=32
  model.arch=swin model.patch=2 model.dim=16 model.depths=2,2
  model.stage_heads=2,4 model.window=4 model.mlp_ratio=2 model.drop_path=0
  model.dropout=0 optim.lr=2e-3 schedule.warmup=20 train.epochs=0
  train.log_every=20 train.checkpoint_every=1000 train.eval_every=0
)

# ---- a tiny Swin learns; eval, classify, export, forward -------------------------
mapfile -t args < <(sets "${swin[@]}" run.name=swin train.steps=400)
last=$("$ctrain" train "$empty" "${args[@]}" 2>"$tmp/train.log" | tail -n 1)
acc=$(jnum "$last" accuracy)
expect "swin learns the shapes (val accuracy $acc >= 0.8, chance 0.25)" "ge '${acc:-0}' 0.8"
ckpt=$(jstr "$last" checkpoint)
out=$("$ctrain" eval "$ckpt" --split test)
acc=$(jnum "$(tail -n 1 <<<"$out")" accuracy)
expect "eval --split test: accuracy $acc >= 0.8, 200 images" \
  "ge '${acc:-0}' 0.8 && [ '$(jnum "$(tail -n 1 <<<"$out")" images)' = 200 ]"
out=$("$ctrain" classify "$ckpt" "$hbar" "$vbar" --top 2 --attention att.png)
expect "classify prints the top classes" \
  "[ \$(grep -c '^png/test/.*: [a-z]* 0\.[0-9]*, [a-z]* 0\.' <<<\"\$out\") -eq 2 ]"
expect "classify --attention draws the Swin's rollout" \
  "[ -s att.png ] && head -c 8 att.png | grep -q PNG"
"$ctrain" export "$ckpt" swin.safetensors >/dev/null
expect "export: timm's names (layers.1.downsample.reduction, relative_position_bias_table, head.fc)" \
  "grep -aq 'layers.1.downsample.reduction.weight' swin.safetensors &&
   grep -aq 'layers.0.blocks.1.attn.relative_position_bias_table' swin.safetensors &&
   grep -aq 'head.fc.weight' swin.safetensors"
# forward: two 16x16 gray images (an 8-byte header length, the JSON
# header, 512 floats of 3.0 = 0x40400000).
header='{"images":{"dtype":"F32","shape":[2,1,16,16],"data_offsets":[0,2048]}}'
{
  printf "\\x$(printf %02x ${#header})\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
  printf '%s' "$header"
  for _ in $(seq 512); do printf '\x00\x00\x40\x40'; done
} >in.safetensors
"$ctrain" forward "$ckpt" in.safetensors out.safetensors >/dev/null 2>"$tmp/forward.err"
expect "forward writes the logits (2, 4) $(head -c 200 "$tmp/forward.err")" \
  "grep -aq '\"logits\".*\"shape\": *\[2, *4\]' out.safetensors"

# ---- exact resume ------------------------------------------------------------------
resume=(run.seed=5 data.crop_padding=2 data.hflip=true data.mixup_alpha=0.8
  data.cutmix_alpha=1.0 data.mix_prob=0.5 model.dropout=0.1
  model.drop_path=0.2 model.attn_dropout=0.1 train.steps=40
  train.checkpoint_every=20 train.log_every=5)
mapfile -t args < <(sets "${swin[@]}" "${resume[@]}" run.name=whole)
"$ctrain" train "$empty" "${args[@]}" >/dev/null 2>&1
mapfile -t args < <(sets "${swin[@]}" "${resume[@]}" run.name=halves train.steps=20)
"$ctrain" train "$empty" "${args[@]}" --threads 1 >/dev/null 2>&1
mapfile -t args < <(sets "${swin[@]}" "${resume[@]}" run.name=halves)
"$ctrain" train "$empty" "${args[@]}" --resume auto --threads 2 >/dev/null 2>"$tmp/resume.log"
want=$(digest runs/whole/ckpt-00000040.ct)
got=$(digest runs/halves/ckpt-00000040.ct)
expect "resumed at step 20 (1 then 2 threads): the bits of the whole run ($got = $want)" \
  "[ -n '$want' ] && [ '$got' = '$want' ] && cmp -s runs/whole/metrics.jsonl runs/halves/metrics.jsonl"

# ---- bf16, distillation, MPI ------------------------------------------------------------
mapfile -t args < <(sets "${swin[@]}" run.name=bf16 train.steps=30 train.precision=bf16)
last=$("$ctrain" train "$empty" "${args[@]}" 2>"$tmp/bf16.log" | tail -n 1)
expect "bf16 precision trains (loss $(jnum "$last" loss))" \
  "grep -q 'bf16 products' '$tmp/bf16.log' && ge '$(jnum "$last" accuracy)' 0.25"
mapfile -t args < <(sets "${swin[@]}" run.name=resnet model.arch=resnet \
  model.width=8 model.stages=2 model.blocks=1 train.steps=150 optim.lr=3e-3)
last=$("$ctrain" train "$empty" "${args[@]}" 2>/dev/null | tail -n 1)
teacher=$(jstr "$last" checkpoint)
for kind in hard soft; do
  mapfile -t args < <(sets "${swin[@]}" run.name=student_$kind \
    model.teacher="$teacher" train.distillation=$kind train.distill_tau=2 \
    train.steps=200)
  last=$("$ctrain" train "$empty" "${args[@]}" 2>"$tmp/student.log" | tail -n 1)
  acc=$(jnum "$last" accuracy)
  expect "swin distilled ($kind) from a ResNet on its class head learns (val accuracy $acc >= 0.6)" \
    "grep -q 'ctrain: teacher' '$tmp/student.log' && ge '${acc:-0}' 0.6"
done
if ! "$ctrain" info | grep -q '^MPI: none'; then
  . "$here/mpi_env.sh"
  if mpi_env >/dev/null; then
    mpi=(train.steps=12 schedule.warmup=2 data.batch_size=16 model.dropout=0.1 model.drop_path=0.1
      train.checkpoint_every=12)
    mapfile -t args < <(sets "${swin[@]}" "${mpi[@]}" run.name=np2)
    "$launcher" -np 2 --bind-to none "$ctrain" train "$empty" "${args[@]}" --threads 1 >/dev/null 2>"$tmp/mpi.log"
    mapfile -t args < <(sets "${swin[@]}" "${mpi[@]}" run.name=one2 train.accum=2)
    "$ctrain" train "$empty" "${args[@]}" --threads 1 >/dev/null 2>&1
    want=$(digest runs/one2/ckpt-00000012.ct)
    expect "mpirun -np 2 = one process with accum 2 (digest $want)" \
      "[ -n '$want' ] && [ '$(digest runs/np2/ckpt-00000012.ct)' = '$want' ]"
  fi
fi

# ---- analyze ---------------------------------------------------------------------------
# in_range FILE DIAGONAL: every distance of the CSV lies in [0, DIAGONAL].
in_range() {
  awk -F, -v d="$2" 'NR > 1 { n++; if (!($3 >= 0 && $3 <= d)) bad++ }
    END { exit !(n > 0 && !bad) }' "$1"
}
out=$("$ctrain" analyze "$ckpt" --images 40 --out an_swin)
expect "analyze swin: distance chart, CSV, JSON, rollout; no position embeddings" \
  "[ -s an_swin/attention_distance.png ] && [ -s an_swin/attention_distance.csv ] &&
   [ -s an_swin/attention_distance.json ] && [ -s an_swin/rollout.png ] &&
   [ ! -e an_swin/position_embedding.png ]"
expect "analyze swin: 4 layers (2 + 2 blocks) of 2 and 4 heads in the CSV" \
  "[ \$(grep -c '^[12],' an_swin/attention_distance.csv) -eq 4 ] &&
   [ \$(grep -c '^[34],' an_swin/attention_distance.csv) -eq 8 ]"
expect "analyze swin: distances within [0, 22.6] (the 16x16 diagonal)" \
  "in_range an_swin/attention_distance.csv 22.628"
# Stage 1 (4x4 map of 4-pixel tokens, one window): a query's distance to
# any key is at most the 3x3-token diagonal, 4 * sqrt(18) = 16.97 px.
expect "analyze swin: stage 1 distances within its window (<= 16.98 px)" \
  "awk -F, 'NR > 1 && \$1 >= 3 && \$3 > 16.98 { bad = 1 } END { exit bad }' an_swin/attention_distance.csv"
mapfile -t args < <(sets "${swin[@]}" run.name=vit model.arch=vit model.patch=4 \
  model.dim=32 model.depth=2 model.heads=2 model.mlp_dim=64 train.steps=60)
vit=$(jstr "$("$ctrain" train "$empty" "${args[@]}" 2>/dev/null | tail -n 1)" checkpoint)
out=$("$ctrain" analyze "$vit" --images 20 --split test --out an_vit)
expect "analyze vit: distances, position-embedding similarity, rollout" \
  "[ -s an_vit/attention_distance.png ] && [ -s an_vit/position_embedding.png ] &&
   [ -s an_vit/rollout.png ] && in_range an_vit/attention_distance.csv 22.628 &&
   grep -q '\"images\": 20' an_vit/attention_distance.json"
# The 16 patches' similarity with themselves is 1.
expect "analyze vit: 16 x 16 patch pairs, self-similarity 1" \
  "[ \$(tail -n +2 an_vit/position_embedding.csv | wc -l) -eq 256 ] &&
   awk -F, 'NR > 1 && \$1 == \$3 && \$2 == \$4 && (\$5 < 0.99999 || \$5 > 1.00001) { bad = 1 } END { exit bad }' an_vit/position_embedding.csv"
fails_with "analyze a ResNet: refused" "resnet, which has no attention" \
  "$ctrain" analyze "$teacher" --out an_resnet
expect "... and nothing written" "[ ! -e an_resnet ]"
fails_with "classify --attention on a ResNet: refused" "ViT, DeiT, Swin or CvT" \
  "$ctrain" classify "$teacher" "$hbar" --attention x.png
"$ctrain" analyze "$ckpt" >/dev/null 2>"$tmp/err"
expect "analyze without --out: usage error" \
  "[ \$? -eq 2 ] || grep -q -- '--out DIR is needed' '$tmp/err'"

# ---- bad configs -------------------------------------------------------------------------
mapfile -t base < <(sets "${swin[@]}" run.name=bad train.steps=2)
fails_with "window not dividing the map" \
  "window = 3 does not divide stage 0's 8x8 token map" \
  "$ctrain" train "$empty" "${base[@]}" --set model.window=3
fails_with "heads not dividing a stage's width" \
  "stage 1's width 32 (dim = 16 doubled 1 times) is not a multiple of its 5 heads" \
  "$ctrain" train "$empty" "${base[@]}" --set model.stage_heads=2,5
fails_with "depths not a list of numbers" "\[model\] depths = '2,,2' (--set)" \
  "$ctrain" train "$empty" "${base[@]}" --set model.depths=2,,2
fails_with "heads for another number of stages" "give one number of heads per stage" \
  "$ctrain" train "$empty" "${base[@]}" --set model.stage_heads=2,4,8
fails_with "too many stages for the map" "stage 3 would halve the 1x1 token map (image 16x16, patch 4)" \
  "$ctrain" train "$empty" "${base[@]}" --set model.depths=1,1,1,1 \
  --set model.stage_heads=1,1,1,1 --set model.window=2 --set model.patch=4
fails_with "patch not dividing the image" "patch = 3 does not divide the 16x16 images" \
  "$ctrain" train "$empty" "${base[@]}" --set model.patch=3
expect "... and no run folder was made" "[ ! -e runs/bad ]"

if [ $fails -gt 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
