#!/usr/bin/env bash
# CvT ([model] arch = cvt) through the program, on generated shape images
# (`ctrain toy images`: IDX files to train on, whose classes are named 0..3,
# and PNGs to classify):
# - a tiny two-stage CvT (dw_bn projection, class token in the last stage)
#   learns well above chance; eval --split test; classify prints the top
#   classes and draws the attention rollout (--attention);
# - analyze writes the attention distances (one row per head and block,
#   within the bounds the token places allow) and the rollout figure, and
#   no position-embedding files (CvT has none);
# - export writes the reference's names (BatchNorm running statistics
#   included), forward runs the checkpoint, and forward --weights with the
#   export gives the same logits bit for bit;
# - resume from a mid-run checkpoint, on 2 threads, ends with the parameters
#   and metrics.jsonl of the run never stopped on 1 thread;
# - the linear projection (the ablation) trains, has no convolutions, and
#   analyze and classify --attention work on it;
# - bad cvt_ keys: a clear error naming the key, exit 1, no run folder.
#
# usage: test_cvt_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
cd "$tmp" || exit 1
export OMP_WAIT_POLICY=passive

"$ctrain" toy images --out idx --format idx --size 16 --classes 4 --train 1600 --test 200 >/dev/null
"$ctrain" toy images --out png --size 16 --classes 4 --train 8 --test 8 >/dev/null
hbar=png/test/hbar/$(ls png/test/hbar | head -n 1)
vbar=png/test/vbar/$(ls png/test/vbar | head -n 1)
: >empty.ini

cvt=(
  run.task=classification run.dir="$tmp/runs" run.seed=3
  data.source=files data.image_format=idx data.image_dir=idx
  data.val_holdout=200 data.batch_size=32 data.crop_padding=1
  model.arch=cvt model.cvt_dims=16,32 model.cvt_depths=1,1
  model.cvt_heads=1,2 model.cvt_embed_kernel=3,3 model.cvt_embed_stride=2,2
  model.cvt_embed_padding=1,1 model.cvt_mlp_ratio=2 model.drop_path=0.1
  model.dropout=0.1 optim.lr=2e-3 schedule.warmup=20 train.epochs=0
  train.log_every=10 train.eval_every=0 train.checkpoint_every=20
)
train() {  # train NAME [KEY=VALUE...] [-- OPTION...]: stdout's last line
  local name=$1
  shift
  local sets_=() opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do sets_+=("$1"); shift; done
  [ $# -gt 0 ] && shift && opts=("$@")
  mapfile -t args < <(sets "${cvt[@]}" run.name="$name" "${sets_[@]}")
  "$ctrain" train empty.ini "${args[@]}" "${opts[@]}" 2>"$name.err" | tail -n 1
}
digest() {
  "$ctrain" inspect "$1" 2>/dev/null | tail -n 1 |
    sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'
}

# ---- a tiny CvT learns ----------------------------------------------------------
last=$(train learn model.dropout=0 model.drop_path=0 data.crop_padding=0 \
  train.steps=300 train.checkpoint_every=100)
acc=$(jnum "$last" accuracy)
expect "cvt learns (val accuracy $acc >= 0.7, chance 0.25)" "ge '${acc:-0}' 0.7"
ckpt=$(jstr "$last" checkpoint)
out=$("$ctrain" eval "$ckpt" --split test)
acc=$(jnum "$(tail -n 1 <<<"$out")" accuracy)
expect "eval --split test: accuracy $acc >= 0.7" "ge '${acc:-0}' 0.7"
out=$("$ctrain" classify "$ckpt" "$hbar" "$vbar" --top 2)
expect "classify prints the top classes" \
  "[ \$(grep -c '^png/test/.*: [0-9] 0\.[0-9]*, [0-9] 0\.' <<<\"\$out\") -eq 2 ]"
out=$("$ctrain" classify "$ckpt" "$hbar" "$vbar" --attention att.png 2>att.err)
expect "classify --attention draws the rollout" \
  "[ -s att.png ] && grep -q 'attention maps: att.png' <<<\"\$out\""

# ---- analyze -----------------------------------------------------------------------
# in_range FILE LAYER MAX: every distance of LAYER in the CSV lies in [0, MAX].
in_range() {
  awk -F, -v l="$2" -v d="$3" 'NR > 1 && $1 == l { n++; if (!($3 >= 0 && $3 <= d)) bad++ }
    END { exit !(n > 0 && !bad) }' "$1"
}
"$ctrain" analyze "$ckpt" --images 24 --out an >an.out 2>an.err
expect "analyze cvt: distance chart, CSV, JSON, rollout; no position embeddings" \
  "[ -s an/attention_distance.png ] && [ -s an/attention_distance.csv ] &&
   [ -s an/attention_distance.json ] && [ -s an/rollout.png ] &&
   [ ! -e an/position_embedding.png ] && [ ! -e an/position_embedding.csv ]"
expect "analyze cvt: the JSON names the arch and the 24 images" \
  "grep -q '\"arch\": \"cvt\"' an/attention_distance.json &&
   grep -q '\"images\": 24' an/attention_distance.json"
expect "analyze cvt: 2 layers (1 + 1 blocks) of 1 and 2 heads in the CSV" \
  "[ \$(grep -c '^1,' an/attention_distance.csv) -eq 1 ] &&
   [ \$(grep -c '^2,' an/attention_distance.csv) -eq 2 ]"
# Stage 0: queries of the 8x8 map at 2r + 1, keys of the 4x4 stride-2 map
# at 4r' + 1 (pixels): at most 14 sqrt(2) = 19.80 apart. Stage 1: queries
# at 4r + 2, keys at 8r' + 2: at most 12 sqrt(2) = 16.97.
expect "analyze cvt: distances within what the token places allow" \
  "in_range an/attention_distance.csv 1 19.80 && in_range an/attention_distance.csv 2 16.98"

# ---- export and forward ------------------------------------------------------------
"$ctrain" export "$ckpt" cvt.safetensors >/dev/null 2>export.err ||
  bad "export: $(tail -n 2 export.err)"
header=$(head -c 65536 cvt.safetensors | tr -d '\0')
for name in stage0.patch_embed.proj.weight stage0.patch_embed.norm.bias \
  stage0.blocks.0.attn.conv_proj_q.conv.weight \
  stage0.blocks.0.attn.conv_proj_k.bn.running_mean \
  stage0.blocks.0.attn.conv_proj_v.bn.running_var \
  stage0.blocks.0.attn.proj_q.bias stage1.cls_token \
  stage1.blocks.0.mlp.fc2.weight norm.weight head.bias; do
  expect "export has $name" 'grep -q "\"$name\"" <<<"$header"'
done
expect "no class token in stage 0" '! grep -q "\"stage0.cls_token\"" <<<"$header"'
# One gray 16x16 image: an 8-byte header length, the JSON header, 256 floats.
h='{"images":{"dtype":"F32","shape":[1,1,16,16],"data_offsets":[0,1024]}}'
{
  printf "\\x$(printf %02x ${#h})\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
  printf '%s' "$h"
  head -c 1024 /dev/zero | tr '\0' '\077'
} >in.safetensors
"$ctrain" forward "$ckpt" in.safetensors own.safetensors >/dev/null 2>own.err
expect "forward writes the logits" "[ -s own.safetensors ] && grep -q logits own.safetensors"
"$ctrain" forward "$ckpt" in.safetensors same.safetensors --weights cvt.safetensors \
  >/dev/null 2>same.err
expect "forward --weights with the export: the same logits" \
  "cmp -s own.safetensors same.safetensors && ! grep -q warning same.err"

# ---- exact resume ------------------------------------------------------------------
train ref train.steps=40 -- --threads 1 >/dev/null
cp -r runs/ref runs_copy && mkdir -p int && mv runs_copy int/ref
rm int/ref/ckpt-00000040.ct
mapfile -t args < <(sets "${cvt[@]}" run.name=ref run.dir="$tmp/int" train.steps=40)
"$ctrain" train empty.ini "${args[@]}" --resume auto --threads 2 >/dev/null 2>resume.err
expect "the resumed run continues from step 20" \
  "grep -q 'resuming from .*ckpt-00000020.ct' resume.err"
d_ref=$(digest runs/ref/ckpt-00000040.ct)
d_int=$(digest int/ref/ckpt-00000040.ct)
expect "resumed on 2 threads: the parameters of the run never stopped ($d_ref)" \
  "[ -n '$d_ref' ] && [ '$d_ref' = '$d_int' ]"
expect "resumed: metrics.jsonl byte for byte" \
  "cmp -s runs/ref/metrics.jsonl int/ref/metrics.jsonl"

# ---- the linear projection ----------------------------------------------------------
last=$(train linear model.cvt_projection=linear model.cvt_cls_token=false \
  model.cvt_scale=head train.steps=30)
ckpt=$(jstr "$last" checkpoint)
"$ctrain" export "$ckpt" linear.safetensors >/dev/null 2>&1
header=$(head -c 65536 linear.safetensors | tr -d '\0')
expect "linear projection: trains, proj_q but no conv_proj, no cls_token" \
  "[ -n '$ckpt' ] && grep -q 'stage1.blocks.0.attn.proj_q.weight' <<<\"\$header\" &&
   ! grep -q conv_proj <<<\"\$header\" && ! grep -q cls_token <<<\"\$header\""
# Keys are the map's tokens: stage 0's span the 8x8 map of 2-pixel tokens
# (at most 14 sqrt(2) = 19.80 apart), stage 1's the 4x4 map (16.97).
"$ctrain" analyze "$ckpt" --images 8 --split test --out an_linear >/dev/null 2>&1
"$ctrain" classify "$ckpt" "$hbar" --attention att_linear.png >/dev/null 2>&1
expect "linear projection: analyze and classify --attention" \
  "[ -s an_linear/rollout.png ] && [ -s att_linear.png ] &&
   in_range an_linear/attention_distance.csv 1 19.80 &&
   in_range an_linear/attention_distance.csv 2 16.98"

# ---- bad configs ----------------------------------------------------------------------
refused() {  # refused DESC PATTERN KEY=VALUE...
  local desc=$1 pattern=$2
  shift 2
  mapfile -t args < <(sets "${cvt[@]}" run.name=bad train.steps=2 "$@")
  fails_with "$desc" "$pattern" "$ctrain" train empty.ini "${args[@]}"
  [ -e runs/bad ] && bad "$desc: a run folder was left" && rm -rf runs/bad
}
refused "a list with a word" "\[model\] cvt_dims = '16,x' (--set): want 1 to 4" \
  model.cvt_dims=16,x
refused "five stages" "\[model\] cvt_depths = '1,1,1,1,1' (--set): want 1 to 4" \
  model.cvt_depths=1,1,1,1,1
refused "lists of different lengths" "cvt_heads = 1 has 1 stages, cvt_dims = 16,32 has 2" \
  model.cvt_heads=1
refused "a width the heads do not divide" "stage 1's width 32 is not a multiple of its 3 heads" \
  model.cvt_heads=1,3
refused "a zero stride" "cvt_embed_stride = '2,0' (--set): want .* >= 1" \
  model.cvt_embed_stride=2,0
refused "an embedding larger than the map" "\[model\] cvt: stage 1's embedding (kernel 11, padding 1) does not fit its 8x8 input" \
  model.cvt_embed_kernel=3,11
refused "an unknown projection" "cvt_projection" model.cvt_projection=avg

[ $fails -eq 0 ] && echo "all cvt e2e checks passed"
exit $((fails > 0))
