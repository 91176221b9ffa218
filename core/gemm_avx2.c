// AVX2/FMA gemm micro-kernel: a 6 x 16 tile of C held in 12 ymm
// accumulators (2 vectors of 8 per row), the classic shape for 16 ymm
// registers: per k, 2 loads of the B micro-panel, 6 broadcasts of the A
// micro-panel, 12 FMAs.
//
// Compiled with a function target attribute, not -mavx2, so the library
// still runs on any x86-64; gemm.c calls it only after
// __builtin_cpu_supports("avx2") and ("fma").
#include "core/gemm_f32_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define MR 6
#define NV 2
#define NR (8 * NV)

#define TARGET __attribute__((target("avx2,fma")))

// c = alpha * acc + beta * old, old read at `in` (c itself, or the bias).
static TARGET inline void store_row(float *c, const float *in, __m256 acc,
                                    __m256i mask, int full, __m256 alpha,
                                    __m256 beta, int beta_zero) {
  if (full) {
    __m256 r = beta_zero
                   ? _mm256_mul_ps(alpha, acc)
                   : _mm256_fmadd_ps(alpha, acc,
                                     _mm256_mul_ps(beta, _mm256_loadu_ps(in)));
    _mm256_storeu_ps(c, r);
  } else {
    __m256 r = beta_zero
                   ? _mm256_mul_ps(alpha, acc)
                   : _mm256_fmadd_ps(
                         alpha, acc,
                         _mm256_mul_ps(beta, _mm256_maskload_ps(in, mask)));
    _mm256_maskstore_ps(c, mask, r);
  }
}

static TARGET void kernel_6x16(int64_t kc, const float *restrict pa,
                               int64_t rsa, const float *restrict pb,
                               int64_t rsb, float *restrict c, int64_t ldc,
                               float alpha, float beta, int m, int n,
                               const float *bias) {
  (void)rsa;
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();

  for (int64_t k = 0; k < kc; k++) {
    __m256 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) b[v] = _mm256_loadu_ps(pb + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m256 a = _mm256_broadcast_ss(pa + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
    }
    pa += MR;
    pb += rsb;
  }

  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i mask[NV];
  int full[NV];
  for (int v = 0; v < NV; v++) {
    int left = n - 8 * v;
    full[v] = left >= 8;
    mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), iota);
  }
  __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  int beta_zero = beta == 0.0f;
  // The old values: row i of c, or the bias row for every i.
  const float *in = bias ? bias : c;
  const int64_t ldin = bias ? 0 : ldc;
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    if (i < m) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        if (8 * v < n)
          store_row(c + i * ldc + 8 * v, in + i * ldin + 8 * v, acc[i][v],
                    mask[v], full[v], va, vb, beta_zero);
    }
  }
}

const ct_gemm_arch ct_gemm_arch_avx2 = {.mr = MR,
                                        .nr = NR,
                                        .mc = 6 * 24,
                                        .kc = 256,
                                        .nc = 1024,
                                        .kernel = kernel_6x16,
                                        .kernel_rows = NULL,
                                        .masked_b = 0,
                                        .copy_rows = NULL};

#else
const ct_gemm_arch ct_gemm_arch_avx2 = {0};
#endif
