#!/usr/bin/env bash
# The translation use case end to end: `ctrain train` on the copy task
# genuinely learns (exact match >= 0.9 on held-out sequences), writes its run
# folder (config.ini, metrics.jsonl, checkpoints, plots), and the checkpoint
# works with eval (both splits), translate (arguments and stdin), inspect,
# export (a valid safetensors file) and plot; `ctrain toy translation` writes
# a corpus that trains from files (pair and TSV formats) and refuses to
# overwrite it without --force.
#
# usage: test_translate_e2e.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
src_root=${2:-$(cd "$(dirname "$0")/.." && pwd)}
config=$src_root/configs/translate_copy.ini

# Every key this test relies on is pinned here, so edits to the shipped
# config's tuning do not break it. A small model on short sequences: it
# reaches 0.98-1.0 exact match in 800 steps (seeds 1-4), ~10 s on 2 cores.
sets=(
  run.dir="$tmp/runs" run.name=copy run.seed=1
  data.source=toy data.toy_task=copy data.toy_train=3000 data.toy_val=200
  data.toy_test=200 data.toy_min_len=3 data.toy_max_len=8 data.toy_symbols=20
  data.batch_size=64 data.max_tokens=0
  model.d_model=32 model.heads=2 model.ff=64 model.encoder_layers=1
  model.decoder_layers=1 model.dropout=0.0
  optim.optimizer=adam optim.lr=5e-3 optim.clip_norm=1.0
  schedule.kind=cosine schedule.warmup=100 schedule.min_lr=0
  train.steps=800 train.epochs=0 train.accum=1 train.label_smoothing=0
  train.log_every=50 train.eval_every=400 train.eval_sentences=0
  train.checkpoint_every=400 train.keep_checkpoints=3 train.final_beam=1
  train.eval_beam=1 train.max_minutes=0
)
set_args=()
for s in "${sets[@]}"; do set_args+=(--set "$s"); done

# ---- train -------------------------------------------------------------------
# One thread: on a busy 2-core machine, OpenMP's spinning barriers make this
# tiny model many times slower with 2 threads (thread counts do not change
# results; test_resume.sh checks that).
start=$SECONDS
"$ctrain" train "$config" "${set_args[@]}" --threads 1 >"$tmp/train.out" \
  2>"$tmp/train.err"
status=$?
echo "train: status $status in $((SECONDS - start)) s"
if [ "$status" -ne 0 ]; then
  bad "train exits 0"; tail -20 "$tmp/train.err"
  echo "translate_e2e: $fails failed"; exit 1
fi
final=$(tail -n 1 "$tmp/train.out")
echo "final: $final"
run_dir=$(jstr "$final" run_dir)
ckpt=$(jstr "$final" checkpoint)
em=$(jnum "$final" exact_match)
expect "final line is JSON" '[[ $final == \{*\} ]]'
expect "run_dir is [run] dir/name" '[ "$run_dir" = "$tmp/runs/copy" ]'
expect "final step 800" '[ "$(jnum "$final" step)" = 800 ]'
expect "checkpoint exists ($ckpt)" '[ -n "$ckpt" ] && [ -f "$ckpt" ]'
expect "final line has loss, bleu, exact_match" \
  '[ -n "$(jnum "$final" loss)" ] && [ -n "$(jnum "$final" bleu)" ] && [ -n "$em" ]'
expect "the copy task is learnt: exact_match $em >= 0.9" 'ge "$em" 0.9'
expect "bleu >= 90" 'ge "$(jnum "$final" bleu)" 90'

# ---- the run folder ----------------------------------------------------------
for f in config.ini metrics.jsonl loss.png lr.png metrics.png \
         ckpt-00000400.ct ckpt-00000800.ct; do
  expect "run folder has $f" '[ -s "$run_dir/$f" ]'
done
expect "config.ini is the resolved config" \
  'grep -q "^\[model\]" "$run_dir/config.ini" && grep -q "^d_model *= *32" "$run_dir/config.ini"'
metrics=$run_dir/metrics.jsonl
n_step=$(grep -c '"grad_norm"' "$metrics")
n_eval=$(grep -c '"type": *"eval"' "$metrics")
expect "metrics.jsonl: 16 step lines (got $n_step)" '[ "$n_step" -eq 16 ]'
expect "metrics.jsonl: eval lines at 400 and 800 (got $n_eval)" \
  '[ "$n_eval" -eq 2 ] && grep "\"type\": *\"eval\"" "$metrics" | head -1 | grep -q "\"step\": 400"'
expect "metrics.jsonl: every line is an object" \
  '! grep -qv "^{.*}$" "$metrics"'
expect "metrics.jsonl: step lines have step, epoch, loss, lr" \
  '[ "$(grep "\"grad_norm\"" "$metrics" | grep "\"step\"" | grep "\"epoch\"" | grep "\"loss\"" | grep -c "\"lr\"")" -eq 16 ]'
expect "metrics.jsonl: last line is the final eval" \
  '[ "$(jnum "$(tail -n 1 "$metrics")" exact_match)" = "$em" ]'
for png in loss lr metrics; do
  expect "$png.png is a PNG" \
    '[ "$(head -c 8 "$run_dir/$png.png" | od -A n -t x1 | tr -d " \n")" = 89504e470d0a1a0a ]'
done

# ---- eval --------------------------------------------------------------------
# This one on CT_THREADS (2) threads: the metrics must not depend on it.
"$ctrain" eval "$ckpt" >"$tmp/eval.out" 2>"$tmp/eval.err"
status=$?
line=$(tail -n 1 "$tmp/eval.out")
expect "eval exits 0 (status $status)" '[ "$status" -eq 0 ]'
expect "eval prints a summary" \
  'grep -q "val: 200 sentences" "$tmp/eval.out" && grep -q "^BLEU = " "$tmp/eval.out"'
for key in loss bleu exact_match; do
  expect "eval $key equals the train's final $key" \
    '[ -n "$(jnum "$line" $key)" ] && [ "$(jnum "$line" $key)" = "$(jnum "$final" $key)" ]'
done
expect "eval JSON names split val and step 800" \
  '[ "$(jstr "$line" split)" = val ] && [ "$(jnum "$line" step)" = 800 ]'
"$ctrain" eval "$ckpt" --split test --threads 1 >"$tmp/test.out" \
  2>"$tmp/test.err"
status=$?
line=$(tail -n 1 "$tmp/test.out")
expect "eval --split test exits 0 (status $status)" '[ "$status" -eq 0 ]'
expect "eval --split test: split test, 200 sentences, exact_match >= 0.9" \
  '[ "$(jstr "$line" split)" = test ] && [ "$(jnum "$line" sentences)" = 200 ] && ge "$(jnum "$line" exact_match)" 0.9'
"$ctrain" eval "$ckpt" --beam 3 --threads 1 >"$tmp/beam.out" 2>&1
status=$?
expect "eval --beam 3 --threads 1: exits 0, exact_match >= 0.9" \
  '[ "$status" -eq 0 ] && grep -q "beam 3" "$tmp/beam.out" && ge "$(jnum "$(tail -n 1 "$tmp/beam.out")" exact_match)" 0.9'

# ---- translate ----------------------------------------------------------------
out=$("$ctrain" translate "$ckpt" "a1 a2 a3" 2>"$tmp/tr.err")
status=$?
expect "translate TEXT copies it (got '$out', status $status)" \
  '[ "$status" -eq 0 ] && [ "$out" = "a1 a2 a3" ]'
out=$("$ctrain" translate "$ckpt" --beam 2 "a4 a5 a6 a7" "a9 a8 a7" 2>"$tmp/tr.err")
expect "translate with two TEXTs and --beam 2 (got '${out//$'\n'/ | }')" \
  '[ "$out" = "a4 a5 a6 a7"$'"'"'\n'"'"'"a9 a8 a7" ]'
inputs=("a3 a5 a7 a9" "a10 a11 a12 a13 a14 a15" "a19 a0 a4" "a2 a2 a6 a6 a1"
        "a18 a17 a16 a15 a14 a13 a12 a11" "a7 a3 a8")
printf '%s\n' "${inputs[@]}" >"$tmp/in.txt"
"$ctrain" translate "$ckpt" <"$tmp/in.txt" >"$tmp/tr.out" 2>"$tmp/tr.err"
status=$?
n_out=$(wc -l <"$tmp/tr.out")
same=$(paste -d '|' "$tmp/in.txt" "$tmp/tr.out" | awk -F'|' '$1 == $2' | wc -l)
expect "translate from stdin: status 0, one line per input ($n_out)" \
  '[ "$status" -eq 0 ] && [ "$n_out" -eq ${#inputs[@]} ]'
expect "translate from stdin copies the lines ($same of ${#inputs[@]})" \
  '[ "$same" -ge $((${#inputs[@]} - 1)) ]'
out=$("$ctrain" translate "$ckpt" </dev/null 2>&1)
expect "translate with empty stdin prints nothing (status $?)" '[ -z "$out" ]'

# ---- inspect -----------------------------------------------------------------
"$ctrain" inspect "$ckpt" >"$tmp/inspect.out" 2>&1
status=$?
line=$(tail -n 1 "$tmp/inspect.out")
params=$(jnum "$line" params)
digest=$(jstr "$line" params_digest)
expect "inspect exits 0 (status $status)" '[ "$status" -eq 0 ]'
expect "inspect JSON: step 800, epoch, params, params_digest ($line)" \
  '[ "$(jnum "$line" step)" = 800 ] && [ -n "$(jnum "$line" epoch)" ] && [ "${params:-0}" -gt 0 ] && [[ $digest =~ ^[0-9a-f]{16}$ ]]'
expect "inspect shows the config and the optimizer state" \
  'grep -q "^d_model *= *32" "$tmp/inspect.out" && grep -q "optim\.0" "$tmp/inspect.out"'
line400=$(tail -n 1 < <("$ctrain" inspect "$run_dir/ckpt-00000400.ct" 2>&1))
expect "the step-400 checkpoint has another digest" \
  '[ "$(jnum "$line400" step)" = 400 ] && [ "$(jstr "$line400" params_digest)" != "$digest" ]'

# ---- export ------------------------------------------------------------------
st=$tmp/model.safetensors
"$ctrain" export "$ckpt" "$st" >"$tmp/export.out" 2>&1
status=$?
expect "export exits 0 (status $status)" '[ "$status" -eq 0 ] && [ -s "$st" ]'
hlen=$(od -A n -t u8 -N 8 "$st" | tr -d ' ')
size=$(wc -c <"$st")
header=$(tail -c +9 "$st" | head -c "${hlen:-0}")
n_tensors=$(grep -o '"dtype"' <<<"$header" | wc -l)
expect "safetensors header: length $hlen, starts with '{', ends with '}'" \
  '[ "${hlen:-0}" -gt 2 ] && [ "${header:0:1}" = "{" ] && [[ $header =~ \}\ *$ ]]'
expect "safetensors size = 8 + header + 4 * params ($size)" \
  '[ "$size" -eq $((8 + hlen + 4 * params)) ]'
expect "safetensors holds every parameter ($n_tensors tensors)" \
  'grep -q "($n_tensors tensors, $params parameters)" "$tmp/export.out" && grep -q "in $n_tensors tensors" "$tmp/inspect.out"'
expect "safetensors names are PyTorch names, F32" \
  'grep -q "\"src_emb.weight\":{\"dtype\":\"F32\"" <<<"$header" && grep -q "__metadata__" <<<"$header"'

# ---- init_from: a new run starting from the exported weights -------------
# With lr 0 the optimizer changes nothing, so the new run ends with exactly
# the exported parameters (same digest); a model of another shape is refused.
"$ctrain" train "$config" "${set_args[@]}" --set run.name=from_export \
  --set model.init_from="$st" --set optim.lr=0 --set schedule.kind=constant \
  --set schedule.warmup=0 --set train.steps=10 --set train.eval_every=0 \
  --threads 1 >"$tmp/init.out" 2>"$tmp/init.err"
status=$?
init_ckpt=$(jstr "$(tail -n 1 "$tmp/init.out")" checkpoint)
init_digest=$(jstr "$("$ctrain" inspect "$init_ckpt" 2>/dev/null | tail -n 1)" params_digest)
expect "init_from the export, lr 0: same digest ($init_digest vs $digest)" \
  '[ "$status" -eq 0 ] && [ "$init_digest" = "$digest" ]'
"$ctrain" train "$config" "${set_args[@]}" --set run.name=wrong_shape \
  --set model.init_from="$st" --set model.d_model=16 --threads 1 \
  >/dev/null 2>"$tmp/init_bad.err"
status=$?
expect "init_from into another shape: exit 1 naming the tensor" \
  '[ "$status" -eq 1 ] && grep -q "init_from.*src_emb.weight.*expects" "$tmp/init_bad.err"'

# ---- plot --------------------------------------------------------------------
rm -f "$run_dir"/*.png
"$ctrain" plot "$run_dir" >"$tmp/plot.out" 2>&1
status=$?
expect "plot exits 0 and writes the three charts (status $status)" \
  '[ "$status" -eq 0 ] && [ -s "$run_dir/loss.png" ] && [ -s "$run_dir/lr.png" ] && [ -s "$run_dir/metrics.png" ]'

# ---- toy corpus, and training from files --------------------------------------
toy=$tmp/toy
"$ctrain" toy translation --out "$toy" --task copy --seed 3 --train 400 \
  --val 30 --test 20 >"$tmp/toy.out" 2>&1
status=$?
expect "toy translation exits 0 (status $status)" '[ "$status" -eq 0 ]'
for f in train.src train.tgt val.src val.tgt test.src test.tgt; do
  expect "toy wrote $f" '[ -s "$toy/$f" ]'
done
expect "toy line counts 400/30/20" \
  '[ "$(wc -l <"$toy/train.src")" -eq 400 ] && [ "$(wc -l <"$toy/val.tgt")" -eq 30 ] && [ "$(wc -l <"$toy/test.src")" -eq 20 ]'
expect "toy copy task: targets are the sources" 'cmp -s "$toy/train.src" "$toy/train.tgt"'
sum_before=$(cat "$toy"/* | cksum)
"$ctrain" toy translation --out "$toy" --task reverse --train 50 --val 5 \
  --test 5 >"$tmp/toy2.out" 2>&1
status=$?
expect "toy refuses to overwrite without --force (status $status)" \
  '[ "$status" -eq 1 ] && grep -q "ctrain: error: .*already exists" "$tmp/toy2.out" && [ "$(cat "$toy"/* | cksum)" = "$sum_before" ]'
"$ctrain" toy translation --out "$toy" --task copy --seed 4 --train 400 \
  --val 30 --test 20 --force >/dev/null 2>&1
status=$?
expect "toy --force overwrites (status $status)" \
  '[ "$status" -eq 0 ] && [ "$(cat "$toy"/* | cksum)" != "$sum_before" ] && cmp -s "$toy/val.src" "$toy/val.tgt"'

small=(--set run.dir="$tmp/runs" --set model.d_model=16 --set model.ff=32
       --set model.heads=2 --set model.encoder_layers=1
       --set model.decoder_layers=1 --set train.steps=20
       --set train.checkpoint_every=10 --set train.eval_every=0
       --set train.final_beam=1 --set schedule.kind=constant
       --set schedule.warmup=0 --set optim.lr=1e-3 --set data.source=files
       --threads 1)
"$ctrain" train "$config" "${small[@]}" --set run.name=files \
  --set data.train_src="$toy/train.src" --set data.train_tgt="$toy/train.tgt" \
  --set data.val_src="$toy/val.src" --set data.val_tgt="$toy/val.tgt" \
  --set data.test_src="$toy/test.src" --set data.test_tgt="$toy/test.tgt" \
  >"$tmp/files.out" 2>"$tmp/files.err"
status=$?
expect "train from pair files (status $status)" \
  '[ "$status" -eq 0 ] && [ "$(jnum "$(tail -n 1 "$tmp/files.out")" sentences)" = 30 ]'
line=$(tail -n 1 < <("$ctrain" eval "$tmp/runs/files/ckpt-00000020.ct" --split test 2>&1))
expect "eval --split test reads the test files ($line)" \
  '[ "$(jstr "$line" split)" = test ] && [ "$(jnum "$line" sentences)" = 20 ]'
for split in train val; do
  paste "$toy/$split.src" "$toy/$split.tgt" >"$tmp/$split.tsv"
done
"$ctrain" train "$config" "${small[@]}" --set run.name=tsv \
  --set data.format=tsv --set data.train_tsv="$tmp/train.tsv" \
  --set data.val_tsv="$tmp/val.tsv" >"$tmp/tsv.out" 2>"$tmp/tsv.err"
status=$?
expect "train from TSV files (status $status)" \
  '[ "$status" -eq 0 ] && [ "$(jnum "$(tail -n 1 "$tmp/tsv.out")" sentences)" = 30 ]'
"$ctrain" eval "$tmp/runs/tsv/ckpt-00000020.ct" --split test >/dev/null 2>"$tmp/e.err"
status=$?
expect "eval --split test without test data: status 1, a message (status $status)" \
  '[ "$status" -eq 1 ] && grep -q "ctrain: error: .*test split" "$tmp/e.err"'

echo "translate_e2e: $fails failed ($((SECONDS - start)) s)"
[ "$fails" -eq 0 ]
