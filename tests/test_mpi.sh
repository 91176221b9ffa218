#!/usr/bin/env bash
# Data-parallel training over MPI (train/data_parallel.h): N ranks with
# train.accum = A end with the params_digest and the metrics.jsonl of one
# process with train.accum = N·A.
#
# usage: test_mpi.sh CTRAIN SOURCE_ROOT digests|resume
#   digests: tiny configs of every task (translation, ViT with dropout, drop
#            path, crops, flips, RandAugment and mixup/cutmix ramped in
#            (augment_ramp), the prefetch thread, a ResNet, DeiT taught by
#            that ResNet, DETR, the attention GRU on BPE tokens with
#            teacher forcing 0.5), at -np 2 and -np 4
#            (oversubscribed), ZeRO-1 off and on, with small gradient
#            buckets (the exchange overlaps backward) and with one bucket.
#   resume:  a run stopped at 2 ranks x accum 2 continues on 4 x 1 and on
#            one process x 4 with the same bits; a rank killed with -9 ends
#            the job within a bounded time, the last checkpoint is intact
#            and --resume auto continues; SIGUSR1 and Ctrl-C (SIGINT to
#            mpirun) checkpoint; the finished run has the reference's bits.
# Skipped (77) only when ctrain was built without MPI.
set -u
. "$(dirname "$0")/e2e_lib.sh"
src_root=$2
part=${3:-digests}
# Open MPI as root (CI), more ranks than cores (tests/mpi_env.sh).
# --bind-to none: by default Open MPI binds each rank to one core when
# np <= 2.
. "$(dirname "$0")/mpi_env.sh"
mpi_env
status=$?
[ $status -eq 77 ] && echo "skipped"
[ $status -eq 0 ] || exit $status
# Under AddressSanitizer: Open MPI's own allocations are kept to the end
# (suppressed; the full stacks that name them need the slow unwinder, since
# the MPI libraries have no frame pointers).
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_mpi.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
mpi() {  # mpi N ARGS...: ctrain ARGS on N ranks of one thread
  local n=$1
  shift
  "$launcher" -np "$n" --bind-to none "$ctrain" "$@" --threads 1
}
one() { "$ctrain" "$@" --threads 1; }
digest() {
  "$ctrain" inspect "$1" 2>/dev/null | tail -n 1 |
    sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'
}
last_ckpt() { ls "$1"/ckpt-*.ct 2>/dev/null | tail -n 1; }
start=$SECONDS
empty=$tmp/empty.ini
: >"$empty"

translation=(run.seed=7 data.source=toy data.toy_task=copy data.toy_train=2000
  data.toy_val=50 data.toy_test=50 data.toy_min_len=3 data.toy_max_len=8
  data.toy_symbols=20 data.batch_size=32 data.max_tokens=0 model.d_model=32
  model.ff=64 model.heads=2 model.encoder_layers=1 model.decoder_layers=1
  model.dropout=0.1 optim.lr=5e-3 schedule.kind=cosine schedule.warmup=10
  train.steps=40 train.epochs=0 train.log_every=10 train.eval_every=20
  train.eval_beam=1 train.final_beam=2 train.checkpoint_every=1000)
vision=(run.task=classification run.seed=7 data.source=toy data.toy_train=600
  data.toy_val=70 data.toy_test=64 data.toy_image_size=16 data.toy_classes=4
  data.batch_size=16 optim.lr=2e-3 schedule.warmup=5 train.steps=24
  train.epochs=0 train.log_every=6 train.eval_every=12
  train.checkpoint_every=1000)
# The ViT's RandAugment and mixing rise over the first half of the run
# (augment_ramp): the strength of a batch follows the run's batches over all
# ranks and micro-batches.
vit=("${vision[@]}" data.crop_padding=2 data.hflip=true data.mixup_alpha=0.8
  data.cutmix_alpha=1.0 data.mix_prob=0.5 data.randaug_ops=1
  data.augment_ramp=0.5 data.prefetch=true model.patch=4
  model.dim=32 model.depth=2 model.heads=2 model.mlp_dim=64 model.dropout=0.1
  model.drop_path=0.1)
resnet=("${vision[@]}" run.seed=3 model.arch=resnet model.width=8
  model.stages=2 model.blocks=1)
deit=("${vit[@]}" model.arch=deit train.distillation=soft train.distill_tau=3)
# The attention GRU with teacher forcing 0.5 (coins keyed by the
# micro-batch) on BPE tokens (merges learned at the start on every rank).
rnn=(run.seed=7 data.source=toy data.toy_train=200 data.toy_val=10
  data.toy_test=10 data.batch_size=8 data.tokenizer=bpe data.bpe_merges=30
  model.arch=rnn model.emb_dim=16 model.enc_hidden=16 model.dec_hidden=16
  train.teacher_forcing=0.5 schedule.warmup=5 train.steps=20 train.epochs=0
  train.log_every=5 train.eval_every=10 train.final_beam=2
  train.checkpoint_every=1000)
detr=(run.task=detection run.seed=7 data.source=toy data.toy_train=64
  data.toy_val=20 data.toy_image_size=32 data.toy_classes=3 data.batch_size=4
  data.hflip=true model.d_model=32 model.heads=2 model.ff=64
  model.encoder_layers=1 model.decoder_layers=2 model.width=8 model.stages=2
  model.blocks=1 model.queries=8 model.dropout=0.1 optim.lr=1e-3
  schedule.warmup=5 train.steps=12 train.epochs=0 train.log_every=4
  train.eval_every=6 train.checkpoint_every=1000)

# same_bits NAME CONFIG STEPS SET...: references on one process with accum
# 2 and 4, then the data-parallel runs that must equal them.
same_bits() {
  local name=$1 config=$2 steps=$3
  shift 3
  local args=() s
  for s in "$@"; do args+=(--set "$s"); done
  local dir=$tmp/$name ck
  ck=$(printf 'ckpt-%08d.ct' "$steps")
  local a
  for a in 2 4; do
    one train "$config" "${args[@]}" --set run.dir="$dir" --set run.name=one$a \
      --set train.accum=$a >"$dir.one$a.out" 2>"$dir.one$a.err" ||
      bad "$name: one process, accum $a: $(tail -2 "$dir.one$a.err")"
  done
  # ranks accum ZeRO bucket_mb
  local runs=("2 1 false 0.01" "2 1 true 0" "4 1 false 0" "4 1 true 0.004")
  [ "$name" = translation ] && runs+=("2 2 true 0.01")
  local r n acc zero mb k run
  for r in "${runs[@]}"; do
    read -r n acc zero mb <<<"$r"
    k=$((n * acc))
    run=np${n}x${acc}${zero:0:1}
    mpi "$n" train "$config" "${args[@]}" --set run.dir="$dir" \
      --set run.name=$run --set train.accum=$acc \
      --set train.shard_optimizer=$zero --set train.bucket_mb=$mb \
      >"$dir.$run.out" 2>"$dir.$run.err"
    local status=$? want got
    want=$(digest "$dir/one$k/$ck")
    got=$(digest "$dir/$run/$ck")
    if [ $status -eq 0 ] && [ -n "$got" ] && [ "$got" = "$want" ] &&
      cmp -s "$dir/one$k/metrics.jsonl" "$dir/$run/metrics.jsonl"; then
      ok "$name: $n ranks x accum $acc (ZeRO-1 $zero, buckets $mb MB) = one process x accum $k ($got, metrics.jsonl identical)"
    else
      bad "$name: $n ranks x accum $acc (ZeRO-1 $zero): status $status, digest '$got' vs '$want': $(diff "$dir/one$k/metrics.jsonl" "$dir/$run/metrics.jsonl" | head -3) $(tail -3 "$dir.$run.err")"
    fi
  done
  # Rank 0 alone writes: one banner, one final line.
  expect "$name: one banner and one final JSON line from 4 ranks" \
    '[ "$(grep -c "^ctrain: .* parameters" "$dir.np4x1f.err")" = 1 ] &&
     [ "$(grep -c "^{\"run_dir\"" "$dir.np4x1f.out")" = 1 ]'
  # ZeRO-1: rank 0 holds a share of the moments.
  local full shard
  full=$(sed -n 's/.*optimizer state \([0-9.e+-]*\) MB per rank.*/\1/p' "$dir.np4x1f.err")
  shard=$(sed -n 's/.*optimizer state \([0-9.e+-]*\) MB per rank.*/\1/p' "$dir.np4x1t.err")
  expect "$name: ZeRO-1 on 4 ranks: rank 0's moments $shard MB of $full MB" \
    'awk -v s="$shard" -v f="$full" "BEGIN { exit !(s > 0 && s <= 0.6 * f) }"'
}

if [ "$part" = digests ]; then
  same_bits translation "$src_root/configs/translate_copy.ini" 40 "${translation[@]}"
  same_bits vit "$empty" 24 "${vit[@]}"
  same_bits resnet "$empty" 24 "${resnet[@]}"
  # DeiT, taught by the one-process ResNet (frozen, eval mode).
  same_bits deit "$empty" 24 "${deit[@]}" model.teacher="$tmp/resnet/one2"
  expect "the teacher was not changed by the DeiT runs" \
    '[ "$(digest "$tmp/resnet/one2/ckpt-00000024.ct")" = "$(digest "$tmp/resnet/np2x1f/ckpt-00000024.ct")" ]'
  same_bits detr "$empty" 12 "${detr[@]}"
  same_bits rnn "$empty" 20 "${rnn[@]}"
  # accum 3 on 2 ranks is not a power of two: said at the start.
  args=()
  for s in "${translation[@]}"; do args+=(--set "$s"); done
  mpi 2 train "$src_root/configs/translate_copy.ini" "${args[@]}" \
    --set run.dir="$tmp/odd" --set train.accum=3 --set train.steps=12 \
    >"$tmp/odd.out" 2>"$tmp/odd.err"
  expect "accum 3 on 2 ranks: a warning that the bits differ from one process" \
    'grep -q "accum 3 is not a power of two" "$tmp/odd.err"'
  # A non-finite loss: every rank stops at that step; rank 0 says so, once.
  mpi 2 train "$src_root/configs/translate_copy.ini" "${args[@]}" \
    --set run.dir="$tmp/nan" --set optim.lr=1e30 --set train.steps=20 \
    >"$tmp/nan.out" 2>"$tmp/nan.err"
  status=$?
  expect "a non-finite loss on 2 ranks: status $status, one message naming the step" \
    '[ $status -ne 0 ] && [ "$(grep -c "^ctrain: error: .*non-finite" "$tmp/nan.err")" = 1 ]'
  # A time budget on 2 ranks: every rank trains rank 0's plan, and the
  # config.ini it wrote, on one process with accum 2, gives the same bits.
  args=()
  for s in "${vit[@]}" train.steps=100000 train.max_minutes=0.02; do
    args+=(--set "$s")
  done
  mpi 2 train "$empty" "${args[@]}" --set run.dir="$tmp/budget" \
    --set run.name=np2 >"$tmp/budget.np2.out" 2>"$tmp/budget.np2.err"
  status=$?
  planned=$(sed -n 's/.*; planned \([0-9]*\) steps, what fits.*/\1/p' "$tmp/budget.np2.err")
  expect "a budget on 2 ranks: one plan ($planned steps), said once" \
    '[ $status -eq 0 ] && [ -n "$planned" ] && [ "$(grep -c "a step takes" "$tmp/budget.np2.err")" = 1 ]'
  one train "$tmp/budget/np2/config.ini" --set run.name=one2 \
    --set train.accum=2 >"$tmp/budget.one2.out" 2>"$tmp/budget.one2.err"
  ck=$(printf 'ckpt-%08d.ct' "${planned:-0}")
  expect "the budgeted 2-rank run = its config.ini on one process x accum 2" \
    '[ -n "$(digest "$tmp/budget/np2/$ck")" ] && [ "$(digest "$tmp/budget/np2/$ck")" = "$(digest "$tmp/budget/one2/$ck")" ] && cmp -s "$tmp/budget/np2/metrics.jsonl" "$tmp/budget/one2/metrics.jsonl"'
  # Commands other than train run as one process.
  mpi 2 inspect "$tmp/translation/one2/ckpt-00000040.ct" >"$tmp/inspect.out" 2>"$tmp/inspect.err"
  status=$?
  expect "inspect under mpirun -np 2: refused (status $status)" \
    '[ $status -ne 0 ] && grep -q "only train is data-parallel" "$tmp/inspect.err"'
  echo "mpi digests: $fails failed ($((SECONDS - start)) s)"
  [ "$fails" -eq 0 ]
  exit
fi

# ---- resume ---------------------------------------------------------------------
args=()
for s in "${translation[@]}" train.steps=300 train.eval_every=100 \
  train.log_every=10 train.checkpoint_every=20 train.keep_checkpoints=20; do
  args+=(--set "$s")
done
config=$src_root/configs/translate_copy.ini
run() {  # run N ACCUM DIR [OPTION]...: in the background; sets $pid
  local n=$1 acc=$2 dir=$3
  shift 3
  if [ "$n" = 0 ]; then
    "$ctrain" train "$config" "${args[@]}" --set run.dir="$dir" \
      --set run.name=x --set train.accum="$acc" --threads 1 "$@" \
      >>"$dir.out" 2>>"$dir.err" &
  else
    "$launcher" -np "$n" --bind-to none "$ctrain" train "$config" "${args[@]}" \
      --set run.dir="$dir" --set run.name=x --set train.accum="$acc" \
      --threads 1 "$@" >>"$dir.out" 2>>"$dir.err" &
  fi
  pid=$!
}
wait_file() {  # wait_file PATH PID: until PATH exists or PID ends (120 s)
  local deadline=$((SECONDS + 120))
  while [ ! -e "$1" ] && kill -0 "$2" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
    sleep 0.05
  done
}
next_ckpt() {  # next_ckpt DIR CKPT: the periodic checkpoint after CKPT
  local step=$((10#$(basename "$2" .ct | tr -dc 0-9)))
  printf '%s/ckpt-%08d.ct' "$1" $(((step / 20 + 1) * 20))
}
ck300=ckpt-00000300.ct
mkdir -p "$tmp/ref"
run 0 4 "$tmp/ref"
wait "$pid"
ref=$(digest "$tmp/ref/x/$ck300")
[ -n "$ref" ] || { bad "the reference (one process, accum 4): $(tail -3 "$tmp/ref.err")"; exit 1; }
echo "reference: $ref ($((SECONDS - start)) s)"

# 2 x 2 to the end; then its checkpoint of step 100 continued on 4 x 1 and
# on one process x 4.
run 2 2 "$tmp/x"
wait "$pid"
expect "2 ranks x accum 2 = one process x accum 4" '[ "$(digest "$tmp/x/x/$ck300")" = "$ref" ]'
for v in "4 1" "0 4"; do
  read -r n acc <<<"$v"
  d=$tmp/from2x2to$n
  mkdir -p "$d"
  cp -r "$tmp/x/x" "$d/x"
  for f in "$d"/x/ckpt-*.ct; do  # as if it had stopped at step 100
    step=$(basename "$f" .ct | tr -dc 0-9)
    [ $((10#$step)) -gt 100 ] && rm "$f"
  done
  run "$n" "$acc" "$d" --resume auto
  wait "$pid"
  expect "stopped at 2 x 2 (step 100), continued on ${n/#0/1 process} x $acc: the same bits and metrics.jsonl" \
    'grep -q "resuming from .*ckpt-00000100.ct" "$d.err" &&
     [ "$(digest "$d/x/$ck300")" = "$ref" ] &&
     cmp -s "$tmp/ref/x/metrics.jsonl" "$d/x/metrics.jsonl"'
done

# A rank killed with -9: the job ends, with the launcher naming the rank.
k=$tmp/k
mkdir -p "$k"
run 2 2 "$k"
wait_file "$k/x/ckpt-00000060.ct" "$pid"
victim=$(pgrep -P "$pid" | tail -n 1)
t0=$SECONDS
if [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null; then
  wait "$pid"
  status=$?
  took=$((SECONDS - t0))
  expect "a killed rank ends the job (status $status after ${took} s, at most 60)" \
    '[ $status -ne 0 ] && [ $took -le 60 ]'
  expect "the launcher says which rank died" \
    'grep -qi "rank [0-9].*\(signal 9\|killed\)" "$k.err"'
  latest=$(last_ckpt "$k/x")
  expect "the last checkpoint is intact ($(basename "$latest"))" \
    '[ -n "$(digest "$latest")" ]'
else
  bad "could not kill a rank (pid '$victim'; the run may have ended: $(tail -2 "$k.err"))"
  wait "$pid"
fi

# --resume auto after the kill; SIGUSR1 (which Open MPI passes to the
# ranks) stops it with a checkpoint and status 0.
have=$(last_ckpt "$k/x")
run 2 2 "$k" --resume auto
next=$(next_ckpt "$k/x" "$have")
wait_file "$next" "$pid"
kill -USR1 "$pid" 2>/dev/null
wait "$pid"
status=$?
expect "SIGUSR1 to mpirun: a checkpoint, status $status = 0, the resume hint" \
  '[ $status -eq 0 ] && grep -q "^ctrain: stopped at step" "$k.err" &&
   grep -q "continue with: mpirun -np 2 --bind-to none ctrain train" "$k.err"'

# To the end: the reference's bits and metrics.
run 2 2 "$k" --resume auto
wait "$pid"
expect "after the kill and the stop, the run ends with the reference's bits and metrics.jsonl" \
  '[ "$(digest "$k/x/$ck300")" = "$ref" ] &&
   cmp -s "$tmp/ref/x/metrics.jsonl" "$k/x/metrics.jsonl"'

# Ctrl-C (SIGINT to mpirun): Open MPI 4 sends the ranks SIGTERM after
# odls_base_sigkill_timeout seconds and SIGKILL as long again after that
# (1 s by default; 3 here, as the README says to set it longer than a step
# and a checkpoint). The ranks write a checkpoint in between. (Job control:
# a background job of a script has SIGINT ignored, and mpirun keeps it so;
# a terminal's Ctrl-C reaches mpirun alone, since Open MPI puts each rank in
# a process group of its own.)
c=$tmp/c
mkdir -p "$c"
set -m
export OMPI_MCA_odls_base_sigkill_timeout=3
run 2 2 "$c" --set train.steps=100000
unset OMPI_MCA_odls_base_sigkill_timeout
set +m
wait_file "$c/x/ckpt-00000040.ct" "$pid"
kill -INT "$pid" 2>/dev/null
wait "$pid"
stopped=$(sed -n 's/^ctrain: stopped at step \([0-9]*\); checkpoint \(.*\)$/\2/p' "$c.err")
expect "Ctrl-C to mpirun: the ranks stop with a checkpoint ($(basename "$stopped"))" \
  '[ -n "$stopped" ] && [ -n "$(digest "$stopped")" ]'
echo "mpi resume: $fails failed ($((SECONDS - start)) s)"
[ "$fails" -eq 0 ]
