#!/usr/bin/env bash
# Subword and character tokenizers through the program, on a generated
# corpus of numbers and dates in words -> digits written without spaces
# (tests/digits_corpus.awk): the word tokenizer cannot produce a test number
# it never saw (exact match 0), char and bpe targets learn the mapping. Also:
# the merges are stored in the checkpoint (translate works with the data
# gone), `ctrain export --vocab` writes merges.txt and the vocabularies, a run
# reading that merges.txt ends in the same weights as the run that learned
# it, malformed or missing merges files are refused naming the file and line
# without creating the run, and a run cannot be resumed with other tokenizer
# keys.
#
# usage: test_bpe_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
src_root=${2:-$(cd "$(dirname "$0")/.." && pwd)}
config=$src_root/configs/translate_copy.ini
data=$tmp/digits
mkdir -p "$data"
awk -v out="$data" -v seed=1 -v train=4000 -v val=200 -v test=200 \
  -f "$src_root/tests/digits_corpus.awk"
expect "the digits corpus: 4000/200/200 pairs" \
  '[ "$(wc -l <"$data/train.tsv")" -eq 4000 ] && [ "$(wc -l <"$data/test.tsv")" -eq 200 ]'

# A small model on 4000 pairs: ~9 s per run on one core. Every key the test
# relies on is pinned here.
sets=(
  run.dir="$tmp/runs" run.seed=1 data.source=files data.format=tsv
  data.train_tsv="$data/train.tsv" data.val_tsv="$data/val.tsv"
  data.test_tsv="$data/test.tsv" data.batch_size=64 data.max_tokens=0
  data.min_freq=1 data.max_vocab=0 data.lowercase=true
  model.d_model=64 model.heads=4 model.ff=128 model.encoder_layers=2
  model.decoder_layers=2 model.dropout=0
  optim.optimizer=adam optim.lr=3e-3 optim.clip_norm=1.0
  schedule.kind=cosine schedule.warmup=60 schedule.min_lr=0
  train.steps=600 train.epochs=0 train.accum=1 train.label_smoothing=0
  train.log_every=50 train.eval_every=0 train.eval_sentences=0
  train.checkpoint_every=600 train.final_beam=1 train.eval_beam=1
  train.max_minutes=0
)
mapfile -t set_args < <(sets "${sets[@]}")
# train NAME [--set K=V]...: the final JSON line in $tmp/NAME.out
train() {
  local name=$1
  shift
  "$ctrain" train "$config" "${set_args[@]}" --set run.name="$name" "$@" \
    --threads 1 >"$tmp/$name.out" 2>"$tmp/$name.err"
}

# ---- word, char and bpe targets -------------------------------------------------
train word --set data.tokenizer=word
status=$?
word=$(tail -n 1 "$tmp/word.out")
train char --set data.src_tokenizer=word --set data.tgt_tokenizer=char
status_char=$?
char=$(tail -n 1 "$tmp/char.out")
train bpe --set data.tokenizer=bpe --set data.bpe_merges=100 \
  --set data.bpe_joint=true
status_bpe=$?
bpe=$(tail -n 1 "$tmp/bpe.out")
em_word=$(jnum "$word" exact_match)
em_char=$(jnum "$char" exact_match)
em_bpe=$(jnum "$bpe" exact_match)
echo "exact match: word $em_word, char $em_char, bpe $em_bpe"
expect "the three runs exit 0" \
  '[ "$status" -eq 0 ] && [ "$status_char" -eq 0 ] && [ "$status_bpe" -eq 0 ]'
expect "word targets: exact match 0 (every test number is unseen): $em_word" \
  '[ "$em_word" = 0 ]'
expect "char targets learn the digits: exact match $em_char >= 0.7" \
  'ge "$em_char" 0.7'
expect "bpe tokens learn the digits: exact match $em_bpe >= 0.6" \
  'ge "$em_bpe" 0.6'
expect "bpe: the run says how many merges it learned" \
  'grep -q "^ctrain: bpe: 100 merges learned from the source and target training text (8000 lines)" "$tmp/bpe.err"'
ckpt=$(jstr "$bpe" checkpoint)
"$ctrain" eval "$ckpt" --split test >"$tmp/eval.out" 2>&1
expect "eval prints the tokens line of both sides" \
  'grep -q "^tokens: source bpe, vocabulary [0-9]*, .* <unk>; target bpe, vocabulary" "$tmp/eval.out"'
expect "word targets: the test targets are all <unk>" \
  '"$ctrain" eval "$(jstr "$word" checkpoint)" --split test | grep -q "target word, vocabulary 400[0-9], 1.0 per sentence, 100.00% <unk>"'

# ---- export --vocab ---------------------------------------------------------------
"$ctrain" export "$ckpt" --vocab "$tmp/vocab" >"$tmp/export.out" 2>&1
status=$?
merges=$tmp/vocab/merges.txt
expect "export --vocab exits 0 and names its files (status $status)" \
  '[ "$status" -eq 0 ] && grep -q "merges.txt (100 merges, source and target)" "$tmp/export.out"'
expect "merges.txt: the version line, then 100 merges of two symbols" \
  '[ "$(head -n 1 "$merges")" = "#version: 0.2" ] && [ "$(wc -l <"$merges")" -eq 101 ] && [ "$(tail -n +2 "$merges" | grep -vc "^[^ ][^ ]* [^ ][^ ]*$")" -eq 0 ]'
expect "src.vocab.json and tgt.vocab.json start with the specials" \
  'grep -q "^{\"<pad>\": 0, \"<unk>\": 1, \"<bos>\": 2, \"<eos>\": 3, " "$tmp/vocab/src.vocab.json" && grep -q "\"1</w>\": [0-9]" "$tmp/vocab/tgt.vocab.json"'
"$ctrain" export "$(jstr "$char" checkpoint)" --vocab "$tmp/vocab_char" \
  >/dev/null 2>&1
expect "a char target has a vocabulary and no merges file" \
  '[ -s "$tmp/vocab_char/tgt.vocab.json" ] && [ ! -e "$tmp/vocab_char/merges.txt" ] && [ ! -e "$tmp/vocab_char/tgt.merges.txt" ]'
train persides --set data.tokenizer=bpe --set data.bpe_merges=40 \
  --set data.bpe_joint=false --set train.steps=5 --set schedule.warmup=1
"$ctrain" export "$tmp/runs/persides/ckpt-00000005.ct" --vocab "$tmp/vocab2" \
  >/dev/null 2>&1
expect "bpe_joint = false: src.merges.txt and tgt.merges.txt, 40 merges each" \
  '[ "$(wc -l <"$tmp/vocab2/src.merges.txt")" -eq 41 ] && [ "$(wc -l <"$tmp/vocab2/tgt.merges.txt")" -eq 41 ] && ! cmp -s "$tmp/vocab2/src.merges.txt" "$tmp/vocab2/tgt.merges.txt"'

# ---- bpe_merges_file: the same merges give the same run -------------------------
train from_file --set data.tokenizer=bpe --set data.bpe_merges_file="$merges"
status=$?
d1=$(jstr "$("$ctrain" inspect "$ckpt" | tail -n 1)" params_digest)
d2=$(jstr "$("$ctrain" inspect "$tmp/runs/from_file/ckpt-00000600.ct" | tail -n 1)" params_digest)
expect "a run reading the exported merges.txt ends in the same weights ($d1, $d2)" \
  '[ "$status" -eq 0 ] && [ -n "$d1" ] && [ "$d1" = "$d2" ] && ! grep -q "merges learned" "$tmp/from_file.err"'

# ---- malformed merges files -----------------------------------------------------
printf '#version: 0.2\n1 2\n12 3</w>\n12 3 4\n' >"$tmp/bad.txt"
fails_with "a malformed merges file is refused naming the line" \
  "bad.txt:4: \"12 3 4\": expected two symbols separated by one space" \
  "$ctrain" train "$config" "${set_args[@]}" --set run.name=bad \
  --set data.tokenizer=bpe --set data.bpe_merges_file="$tmp/bad.txt"
expect "... and no run folder is created" '[ ! -e "$tmp/runs/bad" ]'
printf '1 2\n1 2\n' >"$tmp/dup.txt"
fails_with "a repeated merge is refused" "dup.txt:2: repeats the merge of line 1" \
  "$ctrain" train "$config" "${set_args[@]}" --set run.name=dup \
  --set data.tokenizer=bpe --set data.bpe_merges_file="$tmp/dup.txt"
fails_with "a missing merges file is refused naming it" "$tmp/missing.txt" \
  "$ctrain" train "$config" "${set_args[@]}" --set run.name=missing \
  --set data.tokenizer=bpe --set data.bpe_merges_file="$tmp/missing.txt"
fails_with "bad tokenizer names are refused" "tokenizer" \
  "$ctrain" train "$config" "${set_args[@]}" --set run.name=badname \
  --set data.tokenizer=sentencepiece
fails_with "negative bpe_merges are refused" "bpe_merges" \
  "$ctrain" train "$config" "${set_args[@]}" --set run.name=negative \
  --set data.tokenizer=bpe --set data.bpe_merges=-1

# ---- resuming with other tokenizer keys ------------------------------------------
for change in data.bpe_merges=50 data.tokenizer=char data.tgt_tokenizer=word; do
  key=${change%%=*}
  fails_with "resume with $change is refused" "\[data\] ${key#data.} differs" \
    "$ctrain" train "$config" "${set_args[@]}" --set run.name=bpe \
    --set data.tokenizer=bpe --set data.bpe_merges=100 --set "$change" \
    --set train.steps=700 --resume auto
done

# ---- the checkpoint needs no data -------------------------------------------------
mv "$data" "$tmp/gone"
out=$("$ctrain" translate "$ckpt" "nineteen hundred" \
  "the third of march nineteen oh five" 2>"$tmp/tr.err")
status=$?
echo "translate: ${out//$'\n'/ | }"
expect "translate with the data gone: exits 0, two lines of digits" \
  '[ "$status" -eq 0 ] && [ "$(grep -c "^[0-9-]*$" <<<"$out")" -eq 2 ]'
fails_with "eval with the data gone names the missing file" "val.tsv" \
  "$ctrain" eval "$ckpt"
mv "$tmp/gone" "$data"

echo "bpe_e2e: $fails failed"
[ "$fails" -eq 0 ]
