// AVX-512 gemm micro-kernels: a 14 x 32 tile of C held in 28 zmm
// accumulators (2 vectors of 16 per row). Per k: 2 vector loads of B, 14
// broadcasts of A, 28 FMAs (the FMA ports stay busy; loads have room).
//
// Three A layouts, same arithmetic (one FMA chain per element, k in order):
//   kernel_kmajor: packed A micro-panel, element (i, k) at pa[k * 14 + i]
//   kernel_rows:   A rows, element (i, k) at pa[i * rsa + k], so row-major A
//                  (trans_a == 0) is read in place, without a transposing pack
//   kernel_cols:   A columns, element (i, k) at pa[k * rsa + i], so A stored
//                  transposed (trans_a == 1) is read in place, without a copy
// B rows are 32 floats at pb + k * rsb: a packed panel (rsb == 32) or, for
// small products and narrow B, row-major B read in place (n < 32 loads with
// a mask).
//
// Compiled with a function target attribute, not -mavx512f, so the library
// still runs on any x86-64; the dispatcher (gemm.c) picks them only after
// __builtin_cpu_supports("avx512f").
#include "core/gemm_f32_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "core/gemm_avx512_store.h"

#define MR 14
#define NR 32
// Cache blocking (per thread): the A micro-panel (14 x KC) stays in L1, the
// packed B block (KC x NC, 1 MiB) in L2; MC only sets how much A is packed
// at a time.
#ifndef AVX512_MC
#define AVX512_MC (MR * 12)
#endif
#ifndef AVX512_KC
#define AVX512_KC 256
#endif
#ifndef AVX512_NC
#define AVX512_NC 1024
#endif

#define TARGET __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline))

// The A layouts of a tile (see top).
enum { A_KMAJOR, A_ROWS, A_COLS };

// The whole tile; `layout` selects the A layout and `masked` the B loads.
// Both are compile-time constants at every call, so each variant is a
// straight-line loop.
INLINE TARGET void tile(int64_t kc, const float *restrict pa, int64_t rsa,
                        int layout, const float *restrict pb, int64_t rsb,
                        int masked, float *restrict c, int64_t ldc, float alpha,
                        float beta, int m, int n, const float *bias) {
  __mmask16 mask0 = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
  __mmask16 mask1 = n >= 32  ? (__mmask16)0xFFFF
                    : n > 16 ? (__mmask16)((1u << (n - 16)) - 1)
                             : (__mmask16)0;
  __m512 acc[MR][2];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();

  // Row i of A is at base[i / 3] + (i % 3) * rsa: five pointers and x86
  // scaled-index addressing (rsa * 4, rsa * 8) reach all 14 rows without
  // running out of general registers. The column layouts are the same walk
  // with rsa == 1 and steps of MR (packed) or rsa (in place).
  const int64_t s = layout == A_ROWS ? rsa : 1;
  const int64_t step =
      layout == A_ROWS ? 1 : (layout == A_COLS ? rsa : (int64_t)MR);
  const float *base[5];
#pragma GCC unroll 5
  for (int j = 0; j < 5; j++) base[j] = pa + 3 * j * s;
  for (int64_t k = 0; k < kc; k++) {
    __m512 b0, b1;
    if (masked) {
      b0 = _mm512_maskz_loadu_ps(mask0, pb);
      b1 = _mm512_maskz_loadu_ps(mask1, pb + 16);
    } else {
      b0 = _mm512_loadu_ps(pb);
      b1 = _mm512_loadu_ps(pb + 16);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      __m512 a = _mm512_set1_ps(base[i / 3][(i % 3) * s]);
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
    }
#pragma GCC unroll 5
    for (int j = 0; j < 5; j++) base[j] += step;
    pb += rsb;
  }

  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  int beta_zero = beta == 0.0f;
  // The old values: row i of c, or the bias row for every i.
  const float *in = bias ? bias : c;
  const int64_t ldin = bias ? 0 : ldc;
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    if (i < m) {
      ct_avx512_store_row(c + i * ldc, in + i * ldin, acc[i][0], mask0, va, vb,
                          beta_zero);
      ct_avx512_store_row(c + i * ldc + 16, in + i * ldin + 16, acc[i][1],
                          mask1, va, vb, beta_zero);
    }
  }
}

// A micro-kernel for one A layout: full tiles read B unmasked, edge tiles
// (n < NR) masked; each call below is a straight-line variant of tile.
#define MICRO_KERNEL(name, layout)                                             \
  static TARGET void name(int64_t kc, const float *pa, int64_t rsa,            \
                          const float *pb, int64_t rsb, float *c, int64_t ldc, \
                          float alpha, float beta, int m, int n,               \
                          const float *bias) {                                 \
    if (n == NR)                                                               \
      tile(kc, pa, rsa, layout, pb, rsb, 0, c, ldc, alpha, beta, m, n, bias);  \
    else                                                                       \
      tile(kc, pa, rsa, layout, pb, rsb, 1, c, ldc, alpha, beta, m, n, bias);  \
  }

MICRO_KERNEL(kernel_kmajor, A_KMAJOR)  // rsa unused: steps of MR
MICRO_KERNEL(kernel_rows, A_ROWS)
MICRO_KERNEL(kernel_cols, A_COLS)
#undef MICRO_KERNEL

// Packing helper (see ct_gemm_copy_fn): one or two masked vector copies per
// row instead of a scalar loop; the mask also writes the zero padding.
static TARGET void copy_rows(const float *src, int64_t lds, int64_t rows, int w,
                             float *dst, int width) {
  __mmask16 m0 = w >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << w) - 1);
  __mmask16 m1 = w >= 32  ? (__mmask16)0xFFFF
                 : w > 16 ? (__mmask16)((1u << (w - 16)) - 1)
                          : (__mmask16)0;
  if (width <= 16) {
    __mmask16 keep = (__mmask16)((1u << width) - 1);
    for (int64_t r = 0; r < rows; r++, src += lds, dst += width)
      _mm512_mask_storeu_ps(dst, keep, _mm512_maskz_loadu_ps(m0, src));
  } else if (width == 32) {
    for (int64_t r = 0; r < rows; r++, src += lds, dst += width) {
      _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(m0, src));
      _mm512_storeu_ps(dst + 16, _mm512_maskz_loadu_ps(m1, src + 16));
    }
  } else {
    for (int64_t r = 0; r < rows; r++, src += lds, dst += width)
      for (int j = 0; j < width; j++) dst[j] = j < w ? src[j] : 0.0f;
  }
}

// r[0..15] (rows of a 16 x 16 block) -> r[k] = column k: the classic
// unpack / shuffle / 128-bit-lane shuffle network (4 stages of 16).
INLINE TARGET void transpose16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
  }
}

// Transposing packing helper (see ct_gemm_pack_bt_fn): 16 x 16 blocks of
// B rows go through registers (masked loads cover the depth tail; missing
// rows load as zeros, which is the padding) instead of one scalar store per
// element with a stride of the panel width.
static TARGET void pack_bt(const float *src, int64_t ldb, int64_t kc, int cols,
                           float *dst, int width) {
  if (width % 16 != 0) {  // not this file's panels; kept general
    for (int j = 0; j < width; j++)
      for (int64_t k = 0; k < kc; k++)
        dst[k * width + j] = j < cols ? src[j * ldb + k] : 0.0f;
    return;
  }
  for (int64_t k0 = 0; k0 < kc; k0 += 16) {
    const int depth = kc - k0 < 16 ? (int)(kc - k0) : 16;
    const __mmask16 km = (__mmask16)((1u << depth) - 1);
    for (int j0 = 0; j0 < width; j0 += 16) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++)
        r[i] = j0 + i < cols
                   ? _mm512_maskz_loadu_ps(km, src + (j0 + i) * ldb + k0)
                   : _mm512_setzero_ps();
      transpose16(r);
      float *d = dst + k0 * width + j0;
      for (int k = 0; k < depth; k++) _mm512_storeu_ps(d + k * width, r[k]);
    }
  }
}

const ct_gemm_arch ct_gemm_arch_avx512 = {.mr = MR,
                                          .nr = NR,
                                          .mc = AVX512_MC,
                                          .kc = AVX512_KC,
                                          .nc = AVX512_NC,
                                          .kernel = kernel_kmajor,
                                          .kernel_rows = kernel_rows,
                                          .kernel_cols = kernel_cols,
                                          .masked_b = 1,
                                          .copy_rows = copy_rows,
                                          .pack_bt = pack_bt};

#else
const ct_gemm_arch ct_gemm_arch_avx512 = {0};
#endif
