// The gemm dispatcher: the public entry points of core/gemm.h and
// core/gemm_bf16.h. It reads the calling thread's session for the precision
// and the forced paths, picks the kernels the CPU supports, turns a batch
// into one shared C into single products, and hands each call to a driver:
// fp32 (core/gemm_f32.c) or bf16 (core/gemm_bf16.c). Neither driver knows
// the other; both share core/gemm_internal.h. Every product it runs adds
// 2*M*N*K to the work counter of the session named by its mode
// (core/flops.h).
#include "core/gemm.h"

#include "core/gemm_bf16.h"
#include "core/gemm_internal.h"
#include "core/profile.h"
#include "core/session_internal.h"

// ---------------------------------------------------------------------------
// Paths: forced per session, resolved against the CPU on every call (the
// checks are cached by the compiler runtime and the kernels' own once-flags).

static bool cpu_has(ct_gemm_path path) {
#if defined(__x86_64__) || defined(__i386__)
  switch (path) {
  case CT_GEMM_AVX512: return __builtin_cpu_supports("avx512f");
  case CT_GEMM_AVX2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  default: return true;
  }
#else
  return path == CT_GEMM_SCALAR || path == CT_GEMM_AUTO;
#endif
}

static ct_gemm_path resolve_path(ct_gemm_path forced) {
  ct_gemm_path p = forced == CT_GEMM_AUTO ? CT_GEMM_AVX512 : forced;
  if (p == CT_GEMM_AVX512 && !cpu_has(CT_GEMM_AVX512)) p = CT_GEMM_AVX2;
  if (p == CT_GEMM_AVX2 && !cpu_has(CT_GEMM_AVX2)) p = CT_GEMM_SCALAR;
  return p;
}

static ct_gemm_bf16_path resolve_bf16_path(ct_gemm_bf16_path forced) {
  ct_gemm_bf16_path p = forced == CT_GEMM_BF16_AUTO ? CT_GEMM_BF16_AMX : forced;
  // The AMX path packs with the AVX512-BF16 conversions.
  if (p == CT_GEMM_BF16_AMX &&
      !(ct_gemm_bf16_cpu_has_amx() && ct_gemm_bf16_cpu_has_avx512bf16()))
    p = CT_GEMM_BF16_AVX512BF16;
  if (p == CT_GEMM_BF16_AVX512BF16 && !ct_gemm_bf16_cpu_has_avx512bf16())
    p = CT_GEMM_BF16_EMULATED;
  return p;
}

static const ct_gemm_arch *f32_arch(ct_gemm_path forced) {
  switch (resolve_path(forced)) {
  case CT_GEMM_AVX512: return &ct_gemm_arch_avx512;
  case CT_GEMM_AVX2: return &ct_gemm_arch_avx2;
  default: return &ct_gemm_arch_scalar;
  }
}

static const ct_gemm_bf16_arch *bf16_arch(ct_gemm_bf16_path forced) {
  switch (resolve_bf16_path(forced)) {
  case CT_GEMM_BF16_AMX: return &ct_gemm_bf16_arch_amx;
  case CT_GEMM_BF16_AVX512BF16: return &ct_gemm_bf16_arch_avx512bf16;
  default: return &ct_gemm_bf16_arch_emulated;
  }
}

void ct_gemm_force_path(ct_gemm_path path) {
  ct_session_current()->gemm.path = path;
}

ct_gemm_path ct_gemm_active_path(void) {
  return resolve_path(ct_session_current()->gemm.path);
}

const char *ct_gemm_path_name(ct_gemm_path path) {
  switch (path) {
  case CT_GEMM_AUTO: return "auto";
  case CT_GEMM_SCALAR: return "scalar";
  case CT_GEMM_AVX2: return "avx2";
  case CT_GEMM_AVX512: return "avx512";
  }
  return "unknown";
}

void ct_gemm_bf16_force_path(ct_gemm_bf16_path path) {
  ct_session_current()->gemm.bf16_path = path;
}

ct_gemm_bf16_path ct_gemm_bf16_active_path(void) {
  return resolve_bf16_path(ct_session_current()->gemm.bf16_path);
}

const char *ct_gemm_bf16_path_name(ct_gemm_bf16_path path) {
  switch (path) {
  case CT_GEMM_BF16_AUTO: return "auto";
  case CT_GEMM_BF16_EMULATED: return "emulated";
  case CT_GEMM_BF16_AVX512BF16: return "avx512bf16";
  case CT_GEMM_BF16_AMX: return "amx";
  }
  return "unknown";
}

void ct_gemm_set_precision(ct_gemm_precision p) {
  ct_session_current()->gemm.precision = p;
}

ct_gemm_precision ct_gemm_get_precision(void) {
  return ct_session_current()->gemm.precision;
}

void ct_gemm_set_bf16_activations(bool on) {
  ct_session_current()->bf16_activations_off = !on;
}

bool ct_gemm_bf16_activations(void) {
  return !ct_session_current()->bf16_activations_off;
}

ct_gemm_mode ct_gemm_current_mode(void) {
  ct_session *s = ct_session_current();
  ct_gemm_mode mode = s->gemm;
  mode.session = s;
  return mode;
}

// ---------------------------------------------------------------------------
// Dispatch.

static void dispatch(const ct_gemm_mode *mode, ct_gemm_call c) {
  if (c.M <= 0 || c.batch <= 0) return;
  if (c.N <= 0) {  // no product; the row sums of op(A) are still asked for
    if (c.a_sums) ct_gemm_add_a_sums(c.trans_a, c.M, c.K, c.A, c.lda, c.a_sums);
    return;
  }
  // Several products into one shared C accumulate in batch order.
  if (c.stride_c == 0 && c.batch > 1) {
    ct_gemm_call one = c;
    one.batch = 1;
    for (int64_t b = 0; b < c.batch; b++) {
      one.A = c.A ? c.A + b * c.stride_a : NULL;
      one.B = c.B ? c.B + b * c.stride_b : NULL;
      one.A16 = c.A16 ? c.A16 + b * c.stride_a : NULL;
      one.B16 = c.B16 ? c.B16 + b * c.stride_b : NULL;
      one.beta = b == 0 ? c.beta : 1.0f;
      dispatch(mode, one);
    }
    return;
  }
  if (mode->session && c.K > 0)
    ct_flops_add_to(mode->session, mode->precision,
                    (uint64_t)(2 * c.M * c.N * c.K * c.batch));
  if (mode->precision == CT_GEMM_BF16) {
    // The row sums are of the unrounded A, in fp32.
    if (c.a_sums) ct_gemm_add_a_sums(c.trans_a, c.M, c.K, c.A, c.lda, c.a_sums);
    ct_gemm_bf16_run(bf16_arch(mode->bf16_path), &c);
  } else {
    ct_gemm_f32_run(f32_arch(mode->path), &c);
  }
}

// The entry points called from the session's own thread time their
// products for the profiler (core/profile.h); ct_gemm_in_mode, which
// kernels call from their OpenMP workers, does not.
static void dispatch_timed(const ct_gemm_mode *mode, ct_gemm_call c) {
  const double t0 = ct_prof_gemm_begin();
  if (t0 >= 0.0) c.pack_ns = ct_prof_pack_counter();
  dispatch(mode, c);
  ct_prof_gemm_end(t0);
}

// The arguments of a batched product with nothing folded in (no bias, row
// sums or bf16 storage): the entry points add theirs.
static ct_gemm_call batched_call(bool trans_a, bool trans_b, int64_t M,
                                 int64_t N, int64_t K, float alpha,
                                 const float *A, int64_t lda, int64_t stride_a,
                                 const float *B, int64_t ldb, int64_t stride_b,
                                 float beta, float *C, int64_t ldc,
                                 int64_t stride_c, int64_t batch) {
  return (ct_gemm_call){.trans_a = trans_a,
                        .trans_b = trans_b,
                        .M = M,
                        .N = N,
                        .K = K,
                        .alpha = alpha,
                        .beta = beta,
                        .A = A,
                        .lda = lda,
                        .stride_a = stride_a,
                        .B = B,
                        .ldb = ldb,
                        .stride_b = stride_b,
                        .C = C,
                        .ldc = ldc,
                        .stride_c = stride_c,
                        .batch = batch};
}

static ct_gemm_call single_call(bool trans_a, bool trans_b, int64_t M,
                                int64_t N, int64_t K, float alpha,
                                const float *A, int64_t lda, const float *B,
                                int64_t ldb, float beta, float *C,
                                int64_t ldc) {
  return batched_call(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0,
                      beta, C, ldc, 0, 1);
}

void ct_gemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N,
                     int64_t K, float alpha, const float *A, int64_t lda,
                     int64_t stride_a, const float *B, int64_t ldb,
                     int64_t stride_b, float beta, float *C, int64_t ldc,
                     int64_t stride_c, int64_t batch) {
  const ct_gemm_mode mode = ct_gemm_current_mode();
  dispatch_timed(
      &mode, batched_call(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B,
                          ldb, stride_b, beta, C, ldc, stride_c, batch));
}

void ct_gemm_in_mode(const ct_gemm_mode *mode, bool trans_a, bool trans_b,
                     int64_t M, int64_t N, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb,
                     float beta, float *C, int64_t ldc) {
  dispatch(mode, single_call(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                             beta, C, ldc));
}

void ct_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
             float alpha, const float *A, int64_t lda, const float *B,
             int64_t ldb, float beta, float *C, int64_t ldc) {
  const ct_gemm_mode mode = ct_gemm_current_mode();
  dispatch_timed(&mode, single_call(trans_a, trans_b, M, N, K, alpha, A, lda, B,
                                    ldb, beta, C, ldc));
}

void ct_gemm_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  const float *bias, float *C, int64_t ldc) {
  const ct_gemm_mode mode = ct_gemm_current_mode();
  ct_gemm_call c = single_call(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb,
                               1.0f, C, ldc);
  c.bias = bias;
  dispatch_timed(&mode, c);
}

void ct_gemm_sum_a(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                   float alpha, const float *A, int64_t lda, const float *B,
                   int64_t ldb, float beta, float *C, int64_t ldc,
                   float *a_sums) {
  const ct_gemm_mode mode = ct_gemm_current_mode();
  ct_gemm_call c = single_call(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                               beta, C, ldc);
  c.a_sums = a_sums;
  dispatch_timed(&mode, c);
}

// The bf16 entry points: bf16 whatever the session's precision, on its
// bf16 path.
static ct_gemm_mode bf16_mode(void) {
  ct_gemm_mode mode = ct_gemm_current_mode();
  mode.precision = CT_GEMM_BF16;
  return mode;
}

void ct_gemm_bf16_batched(bool trans_a, bool trans_b, int64_t M, int64_t N,
                          int64_t K, float alpha, const float *A, int64_t lda,
                          int64_t stride_a, const float *B, int64_t ldb,
                          int64_t stride_b, float beta, float *C, int64_t ldc,
                          int64_t stride_c, int64_t batch) {
  const ct_gemm_mode mode = bf16_mode();
  dispatch_timed(
      &mode, batched_call(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B,
                          ldb, stride_b, beta, C, ldc, stride_c, batch));
}

void ct_gemm_bf16_bias(bool trans_a, bool trans_b, int64_t M, int64_t N,
                       int64_t K, const float *A, int64_t lda, const float *B,
                       int64_t ldb, const float *bias, float *C, int64_t ldc) {
  const ct_gemm_mode mode = bf16_mode();
  ct_gemm_call c = single_call(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb,
                               1.0f, C, ldc);
  c.bias = bias;
  dispatch_timed(&mode, c);
}

void ct_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                  float alpha, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float beta, float *C, int64_t ldc) {
  const ct_gemm_mode mode = bf16_mode();
  dispatch_timed(&mode, single_call(trans_a, trans_b, M, N, K, alpha, A, lda, B,
                                    ldb, beta, C, ldc));
}

void ct_gemm_bf16_stored(bool trans_a, bool trans_b, int64_t M, int64_t N,
                         int64_t K, float alpha, const ct_gemm_src *A,
                         const ct_gemm_src *B, float beta, const float *bias,
                         float *C, uint16_t *C16, int64_t ldc, float *a_sums) {
  const ct_gemm_mode mode = bf16_mode();
  ct_gemm_call c = single_call(trans_a, trans_b, M, N, K, alpha, A->f, A->ld,
                               B->f, B->ld, beta, C16 ? NULL : C, ldc);
  c.bias = bias;
  c.a_sums = a_sums;
  c.A16 = A->f ? NULL : A->h;
  c.B16 = B->f ? NULL : B->h;
  c.C16 = C16;
  dispatch_timed(&mode, c);
}

// ---------------------------------------------------------------------------
// bf16 storage (core/gemm_bf16.h).

enum { BF16_STORE_CHUNK = 1 << 16 };  // elements per task of a parallel copy

void ct_bf16_store_in_mode(const ct_gemm_mode *mode, const float *src,
                           int64_t n, uint16_t *dst) {
  const ct_gemm_bf16_arch *a = bf16_arch(mode->bf16_path);
  if (a->round_row) {
    a->round_row(src, n, dst);
  } else {
    for (int64_t j = 0; j < n; j++) dst[j] = ct_bf16_round_bits(src[j]);
  }
}

void ct_bf16_store(const float *src, int64_t n, uint16_t *dst) {
  const ct_gemm_mode mode = ct_gemm_current_mode();
  const int64_t chunks = (n + BF16_STORE_CHUNK - 1) / BF16_STORE_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t i0 = c * BF16_STORE_CHUNK;
    const int64_t len = n - i0 < BF16_STORE_CHUNK ? n - i0 : BF16_STORE_CHUNK;
    ct_bf16_store_in_mode(&mode, src + i0, len, dst + i0);
  }
}

void ct_bf16_load(const uint16_t *src, int64_t n, float *dst) {
#pragma omp parallel for simd schedule(static) if (n > 2 * BF16_STORE_CHUNK)
  for (int64_t i = 0; i < n; i++) dst[i] = ct_bf16_bits_to_f32(src[i]);
}
