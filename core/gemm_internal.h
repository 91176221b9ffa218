// What the gemm dispatcher (core/gemm.c) and its two drivers share: the
// arguments of one call, the per-thread packing buffers, the split of C
// over threads, and the entry points of the drivers (core/gemm_f32.c,
// core/gemm_bf16.c), each run with the kernels of one path. Not installed.
#ifndef CT_CORE_GEMM_INTERNAL_H
#define CT_CORE_GEMM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/gemm_bf16_kernels.h"
#include "core/gemm_f32_kernels.h"

// The arguments of a public call (core/gemm.h) as a driver gets them:
// M, N, batch >= 1, and every matrix of the batch has its own C (the
// dispatcher turns a batch into one shared C, stride_c == 0, into single
// products accumulated in batch order).
typedef struct ct_gemm_call {
  bool trans_a, trans_b;
  int64_t M, N, K;
  float alpha, beta;
  const float *A;
  int64_t lda, stride_a;
  const float *B;
  int64_t ldb, stride_b;
  float *C;
  int64_t ldc, stride_c;
  int64_t batch;
  const float *bias;  // (N) or NULL: the old C is this row in every row
  float *a_sums;      // (M) or NULL: += the row sums of op(A) (fp32 driver)
  // bf16 driver only: A or B given as bf16 storage (then A or B is NULL),
  // in elements of uint16_t with the same lda/ldb and strides; C16 a bf16
  // output instead of C (C NULL), rounded as the packing rounds.
  const uint16_t *A16, *B16;
  uint16_t *C16;
  // The profiler's packing counter (core/profile.h) or NULL: the drivers
  // add the nanoseconds each thread spends packing operands.
  _Atomic uint64_t *pack_ns;
} ct_gemm_call;

// Timing a packing for the profiler: a start from pack_clock (0 when the
// call is not profiled), then pack_done adds the time since it.
uint64_t ct_gemm_now_ns(void);
static inline uint64_t ct_gemm_pack_clock(const ct_gemm_call *c) {
  return c->pack_ns ? ct_gemm_now_ns() : 0;
}
static inline void ct_gemm_pack_done(const ct_gemm_call *c, uint64_t start) {
  if (c->pack_ns) atomic_fetch_add(c->pack_ns, ct_gemm_now_ns() - start);
}

static inline int64_t ct_gemm_round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// A grow-only buffer of packed operands, one per thread and use
// (_Thread_local): steady state allocates nothing. Every such buffer is also
// listed in a registry, so that it stays reachable after its OpenMP thread
// exits. Returns at least n floats, 64-byte aligned, or NULL when out of
// memory (the old buffer is kept).
typedef struct ct_gemm_scratch {
  float *buf;
  size_t cap;  // floats
} ct_gemm_scratch;

float *ct_gemm_scratch_get(ct_gemm_scratch *s, size_t n);

// Threads a call may use: one inside a parallel region (attention calls
// gemm from its own workers) and for products too small to repay waking a
// team.
int ct_gemm_threads(const ct_gemm_call *c);
// Whether each thread can take whole matrices of the batch (the batch
// divides evenly over the threads, or is large); otherwise every matrix is
// cut into rectangles too.
bool ct_gemm_whole_matrices(int threads, int64_t batch);

// The tasks of a call: every matrix of the batch cut into mt x nt
// rectangles of whole mr x nr tiles. A tile's arithmetic does not depend on
// where it sits, so no split changes a bit of C.
typedef struct ct_gemm_grid {
  int64_t mr, nr, mtiles, ntiles, mt, nt, tasks;
} ct_gemm_grid;

typedef struct ct_gemm_rect {
  int64_t b;       // the matrix of the batch
  int64_t i0, i1;  // rows [i0, i1) of C
  int64_t j0, j1;  // columns [j0, j1)
} ct_gemm_rect;

// The grid of a call for mt x nt rectangles per matrix (each at most the
// number of tiles along its side).
ct_gemm_grid ct_gemm_grid_new(const ct_gemm_call *c, int mr, int nr, int64_t mt,
                              int64_t nt);
// Task t of the grid, t < tasks: the matrix b = t / (mt * nt), and its
// rectangle t % (mt * nt) in row-major order of the grid.
ct_gemm_rect ct_gemm_grid_rect(const ct_gemm_grid *g, const ct_gemm_call *c,
                               int64_t t);

// C (M, N) = beta * C, or beta * the bias row in every row, for products
// with K == 0 or alpha == 0 (A and B are not read).
void ct_gemm_scale_c(int64_t M, int64_t N, float beta, const float *bias,
                     float *C, int64_t ldc);

// a_sums[i] += the sum over k < K of op(A)[i][k] for i < M, each in float
// from 0 with k in order (the fp32 product's bias-gradient contract).
void ct_gemm_add_a_sums(bool trans_a, int64_t M, int64_t K, const float *A,
                        int64_t lda, float *a_sums);

// The drivers. fp32 honours a_sums; bf16 ignores it (the dispatcher adds
// the sums with ct_gemm_add_a_sums, from the unrounded A).
void ct_gemm_f32_run(const ct_gemm_arch *arch, const ct_gemm_call *c);
void ct_gemm_bf16_run(const ct_gemm_bf16_arch *arch, const ct_gemm_call *c);

// The portable fp32 kernels (core/gemm_f32.c), the fallback of every CPU.
extern const ct_gemm_arch ct_gemm_arch_scalar;

#endif
