#!/usr/bin/env bash
# Bad input to the ctrain program's translation commands: every kind exits 1
# (runtime) or 2 (usage) with a "ctrain: error:" message that names the
# file, line, key or option at fault, never dies of a signal, and never
# damages existing outputs (the run folder's checksums are compared after
# every failure).
#
# usage: test_translate_errors.sh CTRAIN [SOURCE_ROOT]
set -u
. "$(dirname "$0")/e2e_lib.sh"
src_root=${2:-$(cd "$(dirname "$0")/.." && pwd)}
config=$src_root/configs/translate_copy.ini
cd "$tmp" || exit 1

# check DESC STATUS REGEX -- COMMAND...: COMMAND exits STATUS (a number or
# an alternation like "1|2"), its stderr has a "ctrain: error:" line matching
# the extended REGEX, and nothing dumped core.
check() {
  local what=$1 want=$2 text=$3
  shift 4
  local status
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  status=$?
  local err
  err=$(head -c 600 "$tmp/err")
  if [ "$status" -ge 128 ]; then
    bad "$what: killed by signal $((status - 128)): $err"
  elif ! [[ $status =~ ^($want)$ ]]; then
    bad "$what: status $status (want $want): $err"
  elif ! grep -Eq -- "^ctrain: error: .*($text)" "$tmp/err"; then
    bad "$what: no 'ctrain: error:' message matching /$text/: $err"
  else
    ok "$what"
  fi
}

# A small valid run to damage: 20 steps, checkpoints at 10 and 20.
base=(--set run.dir="$tmp/runs" --set run.name=good --set run.seed=1
      --set data.source=toy --set data.toy_task=copy --set data.toy_train=200
      --set data.toy_val=20 --set data.toy_test=20 --set data.toy_max_len=8
      --set data.toy_symbols=20 --set model.d_model=16 --set model.ff=32
      --set model.heads=2 --set model.encoder_layers=1
      --set model.decoder_layers=1 --set model.dropout=0.1
      --set train.steps=20 --set train.checkpoint_every=10
      --set train.eval_every=0 --set train.log_every=5
      --set train.final_beam=1 --set schedule.kind=constant
      --set schedule.warmup=0 --set optim.lr=1e-3 --set train.max_minutes=0)
if ! "$ctrain" train "$config" "${base[@]}" >"$tmp/good.out" 2>"$tmp/good.err"; then
  echo "FAIL: the reference run: $(tail -5 "$tmp/good.err")"
  exit 1
fi
run=$tmp/runs/good
ckpt=$run/ckpt-00000020.ct
ckpt10=$run/ckpt-00000010.ct
sums() { (cd "$run" && cksum -- * | sort); }
reference=$(sums)
intact() {  # intact DESC: the run folder is as the reference run left it
  local now
  now=$(sums)
  if [ "$now" = "$reference" ]; then ok "$1: outputs intact"
  else bad "$1: the run folder changed: $(diff <(echo "$reference") <(echo "$now") | head -6)"; fi
}
no_dir() {  # no_dir DESC DIR: a failed start made no run folder
  if [ -e "$2" ]; then bad "$1: left $2 behind"; else ok "$1: no run folder made"; fi
}

# ---- configs -----------------------------------------------------------------
printf '[run]\nname = x\n[train]\nstepz = 4\n' >unknown_key.ini
check "unknown key in a config file: file, line, suggestion" 1 \
  "unknown_key\.ini:4: .*'stepz'.*did you mean 'steps'" -- \
  "$ctrain" train unknown_key.ini --set run.dir="$tmp/x"
check "unknown key with --set: suggestion" 1 \
  "--set train\.stepz=5: .*'stepz'.*did you mean 'steps'" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set train.stepz=5
printf '[model]\nd_model = 3x\n' >bad_int.ini
check "bad integer in a config file: file, line, key, value" 1 \
  "bad_int\.ini:2: \[model\] d_model = '3x': expected an integer" -- \
  "$ctrain" train bad_int.ini --set run.dir="$tmp/x"
check "bad float with --set" 1 "\[optim\] lr = 'fast'" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set optim.lr=fast
check "bad boolean with --set" 1 "\[data\] lowercase" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set data.lowercase=perhaps
check "bad choice lists the choices" 1 \
  "\[data\] toy_task = 'copyy': expected one of copy, reverse, grammar" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set data.toy_task=copyy
printf '[modle]\nd_model = 32\n' >bad_section.ini
check "unknown section in a config file: file, line, suggestion" 1 \
  "bad_section\.ini:1: unknown section \[modle\].*\[model\]" -- \
  "$ctrain" train bad_section.ini --set run.dir="$tmp/x"
check "unknown section with --set" 1 "--set foo\.steps=3: unknown section \[foo\]" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set foo.steps=3
printf '[model]\nd_model 32\n' >no_equals.ini
check "a line that is neither key = value nor [section]" 1 "no_equals\.ini:2: " -- \
  "$ctrain" train no_equals.ini --set run.dir="$tmp/x"
check "missing config file" 1 "$tmp/nope\.ini: cannot open" -- \
  "$ctrain" train "$tmp/nope.ini"
check "a folder as config" 1 "$tmp: " -- "$ctrain" train "$tmp"
head -c 256 /dev/urandom >binary.ini
printf '\0' >>binary.ini
check "a binary config file" 1 "binary\.ini" -- \
  "$ctrain" train binary.ini --set run.dir="$tmp/x"
check "bad --set (no =)" "1|2" "--set garbage" -- \
  "$ctrain" train "$config" --set garbage
check "[train] steps = 0" 1 "nothing to train" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set train.steps=0
check "[train] threads out of range" 1 "\[train\] threads" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set train.threads=100000
check "heads not dividing d_model" 1 "not a multiple of heads = 3" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set model.d_model=16 \
  --set model.heads=3 --set train.steps=2
# Both divided by zero (SIGFPE) before the settings were checked.
check "[train] accum = 0" 1 "--set train\.accum=0: \[train\] accum = '0': must be in 1\.\." -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set train.accum=0 \
  --set train.epochs=1
check "[train] log_every = 0" 1 "--set train\.log_every=0: \[train\] log_every = '0': must be in 1\.\." -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set train.log_every=0
# Integers have ranges, checked as they are read: 2^32 + 2 layers built 2
# (config.ini said 4294967298); INT64_MAX sentences per batch overflowed.
check "[model] encoder_layers = 2^32 + 2" 1 \
  "\[model\] encoder_layers = '4294967298': must be in 1\.\.1000" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" \
  --set model.encoder_layers=4294967298
printf '[data]\nbatch_size = 9223372036854775807\n' >big_batch.ini
check "[data] batch_size = INT64_MAX: file, line, key" 1 \
  "big_batch\.ini:2: \[data\] batch_size = '9223372036854775807': must be in 0\.\." -- \
  "$ctrain" train big_batch.ini --set run.dir="$tmp/x"
# An empty run.dir wrote the run into the filesystem root.
check "[run] dir empty" 1 "\[run\] dir is empty" -- \
  "$ctrain" train "$config" --set run.dir= --set train.steps=2
check "[run] name empty" 1 "\[run\] name is empty" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set run.name=
# Values that can only give non-finite training, or meant nothing.
check "[optim] eps = 0" 1 "\[optim\] eps = 0: must be positive" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set optim.eps=0
check "[optim] clip_norm = -1" 1 "\[optim\] clip_norm = -1: must not be negative" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set optim.clip_norm=-1
check "run.name with invalid UTF-8" 1 "invalid UTF-8 byte 0xe9" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set "run.name=caf$(printf '\351')"
check "a control character in a config value" 1 "control character U\+001B" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set "run.name=a$(printf '\033')[31m"
# A file of bare CR line endings that starts with a comment was one long
# comment: every key took its default (here steps = 0 must be seen).
printf '# CR only\r[train]\rsteps = 0\r' >cr.ini
check "a CR-only config file is read line by line" 1 "nothing to train" -- \
  "$ctrain" train cr.ini --set run.dir="$tmp/x"
check "/dev/zero as a config" 1 "/dev/zero: more than the 1048576 bytes" -- \
  "$ctrain" train /dev/zero --set run.dir="$tmp/x"
check "[train] bucket_mb < 0" 1 "translate_copy\.ini: \[train\] bucket_mb = -1: must be in \[0, 1e6\]" -- \
  "$ctrain" train "$config" --set run.dir="$tmp/x" --set train.bucket_mb=-1
no_dir "bad configs" "$tmp/x"

# ---- data files --------------------------------------------------------------
mkdir data
printf 'a b c\nd e f\ng h i\n' >data/ok.src
cp data/ok.src data/ok.tgt
printf 'a b c\nd \xff e\ng h i\n' >data/bad_utf8.src
printf 'a b c\nd e f\n' >data/short.tgt
printf 'a b\tc d\ne f\tg h\n' >data/ok.tsv
printf 'a b\tc d\ne f g h\n' >data/no_tab.tsv
files=(--set run.dir="$tmp/x" --set data.source=files --set train.steps=2
       --set schedule.kind=constant --set schedule.warmup=0
       --set model.d_model=16 --set model.ff=16 --set model.heads=2)
pair() { echo --set data.train_src="$1" --set data.train_tgt="$2" \
  --set data.val_src=data/ok.src --set data.val_tgt=data/ok.tgt; }
check "missing training file" 1 "data/nope\.src: cannot open" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/nope.src data/ok.tgt)
check "missing validation file" 1 "data/nope\.tgt: cannot open" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/ok.src data/ok.tgt) \
  --set data.val_tgt=data/nope.tgt
check "unset validation files name the keys" 1 "val_src and val_tgt" -- \
  "$ctrain" train "$config" "${files[@]}" --set data.train_src=data/ok.src \
  --set data.train_tgt=data/ok.tgt
check "invalid UTF-8 names the file and line" 1 \
  "data/bad_utf8\.src:2: invalid UTF-8" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/bad_utf8.src data/ok.tgt)
check "invalid UTF-8 in a target file" 1 "data/bad_utf8\.src:2: invalid UTF-8" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/ok.src data/bad_utf8.src)
check "mismatched line counts name both files" 1 \
  "data/ok\.src has 3 lines but data/short\.tgt has 2" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/ok.src data/short.tgt)
check "TSV line without a tab: file and line" 1 "data/no_tab\.tsv:2: no tab" -- \
  "$ctrain" train "$config" "${files[@]}" --set data.format=tsv \
  --set data.train_tsv=data/no_tab.tsv --set data.val_tsv=data/ok.tsv
check "TSV format without train_tsv" 1 "train_tsv" -- \
  "$ctrain" train "$config" "${files[@]}" --set data.format=tsv \
  --set data.val_tsv=data/ok.tsv
check "no pair within max_len" 1 \
  "translation: no training pair is within \[data\] max_len = 1 tokens$" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/ok.src data/ok.tgt) \
  --set data.max_len=1
# An empty validation file was refused only at the final evaluation, after
# all the training.
: >data/empty.src
: >data/empty.tgt
check "an empty validation file is refused before training" 1 \
  "data/empty\.src: no sentences: the validation split is empty" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/ok.src data/ok.tgt) \
  --set data.val_src=data/empty.src --set data.val_tgt=data/empty.tgt
# Trailing garbage after a gzip stream was ignored.
gzip -c data/ok.src >data/garbage.src.gz
printf 'junk' >>data/garbage.src.gz
check "trailing garbage after the gzip data" 1 \
  "data/garbage\.src\.gz: 4 bytes of trailing garbage after the gzip data" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/garbage.src.gz data/ok.tgt)
# A 3 MB line in a small gzip file was read until memory ran out.
head -c 3000000 /dev/zero | tr '\0' 'a' | gzip -c >data/long_line.src.gz
check "a line longer than 1 MiB" 1 \
  "data/long_line\.src\.gz:1: longer than 1048576 bytes" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/long_line.src.gz data/ok.tgt)
# Terminal escape sequences in a corpus would reach the terminal through
# the vocabulary and the translations.
printf 'a b c\nd \033[31m e\ng h i\n' >data/escape.src
check "a control character in a corpus line" 1 \
  "data/escape\.src:2: control character U\+001B at column 3" -- \
  "$ctrain" train "$config" "${files[@]}" $(pair data/escape.src data/ok.tgt)
no_dir "bad data" "$tmp/x"
# A validation sentence longer than max_len: cut to it for evaluation (with
# a warning) instead of evaluation memory growing with its square.
{ printf 'a b c\n'; for i in $(seq 300); do printf 'a%d ' "$i"; done; printf '\n'; } >data/long.src
cp data/long.src data/long.tgt
"$ctrain" train "$config" "${files[@]}" $(pair data/ok.src data/ok.tgt) \
  --set data.val_src=data/long.src --set data.val_tgt=data/long.tgt \
  --set data.max_len=20 --set run.name=long >"$tmp/out" 2>"$tmp/err"
status=$?
if [ "$status" -eq 0 ] &&
   grep -q "warning: 1 of the 2 validation pairs have a side longer than \[data\] max_len = 20 tokens: evaluation cuts them to it" "$tmp/err"; then
  ok "a long validation sentence is cut to max_len, with a warning"
else
  bad "long validation sentence: status $status: $(head -c 400 "$tmp/err")"
fi
rm -rf "$tmp/x"

# ---- an existing run ---------------------------------------------------------
check "train into an existing run without --resume refuses" 1 \
  "already holds a run.*--resume auto" -- "$ctrain" train "$config" "${base[@]}"
intact "existing run"
check "--resume auto with a model shape change names the key" 1 \
  "cannot resume .*\[model\] d_model differs" -- \
  "$ctrain" train "$config" "${base[@]}" --set model.d_model=32 --resume auto
intact "shape change (auto)"
check "--resume PATH with a model shape change names the key" 1 \
  "\[model\] heads differs" -- \
  "$ctrain" train "$config" "${base[@]}" --set model.heads=4 --resume "$ckpt10"
intact "shape change (path)"
check "--resume of a missing checkpoint" 1 "nope\.ct: cannot open" -- \
  "$ctrain" train "$config" "${base[@]}" --resume "$tmp/nope.ct"
intact "missing resume checkpoint"
check "a bad config while resuming" 1 "\[train\] steps = 'many'" -- \
  "$ctrain" train "$config" "${base[@]}" --set train.steps=many --resume auto
intact "bad config on resume"
check "--resume /dev/zero" 1 "/dev/zero: not a ctrain checkpoint" -- \
  "$ctrain" train "$config" "${base[@]}" --set train.steps=30 --resume /dev/zero
check "[model] init_from = /dev/zero" 1 "/dev/zero: " -- \
  "$ctrain" train "$config" "${base[@]}" --set run.name=zero \
  --set model.init_from=/dev/zero
check "--reset-optimizer without --resume" 2 "--reset-optimizer goes with --resume" -- \
  "$ctrain" train "$config" "${base[@]}" --reset-optimizer
intact "/dev/zero inputs"
# A checkpoint without the optimizer's state (here an SGD run without
# momentum, resumed with Adam) resumed silently with zeroed moments; now
# only with --reset-optimizer.
sgd=(--set run.name=sgd --set optim.optimizer=sgd --set optim.momentum=0)
"$ctrain" train "$config" "${base[@]}" "${sgd[@]}" --set train.steps=10 \
  >/dev/null 2>&1 || bad "the SGD run failed"
check "resume without the optimizer's state" 1 \
  "ckpt-00000010\.ct: no optimizer state 'optim\.0' for adam.*--reset-optimizer" -- \
  "$ctrain" train "$config" "${base[@]}" --set run.name=sgd --resume auto
if "$ctrain" train "$config" "${base[@]}" --set run.name=sgd --resume auto \
     --reset-optimizer >"$tmp/out" 2>"$tmp/err" &&
   grep -q "optimizer starts afresh" "$tmp/err" &&
   grep -q '"step": 20' "$tmp/out"; then
  ok "--reset-optimizer resumes with fresh optimizer state"
else
  bad "--reset-optimizer: $(tail -3 "$tmp/err")"
fi
# A non-finite loss stops training, names the step, keeps the last good
# checkpoint (config.ini is rewritten on resume: excluded from the check).
"$ctrain" train "$config" "${base[@]}" --set train.steps=40 \
  --set optim.lr=1e30 --resume auto >"$tmp/out" 2>"$tmp/err"
status=$?
if [ "$status" -eq 1 ] &&
   grep -Eq "^ctrain: error: non-finite loss .* at step 2[1-9]: (parameter '[a-z0-9_.]+' holds|the first non-finite activation is the output of [a-z_]+ \[)" "$tmp/err" &&
   grep -q "last good checkpoint is .*ckpt-00000020.ct" "$tmp/err"; then
  ok "non-finite loss: status 1, names the step, what went non-finite first and the last good checkpoint"
else
  bad "non-finite loss: status $status: $(head -c 400 "$tmp/err")"
fi
now=$(sums | grep -v config.ini)
if [ "$now" = "$(grep -v config.ini <<<"$reference")" ]; then
  ok "non-finite loss: checkpoints and metrics intact"
else
  bad "non-finite loss changed the run folder: $now"
fi
cp "$tmp/runs/good/config.ini" "$tmp/config.bak"
"$ctrain" train "$config" "${base[@]}" --resume auto >/dev/null 2>&1  # restores config.ini
reference=$(sums)

# ---- damaged checkpoints -----------------------------------------------------
size=$(wc -c <"$ckpt")
head -c $((size / 2)) "$ckpt" >truncated.ct
head -c 20 "$ckpt" >stub.ct
: >empty.ct
echo "just some text, not a checkpoint" >text.ct
head -c 4096 /dev/urandom >random.ct
flip() {  # flip OFFSET OUT: a copy of the checkpoint with one byte changed
  cp "$ckpt" "$2"
  local byte
  byte=$(od -A n -t u1 -j "$1" -N 1 "$ckpt" | tr -d ' ')
  printf "\\$(printf '%03o' $(((byte ^ 0x10) & 255)))" |
    dd of="$2" bs=1 seek="$1" conv=notrunc 2>/dev/null
}
flip 20 flip_header.ct
flip 40 flip_index.ct
flip $((size / 2)) flip_middle.ct
flip $((size - 3)) flip_end.ct
declare -A why=(
  [truncated.ct]="truncated" [stub.ct]="truncated|shorter" [empty.ct]="truncated|empty"
  [text.ct]="not a ctrain checkpoint" [random.ct]="not a ctrain checkpoint"
  [flip_header.ct]="corrupt" [flip_index.ct]="corrupt" [flip_middle.ct]="corrupt"
  [flip_end.ct]="corrupt" [missing.ct]="cannot open")
for f in truncated.ct stub.ct empty.ct text.ct random.ct flip_header.ct \
         flip_index.ct flip_middle.ct flip_end.ct missing.ct; do
  msg="$tmp/$f: .*(${why[$f]})"
  check "eval of $f" 1 "$msg" -- "$ctrain" eval "$tmp/$f"
  check "translate of $f" 1 "$msg" -- "$ctrain" translate "$tmp/$f" "a1 a2"
  check "inspect of $f" 1 "$msg" -- "$ctrain" inspect "$tmp/$f"
done
cp "$tmp/runs/good/ckpt-00000020.ct" export_target
sum=$(cksum <export_target)
check "export of a damaged checkpoint" 1 "flip_middle\.ct: .*corrupt" -- \
  "$ctrain" export "$tmp/flip_middle.ct" "$tmp/export_target"
if [ "$(cksum <export_target)" = "$sum" ]; then ok "a failed export leaves its target as it was"
else bad "a failed export changed its target"; fi
# forward with a zero-length tgt_in copied from a NULL buffer; a token id
# of 1e30 was cast to int (undefined).
safetensors() {  # safetensors OUT HEADER DATA_BYTES: an 8-byte length, the
  local header=$2   # header padded with spaces to 8 bytes, then the data
  while [ $(( ${#header} % 8 )) -ne 0 ]; do header="$header "; done
  local n=${#header}
  printf "$(printf '\\%03o' $((n & 255)) $(((n >> 8) & 255)) 0 0 0 0 0 0)" >"$1"
  printf '%s' "$header" >>"$1"
  printf "$3" >>"$1"
}
safetensors empty_tgt.safetensors '{"src":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},"tgt_in":{"dtype":"F32","shape":[1,0],"data_offsets":[4,4]}}' '\0\0\100\100'
check "forward with a zero-length tgt_in" 1 "forward: .*T at least 1" -- \
  "$ctrain" forward "$ckpt" empty_tgt.safetensors "$tmp/fwd_out.safetensors"
safetensors huge_id.safetensors '{"src":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},"tgt_in":{"dtype":"F32","shape":[1,1],"data_offsets":[4,8]}}' '\0\0\100\100\312\362\111\161'
check "forward with a token id of 1e30" 1 "'tgt_in' element 0 is 1e\+30, not a token id" -- \
  "$ctrain" forward "$ckpt" huge_id.safetensors "$tmp/fwd_out.safetensors"
check "export into a missing folder" 1 "$tmp/no/such/out\.safetensors" -- \
  "$ctrain" export "$ckpt" "$tmp/no/such/out.safetensors"
check "--resume of a damaged checkpoint" 1 "flip_middle\.ct: .*corrupt" -- \
  "$ctrain" train "$config" "${base[@]}" --set train.steps=30 \
  --resume "$tmp/flip_middle.ct"
intact "damaged checkpoints"

# --resume auto skips a damaged latest checkpoint (with a warning), resumes
# from the one before, and still ends where the undamaged run ended.
cp -r "$run" "$tmp/runs/damaged"
head -c $((size / 3)) "$ckpt" >"$tmp/runs/damaged/ckpt-00000020.ct"
"$ctrain" train "$config" "${base[@]}" --set run.name=damaged --resume auto \
  >"$tmp/out" 2>"$tmp/err"
status=$?
digest() { "$ctrain" inspect "$1" 2>/dev/null | tail -n 1 | sed -n 's/.*"params_digest": "\([0-9a-f]*\)".*/\1/p'; }
if [ "$status" -eq 0 ] && grep -q "warning: skipping a damaged checkpoint: .*ckpt-00000020.ct" "$tmp/err" &&
   grep -q "resuming from .*ckpt-00000010.ct" "$tmp/err" &&
   [ "$(digest "$tmp/runs/damaged/ckpt-00000020.ct")" = "$(digest "$ckpt")" ] &&
   [ -n "$(digest "$ckpt")" ]; then
  ok "--resume auto skips a damaged checkpoint and redoes its steps exactly"
else
  bad "--resume auto past a damaged checkpoint: status $status: $(head -c 600 "$tmp/err")"
fi
check "plot of a malformed metrics.jsonl names the line" 1 \
  "metrics\.jsonl:2: malformed JSON" -- bash -c \
  "mkdir -p '$tmp/plotme' && printf '{\"step\": 1, \"loss\": 2}\ngarbage\n' >'$tmp/plotme/metrics.jsonl' && '$ctrain' plot '$tmp/plotme'"
check "plot of a folder without metrics" 1 "$tmp/nothing/metrics\.jsonl: cannot open" -- \
  "$ctrain" plot "$tmp/nothing"

# ---- the command line --------------------------------------------------------
check "unknown command" 2 "unknown command 'translat'" -- "$ctrain" translat "$ckpt"
check "train: unknown option" 2 "unknown option '--bogus'" -- \
  "$ctrain" train "$config" --bogus
check "eval: unknown option" 2 "unknown option '--bogus'" -- "$ctrain" eval "$ckpt" --bogus
check "translate: unknown option" 2 "unknown option '-x'" -- "$ctrain" translate "$ckpt" -x
check "toy: unknown option" 2 "unknown option '--bogus'" -- \
  "$ctrain" toy translation --out "$tmp/toy" --bogus 3
for v in 0 -1 abc 2x 100000 ""; do
  check "train --threads '$v'" 2 "--threads wants .*'$v'" -- \
    "$ctrain" train "$config" --threads "$v"
  check "eval --threads '$v'" 2 "--threads wants .*'$v'" -- \
    "$ctrain" eval "$ckpt" --threads "$v"
done
for v in 0 65 -2 x ""; do
  check "eval --beam '$v'" 2 "--beam wants .*'$v'" -- "$ctrain" eval "$ckpt" --beam "$v"
  check "translate --beam '$v'" 2 "--beam wants .*'$v'" -- \
    "$ctrain" translate "$ckpt" --beam "$v" "a1 a2"
done
check "eval --split train" 2 "--split is val or test, not 'train'" -- \
  "$ctrain" eval "$ckpt" --split train
check "toy --task bogus" 2 "unknown task \"bogus\"" -- \
  "$ctrain" toy translation --out "$tmp/toy" --task bogus
check "toy --train 0" 2 "positive integer, not '0'" -- \
  "$ctrain" toy translation --out "$tmp/toy" --train 0
check "train without a config" 2 "train needs a CONFIG" -- "$ctrain" train
check "train with two configs" 2 "one CONFIG only" -- "$ctrain" train "$config" "$config"
check "train --set without a value" 2 "--set needs a value" -- "$ctrain" train "$config" --set
check "train --resume without a value" 2 "--resume needs a value" -- \
  "$ctrain" train "$config" --resume
check "eval without a checkpoint" 2 "eval: a checkpoint path is needed" -- "$ctrain" eval
check "eval with an extra argument" 2 "unexpected argument 'extra'" -- \
  "$ctrain" eval "$ckpt" extra
check "eval --split without a value" 2 "--split needs a value" -- "$ctrain" eval "$ckpt" --split
check "translate without a checkpoint" 2 "translate: a checkpoint path is needed" -- \
  "$ctrain" translate
check "inspect without a checkpoint" 2 "inspect takes one checkpoint" -- "$ctrain" inspect
check "inspect with two" 2 "inspect takes one checkpoint" -- "$ctrain" inspect "$ckpt" "$ckpt"
check "export without an output" 2 "export takes a checkpoint and an output" -- \
  "$ctrain" export "$ckpt"
check "plot without a folder" 2 "plot takes a run folder" -- "$ctrain" plot
check "toy without a kind" 2 "the kinds are 'translation'" -- "$ctrain" toy
check "toy without --out" 2 "needs --out DIR" -- "$ctrain" toy translation
no_dir "toy usage errors" "$tmp/toy"
intact "all of the above"

echo "translate_errors: $fails failed"
[ "$fails" -eq 0 ]
