#!/usr/bin/env bash
# Exact resume. A run interrupted any way (SIGINT, which checkpoints and
# exits 0 with a resume hint; SIGINT twice; SIGKILL at random moments, even
# while a checkpoint is being written) and continued with --resume auto,
# under different thread counts, ends with the same parameters
# (params_digest) and a byte-identical metrics.jsonl as the run that was
# never stopped. Dropout is on, so the RNG counters matter too. Resuming a
# finished run changes nothing. KIND picks the run: translation (the copy
# task), rnn (the copy task with the attention GRU, dropout and teacher
# forcing 0.5, whose coins are drawn from the step), vision (a ViT on
# generated images with dropout, drop path, random crops, flips,
# mixup/cutmix and the prefetch thread), detection (a tiny DETR with
# dropout and flips) or bpe (the toy grammar pair with BPE merges learned
# at the start: a resumed run takes them, and the vocabularies, from the
# checkpoint).
#
# usage: test_resume.sh CTRAIN [SOURCE_ROOT] [translation|rnn|vision|detection|bpe]
# RESUME_SEED=N repeats the random kill times of an earlier run.
set -u
ctrain=$1
case $ctrain in */*) ctrain=$(cd "$(dirname "$ctrain")" && pwd)/$(basename "$ctrain") ;; esac
src_root=${2:-$(cd "$(dirname "$0")/.." && pwd)}
kind=${3:-translation}
tmp=$(mktemp -d)
children=()
cleanup() {
  for pid in "${children[@]}"; do kill -9 "$pid" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
seed=${RESUME_SEED:-$(( $(date +%s) % 32768 ))}
RANDOM=$seed
echo "RESUME_SEED=$seed"
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }

# 300 steps of a small model with dropout; a checkpoint every 20 steps, a
# metrics line every 10, validation every 100. About 5 s on one core.
common=(train.steps=300 train.epochs=0 train.accum=1 train.label_smoothing=0.1
        train.log_every=10 train.eval_every=100 train.eval_sentences=0
        train.checkpoint_every=20 train.keep_checkpoints=3 train.max_minutes=0)
if [ "$kind" = detection ]; then
  name=detr
  config=$tmp/empty.ini
  : >"$config"
  sets=(run.task=detection run.name=$name run.seed=7 data.source=toy
        data.toy_train=64 data.toy_val=16 data.toy_image_size=32
        data.toy_classes=3 data.batch_size=8 data.hflip=true
        model.d_model=32 model.heads=2 model.ff=64 model.encoder_layers=1
        model.decoder_layers=2 model.width=8 model.stages=2 model.blocks=1
        model.queries=8 model.dropout=0.1 optim.lr=1e-3 schedule.warmup=30
        "${common[@]}")
elif [ "$kind" = rnn ]; then
  name=rnn
  config=$tmp/empty.ini
  : >"$config"
  sets=(run.name=$name run.seed=7 data.source=toy data.toy_task=copy
        data.toy_train=2000 data.toy_val=50 data.toy_test=50
        data.toy_min_len=3 data.toy_max_len=8 data.toy_symbols=20
        data.batch_size=32 model.arch=rnn model.emb_dim=16
        model.enc_hidden=24 model.dec_hidden=32 model.dropout=0.1
        train.teacher_forcing=0.5 optim.lr=5e-3 schedule.kind=cosine
        schedule.warmup=30 train.eval_beam=1 train.final_beam=2
        "${common[@]}")
elif [ "$kind" = vision ]; then
  name=vit
  config=$tmp/empty.ini
  : >"$config"
  sets=(run.task=classification run.name=$name run.seed=7 data.source=toy
        data.toy_train=1000 data.toy_val=100 data.toy_test=100
        data.toy_image_size=16 data.toy_classes=4 data.batch_size=32
        data.crop_padding=2 data.hflip=true data.mixup_alpha=0.8
        data.cutmix_alpha=1.0 data.mix_prob=0.5 data.prefetch=true
        model.arch=vit model.patch=4 model.dim=32 model.depth=2 model.heads=2
        model.mlp_dim=64 model.dropout=0.1 model.drop_path=0.1
        optim.lr=2e-3 schedule.warmup=30 "${common[@]}")
elif [ "$kind" = bpe ]; then
  name=bpe
  config=$src_root/configs/translate_toy.ini
  sets=(run.name=$name run.seed=7 data.source=toy data.toy_task=grammar
        data.toy_train=2000 data.toy_val=50 data.toy_test=50
        data.tokenizer=bpe data.bpe_merges=150 data.bpe_joint=true
        data.batch_size=32 data.max_tokens=0 model.d_model=32 model.ff=64
        model.heads=2 model.encoder_layers=1 model.decoder_layers=1
        model.dropout=0.1 optim.lr=5e-3 schedule.kind=cosine
        schedule.warmup=30 train.eval_beam=1 train.final_beam=1
        "${common[@]}")
else
name=copy
config=$src_root/configs/translate_copy.ini
sets=(run.name=copy run.seed=7 data.source=toy data.toy_task=copy
      data.toy_train=2000 data.toy_val=50 data.toy_test=50 data.toy_min_len=3
      data.toy_max_len=8 data.toy_symbols=20 data.batch_size=32
      data.max_tokens=0 model.d_model=32 model.ff=64 model.heads=2
      model.encoder_layers=1 model.decoder_layers=1 model.dropout=0.1
      optim.optimizer=adam optim.lr=5e-3 schedule.kind=cosine
      schedule.warmup=30 schedule.min_lr=0 train.steps=300 train.epochs=0
      train.accum=1 train.label_smoothing=0.1 train.log_every=10
      train.eval_every=100 train.eval_sentences=0 train.eval_beam=1
      train.final_beam=1 train.checkpoint_every=20 train.keep_checkpoints=3
      train.max_minutes=0)
fi
args=()
for s in "${sets[@]}"; do args+=(--set "$s"); done
train() {  # train RUN_DIR [OPTION]...: in the background; sets $pid
  local dir=$1
  shift
  "$ctrain" train "$config" --set run.dir="$dir" "${args[@]}" "$@" \
    >>"$dir.out" 2>>"$dir.err" &
  pid=$!
  children+=("$pid")
}
digest() {
  "$ctrain" inspect "$1" 2>/dev/null | tail -n 1 |
    sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'
}
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
# wait_lines FILE N PID: until FILE has N lines (or PID exits; 120 s at most)
wait_lines() {
  local deadline=$((SECONDS + 120))
  while [ "$(lines "$1")" -lt "$2" ] && kill -0 "$3" 2>/dev/null &&
        [ $SECONDS -lt $deadline ]; do
    sleep 0.05
  done
}
start=$SECONDS

# ---- the reference: never stopped --------------------------------------------
mkdir -p "$tmp/ref" "$tmp/int"
train "$tmp/ref" --threads 1
wait "$pid"
status=$?
ref_metrics=$tmp/ref/$name/metrics.jsonl
ref_ckpt=$tmp/ref/$name/ckpt-00000300.ct
ref_digest=$(digest "$ref_ckpt")
echo "reference: status $status, digest $ref_digest, $(lines "$ref_metrics") metrics lines, $((SECONDS - start)) s"
if [ "$status" -ne 0 ] || [ -z "$ref_digest" ]; then
  bad "the reference run: $(tail -5 "$tmp/ref.err")"
  exit 1
fi

# ---- the same run, interrupted -------------------------------------------------
run=$tmp/int
metrics=$run/$name/metrics.jsonl

# (a) SIGINT once the run is past step 50: a checkpoint, exit 0, the hint.
train "$run" --threads 1
wait_lines "$metrics" 5 "$pid"
kill -INT "$pid"
wait "$pid"
status=$?
stopped=$(sed -n 's/^ctrain: stopped at step \([0-9]*\); checkpoint \(.*\)$/\1 \2/p' "$run.err" | tail -n 1)
step=${stopped%% *}
ckpt=${stopped#* }
hint=$(sed -n 's/^ctrain: continue with: ctrain train /train /p' "$run.err" | tail -n 1)
echo "[$((SECONDS - start)) s] SIGINT: status $status, stopped at step ${step:-?}"
if [ "$status" -eq 0 ] && [ -n "$step" ] && [ -f "$ckpt" ] &&
   [ "$("$ctrain" inspect "$ckpt" | tail -n 1 | sed -n 's/.*"step": \([0-9]*\),.*/\1/p')" = "$step" ]; then
  ok "SIGINT: exit 0 with a checkpoint of the step reached ($step)"
else
  bad "SIGINT: status $status: $(tail -3 "$run.err")"
fi
if [[ $hint == *"--resume auto"* && $hint == *"run.dir=$run"* ]]; then
  ok "SIGINT: the resume hint repeats the --set options"
else
  bad "SIGINT: resume hint: '$hint'"
fi

# (b) continue with the hint itself, on two threads; SIGINT again 10 steps
# on. (Few steps on 2 threads: on a busy machine OpenMP's spinning barriers
# make this tiny model many times slower there.)
have=$(lines "$metrics")
eval "\"\$ctrain\" $hint --threads 2 >>\"$run.out\" 2>>\"$run.err\" &"
pid=$!
children+=("$pid")
wait_lines "$metrics" $((have + 1)) "$pid"
kill -INT "$pid" 2>/dev/null
wait "$pid"
status=$?
echo "[$((SECONDS - start)) s] SIGINT on 2 threads: status $status, $(grep -c '^ctrain: stopped' "$run.err") stops so far"
if [ "$status" -eq 0 ] && grep -q "resuming from .*ckpt-0*$step.ct" "$run.err"; then
  ok "the hint resumes the run (2 threads), SIGINT stops it again"
else
  bad "resume from the hint: status $status: $(tail -3 "$run.err")"
fi

# (c) SIGINT twice: the second one leaves at once (status 130) or the
# checkpoint of the first was already written (status 0).
train "$run" --threads 1 --resume auto
have=$(lines "$metrics")
wait_lines "$metrics" $((have + 1)) "$pid"
kill -INT "$pid" 2>/dev/null
sleep 0.0$((RANDOM % 10))
kill -INT "$pid" 2>/dev/null
wait "$pid"
status=$?
echo "[$((SECONDS - start)) s] SIGINT twice: status $status"
if [ "$status" -eq 130 ] || [ "$status" -eq 0 ]; then ok "SIGINT twice: status $status"
else bad "SIGINT twice: status $status: $(tail -3 "$run.err")"; fi

# (d) SIGKILL at random moments, each followed by --resume auto: 0-4
# metrics lines on (0-2 on 2 threads; 0: during startup), then 0-90 ms more,
# which sometimes lands in validation or in a checkpoint being written.
for k in 1 2 3; do
  threads=$((k == 2 ? 2 : 1))
  extra=$((RANDOM % (threads == 2 ? 3 : 5)))
  delay=$((RANDOM % 10))
  train "$run" --threads "$threads" --resume auto
  wait_lines "$metrics" $(($(lines "$metrics") + extra)) "$pid"
  sleep "0.0$delay"
  if kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null
    echo "[$((SECONDS - start)) s] SIGKILL $k: $extra lines + ${delay}0 ms on $threads threads, at $(lines "$metrics") metrics lines"
  else
    wait "$pid"
    echo "[$((SECONDS - start)) s] SIGKILL $k: the run had already ended (status $?)"
  fi
done

# (d2) the run folder's lock: while a run trains, a second `ctrain train`
# on its folder is refused naming the holder's pid (with or without
# --resume) before it reads or writes anything there; readers (inspect) need no lock. The lock
# dies with its process: the kill -9 above left one behind, and every
# resume since took the folder.
train "$run" --threads 1 --resume auto
first=$pid
wait_lines "$metrics" $(($(lines "$metrics") + 1)) "$first"
for resume in "--resume auto" ""; do
  # shellcheck disable=SC2086
  "$ctrain" train "$config" --set run.dir="$run" "${args[@]}" --threads 1 \
    $resume >"$tmp/second.out" 2>"$tmp/second.err"
  status=$?
  if ! kill -0 "$first" 2>/dev/null; then
    echo "note: the first run ended before the second started; lock not tested"
  elif [ "$status" -eq 1 ] &&
       grep -q "^ctrain: error: $run/$name is in use by another ctrain train (pid $first)" "$tmp/second.err"; then
    ok "lock: a second train ${resume:-(new run)} is refused, naming pid $first"
  else
    bad "lock: second train ${resume:-(new run)}: status $status: $(head -c 300 "$tmp/second.err")"
  fi
done
if "$ctrain" inspect "$(ls "$run/$name"/ckpt-*.ct | tail -n 1)" >/dev/null 2>&1; then
  ok "lock: inspect reads a locked run"
else
  bad "lock: inspect of a locked run failed"
fi
kill -INT "$first" 2>/dev/null
wait "$first"
if grep -q "^ctrain: stopped at step" "$run.err"; then
  ok "lock: the first run went on and stopped cleanly"
else
  bad "lock: the first run: $(tail -3 "$run.err")"
fi

# (e) to the end.
train "$run" --threads 1 --resume auto
wait "$pid"
status=$?
final=$(tail -n 1 "$run.out")
digest_int=$(digest "$run/$name/ckpt-00000300.ct")
echo "[$((SECONDS - start)) s] interrupted run: status $status, digest $digest_int, $(grep -c '^ctrain: resuming' "$run.err") resumes"
if [ "$status" -eq 0 ] && [ "$digest_int" = "$ref_digest" ]; then
  ok "the resumed run ends with the same parameters ($digest_int)"
else
  bad "parameters differ: $digest_int vs $ref_digest (status $status): $(tail -3 "$run.err")"
fi
if cmp -s "$ref_metrics" "$metrics"; then
  ok "metrics.jsonl is byte-identical to the uninterrupted run's"
else
  bad "metrics.jsonl differs: $(diff "$ref_metrics" "$metrics" | head -8)"
fi
strip() { sed 's/"run_dir": "[^"]*", "checkpoint": "[^"]*", //' <<<"$1"; }
if [ "$(strip "$final")" = "$(strip "$(tail -n 1 "$tmp/ref.out")")" ]; then
  ok "the final metrics line matches"
else
  bad "final lines differ: $final"
fi
leftovers=$(cd "$run/$name" && ls | grep '\.tmp\.' | tr '\n' ' ')
[ -n "$leftovers" ] && echo "note: temporary files left by SIGKILL: $leftovers"

# (f) resuming a finished run: no new lines, the same final line.
train "$run" --threads 1 --resume auto
wait "$pid"
status=$?
if [ "$status" -eq 0 ] && cmp -s "$ref_metrics" "$metrics" &&
   [ "$(strip "$(tail -n 1 "$run.out")")" = "$(strip "$final")" ]; then
  ok "--resume auto of a finished run changes nothing"
else
  bad "resuming the finished run: status $status: $(diff "$ref_metrics" "$metrics" | head -4)"
fi

echo "resume: $fails failed ($((SECONDS - start)) s, RESUME_SEED=$seed)"
[ "$fails" -eq 0 ]
