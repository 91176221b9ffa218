// The pieces both gemm drivers use the same way: per-thread packing
// buffers, how many threads a call gets, the split of C into rectangles of
// whole tiles, and the scaling of C when there is no product to add.
#include "core/gemm_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t ct_gemm_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// ---------------------------------------------------------------------------
// Packing buffers: grown on demand and kept for the life of the thread
// (OpenMP reuses its worker threads, so steady state allocates nothing).

// Every packing buffer is also listed here, so that it stays reachable
// after its OpenMP thread exits (the pool shrinks when the thread count
// does) instead of turning into a leak. Buffers only grow, so this is
// touched a handful of times per thread and process.
static float **scratch_registry;
static size_t scratch_registry_n, scratch_registry_cap;

static bool scratch_register(float *fresh, float *old) {
  bool ok = true;
#pragma omp critical(ct_gemm_scratch)
  {
    size_t i = 0;
    while (old && i < scratch_registry_n && scratch_registry[i] != old) i++;
    if (old && i < scratch_registry_n) {
      scratch_registry[i] = fresh;  // replace in place
    } else {
      if (scratch_registry_n == scratch_registry_cap) {
        size_t cap = scratch_registry_cap ? 2 * scratch_registry_cap : 16;
        float **r = realloc(scratch_registry, cap * sizeof *r);
        if (r) {
          scratch_registry = r;
          scratch_registry_cap = cap;
        }
      }
      if (scratch_registry_n < scratch_registry_cap)
        scratch_registry[scratch_registry_n++] = fresh;
      else
        ok = false;
    }
  }
  return ok;
}

float *ct_gemm_scratch_get(ct_gemm_scratch *s, size_t n) {
  if (n > s->cap) {
    size_t cap = n + n / 4;
    cap = (cap + 15) & ~(size_t)15;  // aligned_alloc: size % 64 bytes == 0
    float *p = aligned_alloc(64, cap * sizeof(float));
    if (!p) return NULL;
    if (!scratch_register(p, s->buf)) {
      free(p);
      return NULL;
    }
    free(s->buf);
    s->buf = p;
    s->cap = cap;
  }
  return s->buf;
}

// ---------------------------------------------------------------------------
// Splitting the work over threads.

int ct_gemm_threads(const ct_gemm_call *c) {
  if (omp_in_parallel()) return 1;
  double work = (double)c->M * c->N * (c->K > 0 ? c->K : 1) * c->batch;
  return work < 32768.0 ? 1 : omp_get_max_threads();
}

bool ct_gemm_whole_matrices(int threads, int64_t batch) {
  return threads <= 1 || batch % threads == 0 || batch >= 8 * threads;
}

ct_gemm_grid ct_gemm_grid_new(const ct_gemm_call *c, int mr, int nr, int64_t mt,
                              int64_t nt) {
  ct_gemm_grid g = {.mr = mr, .nr = nr};
  g.mtiles = (c->M + mr - 1) / mr;
  g.ntiles = (c->N + nr - 1) / nr;
  g.mt = mt < g.mtiles ? mt : g.mtiles;
  g.nt = nt < g.ntiles ? nt : g.ntiles;
  g.tasks = c->batch * g.mt * g.nt;
  return g;
}

ct_gemm_rect ct_gemm_grid_rect(const ct_gemm_grid *g, const ct_gemm_call *c,
                               int64_t t) {
  ct_gemm_rect r;
  r.b = t / (g->mt * g->nt);
  int64_t k = t % (g->mt * g->nt), im = k / g->nt, in = k % g->nt;
  r.i0 = im * g->mtiles / g->mt * g->mr;
  r.i1 = (im + 1) * g->mtiles / g->mt * g->mr;
  r.j0 = in * g->ntiles / g->nt * g->nr;
  r.j1 = (in + 1) * g->ntiles / g->nt * g->nr;
  if (r.i1 > c->M) r.i1 = c->M;
  if (r.j1 > c->N) r.j1 = c->N;
  return r;
}

void ct_gemm_scale_c(int64_t M, int64_t N, float beta, const float *bias,
                     float *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    float *row = C + i * ldc;
    if (beta == 0.0f)
      memset(row, 0, (size_t)N * sizeof(float));
    else if (bias)
      for (int64_t j = 0; j < N; j++) row[j] = beta * bias[j];
    else if (beta != 1.0f)
      for (int64_t j = 0; j < N; j++) row[j] *= beta;
  }
}
