// Philox4x32-10 and the draws built on it. Constants from Random123's
// philox.h: multipliers 0xD2511F53, 0xCD9E8D57; Weyl key increments
// 0x9E3779B9 (golden ratio), 0xBB67AE85 (sqrt 3 - 1).
#include "core/rng.h"

#include <math.h>

static const uint32_t PHILOX_M0 = 0xD2511F53u, PHILOX_M1 = 0xCD9E8D57u;
static const double TWO_PI = 6.283185307179586476925;
static const uint32_t PHILOX_W0 = 0x9E3779B9u, PHILOX_W1 = 0xBB67AE85u;

static inline void philox_block(const uint32_t ctr[4], const uint32_t key[2],
                                uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
    uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

void ct_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                      uint32_t out[4]) {
  philox_block(ctr, key, out);
}

ct_rng ct_rng_make(uint64_t seed, uint64_t stream) {
  return (ct_rng){.seed = seed, .stream = stream, .offset = 0};
}

uint64_t ct_rng_stream(uint32_t purpose, uint64_t step) {
  // 24 bits of purpose above 40 bits of step: distinct for any step < 2^40.
  return ((uint64_t)purpose << 40) ^ (step & ((1ull << 40) - 1));
}

static void block_at(uint64_t seed, uint64_t stream, uint64_t block,
                     uint32_t out[4]) {
  const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32),
                           (uint32_t)stream, (uint32_t)(stream >> 32)};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  philox_block(ctr, key, out);
}

uint32_t ct_rng_u32_at(uint64_t seed, uint64_t stream, uint64_t index) {
  uint32_t out[4];
  block_at(seed, stream, index >> 2, out);
  return out[index & 3];
}

static inline float u32_to_unit(uint32_t u) {
  return (float)(u >> 8) * (1.0f / 16777216.0f);
}

float ct_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return u32_to_unit(ct_rng_u32_at(seed, stream, index));
}

uint32_t ct_rng_next_u32(ct_rng *r) {
  return ct_rng_u32_at(r->seed, r->stream, r->offset++);
}

double ct_rng_next_double(ct_rng *r) {
  uint64_t hi = ct_rng_next_u32(r) >> 5, lo = ct_rng_next_u32(r) >> 6;
  return (double)(hi * 67108864u + lo) * (1.0 / 9007199254740992.0);
}

uint64_t ct_rng_next_below(ct_rng *r, uint64_t n) {
  // Rejection sampling on 64-bit draws: reject the top partial range.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    uint64_t x = (uint64_t)ct_rng_next_u32(r) << 32;
    x |= ct_rng_next_u32(r);
    if (x < limit) return x % n;
  }
}

// The words of ng consecutive blocks from block g0 of (seed, stream):
// words[4g .. 4g+3] = the block at counter g0 + g. The same Philox rounds as
// philox_block, spelled so the vectorizer runs one counter per lane (the
// 32x32->64 products become vector multiplies); compiled once per ISA below
// and chosen at run time, as core/attention_kernel.c does for its dropout.
#if defined(__x86_64__) || defined(__i386__)
#define RNG_X86 1
#include <immintrin.h>
#endif
#define BLOCKS_INLINE static inline __attribute__((always_inline))

BLOCKS_INLINE void blocks_impl(uint64_t seed, uint64_t stream, uint64_t g0,
                               int ng, uint32_t *restrict words) {
  const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  const uint32_t s0 = (uint32_t)stream, s1 = (uint32_t)(stream >> 32);
#pragma omp simd
  for (int g = 0; g < ng; g++) {
    const uint64_t ctr = g0 + (uint64_t)g;
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = s0, c3 = s1;
    uint32_t ka = k0, kb = k1;
    for (int round = 0; round < 10; round++) {
      const uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
      const uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
      const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ ka;
      const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ kb;
      c1 = (uint32_t)p1;
      c3 = (uint32_t)p0;
      c0 = n0;
      c2 = n2;
      ka += PHILOX_W0;
      kb += PHILOX_W1;
    }
    words[4 * g] = c0;
    words[4 * g + 1] = c1;
    words[4 * g + 2] = c2;
    words[4 * g + 3] = c3;
  }
}

typedef void (*blocks_fn)(uint64_t, uint64_t, uint64_t, int, uint32_t *);

static void blocks_base(uint64_t seed, uint64_t stream, uint64_t g0, int ng,
                        uint32_t *words) {
  blocks_impl(seed, stream, g0, ng, words);
}
#ifdef RNG_X86
__attribute__((target("avx2"))) static void blocks_avx2(uint64_t seed,
                                                        uint64_t stream,
                                                        uint64_t g0, int ng,
                                                        uint32_t *words) {
  blocks_impl(seed, stream, g0, ng, words);
}
// AVX-512 by hand: the compiler widens the 32x32->64 products above to
// full 64-bit multiplies (three vpmuludq each). Here 16 counters run in the
// 32-bit lanes of four vectors c0..c3; a product's high words come from two
// vpmuludq (even and odd lanes), its low words from vpmulld. The four words
// of each block are then interleaved into the blocks_impl layout.
#define AVX512 __attribute__((target("avx512f")))

static inline AVX512 __m512i mulhi_epu32(__m512i a, __m512i m) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  return _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

AVX512 static void blocks_avx512(uint64_t seed, uint64_t stream, uint64_t g0,
                                 int ng, uint32_t *words) {
  const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0);
  const __m512i m1 = _mm512_set1_epi32((int)PHILOX_M1);
  const __m512i lane =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i s0 = _mm512_set1_epi32((int)(uint32_t)stream);
  const __m512i s1 = _mm512_set1_epi32((int)(uint32_t)(stream >> 32));
  int g = 0;
  for (; g + 16 <= ng; g += 16) {
    const uint64_t base = g0 + (uint64_t)g;
    const __m512i lo = _mm512_set1_epi32((int)(uint32_t)base);
    const __m512i hi = _mm512_set1_epi32((int)(uint32_t)(base >> 32));
    __m512i c0 = _mm512_add_epi32(lo, lane);
    // counter = base + lane as 64 bits: carry into the high word on wrap.
    __m512i c1 = _mm512_mask_add_epi32(hi, _mm512_cmplt_epu32_mask(c0, lo), hi,
                                       _mm512_set1_epi32(1));
    __m512i c2 = s0, c3 = s1;
    uint32_t ka = (uint32_t)seed, kb = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
      const __m512i hi0 = mulhi_epu32(c0, m0), lo0 = _mm512_mullo_epi32(c0, m0);
      const __m512i hi1 = mulhi_epu32(c2, m1), lo1 = _mm512_mullo_epi32(c2, m1);
      // 0x96: three-way xor.
      c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32((int)ka), 0x96);
      c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32((int)kb), 0x96);
      c1 = lo1;
      c3 = lo0;
      ka += PHILOX_W0;
      kb += PHILOX_W1;
    }
    // Transpose: in 128-bit lane i of u_j sits block 4i + j.
    const __m512i t0 = _mm512_unpacklo_epi32(c0, c1);
    const __m512i t1 = _mm512_unpackhi_epi32(c0, c1);
    const __m512i t2 = _mm512_unpacklo_epi32(c2, c3);
    const __m512i t3 = _mm512_unpackhi_epi32(c2, c3);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2);
    const __m512i u1 = _mm512_unpackhi_epi64(t0, t2);
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3);
    const __m512i u3 = _mm512_unpackhi_epi64(t1, t3);
    const __m512i a01 =
        _mm512_shuffle_i32x4(u0, u1, 0x44);  // u0.0 u0.1 u1.0 u1.1
    const __m512i a23 = _mm512_shuffle_i32x4(u2, u3, 0x44);
    const __m512i b01 =
        _mm512_shuffle_i32x4(u0, u1, 0xEE);  // u0.2 u0.3 u1.2 u1.3
    const __m512i b23 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    uint32_t *w = words + 4 * g;
    _mm512_storeu_si512(w, _mm512_shuffle_i32x4(a01, a23, 0x88));
    _mm512_storeu_si512(w + 16, _mm512_shuffle_i32x4(a01, a23, 0xDD));
    _mm512_storeu_si512(w + 32, _mm512_shuffle_i32x4(b01, b23, 0x88));
    _mm512_storeu_si512(w + 48, _mm512_shuffle_i32x4(b01, b23, 0xDD));
  }
  if (g < ng)
    blocks_impl(seed, stream, g0 + (uint64_t)g, ng - g, words + 4 * g);
}
#undef AVX512
#endif

static blocks_fn pick_blocks(void) {
#ifdef RNG_X86
  if (__builtin_cpu_supports("avx512f")) return blocks_avx512;
  if (__builtin_cpu_supports("avx2")) return blocks_avx2;
#endif
  return blocks_base;
}

void ct_philox_blocks(uint64_t seed, uint64_t stream, uint64_t first_block,
                      int n_blocks, uint32_t *words) {
  static blocks_fn fn;
  if (!fn) fn = pick_blocks();  // the same answer from any thread
  fn(seed, stream, first_block, n_blocks, words);
}

// Calls f(i, word) for the words at indices base .. base+n-1 of (seed,
// stream), in parallel over fixed chunks: each chunk first computes the
// Philox blocks that cover it (four consecutive indices per block), then
// runs BODY over its words. A word depends only on its index, so the result
// is the same at any thread count.
enum { WORD_CHUNK = 4096 };
#define FOR_EACH_WORD(seed, stream, base, n, BODY)                             \
  do {                                                                         \
    const int64_t n_ = (n);                                                    \
    const uint64_t base_ = (base);                                             \
    const blocks_fn blocks_ = pick_blocks();                                   \
    _Pragma("omp parallel for schedule(static) if (n_ > 65536)") for (         \
        int64_t c_ = 0; c_ < (n_ + WORD_CHUNK - 1) / WORD_CHUNK; c_++) {       \
      uint32_t w_[WORD_CHUNK + 8];                                             \
      const int64_t i0_ = c_ * WORD_CHUNK;                                     \
      const int64_t end_ = i0_ + WORD_CHUNK < n_ ? i0_ + WORD_CHUNK : n_;      \
      const uint64_t at_ = base_ + (uint64_t)i0_;                              \
      const uint64_t g0_ = at_ >> 2;                                           \
      blocks_(seed, stream, g0_,                                               \
              (int)(((at_ + (uint64_t)(end_ - i0_) - 1) >> 2) - g0_ + 1), w_); \
      const uint32_t *wc_ = w_ + (at_ & 3);                                    \
      for (int64_t i = i0_; i < end_; i++) {                                   \
        const uint32_t word = wc_[i - i0_];                                    \
        BODY;                                                                  \
      }                                                                        \
    }                                                                          \
  } while (0)

void ct_rng_fill_uniform(ct_rng *r, float *out, int64_t n, float lo, float hi) {
  FOR_EACH_WORD(r->seed, r->stream, r->offset, n,
                out[i] = lo + (hi - lo) * u32_to_unit(word));
  r->offset += (uint64_t)n;
}

void ct_rng_fill_normal(ct_rng *r, float *out, int64_t n, float mean,
                        float std) {
  const uint64_t seed = r->seed, stream = r->stream, base = r->offset;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) {
    // Box-Muller on two words; 1 - u keeps the log's argument in (0, 1].
    double u1 = 1.0 - ct_rng_uniform_at(seed, stream, base + 2 * i);
    double u2 = ct_rng_uniform_at(seed, stream, base + 2 * i + 1);
    double z = sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2);
    out[i] = mean + std * (float)z;
  }
  r->offset += 2 * (uint64_t)n;
}

void ct_rng_fill_bernoulli(ct_rng *r, uint8_t *out, int64_t n, float p) {
  FOR_EACH_WORD(r->seed, r->stream, r->offset, n,
                out[i] = u32_to_unit(word) < p);
  r->offset += (uint64_t)n;
}

void ct_rng_permutation(ct_rng *r, int64_t *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)ct_rng_next_below(r, (uint64_t)i + 1);
    int64_t t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
}
