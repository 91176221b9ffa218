// Deformable DETR (Zhu et al. 2021, "Deformable DETR: Deformable
// Transformers for End-to-End Object Detection"): DETR whose attention over
// the image looks at a few sampled points around a reference point on
// several feature scales (nn/deform_attn.h), with a focal class loss and
// boxes predicted relative to the reference points. Parameter names are
// those of the reference (fundamentalvision/Deformable-DETR,
// models/deformable_detr.py and models/deformable_transformer.py):
//
//   backbone.0.body.*            the ResNet (nn/resnet.h), no fc
//   input_proj.l.0.{weight,bias} level l's projection to d_model: a 1x1 conv
//                                of a backbone stage, or (extra levels) a
//                                3x3 stride-2 conv of the previous map
//   input_proj.l.1.{weight,bias} GroupNorm(32, d_model)
//   transformer.level_embed      (L, d)
//   transformer.encoder.layers.i.{self_attn (MSDeformAttn), norm1, linear1,
//                                 linear2, norm2}.*
//   transformer.decoder.layers.i.{cross_attn (MSDeformAttn), norm1,
//                                 self_attn (in_proj_weight, in_proj_bias,
//                                 out_proj.*), norm2, linear1, linear2,
//                                 norm3}.*
//   transformer.reference_points.{weight,bias}   Linear d -> 2
//   query_embed.weight           (N, 2d): [query_pos | target] halves
//   class_embed.j.{weight,bias}  Linear d -> K (no "no object" class)
//   bbox_embed.j.layers.{0,1,2}.*  MLP d -> d -> d -> 4
// with j = 0 .. dec_layers - 1 under box_refine (one head per decoder
// layer), else j = 0 only: the reference shares one head among the layers
// (its state_dict repeats it as class_embed.1, ...; with box_refine it also
// repeats bbox_embed as transformer.decoder.bbox_embed.*), which a PyTorch
// twin fills from entry 0.
//
// Dimension letters: B images, d d_model, L feature levels, (h_l, w_l)
// level l's map, S = sum h_l w_l tokens, N queries, K classes.
//
// Levels: the last Lb = min(L, 3, stages) stages of the backbone (as the
// reference's layer2..4, strides 8, 16, 32), each through a 1x1 conv and
// GroupNorm; then L - Lb extra levels, the first a 3x3 stride-2 conv of the
// last stage's map, each further one of the previous extra level's
// (normalized) map, each with GroupNorm. A level's tokens are its map
// flattened row-major; levels are concatenated in order.
//
// Forward, images (B, C, H, W) (no padding: valid ratios 1):
//   pos = sine positions per level (normalize, scale 2 pi, offset -0.5:
//         ey = (y + 0.5) / (h + 1e-6) 2 pi) + level_embed[l]
//   encoder layer (post-norm), ref = pixel centres ((x + 0.5) / w_l,
//         (y + 0.5) / h_l), the same on every level:
//     x = norm1(x + dropout(self_attn(x + pos, ref, x)))
//     x = norm2(x + dropout(linear2(dropout(relu(linear1(x))))))
//   decoder: query_pos, tgt = the halves of query_embed; ref0 =
//   sigmoid(reference_points(query_pos)) (B, N, 2); per layer
//     t = norm2(t + dropout(self_attn(t + query_pos, t + query_pos, t)))
//     t = norm1(t + dropout(cross_attn(t + query_pos, ref, memory)))
//     t = norm3(t + dropout(linear2(dropout(relu(linear1(t))))))
//     logits_i = class_embed(t)
//     boxes_i  = sigmoid(bbox_embed(t) + inverse_sigmoid(ref)), ref's
//                inverse added to (cx, cy) only when ref is 2-d
//   box_refine: after layer i, ref = boxes_i detached (4-d from then on),
//   with layer i's own heads; else ref stays ref0 (not detached).
// inverse_sigmoid clamps at eps 1e-5 (autograd/ops.h). Dropout sites per
// pass: every encoder layer's three (attention residual, feed-forward,
// feed-forward residual), then every decoder layer's five
// (self-attention weights, its residual, cross-attention residual,
// feed-forward, its residual).
//
// Init as the reference: the backbone as nn/resnet.h; every transformer
// parameter of 2 or more dims xavier_uniform except MSDeformAttn's, which
// keep their own reset (nn/deform_attn.h); reference_points xavier, bias 0;
// level_embed N(0, 1); input_proj convs xavier, bias 0, GroupNorm 1 and 0;
// class_embed Linear's default weight, bias -log((1 - 0.01) / 0.01) (prior
// probability 0.01); bbox_embed's last layer 0 with bias (0, 0, -2, -2) on
// head 0 (the clones of box_refine are copies of head 0 before that
// bias, as the reference's deepcopy); query_embed N(0, 1). query_embed and
// level_embed are NO_DECAY, as the learned tokens of the other models.
//
// The reference's 0.1x learning rates of the backbone, sampling_offsets
// and reference_points are the optimizer's (optim/optim.h lr multipliers;
// the detection task's default [optim] lr_mult for this arch).
//
// Not here: padding masks, two-stage proposals, frozen BatchNorm,
// the top-100 over (query, class) pairs of its PostProcess (the task keeps
// one class per query).
#ifndef CT_NN_DEFORMABLE_DETR_H
#define CT_NN_DEFORMABLE_DETR_H

#include "nn/deform_attn.h"
#include "nn/detr.h"
#include "nn/multihead_attention.h"
#include "nn/norm.h"

enum {
  CT_NN_DDETR_MAX_LEVELS = 8,
  CT_NN_DDETR_BACKBONE_LEVELS = 3,  // the most backbone stages used
  CT_NN_DDETR_GROUPS = 32           // GroupNorm's groups
};

typedef struct ct_nn_ddetr_config {
  int64_t in_channels;     // image channels
  int64_t num_classes;     // K
  int64_t backbone_width;  // the ResNet's layer1 channels
  int backbone_stages;
  int backbone_blocks;
  int64_t d_model;  // a multiple of 32 (GroupNorm) and of nhead
  int64_t nhead;
  int enc_layers;  // >= 1
  int dec_layers;  // 1 .. CT_NN_DETR_MAX_LAYERS
  int64_t dim_feedforward;
  float dropout;
  int64_t num_queries;
  int n_levels;  // 1 .. CT_NN_DDETR_MAX_LEVELS
  int n_points;  // sampling points per level and head, >= 1
  bool aux_loss;
  bool box_refine;
} ct_nn_ddetr_config;

typedef struct ct_nn_ddetr_enc_layer {
  ct_nn_ms_deform_attn self_attn;
  ct_nn_layernorm norm1, norm2;
  ct_nn_linear linear1, linear2;
} ct_nn_ddetr_enc_layer;

typedef struct ct_nn_ddetr_dec_layer {
  ct_nn_ms_deform_attn cross_attn;
  ct_nn_mha self_attn;
  ct_nn_layernorm norm1, norm2, norm3;
  ct_nn_linear linear1, linear2;
} ct_nn_ddetr_dec_layer;

typedef struct ct_nn_deformable_detr {
  ct_nn_ddetr_config cfg;
  ct_nn_resnet backbone;
  int backbone_levels;                              // Lb (see above)
  ct_nn_conv2d input_conv[CT_NN_DDETR_MAX_LEVELS];  // input_proj.l.0
  ct_tensor *gn_weight[CT_NN_DDETR_MAX_LEVELS];     // input_proj.l.1
  ct_tensor *gn_bias[CT_NN_DDETR_MAX_LEVELS];
  ct_tensor *level_embed;         // (L, d)
  ct_nn_ddetr_enc_layer *enc;     // enc_layers
  ct_nn_ddetr_dec_layer *dec;     // dec_layers
  ct_nn_linear reference_points;  // d -> 2
  ct_tensor *query_embed;         // (N, 2d)
  int heads;                      // dec_layers with box_refine, else 1
  ct_nn_linear class_embed[CT_NN_DETR_MAX_LAYERS];
  ct_nn_detr_mlp bbox_embed[CT_NN_DETR_MAX_LAYERS];
} ct_nn_deformable_detr;

// Checks the config (CT_ERR_ARG naming the field and the rule) and
// registers the parameters under `prefix` (usually ""). _free releases the
// layer arrays.
ct_status ct_nn_ddetr_init(ct_nn_deformable_detr *m, ct_params *p,
                           const char *prefix, const ct_nn_ddetr_config *cfg,
                           ct_rng *init_rng);
void ct_nn_ddetr_free(ct_nn_deformable_detr *m);

// images (B, C, H, W) -> *out: logits (B, N, K) (sigmoid scores, no "no
// object" column) and boxes (B, N, 4) cxcywh in (0, 1), for every decoder
// layer with aux_loss (the last entry the final one), else the last only.
// Train with ct_nn_detr_loss and ct_nn_ddetr_loss_defaults' options.
ct_status ct_nn_ddetr_forward(const ct_nn_deformable_detr *m, ct_nn_ctx *ctx,
                              ct_tensor *images, ct_nn_detr_out *out);

// The reference's loss options (main.py): matching and loss weights class
// 2, L1 5, GIoU 2; focal alpha 0.25, gamma 2.
ct_nn_detr_loss_opts ct_nn_ddetr_loss_defaults(void);

#endif
