// The gemm variants that fold a neighbouring pass in, against their
// definitions, bit for bit:
// - ct_gemm_bias: C filled with the bias rows, then ct_gemm with alpha 1,
//   beta 1. C starts as NaN: ct_gemm_bias must never read it.
// - ct_gemm_sum_a: ct_gemm, then each row sum of op(A) in float from 0, k in
//   order, added to a_sums (what ct_add_column_sums does for a linear's bias
//   gradient); C and a_sums start from random values.
// On every micro-kernel path (scalar, AVX2, AVX-512; forced one at a time),
// for partial tiles, several K blocks, few rows (B read in place), K == 0,
// all four transpose combinations and padded leading dimensions, at 1 and 2
// threads.
#include "core/gemm.h"
#include "core/threads.h"
#include "tests/harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t lcg_state = 777;

static float lcg_uniform(void) {  // in [-1, 1)
  lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((lcg_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *random_floats(size_t n) {
  float *x = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = lcg_uniform();
  return x;
}

typedef struct bias_case {
  int64_t M, N, K;
  bool ta, tb;
  int64_t pad;  // extra leading-dimension elements on A, B and C
} bias_case;

// One case on the current path and thread count: the number of elements of
// C whose bits differ from the fill-then-gemm reference.
static int64_t mismatches(const bias_case *g) {
  const int64_t M = g->M, N = g->N, K = g->K;
  const int64_t lda = (g->ta ? M : K) + g->pad;
  const int64_t ldb = (g->tb ? K : N) + g->pad;
  const int64_t ldc = N + g->pad;
  const size_t na = (size_t)((g->ta ? K : M) * lda);
  const size_t nb = (size_t)((g->tb ? N : K) * ldb);
  const size_t nc = (size_t)(M * ldc);
  float *A = random_floats(na), *B = random_floats(nb);
  float *bias = random_floats((size_t)N);
  float *want = malloc(nc * sizeof(float)), *got = malloc(nc * sizeof(float));
  for (size_t i = 0; i < nc; i++) want[i] = got[i] = NAN;
  for (int64_t i = 0; i < M; i++)
    memcpy(want + i * ldc, bias, (size_t)N * sizeof(float));
  ct_gemm(g->ta, g->tb, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, want, ldc);
  ct_gemm_bias(g->ta, g->tb, M, N, K, A, lda, B, ldb, bias, got, ldc);
  int64_t bad = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++)
      bad += memcmp(&want[i * ldc + j], &got[i * ldc + j], sizeof(float)) != 0;
  // The padding of C is left alone.
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = N; j < ldc; j++) bad += !isnan(got[i * ldc + j]);
  free(A);
  free(B);
  free(bias);
  free(want);
  free(got);
  return bad;
}

// The same for ct_gemm_sum_a (alpha 0.5, beta 1.5): elements of C and of
// the sums whose bits differ.
static int64_t sum_mismatches(const bias_case *g) {
  const int64_t M = g->M, N = g->N, K = g->K;
  const int64_t lda = (g->ta ? M : K) + g->pad;
  const int64_t ldb = (g->tb ? K : N) + g->pad;
  const int64_t ldc = N + g->pad;
  const size_t na = (size_t)((g->ta ? K : M) * lda);
  const size_t nb = (size_t)((g->tb ? N : K) * ldb);
  const size_t nc = (size_t)(M * ldc);
  float *A = random_floats(na), *B = random_floats(nb);
  float *want = random_floats(nc), *got = malloc(nc * sizeof(float));
  float *want_s = random_floats((size_t)M), *got_s = malloc((size_t)M * 4);
  memcpy(got, want, nc * sizeof(float));
  memcpy(got_s, want_s, (size_t)M * sizeof(float));
  ct_gemm(g->ta, g->tb, M, N, K, 0.5f, A, lda, B, ldb, 1.5f, want, ldc);
  for (int64_t i = 0; i < M; i++) {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; k++)
      acc += g->ta ? A[k * lda + i] : A[i * lda + k];
    want_s[i] += acc;
  }
  ct_gemm_sum_a(g->ta, g->tb, M, N, K, 0.5f, A, lda, B, ldb, 1.5f, got, ldc,
                got_s);
  int64_t bad = 0;
  for (size_t i = 0; i < nc; i++)
    bad += memcmp(&want[i], &got[i], sizeof(float)) != 0;
  for (int64_t i = 0; i < M; i++)
    bad += memcmp(&want_s[i], &got_s[i], sizeof(float)) != 0;
  free(A);
  free(B);
  free(want);
  free(got);
  free(want_s);
  free(got_s);
  return bad;
}

int main(void) {
  const bias_case cases[] = {
      {1, 1, 1, false, true, 0},        {13, 31, 7, false, true, 0},
      {15, 33, 17, false, true, 3},     {64, 40, 300, false, true, 0},
      {65, 97, 513, false, true, 1},    {200, 256, 256, false, true, 0},
      {300, 1000, 64, false, true, 0},  {29, 70, 600, false, false, 0},
      {50, 20, 30, true, false, 2},     {90, 130, 280, true, true, 0},
      {17, 45, 0, false, true, 0},      {180, 1100, 40, false, false, 0},
      {256, 256, 1600, true, false, 0}, {1000, 256, 700, true, false, 0},
      {40, 1030, 900, true, false, 5},
  };
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  const ct_gemm_path paths[] = {CT_GEMM_SCALAR, CT_GEMM_AVX2, CT_GEMM_AVX512};
  for (int p = 0; p < 3; p++) {
    ct_gemm_force_path(paths[p]);
    for (int threads = 1; threads <= 2; threads++) {
      ct_set_threads(threads);
      int64_t total = 0, total_sums = 0;
      for (int c = 0; c < ncases; c++) {
        const bias_case *g = &cases[c];
        int64_t bad = mismatches(g), bad_sums = sum_mismatches(g);
        total += bad;
        total_sums += bad_sums;
        CHECK(bad == 0,
              "path %s, %d threads: M=%lld N=%lld K=%lld ta=%d tb=%d pad=%lld:"
              " %lld elements differ from fill + gemm",
              ct_gemm_path_name(ct_gemm_active_path()), threads,
              (long long)g->M, (long long)g->N, (long long)g->K, g->ta, g->tb,
              (long long)g->pad, (long long)bad);
        CHECK(bad_sums == 0,
              "path %s, %d threads: M=%lld N=%lld K=%lld ta=%d tb=%d pad=%lld:"
              " %lld elements differ from gemm + row sums",
              ct_gemm_path_name(ct_gemm_active_path()), threads,
              (long long)g->M, (long long)g->N, (long long)g->K, g->ta, g->tb,
              (long long)g->pad, (long long)bad_sums);
      }
      printf(
          "path %s, %d threads: %d cases, elements differing: %lld "
          "(gemm_bias), %lld (gemm_sum_a)\n",
          ct_gemm_path_name(ct_gemm_active_path()), threads, ncases,
          (long long)total, (long long)total_sums);
    }
  }
  ct_gemm_force_path(CT_GEMM_AUTO);

  // In bf16 precision the row sums are taken apart from the product, from
  // the unrounded A (ct_gemm_add_a_sums, each thread one run of columns of
  // a stored-transposed A): the same definition, at 1 to 3 threads, for
  // runs that do and do not split evenly (a weight gradient's 512 x 6400,
  // 1000 columns = 62.5 blocks of 16, 3 blocks, rows of a row-major A).
  const bias_case bf16_cases[] = {
      {512, 128, 6400, true, false, 0}, {1000, 64, 700, true, false, 3},
      {37, 20, 9000, true, false, 0},   {300, 40, 2000, false, true, 1},
      {16, 8, 20000, true, false, 0},
  };
  ct_gemm_set_precision(CT_GEMM_BF16);
  for (int threads = 1; threads <= 3; threads++) {
    ct_set_threads(threads);
    for (size_t c = 0; c < sizeof bf16_cases / sizeof bf16_cases[0]; c++) {
      const bias_case *g = &bf16_cases[c];
      int64_t bad = sum_mismatches(g);
      CHECK(bad == 0,
            "bf16, %d threads: M=%lld N=%lld K=%lld ta=%d: %lld elements "
            "differ from gemm + row sums",
            threads, (long long)g->M, (long long)g->N, (long long)g->K, g->ta,
            (long long)bad);
    }
  }
  ct_gemm_set_precision(CT_GEMM_FP32);
  ct_set_threads(2);
  return test_summary("gemm_fused");
}
