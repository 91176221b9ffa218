// The emulated bf16 kernel: the packed bf16 operands widened to fp32 (exact)
// and multiplied with fp32 fused multiply-adds, k in order, on a 4 x 16 tile.
// An AVX2/FMA version where the CPU has it, and a scalar one with fmaf()
// (correctly rounded everywhere, in hardware or in libm), so the result is
// the same bits on every CPU: each element is acc = fma(a_k, b_k, acc) for
// k = 0..kp-1 and then c = fma(alpha, acc, beta * old) (alpha * acc when
// beta == 0; old is c, or a bias row). The layout is the hardware paths' (gemm_bf16_internal.h).
#include "core/gemm_bf16_kernels.h"

#include <math.h>

#define MR 4
#define NR 16

static float widen(const uint16_t *h) { return ct_bf16_bits_to_f32(*h); }

static void store_tile(const float acc[MR][NR], float *c, int64_t ldc,
                       const float *old, int64_t ldo, float alpha, float beta,
                       int m, int n) {
  for (int i = 0; i < m; i++) {
    float *row = c + i * ldc;
    const float *prev = old + i * ldo;
    for (int j = 0; j < n; j++)
      row[j] = beta == 0.0f ? alpha * acc[i][j]
                            : fmaf(alpha, acc[i][j], beta * prev[j]);
  }
}

static void kernel_scalar(int64_t kp, const uint16_t *pa, int64_t lda_p,
                          const uint16_t *pb, float *c, int64_t ldc,
                          const float *old, int64_t ldo, float alpha,
                          float beta, int m, int n) {
  float acc[MR][NR] = {{0}};
  for (int64_t k = 0; k < kp; k++) {
    const uint16_t *b = pb + (k / 2 * NR) * 2 + k % 2;
    for (int i = 0; i < MR; i++) {
      float a = widen(pa + i * lda_p + k);
      for (int j = 0; j < NR; j++)
        acc[i][j] = fmaf(a, widen(b + 2 * j), acc[i][j]);
    }
  }
  store_tile((const float(*)[NR])acc, c, ldc, old, ldo, alpha, beta, m, n);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma")))

// Per pair of k: a word (a_k, a_k+1) broadcast and split into its two
// floats (low half shifted up, high half masked), the same for 8 words of
// B; then the k FMA and the k+1 FMA, in that order.
static TARGET void kernel_avx2(int64_t kp, const uint16_t *pa, int64_t lda_p,
                               const uint16_t *pb, float *c, int64_t ldc,
                               const float *old, int64_t ldo, float alpha,
                               float beta, int m, int n) {
  const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
  __m256 acc[MR][2];
#pragma GCC unroll 4
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kp; k += 2, pb += 2 * NR) {
    __m256i w0 = _mm256_loadu_si256((const __m256i *)pb);
    __m256i w1 = _mm256_loadu_si256((const __m256i *)(pb + 16));
    __m256 b0e = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16));
    __m256 b1e = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
    __m256 b0o = _mm256_castsi256_ps(_mm256_and_si256(w0, hi));
    __m256 b1o = _mm256_castsi256_ps(_mm256_and_si256(w1, hi));
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
      uint32_t word;
      memcpy(&word, pa + i * lda_p + k, sizeof word);
      __m256i w = _mm256_set1_epi32((int)word);
      __m256 ae = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
      __m256 ao = _mm256_castsi256_ps(_mm256_and_si256(w, hi));
      acc[i][0] = _mm256_fmadd_ps(ae, b0e, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ae, b1e, acc[i][1]);
      acc[i][0] = _mm256_fmadd_ps(ao, b0o, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ao, b1o, acc[i][1]);
    }
  }
  // c = fma(alpha, acc, beta * c), as store_tile; masked at the edges.
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), iota);
  const __m256i mask1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), iota);
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 4
  for (int i = 0; i < MR; i++) {
    if (i >= m) break;
    float *row = c + i * ldc;
    const float *prev = old + i * ldo;
    __m256 r0 = _mm256_mul_ps(va, acc[i][0]), r1 = _mm256_mul_ps(va, acc[i][1]);
    if (beta != 0.0f) {
      r0 = _mm256_fmadd_ps(va, acc[i][0],
                           _mm256_mul_ps(vb, _mm256_maskload_ps(prev, mask0)));
      r1 = _mm256_fmadd_ps(
          va, acc[i][1],
          _mm256_mul_ps(vb, _mm256_maskload_ps(prev + 8, mask1)));
    }
    _mm256_maskstore_ps(row, mask0, r0);
    _mm256_maskstore_ps(row + 8, mask1, r1);
  }
}

static void kernel(int64_t kp, const uint16_t *pa, int64_t lda_p,
                   const uint16_t *pb, float *c, int64_t ldc, const float *old,
                   int64_t ldo, float alpha, float beta, int m, int n) {
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    kernel_avx2(kp, pa, lda_p, pb, c, ldc, old, ldo, alpha, beta, m, n);
  else
    kernel_scalar(kp, pa, lda_p, pb, c, ldc, old, ldo, alpha, beta, m, n);
}
#else
#define kernel kernel_scalar
#endif

const ct_gemm_bf16_arch ct_gemm_bf16_arch_emulated = {.mr = MR,
                                                      .nr = NR,
                                                      .kgran = 2,
                                                      .mc = MR * 32,
                                                      .kc = 256,
                                                      .nc = 1024,
                                                      .kernel = kernel};
