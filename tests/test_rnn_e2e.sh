#!/usr/bin/env bash
# The attention GRU translator ([model] arch = rnn) through the program: a
# tiny model overfits a few German-English sentence pairs (exact match 1 on
# them, with teacher forcing 0.5 during training), and its checkpoint works
# with eval, translate (beam search), translate --attention (the alignment
# PNG), inspect and export (the PyTorch tutorial's parameter names). Bad
# values of the RNN keys, keys of the other arch, and archs of the other
# task are refused with a message naming the key.
#
# usage: test_rnn_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"

# ---- a few sentence pairs ------------------------------------------------------
data=$tmp/data
mkdir -p "$data"
cat >"$data/train.de" <<'EOF'
ein mann fährt fahrrad .
zwei hunde spielen im schnee .
eine frau liest ein buch .
kinder spielen am strand .
ein junge springt ins wasser .
eine gruppe von menschen steht vor einem gebäude .
ein hund rennt über die wiese .
zwei männer arbeiten an einem auto .
EOF
cat >"$data/train.en" <<'EOF'
a man rides a bike .
two dogs play in the snow .
a woman reads a book .
children play on the beach .
a boy jumps into the water .
a group of people stands in front of a building .
a dog runs across the meadow .
two men work on a car .
EOF
config=$tmp/rnn.ini
cat >"$config" <<EOF
[run]
dir = $tmp/runs
name = rnn
seed = 3
[data]
source = files
train_src = $data/train.de
train_tgt = $data/train.en
val_src = $data/train.de
val_tgt = $data/train.en
batch_size = 8
[model]
arch = rnn
emb_dim = 32
enc_hidden = 32
dec_hidden = 48
dropout = 0
[optim]
lr = 1e-2
[schedule]
kind = cosine
warmup = 20
[train]
steps = 250
teacher_forcing = 0.5
label_smoothing = 0
eval_every = 0
checkpoint_every = 250
final_beam = 2
EOF

# ---- train ------------------------------------------------------------------------
start=$SECONDS
"$ctrain" train "$config" --threads 1 >"$tmp/train.out" 2>"$tmp/train.err"
status=$?
echo "train: status $status in $((SECONDS - start)) s"
final=$(tail -n 1 "$tmp/train.out")
echo "final: $final"
ckpt=$(jstr "$final" checkpoint)
if [ "$status" -ne 0 ]; then
  bad "train exits 0"; tail -5 "$tmp/train.err"
  echo "rnn_e2e: $fails failed"; exit 1
fi
expect "the sentences are learnt: exact_match $(jnum "$final" exact_match) = 1" \
  '[ "$(jnum "$final" exact_match)" = 1 ]'
expect "config.ini records arch = rnn" \
  'grep -q "^arch *= *rnn" "$tmp/runs/rnn/config.ini"'

# ---- eval, translate --------------------------------------------------------------
line=$("$ctrain" eval "$ckpt" --threads 2 2>/dev/null | tail -n 1)
expect "eval (2 threads) repeats the final BLEU and loss" \
  '[ "$(jnum "$line" bleu)" = "$(jnum "$final" bleu)" ] && [ "$(jnum "$line" loss)" = "$(jnum "$final" loss)" ]'
out=$("$ctrain" translate "$ckpt" "zwei hunde spielen im schnee ." 2>&1)
expect "translate (got '$out')" '[ "$out" = "two dogs play in the snow." ]'
out=$("$ctrain" translate "$ckpt" --beam 1 "eine frau liest ein buch ." \
  "kinder spielen am strand ." 2>&1)
expect "translate two TEXTs, greedy (got '${out//$'\n'/ | }')" \
  '[ "$out" = "a woman reads a book."$'"'"'\n'"'"'"children play on the beach." ]'

png=$tmp/align.png
out=$("$ctrain" translate "$ckpt" --attention "$png" "ein hund rennt über die wiese ." 2>&1)
expect "translate --attention prints the translation (got '$out')" \
  '[ "$out" = "a dog runs across the meadow." ]'
expect "translate --attention writes a PNG" \
  '[ "$(head -c 8 "$png" 2>/dev/null | od -A n -t x1 | tr -d " \n")" = 89504e470d0a1a0a ]'
"$ctrain" translate "$ckpt" --attention "$tmp/two.png" "a" "b" >/dev/null 2>"$tmp/err"
expect "--attention with two TEXTs: usage error (exit 2)" \
  '[ $? -eq 2 ] && grep -q "one TEXT" "$tmp/err" && [ ! -e "$tmp/two.png" ]'
fails_with "--attention into a missing folder" "$tmp/no/such/dir/a.png" \
  "$ctrain" translate "$ckpt" --attention "$tmp/no/such/dir/a.png" "ein hund"
# A Transformer has several heads per layer: no alignment picture.
: >"$tmp/empty.ini"
mapfile -t tsets < <(sets run.dir="$tmp/runs" run.name=transformer \
  data.source=files data.train_src="$data/train.de" \
  data.train_tgt="$data/train.en" data.val_src="$data/train.de" \
  data.val_tgt="$data/train.en" train.steps=2 train.final_beam=1 \
  model.d_model=16 model.heads=2 model.ff=32 model.encoder_layers=1 \
  model.decoder_layers=1)
"$ctrain" train "$tmp/empty.ini" "${tsets[@]}" --threads 1 >"$tmp/tr.out" 2>&1
tckpt=$(jstr "$(tail -n 1 "$tmp/tr.out")" checkpoint)
fails_with "--attention on a Transformer checkpoint refused" "arch = rnn" \
  "$ctrain" translate "$tckpt" --attention "$tmp/t.png" "ein hund"
expect "... and nothing written" '[ ! -e "$tmp/t.png" ]'

# ---- inspect, export: the tutorial's names ----------------------------------------
line=$("$ctrain" inspect "$ckpt" 2>/dev/null | tail -n 1)
expect "inspect: step 250 and a digest" \
  '[ "$(jnum "$line" step)" = 250 ] && [ -n "$(jstr "$line" params_digest)" ]'
st=$tmp/rnn.safetensors
"$ctrain" export "$ckpt" "$st" >/dev/null 2>&1
hlen=$(od -A n -t u8 -N 8 "$st" | tr -d ' ')
header=$(tail -c +9 "$st" | head -c "${hlen:-0}")
for name in encoder.embedding.weight encoder.rnn.weight_ih_l0_reverse \
            encoder.rnn.bias_hh_l0 encoder.fc.weight decoder.attention.attn.weight \
            decoder.attention.v.weight decoder.embedding.weight \
            decoder.rnn.weight_hh_l0 decoder.fc_out.bias; do
  expect "export has $name" 'grep -q "\"$name\"" <<<"$header"'
done

# ---- bad configs --------------------------------------------------------------------
empty=$tmp/empty.ini
base=(--set run.dir="$tmp/bad" --set data.toy_train=50 --set train.steps=1)
fails_with "teacher_forcing 1.5 refused" "teacher_forcing = 1.5" \
  "$ctrain" train "$empty" "${base[@]}" --set model.arch=rnn \
  --set train.teacher_forcing=1.5
fails_with "emb_dim 0 refused" "emb_dim = '0': must be in 1..65536" \
  "$ctrain" train "$empty" "${base[@]}" --set model.arch=rnn --set model.emb_dim=0
fails_with "enc_hidden -3 refused" "enc_hidden = '-3': must be in 1..65536" \
  "$ctrain" train "$empty" "${base[@]}" --set model.arch=rnn \
  --set model.enc_hidden=-3
fails_with "a Transformer key with arch = rnn refused" \
  "heads = 4: \[model\] arch = rnn does not use" \
  "$ctrain" train "$empty" "${base[@]}" --set model.arch=rnn --set model.heads=4
fails_with "an RNN key with the Transformer refused" \
  "teacher_forcing = 0.5: \[model\] arch = transformer does not use" \
  "$ctrain" train "$empty" "${base[@]}" --set train.teacher_forcing=0.5
fails_with "arch = vit for translation refused" \
  "arch = vit is not a translation model (transformer|rnn)" \
  "$ctrain" train "$empty" "${base[@]}" --set model.arch=vit
fails_with "arch = rnn for classification refused" \
  "arch = rnn is not a classification model (vit|deit|resnet|swin" \
  "$ctrain" train "$empty" "${base[@]}" --set run.task=classification \
  --set model.arch=rnn
fails_with "arch = lstm is not a choice" "arch" \
  "$ctrain" train "$empty" "${base[@]}" --set model.arch=lstm
expect "no run folder was left by refused configs" '[ ! -e "$tmp/bad/run" ]'

echo "rnn_e2e: $fails failed"
[ "$fails" -eq 0 ]
