#!/usr/bin/env bash
# Data-parallel throughput on one machine: the same training run (the same
# bits) as 2 MPI ranks x 1 thread (train.accum = 1 each) and as 1 process x
# 2 threads (train.accum = 2), alternating, R repeats (and 2 ranks without
# the bucket overlap); prints the medians of each and their ratio, the bytes each rank sent per step, and a cluster
# cost model per config (ring all-reduce 2(N-1)/N x gradient bytes at 10,
# 25 and 100 Gb/s against the measured step time, for 8, 64 and 512 ranks).
#
# usage: bench/data_parallel.sh [BUILD_DIR] [--steps N] [--repeats R]
#                               [--configs "vit_fmnist translate_toy"]
#
# Each run is `ctrain train configs/C.ini` with train.steps = N (no
# validation or checkpoint before the end); its throughput is the line
# "ctrain: N steps in T s: M ms per step, R img/s" (training only, over all
# ranks). Run it on a quiet machine: on shared cores the two layouts
# compete differently with the other jobs.
set -u
cd "$(dirname "$0")/.."
build=build
steps=200
repeats=3
configs="vit_fmnist translate_toy"
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    *) build=$1; shift ;;
  esac
done
ctrain=$(cd "$build/train" && pwd)/ctrain
. tests/mpi_env.sh
mpi_env
case $? in 0) ;; 77) exit 0 ;; *) exit 1 ;; esac
export OMP_WAIT_POLICY=passive
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$("$ctrain" info | grep -E '^(ctrain|MPI)')"
echo "steps $steps, repeats $repeats, OMP_WAIT_POLICY=passive"
for c in $configs; do
  # (The warmup shortened to fit the steps: the learning rate does not
  # change the cost of a step.)
  sets=(--set train.steps="$steps" --set train.epochs=0 --set train.eval_every=0
        --set train.checkpoint_every=$((steps + 1)) --set train.max_minutes=0
        --set schedule.warmup=$((steps / 2)) --set run.dir="$tmp/$c")
  : >"$tmp/$c.one" && : >"$tmp/$c.two" && : >"$tmp/$c.late"
  for r in $(seq 1 "$repeats"); do
    "$ctrain" train "configs/$c.ini" "${sets[@]}" --set run.name=one$r \
      --set train.accum=2 --threads 2 >/dev/null 2>"$tmp/$c.one.$r.err"
    "$launcher" -np 2 --bind-to none "$ctrain" train "configs/$c.ini" \
      "${sets[@]}" --set run.name=two$r --set train.accum=1 --threads 1 \
      >/dev/null 2>"$tmp/$c.two.$r.err"
    "$launcher" -np 2 --bind-to none "$ctrain" train "configs/$c.ini" \
      "${sets[@]}" --set run.name=late$r --set train.accum=1 --threads 1 \
      --set train.bucket_mb=0 >/dev/null 2>"$tmp/$c.late.$r.err"
    for m in one two late; do
      line=$(grep "^ctrain: [0-9]* steps in" "$tmp/$c.$m.$r.err")
      [ -n "$line" ] || { echo "$c $m run $r failed: $(tail -2 "$tmp/$c.$m.$r.err")"; continue; }
      echo "$line" >>"$tmp/$c.$m"
    done
  done
  if [ ! -s "$tmp/$c.one" ] || [ ! -s "$tmp/$c.two" ] || [ ! -s "$tmp/$c.late" ]; then
    echo "$c: no measurement"
    continue
  fi
  unit=$(sed -n 's/.* \([a-z]*\/s\)$/\1/p' "$tmp/$c.one" | head -1)
  one_rate=$(awk '{ print $(NF - 1) }' "$tmp/$c.one" | median)
  two_rate=$(awk '{ print $(NF - 1) }' "$tmp/$c.two" | median)
  one_ms=$(sed -n 's/.*: \([0-9.]*\) ms per step.*/\1/p' "$tmp/$c.one" | median)
  two_ms=$(sed -n 's/.*: \([0-9.]*\) ms per step.*/\1/p' "$tmp/$c.two" | median)
  late_rate=$(awk '{ print $(NF - 1) }' "$tmp/$c.late" | median)
  params=$(sed -n 's/^ctrain: [a-z]*, \([0-9]*\) parameters.*/\1/p' "$tmp/$c.one.1.err")
  sent=$(sed -n 's/.*, \([0-9.e+-]*\) MB sent per step and rank.*/\1/p' "$tmp/$c.two.1.err")
  d1=$("$ctrain" inspect "$(ls "$tmp/$c"/one1/ckpt-*.ct | tail -1)" | tail -1)
  d2=$("$ctrain" inspect "$(ls "$tmp/$c"/two1/ckpt-*.ct | tail -1)" | tail -1)
  same=$([ "$d1" = "$d2" ] && echo "same params_digest" || echo "DIFFERENT params_digest")
  echo
  echo "$c ($params parameters), $steps steps of 2 micro-batches, medians of $repeats:"
  echo "  1 process x 2 threads (accum 2): $one_rate $unit, $one_ms ms per step"
  echo "  2 ranks x 1 thread (accum 1):    $two_rate $unit, $two_ms ms per step"
  awk -v a="$two_rate" -v b="$one_rate" 'BEGIN { printf "  ratio (2 ranks / 1 process): %.3f\n", a / b }'
  awk -v a="$late_rate" -v b="$two_rate" -v u="$unit" 'BEGIN { printf "  2 ranks, one exchange after backward (bucket_mb 0): %s %s (%.3f of the overlapped)\n", a, u, a / b }'
  echo "  $same; each rank sent $sent MB per step"
  # The cost model: one rank per node, one micro-batch each, its compute
  # time that of one micro-batch here on 2 threads (half the 1-process
  # step); ring all-reduce of the fp32 gradient, 5 us per message.
  awk -v p="$params" -v ms="$one_ms" 'BEGIN {
    g = 4 * p; t = ms / 2; bwd = t * 2 / 3
    printf "  cluster model: gradient %.2f MB, compute %.1f ms per micro-batch (backward ~%.1f ms)\n", g / 1e6, t, bwd
    printf "  %6s %9s %12s %12s %12s\n", "ranks", "MB/rank", "10 Gb/s", "25 Gb/s", "100 Gb/s"
    split("8 64 512", ns, " "); split("10 25 100", bws, " ")
    for (i = 1; i <= 3; i++) {
      n = ns[i]; bytes = 2 * (n - 1) / n * g
      line = sprintf("  %6d %9.2f", n, bytes / 1e6)
      for (j = 1; j <= 3; j++) {
        c = bytes * 8 / (bws[j] * 1e9) * 1e3 + 2 * (n - 1) * 0.005
        line = line sprintf(" %6.1f ms %s", c, c <= bwd ? "(h)" : "   ")
      }
      print line
    }
    print "  (h): hidden behind backward by the bucket overlap (comm <= backward time)"
  }'
done
