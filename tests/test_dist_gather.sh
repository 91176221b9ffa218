#!/usr/bin/env bash
# The differentiable all-gather's gradient check (test_grad_dist_gather)
# as one process and under mpirun with 2 and 3 ranks (skipped under mpirun
# when ctrain was built without MPI).
#
# usage: test_dist_gather.sh TEST_BINARY CTRAIN
set -u
prog=$1 ctrain=$2
"$prog" || exit 1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/mpi_env.sh"
mpi_env >/dev/null || { echo "no MPI: one process only"; exit 0; }
# Under AddressSanitizer: Open MPI's own allocations, never freed, are
# suppressed (as in tests/test_mpi.sh; naming them needs the slow unwinder).
export LSAN_OPTIONS="suppressions=$here/lsan_mpi.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
for n in 2 3; do
  "$launcher" -np "$n" --bind-to none "$prog" || exit 1
done
echo "all passed"
