#!/usr/bin/env bash
# Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/SURFACE/
# (seed-* files; findings are kept beside them as crash-* files and never
# rewritten here). Small, valid examples of each format, made with ctrain
# itself (tiny runs, `ctrain toy`, `ctrain export`) and python3's zlib for
# the PNG colour types ctrain does not write.
#
# usage: tests/fuzz/make_corpus.sh BUILD_DIR
set -eu
build=$(cd "$1" && pwd)
ctrain=$build/train/ctrain
root=$(cd "$(dirname "$0")/../.." && pwd)
corpus=$root/tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in config text idx cifar png coco captions checkpoint safetensors metrics merges; do
  mkdir -p "$corpus/$s"
  rm -f "$corpus/$s"/seed-*
done
cd "$tmp"

# ---- config: the shipped configs, line-ending and quoting variants ----------
for f in "$root"/configs/*.ini; do cp "$f" "$corpus/config/seed-$(basename "$f")"; done
printf '\xef\xbb\xbf# bom\r\n[run]\r\nname = "a \\"q\\" # x" ; c\r\nseed=3\r\n' >"$corpus/config/seed-crlf.ini"
printf '# cr only\r[train]\rsteps = 7\r[optim]\rlr = 3e-4\r' >"$corpus/config/seed-cr.ini"
printf 'train.steps=5\nmodel.d_model=32\noptim.optimizer=sgd\nrun.task=detection\n' >"$corpus/config/seed-sets.txt"

# ---- text: a toy corpus, plain, gzip, two gzip members, TSV ---------------
"$ctrain" toy translation --out toy --task grammar --train 20 --val 5 --test 5 >/dev/null
cp toy/train.src "$corpus/text/seed-pair.txt"
gzip -c toy/train.tgt >"$corpus/text/seed-pair.txt.gz"
{ gzip -c toy/val.src; gzip -c toy/val.tgt; } >"$corpus/text/seed-members.gz"
paste toy/train.src toy/train.tgt | head -n 8 >"$corpus/text/seed-pairs.tsv"
printf '\xef\xbb\xbfstra\xc3\x9fe \xe2\x80\x9equote\xe2\x80\x9c\r\nl\xc3\xa4nger 1,5 km.\r\n\n' \
  >"$corpus/text/seed-utf8.txt"

# ---- idx: LE32 length of the images file, images, labels ------------------
"$ctrain" toy images --out idx --format idx --size 8 --classes 4 --train 6 --test 3 >/dev/null
le32() { printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)))"; }
idx_seed() {  # idx_seed OUT IMAGES LABELS
  { le32 "$(wc -c <"$2")"; cat "$2" "$3"; } >"$1"
}
idx_seed "$corpus/idx/seed-plain" idx/train-images-idx3-ubyte idx/train-labels-idx1-ubyte
gzip -c idx/t10k-images-idx3-ubyte >img.gz
gzip -c idx/t10k-labels-idx1-ubyte >lab.gz
idx_seed "$corpus/idx/seed-gzip" img.gz lab.gz

# ---- cifar: kind byte, then a record file (or a names file) ---------------
"$ctrain" toy images --out cifar --format cifar10 --classes 4 --train 5 --test 3 >/dev/null
{ printf '\0'; cat cifar/test_batch.bin; } >"$corpus/cifar/seed-cifar10"
{ printf '\0'; gzip -c cifar/test_batch.bin; } >"$corpus/cifar/seed-cifar10-gz"
# CIFAR-100: coarse and fine label bytes, then the pixels of a CIFAR-10 record.
{ printf '\1'; for i in 0 1; do printf '\003\041'; tail -c +2 cifar/test_batch.bin | head -c 3072; done; } \
  >"$corpus/cifar/seed-cifar100"
{ printf '\0'; printf 'airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n'; } \
  >"$corpus/cifar/seed-names"

# ---- png: toy images, and every colour type, bit depth and interlace -------
"$ctrain" toy images --out png --size 8 --classes 2 --train 2 --test 2 >/dev/null
find png/train -name '*.png' | head -n 2 | while read -r f; do
  cp "$f" "$corpus/png/seed-toy-$(basename "$f")"
done
python3 - "$corpus/png" <<'PY'
import struct, sys, zlib
out = sys.argv[1]
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
def png(name, w, h, color, depth, rows, extra=b"", interlace=0):
    raw = b"".join(b"\0" + r for r in rows)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, interlace))
            + extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    open(f"{out}/seed-{name}.png", "wb").write(data)
w, h = 5, 3
png("gray8", w, h, 0, 8, [bytes((x * 40 + y) % 256 for x in range(w)) for y in range(h)])
png("gray1", w, h, 0, 1, [bytes([0b10101000]) for y in range(h)])
png("gray16", w, h, 0, 16, [b"".join(struct.pack(">H", x * 9000 + y) for x in range(w)) for y in range(h)])
png("rgb8", w, h, 2, 8, [bytes((x * 50 + c * 20 + y) % 256 for x in range(w) for c in range(3)) for y in range(h)])
png("rgba8", w, h, 6, 8, [bytes((x * 50 + c * 20) % 256 for x in range(w) for c in range(4)) for y in range(h)])
png("graya8", w, h, 4, 8, [bytes((x * 50 + c) % 256 for x in range(w) for c in range(2)) for y in range(h)])
png("palette", w, h, 3, 8, [bytes((x + y) % 3 for x in range(w)) for y in range(h)],
    extra=chunk(b"PLTE", bytes([255, 0, 0, 0, 255, 0, 0, 0, 255])) + chunk(b"tRNS", bytes([255, 128, 0])))
png("rgb16", 2, 2, 2, 16, [bytes(12) for y in range(2)])
# Adam7: the image's rows pass by pass (a pass with no pixels has no rows).
adam7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
W, H = 9, 9
rows = []
for xs, ys, dx, dy in adam7:
    pw, ph = (W - xs + dx - 1) // dx, (H - ys + dy - 1) // dy
    if pw and ph:
        rows += [bytes((x * 25 + y * 3) % 256 for x in range(xs, W, dx)) for y in range(ys, H, dy)]
png("interlaced", W, H, 0, 8, rows, interlace=1)
PY

# ---- coco: a generated set, its file names pointed at the fuzz images -----
"$ctrain" toy detection --out det --size 16 --classes 3 --train 2 --val 2 >/dev/null
sed -e 's/"000000\.png"/"1.png"/; s/"000001\.png"/"2.png"/' det/train.json \
  >"$corpus/coco/seed-toy.json"
printf '{"images": [{"id": 1, "file_name": "a.png", "width": 16, "height": 16}],\n "annotations": [{"id": 1, "image_id": 1, "category_id": 4, "bbox": [1.5, 2, 10, 12.25], "area": 1, "iscrowd": 0}],\n "categories": [{"id": 4, "name": "caf\\u00e9 \\ud83d\\ude00", "supercategory": "x"}], "info": {"a": [null, true, false, -1e-3]}}\n' \
  >"$corpus/coco/seed-hand.json"

# ---- captions: a generated set, its file names pointed at the fuzz images --
"$ctrain" toy captions --out cap --size 32 --grid 2 --count 2 --val 1 --test 2 >/dev/null
sed -e 's/"000000\.png"/"1.png"/; s/"000001\.png"/"2.png"/; s/"width": 32, "height": 32/"width": 16, "height": 16/g' \
  -e 's/\("bbox": \[\)[0-9., ]*\]/\11, 2, 8, 9]/' cap/test.json >"$corpus/captions/seed-toy.json"
printf '{"images": [{"id": 7, "file_name": "a.png", "width": 16, "height": 16, "heldout": false, "license": 2}],\n "annotations": [{"id": 1, "image_id": 7, "caption": "A caf\\u00e9, \\ud83d\\ude00 two  Coats.\\n"}, {"image_id": 7, "caption": "x"}],\n "objects": [{"image_id": 7, "name": "coat", "bbox": [0.5, 0, 16, 16.5]}], "info": {"a": [null, true, -1e-3]}}\n' \
  >"$corpus/captions/seed-hand.json"

# ---- checkpoint and safetensors: tiny runs of each task ---------------------
small=(--set run.dir="$tmp/runs" --set train.steps=2 --set train.log_every=1
       --set train.eval_every=0 --set train.checkpoint_every=2
       --set train.final_beam=1 --set schedule.kind=constant
       --set schedule.warmup=0 --set optim.lr=1e-3)
: >empty.ini
"$ctrain" train "$root/configs/translate_copy.ini" "${small[@]}" --set run.name=tr \
  --set data.toy_train=40 --set data.toy_val=4 --set data.toy_test=4 \
  --set data.toy_symbols=6 --set data.toy_max_len=5 --set model.d_model=8 \
  --set model.ff=8 --set model.heads=2 --set model.encoder_layers=1 \
  --set model.decoder_layers=1 >/dev/null 2>&1
"$ctrain" train empty.ini "${small[@]}" --set run.name=cls --set run.task=classification \
  --set data.source=toy --set data.toy_train=16 --set data.toy_val=4 --set data.toy_test=4 \
  --set data.toy_image_size=8 --set data.toy_classes=2 --set data.batch_size=4 \
  --set model.arch=vit --set model.patch=4 --set model.dim=8 --set model.depth=1 \
  --set model.heads=2 --set model.mlp_dim=8 >/dev/null 2>&1
"$ctrain" train empty.ini "${small[@]}" --set run.name=det --set run.task=detection \
  --set data.source=toy --set data.toy_train=4 --set data.toy_val=2 \
  --set data.toy_image_size=16 --set data.toy_classes=2 --set data.batch_size=2 \
  --set model.d_model=8 --set model.heads=2 --set model.ff=8 \
  --set model.encoder_layers=1 --set model.decoder_layers=1 --set model.width=4 \
  --set model.stages=1 --set model.blocks=1 --set model.queries=4 >/dev/null 2>&1
"$ctrain" train empty.ini "${small[@]}" --set run.name=rnn \
  --set data.toy_train=40 --set data.toy_val=4 --set data.toy_test=4 --set model.arch=rnn \
  --set model.emb_dim=8 --set model.enc_hidden=8 --set model.dec_hidden=8 >/dev/null 2>&1
"$ctrain" train empty.ini "${small[@]}" --set run.name=bpe \
  --set data.toy_train=30 --set data.toy_val=4 --set data.toy_test=4 \
  --set data.tokenizer=bpe --set data.bpe_merges=40 --set model.d_model=8 \
  --set model.ff=8 --set model.heads=2 --set model.encoder_layers=1 \
  --set model.decoder_layers=1 >/dev/null 2>&1
for run in tr cls det rnn bpe; do
  ckpt=runs/$run/ckpt-00000002.ct
  cp "runs/$run/metrics.jsonl" "$corpus/metrics/seed-$run.jsonl"
  { printf '\0'; cat "$ckpt"; } >"$corpus/checkpoint/seed-$run.ct"
  "$build/tests/fuzz/seed_sections" "$ckpt" "$corpus/checkpoint/seed-$run-sections"
  "$ctrain" export "$ckpt" "$corpus/safetensors/seed-$run.safetensors" >/dev/null
done
python3 - "$corpus/safetensors" <<'PY'
import json, struct, sys
out = sys.argv[1]
def write(name, header, data):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(f"{out}/seed-{name}.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
w = struct.pack("<6f", *[0.5 * i for i in range(6)])
write("store-f32", {"__metadata__": {"format": "pt"},
                    "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                    "b": {"dtype": "F32", "shape": [2], "data_offsets": [24, 32]}}, w + struct.pack("<2f", 1, -1))
write("store-mixed", {"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]},
                      "b": {"dtype": "F64", "shape": [2], "data_offsets": [12, 28]},
                      "extra": {"dtype": "BF16", "shape": [1], "data_offsets": [28, 30]},
                      "ids": {"dtype": "I64", "shape": [0], "data_offsets": [30, 30]}},
      struct.pack("<6H", 0x3c00, 0x4000, 0xbc00, 0x0001, 0x7bff, 0) + struct.pack("<2d", 0.1, -2) + struct.pack("<H", 0x3f80))
PY
printf '{"step": 1, "loss": 2.5, "lr": 1e-3}\n{"step": 2, "type": "eval", "split": "val", "bleu": 12.5}\n{"step": 3, "loss": nan' \
  >"$corpus/metrics/seed-torn.jsonl"
# ---- merges: a learned table (export --vocab), the reference's, variants ---
"$ctrain" export runs/bpe/ckpt-00000002.ct --vocab vocab >/dev/null
cp vocab/merges.txt "$corpus/merges/seed-learned.txt"
gzip -c vocab/merges.txt >"$corpus/merges/seed-learned.txt.gz"
cp "$root/tests/ref/bpe_corpus.merges.txt" "$corpus/merges/seed-ref.txt"
printf 'a b\r\nab c</w>\r\n\r\n' >"$corpus/merges/seed-crlf.txt"
printf '#version: 0.2\na b\na b\nb\n' >"$corpus/merges/seed-bad.txt"
for s in config text idx cifar png coco captions checkpoint safetensors metrics merges; do
  echo "$s: $(ls "$corpus/$s" | wc -l) files, $(du -sk "$corpus/$s" | cut -f1) kB"
done
