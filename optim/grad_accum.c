// The fixed summation tree of gradient accumulation (optim/grad_accum.h).
#include "optim/grad_accum.h"

#include <stdlib.h>
#include <string.h>

// Below this many floats an add runs on one thread.
enum { ACCUM_PARALLEL_MIN = 1 << 15 };

void ct_grad_accum_init(ct_grad_accum *a, size_t n, bool copy) {
  *a = (ct_grad_accum){.n = n, .copy = copy};
}

// leaf[i] = left[i] + leaf[i]: the left operand is the earlier block.
static void add_left(float *leaf, const float *left, size_t lo, size_t hi) {
  const int64_t n = (int64_t)(hi - lo);
  float *y = leaf + lo;
  const float *x = left + lo;
#pragma omp parallel for schedule(static) if (n >= ACCUM_PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) y[i] = x[i] + y[i];
}

// Leaf (already merged) waits at level j.
static ct_status wait_at(ct_grad_accum *a, int j, float *leaf, size_t lo,
                         size_t hi) {
  if (!a->copy) {
    a->level[j] = leaf;
    return CT_OK;
  }
  if (!a->owned[j]) {
    a->owned[j] = malloc((a->n ? a->n : 1) * sizeof(float));
    if (!a->owned[j])
      return ct_error(CT_ERR_NOMEM,
                      "gradient accumulation: out of memory for a "
                      "partial sum of %zu floats",
                      a->n);
  }
  memcpy(a->owned[j] + lo, leaf + lo, (hi - lo) * sizeof(float));
  a->level[j] = a->owned[j];
  return CT_OK;
}

ct_status ct_grad_accum_add(ct_grad_accum *a, int64_t m, int64_t K, float *leaf,
                            size_t lo, size_t hi) {
  if (m < 0 || m >= K || lo > hi || hi > a->n)
    return ct_error(CT_ERR_ARG,
                    "gradient accumulation: leaf %lld of %lld, floats "
                    "[%zu, %zu) of %zu",
                    (long long)m, (long long)K, lo, hi, a->n);
  const bool last = m == K - 1;
  for (int j = 0; j < CT_GRAD_ACCUM_LEVELS; j++) {
    if ((uint64_t)m >> j == 0) break;
    if ((uint64_t)m >> j & 1u) {
      add_left(leaf, a->level[j], lo, hi);  // the block to the left waits here
    } else if (!last) {
      return wait_at(a, j, leaf, lo, hi);  // the lowest zero bit of m
    }
  }
  if (last) return CT_OK;
  // m is all ones (2^j - 1): the merged block waits one level higher.
  int j = 0;
  while ((uint64_t)m >> j) j++;
  return wait_at(a, j, leaf, lo, hi);
}

size_t ct_grad_accum_floats(const ct_grad_accum *a) {
  size_t n = 0;
  for (int j = 0; j < CT_GRAD_ACCUM_LEVELS; j++)
    if (a->owned[j]) n += a->n;
  return n;
}

void ct_grad_accum_free(ct_grad_accum *a) {
  for (int j = 0; j < CT_GRAD_ACCUM_LEVELS; j++) free(a->owned[j]);
  ct_grad_accum_init(a, 0, false);
}
