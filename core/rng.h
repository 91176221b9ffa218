// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011).
//
// A draw is a pure function of (seed, stream, index): the 64-bit seed is the
// Philox key, and the 128-bit counter is (index / 4, stream); each counter
// value yields four 32-bit words. So the i-th number of a stream is the same
// whichever thread computes it and in whatever order, and a generator's whole
// state is three integers (what a checkpoint stores to resume).
//
// Streams separate purposes: derive one with ct_rng_stream(purpose, step) so
// that, e.g., dropout at step 7 and the shuffle of epoch 3 never overlap.
#ifndef CT_CORE_RNG_H
#define CT_CORE_RNG_H

#include <stdint.h>

// The raw block function: out = Philox4x32-10(ctr, key).
void ct_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                      uint32_t out[4]);

// Many blocks at once, vectorized (AVX-512 or AVX2 chosen at run time):
// words[4g .. 4g+3] = the block of counter (first_block + g, stream) under
// key seed, for g < n_blocks; i.e. the words of indices 4*first_block ...
// Single-threaded; the bulk fills below and the attention dropout use it.
void ct_philox_blocks(uint64_t seed, uint64_t stream, uint64_t first_block,
                      int n_blocks, uint32_t *words);

typedef struct ct_rng {
  uint64_t seed;
  uint64_t stream;
  uint64_t offset;  // index of the next 32-bit word
} ct_rng;

ct_rng ct_rng_make(uint64_t seed, uint64_t stream);
// A stream id for (purpose, step): purposes are small constants chosen by
// the caller (dropout, shuffle, augmentation, init, ...).
uint64_t ct_rng_stream(uint32_t purpose, uint64_t step);

// The 32-bit word at `index` of (seed, stream), without any state.
uint32_t ct_rng_u32_at(uint64_t seed, uint64_t stream, uint64_t index);
// Uniform in [0, 1) with 24 random bits, from the word at `index`.
float ct_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t index);

// Sequential draws; each advances r->offset by the words it used.
uint32_t ct_rng_next_u32(ct_rng *r);
// Uniform in [0, 1) (53 bits, two words).
double ct_rng_next_double(ct_rng *r);
// Uniform integer in [0, n), n >= 1 (unbiased; two words per try).
uint64_t ct_rng_next_below(ct_rng *r, uint64_t n);

// Bulk fills: out[i] depends only on (seed, stream, offset + i*words), so the
// fill may run on any number of threads. Uniform uses one word per element,
// normal two (Box-Muller), bernoulli one (out[i] = 1 with probability p).
void ct_rng_fill_uniform(ct_rng *r, float *out, int64_t n, float lo, float hi);
void ct_rng_fill_normal(ct_rng *r, float *out, int64_t n, float mean,
                        float std);
void ct_rng_fill_bernoulli(ct_rng *r, uint8_t *out, int64_t n, float p);
// A uniformly random permutation of 0..n-1 (Fisher-Yates).
void ct_rng_permutation(ct_rng *r, int64_t *out, int64_t n);

#endif
