// CvT, the Convolutional vision Transformer (Wu et al. 2021), with the
// module layout and parameter names of the reference code (microsoft/CvT,
// lib/models/cls_cvt.py), so that an exported checkpoint loads strictly into
// a PyTorch twin of it.
//
// The classifier, for images x (B, C_in, H, W):
//   for each stage i:
//     x = stage_i.patch_embed.proj(x)             Conv2d(k_i, stride s_i, pad p_i)
//     t = stage_i.patch_embed.norm(tokens of x)   LayerNorm over the D_i channels
//     t = [stage_i.cls_token; t]                  the last stage only, if asked
//     t = blocks of stage i on the (h_i, w_i) map; x = the map of t (no cls)
//   logits = head(norm(cls token))        (with a class token)
//   logits = head(mean over tokens of norm(t))   (without)
// There is no position embedding: the convolutions place the tokens.
//
// Block, on tokens x (B, [1 +] h*w, D), pre-norm:
//   x = x + drop_path(proj_drop(proj(attention(norm1(x)))))
//   x = x + drop_path(mlp(norm2(x)))          (fc1, QuickGELU, fc2)
// attention, projection dw_bn (the reference's 'dw_bn'): the class token is
// split off, the h x w token map goes through
//   conv_proj_q: depthwise 3x3 conv (groups = D, no bias, pad 1, stride 1)
//                then BatchNorm2d, flattened back to tokens
//   conv_proj_k, conv_proj_v: the same with stride 2 (ceil(h/2) x ceil(w/2))
// the class token is put back in front of each, then q = proj_q(.), k =
// proj_k(.), v = proj_v(.) (Linear D -> D) and per-head
//   softmax(q k^T * scale) v -> (B, T, D)
// Projection linear (the reference's 'linear', for the ablation): no
// convolution, q, k and v are proj_q, proj_k, proj_v of the tokens
// themselves (full resolution).
//
// The scale: the reference multiplies the scores by dim_out ** -0.5 with
// dim_out the full width D, not the head width D/NH as in ViT
// (CT_NN_CVT_SCALE_DIM, the default here); CT_NN_CVT_SCALE_HEAD uses
// (D/NH) ** -0.5. With several heads the reference's logits are thus
// sqrt(NH) times flatter than a ViT's.
//
// Parameters, in the order of the reference's state_dict ("stage{i}."):
//   cls_token (1, 1, D) (last stage, with a class token), trunc_normal(.02)
//   patch_embed.proj.{weight (D, C, k, k), bias (D)}   PyTorch's Conv2d init
//   patch_embed.norm.{weight, bias}
//   blocks.{j}.norm1.{weight, bias}
//   blocks.{j}.attn.conv_proj_{q,k,v}.conv.weight (D, 1, 3, 3) (Conv2d init)
//   blocks.{j}.attn.conv_proj_{q,k,v}.bn.{weight, bias, running_mean,
//     running_var}                                 (dw_bn only; nn/conv.h)
//   blocks.{j}.attn.proj_{q,k,v}.{weight (D, D), bias if qkv_bias}
//   blocks.{j}.attn.proj.{weight, bias}
//   blocks.{j}.norm2, blocks.{j}.mlp.fc1, blocks.{j}.mlp.fc2
// then norm.{weight, bias} and head.{weight (K, D), bias (K)}. Linear
// weights trunc_normal(.02) with zero biases (head: PyTorch's bias init, as
// the reference), norms ones and zeros, LayerNorm eps 1e-5. BatchNorm's
// num_batches_tracked is left out (nn/conv.h); PyTorch fills it in when it
// loads a state_dict without version metadata (one read from safetensors),
// so an export still loads with strict=True (tests/ref/interop.py).
//
// Dropout as the reference: `dropout` after the class token is joined
// (pos_drop), in proj_drop and in the MLP; `attn_dropout` on the attention
// weights; stochastic depth rising linearly over each stage's blocks from 0
// to the stage's drop_path rate (the reference's per-stage linspace).
//
// Not here: the reference's 'avg' projection, rectangular kernels, a class
// token in a stage before the last.
#ifndef CT_NN_CVT_H
#define CT_NN_CVT_H

#include "nn/conv.h"
#include "nn/mlp.h"
#include "nn/norm.h"

typedef enum ct_nn_cvt_projection {
  CT_NN_CVT_DW_BN,   // depthwise conv + BatchNorm, then Linear (the paper's)
  CT_NN_CVT_LINEAR,  // Linear only (the ablation)
} ct_nn_cvt_projection;

typedef enum ct_nn_cvt_scale {
  CT_NN_CVT_SCALE_DIM,   // dim ** -0.5, the reference's
  CT_NN_CVT_SCALE_HEAD,  // head_dim ** -0.5, ViT's
} ct_nn_cvt_scale;

typedef struct ct_nn_cvt_block_config {
  int64_t dim, heads;  // D, NH: D a multiple of NH
  int64_t h, w;        // the token map the block sees
  bool cls_token;      // a class token in front of the map's tokens
  ct_nn_cvt_projection projection;
  int stride_q, stride_kv;  // of the depthwise convs (reference: 1, 2)
  bool qkv_bias;            // biases in proj_q, proj_k, proj_v
  int64_t mlp_dim;          // hidden width of the MLP
  ct_nn_activation act;     // of the MLP (reference: CT_NN_QUICK_GELU)
  ct_nn_cvt_scale scale;
  float dropout;       // proj_drop and the MLP's
  float attn_dropout;  // on the attention weights
  float drop_path;     // stochastic depth of this block
} ct_nn_cvt_block_config;

// conv_proj_{q,k,v}: "conv" (depthwise, no bias) then "bn".
typedef struct ct_nn_cvt_conv_proj {
  ct_nn_conv2d conv;
  ct_nn_batchnorm2d bn;
} ct_nn_cvt_conv_proj;

typedef struct ct_nn_cvt_block {
  ct_nn_cvt_block_config cfg;
  ct_nn_layernorm norm1, norm2;
  ct_nn_cvt_conv_proj conv_q, conv_k, conv_v;  // dw_bn only
  ct_nn_linear proj_q, proj_k, proj_v, proj;
  ct_nn_mlp mlp;
  float scale;  // the attention scale used
} ct_nn_cvt_block;

// Checks the config (CT_ERR_ARG naming the field) and registers the
// parameters under `prefix`.
ct_status ct_nn_cvt_block_init(ct_nn_cvt_block *m, ct_params *p,
                               const char *prefix,
                               const ct_nn_cvt_block_config *cfg,
                               ct_rng *init_rng);
// x (B, [1 +] h*w, D) -> the same shape. Dropout sites (nn/module.h), in
// order: attention weights, proj_drop, drop path, MLP (two), drop path.
// BatchNorm trains (batch statistics, running statistics updated) when ctx
// is training.
ct_tensor *ct_nn_cvt_block_forward(const ct_nn_cvt_block *m, ct_nn_ctx *ctx,
                                   ct_tensor *x);

enum { CT_NN_CVT_MAX_STAGES = 4 };

typedef struct ct_nn_cvt_config {
  int64_t image_h, image_w, in_channels;
  int stages;                                   // 1..CT_NN_CVT_MAX_STAGES
  int64_t embed_kernel[CT_NN_CVT_MAX_STAGES];   // the token embedding's conv
  int64_t embed_stride[CT_NN_CVT_MAX_STAGES];   //   (reference CvT-13: 7/3/3,
  int64_t embed_padding[CT_NN_CVT_MAX_STAGES];  //   4/2/2, 2/1/1)
  int64_t dims[CT_NN_CVT_MAX_STAGES];           // D per stage
  int64_t depths[CT_NN_CVT_MAX_STAGES];         // blocks per stage
  int64_t heads[CT_NN_CVT_MAX_STAGES];          // heads per stage
  float drop_path[CT_NN_CVT_MAX_STAGES];  // each stage's last block's rate
  float mlp_ratio;                        // MLP hidden = (int)(D * ratio)
  bool cls_token;                         // in the last stage; else mean pool
  ct_nn_cvt_projection projection;
  int stride_q, stride_kv;  // reference: 1, 2
  bool qkv_bias;            // reference CvT-13: true
  ct_nn_activation act;     // reference: CT_NN_QUICK_GELU
  ct_nn_cvt_scale scale;
  int64_t num_classes;
  float dropout, attn_dropout;
} ct_nn_cvt_config;

typedef struct ct_nn_cvt_stage {
  ct_tensor *cls_token;        // (1, 1, D) or NULL
  ct_nn_conv2d embed;          // "patch_embed.proj"
  ct_nn_layernorm embed_norm;  // "patch_embed.norm"
  ct_nn_cvt_block *blocks;
  int64_t depth, dim, h, w;  // the stage's token map
} ct_nn_cvt_stage;

typedef struct ct_nn_cvt {
  ct_nn_cvt_config cfg;
  ct_nn_cvt_stage stages[CT_NN_CVT_MAX_STAGES];  // "stage{i}.*"
  ct_nn_layernorm norm;                          // "norm.*"
  ct_nn_linear head;                             // "head.*"
} ct_nn_cvt;

// Checks the config (CT_ERR_ARG naming the field and the sizes: every
// stage's map must be at least 1x1) and registers the parameters under
// `prefix` in the reference's order. _free releases the block arrays (call
// it after a failed init too).
ct_status ct_nn_cvt_init(ct_nn_cvt *m, ct_params *p, const char *prefix,
                         const ct_nn_cvt_config *cfg, ct_rng *init_rng);
void ct_nn_cvt_free(ct_nn_cvt *m);
// x (B, C_in, H, W) -> logits (B, K). ctx NULL
// or not training: evaluation (BatchNorm on its running statistics).
// With ctx->attention set (nn/module.h), each block records its per-head
// weights (B, NH, Nq, Nk), groups 1, computed beside the fused kernel (the
// logits keep their bits), with its tokens' places in image pixels: token
// (r, c) of a stage's h x w map at ((r + 0.5) H/h, (c + 0.5) W/w); key
// (r', c') of the strided k/v map where the centre of its 3x3 conv window
// lies on the map (map token (stride_kv r', stride_kv c')); the class
// token NAN. With the linear projection the keys are the map's tokens.
ct_tensor *ct_nn_cvt_forward(const ct_nn_cvt *m, ct_nn_ctx *ctx, ct_tensor *x);

// Attention rollout (Abnar & Zuidema 2020) carried through the convolutions,
// down to the first stage's token grid. It starts from what the head reads:
// the class token's one-hot row, or without one every token of the last map
// alike (the mean pool). Each block, backwards: row <- row/2 (the residual,
// on the query tokens) + (row A)/2, A the head-mean weights from query to
// key tokens, each key's share spread over the map tokens in its depthwise
// conv window (clipped to the map; the class key's share to the class
// token). At a stage's start the class token's share is dropped (it is a
// parameter, not image content) and each map token's is spread over the
// previous map's tokens in its embedding conv window (clipped). A window's
// share goes to its tokens inversely to how many windows cover each (where
// stride-2 windows overlap, every second row and column, a token would
// otherwise collect twice: a lattice in the maps).
// Approximations: a conv window mixes its tokens with learned, unequal
// weights (and BatchNorm), not by coverage; and the query conv's
// neighbourhood is left out (it shapes the
// weights, it carries no content). As for ViT and Swin the MLPs, token by
// token, are left out. log->layers[first..] are the blocks' records of one
// ct_nn_cvt_forward; out (B, h0 * w0), stage 0's map, scaled so each
// image's maximum is 1. CT_ERR_SHAPE when the log does not fit the model.
ct_status ct_nn_cvt_rollout(const ct_nn_cvt *m, const ct_nn_attention_log *log,
                            int first, float *out);

#endif
