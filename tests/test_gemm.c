// gemm against a naive double-precision reference, on every micro-kernel
// path (scalar, AVX2, AVX-512; forced one at a time): edge and odd sizes,
// sizes past the cache blocks, all four transpose combinations, alpha/beta
// variants (beta == 0 over NaN-filled C), padded leading dimensions and
// strided batches (stride 0 shares a matrix). Then bit-identical results at
// 1 and 2 threads.
//
// An element passes if |got - ref| <= 1e-5 * max(1, |alpha| sum_k |a||b| +
// |beta c|): the scale of the terms summed, which bounds the float32
// rounding of any summation order.
#include "core/gemm.h"
#include "core/threads.h"
#include "tests/harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t lcg_state = 12345;

static float lcg_uniform(void) {  // in [-1, 1)
  lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((lcg_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *random_floats(size_t n) {
  float *x = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = lcg_uniform();
  return x;
}

typedef struct gemm_case {
  int64_t M, N, K;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;            // extra leading-dimension elements on A, B and C
  int64_t batch;          // > 1: strided batch
  bool share_a, share_b;  // stride 0
} gemm_case;

static double max_err[4];  // per path, in units of the tolerance scale

// Runs one case on the current path and compares with the reference.
static void check_case(const gemm_case *g) {
  const int64_t M = g->M, N = g->N, K = g->K, batch = g->batch;
  const int64_t lda = (g->ta ? M : K) + g->pad;
  const int64_t ldb = (g->tb ? K : N) + g->pad;
  const int64_t ldc = N + g->pad;
  const int64_t rows_a = g->ta ? K : M, rows_b = g->tb ? N : K;
  const int64_t sa = g->share_a ? 0 : rows_a * lda + 7;
  const int64_t sb = g->share_b ? 0 : rows_b * ldb + 5;
  const int64_t sc = M * ldc + 3;
  const size_t na = (size_t)((g->share_a ? 1 : batch) * (rows_a * lda + 7));
  const size_t nb = (size_t)((g->share_b ? 1 : batch) * (rows_b * ldb + 5));
  const size_t nc = (size_t)(batch * sc);

  float *A = random_floats(na), *B = random_floats(nb);
  float *C = random_floats(nc), *C0 = malloc(nc * sizeof(float));
  if (g->beta == 0.0f)
    for (size_t i = 0; i < nc; i++) C[i] = NAN;  // must not leak into C
  memcpy(C0, C, nc * sizeof(float));

  ct_gemm_batched(g->ta, g->tb, M, N, K, g->alpha, A, lda, sa, B, ldb, sb,
                  g->beta, C, ldc, sc, batch);

  const ct_gemm_path path = ct_gemm_active_path();
  int bad = 0;
  for (int64_t b = 0; b < batch; b++) {
    const float *a = A + b * sa, *bm = B + b * sb;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double sum = 0.0, mag = 0.0;
        for (int64_t k = 0; k < K; k++) {
          double x = g->ta ? a[k * lda + i] : a[i * lda + k];
          double y = g->tb ? bm[j * ldb + k] : bm[k * ldb + j];
          sum += x * y;
          mag += fabs(x * y);
        }
        size_t at = (size_t)(b * sc + i * ldc + j);
        double ref = g->alpha * sum, scale = fabs(g->alpha) * mag;
        if (g->beta != 0.0f) {
          ref += g->beta * (double)C0[at];
          scale += fabs(g->beta * (double)C0[at]);
        }
        double err = fabs((double)C[at] - ref) / fmax(1.0, scale);
        if (!(err <= 1e-5)) {  // also catches NaN
          if (bad++ < 3)
            CHECK(false,
                  "%s M=%lld N=%lld K=%lld ta=%d tb=%d alpha=%g beta=%g "
                  "pad=%lld batch=%lld: C[%lld][%lld][%lld] = %.9g, want "
                  "%.9g",
                  ct_gemm_path_name(path), (long long)M, (long long)N,
                  (long long)K, g->ta, g->tb, g->alpha, g->beta,
                  (long long)g->pad, (long long)batch, (long long)b,
                  (long long)i, (long long)j, C[at], ref);
        }
        if (err > max_err[path] || err != err) max_err[path] = err;
      }
  }
  // Padding between rows and between matrices is never written.
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = N; j < (i + 1 < M ? ldc : sc - i * ldc); j++) {
        size_t at = (size_t)(b * sc + i * ldc + j);
        if (memcmp(&C[at], &C0[at], sizeof(float)) != 0 && bad++ < 3)
          CHECK(false, "%s: wrote outside C at batch %lld row %lld col %lld",
                ct_gemm_path_name(path), (long long)b, (long long)i,
                (long long)j);
      }
  CHECK(bad == 0, "%d bad elements", bad);
  free(A);
  free(B);
  free(C);
  free(C0);
}

static const int64_t edge_sizes[] = {1, 3, 17, 129};

static void check_path(ct_gemm_path path) {
  ct_gemm_force_path(path);
  ct_gemm_path got = ct_gemm_active_path();
  CHECK(got != CT_GEMM_AUTO, "active path is never auto");
  printf("path %s (asked for %s)\n", ct_gemm_path_name(got),
         ct_gemm_path_name(path));

  // Edge sizes in every combination of M, N, K, with all four transposes
  // spread over them.
  int n = 0;
  for (int mi = 0; mi < 4; mi++)
    for (int ni = 0; ni < 4; ni++)
      for (int ki = 0; ki < 4; ki++, n++) {
        gemm_case g = {edge_sizes[mi],
                       edge_sizes[ni],
                       edge_sizes[ki],
                       n & 1,
                       (n >> 1) & 1,
                       1.0f,
                       0.0f,
                       0,
                       1,
                       0,
                       0};
        check_case(&g);
      }

  // Block-size neighbours and odd shapes, each with all four transposes and
  // a rotating alpha/beta/padding variant.
  static const int64_t shapes[][3] = {
      {14, 32, 256},  {15, 33, 257}, {13, 31, 255}, {28, 64, 512},
      {6, 16, 8},     {7, 17, 9},    {50, 50, 32},  {50, 32, 50},
      {169, 1025, 5}, {1, 200, 300}, {200, 1, 300}, {2, 2, 600},
  };
  static const float ab[][2] = {
      {1.0f, 0.0f}, {0.5f, 0.0f}, {1.0f, 1.0f}, {-1.5f, 0.25f}, {2.0f, -1.0f}};
  int v = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++, v++) {
      gemm_case g = {shapes[s][0],
                     shapes[s][1],
                     shapes[s][2],
                     t & 1,
                     t >> 1,
                     ab[v % 5][0],
                     ab[v % 5][1],
                     (v % 3) * 5,
                     1,
                     0,
                     0};
      check_case(&g);
    }

  // Past every block size (K blocks, MC and NC), two transposes.
  gemm_case big0 = {300, 520, 700, 0, 0, 1.0f, 0.0f, 0, 1, 0, 0};
  gemm_case big1 = {300, 520, 700, 1, 1, 0.75f, 0.5f, 3, 1, 0, 0};
  gemm_case wide = {40, 1100, 70, 0, 1, 1.0f, 1.0f, 0, 1, 0, 0};
  check_case(&big0);
  check_case(&big1);
  check_case(&wide);

  // A stored transposed with a stride of 2 or 4 KiB (the columns kernel
  // reads it in place at any stride; rows of A at such strides are packed).
  static const gemm_case strided[] = {
      {100, 40, 300, 1, 0, 1.0f, 0.5f, 412, 1, 0, 0},  // lda 512, A^T
      {37, 70, 520, 1, 1, 1.0f, 0.0f, 987, 1, 0, 0},   // lda 1024, A^T
      {45, 33, 300, 0, 0, 1.0f, 0.5f, 212, 1, 0, 0},   // lda 512, A rows
  };
  for (size_t i = 0; i < sizeof strided / sizeof strided[0]; i++)
    check_case(&strided[i]);

  // Degenerate: K == 0 scales C by beta; alpha == 0 ignores A and B;
  // empty M or N is a no-op.
  gemm_case k0 = {5, 7, 0, 0, 0, 1.0f, 0.5f, 1, 1, 0, 0};
  gemm_case k0z = {5, 7, 0, 1, 1, 1.0f, 0.0f, 0, 2, 0, 0};
  gemm_case a0 = {9, 40, 20, 0, 0, 0.0f, 2.0f, 0, 1, 0, 0};
  gemm_case m0 = {0, 7, 3, 0, 0, 1.0f, 0.0f, 0, 1, 0, 0};
  gemm_case n0 = {7, 0, 3, 0, 1, 1.0f, 0.0f, 0, 1, 0, 0};
  check_case(&k0);
  check_case(&k0z);
  check_case(&a0);
  check_case(&m0);
  check_case(&n0);

  // Strided batches, with shared A or B, with and without padding; batch
  // sizes that do and do not divide among the threads.
  gemm_case b1 = {50, 32, 50, 0, 0, 1.0f, 0.0f, 0, 7, 0, 0};
  gemm_case b2 = {50, 50, 32, 0, 1, 0.125f, 1.0f, 2, 3, 0, 1};
  gemm_case b3 = {33, 20, 17, 1, 0, 1.0f, 0.0f, 1, 4, 1, 0};
  gemm_case b4 = {17, 65, 9, 1, 1, -1.0f, 0.5f, 0, 5, 1, 1};
  gemm_case b5 = {1, 1, 1, 0, 0, 1.0f, 0.0f, 0, 3, 0, 0};
  check_case(&b1);
  check_case(&b2);
  check_case(&b3);
  check_case(&b4);
  check_case(&b5);
}

// Same bits at 1 and 2 threads (and for a batch that does not split evenly).
static void check_threads(ct_gemm_path path, int64_t M, int64_t N, int64_t K,
                          bool ta, bool tb, int64_t batch) {
  ct_gemm_force_path(path);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  size_t na = (size_t)(M * K * batch), nb = (size_t)(K * N * batch),
         nc = (size_t)(M * N * batch);
  float *A = random_floats(na), *B = random_floats(nb);
  float *C1 = random_floats(nc), *C2 = malloc(nc * sizeof(float));
  memcpy(C2, C1, nc * sizeof(float));
  ct_set_threads(1);
  ct_gemm_batched(ta, tb, M, N, K, 1.0f, A, lda, M * K, B, ldb, K * N, 0.5f, C1,
                  N, M * N, batch);
  ct_set_threads(2);
  ct_gemm_batched(ta, tb, M, N, K, 1.0f, A, lda, M * K, B, ldb, K * N, 0.5f, C2,
                  N, M * N, batch);
  CHECK(memcmp(C1, C2, nc * sizeof(float)) == 0,
        "%s M=%lld N=%lld K=%lld ta=%d tb=%d batch=%lld: 1 and 2 threads "
        "differ",
        ct_gemm_path_name(ct_gemm_active_path()), (long long)M, (long long)N,
        (long long)K, ta, tb, (long long)batch);
  free(A);
  free(B);
  free(C1);
  free(C2);
}

int main(void) {
  static const ct_gemm_path paths[] = {CT_GEMM_SCALAR, CT_GEMM_AVX2,
                                       CT_GEMM_AVX512};
  ct_set_threads(2);
  for (int p = 0; p < 3; p++) check_path(paths[p]);

  for (int p = 0; p < 3; p++) {
    check_threads(paths[p], 257, 300, 600, 0, 1, 1);
    check_threads(paths[p], 300, 70, 520, 1, 0, 1);
    check_threads(paths[p], 50, 32, 50, 0, 0, 3);
    check_threads(paths[p], 29, 1100, 40, 1, 1, 1);
    // Split in two, each half is small enough to read B in place.
    check_threads(paths[p], 100, 40, 300, 0, 0, 1);
    // A^T with a 2 KiB row stride, read in place (a weight gradient's shape).
    check_threads(paths[p], 512, 128, 700, 1, 0, 1);
  }

  ct_gemm_force_path(CT_GEMM_AUTO);
  CHECK(ct_gemm_active_path() != CT_GEMM_AUTO, "auto resolves to a path");
  printf("auto path: %s\n", ct_gemm_path_name(ct_gemm_active_path()));
  for (int p = 0; p < 3; p++)
    printf("max |err| / scale, %s: %.3g\n", ct_gemm_path_name(paths[p]),
           max_err[paths[p]]);
  return test_summary("gemm");
}
