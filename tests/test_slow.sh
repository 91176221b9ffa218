#!/usr/bin/env bash
# Long trainings (suite 'slow', run with `meson test -C build --suite slow`):
# the figures the README reports, asserted.
#   toy:      configs/translate_toy.ini reaches >= 95% exact match on the
#             held-out validation sentences.
#   multi30k: configs/multi30k_de_en.ini (BPE, bf16, 20 epochs within a
#             36-minute budget: about 25 minutes on 2 cores) reaches corpus
#             BLEU >= 38 on test_2016_flickr: issue 20's goal (measured:
#             40.07 after the 4540 steps, 26 minutes in all; 39.97 in 18
#             minutes on an Intel Xeon with AMX, 2026-12-01).
#   multi30k_rnn: configs/multi30k_rnn_de_en.ini (the attention GRU, at most
#             60 minutes of training on 2 cores) reaches corpus BLEU >= 28.3
#             on test_2016_flickr (the PyTorch tutorial's figure).
#   fmnist:   (needs dataset-fashion-mnist) configs/resnet_fmnist.ini reaches
#             >= 92% test accuracy; over the seeds in CT_FMNIST_SEEDS
#             (default "1 2 3 4 5 6 7", the seeds the README reports),
#             the ViT of deit_fmnist.ini's model and schedule (the dim-128
#             recipe vit_fmnist.ini had before 2026-11-29, 22 epochs)
#             reaches >= 90% on the mean, and configs/deit_fmnist.ini,
#             distilled from that ResNet, beats it by >= 0.5 points on the
#             mean (one seed decides nothing: the ViT's test accuracy moves
#             by up to 1.2 points from seed to seed). About 8 hours on 2
#             cores.
#   vit:      (needs dataset-fashion-mnist) configs/vit_fmnist.ini (30
#             minutes on 2 cores, planned by max_minutes) reaches >= 91%
#             test accuracy on the mean of the seeds in CT_VIT_SEEDS
#             (default "1 2 3"): issue 20's goal (measured: 91.70%). About
#             1.5 hours.
#   detr:     configs/detr_toy.ini (at most 60 minutes of training) reaches
#             mAP@0.5 >= 0.9 on the generated validation images.
#   digits:   configs/digits.ini on the corpus of tests/digits_corpus.awk
#             (numbers and dates in words -> digits), the same budget three
#             times: word targets get exact match 0 on the test split (its
#             numbers are unseen words), char targets >= 0.95, bpe (200 joint
#             merges) >= 0.9. About 10 minutes on 2 cores.
#   multi30k_word: configs/multi30k_de_en.ini as it was until 2026-11-29
#             (word tokens, fp32, 60 minutes; by --set) reaches corpus BLEU
#             >= 35 on test_2016_flickr (measured: 38.08).
#   captions: configs/captions_toy.ini (4308 steps) reaches BLEU-4 >= 50
#             and grounding >= 75% on the generated test split (measured
#             67.86 and 86.9%).
#   clip:     (needs dataset-fashion-mnist) configs/clip_toy.ini (16 000
#             steps, about 28 minutes on 2 threads) reaches recall@1
#             image->text >= 0.7 on the generated test split and zero-shot
#             accuracy >= 80% on the real Fashion-MNIST test set: the issue's
#             targets (measured: 0.707 and 80.09%).
#   hier:     (needs dataset-fashion-mnist) configs/swin_fmnist.ini and
#             configs/cvt_fmnist.ini (30 minutes each on 2 cores, planned by
#             max_minutes) each reach >= 91% test accuracy on the mean of
#             the seeds in CT_HIER_SEEDS (default "1 2 3"): issue 24's goal
#             (measured: Swin 91.48%, CvT 91.52%). About 3 hours.
set -u
ctrain=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
which=$1
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 1
field() {  # field NAME JSON -> the number
  sed -n "s/.*\"$1\": \([-0-9.e+]*\).*/\1/p" <<<"$2"
}
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
test_eval() {  # test_eval CONFIG [--set ...]... -> eval's JSON line on the test split
  local out ckpt
  out=$("$ctrain" train "$@" --set run.dir="$tmp" | tail -n 1)
  ckpt=$(sed -n 's/.*"checkpoint": "\([^"]*\)".*/\1/p' <<<"$out")
  [ -n "$ckpt" ] || { echo "FAIL: training $* gave no checkpoint" >&2; return 1; }
  "$ctrain" eval "$ckpt" --split test | tail -n 1
}
case "$which" in
  toy)
    out=$("$ctrain" train configs/translate_toy.ini --set run.dir="$tmp" | tail -n 1)
    em=$(field exact_match "$out")
    echo "toy demo: $out"
    at_least "$em" 0.95 || { echo "FAIL: exact_match $em < 0.95"; exit 1; }
    ;;
  multi30k)
    [ -f ../shared/data/multi30k/train.de.gz ] || { echo "no Multi30k data: skipped"; exit 77; }
    test_out=$(test_eval configs/multi30k_de_en.ini) || exit 1
    bleu=$(field bleu "$test_out")
    echo "multi30k: $test_out"
    at_least "$bleu" 38 || { echo "FAIL: test BLEU $bleu < 38"; exit 1; }
    ;;
  multi30k_rnn)
    [ -f ../shared/data/multi30k/train.de.gz ] || { echo "no Multi30k data: skipped"; exit 77; }
    test_out=$(test_eval configs/multi30k_rnn_de_en.ini) || exit 1
    bleu=$(field bleu "$test_out")
    echo "multi30k_rnn: $test_out"
    at_least "$bleu" 28.3 || { echo "FAIL: test BLEU $bleu < 28.3"; exit 1; }
    ;;
  fmnist)
    [ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] ||
      { echo "no Fashion-MNIST (apt-get install dataset-fashion-mnist): skipped"; exit 77; }
    test_accuracy() {  # test_accuracy CONFIG [--set ...]... -> the test accuracy
      local line
      line=$(test_eval "$@") || return 1
      field accuracy "$line"
    }
    resnet=$(test_accuracy configs/resnet_fmnist.ini) || exit 1
    echo "resnet: test accuracy $resnet"
    at_least "$resnet" 0.92 || { echo "FAIL: resnet $resnet < 0.92"; exit 1; }
    # DeiT's student: the ViT of vit_fmnist.ini before 2026-11-29.
    dim128=(--set model.dim=128 --set model.mlp_dim=256 --set optim.lr=1e-3
            --set train.epochs=22 --set schedule.warmup=800
            --set train.max_minutes=0)
    sum_vit=0 sum_deit=0 n=0
    for seed in ${CT_FMNIST_SEEDS:-1 2 3 4 5 6 7}; do
      vit=$(test_accuracy configs/vit_fmnist.ini --set run.seed="$seed" \
            --set run.name="vit_s$seed" "${dim128[@]}") || exit 1
      deit=$(test_accuracy configs/deit_fmnist.ini --set run.seed="$seed" \
             --set run.name="deit_s$seed" \
             --set model.teacher="$tmp/resnet_fmnist") || exit 1
      echo "seed $seed: vit $vit, deit $deit"
      sum_vit=$(awk -v a="$sum_vit" -v b="$vit" 'BEGIN { print a + b }')
      sum_deit=$(awk -v a="$sum_deit" -v b="$deit" 'BEGIN { print a + b }')
      n=$((n + 1))
    done
    [ "$n" -gt 0 ] || { echo "FAIL: CT_FMNIST_SEEDS names no seed"; exit 1; }
    vit=$(awk -v v="$sum_vit" -v n="$n" 'BEGIN { print v / n }')
    margin=$(awk -v v="$sum_vit" -v d="$sum_deit" -v n="$n" 'BEGIN { print (d - v) / n }')
    echo "over $n seeds: vit mean $vit, mean margin of deit over vit $margin"
    at_least "$vit" 0.90 || { echo "FAIL: vit mean $vit < 0.90"; exit 1; }
    at_least "$margin" 0.005 ||
      { echo "FAIL: deit beats vit by $margin on the mean, not 0.005"; exit 1; }
    ;;
  vit)
    models=(vit) seeds=${CT_VIT_SEEDS:-1 2 3}
    ;;&
  hier)
    models=(swin cvt) seeds=${CT_HIER_SEEDS:-1 2 3}
    ;;&
  vit | hier)
    [ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] ||
      { echo "no Fashion-MNIST (apt-get install dataset-fashion-mnist): skipped"; exit 77; }
    for model in "${models[@]}"; do
      sum=0 n=0
      for seed in $seeds; do
        line=$(test_eval configs/${model}_fmnist.ini --set run.seed="$seed" \
               --set run.name="${model}_s$seed") || exit 1
        acc=$(field accuracy "$line")
        echo "$model seed $seed: test accuracy $acc"
        sum=$(awk -v a="$sum" -v b="$acc" 'BEGIN { print a + b }')
        n=$((n + 1))
      done
      [ "$n" -gt 0 ] || { echo "FAIL: no seed given ($seeds)"; exit 1; }
      mean=$(awk -v s="$sum" -v n="$n" 'BEGIN { print s / n }')
      echo "$model: mean test accuracy $mean over $n seeds"
      at_least "$mean" 0.91 || { echo "FAIL: $model mean $mean < 0.91"; exit 1; }
    done
    ;;
  digits)
    mkdir -p "$tmp/corpus"
    awk -v out="$tmp/corpus" -f tests/digits_corpus.awk
    em() {  # em NAME [--set ...]... -> exact match on the test split
      local line
      line=$(test_eval configs/digits.ini --set run.name="$1" \
             --set data.train_tsv="$tmp/corpus/train.tsv" \
             --set data.val_tsv="$tmp/corpus/val.tsv" \
             --set data.test_tsv="$tmp/corpus/test.tsv" "${@:2}") || return 1
      field exact_match "$line"
    }
    word=$(em word --set data.tgt_tokenizer=word) || exit 1
    char=$(em char) || exit 1
    bpe=$(em bpe --set data.tokenizer=bpe --set data.src_tokenizer=same \
          --set data.tgt_tokenizer=same --set data.bpe_merges=200) || exit 1
    echo "digits, test exact match: word $word, char $char, bpe $bpe"
    at_least 0.001 "$word" || { echo "FAIL: word $word > 0"; exit 1; }
    at_least "$char" 0.95 || { echo "FAIL: char $char < 0.95"; exit 1; }
    at_least "$bpe" 0.9 || { echo "FAIL: bpe $bpe < 0.9"; exit 1; }
    ;;
  multi30k_word)
    [ -f ../shared/data/multi30k/train.de.gz ] || { echo "no Multi30k data: skipped"; exit 77; }
    test_out=$(test_eval configs/multi30k_de_en.ini --set data.tokenizer=word \
               --set train.precision=fp32 --set train.max_minutes=60 \
               --set run.name=multi30k_de_en_word) || exit 1
    bleu=$(field bleu "$test_out")
    echo "multi30k word: $test_out"
    at_least "$bleu" 35 || { echo "FAIL: test BLEU $bleu < 35"; exit 1; }
    ;;
  captions)
    test_out=$(test_eval configs/captions_toy.ini) || exit 1
    bleu4=$(field bleu4 "$test_out")
    grounding=$(field grounding "$test_out")
    echo "captions: $test_out"
    at_least "$bleu4" 50 || { echo "FAIL: test BLEU-4 $bleu4 < 50"; exit 1; }
    at_least "$grounding" 75 || { echo "FAIL: grounding $grounding < 75"; exit 1; }
    ;;
  clip)
    fm=/usr/share/datasets/fashion-mnist
    [ -f $fm/t10k-images-idx3-ubyte.gz ] || { echo "no Fashion-MNIST: skipped"; exit 77; }
    out=$("$ctrain" train configs/clip_toy.ini --set run.dir="$tmp" | tail -n 1)
    ckpt=$(sed -n 's/.*"checkpoint": "\([^"]*\)".*/\1/p' <<<"$out")
    [ -n "$ckpt" ] || { echo "FAIL: training gave no checkpoint"; exit 1; }
    test_out=$("$ctrain" eval "$ckpt" --split test | tail -n 1)
    zs_out=$("$ctrain" eval "$ckpt" --zeroshot $fm | tail -n 1)
    r1=$(field r1_i2t "$test_out")
    acc=$(field accuracy "$zs_out")
    echo "clip: $test_out"
    echo "clip zero-shot: $zs_out"
    at_least "$r1" 0.7 || { echo "FAIL: test recall@1 image->text $r1 < 0.7"; exit 1; }
    at_least "$acc" 0.8 || { echo "FAIL: zero-shot accuracy $acc < 0.8"; exit 1; }
    ;;
  detr)
    out=$("$ctrain" train configs/detr_toy.ini --set run.dir="$tmp" | tail -n 1)
    map50=$(field map50 "$out")
    echo "detr: $out"
    at_least "$map50" 0.9 || { echo "FAIL: map50 $map50 < 0.9"; exit 1; }
    ;;
esac
echo "ok"
