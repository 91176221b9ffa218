#!/usr/bin/env bash
# The image classification use case end to end, on generated shape images
# written in each format users' data comes in (`ctrain toy images`):
# - a tiny ViT learns a PNG-folder set well above chance (4 classes);
# - CIFAR-10 binary files train and evaluate (eval --split test JSON);
# - IDX files train a small ResNet, which then teaches a DeiT (hard
#   distillation) through [model] teacher;
# - classify prints top classes and writes the attention-rollout PNG; the
#   run folder has the confusion matrix PNG; eval prints the confusion matrix;
# - bad input of each kind: a clear error naming the file, exit 1.
#
# usage: test_classify_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
cd "$tmp" || exit 1

"$ctrain" toy images --out png --size 16 --classes 4 --train 1600 --test 200 >/dev/null
"$ctrain" toy images --out cifar --format cifar10 --classes 4 --train 400 --test 100 >/dev/null
"$ctrain" toy images --out idx --format idx --size 16 --classes 4 --train 1600 --test 200 >/dev/null
hbar=png/test/hbar/$(ls png/test/hbar | head -n 1)
vbar=png/test/vbar/$(ls png/test/vbar | head -n 1)
expect "toy images: PNG folders" "[ -d png/train/hbar ] && [ -f '$hbar' ] && [ -f '$vbar' ]"
expect "toy images: CIFAR-10 files" "[ -f cifar/data_batch_5.bin ] && [ -f cifar/test_batch.bin ]"
expect "toy images: IDX files" "[ -f idx/train-images-idx3-ubyte ] && [ -f idx/t10k-labels-idx1-ubyte ]"
fails_with "toy images refuses to overwrite" "already exists" \
  "$ctrain" toy images --out idx --format idx --size 16 --train 10 --test 10

vit=(
  run.task=classification run.dir="$tmp/runs" run.seed=1
  data.source=files data.batch_size=64 data.prefetch=true
  model.arch=vit model.patch=4 model.dim=32 model.depth=2 model.heads=2
  model.mlp_dim=64 model.drop_path=0 model.dropout=0
  optim.lr=2e-3 schedule.warmup=20 train.epochs=0 train.log_every=20
  train.checkpoint_every=1000 train.eval_every=0
)
empty=$tmp/empty.ini
: >"$empty"

# ---- PNG folders: a tiny ViT learns ---------------------------------------
mapfile -t args < <(sets "${vit[@]}" run.name=png data.image_format=png \
  data.png_train=png/train data.png_test=png/test data.channels=1 \
  data.val_holdout=200 train.steps=250)
last=$("$ctrain" train "$empty" "${args[@]}" 2>"$tmp/train.log" | tail -n 1)
acc=$(jnum "$last" accuracy)
expect "vit on PNG folders learns (val accuracy $acc >= 0.8, chance 0.25)" "ge '${acc:-0}' 0.8"
ckpt=$(jstr "$last" checkpoint)
expect "run folder: confusion matrix PNG, plots" \
  "[ -s runs/png/confusion_val.png ] && [ -s runs/png/loss.png ]"
expect "progress counts images" "grep -q 'img/s' '$tmp/train.log'"
out=$("$ctrain" eval "$ckpt" --split test)
acc=$(jnum "$(tail -n 1 <<<"$out")" accuracy)
expect "eval --split test: accuracy $acc >= 0.8 and top5" \
  "ge '${acc:-0}' 0.8 && grep -q '\"top5\"' <<<\"\$out\""
expect "eval prints the confusion matrix" "grep -q 'confusion matrix' <<<\"\$out\""
# Test folders are matched to the model's classes by name: without the
# first one, the others keep their labels (they used to shift by one and
# score garbage), and the missing class is said; an unknown folder is an
# error naming it.
first=$(ls png/test | head -n 1)
mv "png/test/$first" "png/aside_$first"
out=$("$ctrain" eval "$ckpt" --split test 2>"$tmp/eval.err")
acc=$(jnum "$(tail -n 1 <<<"$out")" accuracy)
expect "eval --split test without the '$first' folder: accuracy $acc >= 0.8" \
  "ge '${acc:-0}' 0.8 && [ '$(jnum "$(tail -n 1 <<<"$out")" images)' = 150 ]"
expect "the missing test folder is said" \
  "grep -q 'png/test has no folder for 1 of the model.s 4 classes' '$tmp/eval.err'"
mkdir png/test/zebra && cp "$hbar" png/test/zebra/
fails_with "a test folder the model has no class of" \
  "png/test/zebra: a class folder the model has no class of" \
  "$ctrain" eval "$ckpt" --split test
rm -r png/test/zebra
mv "png/aside_$first" "png/test/$first"
out=$("$ctrain" classify "$ckpt" "$hbar" "$vbar" --top 2 --attention att.png)
expect "classify prints the top classes" \
  "[ \$(grep -c '^png/test/.*: [a-z]* 0\.[0-9]*, [a-z]* 0\.' <<<\"\$out\") -eq 2 ]"
expect "classify --attention writes a PNG" "[ -s att.png ] && head -c 8 att.png | grep -q PNG"

# ---- CIFAR-10 binary files: train and evaluate ---------------------------------
# A long class name (batches.meta.txt) is printed whole in the confusion
# matrix's rows (it used to be cut to 9 characters).
printf 'horizontal_bar_long_name\nb\nc\nd\ne\nf\ng\nh\ni\nj\n' >cifar/batches.meta.txt
mapfile -t args < <(sets "${vit[@]}" run.name=cifar data.image_format=cifar10 \
  data.image_dir=cifar data.val_holdout=0 model.patch=8 train.steps=60)
last=$("$ctrain" train "$empty" "${args[@]}" 2>/dev/null | tail -n 1)
ckpt=$(jstr "$last" checkpoint)
full=$("$ctrain" eval "$ckpt" --split test)
expect "eval prints a long class name whole in the confusion matrix" \
  "grep -q '^ 0 horizontal_bar_long_name  *[0-9]' <<<\"\$full\""
out=$(tail -n 1 <<<"$full")
expect "CIFAR-10 files: train and eval (test images $(jnum "$out" images))" \
  "[ '$(jnum "$out" images)' = 100 ] && ge '$(jnum "$out" accuracy)' 0.3"

# ---- IDX: a ResNet teacher, then DeiT distilled from it ---------------------------
mapfile -t args < <(sets "${vit[@]}" run.name=resnet data.image_format=idx \
  data.image_dir=idx data.val_holdout=200 model.arch=resnet model.width=8 \
  model.stages=2 model.blocks=1 train.steps=120 optim.lr=3e-3)
last=$("$ctrain" train "$empty" "${args[@]}" 2>/dev/null | tail -n 1)
teacher=$(jstr "$last" checkpoint)
acc=$(jnum "$last" accuracy)
expect "resnet on IDX files learns (val accuracy $acc >= 0.6)" "ge '${acc:-0}' 0.6"
fails_with "classify --attention on a ResNet is an error" "ViT, DeiT, Swin or CvT" \
  "$ctrain" classify "$teacher" "$hbar" --attention x.png
mapfile -t args < <(sets "${vit[@]}" run.name=deit data.image_format=idx \
  data.image_dir=idx data.val_holdout=200 model.arch=deit \
  model.teacher="$teacher" train.distillation=hard train.steps=120)
last=$("$ctrain" train "$empty" "${args[@]}" 2>/dev/null | tail -n 1)
acc=$(jnum "$last" accuracy)
expect "deit distilled from the resnet learns (val accuracy $acc >= 0.5)" "ge '${acc:-0}' 0.5"
deit=$(jstr "$last" checkpoint)
expect "deit checkpoint has head_dist" "\"$ctrain\" inspect '$deit' | grep -q head_dist"

# ---- the inverse_sqrt schedule scales by a ViT's width, model.dim ------------------
mapfile -t args < <(sets run.task=classification run.dir="$tmp/runs" \
  run.name=isqrt data.source=toy data.toy_train=64 data.toy_val=16 \
  data.toy_test=16 data.batch_size=16 model.dim=64 model.depth=1 model.heads=2 \
  model.mlp_dim=64 schedule.kind=inverse_sqrt schedule.warmup=1 optim.lr=1 \
  train.epochs=0 train.steps=2 train.log_every=1 train.eval_every=0)
"$ctrain" train "$empty" "${args[@]}" >/dev/null 2>"$tmp/isqrt.log"
lr=$(jnum "$(head -n 1 runs/isqrt/metrics.jsonl 2>/dev/null)" lr)
expect "inverse_sqrt: first lr ${lr:-none} = 1 * dim^-0.5 = 0.125 (dim 64)" \
  "[ '${lr:-}' = 0.125 ]"

# ---- bad input -------------------------------------------------------------------
mapfile -t base < <(sets "${vit[@]}" run.name=bad train.steps=5)
fails_with "missing image_dir" "image_dir is not set" \
  "$ctrain" train "$empty" "${base[@]}" --set data.image_format=idx
fails_with "missing IDX files name the file" "nowhere/train-images-idx3-ubyte" \
  "$ctrain" train "$empty" "${base[@]}" --set data.image_format=idx --set data.image_dir=nowhere
mkdir -p trunc && head -c 5000 idx/train-images-idx3-ubyte >trunc/train-images-idx3-ubyte
cp idx/train-labels-idx1-ubyte trunc/
fails_with "truncated IDX file" "trunc/train-images-idx3-ubyte" \
  "$ctrain" train "$empty" "${base[@]}" --set data.image_format=idx --set data.image_dir=trunc
mkdir -p magic && cp idx/* magic/ && printf '\x00\x00\x09\x03' | dd of=magic/train-images-idx3-ubyte conv=notrunc 2>/dev/null
fails_with "wrong IDX magic" "magic" \
  "$ctrain" train "$empty" "${base[@]}" --set data.image_format=idx --set data.image_dir=magic
# An empty test split that validates was refused only at the final
# evaluation, after all the training.
mkdir -p empty_test && cp idx/train-* empty_test/ &&
  printf '\0\0\10\3\0\0\0\0\0\0\0\20\0\0\0\20' >empty_test/t10k-images-idx3-ubyte &&
  printf '\0\0\10\1\0\0\0\0' >empty_test/t10k-labels-idx1-ubyte
fails_with "an empty test split is refused before training" \
  "empty_test: the test split has no images" \
  "$ctrain" train "$empty" "${base[@]}" --set data.image_format=idx \
  --set data.image_dir=empty_test --set data.val_holdout=0
expect "... and no run folder was made" "[ ! -e runs/bad ]"
mkdir -p lab && cp cifar/* lab/ && printf '\x0c' | dd of=lab/data_batch_1.bin conv=notrunc 2>/dev/null
fails_with "CIFAR label out of range" "data_batch_1.bin" \
  "$ctrain" train "$empty" "${base[@]}" --set data.image_format=cifar10 --set data.image_dir=lab
mkdir -p badpng/train/a badpng/train/b && cp "$hbar" badpng/train/a/ \
  && echo "not a png" >badpng/train/b/broken.png
fails_with "unreadable PNG names the file" "broken.png" \
  "$ctrain" train "$empty" "${base[@]}" --set data.image_format=png \
  --set data.png_train=badpng/train --set data.channels=1 --set data.val_holdout=0 \
  --set data.png_test=badpng/train
fails_with "teacher that is not a checkpoint" "error: \[model\] teacher: nope\.ct: " \
  "$ctrain" train "$empty" "${base[@]}" --set data.image_format=idx \
  --set data.image_dir=idx --set data.val_holdout=200 --set model.arch=deit \
  --set model.teacher=nope.ct
fails_with "deit without a teacher" "needs \[model\] teacher" \
  "$ctrain" train "$empty" "${base[@]}" --set model.arch=deit
fails_with "bad channels value" "channels = 2" \
  "$ctrain" train "$empty" "${base[@]}" --set data.channels=2
fails_with "classify a missing image" "missing.png" "$ctrain" classify "$teacher" missing.png
fails_with "classify a non-PNG" "idx/t10k-labels-idx1-ubyte" "$ctrain" classify "$teacher" idx/t10k-labels-idx1-ubyte
fails_with "translate a classification checkpoint" "not a translation" "$ctrain" translate "$teacher" hello

if [ $fails -gt 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
