// Gradient accumulation in a fixed summation tree, so that a sum of K
// gradients has the same bits however the K are spread over processes.
//
//   ct_grad_accum acc;
//   ct_grad_accum_init(&acc, p.count, true);  // copies: p.grad is reused
//   for (int64_t m = 0; m < K; m++) {
//     ct_params_zero_grad(&p);
//     ... forward and backward of micro-batch m ...
//     ct_grad_accum_add(&acc, m, K, p.grad, 0, p.count);
//   }
//   // p.grad now holds the sum of the K gradients
//   ct_grad_accum_free(&acc);
//
// The tree: the aligned binary tree over the leaves 0..K-1, where a node
// [lo, hi) is the sum of its halves [lo, lo + h) + [lo + h, hi), h the
// largest power of two below hi - lo (K = 6: (g0 + g1) + (g2 + g3), then
// + (g4 + g5)). It is built the way a binary counter counts: level j holds,
// while it waits for its right neighbour, the sum of an aligned block of
// 2^j leaves. Leaf m merges with the levels of m's trailing one bits and
// waits at the level of its lowest zero bit; the last leaf (m = K - 1)
// merges with every level still waiting, lowest first. Nothing else is
// kept: which levels wait after m leaves is a function of m.
//
// Why it makes a data-parallel sum exact. N ranks with A = 2^k micro-batches
// each, rank r holding the leaves [rA, rA + A) of K = N·A: every split point
// of a node bigger than A is a multiple of A, so each rank's block is a
// node of the tree over K, and above the blocks the tree over K is the tree
// over N leaves (the block sums). So a rank sums its A leaves with the tree
// over A, the owner of each part of the buffer sums the N ranks' parts with
// the tree over N, and every float addition is one the single process does
// with the same two operands (a + b and b + a round alike). For A not a
// power of two the blocks are not nodes: the result is still a fixed
// function of (N, A) but not the bits of one process.
//
// Ranges: the arithmetic is elementwise, so a leaf may be added a range
// [lo, hi) at a time (a bucket of a data-parallel step as soon as backward
// has finished it), provided every range of leaf m is added before leaf
// m + 1.
//
// What this file does not do: scaling (the caller scales each micro-batch's
// loss by 1/K before its backward) or communication (train/dist.h).
#ifndef CT_OPTIM_GRAD_ACCUM_H
#define CT_OPTIM_GRAD_ACCUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

enum { CT_GRAD_ACCUM_LEVELS = 63 };

typedef struct ct_grad_accum {
  size_t n;   // floats per buffer
  bool copy;  // true: leaves are copied when they wait (the caller reuses
              // its buffer); false: they wait in place (buffers the caller
              // keeps until the sum is done; leaves are overwritten)
  float *level[CT_GRAD_ACCUM_LEVELS];  // the waiting sum of each level
  float *owned[CT_GRAD_ACCUM_LEVELS];  // copy mode: the levels' buffers
} ct_grad_accum;

void ct_grad_accum_init(ct_grad_accum *a, size_t n, bool copy);

// Adds floats [lo, hi) of leaf m of K (0 <= m < K). For m < K - 1 the leaf
// (merged with the levels it completes) waits at a level; for m = K - 1,
// leaf[lo, hi) ends holding the sum of all K leaves. The leaf's values are
// overwritten either way. CT_ERR_ARG for m outside [0, K) or a range beyond
// n; CT_ERR_NOMEM when a level's copy cannot be allocated.
ct_status ct_grad_accum_add(ct_grad_accum *a, int64_t m, int64_t K, float *leaf,
                            size_t lo, size_t hi);

// Floats held by the levels' copies (what the tree costs besides the
// gradient itself).
size_t ct_grad_accum_floats(const ct_grad_accum *a);
void ct_grad_accum_free(ct_grad_accum *a);

#endif
