// bf16 gemm (core/gemm_bf16.h) on every path the CPU has (emulated,
// AVX512-BF16, AMX; forced one at a time, skipped with a message when
// absent):
//   - the rounding: ct_bf16_from_f32 on ties, carries, overflow, Inf, NaN and
//     subnormals, and the same bits out of the packing, for every operand
//     layout, through products with 1;
//   - against a double-precision reference on the bf16-rounded inputs: edge
//     sizes (1 .. 257) mixed over M, N, K with all four transposes, alpha and
//     beta variants (beta == 0 over NaN-filled C), padded leading dimensions,
//     sizes past the cache blocks, degenerate sizes, strided batches;
//   - bit-identical results at 1 and 2 threads (1 and 3 where a long K is
//     cut along its blocks), and for the emulated path
//     the exact bits its definition gives (the same on every CPU);
//   - subnormal inputs: rounded as ct_bf16_from_f32 on the emulated path,
//     read as zero on the hardware paths (documented in gemm_bf16.h);
//   - the precision switch (core/gemm.h): in bf16 mode ct_gemm,
//     ct_gemm_batched, ct_gemm_bias and ct_gemm_sum_a give ct_gemm_bf16's
//     bits (the bias as the old C, the row sums of the unrounded A in fp32);
//     ct_gemm_bf16_bias is the same as filling C with the bias rows.
//
// An element passes if |got - ref| <= 1e-5 * (|alpha| sum_k |a||b| +
// |beta c|): relative to the scale of the terms summed, which bounds the fp32
// rounding of any summation order; the bf16 rounding itself is in the
// reference, so it costs nothing here.
#include "core/gemm.h"
#include "core/gemm_bf16.h"
#include "core/threads.h"
#include "tests/harness.h"

#include <float.h>
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

static float from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static double bf16(float x) { return ct_bf16_to_f32(ct_bf16_from_f32(x)); }

static const char *path_name(void) {
  return ct_gemm_bf16_path_name(ct_gemm_bf16_active_path());
}

// ---------------------------------------------------------------------------
// Rounding.

static void check_rounding_table(void) {
  static const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3f800000, 0x3f80},  // 1
      {0x3f808000, 0x3f80},  // tie, kept half even: down
      {0x3f818000, 0x3f82},  // tie, kept half odd: up
      {0x3f808001, 0x3f81},  // above the tie
      {0x3f807fff, 0x3f80},  // below the tie
      {0xbf818000, 0xbf82},  // negative tie, odd: away from zero
      {0xbf808000, 0xbf80},
      {0x3fffffff, 0x4000},  // carry into the exponent
      {0x7f7f7fff, 0x7f7f},  // largest value that stays finite
      {0x7f7f8000, 0x7f80},  // tie at the top, odd: overflows to Inf
      {0x7f7fffff, 0x7f80},  // FLT_MAX rounds to Inf
      {0xff7fffff, 0xff80},  // -FLT_MAX to -Inf
      {0x7f800000, 0x7f80},  // Inf
      {0xff800000, 0xff80},  // -Inf
      {0x7fc00000, 0x7fc0},  // quiet NaN
      {0xffc00000, 0xffc0},
      {0x7f800001, 0x7fc0},  // NaN with only low payload bits stays NaN
      {0x7fbfffff, 0x7fff},  // payload kept, made quiet (no carry to Inf)
      {0x00000000, 0x0000},
      {0x80000000, 0x8000},  // -0
      {0x00008000, 0x0000},  // subnormal tie, even: down
      {0x00018000, 0x0002},  // subnormal tie, odd: up
      {0x007fffff, 0x0080},  // largest subnormal rounds to the smallest normal
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = ct_bf16_from_f32(from_bits(cases[i].in));
    CHECK(got == cases[i].out, "bf16(0x%08x) = 0x%04x, want 0x%04x",
          (unsigned)cases[i].in, got, cases[i].out);
  }
  // Back to fp32 is exact, and rounding a bf16 value changes nothing.
  for (uint32_t h = 0; h < 0x10000; h += 0x0101) {
    float x = ct_bf16_to_f32((uint16_t)h);
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    CHECK(u == h << 16, "bf16 0x%04x widens to 0x%08x", (unsigned)h,
          (unsigned)u);
    if (x == x)
      CHECK(ct_bf16_from_f32(x) == h, "0x%04x does not round to itself",
            (unsigned)h);
  }
  CHECK(isnan(ct_bf16_to_f32(ct_bf16_from_f32(NAN))), "NaN stays NaN");
}

// Same value: equal bits up to the sign of zero, or both NaN.
static bool same_value(float got, double want) {
  return (isnan(got) && isnan(want)) || (double)got == want;
}

// The packing rounds each operand layout the same way: C = op(A) op(B) with
// one factor all ones and K == 1 gives bf16 of the other factor, element by
// element (the products are exact; the hardware paths add zeros for the
// padding of K). Values: ties, overflow, Inf and NaN, and random ones.
static const uint32_t special[] = {
    0x3f808000, 0x3f818000, 0x3f808001, 0xbf818000, 0x3fffffff, 0x7f7f7fff,
    0x7f7f8000, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000,
    0x7f800001, 0x40490fdb, 0xc0490fdb, 0x3eaaaaab, 0x3f7fffff, 0x00000000,
};
#define NSPECIAL (sizeof special / sizeof special[0])

static void check_rounding_packed(void) {
  enum { L = 40 };  // more than one vector of 16, with a tail
  float v[L], ones[L], C[L * L];
  for (int i = 0; i < L; i++) {
    v[i] = i < (int)NSPECIAL ? from_bits(special[i]) : lcg_uniform() * 3.0f;
    ones[i] = 1.0f;
  }
  // A (L,1) is a column: stored (L,1) or (1,L); B (1,L) is ones. Then the
  // same with the roles swapped.
  for (int side = 0; side < 2; side++)
    for (int t = 0; t < 2; t++) {
      const float *A = side ? ones : v, *B = side ? v : ones;
      bool ta = side == 0 && t, tb = side == 1 && t;
      ct_gemm_bf16(ta, tb, L, L, 1, 1.0f, A, ta ? L : 1, B, tb ? 1 : L, 0.0f, C,
                   L);
      int bad = 0;
      for (int i = 0; i < L; i++)
        for (int j = 0; j < L; j++) {
          float got = C[i * L + j];
          double want = bf16(v[side ? j : i]);
          if (!same_value(got, want) && bad++ < 3)
            CHECK(false,
                  "%s: packing side=%d trans=%d [%d][%d] = %.9g, want %.9g",
                  path_name(), side, t, i, j, got, want);
        }
      CHECK(bad == 0, "%s: %d elements rounded differently", path_name(), bad);
    }

  // Rows of K = L values (rounded a row at a time for A stored (M,K) and B
  // stored (N,K)), times the identity: finite values only, as Inf * 0 in
  // the off-diagonal terms would be NaN.
  float eye[L * L];
  for (int i = 0; i < L * L; i++) eye[i] = i / L == i % L ? 1.0f : 0.0f;
  float w[L];
  for (int i = 0; i < L; i++)
    w[i] = isfinite(v[i]) && fabsf(v[i]) < 1e38f ? v[i] : 0.5f;
  for (int t = 0; t < 2; t++) {
    // t == 0: w (1,L) times I; t == 1: I times w^T stored (1,L) as B (N,K).
    if (t == 0)
      ct_gemm_bf16(false, false, 1, L, L, 1.0f, w, L, eye, L, 0.0f, C, L);
    else
      ct_gemm_bf16(false, true, L, 1, L, 1.0f, eye, L, w, L, 0.0f, C, 1);
    int bad = 0;
    for (int j = 0; j < L; j++)
      if (!same_value(C[j], bf16(w[j])) && bad++ < 3)
        CHECK(false, "%s: row rounding t=%d [%d] = %.9g, want %.9g",
              path_name(), t, j, C[j], bf16(w[j]));
    CHECK(bad == 0, "%s: %d row elements rounded differently", path_name(),
          bad);
  }
}

// ---------------------------------------------------------------------------
// Against the reference.

typedef struct gemm_case {
  int64_t M, N, K;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;    // extra leading-dimension elements on A, B and C
  int64_t batch;  // > 1: strided batch
  bool share_a, share_b, share_c;  // stride 0
} gemm_case;

static double max_err[4];  // per path, relative to the scale

static void check_case(const gemm_case *g) {
  const int64_t M = g->M, N = g->N, K = g->K, batch = g->batch;
  const int64_t lda = (g->ta ? M : K) + g->pad;
  const int64_t ldb = (g->tb ? K : N) + g->pad;
  const int64_t ldc = N + g->pad;
  const int64_t rows_a = g->ta ? K : M, rows_b = g->tb ? N : K;
  const int64_t sa = g->share_a ? 0 : rows_a * lda + 7;
  const int64_t sb = g->share_b ? 0 : rows_b * ldb + 5;
  const int64_t sc = g->share_c ? 0 : M * ldc + 3;
  const int64_t nmat_c = g->share_c ? 1 : batch;
  const size_t na = (size_t)((g->share_a ? 1 : batch) * (rows_a * lda + 7));
  const size_t nb = (size_t)((g->share_b ? 1 : batch) * (rows_b * ldb + 5));
  const size_t nc = (size_t)(nmat_c * (M * ldc + 3));

  float *A = random_floats(na), *B = random_floats(nb);
  float *C = random_floats(nc), *C0 = malloc(nc * sizeof(float));
  if (g->beta == 0.0f)
    for (size_t i = 0; i < nc; i++) C[i] = NAN;  // must not leak into C
  memcpy(C0, C, nc * sizeof(float));

  ct_gemm_bf16_batched(g->ta, g->tb, M, N, K, g->alpha, A, lda, sa, B, ldb, sb,
                       g->beta, C, ldc, sc, batch);

  const ct_gemm_bf16_path path = ct_gemm_bf16_active_path();
  int bad = 0;
  for (int64_t bc = 0; bc < nmat_c; bc++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        // A shared C sums every product of the batch.
        double sum = 0.0, mag = 0.0;
        for (int64_t b = g->share_c ? 0 : bc; b < (g->share_c ? batch : bc + 1);
             b++) {
          const float *a = A + b * sa, *bm = B + b * sb;
          for (int64_t k = 0; k < K; k++) {
            double x = bf16(g->ta ? a[k * lda + i] : a[i * lda + k]);
            double y = bf16(g->tb ? bm[j * ldb + k] : bm[k * ldb + j]);
            sum += x * y;
            mag += fabs(x * y);
          }
        }
        size_t at = (size_t)(bc * sc + i * ldc + j);
        double ref = g->alpha * sum, scale = fabs(g->alpha) * mag;
        if (g->beta != 0.0f) {
          ref += g->beta * (double)C0[at];
          scale += fabs(g->beta * (double)C0[at]);
        }
        double err = fabs((double)C[at] - ref) / fmax(scale, 1e-30);
        if (!(err <= 1e-5)) {  // also catches NaN
          if (bad++ < 3)
            CHECK(false,
                  "%s M=%lld N=%lld K=%lld ta=%d tb=%d alpha=%g beta=%g "
                  "pad=%lld batch=%lld: C[%lld][%lld][%lld] = %.9g, want "
                  "%.9g",
                  ct_gemm_bf16_path_name(path), (long long)M, (long long)N,
                  (long long)K, g->ta, g->tb, g->alpha, g->beta,
                  (long long)g->pad, (long long)batch, (long long)bc,
                  (long long)i, (long long)j, C[at], ref);
        }
        if (err > max_err[path] || err != err) max_err[path] = err;
      }
  // Padding between rows and between matrices is never written.
  for (int64_t bc = 0; bc < nmat_c; bc++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = N; j < (i + 1 < M ? ldc : ldc + 3); j++) {
        size_t at = (size_t)(bc * (M * ldc + 3) + i * ldc + j);
        if (memcmp(&C[at], &C0[at], sizeof(float)) != 0 && bad++ < 3)
          CHECK(false, "%s: wrote outside C at batch %lld row %lld col %lld",
                ct_gemm_bf16_path_name(path), (long long)bc, (long long)i,
                (long long)j);
      }
  CHECK(bad == 0, "%d bad elements", bad);
  free(A);
  free(B);
  free(C);
  free(C0);
}

static const int64_t sizes[] = {1, 7, 15, 16, 17, 31, 33, 64, 100, 257};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

static void check_path(void) {
  static const float ab[][2] = {
      {1.0f, 0.0f}, {0.5f, 0.0f}, {1.0f, 1.0f}, {-1.5f, 0.25f}, {2.0f, -1.0f}};
  // Every M x N pair of edge sizes with a K from the list, the transposes,
  // alpha/beta and padding rotating over them.
  int v = 0;
  for (int mi = 0; mi < NSIZES; mi++)
    for (int ni = 0; ni < NSIZES; ni++, v++) {
      int t = (mi + 2 * ni) % 4;
      gemm_case g = {sizes[mi],
                     sizes[ni],
                     sizes[(3 * mi + 7 * ni) % NSIZES],
                     t & 1,
                     t >> 1,
                     ab[v % 5][0],
                     ab[v % 5][1],
                     (v % 3) * 5,
                     1,
                     0,
                     0,
                     0};
      check_case(&g);
    }
  // Cubes, all four transposes each.
  for (int s = 0; s < NSIZES; s++)
    for (int t = 0; t < 4; t++, v++) {
      gemm_case g = {
          sizes[s],     sizes[s], sizes[s], t & 1, t >> 1, ab[v % 5][0],
          ab[v % 5][1], v % 2,    1,        0,     0,      0};
      check_case(&g);
    }

  // Past every block size (K blocks, MC and NC), two transposes.
  gemm_case big0 = {300, 520, 700, 0, 0, 1.0f, 0.0f, 0, 1, 0, 0, 0};
  gemm_case big1 = {300, 520, 700, 1, 1, 0.75f, 0.5f, 3, 1, 0, 0, 0};
  gemm_case wide = {40, 1100, 70, 0, 1, 1.0f, 1.0f, 0, 1, 0, 0, 0};
  check_case(&big0);
  check_case(&big1);
  check_case(&wide);

  // Degenerate: K == 0 scales C by beta; alpha == 0 ignores A and B;
  // empty M or N is a no-op.
  gemm_case k0 = {5, 7, 0, 0, 0, 1.0f, 0.5f, 1, 1, 0, 0, 0};
  gemm_case k0z = {5, 7, 0, 1, 1, 1.0f, 0.0f, 0, 2, 0, 0, 0};
  gemm_case a0 = {9, 40, 20, 0, 0, 0.0f, 2.0f, 0, 1, 0, 0, 0};
  gemm_case m0 = {0, 7, 3, 0, 0, 1.0f, 0.0f, 0, 1, 0, 0, 0};
  gemm_case n0 = {7, 0, 3, 0, 1, 1.0f, 0.0f, 0, 1, 0, 0, 0};
  check_case(&k0);
  check_case(&k0z);
  check_case(&a0);
  check_case(&m0);
  check_case(&n0);

  // Strided batches, with shared A or B, with and without padding; batch
  // sizes that do and do not divide among the threads; a shared C.
  gemm_case b1 = {50, 32, 50, 0, 0, 1.0f, 0.0f, 0, 7, 0, 0, 0};
  gemm_case b2 = {50, 50, 32, 0, 1, 0.125f, 1.0f, 2, 3, 0, 1, 0};
  gemm_case b3 = {33, 20, 17, 1, 0, 1.0f, 0.0f, 1, 4, 1, 0, 0};
  gemm_case b4 = {17, 65, 9, 1, 1, -1.0f, 0.5f, 0, 5, 1, 1, 0};
  gemm_case b5 = {1, 1, 1, 0, 0, 1.0f, 0.0f, 0, 3, 0, 0, 0};
  gemm_case b6 = {31, 33, 64, 0, 1, 1.0f, 0.5f, 1, 3, 0, 0, 1};
  check_case(&b1);
  check_case(&b2);
  check_case(&b3);
  check_case(&b4);
  check_case(&b5);
  check_case(&b6);
}

// The emulated path is a pure function, the same bits on every CPU: K in
// blocks of at most 256 (as even as possible, even depths), each summed
// from zero with fmaf in k order and then combined as
// c = fmaf(alpha, acc, beta' * c) (alpha * acc when beta' == 0), beta' being
// beta for the first block and 1 after. Computed here in plain C.
static void check_emulated_bits(int64_t M, int64_t N, int64_t K, bool ta,
                                bool tb, float alpha, float beta) {
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  float *A = random_floats((size_t)(M * K));
  float *B = random_floats((size_t)(K * N));
  float *C = random_floats((size_t)(M * N));
  float *want = malloc((size_t)(M * N) * sizeof(float));
  memcpy(want, C, (size_t)(M * N) * sizeof(float));
  ct_gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
  int64_t nblocks = (K + 255) / 256;
  int64_t kb = ((K + nblocks - 1) / nblocks + 1) / 2 * 2;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float *c = want + i * N + j;
      for (int64_t k0 = 0; k0 < K; k0 += kb) {
        float acc = 0.0f, b0 = k0 == 0 ? beta : 1.0f;
        for (int64_t k = k0; k < K && k < k0 + kb; k++)
          acc = fmaf((float)bf16(ta ? A[k * lda + i] : A[i * lda + k]),
                     (float)bf16(tb ? B[j * ldb + k] : B[k * ldb + j]), acc);
        *c = b0 == 0.0f ? alpha * acc : fmaf(alpha, acc, b0 * *c);
      }
    }
  CHECK(memcmp(C, want, (size_t)(M * N) * sizeof(float)) == 0,
        "emulated M=%lld N=%lld K=%lld ta=%d tb=%d: not the defined bits",
        (long long)M, (long long)N, (long long)K, ta, tb);
  free(A);
  free(B);
  free(C);
  free(want);
}

// Same bits at 1 and `threads` threads (and for a batch that does not split
// evenly). beta == 0 runs over NaN-filled C (never read).
static void check_threads_ab(int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                             int64_t batch, float alpha, float beta,
                             int threads) {
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  size_t na = (size_t)(M * K * batch), nb = (size_t)(K * N * batch),
         nc = (size_t)(M * N * batch);
  float *A = random_floats(na), *B = random_floats(nb);
  float *C1 = random_floats(nc), *C2 = malloc(nc * sizeof(float));
  if (beta == 0.0f)
    for (size_t i = 0; i < nc; i++) C1[i] = NAN;
  memcpy(C2, C1, nc * sizeof(float));
  ct_set_threads(1);
  ct_gemm_bf16_batched(ta, tb, M, N, K, alpha, A, lda, M * K, B, ldb, K * N,
                       beta, C1, N, M * N, batch);
  ct_set_threads(threads);
  ct_gemm_bf16_batched(ta, tb, M, N, K, alpha, A, lda, M * K, B, ldb, K * N,
                       beta, C2, N, M * N, batch);
  ct_set_threads(2);
  CHECK(memcmp(C1, C2, nc * sizeof(float)) == 0,
        "%s M=%lld N=%lld K=%lld ta=%d tb=%d batch=%lld alpha=%g beta=%g: 1 "
        "and %d threads differ",
        path_name(), (long long)M, (long long)N, (long long)K, ta, tb,
        (long long)batch, alpha, beta, threads);
  free(A);
  free(B);
  free(C1);
  free(C2);
}

static void check_threads(int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                          int64_t batch) {
  check_threads_ab(M, N, K, ta, tb, batch, 1.0f, 0.5f, 2);
}

// A small C over a long K (a weight gradient's shape) is cut along its K
// blocks on 2 or more threads, then summed block by block: the same bits as
// one thread, for every alpha and beta, and with the bias as the old C.
static void check_along_k(void) {
  for (int t = 2; t <= 3; t++) {
    check_threads_ab(64, 64, 4100, 1, 0, 1, 1.0f, 0.5f, t);
    check_threads_ab(33, 20, 3001, 0, 1, 1, -0.75f, 0.0f, t);
    check_threads_ab(17, 130, 5000, 1, 1, 1, 2.0f, 1.0f, t);
    check_threads_ab(64, 48, 6000, 0, 0, 1, 1.0f, 0.0f, t);
  }
  const int64_t M = 40, N = 72, K = 4500;
  float *A = random_floats((size_t)(K * M)),
        *B = random_floats((size_t)(K * N));
  float *bias = random_floats((size_t)N);
  float *C1 = malloc((size_t)(M * N) * sizeof(float));
  float *C2 = malloc((size_t)(M * N) * sizeof(float));
  ct_set_threads(1);
  ct_gemm_bf16_bias(true, false, M, N, K, A, M, B, N, bias, C1, N);
  ct_set_threads(2);
  ct_gemm_bf16_bias(true, false, M, N, K, A, M, B, N, bias, C2, N);
  CHECK(memcmp(C1, C2, (size_t)(M * N) * sizeof(float)) == 0,
        "%s: ct_gemm_bf16_bias over a long K: 1 and 2 threads differ",
        path_name());
  free(A);
  free(B);
  free(bias);
  free(C1);
  free(C2);
}

// The largest fp32 subnormal rounds up to 2^-126 (ct_bf16_from_f32); times
// 1 through the packing that is what the emulated path gives, and the
// hardware paths, which read subnormal inputs as zero, give 0.
static void check_subnormal_inputs(void) {
  const float sub = from_bits(0x007fffff), ones[2] = {1.0f, 1.0f};
  const float a[2] = {sub, -sub};
  float C[2];
  ct_gemm_bf16(false, false, 2, 1, 1, 1.0f, a, 1, ones, 1, 0.0f, C, 1);
  const bool emulated = ct_gemm_bf16_active_path() == CT_GEMM_BF16_EMULATED;
  const float want = emulated ? 0x1p-126f : 0.0f;
  CHECK(C[0] == want && C[1] == -want,
        "%s: subnormal input gives %g, %g; want %g, %g", path_name(), C[0],
        C[1], want, -want);
}

static bool same_bits(const float *x, const float *y, size_t n) {
  return memcmp(x, y, n * sizeof *x) == 0;
}

// ct_gemm and friends in bf16 mode against ct_gemm_bf16 on the same inputs.
static void check_precision_switch(int64_t M, int64_t N, int64_t K, bool ta,
                                   bool tb) {
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  const size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N);
  float *A = random_floats(na), *B = random_floats(nb);
  float *bias = random_floats((size_t)N), *want = malloc(nc * sizeof(float));
  float *got = malloc(nc * sizeof(float)), *fp32 = malloc(nc * sizeof(float));
  float *sums = random_floats((size_t)M), *sums0 = malloc((size_t)M * 4);
  memcpy(sums0, sums, (size_t)M * sizeof(float));

  ct_gemm_bf16(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.0f, want, N);
  ct_gemm_set_precision(CT_GEMM_BF16);
  CHECK(ct_gemm_get_precision() == CT_GEMM_BF16, "precision reads back");
  ct_gemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.0f, got, N);
  CHECK(same_bits(got, want, nc),
        "%s: bf16 ct_gemm %lldx%lldx%lld ta=%d "
        "tb=%d is not ct_gemm_bf16",
        path_name(), (long long)M, (long long)N, (long long)K, ta, tb);
  ct_gemm_batched(ta, tb, M, N, K, 0.5f, A, lda, 0, B, ldb, 0, 0.0f, got, N, 0,
                  1);
  CHECK(same_bits(got, want, nc), "%s: bf16 ct_gemm_batched differs",
        path_name());

  // a_sums += the row sums of op(A), unrounded, each from 0 in k order.
  ct_gemm_sum_a(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.0f, got, N, sums);
  CHECK(same_bits(got, want, nc), "%s: bf16 ct_gemm_sum_a product differs",
        path_name());
  int bad_sums = 0;
  for (int64_t i = 0; i < M; i++) {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; k++) acc += ta ? A[k * lda + i] : A[i * lda + k];
    float w = sums0[i] + acc;
    bad_sums += memcmp(&w, &sums[i], sizeof w) != 0;
  }
  CHECK(bad_sums == 0, "%s: bf16 ct_gemm_sum_a: %d row sums differ",
        path_name(), bad_sums);

  // The bias: as filling C with the bias rows, then alpha 1, beta 1.
  for (int64_t i = 0; i < M; i++)
    memcpy(want + i * N, bias, (size_t)N * sizeof(float));
  ct_gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, want, N);
  for (size_t i = 0; i < nc; i++) got[i] = NAN;  // C is not read
  ct_gemm_bias(ta, tb, M, N, K, A, lda, B, ldb, bias, got, N);
  CHECK(same_bits(got, want, nc), "%s: bf16 ct_gemm_bias differs", path_name());
  for (size_t i = 0; i < nc; i++) got[i] = NAN;
  ct_gemm_bf16_bias(ta, tb, M, N, K, A, lda, B, ldb, bias, got, N);
  CHECK(same_bits(got, want, nc), "%s: ct_gemm_bf16_bias differs", path_name());

  // Back to fp32: the products are no longer rounded.
  ct_gemm_set_precision(CT_GEMM_FP32);
  ct_gemm_bias(ta, tb, M, N, K, A, lda, B, ldb, bias, fp32, N);
  CHECK(!same_bits(fp32, want, nc), "%s: fp32 mode gives the bf16 bits",
        path_name());
  free(A);
  free(B);
  free(bias);
  free(want);
  free(got);
  free(fp32);
  free(sums);
  free(sums0);
}

int main(void) {
  check_rounding_table();

  static const ct_gemm_bf16_path paths[] = {
      CT_GEMM_BF16_EMULATED, CT_GEMM_BF16_AVX512BF16, CT_GEMM_BF16_AMX};
  bool tested[4] = {false};
  for (int p = 0; p < 3; p++) {
    ct_gemm_bf16_force_path(paths[p]);
    ct_gemm_bf16_path got = ct_gemm_bf16_active_path();
    CHECK(got != CT_GEMM_BF16_AUTO, "active path is never auto");
    if (got != paths[p]) {
      printf("path %s: not supported here (falls back to %s), skipped\n",
             ct_gemm_bf16_path_name(paths[p]), ct_gemm_bf16_path_name(got));
      continue;
    }
    printf("path %s\n", ct_gemm_bf16_path_name(got));
    tested[got] = true;
    ct_set_threads(2);
    check_rounding_packed();
    check_path();
    check_threads(257, 300, 600, 0, 1, 1);
    check_threads(300, 70, 520, 1, 0, 1);
    check_threads(50, 32, 50, 0, 0, 3);
    check_threads(29, 1100, 40, 1, 1, 1);
    check_threads(100, 40, 300, 0, 0, 1);
    check_along_k();
    check_subnormal_inputs();
    for (int t = 0; t < 4; t++) {
      check_precision_switch(70, 45, 600, t & 1, t >> 1);
      check_precision_switch(5, 130, 33, t & 1, t >> 1);
      check_precision_switch(100, 20, 4000, t & 1, t >> 1);  // sums threaded
    }
    if (got == CT_GEMM_BF16_EMULATED) {
      check_emulated_bits(37, 45, 700, 0, 1, 1.0f, 0.0f);
      check_emulated_bits(17, 33, 257, 1, 0, -0.75f, 0.5f);
      check_emulated_bits(5, 3, 1, 1, 1, 2.0f, 1.0f);
    }
  }

  ct_gemm_bf16_force_path(CT_GEMM_BF16_AUTO);
  CHECK(ct_gemm_bf16_active_path() != CT_GEMM_BF16_AUTO,
        "auto resolves to a path");
  printf("auto path: %s\n", path_name());
  for (int p = 0; p < 3; p++)
    if (tested[paths[p]])
      printf("max |err| / scale, %s: %.3g\n", ct_gemm_bf16_path_name(paths[p]),
             max_err[paths[p]]);
  return test_summary("gemm_bf16");
}
