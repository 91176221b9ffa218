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
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
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

// Calls f(i, word) for the words at indices base .. base+n-1 of (seed,
// stream), in parallel over fixed chunks; one Philox block serves four
// consecutive indices. A word depends only on its index, so the result is the
// same at any thread count.
#define FOR_EACH_WORD(seed, stream, base, n, BODY)                            \
  do {                                                                        \
    const int64_t n_ = (n);                                                   \
    const uint64_t base_ = (base);                                            \
    enum { CHUNK_ = 4096 };                                                   \
    _Pragma("omp parallel for schedule(static) if (n_ > 65536)")              \
    for (int64_t c_ = 0; c_ < (n_ + CHUNK_ - 1) / CHUNK_; c_++) {            \
      int64_t i_ = c_ * CHUNK_, end_ = i_ + CHUNK_ < n_ ? i_ + CHUNK_ : n_;   \
      while (i_ < end_) {                                                     \
        uint32_t w_[4];                                                       \
        uint64_t at_ = base_ + (uint64_t)i_;                                  \
        block_at((seed), (stream), at_ >> 2, w_);                             \
        for (unsigned k_ = (unsigned)(at_ & 3); k_ < 4 && i_ < end_;          \
             k_++, i_++) {                                                    \
          const int64_t i = i_;                                               \
          const uint32_t word = w_[k_];                                       \
          BODY;                                                               \
        }                                                                     \
      }                                                                       \
    }                                                                         \
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
    int64_t t = out[i]; out[i] = out[j]; out[j] = t;
  }
}
