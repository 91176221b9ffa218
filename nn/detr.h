// DETR (Carion et al. 2020, "End-to-End Object Detection with
// Transformers"): a CNN backbone, a transformer encoder-decoder with fixed
// 2-D sine positional encodings and learned object queries, class and box
// heads on every decoder layer, and the set loss over Hungarian matches.
// Parameter names are those of the reference (facebookresearch/detr,
// models/detr.py and models/transformer.py):
//
//   backbone.0.body.*          the ResNet (nn/resnet.h) without its fc, as
//                              the reference's Backbone body
//   input_proj.{weight,bias}   1x1 conv, backbone channels -> d_model
//   query_embed.weight         (N, d_model), N(0, 1) (nn.Embedding)
//   transformer.encoder.layers.i.{self_attn,linear1,linear2,norm1,norm2}.*
//   transformer.decoder.layers.i.{self_attn,multihead_attn,linear1,linear2,
//                                 norm1,norm2,norm3}.*
//   transformer.decoder.norm.*
//   class_embed.*              Linear d_model -> K + 1 (last: no object)
//   bbox_embed.layers.{0,1,2}.* MLP d -> d -> d -> 4, ReLU between
//
// Dimension letters: B images, C channels, H W image size, h w the backbone
// map's size, S = h w memory tokens, d d_model, N queries, K classes, L
// decoder layers, T target boxes.
//
// The forward pass, for images (B, C, H, W):
//   src = input_proj(backbone(images)) flattened to (B, S, d) (row-major
//   over h, w); pos = the sine encoding of the (h, w) grid (S, d);
//   encoder layer (post-norm):  q = k = x + pos
//     x = norm1(x + dropout(self_attn(q, k, v = x)))
//     x = norm2(x + dropout(linear2(dropout(relu(linear1(x))))))
//   decoder: tgt = 0 (B, N, d), query_pos = query_embed.weight; per layer
//     t = norm1(t + dropout(self_attn(t + query_pos, t + query_pos, t)))
//     t = norm2(t + dropout(multihead_attn(t + query_pos, memory + pos,
//                                          memory)))
//     t = norm3(t + dropout(feed-forward(t)))
//     hs_l = decoder.norm(t)                 (return_intermediate)
//   logits_l = class_embed(hs_l), boxes_l = sigmoid(bbox_embed(hs_l)).
// Dropout sites per pass, in order: every encoder layer's four (attention
// weights, dropout1, feed-forward, dropout2), then every decoder layer's six
// (self-attention weights, dropout1, cross-attention weights, dropout2,
// feed-forward, dropout3), as nn/transformer.h.
//
// Init as the reference: the backbone as nn/resnet.h; every transformer
// parameter with 2 or more dims redrawn xavier_uniform (Transformer's
// _reset_parameters); class_embed, bbox_embed and input_proj PyTorch's
// Linear/Conv2d defaults; query_embed N(0, 1). query_embed is NO_DECAY, as
// the learned tokens of the other models (nn/module.h); the reference decays
// it (its AdamW has one parameter group).
//
// Not here: padding masks (every image of a batch has the same size), the
// reference's frozen BatchNorm and dilated backbones, the segmentation head,
// pre-norm layers (normalize_before), post-processing to image coordinates.
#ifndef CT_NN_DETR_H
#define CT_NN_DETR_H

#include "nn/conv.h"
#include "nn/hungarian.h"
#include "nn/resnet.h"
#include "nn/transformer.h"

// Most decoder layers a model may have (the reference uses 6).
enum { CT_NN_DETR_MAX_LAYERS = 32 };

typedef struct ct_nn_detr_config {
  int64_t in_channels;     // image channels
  int64_t num_classes;     // K object classes (the head has K + 1)
  int64_t backbone_width;  // the ResNet's layer1 channels
  int backbone_stages;     // its stages (map stride 2^(stages-1))
  int backbone_blocks;     // BasicBlocks per stage
  int64_t d_model;         // must be even and a multiple of nhead
  int64_t nhead;
  int enc_layers;  // >= 1
  int dec_layers;  // 1 .. CT_NN_DETR_MAX_LAYERS
  int64_t dim_feedforward;
  float dropout;        // every transformer dropout
  int64_t num_queries;  // N
  bool aux_loss;        // heads on every decoder layer, not only the last
} ct_nn_detr_config;

typedef struct ct_nn_detr_mlp {
  ct_nn_linear layers[3];  // "prefix.layers.{0,1,2}"
} ct_nn_detr_mlp;

typedef struct ct_nn_detr {
  ct_nn_detr_config cfg;
  ct_nn_resnet backbone;  // fc left unregistered (zeroed)
  ct_nn_conv2d input_proj;
  ct_tensor *query_embed;  // (N, d)
  ct_nn_encoder encoder;   // no final norm (post-norm DETR)
  ct_nn_decoder decoder;   // with its final norm
  ct_nn_transformer_config tcfg;
  ct_nn_linear class_embed;   // d -> K + 1
  ct_nn_detr_mlp bbox_embed;  // d -> d -> d -> 4
} ct_nn_detr;

// Checks the config (CT_ERR_ARG naming the field) and registers the
// parameters under `prefix` (usually ""). _free releases the layer arrays.
ct_status ct_nn_detr_init(ct_nn_detr *m, ct_params *p, const char *prefix,
                          const ct_nn_detr_config *cfg, ct_rng *init_rng);
void ct_nn_detr_free(ct_nn_detr *m);

// The outputs of one forward pass: layers = dec_layers with aux_loss, else
// 1; entry layers - 1 is the final prediction, the others the auxiliary
// ones of the earlier decoder layers in order.
typedef struct ct_nn_detr_out {
  int layers;
  ct_tensor *logits[CT_NN_DETR_MAX_LAYERS];  // (B, N, K + 1)
  ct_tensor *boxes[CT_NN_DETR_MAX_LAYERS];   // (B, N, 4) cxcywh in (0, 1)
} ct_nn_detr_out;

// images (B, C, H, W) -> *out. CT_ERR_SHAPE for images of the wrong shape;
// otherwise the status of the ops (errors keep their message).
ct_status ct_nn_detr_forward(const ct_nn_detr *m, ct_nn_ctx *ctx,
                             ct_tensor *images, ct_nn_detr_out *out);

// PositionEmbeddingSine(num_pos_feats = d/2, temperature 10000,
// normalize = True, scale 2 pi) of an unpadded (h, w) map, as (h w, d) in
// token order (row-major over h, w). With F = d/2, for the pixel (y, x):
//   ey = (y + 1) / (h + 1e-6) * 2 pi,  ex = (x + 1) / (w + 1e-6) * 2 pi,
//   channel j < F:      f(ey, j);   channel F + j:  f(ex, j),
//   f(e, j) = sin(e / 10000^(2 floor(j/2) / F)) for even j, cos for odd j.
// Computed in double; arena, no gradient. d must be even and positive.
ct_tensor *ct_nn_detr_position_sine(int64_t h, int64_t w, int64_t d);
// The same with Deformable DETR's offset (-0.5 there): ey = (y + 1 +
// offset) / (h + 1e-6) * 2 pi, likewise ex.
ct_tensor *ct_nn_position_sine_offset(int64_t h, int64_t w, int64_t d,
                                      double offset);

// ---- the set loss (the reference's SetCriterion) -----------------------------

// Targets of a batch, concatenated image by image as a data loader gives
// them: image b owns counts[b] objects, starting after those of images < b.
typedef struct ct_nn_detr_targets {
  int batch;              // B
  const int *counts;      // (B) objects per image, >= 0
  const int32_t *labels;  // (T) classes in [0, K)
  const float *boxes;     // (T, 4) cxcywh normalized by the image size
} ct_nn_detr_targets;

typedef struct ct_nn_detr_loss_opts {
  ct_nn_detr_cost_weights match;  // the matcher's cost weights (1, 5, 2)
  double ce_w, bbox_w, giou_w;    // the loss weights (1, 5, 2)
  double eos_coef;                // CE weight of the no-object class (0.1)
  // match.focal selects the focal class loss as well (see ct_nn_detr_loss).
} ct_nn_detr_loss_opts;

// The reference's defaults (main.py): set_cost_* 1, 5, 2; *_loss_coef 1, 5,
// 2; eos_coef 0.1.
ct_nn_detr_loss_opts ct_nn_detr_loss_defaults(void);

// The unweighted terms of the final layer's loss.
typedef struct ct_nn_detr_loss_parts {
  double ce, bbox, giou;
  int num_boxes;  // the normalizer: max(1, T)
} ct_nn_detr_loss_parts;

// The DETR loss of the first `layers` entries of out (all of them is
// out->layers; the last one used is taken as the final output), a scalar:
//   sum over layers l of  ce_w CE_l + bbox_w L1_l + giou_w GIoU_l,
// with, per layer, queries matched to targets image by image by
// ct_nn_detr_match on softmax(logits) and the boxes (no gradient through the
// matching), and
//   CE_l   = cross-entropy over all B N queries, target class the matched
//            label or K (no object), class weights 1 except eos_coef for K,
//            PyTorch's weighted mean (sum w_y nll / sum w_y);
//   L1_l   = sum over matched pairs of |box - target|_1 / num_boxes;
//   GIoU_l = sum over matched pairs of (1 - GIoU(xyxy)) / num_boxes;
//   num_boxes = max(1, T) over the whole batch.
// With opts->match.focal (Deformable DETR's SetCriterion), logits are
// (B, N, K) without a "no object" class, matched on sigmoid probabilities
// with the focal class cost (nn/hungarian.h), and CE_l is replaced by
//   sum over all B N K of ct_sigmoid_focal_loss(logits, one-hot targets,
//   focal_alpha, focal_gamma) / num_boxes
// (the reference's mean over queries times N); eos_coef is unused.
// Images without targets add only their CE. parts (may be NULL) receives
// the terms of the last layer used. opts NULL = defaults. NULL with an error
// for bad shapes, labels outside [0, K), boxes with negative sides, or
// non-finite predictions (from the matcher).
ct_tensor *ct_nn_detr_loss(const ct_nn_detr_out *out, int layers,
                           const ct_nn_detr_targets *targets,
                           const ct_nn_detr_loss_opts *opts,
                           ct_nn_detr_loss_parts *parts);

#endif
