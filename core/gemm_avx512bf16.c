// AVX512-BF16 gemm kernel: a 14 x 32 tile of C in 28 zmm accumulators, fed
// by vdpbf16ps, which multiplies 16 pairs of bf16 from A by 16 pairs from B
// and adds both products to 16 fp32 accumulators. Per pair of k: 2 loads of
// the B panel (32 columns of pair words), 14 broadcasts of an A pair word,
// 28 dot products: the fp32 kernel's shape (gemm_avx512.c) at twice the
// depth per instruction.
//
// Also the AVX-512 packing helpers that round fp32 to bf16, 16 values at a
// time with the integer steps of ct_bf16_round_bits (not vcvtne2ps2bf16,
// which would flush subnormal inputs), shared with the AMX path.
//
// Compiled with function target attributes, so the library still runs on any
// x86-64; the driver calls these only after the cpuid checks below.
#include "core/gemm_bf16_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#include "core/gemm_avx512_store.h"
#include <pthread.h>

#define MR 14
#define NR 32

#define TARGET_F __attribute__((target("avx512f")))
#define TARGET_BF16 __attribute__((target("avx512f,avx512bf16")))
#define TARGET_CVT \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define INLINE static inline __attribute__((always_inline))

static bool bf16_ok;
static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;

// CPUID.(EAX=7,ECX=1):EAX bit 5; avx512f also covers the OS saving zmm.
// Asked once: cpuid traps to the hypervisor in a virtual machine, and the
// path is checked on every gemm call.
static void bf16_probe(void) {
  unsigned a, b, c, d;
  if (!__builtin_cpu_supports("avx512f") || __get_cpuid_max(0, NULL) < 7)
    return;
  __cpuid_count(7, 1, a, b, c, d);
  // BW and VL for the packing's 16-bit stores and permutes (every CPU with
  // AVX512-BF16 has them).
  bf16_ok = ((a >> 5) & 1u) && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl");
}

bool ct_gemm_bf16_cpu_has_avx512bf16(void) {
  pthread_once(&bf16_once, bf16_probe);
  return bf16_ok;
}

// ---------------------------------------------------------------------------
// Packing helpers.

// 16 floats to bf16 in the low half of each 32-bit lane.
INLINE TARGET_F __m512i round16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb =
      _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))),
      16);
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan =
      _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7f800000));
  const __m512i quiet =
      _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(r, nan, quiet);
}

INLINE __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

TARGET_F void ct_bf16_round_row_avx512(const float *src, int64_t n,
                                       uint16_t *dst) {
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 m = tail_mask(n - j);
    __m512i r = round16(_mm512_maskz_loadu_ps(m, src + j));
    _mm512_mask_cvtepi32_storeu_epi16(dst + j, m, r);
  }
}

TARGET_F void ct_bf16_pair_rows_avx512(const float *r0, const float *r1,
                                       int64_t n, uint16_t *dst) {
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 m = tail_mask(n - j);
    __m512i w = round16(_mm512_maskz_loadu_ps(m, r0 + j));
    if (r1)
      w = _mm512_or_si512(
          w, _mm512_slli_epi32(round16(_mm512_maskz_loadu_ps(m, r1 + j)), 16));
    _mm512_mask_storeu_epi32(dst + 2 * j, m, w);
  }
}

// One 16 x 16 block of words transposed in registers: pairs of rows
// interleaved by 32 bits, then by 64 bits (u[4i + c] holds, in 128-bit lane
// L, column 4L + c of rows 4i..4i+3), then the lanes gathered so that
// output row j = 4L + c takes lane L of u[c], u[4 + c], u[8 + c], u[12 + c].
// Rows past `rows` read as zeros, columns past `cols` are not stored.
INLINE TARGET_F void transpose16(const uint32_t *src, int64_t lds, int rows,
                                 int cols, uint32_t *dst, int64_t ldd) {
  const __mmask16 cm = tail_mask(cols), rm = tail_mask(rows);
  __m512i r[16], t[16], u[16];
  for (int i = 0; i < 16; i++)
    r[i] = i < rows ? _mm512_maskz_loadu_epi32(cm, src + i * lds)
                    : _mm512_setzero_si512();
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; c++) {
    __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    __m512i v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    const __m512i out[4] = {
        _mm512_shuffle_i32x4(v0, v2, 0x88), _mm512_shuffle_i32x4(v0, v2, 0xdd),
        _mm512_shuffle_i32x4(v1, v3, 0x88), _mm512_shuffle_i32x4(v1, v3, 0xdd)};
    for (int l = 0; l < 4; l++)
      if (4 * l + c < cols)
        _mm512_mask_storeu_epi32(dst + (4 * l + c) * ldd, rm, out[l]);
  }
}

TARGET_F void ct_bf16_transpose_words_avx512(const uint32_t *src, int64_t lds,
                                             int64_t rows, int64_t cols,
                                             uint32_t *dst, int64_t ldd) {
  for (int64_t r0 = 0; r0 < rows; r0 += 16)
    for (int64_t c0 = 0; c0 < cols; c0 += 16)
      transpose16(
          src + r0 * lds + c0, lds, (int)(rows - r0 < 16 ? rows - r0 : 16),
          (int)(cols - c0 < 16 ? cols - c0 : 16), dst + c0 * ldd + r0, ldd);
}

// The same packing with the conversion instruction (vcvtne2ps2bf16), for the
// AVX512-BF16 and AMX paths: round to nearest even, NaN made quiet, but
// subnormal inputs read as zero. Their products read subnormal bf16 inputs
// as zero anyway, so the one difference to ct_bf16_round_bits is the fp32
// values less than 2^-133 below 2^-126, which it rounds up to 2^-126 and
// the instruction flushes to 0.
TARGET_CVT void ct_bf16_round_row_cvt(const float *src, int64_t n,
                                      uint16_t *dst) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + j + 16),
                                     _mm512_loadu_ps(src + j));
    _mm512_storeu_si512(dst + j, (__m512i)h);
  }
  for (; j < n; j += 16) {
    __mmask16 m = tail_mask(n - j);
    __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + j));
    _mm256_mask_storeu_epi16(dst + j, m, (__m256i)h);
  }
}

TARGET_CVT void ct_bf16_pair_rows_cvt(const float *r0, const float *r1,
                                      int64_t n, uint16_t *dst) {
  // Word j of the result is (r0[j], r1[j]): 16-bit element 2j from the
  // first half of the conversion (r0), 2j + 1 from the second (r1).
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11,
                                       26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 m = tail_mask(n - j);
    __m512 lo = _mm512_maskz_loadu_ps(m, r0 + j);
    __m512 hi = r1 ? _mm512_maskz_loadu_ps(m, r1 + j) : _mm512_setzero_ps();
    __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_epi32(dst + 2 * j, m, _mm512_permutexvar_epi16(idx, h));
  }
}

// ---------------------------------------------------------------------------
// The kernel.

// Row i of A is at base[i / 3] + (i % 3) * lda_p, as in gemm_avx512.c: five
// pointers and scaled-index addressing reach all 14 rows.
static TARGET_BF16 void kernel(int64_t kp, const uint16_t *pa, int64_t lda_p,
                               const uint16_t *pb, float *c, int64_t ldc,
                               const float *old, int64_t ldo, float alpha,
                               float beta, int m, int n) {
  __m512 acc[MR][2];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const uint16_t *base[5];
#pragma GCC unroll 5
  for (int j = 0; j < 5; j++) base[j] = pa + 3 * j * lda_p;
  for (int64_t k = 0; k < kp; k += 2, pb += 2 * NR) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(pb);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(pb + NR);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      uint32_t word;
      memcpy(&word, base[i / 3] + (i % 3) * lda_p + k, sizeof word);
      __m512bh a = (__m512bh)_mm512_set1_epi32((int)word);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
    }
  }

  __mmask16 mask0 = tail_mask(n), mask1 = n > 16 ? tail_mask(n - 16) : 0;
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  int beta_zero = beta == 0.0f;
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    if (i < m) {
      ct_avx512_store_row(c + i * ldc, old + i * ldo, acc[i][0], mask0, va, vb,
                          beta_zero);
      ct_avx512_store_row(c + i * ldc + 16, old + i * ldo + 16, acc[i][1],
                          mask1, va, vb, beta_zero);
    }
  }
}

// Blocking: the A panel (14 x KC bf16, 14 KiB) stays in L1 and the packed B
// block (KC x NC bf16, 1 MiB) in L2.
const ct_gemm_bf16_arch ct_gemm_bf16_arch_avx512bf16 = {
    .mr = MR,
    .nr = NR,
    .kgran = 2,
    .mc = MR * 12,
    .kc = 512,
    .nc = 1024,
    .kernel = kernel,
    .round_row = ct_bf16_round_row_cvt,
    .pair_rows = ct_bf16_pair_rows_cvt,
    .transpose_words = ct_bf16_transpose_words_avx512};

#else
bool ct_gemm_bf16_cpu_has_avx512bf16(void) { return false; }
void ct_bf16_round_row_avx512(const float *src, int64_t n, uint16_t *dst) {
  (void)src, (void)n, (void)dst;
}
void ct_bf16_pair_rows_avx512(const float *r0, const float *r1, int64_t n,
                              uint16_t *dst) {
  (void)r0, (void)r1, (void)n, (void)dst;
}
void ct_bf16_round_row_cvt(const float *src, int64_t n, uint16_t *dst) {
  (void)src, (void)n, (void)dst;
}
void ct_bf16_pair_rows_cvt(const float *r0, const float *r1, int64_t n,
                           uint16_t *dst) {
  (void)r0, (void)r1, (void)n, (void)dst;
}
void ct_bf16_transpose_words_avx512(const uint32_t *src, int64_t lds,
                                    int64_t rows, int64_t cols, uint32_t *dst,
                                    int64_t ldd) {
  (void)src, (void)lds, (void)rows, (void)cols, (void)dst, (void)ldd;
}
const ct_gemm_bf16_arch ct_gemm_bf16_arch_avx512bf16 = {0};
#endif
