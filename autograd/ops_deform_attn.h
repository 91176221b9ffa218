// Multi-scale deformable attention (Zhu et al. 2021, eq. 3; the reference's
// ms_deform_attn_core_pytorch), as one differentiable op: for every query, a
// head's output is the weighted sum of its value map bilinearly sampled at a
// few points on every level.
//
// Dimension letters: N batch, S = sum over levels of H_l * W_l value rows
// (the levels' maps flattened row-major and concatenated), M heads, D the
// head size, Lq queries, L levels, P points per level and head.
//
//   value (N, S, M, D)             the projected values, split into heads
//   shapes                         L pairs (H_l, W_l), in the order of S
//   locations (N, Lq, M, L*P, 2)   sampling points (x, y), normalized to
//                                  [0, 1] per level; the reference's
//                                  (N, Lq, M, L, P, 2) with L and P merged
//                                  (tensors have at most 5 dims)
//   weights (N, Lq, M, L, P)       attention weights, already softmaxed (or
//                                  the same with L, P merged: (N, Lq, M, L*P))
//   -> (N, Lq, M*D): out[n, q, m*D + d] = sum over l, p of
//      weights[n, q, m, l, p] * sample_l(value[n, :, m, d], loc[n, q, m, l, p])
//
// Sampling is PyTorch's grid_sample(value_l, 2 * loc - 1, mode='bilinear',
// padding_mode='zeros', align_corners=False): the pixel coordinates are
// x = loc_x * W_l - 0.5, y = loc_y * H_l - 0.5, the four neighbours are
// weighted bilinearly, and a neighbour outside the map contributes 0 (so a
// point may lie outside [0, 1]). A NaN location gives a NaN output.
// Gradients flow to value, locations and weights; bilinear sampling is not
// differentiable where x or y is an integer (a neighbour changes), and the
// gradient there is grid_sample's (the right-hand one).
//
// Threads: the forward splits queries (each output row is one thread's). The
// backward's value gradient is a scatter (many queries sample one value
// row), so it is split by (n, m) pairs instead: one thread owns the value
// gradient of head m of image n, dvalue[n, :, m, :], and walks that head's
// queries, levels, points and neighbours in order; the location and weight
// gradients of (n, q, m) are written by that same thread. No atomics, no
// per-thread copies to reduce, and every sum has one order whatever the
// thread count: the bits do not depend on it. The cost is parallelism
// limited to N * M tasks (16 for a batch of 2 with 8 heads), plenty on a
// CPU. (The alternative, a gather list per value row sorted by query, needs
// an index build and an extra pass over memory per step.)
//
// Conventions are those of autograd/ops.h: NULL inputs pass an earlier error
// through; bad shapes return NULL with an error naming the op and the shapes.
// Not here: the sampling offsets, the softmax and the projections (nn/
// deform_attn.h: MSDeformAttn), and any padding mask (zero the values first).
#ifndef CT_AUTOGRAD_OPS_DEFORM_ATTN_H
#define CT_AUTOGRAD_OPS_DEFORM_ATTN_H

#include <stdint.h>

#include "core/tensor.h"

// See above. shapes holds 2 * levels values H_0, W_0, H_1, W_1, ..., each
// >= 1, with sum H_l * W_l == value's S; it is copied (the caller's array
// need not outlive the call).
ct_tensor *ct_ms_deform_attn(ct_tensor *value, const int64_t *shapes,
                             int64_t levels, ct_tensor *locations,
                             ct_tensor *weights);

#endif
