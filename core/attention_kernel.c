// Fused attention: forward (online softmax, keeps lse) and backward
// (recomputes the scores). See attention.h for the math, the masks and the
// determinism argument.
//
// Blocking: query blocks of BQ = 64 rows against key blocks of BK = 128.
// The block products (S = Q K^T, O += P V in the forward pass; S,
// dP = dO V^T, dV += P^T dO, dQ += dS K, dK += dS^T Q in backward) run
// single-threaded inside our parallel region: on AVX-512 in this file's own
// register-blocked kernels (fp32: small_gemm_avx512, no packing; bf16 where
// the gemm would use AVX512-BF16: small_bf16_avx512), otherwise through
// ct_gemm. K and V of one (b, h) are first transposed into
// scratch (Dh, Tk), so that every product has a row-major right operand,
// read in place; the strided [B,T,NH,Dh] rows of q, k, v, dout are read in
// place too. The row
// work between products (masks, bias, exp, row sums) is plain C in
// `#pragma omp simd` loops, compiled three times (baseline, AVX2, AVX-512
// via target attributes) and chosen at run time with __builtin_cpu_supports.
//
// Not here: tensors and autograd (autograd/ops_attention.c).
#include "core/attention_kernel.h"
#include "core/rng.h"

#include "core/arena.h"
#include "core/gemm.h"
#include "core/gemm_bf16_kernels.h"
#include "core/session_internal.h"

#include <math.h>
#include <omp.h>
#include <string.h>

enum { BQ = 64, BK = 128 };

#define ATTN_INLINE static inline __attribute__((always_inline))

ct_attn_params ct_attn_params_make(int64_t B, int64_t Tq, int64_t Tk,
                                   int64_t NH, int64_t Dh) {
  ct_attn_params p = {.B = B, .Tq = Tq, .Tk = Tk, .NH = NH, .Dh = Dh};
  p.q = p.out = ct_attn_layout_bthd(Tq, NH, Dh);
  p.k = p.v = ct_attn_layout_bthd(Tk, NH, Dh);
  p.scale = Dh > 0 ? (float)(1.0 / sqrt((double)Dh)) : 1.0f;
  return p;
}

ct_status ct_attention_check(const ct_attn_params *p) {
  if (p->B < 0 || p->Tq < 0 || p->Tk < 0 || p->NH < 0 || p->Dh < 1)
    return ct_error(CT_ERR_ARG,
                    "attention: bad sizes B=%lld Tq=%lld Tk=%lld NH=%lld "
                    "Dh=%lld (need Dh >= 1, others >= 0)",
                    (long long)p->B, (long long)p->Tq, (long long)p->Tk,
                    (long long)p->NH, (long long)p->Dh);
  if (!(p->dropout_p >= 0.0f && p->dropout_p < 1.0f))
    return ct_error(CT_ERR_ARG, "attention: dropout_p %g outside [0, 1)",
                    (double)p->dropout_p);
  if (p->window_mask && (p->n_windows < 1 || p->B % p->n_windows))
    return ct_error(CT_ERR_ARG,
                    "attention: %lld windows in the window mask do not "
                    "divide the batch of %lld",
                    (long long)p->n_windows, (long long)p->B);
  if (p->key_lengths)
    for (int64_t b = 0; b < p->B; b++)
      if (p->key_lengths[b] < 0 || p->key_lengths[b] > p->Tk)
        return ct_error(
            CT_ERR_INDEX,
            "attention: key_lengths[%lld] = %d outside [0, Tk=%lld]",
            (long long)b, (int)p->key_lengths[b], (long long)p->Tk);
  return CT_OK;
}

// ---------------------------------------------------------------------------
// exp that vectorizes: Cephes expf (range reduction x = n ln2 + r, degree-6
// polynomial, ~1 ulp), with x < -87.3 (including -inf) giving exactly 0.
// libm's expf is a call the vectorizer cannot use without -ffast-math.

// Its constants, shared with its 16-lane copy exp16 (AVX-512, below).
#define ATTN_EXP_LO (-87.3365447504f)  // below: exactly 0
#define ATTN_EXP_HI 88.0f
#define ATTN_EXP_LOG2E 1.44269504088896341f
#define ATTN_EXP_SHIFT 12582912.0f  // 1.5 * 2^23, rounds to an integer
#define ATTN_EXP_LN2_HI 0.693359375f
#define ATTN_EXP_LN2_LO (-2.12194440e-4f)
static const float attn_exp_poly[6] = {1.9875691500e-4f, 1.3981999507e-3f,
                                       8.3334519073e-3f, 4.1665795894e-2f,
                                       1.6666665459e-1f, 5.0000001201e-1f};

ATTN_INLINE float attn_exp(float x) {
  const float lo = ATTN_EXP_LO, hi = ATTN_EXP_HI;
  float xc = x < lo ? lo : (x > hi ? hi : x);
  // Round x*log2(e) to nearest with the 1.5*2^23 trick (no libm call): t's
  // low mantissa bits then hold n, read as unsigned bits below, never by a
  // float-to-int cast (undefined for the NaN a non-finite score brings;
  // NaN comes out as NaN through y).
  float t = xc * ATTN_EXP_LOG2E + ATTN_EXP_SHIFT;
  float n = t - ATTN_EXP_SHIFT;
  float r = xc - n * ATTN_EXP_LN2_HI;
  r = r - n * ATTN_EXP_LN2_LO;
  float y = attn_exp_poly[0];
  for (int j = 1; j < 6; j++) y = y * r + attn_exp_poly[j];
  y = y * r * r + r + 1.0f;
  uint32_t tb;
  memcpy(&tb, &t, sizeof tb);
  uint32_t bits = (tb - 0x4B400000u + 127u) << 23;  // 2^n as float bits
  float pow2n;
  memcpy(&pow2n, &bits, sizeof pow2n);
  return x < lo ? 0.0f : y * pow2n;
}

// ---------------------------------------------------------------------------
// The row work of one tile, as always-inline bodies compiled per ISA below.
//
// A tile is rows r < mq (query i0 + r) and columns c < nk (key j0 + c) of S,
// row stride BK. Column c of row r is visible iff c < lim[r] (causal and
// length limits, relative to j0) and kadd[c] == 0 (kadd holds 0 or -inf from
// the key mask; NULL when there is none).

typedef struct tile {
  int mq, nk;
  const int *lim;     // (mq) visible columns per row
  const float *bias;  // row r at bias + r * bias_ld, or NULL
  const float *mask;  // row r at mask + r * bias_ld, or NULL
  int64_t bias_ld;
  const float *kadd;  // (nk) 0 / -inf, or NULL
} tile;

// Scores -> masked logits in place: x = s + bias + mask + kadd, -inf past
// lim.
ATTN_INLINE void tile_logits(const tile *t, float *restrict s) {
  for (int r = 0; r < t->mq; r++) {
    float *restrict row = s + (int64_t)r * BK;
    const int lim = t->lim[r];
    if (t->bias) {
      const float *restrict b = t->bias + r * t->bias_ld;
#pragma omp simd
      for (int c = 0; c < t->nk; c++) row[c] += b[c];
    }
    if (t->mask) {
      const float *restrict m = t->mask + r * t->bias_ld;
#pragma omp simd
      for (int c = 0; c < t->nk; c++) row[c] += m[c];
    }
    if (t->kadd) {
      const float *restrict ka = t->kadd;
#pragma omp simd
      for (int c = 0; c < t->nk; c++) row[c] += ka[c];
    }
    for (int c = lim; c < t->nk; c++) row[c] = -INFINITY;
  }
}

// The new running max of a row whose visible max in this tile is bm, from
// its old one m: -INFINITY when nothing is visible yet, in which case the
// row's P is set to 0 and its state stays as it is. Unless the row holds a
// NaN, which no max comparison sees: then the max is NaN, which makes the
// row's output and log-sum-exp NaN too.
ATTN_INLINE float row_max_or_skip(float *restrict row, int nk, float bm,
                                  float m) {
  float mn = bm > m ? bm : m;
  if (mn == -INFINITY) {
    bool nan = false;
    for (int c = 0; c < nk; c++) nan |= row[c] != row[c];
    if (!nan) {
      memset(row, 0, (size_t)nk * sizeof(float));
      return -INFINITY;
    }
    mn = NAN;
  }
  return mn;
}

// The row's state after a tile whose exps (shifted by the new max mn) sum
// to `sum`: l and m, and the output accumulator o rescaled. A row with
// nothing visible before holds no sum yet (the first key block's product
// assigns o; later ones added only zero weights).
ATTN_INLINE void row_state_update(float *restrict m, float *restrict l,
                                  float *restrict orow, int64_t dh, float mn,
                                  float sum) {
  const bool held = *m != -INFINITY;
  const float corr = held ? attn_exp(*m - mn) : 0.0f;
  *l = *l * corr + sum;
  *m = mn;
  if (held && corr != 1.0f) {
#pragma omp simd
    for (int64_t d = 0; d < dh; d++) orow[d] *= corr;
  }
}

// Forward online-softmax step for one tile. m, l: running max and sum of
// exp per row; corr: the factor each row of the output accumulator must be
// multiplied by before P V is added. s becomes P = exp(x - m_new).
ATTN_INLINE void fwd_tile_impl(const tile *t, float *restrict s,
                               float *restrict m, float *restrict l,
                               float *restrict o, int64_t dh) {
  tile_logits(t, s);
  for (int r = 0; r < t->mq; r++) {
    float *restrict row = s + (int64_t)r * BK;
    float bm = -INFINITY;
#pragma omp simd reduction(max : bm)
    for (int c = 0; c < t->nk; c++) bm = row[c] > bm ? row[c] : bm;
    const float mn = row_max_or_skip(row, t->nk, bm, m[r]);
    if (mn == -INFINITY) continue;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < t->nk; c++) {
      float e = attn_exp(row[c] - mn);
      row[c] = e;
      sum += e;
    }
    row_state_update(&m[r], &l[r], o + r * dh, dh, mn, sum);
  }
}

// Backward for one tile. In: s = scores, dp = dO V^T (the gradient of the
// dropped weights Z), keep = 0 or 1/(1-p) per element or NULL. Out: s = P
// (or Z = P * keep when keep), dp = dS = P * (dP - delta), the gradient of
// the logits.
ATTN_INLINE void bwd_tile_impl(const tile *t, float *restrict s,
                               float *restrict dp, const float *restrict lse,
                               const float *restrict delta,
                               const float *restrict keep) {
  tile_logits(t, s);
  for (int r = 0; r < t->mq; r++) {
    float *restrict row = s + (int64_t)r * BK;
    float *restrict drow = dp + (int64_t)r * BK;
    const float lr = lse[r], dr = delta[r];
    if (lr == -INFINITY) {  // a fully masked row: no gradient
      memset(row, 0, (size_t)t->nk * sizeof(float));
      memset(drow, 0, (size_t)t->nk * sizeof(float));
      continue;
    }
    if (keep) {
      const float *restrict kr = keep + (int64_t)r * BK;
#pragma omp simd
      for (int c = 0; c < t->nk; c++) {
        float p = attn_exp(row[c] - lr);
        drow[c] = p * (drow[c] * kr[c] - dr);
        row[c] = p * kr[c];
      }
    } else {
#pragma omp simd
      for (int c = 0; c < t->nk; c++) {
        float p = attn_exp(row[c] - lr);
        drow[c] = p * (drow[c] - dr);
        row[c] = p;
      }
    }
  }
}

// Dropout factors of n consecutive weights from flat index `first`:
// keep[c] = inv if uniform(first + c) >= p, else 0, with uniform() exactly
// ct_rng_uniform_at of core/rng.c (the tests compare the two). The Philox
// blocks of a whole row come from one vectorized call (ct_philox_blocks);
// a call per counter cost more than the whole attention. thr = p * 2^24:
// u >= p exactly when the 24-bit integer behind u is >= thr. words: n + 8
// scratch words.
ATTN_INLINE void keep_row_impl(uint64_t seed, uint64_t stream, uint64_t first,
                               int n, float thr, float inv,
                               uint32_t *restrict words, float *restrict keep) {
  const uint64_t g0 = first >> 2;
  const int ng = (int)(((first + (uint64_t)n - 1) >> 2) - g0 + 1);
  ct_philox_blocks(seed, stream, g0, ng, words);
  const uint32_t *restrict w = words + (first & 3);
#pragma omp simd
  for (int c = 0; c < n; c++)
    keep[c] = (float)(int32_t)(w[c] >> 8) >= thr ? inv : 0.0f;
}

typedef void (*keep_row_fn)(uint64_t, uint64_t, uint64_t, int, float, float,
                            uint32_t *, float *);
typedef void (*fwd_tile_fn)(const tile *, float *, float *, float *, float *,
                            int64_t);
typedef void (*bwd_tile_fn)(const tile *, float *, float *, const float *,
                            const float *, const float *);

static void fwd_tile_base(const tile *t, float *s, float *m, float *l, float *o,
                          int64_t dh) {
  fwd_tile_impl(t, s, m, l, o, dh);
}
static void bwd_tile_base(const tile *t, float *s, float *dp, const float *lse,
                          const float *delta, const float *keep) {
  bwd_tile_impl(t, s, dp, lse, delta, keep);
}
static void keep_row_base(uint64_t seed, uint64_t stream, uint64_t first, int n,
                          float thr, float inv, uint32_t *words, float *keep) {
  keep_row_impl(seed, stream, first, n, thr, inv, words, keep);
}

#if defined(__x86_64__) || defined(__i386__)
#define ATTN_X86 1
__attribute__((target("avx2,fma"))) static void fwd_tile_avx2(
    const tile *t, float *s, float *m, float *l, float *o, int64_t dh) {
  fwd_tile_impl(t, s, m, l, o, dh);
}
__attribute__((target("avx2,fma"))) static void bwd_tile_avx2(
    const tile *t, float *s, float *dp, const float *lse, const float *delta,
    const float *keep) {
  bwd_tile_impl(t, s, dp, lse, delta, keep);
}
__attribute__((target("avx2,fma"))) static void keep_row_avx2(
    uint64_t seed, uint64_t stream, uint64_t first, int n, float thr, float inv,
    uint32_t *words, float *keep) {
  keep_row_impl(seed, stream, first, n, thr, inv, words, keep);
}
__attribute__((target("avx512f"))) static void bwd_tile_avx512(
    const tile *t, float *s, float *dp, const float *lse, const float *delta,
    const float *keep) {
  bwd_tile_impl(t, s, dp, lse, delta, keep);
}
__attribute__((target("avx512f"))) static void keep_row_avx512(
    uint64_t seed, uint64_t stream, uint64_t first, int n, float thr, float inv,
    uint32_t *words, float *keep) {
  keep_row_impl(seed, stream, first, n, thr, inv, words, keep);
}
#endif

// dst (dh, n) with row stride ld = the first n rows of src (row stride rs)
// transposed, so that q K^T and dO V^T become products with a row-major
// right operand, which the block products read in place instead of
// transposing it on every call. Bands of 16 rows keep the strided reads in
// a few cache lines.
static void transpose_rows(const float *src, int64_t rs, int64_t n, int64_t dh,
                           float *restrict dst, int64_t ld) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nj = n - j0 < 16 ? n - j0 : 16;
    for (int64_t d = 0; d < dh; d++) {
      float *restrict out = dst + d * ld + j0;
      const float *in = src + j0 * rs + d;
      for (int64_t j = 0; j < nj; j++) out[j] = in[j * rs];
    }
  }
}

typedef void (*transpose_fn)(const float *src, int64_t rs, int64_t n,
                             int64_t dh, float *restrict dst, int64_t ld);

// ---------------------------------------------------------------------------
// fp32 block products without the gemm's packing. A block product is at
// most BQ x BK x Dh (or BK x Dh x BQ), too small for ct_gemm's panels to pay
// for themselves: at T = 50 much of a call went into packing and into the
// padding of its 14 x 32 micro-tiles. On AVX-512 they run here instead:
//
//   C (M,N) = alpha * A B          (accumulate false)
//   C (M,N) = alpha * A B + C      (accumulate true)
//
// A element (i, k) at a[i * a_rs + k * a_cs] (so A^T is read in place by
// swapping the strides), B row-major (K,N) with row stride ldb. C is held in
// registers as blocks of up to 8 rows x 64 or 80 columns (up to 5 vectors,
// the last one masked; SMALL_DRIVER below); every element is one FMA chain
// over k in order, so the result depends on nothing but the operands (not
// on the thread count, not on the block a row falls in).
//
// bf16 products, where the gemm would take its AVX512-BF16 path, run here
// too (small_bf16_avx512): A and B are packed into bf16 pair words exactly
// as that path packs them (ct_bf16_round_row_cvt, ct_bf16_pair_rows_cvt:
// the same rounding), k in pairs (zero-padded when K is odd), and each
// vdpbf16ps adds one pair's two products to its accumulator, pairs in
// order; C is held in registers as above. (fp32 FMAs on operands rounded
// in advance were tried first and were slower than ct_gemm.)

typedef void (*small_gemm_fn)(int M, int N, int K, float alpha, const float *a,
                              int64_t a_rs, int64_t a_cs, const float *b,
                              int64_t ldb, bool accumulate, float *c,
                              int64_t ldc);
typedef void (*small_bf16_fn)(int M, int N, int KP, float alpha,
                              const uint32_t *a, int64_t a_rs, int64_t a_cs,
                              const uint32_t *b, int64_t ldb, bool accumulate,
                              float *c, int64_t ldc);

#ifdef ATTN_X86
#include <immintrin.h>

#include "core/gemm_avx512_store.h"

#define SMALL_INLINE \
  static inline __attribute__((always_inline, target("avx512f")))

// C = alpha acc (+ C) for rows [0, MR) and vectors [0, NV) of a block;
// `tail` masks the last vector. The gemm's own epilogue
// (core/gemm_avx512_store.h: one fused multiply-add when accumulating), so
// a block product has the values ct_gemm gives it.
SMALL_INLINE void store_block(const int MR, const int NV, __m512 (*acc)[5],
                              float alpha, __mmask16 tail, bool accumulate,
                              float *c, int64_t ldc) {
  const __m512 al = _mm512_set1_ps(alpha), one = _mm512_set1_ps(1.0f);
  _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)
      _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) {
    float *cp = c + r * ldc + 16 * v;
    ct_avx512_store_row(cp, cp, acc[r][v],
                        v == NV - 1 ? tail : (__mmask16)0xffff, al, one,
                        !accumulate);
  }
}

// The column chunks and row blocks of a product C (M,N), shared by the fp32
// and bf16 kernels: BLOCK(MR, NV) multiplies rows [i, i + MR) of chunk j0,
// its last vector masked by `tail`. Chunks are 64 columns wide (4 vectors),
// except that a width of at most 80 left over is one chunk of 5 vectors
// (T = 65: one chunk, not 64 columns and then a chunk of one). A chunk's
// rows are cut into blocks of at most MAXR rows, all as tall as can be:
// M = 50 at 2 vectors makes one block of 8 and six of 7 rather than six of
// 8 and two single rows, whose few FMA chains would wait on the FMA latency
// at every k. MAXR per width (8, 8, 6, 6, 5 for 1-5 vectors: up to 25
// accumulators) was measured on single products (65 x 64 x 65: 4 rows 126
// GFLOP/s, 6 rows 150; more rows at 2 vectors fell to 50, registers
// spilled). Which rows share a block never changes a value (each element is
// its own chain over k). SMALL_H maps heights over MAXR, which never occur,
// to 1, so that no block with more accumulators than registers is compiled.
#define SMALL_H(R, MAXR) ((R) <= (MAXR) ? (R) : 1)
#define SMALL_ROWS(MAXR, NV, BLOCK)               \
  do {                                            \
    const int nb_ = (M + (MAXR)-1) / (MAXR);      \
    const int base_ = M / nb_, tall_ = M % nb_;   \
    int64_t i = 0;                                \
    for (int blk_ = 0; blk_ < nb_; blk_++) {      \
      const int mr_ = base_ + (blk_ < tall_);     \
      switch (mr_) {                              \
      case 8: BLOCK(SMALL_H(8, MAXR), NV); break; \
      case 7: BLOCK(SMALL_H(7, MAXR), NV); break; \
      case 6: BLOCK(SMALL_H(6, MAXR), NV); break; \
      case 5: BLOCK(SMALL_H(5, MAXR), NV); break; \
      case 4: BLOCK(4, NV); break;                \
      case 3: BLOCK(3, NV); break;                \
      case 2: BLOCK(2, NV); break;                \
      default: BLOCK(1, NV); break;               \
      }                                           \
      i += mr_;                                   \
    }                                             \
  } while (0)

#define SMALL_DRIVER(BLOCK)                                               \
  for (int j0 = 0; j0 < N;) {                                             \
    const int n = N - j0 <= 80 ? N - j0 : 64;                             \
    const int nv = (n + 15) / 16;                                         \
    const __mmask16 tail = (__mmask16)((1u << (n - 16 * (nv - 1))) - 1u); \
    switch (nv) {                                                         \
    case 1: SMALL_ROWS(8, 1, BLOCK); break;                               \
    case 2: SMALL_ROWS(8, 2, BLOCK); break;                               \
    case 3: SMALL_ROWS(6, 3, BLOCK); break;                               \
    case 4: SMALL_ROWS(6, 4, BLOCK); break;                               \
    default: SMALL_ROWS(5, 5, BLOCK); break;                              \
    }                                                                     \
    j0 += n;                                                              \
  }

// Rows [0, MR) and vectors [0, NV) of a block; `tail` masks the last vector.
SMALL_INLINE void small_block(const int MR, const int NV, int K, float alpha,
                              const float *a, int64_t a_rs, int64_t a_cs,
                              const float *b, int64_t ldb, __mmask16 tail,
                              bool accumulate, float *c, int64_t ldc) {
  __m512 acc[8][5];
  _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)
      _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[r][v] =
          _mm512_setzero_ps();
  for (int k = 0; k < K; k++) {
    const float *bk = b + (int64_t)k * ldb;
    const float *ak = a + (int64_t)k * a_cs;
    __m512 bv[5];
    _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) bv[v] =
        v == NV - 1 ? _mm512_maskz_loadu_ps(tail, bk + 16 * v)
                    : _mm512_loadu_ps(bk + 16 * v);
    _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++) {
      const __m512 av = _mm512_set1_ps(ak[r * a_rs]);
      _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[r][v] =
          _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  store_block(MR, NV, acc, alpha, tail, accumulate, c, ldc);
}

#define F32_BLOCK(MR, NV)                                                  \
  small_block((MR), (NV), K, alpha, a + i * a_rs, a_rs, a_cs, b + j0, ldb, \
              tail, accumulate, c + i * ldc + j0, ldc)

__attribute__((target("avx512f"))) static void small_gemm_avx512(
    int M, int N, int K, float alpha, const float *a, int64_t a_rs,
    int64_t a_cs, const float *b, int64_t ldb, bool accumulate, float *c,
    int64_t ldc) {
  SMALL_DRIVER(F32_BLOCK)
}
#undef F32_BLOCK

#define BF16_TARGET target("avx512f,avx512bf16")
#define BF16_INLINE static inline __attribute__((always_inline, BF16_TARGET))

// small_block on pair words: A word (i, kp) at a[i * a_rs + kp * a_cs], B
// row kp (N words) at b + kp * ldb.
BF16_INLINE void small_block_bf16(const int MR, const int NV, int KP,
                                  float alpha, const uint32_t *a, int64_t a_rs,
                                  int64_t a_cs, const uint32_t *b, int64_t ldb,
                                  __mmask16 tail, bool accumulate, float *c,
                                  int64_t ldc) {
  __m512 acc[8][5];
  _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)
      _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[r][v] =
          _mm512_setzero_ps();
  for (int kp = 0; kp < KP; kp++) {
    const uint32_t *bk = b + (int64_t)kp * ldb;
    const uint32_t *ak = a + (int64_t)kp * a_cs;
    __m512bh bv[5];
    _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) bv[v] =
        (__m512bh)(v == NV - 1 ? _mm512_maskz_loadu_epi32(tail, bk + 16 * v)
                               : _mm512_loadu_si512(bk + 16 * v));
    _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++) {
      uint32_t word;  // packed as 16-bit halves: read as bytes
      memcpy(&word, ak + r * a_rs, sizeof word);
      const __m512bh av = (__m512bh)_mm512_set1_epi32((int)word);
      _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[r][v] =
          _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  store_block(MR, NV, acc, alpha, tail, accumulate, c, ldc);
}

#define BF16_BLOCK(MR, NV)                                                  \
  small_block_bf16((MR), (NV), KP, alpha, a + i * a_rs, a_rs, a_cs, b + j0, \
                   ldb, tail, accumulate, c + i * ldc + j0, ldc)

__attribute__((BF16_TARGET)) static void small_bf16_avx512(
    int M, int N, int KP, float alpha, const uint32_t *a, int64_t a_rs,
    int64_t a_cs, const uint32_t *b, int64_t ldb, bool accumulate, float *c,
    int64_t ldc) {
  SMALL_DRIVER(BF16_BLOCK)
}
#undef BF16_BLOCK
#undef SMALL_DRIVER
#undef SMALL_ROWS
#undef SMALL_H

// The forward row work (fwd_tile_impl) on AVX-512, written out. Compiled
// from the plain C, a row's sum of exps cost as much as its exps: its 16
// lane sums went through the stack and were added one by one, every row
// waiting on its own. Here the lane sums of 16 rows are transposed in
// registers and added for the 16 rows at once. The order of the adds is
// the compiled loop's (the same values as before, checked on every tile
// shape): lane i sums columns i, i + 16, ... of the whole vectors in
// order, then the last nk % 16 columns are added to lane 0 one by one, and
// the row's sum is (((0 + lane 0) + lane 1) + ...) + lane 15. exp16 is
// attn_exp on 16 lanes, the same operations in the same order (no fused
// multiply-adds: the project compiles without contraction).
SMALL_INLINE __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(ATTN_EXP_LO);
  const __m512 hi = _mm512_set1_ps(ATTN_EXP_HI);
  const __m512 shift = _mm512_set1_ps(ATTN_EXP_SHIFT);
  // max(lo, x) is x < lo ? lo : x, and min(hi, .) is . > hi ? hi : .: both
  // return the second operand for a NaN, as attn_exp's comparisons do.
  const __m512 xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
  const __m512 t =
      _mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(ATTN_EXP_LOG2E)), shift);
  const __m512 n = _mm512_sub_ps(t, shift);
  __m512 r =
      _mm512_sub_ps(xc, _mm512_mul_ps(n, _mm512_set1_ps(ATTN_EXP_LN2_HI)));
  r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(ATTN_EXP_LN2_LO)));
  __m512 y = _mm512_set1_ps(attn_exp_poly[0]);
  for (int k = 1; k < 6; k++)
    y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(attn_exp_poly[k]));
  y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(y, r), r), r),
                    _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_sub_epi32(_mm512_castps_si512(t),
                                        _mm512_set1_epi32(0x4B400000)),
                       _mm512_set1_epi32(127)),
      23);
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  return _mm512_maskz_mul_ps((__mmask16)~under, y, _mm512_castsi512_ps(bits));
}

// v[j] becomes lane j of the 16 input vectors: v[j][i] = old v[i][j].
SMALL_INLINE void transpose16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    v[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    v[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    v[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Now v[4q + k] holds, in its 128-bit lane L, column 4L + k of rows
  // 4q..4q+3. The last two steps move whole 128-bit lanes (0x88 takes
  // lanes 0 and 2 of each operand, 0xdd lanes 1 and 3): first between row
  // quads 0 and 1 (2 and 3), then between the resulting pairs, so that v[c]
  // ends holding column c of rows 0..15 in order.
  for (int k = 0; k < 4; k++) {
    t[k] = _mm512_shuffle_f32x4(v[k], v[4 + k], 0x88);
    t[4 + k] = _mm512_shuffle_f32x4(v[k], v[4 + k], 0xdd);
    t[8 + k] = _mm512_shuffle_f32x4(v[8 + k], v[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(v[8 + k], v[12 + k], 0xdd);
  }
  for (int k = 0; k < 4; k++) {
    v[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    v[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
    v[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
    v[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xdd);
  }
}

__attribute__((target("avx512f"))) static void fwd_tile_avx512(
    const tile *t, float *s, float *m, float *l, float *o, int64_t dh) {
  tile_logits(t, s);
  const int nk = t->nk, nv = (nk + 15) / 16;
  const __mmask16 tail =
      (__mmask16)(nk % 16 ? (1u << (nk % 16)) - 1u : 0xffffu);
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  for (int r0 = 0; r0 < t->mq; r0 += 16) {
    const int g = t->mq - r0 < 16 ? t->mq - r0 : 16;
    __m512 acc[16];
    float mnew[16];
    __mmask16 live = 0;  // rows whose state this tile updates
    for (int i = 0; i < g; i++) {
      float *restrict row = s + (int64_t)(r0 + i) * BK;
      __m512 vm = ninf;
      for (int v = 0; v < nv; v++) {
        const __mmask16 k = v == nv - 1 ? tail : (__mmask16)0xffff;
        const __m512 x = _mm512_mask_loadu_ps(ninf, k, row + 16 * v);
        // x > vm ? x : vm, as the plain loop's max: a NaN is never taken.
        vm = _mm512_mask_mov_ps(vm, _mm512_cmp_ps_mask(x, vm, _CMP_GT_OQ), x);
      }
      const float mn =
          row_max_or_skip(row, nk, _mm512_reduce_max_ps(vm), m[r0 + i]);
      acc[i] = _mm512_setzero_ps();
      if (mn == -INFINITY) continue;
      live |= (__mmask16)(1u << i);
      mnew[i] = mn;
      const __m512 mv = _mm512_set1_ps(mn);
      for (int v = 0; v < nv; v++) {
        const __mmask16 k = v == nv - 1 ? tail : (__mmask16)0xffff;
        const __m512 e =
            exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + 16 * v), mv));
        _mm512_mask_storeu_ps(row + 16 * v, k, e);
        if (16 * v + 16 <= nk) acc[i] = _mm512_add_ps(acc[i], e);
      }
      // The last nk % 16 columns go to lane 0, one after another.
      if (nk % 16) {
        float lane0 = _mm512_cvtss_f32(acc[i]);
        for (int c = nk - nk % 16; c < nk; c++) lane0 += row[c];
        acc[i] = _mm512_mask_mov_ps(acc[i], 1, _mm512_set1_ps(lane0));
      }
    }
    for (int i = g; i < 16; i++) acc[i] = _mm512_setzero_ps();
    transpose16(acc);
    __m512 sum = acc[0];
    for (int j = 1; j < 16; j++) sum = _mm512_add_ps(sum, acc[j]);
    float sums[16];
    _mm512_storeu_ps(sums, sum);
    for (int i = 0; i < g; i++)
      if (live >> i & 1)
        row_state_update(&m[r0 + i], &l[r0 + i], o + (r0 + i) * dh, dh, mnew[i],
                         sums[i]);
  }
}

// delta[j] = O_j . dO_j for 16 rows j (row stride rs), each row one chain
// of adds over d in order as in delta_rows, the 16 chains in the lanes of
// one vector: 16 x 16 blocks of O and dO transposed in registers, so that
// vector d holds column d of the 16 rows.
__attribute__((target("avx512f"))) static void delta16_avx512(
    const float *o, const float *g, int64_t rs, int64_t dh, float *delta) {
  __m512 acc = _mm512_setzero_ps();
  int64_t d0 = 0;
  for (; d0 + 16 <= dh; d0 += 16) {
    __m512 a[16], b[16];
    for (int i = 0; i < 16; i++) {
      a[i] = _mm512_loadu_ps(o + i * rs + d0);
      b[i] = _mm512_loadu_ps(g + i * rs + d0);
    }
    transpose16(a);
    transpose16(b);
    for (int k = 0; k < 16; k++)
      acc = _mm512_add_ps(acc, _mm512_mul_ps(a[k], b[k]));
  }
  _mm512_storeu_ps(delta, acc);
  for (int j = 0; j < 16; j++)
    for (int64_t d = d0; d < dh; d++) delta[j] += o[j * rs + d] * g[j * rs + d];
}

// transpose_rows (above) with 8 x 8 blocks in registers; the edges as
// there. A copy: the same values on every path.
__attribute__((target("avx2"))) static void transpose_rows_avx2(
    const float *src, int64_t rs, int64_t n, int64_t dh, float *restrict dst,
    int64_t ld) {
  const int64_t n8 = n - n % 8, d8 = dh - dh % 8;
  for (int64_t j0 = 0; j0 < n8; j0 += 8) {
    const float *s0 = src + j0 * rs;
    for (int64_t d0 = 0; d0 < d8; d0 += 8) {
      __m256 r[8], t[8], u[8];
      for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s0 + i * rs + d0);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] =
            _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] =
            _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      // u[c] (c < 4) holds column c of rows 0-3 (low half) and column c + 4
      // (high half); u[c + 4] the same of rows 4-7.
      float *o = dst + d0 * ld + j0;
      for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(o + c * ld,
                         _mm256_permute2f128_ps(u[c], u[c + 4], 0x20));
        _mm256_storeu_ps(o + (c + 4) * ld,
                         _mm256_permute2f128_ps(u[c], u[c + 4], 0x31));
      }
    }
    for (int64_t d = d8; d < dh; d++)
      for (int64_t j = j0; j < j0 + 8; j++) dst[d * ld + j] = src[j * rs + d];
  }
  for (int64_t d = 0; d < dh; d++)
    for (int64_t j = n8; j < n; j++) dst[d * ld + j] = src[j * rs + d];
}

#endif

// The row kernels for this CPU, and the products' settings, taken from the
// calling thread's session: the OpenMP workers that multiply are bound to
// none (core/session.h). `small` is the block product above where the CPU
// has it and no gemm path is forced (tests force paths to cover the
// fallbacks; those keep ct_gemm for the block products); `small_bf16` the
// same for bf16 products where the gemm would use AVX512-BF16 (with AMX,
// ct_gemm keeps them). `transpose` builds K^T and V^T.
typedef struct attn_isa {
  fwd_tile_fn fwd;
  bwd_tile_fn bwd;
  keep_row_fn keep;
  small_gemm_fn small;
  small_bf16_fn small_bf16;
  transpose_fn transpose;
  // delta of 16 rows (delta16_avx512), or NULL: delta_rows only
  void (*delta16)(const float *o, const float *g, int64_t rs, int64_t dh,
                  float *delta);
  ct_gemm_mode gemm;
} attn_isa;

static attn_isa pick_isa(void) {
  attn_isa k = {.fwd = fwd_tile_base,
                .bwd = bwd_tile_base,
                .keep = keep_row_base,
                .transpose = transpose_rows,
                .gemm = ct_gemm_current_mode()};
#ifdef ATTN_X86
  if (__builtin_cpu_supports("avx512f")) {
    k.fwd = fwd_tile_avx512;
    k.bwd = bwd_tile_avx512;
    k.keep = keep_row_avx512;
    k.transpose = transpose_rows_avx2;
    k.delta16 = delta16_avx512;
    if (k.gemm.precision == CT_GEMM_FP32 && k.gemm.path == CT_GEMM_AUTO)
      k.small = small_gemm_avx512;
    if (k.gemm.precision == CT_GEMM_BF16 &&
        k.gemm.bf16_path == CT_GEMM_BF16_AUTO &&
        ct_gemm_bf16_active_path() == CT_GEMM_BF16_AVX512BF16)
      k.small_bf16 = small_bf16_avx512;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    k.transpose = transpose_rows_avx2;
    k.fwd = fwd_tile_avx2;
    k.bwd = bwd_tile_avx2;
    k.keep = keep_row_avx2;
  }
#endif
  return k;
}

// Pair words of packing scratch a bf16 block product needs, A then B, for
// every product of the kernel (at most BQ x BK x Dh or BK x Dh x BQ).
static int64_t pack_words(const ct_attn_params *p) {
  const int64_t dp = (p->Dh + 1) / 2;
  return BQ * (dp > BK / 2 ? dp : BK / 2) + BK * dp + 32;
}

#ifdef ATTN_X86
// rows x K of src (row stride rs) as pair words along K, row stride ldw
// (>= (K + 1) / 2; an odd K's last word padded with zero).
static void pack_bf16_rows(const float *src, int64_t rs, int rows, int K,
                           uint32_t *dst, int64_t ldw) {
  for (int r = 0; r < rows; r++) {
    uint16_t *d = (uint16_t *)(dst + r * ldw);
    ct_bf16_round_row_cvt(src + r * rs, K, d);
    if (K % 2) d[K] = 0;
  }
}

// K x cols of src (row stride rs) as pair words across rows: word (kp, c)
// holds rows 2kp and 2kp + 1 of column c (zero past K); row stride ldw.
static void pack_bf16_pairs(const float *src, int64_t rs, int K, int cols,
                            uint32_t *dst, int64_t ldw) {
  for (int kp = 0; 2 * kp < K; kp++)
    ct_bf16_pair_rows_cvt(src + 2 * kp * rs,
                          2 * kp + 1 < K ? src + (2 * kp + 1) * rs : NULL, cols,
                          (uint16_t *)(dst + kp * ldw));
}
#endif

// An operand of a bf16 block product: floats (f, row stride ld), rounded
// and packed into pair words by block_words; or those pair words already
// made from bf16 storage (w: f NULL), word (i, kp) of A at w[i * rs + kp *
// cs], row kp of B at w + kp * rs (see "Operands straight from bf16
// storage" below).
typedef struct blk_words {
  const float *f;
  int64_t ld;
  const uint32_t *w;
  int64_t rs, cs;
} blk_words;

// The bf16 block product of block_product (below), on small_bf16, with
// either operand given as floats or as pair words. The words are those
// packing the floats would make, so the result is the same.
static void block_words(const attn_isa *isa, uint32_t *pack, bool trans_a,
                        int M, int N, int K, float alpha, blk_words a,
                        blk_words b, float beta, float *c, int64_t ldc) {
#ifdef ATTN_X86
  const int KP = (K + 1) / 2;
  uint32_t *pa = pack, *pb = pack + (int64_t)M * KP;
  if (a.f) {
    if (trans_a)
      pack_bf16_pairs(a.f, a.ld, K, M, pa, M);
    else
      pack_bf16_rows(a.f, a.ld, M, K, pa, KP);
    a = (blk_words){.w = pa, .rs = trans_a ? 1 : KP, .cs = trans_a ? M : 1};
  }
  if (b.f) {
    pack_bf16_pairs(b.f, b.ld, K, N, pb, N);
    b = (blk_words){.w = pb, .rs = N};
  }
  isa->small_bf16(M, N, KP, alpha, a.w, a.rs, a.cs, b.w, b.rs, beta != 0.0f, c,
                  ldc);
#else
  (void)isa, (void)pack, (void)trans_a, (void)M, (void)N, (void)K, (void)alpha,
      (void)a, (void)b, (void)beta, (void)c, (void)ldc;
#endif
}

// Operands for block_product: floats with row stride ld, or pair words
// (only where words_direct holds) whose rows (A: a row's words in order; B:
// a pair of rows) are rs words apart.
static blk_words floats_op(const float *f, int64_t ld) {
  return (blk_words){.f = f, .ld = ld};
}
static blk_words words_op(const uint32_t *w, int64_t rs) {
  return (blk_words){.w = w, .rs = rs, .cs = 1};
}

// One block product: C = alpha op(A) B + beta C, beta 0 (C not read) or 1;
// op(A) is A (M,K), or with trans_a the transpose of A (K,M). ct_gemm's
// contract, on `small` or `small_bf16` where the CPU has them (pair-word
// operands only come with small_bf16); `pack` is pack_words of scratch.
// Their FLOPs are added to *flops (the thread's count, given to the session
// once per call: an atomic add per block product cost 2% of the kernel at
// T = 50).
static void block_product(const attn_isa *isa, uint32_t *pack, uint64_t *flops,
                          bool trans_a, int M, int N, int K, float alpha,
                          blk_words a, blk_words b, float beta, float *c,
                          int64_t ldc) {
  if (!isa->small && !isa->small_bf16) {
    ct_gemm_in_mode(&isa->gemm, trans_a, false, M, N, K, alpha, a.f, a.ld, b.f,
                    b.ld, beta, c, ldc);
    return;
  }
  if (M > 0 && N > 0 && K > 0)
    *flops += 2 * (uint64_t)M * (uint64_t)N * (uint64_t)K;
  if (isa->small) {
    isa->small(M, N, K, alpha, a.f, trans_a ? 1 : a.ld, trans_a ? a.ld : 1, b.f,
               b.ld, beta != 0.0f, c, ldc);
    return;
  }
  block_words(isa, pack, trans_a, M, N, K, alpha, a, b, beta, c, ldc);
}

// ---------------------------------------------------------------------------
// Shared per-unit setup.

// Keys of batch row b that any query may see: [0, length).
static int64_t key_len(const ct_attn_params *p, int64_t b) {
  return p->key_lengths ? p->key_lengths[b] : p->Tk;
}

// Keys a query block may see at all: [0, key_end) for the batch row, cut by
// the causal limit of the block's last query. May be <= 0.
static int64_t block_key_end(const ct_attn_params *p, int64_t b, int64_t i0,
                             int64_t mq) {
  int64_t end = key_len(p, b);
  if (p->causal) {
    int64_t c = i0 + mq + (p->Tk - p->Tq);  // last query's limit, exclusive
    if (c < end) end = c;
  }
  return end;
}

// Per-row visible columns of the tile at (i0, j0), given the batch row's
// key end (lengths).
static void tile_limits(const ct_attn_params *p, int64_t len, int64_t i0,
                        int mq, int64_t j0, int nk, int *lim) {
  for (int r = 0; r < mq; r++) {
    int64_t e = len;
    if (p->causal) {
      int64_t c = i0 + r + 1 + (p->Tk - p->Tq);
      if (c < e) e = c;
    }
    e -= j0;
    lim[r] = (int)(e < 0 ? 0 : (e > nk ? nk : e));
  }
}

// kadd (Tk): 0 for a visible key, -inf for a masked one (NULL: no mask).
static const float *key_add(const ct_attn_params *p, int64_t b, float *buf) {
  if (!p->key_mask) return NULL;
  const uint8_t *km = p->key_mask + b * p->Tk;
  for (int64_t j = 0; j < p->Tk; j++) buf[j] = km[j] ? -INFINITY : 0.0f;
  return buf;
}

// The tile of (b, h) at query i0, key j0: its sizes, limits, and where
// its bias, window mask and key mask rows start.
static tile tile_at(const ct_attn_params *p, int64_t b, int64_t h, int64_t i0,
                    int mq, int64_t j0, int nk, const int *lim,
                    const float *kadd) {
  const int64_t w = p->window_mask ? b % p->n_windows : 0;
  return (tile){
      .mq = mq,
      .nk = nk,
      .lim = lim,
      .bias = p->bias ? p->bias + (h * p->Tq + i0) * p->Tk + j0 : NULL,
      .mask = p->window_mask ? p->window_mask + (w * p->Tq + i0) * p->Tk + j0
                             : NULL,
      .bias_ld = p->Tk,
      .kadd = kadd ? kadd + j0 : NULL};
}

// Dropout factors of a tile: keep[r][c] = 0 or 1/(1-p), per attention.h.
static void tile_keep(const ct_attn_params *p, const attn_isa *isa, int64_t b,
                      int64_t h, int64_t i0, int mq, int64_t j0, int nk,
                      uint32_t *words, float *keep) {
  const float inv = 1.0f / (1.0f - p->dropout_p);
  const float thr = p->dropout_p * 16777216.0f;
  for (int r = 0; r < mq; r++) {
    uint64_t first =
        (uint64_t)(((b * p->NH + h) * p->Tq + i0 + r) * p->Tk + j0);
    isa->keep(p->dropout_seed, p->dropout_stream, first, nk, thr, inv, words,
              keep + (int64_t)r * BK);
  }
}

static int imin64(int64_t a, int64_t b) { return (int)(a < b ? a : b); }

// ---------------------------------------------------------------------------
// Operands straight from bf16 storage.
//
// Where the block products are small_bf16's and q, k, v are bf16 storage,
// their operands are made from the stored bits, not from the widened floats
// rounded again (which gives the same bits: a widened bf16 value rounds to
// itself): a row of q is pair words as it is stored, K^T and V^T are its
// rows' words transposed, and K, V, Q paired along rows are two stored rows
// interleaved. This saves widening q, k, v into scratch, transposing them
// as floats and rounding them for every product.
//
// Only without causal limits, where the key blocks of every query block end
// at the same key (the stored rows' end), so that an odd block's last pair
// word is the zero padding packing would give it; with even strides and
// offsets, so that pairs are aligned words.

// One (b, h)'s operands as pair words (all NULL when not in use): q rows
// in place (row stride q_rs words); kt, vt (Dh/2, ld) transposed; k, q, v
// paired along rows ((rows + 1)/2, Dh).
typedef struct qkv_words {
  const uint32_t *q;
  int64_t q_rs;
  uint32_t *kt, *vt, *k, *qp, *v;
} qkv_words;

static bool words_direct(const ct_attn_params *p, const attn_isa *isa) {
  if (!isa->small_bf16 || !p->q16 || p->causal || p->Dh % 2) return false;
  const ct_attn_layout *l[3] = {&p->q, &p->k, &p->v};
  for (int i = 0; i < 3; i++)
    if (l[i]->batch % 2 || l[i]->row % 2 || l[i]->head % 2) return false;
  return ((uintptr_t)p->q16 | (uintptr_t)p->k16 | (uintptr_t)p->v16) % 4 == 0;
}

// Rows [0, n) of head h of batch b of a stored q, k or v.
static const uint16_t *stored_head(const uint16_t *base, ct_attn_layout l,
                                   int64_t b, int64_t h) {
  return base + b * l.batch + h * l.head;
}

// n stored rows (row stride rs) of dh values transposed into pair words:
// dst[kp * ld + j] = the word of pair kp of row j.
static void words_transposed(const uint16_t *src, int64_t rs, int64_t n,
                             int64_t dh, uint32_t *dst, int64_t ld) {
  ct_bf16_transpose_words_avx512((const uint32_t *)(const void *)src, rs / 2, n,
                                 dh / 2, dst, ld);
}

// n stored rows (row stride rs) paired along rows: row jp of dst (dh words)
// pairs rows 2 jp and 2 jp + 1, zero past n.
static void words_paired(const uint16_t *src, int64_t rs, int64_t n, int64_t dh,
                         uint32_t *dst) {
  for (int64_t j = 0; j < n; j += 2)
    ct_bf16_pair_stored_rows(src + j * rs,
                             j + 1 < n ? src + (j + 1) * rs : NULL, dh,
                             (uint16_t *)(dst + j / 2 * dh));
}

// ---------------------------------------------------------------------------
// Forward.

typedef struct fwd_ws {
  float *s, *o, *m, *l, *kadd, *keep, *kt;
  float *ql, *kl, *vl;  // q, k, v of one (b, h) widened from bf16 storage
  uint32_t *pack;       // pack_words for bf16 block products
  uint64_t flops;       // of this thread's block products
  int *lim;
  uint32_t *words;  // (BK + 16) for tile_keep
  qkv_words qw;     // (b, h)'s operands straight from storage, or all NULL
} fwd_ws;

// Row stride of the transposed keys/values (Dh, Tk) in scratch.
static int64_t kt_ld(const ct_attn_params *p) {
  return (p->Tk + 15) & ~(int64_t)15;
}

// Floats of one (b, h)'s q, k, v widened from bf16 storage (0 without).
static int64_t widened_floats(const ct_attn_params *p) {
  return p->q16 ? (p->Tq + 2 * p->Tk) * p->Dh : 0;
}

static size_t fwd_ws_floats(const ct_attn_params *p) {
  return (size_t)(2 * BQ * BK + BQ * p->Dh + 3 * BQ + kt_ld(p) +
                  p->Dh * kt_ld(p) + BK + 16 + pack_words(p) +
                  widened_floats(p));
}

// Rows [r0, r1) of head h of batch b of a bf16-stored q, k or v (layout l)
// into dst as fp32, row r at dst + r * Dh.
static void widen_head(const uint16_t *src, ct_attn_layout l, int64_t b,
                       int64_t h, int64_t r0, int64_t r1, int64_t Dh,
                       float *dst) {
  for (int64_t r = r0; r < r1; r++) {
    const uint16_t *restrict s = src + b * l.batch + h * l.head + r * l.row;
    float *restrict d = dst + r * Dh;
#pragma omp simd
    for (int64_t c = 0; c < Dh; c++) {
      const uint32_t u = (uint32_t)s[c] << 16;
      memcpy(d + c, &u, sizeof u);
    }
  }
}

// Query rows [q0, q1) and key/value rows [0, kv_end) of (b, h) from bf16
// storage into ql, kl, vl (row stride Dh).
static void widen_qkv(const ct_attn_params *p, int64_t b, int64_t h, int64_t q0,
                      int64_t q1, int64_t kv_end, float *ql, float *kl,
                      float *vl) {
  widen_head(p->q16, p->q, b, h, q0, q1, p->Dh, ql);
  widen_head(p->k16, p->k, b, h, 0, kv_end, p->Dh, kl);
  widen_head(p->v16, p->v, b, h, 0, kv_end, p->Dh, vl);
}

// The layout of widened rows of one (b, h): row stride Dh.
static ct_attn_layout widened_layout(int64_t Dh) {
  return (ct_attn_layout){.batch = 0, .row = Dh, .head = 0};
}

static fwd_ws fwd_ws_at(const ct_attn_params *p, float *base) {
  fwd_ws w;
  w.s = base;
  w.keep = w.s + BQ * BK;
  w.o = w.keep + BQ * BK;
  w.m = w.o + BQ * p->Dh;
  w.l = w.m + BQ;
  w.lim = (int *)(w.l + BQ);
  w.kadd = (float *)(w.lim + BQ);
  w.kt = w.kadd + kt_ld(p);
  w.words = (uint32_t *)(w.kt + p->Dh * kt_ld(p));
  w.pack = w.words + BK + 16;
  w.ql = (float *)(w.pack + pack_words(p));
  w.kl = w.ql + p->Tq * p->Dh;
  w.vl = w.kl + p->Tk * p->Dh;
  w.flops = 0;
  w.qw = (qkv_words){0};
  return w;
}

// One (b, h, query block at i0), given kt = K^T of (b, h) for at least the
// keys the block sees (row stride ldkt) and kadd from key_add.
static void fwd_qblock(const ct_attn_params *p, const attn_isa *isa,
                       const float *q, const float *v, float *out, float *lse,
                       int64_t b, int64_t h, int64_t i0, const float *kt,
                       int64_t ldkt, const float *kadd, fwd_ws *w) {
  const int64_t Dh = p->Dh;
  const int mq = imin64(BQ, p->Tq - i0);
  const qkv_words *qw = &w->qw;  // q, k, v as words, or q, v read as floats
  const float *qb =
      qw->q ? NULL : q + b * p->q.batch + h * p->q.head + i0 * p->q.row;
  const float *vb = qw->q ? NULL : v + b * p->v.batch + h * p->v.head;
  const int64_t len = key_len(p, b);
  const int64_t kend = block_key_end(p, b, i0, mq);

  for (int r = 0; r < mq; r++) {
    w->m[r] = -INFINITY;
    w->l[r] = 0.0f;
  }

  // o is assigned by the first key block's product and read only where a
  // key was visible (l != 0), so it needs no zeroing.
  for (int64_t j0 = 0; j0 < kend; j0 += BK) {
    const int nk = imin64(BK, kend - j0);
    block_product(
        isa, w->pack, &w->flops, false, mq, nk, (int)Dh, p->scale,
        qw->q ? words_op(qw->q + i0 * qw->q_rs, qw->q_rs)
              : floats_op(qb, p->q.row),
        qw->q ? words_op(qw->kt + j0, ldkt) : floats_op(kt + j0, ldkt), 0.0f,
        w->s, BK);
    tile_limits(p, len, i0, mq, j0, nk, w->lim);
    tile t = tile_at(p, b, h, i0, mq, j0, nk, w->lim, kadd);
    isa->fwd(&t, w->s, w->m, w->l, w->o, Dh);
    if (p->dropout_p > 0.0f) {
      // l sums the undropped weights; the 1/(1-p) is applied at the end.
      tile_keep(p, isa, b, h, i0, mq, j0, nk, w->words, w->keep);
      for (int r = 0; r < mq; r++) {
        float *restrict row = w->s + r * BK;
        const float *restrict kr = w->keep + r * BK;
#pragma omp simd
        for (int c = 0; c < nk; c++) row[c] = kr[c] != 0.0f ? row[c] : 0.0f;
      }
    }
    block_product(isa, w->pack, &w->flops, false, mq, (int)Dh, nk, 1.0f,
                  floats_op(w->s, BK),
                  qw->q ? words_op(qw->v + j0 / 2 * Dh, Dh)
                        : floats_op(vb + j0 * p->v.row, p->v.row),
                  j0 == 0 ? 0.0f : 1.0f, w->o, Dh);
  }

  const float drop_scale =
      p->dropout_p > 0.0f ? 1.0f / (1.0f - p->dropout_p) : 1.0f;
  float *ob = out + b * p->out.batch + h * p->out.head + i0 * p->out.row;
  float *lb = lse + (b * p->NH + h) * p->Tq + i0;
  for (int r = 0; r < mq; r++) {
    float *orow = ob + r * p->out.row;
    const float *acc = w->o + r * Dh;
    if (!(w->l[r] == 0.0f)) {  // l > 0, or NaN from a NaN score
      const float f = drop_scale / w->l[r];
      for (int64_t d = 0; d < Dh; d++) orow[d] = acc[d] * f;
      lb[r] = w->m[r] + logf(w->l[r]);
    } else {  // no visible key: defined as 0, see attention.h
      memset(orow, 0, (size_t)Dh * sizeof(float));
      lb[r] = -INFINITY;
    }
  }
}

// Query blocks [qb0, qb1) of (b, h): transposes the keys they see once.
static void fwd_unit(const ct_attn_params *p, const attn_isa *isa,
                     const float *q, const float *k, const float *v, float *out,
                     float *lse, int64_t b, int64_t h, int64_t qb0, int64_t qb1,
                     fwd_ws *w) {
  const int64_t i_last = qb1 * BQ < p->Tq ? qb1 * BQ : p->Tq;
  const int64_t last0 = (qb1 - 1) * BQ;
  int64_t kend = block_key_end(p, b, last0, i_last - last0);
  if (kend < 0) kend = 0;
  const int64_t Dh = p->Dh, ldkt = kt_ld(p);
  ct_attn_params wp;
  if (words_direct(p, isa)) {  // operands from the stored bits (q, v NULL)
    w->qw = (qkv_words){
        .q = (const uint32_t *)(const void *)stored_head(p->q16, p->q, b, h),
        .q_rs = p->q.row / 2,
        .kt = (uint32_t *)w->kt,
        .v = (uint32_t *)w->kl};
    words_transposed(stored_head(p->k16, p->k, b, h), p->k.row, kend, Dh,
                     w->qw.kt, ldkt);
    words_paired(stored_head(p->v16, p->v, b, h), p->v.row, kend, Dh, w->qw.v);
  } else {
    if (p->q16) {  // this (b, h)'s rows widened; the block code reads those
      widen_qkv(p, b, h, qb0 * BQ, i_last, kend, w->ql, w->kl, w->vl);
      wp = *p;
      wp.q = wp.k = wp.v = widened_layout(p->Dh);
      p = &wp;
      q = w->ql;
      k = w->kl;
      v = w->vl;
    }
    isa->transpose(k + b * p->k.batch + h * p->k.head, p->k.row, kend, Dh,
                   w->kt, ldkt);
  }
  const float *kadd = key_add(p, b, w->kadd);
  for (int64_t qb = qb0; qb < qb1; qb++)
    fwd_qblock(p, isa, q, v, out, lse, b, h, qb * BQ, w->kt, ldkt, kadd, w);
  w->qw = (qkv_words){0};
}

// Threads for a problem: one for tiny ones (gradient checks, decoding steps),
// where waking a team costs more than the work. Every product of a tiny
// problem is then below ct_gemm's own threading threshold, so ct_gemm stays
// single-threaded even though it runs outside an active parallel region.
static int attn_threads(const ct_attn_params *p) {
  double work = (double)p->B * p->NH * p->Tq * p->Tk * p->Dh;
  return work < 32768.0 ? 1 : omp_get_max_threads();
}

// Units handed out at a time: runs of consecutive (b, h), about
// CHUNKS_PER_THREAD runs per thread. Handed out one by one, two threads
// worked on neighbouring heads of the same rows of q, k, v and the
// gradients at once, and the step ran 20-30% slower at 2 threads than two
// single-threaded processes each (T = 50: 6.2 ms against 4.7 with runs).
// Which thread takes a unit never changes its values.
enum { CHUNKS_PER_THREAD = 4 };
static int64_t unit_chunk(int64_t units, int threads) {
  int64_t c = units / (CHUNKS_PER_THREAD * (int64_t)threads);
  return c < 1 ? 1 : c;
}

// A thread's count of block-product FLOPs, to the session's.
static void give_flops(const attn_isa *isa, uint64_t flops) {
  if (isa->gemm.session && flops > 0)
    ct_flops_add_to(isa->gemm.session, isa->gemm.precision, flops);
}

// Scratch for all threads of a parallel region, from the step arena;
// per_thread is a multiple of 16 floats, so each slice is 64-byte aligned.
static float *thread_scratch(size_t per_thread, int threads) {
  return ct_arena_alloc(per_thread * (size_t)threads * sizeof(float));
}

ct_status ct_attention_forward(const ct_attn_params *p, const float *q,
                               const float *k, const float *v, float *out,
                               float *lse) {
  ct_status st = ct_attention_check(p);
  if (st != CT_OK) return st;
  const int64_t nqb = (p->Tq + BQ - 1) / BQ;
  const int64_t pairs = p->B * p->NH;
  if (pairs * nqb == 0) return CT_OK;
  const attn_isa isa = pick_isa();

  const int threads = attn_threads(p);
  const size_t per = (fwd_ws_floats(p) + 15) & ~(size_t)15;
  float *scratch = thread_scratch(per, threads);
  if (!scratch) return CT_ERR_NOMEM;
  // A unit is a whole (b, h) when there are enough pairs to keep every
  // thread busy (K^T is then built once per pair), else one query block.
  // Every query block is computed the same way in both cases, so the
  // choice (which depends on the thread count) never changes a result.
  const bool per_pair = pairs >= 4 * (int64_t)threads || nqb == 1;
  const int64_t units = per_pair ? pairs : pairs * nqb;

#pragma omp parallel num_threads(threads)
  {
    fwd_ws w = fwd_ws_at(p, scratch + per * (size_t)omp_get_thread_num());
#pragma omp for schedule(dynamic, unit_chunk(units, threads))
    for (int64_t u = 0; u < units; u++) {
      if (per_pair) {
        fwd_unit(p, &isa, q, k, v, out, lse, u / p->NH, u % p->NH, 0, nqb, &w);
      } else {
        int64_t qb = u % nqb, bh = u / nqb;
        fwd_unit(p, &isa, q, k, v, out, lse, bh / p->NH, bh % p->NH, qb, qb + 1,
                 &w);
      }
    }
    give_flops(&isa, w.flops);
  }
  return CT_OK;
}

// ---------------------------------------------------------------------------
// Backward.

typedef struct bwd_ws {
  float *s, *dp, *keep, *delta, *kadd, *kt, *vt;
  float *ql, *kl, *vl;  // q, k, v of one (b, h) widened from bf16 storage
  uint32_t *pack;       // pack_words for bf16 block products
  uint64_t flops;       // of this thread's block products
  int *lim;
  uint32_t *words;  // (BK + 16) for tile_keep
} bwd_ws;

static size_t bwd_ws_floats(const ct_attn_params *p) {
  return (size_t)(3 * BQ * BK + 2 * BQ + kt_ld(p) + 2 * p->Dh * kt_ld(p) + BK +
                  16 + pack_words(p) + widened_floats(p));
}

static bwd_ws bwd_ws_at(const ct_attn_params *p, float *base) {
  const int64_t ldt = kt_ld(p);
  bwd_ws w;
  w.s = base;
  w.dp = w.s + BQ * BK;
  w.keep = w.dp + BQ * BK;
  w.delta = w.keep + BQ * BK;
  w.lim = (int *)(w.delta + BQ);
  w.kadd = (float *)(w.lim + BQ);
  w.kt = w.kadd + ldt;
  w.vt = w.kt + p->Dh * ldt;
  w.words = (uint32_t *)(w.vt + p->Dh * ldt);
  w.pack = w.words + BK + 16;
  w.ql = (float *)(w.pack + pack_words(p));
  w.kl = w.ql + p->Tq * p->Dh;
  w.vl = w.kl + p->Tk * p->Dh;
  w.flops = 0;
  return w;
}

typedef struct bwd_args {
  const float *q, *k, *v, *out, *lse, *dout;
  float *dq, *dk, *dv;
  // dS of (b, h) goes to dbias + (b - dbias_b0) * dbias_batch + h * Tq * Tk:
  // added in place (dbias_batch 0, one thread walking b in order), or
  // assigned into a stage of per-b slices (dbias_assign) that
  // reduce_stage adds up in b order afterwards.
  float *dbias;
  int64_t dbias_b0, dbias_batch;
  bool dbias_assign;
} bwd_args;

enum { DELTA_ROWS = 8 };

// delta[j] = O_j . dO_j for rows j < R (R is DELTA_ROWS or 1), row stride
// rs: each row one chain of adds over d in order, the R chains side by side.
static inline __attribute__((always_inline)) void delta_rows(const float *o,
                                                             const float *g,
                                                             int64_t rs,
                                                             int64_t dh, int R,
                                                             float *delta) {
  float acc[DELTA_ROWS] = {0};
  for (int64_t d = 0; d < dh; d++)
    for (int j = 0; j < R; j++) acc[j] += o[j * rs + d] * g[j * rs + d];
  memcpy(delta, acc, (size_t)R * sizeof(float));
}

// n rows of dh floats, row stride rs.
static void zero_rows(float *dst, int64_t rs, int64_t n, int64_t dh) {
  for (int64_t r = 0; r < n; r++)
    memset(dst + r * rs, 0, (size_t)dh * sizeof(float));
}

// All of (b, h): query blocks in order, and for each the key blocks in
// order. Writes only rows [b, :, h, :] of dq/dk/dv, and dbias[h] (the caller
// runs the b of one h in order on one thread).
//
// Assigned gradients are not zeroed and then added to where a product
// writes them first: there the product assigns (beta 0), which gives the
// same values as adding to zeros (up to the sign of a zero, which no later
// sum sees: every sum starts from +0). A dq row block is written first by
// its key block 0; dk/dv rows [0, kend0) by query block 0 (kend0 its key
// end, the smallest of all blocks'), so only rows past kend0, and dq blocks
// that see no key, are zeroed.
static void bwd_pair(const ct_attn_params *p, const attn_isa *isa,
                     const bwd_args *a, int64_t b, int64_t h, bwd_ws *w) {
  const int64_t Dh = p->Dh;
  const int64_t len = key_len(p, b);
  // q, k, v rows of (b, h) and their row strides (the gradients keep the
  // inputs' layouts): in place, or widened from bf16 storage.
  const float *qh = NULL, *kh = NULL, *vh = NULL;
  int64_t q_rs = p->q.row, k_rs = p->k.row, v_rs = p->v.row;
  const int64_t ldt = kt_ld(p);
  // Or as words from the stored bits (words_direct): q rows in place, K^T
  // and V^T transposed, K and Q paired along rows.
  qkv_words qw = {0};
  if (words_direct(p, isa)) {
    qw = (qkv_words){
        .q = (const uint32_t *)(const void *)stored_head(p->q16, p->q, b, h),
        .q_rs = p->q.row / 2,
        .kt = (uint32_t *)w->kt,
        .vt = (uint32_t *)w->vt,
        .k = (uint32_t *)w->kl,
        .qp = (uint32_t *)w->ql};
    const uint16_t *k16 = stored_head(p->k16, p->k, b, h);
    words_transposed(k16, p->k.row, len, Dh, qw.kt, ldt);
    words_transposed(stored_head(p->v16, p->v, b, h), p->v.row, len, Dh, qw.vt,
                     ldt);
    words_paired(k16, p->k.row, len, Dh, qw.k);
    words_paired(stored_head(p->q16, p->q, b, h), p->q.row, p->Tq, Dh, qw.qp);
  } else if (p->q16) {
    widen_qkv(p, b, h, 0, p->Tq, len, w->ql, w->kl, w->vl);
    qh = w->ql;
    kh = w->kl;
    vh = w->vl;
    q_rs = k_rs = v_rs = Dh;
  } else {
    qh = a->q + b * p->q.batch + h * p->q.head;
    kh = a->k + b * p->k.batch + h * p->k.head;
    vh = a->v + b * p->v.batch + h * p->v.head;
  }
  const float *oh = a->out + b * p->out.batch + h * p->out.head;
  const float *doh = a->dout + b * p->out.batch + h * p->out.head;
  float *dqh = a->dq ? a->dq + b * p->q.batch + h * p->q.head : NULL;
  float *dkh = a->dk ? a->dk + b * p->k.batch + h * p->k.head : NULL;
  float *dvh = a->dv ? a->dv + b * p->v.batch + h * p->v.head : NULL;
  const float *lseh = a->lse + (b * p->NH + h) * p->Tq;
  const float *kadd = key_add(p, b, w->kadd);
  const bool drop = p->dropout_p > 0.0f;
  if (!qw.q) {
    isa->transpose(kh, k_rs, len, Dh, w->kt, ldt);
    isa->transpose(vh, v_rs, len, Dh, w->vt, ldt);
  }
  const bool assign_q = p->assign_grads & CT_ATTN_ASSIGN_DQ;
  const bool assign_k = p->assign_grads & CT_ATTN_ASSIGN_DK;
  const bool assign_v = p->assign_grads & CT_ATTN_ASSIGN_DV;
  int64_t kend0 = p->Tq > 0 ? block_key_end(p, b, 0, imin64(BQ, p->Tq)) : 0;
  if (kend0 < 0) kend0 = 0;
  if (assign_k && dkh)
    zero_rows(dkh + kend0 * p->k.row, p->k.row, p->Tk - kend0, Dh);
  if (assign_v && dvh)
    zero_rows(dvh + kend0 * p->v.row, p->v.row, p->Tk - kend0, Dh);

  for (int64_t i0 = 0; i0 < p->Tq; i0 += BQ) {
    const int mq = imin64(BQ, p->Tq - i0);
    const int64_t kend = block_key_end(p, b, i0, mq);
    if (kend <= 0) {
      if (assign_q && dqh) zero_rows(dqh + i0 * p->q.row, p->q.row, mq, Dh);
      continue;
    }
    const float beta_kv = i0 == 0 ? 0.0f : 1.0f;
    const float *qb = qw.q ? NULL : qh + i0 * q_rs;
    const float *dob = doh + i0 * p->out.row;
    // delta_i = dO_i . O_i = sum_j Z_ij dZ_ij (the softmax backward term):
    // each row one chain of adds over d in order; eight rows' chains side
    // by side, so they overlap instead of waiting on each other.
    int r = 0;
    if (isa->delta16)
      for (; r + 16 <= mq; r += 16)
        isa->delta16(oh + (i0 + r) * p->out.row, dob + r * p->out.row,
                     p->out.row, Dh, w->delta + r);
    for (; r + DELTA_ROWS <= mq; r += DELTA_ROWS)
      delta_rows(oh + (i0 + r) * p->out.row, dob + r * p->out.row, p->out.row,
                 Dh, DELTA_ROWS, w->delta + r);
    for (; r < mq; r++)
      delta_rows(oh + (i0 + r) * p->out.row, dob + r * p->out.row, p->out.row,
                 Dh, 1, w->delta + r);
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
      const int nk = imin64(BK, kend - j0);
      block_product(
          isa, w->pack, &w->flops, false, mq, nk, (int)Dh, p->scale,
          qw.q ? words_op(qw.q + i0 * qw.q_rs, qw.q_rs) : floats_op(qb, q_rs),
          qw.q ? words_op(qw.kt + j0, ldt) : floats_op(w->kt + j0, ldt), 0.0f,
          w->s, BK);
      block_product(
          isa, w->pack, &w->flops, false, mq, nk, (int)Dh, 1.0f,
          floats_op(dob, p->out.row),
          qw.q ? words_op(qw.vt + j0, ldt) : floats_op(w->vt + j0, ldt), 0.0f,
          w->dp, BK);
      tile_limits(p, len, i0, mq, j0, nk, w->lim);
      if (drop) tile_keep(p, isa, b, h, i0, mq, j0, nk, w->words, w->keep);
      tile t = tile_at(p, b, h, i0, mq, j0, nk, w->lim, kadd);
      isa->bwd(&t, w->s, w->dp, lseh + i0, w->delta, drop ? w->keep : NULL);
      // s = Z (the dropped weights), dp = dS (logit gradient).
      if (dvh)
        block_product(isa, w->pack, &w->flops, true, nk, (int)Dh, mq, 1.0f,
                      floats_op(w->s, BK), floats_op(dob, p->out.row),
                      assign_v ? beta_kv : 1.0f, dvh + j0 * p->v.row, p->v.row);
      if (dqh)
        block_product(isa, w->pack, &w->flops, false, mq, (int)Dh, nk, p->scale,
                      floats_op(w->dp, BK),
                      qw.q ? words_op(qw.k + j0 / 2 * Dh, Dh)
                           : floats_op(kh + j0 * k_rs, k_rs),
                      assign_q && j0 == 0 ? 0.0f : 1.0f, dqh + i0 * p->q.row,
                      p->q.row);
      if (dkh)
        block_product(
            isa, w->pack, &w->flops, true, nk, (int)Dh, mq, p->scale,
            floats_op(w->dp, BK),
            qw.q ? words_op(qw.qp + i0 / 2 * Dh, Dh) : floats_op(qb, q_rs),
            assign_k ? beta_kv : 1.0f, dkh + j0 * p->k.row, p->k.row);
      if (a->dbias) {
        float *db = a->dbias + (b - a->dbias_b0) * a->dbias_batch +
                    (h * p->Tq + i0) * p->Tk + j0;
        for (int r = 0; r < mq; r++) {
          float *restrict dst = db + r * p->Tk;
          const float *restrict src = w->dp + r * BK;
          if (a->dbias_assign) {
            memcpy(dst, src, (size_t)nk * sizeof(float));
          } else {
#pragma omp simd
            for (int c = 0; c < nk; c++) dst[c] += src[c];
          }
        }
      }
    }
  }
}

// The stage for dbias: at most this many floats of per-b slices at a time
// (4 MiB), and at least one slice (the size of dbias itself).
enum { STAGE_FLOATS = 1 << 20 };

// dbias[e] += stage[bb][e] for bb = 0..nb-1 in order: per element the chain
// of adds that one thread walking b in order makes, so the same bits.
static void reduce_stage(float *dbias, const float *stage, int64_t nb,
                         int64_t per_b, int threads) {
  enum { CHUNK = 1024 };
  const int64_t chunks = (per_b + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t e0 = c * CHUNK;
    const int64_t n = per_b - e0 < CHUNK ? per_b - e0 : CHUNK;
    float *restrict dst = dbias + e0;
    for (int64_t bb = 0; bb < nb; bb++) {
      const float *restrict src = stage + bb * per_b + e0;
#pragma omp simd
      for (int64_t e = 0; e < n; e++) dst[e] += src[e];
    }
  }
}

// Units (b, h) of batch rows [b0, b0 + nb), one thread each.
static void bwd_pairs(const ct_attn_params *p, const attn_isa *isa,
                      const bwd_args *a, int64_t b0, int64_t nb, int threads,
                      float *scratch, size_t per) {
  const int64_t units = nb * p->NH;
#pragma omp parallel num_threads(threads)
  {
    bwd_ws w = bwd_ws_at(p, scratch + per * (size_t)omp_get_thread_num());
#pragma omp for schedule(dynamic, unit_chunk(units, threads))
    for (int64_t u = 0; u < units; u++)
      bwd_pair(p, isa, a, b0 + u / p->NH, u % p->NH, &w);
    give_flops(isa, w.flops);
  }
}

ct_status ct_attention_backward(const ct_attn_params *p, const float *q,
                                const float *k, const float *v,
                                const float *out, const float *lse,
                                const float *dout, float *dq, float *dk,
                                float *dv, float *dbias) {
  ct_status st = ct_attention_check(p);
  if (st != CT_OK) return st;
  if (!dq && !dk && !dv && !dbias) return CT_OK;
  if (p->B * p->NH == 0) return CT_OK;
  const attn_isa isa = pick_isa();
  const int threads = attn_threads(p);
  // The scratch and the stage are the call's own: given back at the end.
  const ct_arena_mark mark = ct_arena_get_mark();
  const size_t per = (bwd_ws_floats(p) + 15) & ~(size_t)15;
  float *scratch = thread_scratch(per, threads);
  if (!scratch) return CT_ERR_NOMEM;
  bwd_args a = {q, k, v, out, lse, dout, dq, dk, dv, dbias, 0, 0, false};
  // dbias is a sum over b, which one thread makes in b order:
  // - by heads: a unit is a head h, walking b in order, when the heads go
  //   round the threads evenly, or when some (b, h) see only part of the
  //   keys (causal, key lengths: their dS covers part of dbias), or when
  //   there is no room for a stage;
  // - else by (b, h) pairs, each assigning its dS into a stage of per-b
  //   slices; reduce_stage then adds the slices in b order. Every key is
  //   seen, so every element of a slice is assigned.
  // Both make the same chain of adds per element of dbias, so the choice
  // (which depends on the thread count) never changes a result.
  const int64_t per_b = p->NH * p->Tq * p->Tk;
  float *stage = NULL;
  int64_t nb_max = 0;
  if (dbias && p->NH % threads != 0 && !p->causal && !p->key_lengths &&
      per_b > 0) {
    nb_max = STAGE_FLOATS / per_b;
    if (nb_max < 1) nb_max = 1;
    if (nb_max > p->B) nb_max = p->B;
    stage = ct_arena_alloc((size_t)(nb_max * per_b) * sizeof(float));
  }
  if (!dbias) {  // a unit is one (b, h) pair
    bwd_pairs(p, &isa, &a, 0, p->B, threads, scratch, per);
  } else if (!stage) {
#pragma omp parallel num_threads(threads)
    {
      bwd_ws w = bwd_ws_at(p, scratch + per * (size_t)omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
      for (int64_t h = 0; h < p->NH; h++)
        for (int64_t b = 0; b < p->B; b++) bwd_pair(p, &isa, &a, b, h, &w);
      give_flops(&isa, w.flops);
    }
  } else {
    a.dbias = stage;
    a.dbias_batch = per_b;
    a.dbias_assign = true;
    for (int64_t b0 = 0; b0 < p->B; b0 += nb_max) {
      const int64_t nb = p->B - b0 < nb_max ? p->B - b0 : nb_max;
      a.dbias_b0 = b0;
      bwd_pairs(p, &isa, &a, b0, nb, threads, scratch, per);
      reduce_stage(dbias, stage, nb, per_b, threads);
    }
  }
  ct_arena_rewind(mark);
  return CT_OK;
}
