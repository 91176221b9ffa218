// Philox4x32-10 against Random123's published known-answer vectors
// (tests/kat_vectors, "philox4x32 10" lines), and the draws built on it.
#include "core/rng.h"
#include "core/threads.h"
#include "tests/harness.h"

#include <stdint.h>
#include <string.h>

static void check_kat(const uint32_t ctr[4], const uint32_t key[2],
                      const uint32_t want[4]) {
  uint32_t got[4];
  ct_philox4x32_10(ctr, key, got);
  for (int i = 0; i < 4; i++)
    CHECK(got[i] == want[i], "word %d: got %08x, want %08x", i, got[i],
          want[i]);
}

int main(void) {
  {
    const uint32_t ctr[4] = {0, 0, 0, 0}, key[2] = {0, 0};
    const uint32_t want[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    check_kat(ctr, key, want);
  }
  {
    const uint32_t ctr[4] = {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff};
    const uint32_t key[2] = {0xffffffff, 0xffffffff};
    const uint32_t want[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
    check_kat(ctr, key, want);
  }
  {
    const uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
    const uint32_t key[2] = {0xa4093822, 0x299f31d0};
    const uint32_t want[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
    check_kat(ctr, key, want);
  }

  // The keyed interface maps (seed, stream, index) onto (key, counter).
  {
    uint32_t ctr[4] = {5, 0, 7, 0}, key[2] = {42, 0}, out[4];
    ct_philox4x32_10(ctr, key, out);
    for (int w = 0; w < 4; w++)
      CHECK(ct_rng_u32_at(42, 7, 5 * 4 + w) == out[w], "keyed word %d", w);
  }

  // Sequential draws equal the stateless ones, and a fill equals draws one
  // at a time (so a fill at any thread count gives the same numbers).
  {
    ct_rng r = ct_rng_make(9, 3);
    for (uint64_t i = 0; i < 10; i++)
      CHECK(ct_rng_next_u32(&r) == ct_rng_u32_at(9, 3, i), "sequential %d",
            (int)i);
    CHECK(r.offset == 10, "offset advanced to %llu",
          (unsigned long long)r.offset);
  }
  {
    enum { N = 200000 };
    static float a[N], b[N];
    ct_set_threads(1);
    ct_rng r1 = ct_rng_make(1, 2);
    ct_rng_fill_normal(&r1, a, N, 0.0f, 1.0f);
    ct_set_threads(2);
    ct_rng r2 = ct_rng_make(1, 2);
    ct_rng_fill_normal(&r2, b, N, 0.0f, 1.0f);
    CHECK(memcmp(a, b, sizeof a) == 0, "normal fill differs across threads");
    double mean = 0, var = 0;
    for (int i = 0; i < N; i++) mean += a[i];
    mean /= N;
    for (int i = 0; i < N; i++) var += (a[i] - mean) * (a[i] - mean);
    var /= N;
    CHECK(fabs(mean) < 0.01, "normal mean %g", mean);
    CHECK(fabs(var - 1.0) < 0.02, "normal variance %g", var);

    ct_rng r3 = ct_rng_make(1, 5);
    ct_rng_fill_uniform(&r3, a, N, -2.0f, 3.0f);
    float lo = a[0], hi = a[0];
    mean = 0;
    for (int i = 0; i < N; i++) {
      lo = fminf(lo, a[i]);
      hi = fmaxf(hi, a[i]);
      mean += a[i];
    }
    CHECK(lo >= -2.0f && hi < 3.0f, "uniform range [%g, %g]", lo, hi);
    CHECK(fabs(mean / N - 0.5) < 0.02, "uniform mean %g", mean / N);

    static uint8_t m[N];
    ct_rng r4 = ct_rng_make(1, 6);
    ct_rng_fill_bernoulli(&r4, m, N, 0.3f);
    int ones = 0;
    for (int i = 0; i < N; i++) ones += m[i];
    CHECK(fabs(ones / (double)N - 0.3) < 0.01, "bernoulli rate %g",
          ones / (double)N);
  }

  // Permutations hold every index once; different streams differ.
  {
    enum { N = 1000 };
    int64_t p[N], q[N];
    ct_rng r = ct_rng_make(11, ct_rng_stream(1, 0));
    ct_rng_permutation(&r, p, N);
    int seen[N] = {0};
    for (int i = 0; i < N; i++) seen[p[i]]++;
    int bad = 0;
    for (int i = 0; i < N; i++) bad += seen[i] != 1;
    CHECK(bad == 0, "%d indices not seen exactly once", bad);
    ct_rng s = ct_rng_make(11, ct_rng_stream(1, 1));
    ct_rng_permutation(&s, q, N);
    CHECK(memcmp(p, q, sizeof p) != 0, "streams for epochs 0 and 1 agree");
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += p[i] == i;
    CHECK(fixed < 10, "%d fixed points in a random permutation", fixed);
    // next_below stays in range
    ct_rng t = ct_rng_make(3, 3);
    int out = 0;
    for (int i = 0; i < 1000; i++) out += ct_rng_next_below(&t, 7) >= 7;
    CHECK(out == 0, "next_below out of range %d times", out);
  }
  return test_summary("rng");
}
