#!/usr/bin/env bash
# Long trainings (suite 'slow', run with `meson test -C build --suite slow`):
# the figures the README reports, asserted.
#   toy:      configs/translate_toy.ini reaches >= 95% exact match on the
#             held-out validation sentences.
#   multi30k: configs/multi30k_de_en.ini (60 minutes of training on 2 cores)
#             reaches corpus BLEU >= 35 on test_2016_flickr.
#   fmnist:   (needs dataset-fashion-mnist) configs/resnet_fmnist.ini reaches
#             >= 92% test accuracy, configs/vit_fmnist.ini >= 90%, and
#             configs/deit_fmnist.ini, distilled from that ResNet with the
#             ViT's budget, beats the ViT by >= 0.5 points.
#   detr:     configs/detr_toy.ini (at most 60 minutes of training) reaches
#             mAP@0.5 >= 0.9 on the generated validation images.
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
case "$which" in
  toy)
    out=$("$ctrain" train configs/translate_toy.ini --set run.dir="$tmp" | tail -n 1)
    em=$(field exact_match "$out")
    echo "toy demo: $out"
    at_least "$em" 0.95 || { echo "FAIL: exact_match $em < 0.95"; exit 1; }
    ;;
  multi30k)
    [ -f ../shared/data/multi30k/train.de.gz ] || { echo "no Multi30k data: skipped"; exit 77; }
    out=$("$ctrain" train configs/multi30k_de_en.ini --set run.dir="$tmp" | tail -n 1)
    ckpt=$(sed -n 's/.*"checkpoint": "\([^"]*\)".*/\1/p' <<<"$out")
    test_out=$("$ctrain" eval "$ckpt" --split test | tail -n 1)
    bleu=$(field bleu "$test_out")
    echo "multi30k: $test_out"
    at_least "$bleu" 35 || { echo "FAIL: test BLEU $bleu < 35"; exit 1; }
    ;;
  fmnist)
    [ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] ||
      { echo "no Fashion-MNIST (apt-get install dataset-fashion-mnist): skipped"; exit 77; }
    declare -A acc
    for cfg in resnet vit deit; do
      out=$("$ctrain" train configs/${cfg}_fmnist.ini --set run.dir="$tmp" \
            --set model.teacher="$tmp/resnet_fmnist" | tail -n 1)
      ckpt=$(sed -n 's/.*"checkpoint": "\([^"]*\)".*/\1/p' <<<"$out")
      test_out=$("$ctrain" eval "$ckpt" --split test | tail -n 1)
      acc[$cfg]=$(field accuracy "$test_out")
      echo "$cfg: $test_out"
    done
    at_least "${acc[resnet]}" 0.92 || { echo "FAIL: resnet ${acc[resnet]} < 0.92"; exit 1; }
    at_least "${acc[vit]}" 0.90 || { echo "FAIL: vit ${acc[vit]} < 0.90"; exit 1; }
    at_least "${acc[deit]}" "$(awk -v v="${acc[vit]}" 'BEGIN { print v + 0.005 }')" ||
      { echo "FAIL: deit ${acc[deit]} does not beat vit ${acc[vit]} by 0.5 points"; exit 1; }
    ;;
  detr)
    out=$("$ctrain" train configs/detr_toy.ini --set run.dir="$tmp" | tail -n 1)
    map50=$(field map50 "$out")
    echo "detr: $out"
    at_least "$map50" 0.9 || { echo "FAIL: map50 $map50 < 0.9"; exit 1; }
    ;;
esac
echo "ok"
