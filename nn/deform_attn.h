// MSDeformAttn, the multi-scale deformable attention module of Deformable
// DETR (Zhu et al. 2021, eq. 3; models/ops/modules/ms_deform_attn.py of
// fundamentalvision/Deformable-DETR), with the reference's parameter names
// and initialization. The sampling itself is the op of
// autograd/ops_deform_attn.h.
//
// Dimension letters: N batch, Lq queries, C = d_model, M heads, D = C / M,
// L levels, P points per level and head, S = sum over levels of H_l * W_l
// (the levels' maps flattened row-major and concatenated).
//
//   value     = value_proj(input_flatten), zero at padded rows   (N, S, M, D)
//   offsets   = sampling_offsets(query)                 (N, Lq, M, L, P, 2)
//   weights   = softmax over L*P of attention_weights(query) per head
//   locations = ref + offsets / (W_l, H_l)       for ref (N, Lq, L, 2)
//             = ref_xy + offsets / P * ref_wh * 0.5   for ref (N, Lq, L, 4)
//   out       = output_proj(ms_deform_attn(value, locations, weights))
//
// reference_points are (x, y) or (cx, cy, w, h) in [0, 1] of each level's
// map. The division by (W_l, H_l) and by P is a multiplication by the
// reciprocal here (the same value within a rounding).
//
// Init (the reference's _reset_parameters): sampling_offsets.weight 0 and
// its bias, per head m, the direction (cos, sin)(2 pi m / M) divided by its
// largest absolute coordinate, times (point index + 1), the same for every
// level; attention_weights weight and bias 0 (uniform weights over the L*P
// points); value_proj and output_proj Xavier-uniform weights, zero biases.
// Parameters:
//   prefix.sampling_offsets.{weight,bias}   (M*L*P*2, C), (M*L*P*2)
//   prefix.attention_weights.{weight,bias}  (M*L*P, C), (M*L*P)
//   prefix.value_proj.{weight,bias}         (C, C), (C)
//   prefix.output_proj.{weight,bias}        (C, C), (C)
// Not here: the reference's lower learning rate for the offsets (an
// optimizer matter), dropout (MSDeformAttn has none).
#ifndef CT_NN_DEFORM_ATTN_H
#define CT_NN_DEFORM_ATTN_H

#include "nn/linear.h"

typedef struct ct_nn_ms_deform_attn {
  ct_nn_linear sampling_offsets;   // C -> M*L*P*2
  ct_nn_linear attention_weights;  // C -> M*L*P
  ct_nn_linear value_proj;         // C -> C
  ct_nn_linear output_proj;        // C -> C
  int64_t d_model, n_levels, n_heads, n_points;
} ct_nn_ms_deform_attn;

// d_model divisible by n_heads; every size >= 1.
ct_status ct_nn_ms_deform_attn_init(ct_nn_ms_deform_attn *m, ct_params *p,
                                    const char *prefix, int64_t d_model,
                                    int64_t n_levels, int64_t n_heads,
                                    int64_t n_points, ct_rng *init_rng);

// query (N, Lq, C), reference_points (N, Lq, L, 2) or (N, Lq, L, 4),
// input_flatten (N, S, C), shapes L pairs (H_l, W_l) as for
// ct_ms_deform_attn, padding_mask (N, S) i32 or f32, nonzero at padded rows,
// or NULL -> (N, Lq, C).
ct_tensor *ct_nn_ms_deform_attn_forward(const ct_nn_ms_deform_attn *m,
                                        ct_tensor *query,
                                        ct_tensor *reference_points,
                                        ct_tensor *input_flatten,
                                        const int64_t *shapes,
                                        const ct_tensor *padding_mask);

#endif
