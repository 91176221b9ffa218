// The fixed summation tree of gradient accumulation (optim/grad_accum.h):
// its sums are the aligned binary tree's, bit for bit, whether built from
// copies or in place and range by range; and N blocks of A = 2^k leaves,
// each summed on its own and then combined by the tree over N, give the
// bits of the tree over N·A (what makes data-parallel steps exact), which
// a plain left-to-right sum does not.
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "optim/grad_accum.h"

enum { N_FLOATS = 97 };

// Leaves whose sums depend on the order: magnitudes from 1e-8 to 1e8.
static void fill_leaves(float *leaves, int64_t K, unsigned seed) {
  srand(seed);
  for (int64_t i = 0; i < K * N_FLOATS; i++) {
    float mag = powf(10.0f, (float)(rand() % 17 - 8));
    leaves[i] = mag * ((float)rand() / (float)RAND_MAX - 0.5f);
  }
}

// The aligned tree, written out recursively: [lo, hi) = [lo, lo + h) +
// [lo + h, hi), h the largest power of two below hi - lo.
static float tree_sum(const float *leaves, int64_t lo, int64_t hi, int i) {
  if (hi - lo == 1) return leaves[lo * N_FLOATS + i];
  int64_t h = 1;
  while (2 * h < hi - lo) h *= 2;
  return tree_sum(leaves, lo, lo + h, i) + tree_sum(leaves, lo + h, hi, i);
}

// The accumulator over leaves [first, first + K) into out (copy mode: one
// reused leaf buffer, as the trainer does with the gradient).
static void accumulate(const float *leaves, int64_t first, int64_t K,
                       float *out) {
  ct_grad_accum acc;
  ct_grad_accum_init(&acc, N_FLOATS, true);
  float buf[N_FLOATS];
  for (int64_t m = 0; m < K; m++) {
    memcpy(buf, leaves + (first + m) * N_FLOATS, sizeof buf);
    CHECK(ct_grad_accum_add(&acc, m, K, buf, 0, N_FLOATS) == CT_OK, "leaf %lld",
          (long long)m);
  }
  memcpy(out, buf, sizeof buf);
  ct_grad_accum_free(&acc);
}

static void test_tree_shape(void) {
  float leaves[17 * N_FLOATS], got[N_FLOATS];
  for (int64_t K = 1; K <= 17; K++) {
    fill_leaves(leaves, K, (unsigned)K);
    accumulate(leaves, 0, K, got);
    int bad = 0;
    for (int i = 0; i < N_FLOATS; i++)
      bad += memcmp(&got[i], &(float){tree_sum(leaves, 0, K, i)}, 4) != 0;
    CHECK(bad == 0, "K = %lld: %d of %d sums differ from the aligned tree",
          (long long)K, bad, N_FLOATS);
  }
  // The order matters for these leaves: a left-to-right sum differs.
  fill_leaves(leaves, 8, 8);
  accumulate(leaves, 0, 8, got);
  int differ = 0;
  for (int i = 0; i < N_FLOATS; i++) {
    float left = 0.0f;
    for (int m = 0; m < 8; m++) left += leaves[m * N_FLOATS + i];
    differ += left != got[i];
  }
  CHECK(differ > 0, "a left-to-right sum of 8 leaves equals the tree's");
}

// In place (leaves kept by the caller) and range by range: the same bits.
static void test_in_place_and_ranges(void) {
  enum { K = 6 };
  float leaves[K * N_FLOATS], whole[N_FLOATS];
  fill_leaves(leaves, K, 42);
  accumulate(leaves, 0, K, whole);
  float kept[K * N_FLOATS];
  memcpy(kept, leaves, sizeof kept);
  ct_grad_accum acc;
  ct_grad_accum_init(&acc, N_FLOATS, false);
  const size_t cut[] = {0, 10, 64, N_FLOATS};
  for (int m = 0; m < K; m++)
    for (int r = 0; r < 3; r++)
      CHECK(ct_grad_accum_add(&acc, m, K, kept + m * N_FLOATS, cut[r],
                              cut[r + 1]) == CT_OK,
            "leaf %d range %d", m, r);
  CHECK(!memcmp(kept + (K - 1) * N_FLOATS, whole, sizeof whole),
        "in place, in ranges: not the bits of the copying accumulator");
  CHECK(ct_grad_accum_floats(&acc) == 0, "in place, the tree copied %zu floats",
        ct_grad_accum_floats(&acc));
  ct_grad_accum_free(&acc);
  // Copy mode holds a buffer per level used: 6 leaves wait at levels 0-2.
  ct_grad_accum_init(&acc, N_FLOATS, true);
  for (int m = 0; m < K; m++)
    ct_grad_accum_add(&acc, m, K, kept + m * N_FLOATS, 0, N_FLOATS);
  CHECK(ct_grad_accum_floats(&acc) == 3 * N_FLOATS,
        "6 leaves: %zu floats of copies, want %d", ct_grad_accum_floats(&acc),
        3 * N_FLOATS);
  ct_grad_accum_free(&acc);
}

// N ranks of A leaves each: every rank sums its own, the owner sums the N
// partial sums with the tree over N (in place, as train/data_parallel.c
// does with the received parts).
static void ranks_sum(const float *leaves, int64_t N, int64_t A, float *out) {
  float *part = malloc((size_t)(N * N_FLOATS) * sizeof *part);
  for (int64_t r = 0; r < N; r++)
    accumulate(leaves, r * A, A, part + r * N_FLOATS);
  ct_grad_accum acc;
  ct_grad_accum_init(&acc, N_FLOATS, false);
  for (int64_t r = 0; r < N; r++)
    ct_grad_accum_add(&acc, r, N, part + r * N_FLOATS, 0, N_FLOATS);
  memcpy(out, part + (N - 1) * N_FLOATS, N_FLOATS * sizeof *out);
  ct_grad_accum_free(&acc);
  free(part);
}

static void test_data_parallel_blocks(void) {
  float leaves[64 * N_FLOATS], one[N_FLOATS], ranks[N_FLOATS];
  for (int64_t N = 1; N <= 8; N++)
    for (int64_t A = 1; A <= 8; A *= 2) {
      fill_leaves(leaves, N * A, (unsigned)(100 * N + A));
      accumulate(leaves, 0, N * A, one);
      ranks_sum(leaves, N, A, ranks);
      int bad = 0;
      for (int i = 0; i < N_FLOATS; i++) bad += memcmp(&one[i], &ranks[i], 4);
      CHECK(bad == 0,
            "%lld ranks x %lld leaves: %d of %d sums differ from one process "
            "with %lld",
            (long long)N, (long long)A, bad, N_FLOATS, (long long)(N * A));
    }
  // A = 3 is not a power of two: the blocks are not subtrees (the README
  // says so), and the sums do differ.
  fill_leaves(leaves, 6, 7);
  accumulate(leaves, 0, 6, one);
  ranks_sum(leaves, 2, 3, ranks);
  CHECK(memcmp(one, ranks, sizeof one) != 0,
        "2 ranks x 3 leaves gave the bits of 6 leaves on one process");
}

static void test_errors(void) {
  ct_grad_accum acc;
  ct_grad_accum_init(&acc, 4, true);
  float buf[4] = {0};
  CHECK(ct_grad_accum_add(&acc, 2, 2, buf, 0, 4) == CT_ERR_ARG, "m = K");
  CHECK(ct_grad_accum_add(&acc, -1, 2, buf, 0, 4) == CT_ERR_ARG, "m < 0");
  CHECK(ct_grad_accum_add(&acc, 0, 2, buf, 0, 5) == CT_ERR_ARG, "hi > n");
  CHECK(ct_grad_accum_add(&acc, 0, 2, buf, 3, 2) == CT_ERR_ARG, "lo > hi");
  ct_grad_accum_free(&acc);
}

int main(void) {
  test_tree_shape();
  test_in_place_and_ranges();
  test_data_parallel_blocks();
  test_errors();
  return test_summary("grad_accum");
}
