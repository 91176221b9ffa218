// Thread count: a thin layer over OpenMP that also reads CT_THREADS.
#include "core/threads.h"

#include <omp.h>
#include <stdlib.h>

void ct_set_threads(int n) { omp_set_num_threads(n < 1 ? 1 : n); }

int ct_get_threads(void) { return omp_get_max_threads(); }

static int env_threads(const char *name) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  long n = strtol(s, &end, 10);
  return (*end == '\0' && n >= 1 && n <= 4096) ? (int)n : 0;
}

int ct_threads_from_env(void) { return ct_threads_from_env_shared(1); }

int ct_threads_from_env_shared(int sharers) {
  int n = env_threads("CT_THREADS");
  if (!n) n = env_threads("OMP_NUM_THREADS");
  if (!n) n = omp_get_num_procs() / (sharers > 1 ? sharers : 1);
  ct_set_threads(n);
  return ct_get_threads();
}

int ct_threads_available(void) { return omp_get_num_procs(); }
