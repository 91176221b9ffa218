#!/usr/bin/env bash
# The ctrain program's command dispatch: help, version, info, and the usage
# errors (exit 2, a message on stderr naming the problem).
set -u
ctrain=$1
fails=0
check() {  # check DESCRIPTION WANT_STATUS WANT_TEXT -- COMMAND...
  local what=$1 want=$2 text=$3; shift 4
  local out status
  out=$("$@" 2>&1); status=$?
  if [ "$status" -ne "$want" ] || ! grep -q -- "$text" <<<"$out"; then
    echo "FAIL: $what: status $status (want $want), output: $out"
    fails=$((fails + 1))
  else
    echo "ok: $what"
  fi
}
check "help" 0 "usage: ctrain COMMAND" -- "$ctrain" help
check "version" 0 "^ctrain [0-9]" -- "$ctrain" --version
check "info" 0 "gemm kernel:" -- "$ctrain" info
check "info names the bf16 kernel" 0 "bf16 gemm kernel: \(amx\|avx512bf16\|emulated\)" -- "$ctrain" info
check "plot: several runs need --out" 2 "several run folders need --out" -- "$ctrain" plot a b
check "plot: a missing run is named" 1 "nowhere/metrics.jsonl" -- "$ctrain" plot nowhere b --out x.png
check "no command" 2 "usage:" -- "$ctrain"
check "unknown command" 2 "ctrain: error: unknown command 'frobnicate'" -- "$ctrain" frobnicate
CT_THREADS=3 check "CT_THREADS honoured" 0 "threads: 3" -- "$ctrain" info
check "info names the MPI library" 0 "^MPI: " -- "$ctrain" info
# A build without MPI started as one of several processes (the variable
# mpirun sets) refuses, rather than training alone into a shared folder.
if "$ctrain" info | grep -q "^MPI: none"; then
  OMPI_COMM_WORLD_SIZE=2 check "no MPI: refuses to be one of 2 ranks" 1 \
    "built without MPI (install libopenmpi-dev" -- "$ctrain" train x.ini
fi
echo "cli: $fails failed"
[ "$fails" -eq 0 ]
