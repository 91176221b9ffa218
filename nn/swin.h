// Swin Transformer (Liu et al. 2021) with the parameter names of timm's
// swin_transformer.py: the shifted-window block, patch merging, and the
// classifier built from them. A stage is blocks alternating plain and
// shifted windows, after a patch merging for every stage but the first
// (timm's layers.N.downsample, at the start of the stage as in timm >= 0.9;
// older timm put it at the end of the previous stage, under that stage's
// name).
//
// The classifier, for images x (B, C_in, H, W), as timm's SwinTransformer:
//   x = patch_embed.norm(patch_embed.proj(x)) as a (B, H/P, W/P, C) map
//   x = layers.0 ... layers.S-1 (stage i: width C * 2^i, heads[i])
//   logits = head.fc(dropout(mean over the map of norm(x)))
// Blocks' drop path rates rise linearly from 0 over all blocks (timm's
// linspace(0, drop_path, sum(depths))). No absolute position embedding
// (timm's default), no dropout after the patch embedding (timm >= 0.9).
//
// Block, on a token map x (B, H, W, C), pre-norm as timm's
// SwinTransformerBlock:
//   x = x + drop_path(proj_drop(window_attention(norm1(x))))
//   x = x + drop_path(mlp(norm2(x)))          (fc1, exact GELU, fc2)
// window_attention: roll the map by (-s, -s) (shifted blocks, s = ws/2), cut
// into ws x ws windows, qkv -> per-head softmax(q k^T / sqrt(Dh) + relative
// position bias + shifted-window mask) v -> proj, windows back, roll back.
// Both residual branches are per token, so the whole block runs in window
// order (autograd/ops_window.h: one partition in, one reverse out) and the
// residual adds fold into proj and fc2 when nothing drops.
//
// Parameters ("prefix." + name), in timm's registration order:
//   norm1.{weight,bias} (C)
//   attn.relative_position_bias_table ((2ws-1)^2, NH)  trunc_normal(.02)
//   attn.qkv.{weight (3C, C), bias (3C)}, attn.proj.{weight (C, C), bias}
//   norm2.{weight,bias}, mlp.fc1.{weight (M, C), bias}, mlp.fc2.{weight, bias}
// Patch merging ("prefix." + name): norm.{weight,bias} (4C),
//   reduction.weight (C_out, 4C), no bias.
// Linear weights trunc_normal(.02) with zero biases, LayerNorms ones and
// zeros with eps 1e-5 (timm's nn.LayerNorm).
//
// When the map is no larger than the window, the window is the map and
// there is no shift (timm's rule); the map must then be square. Otherwise H
// and W must be multiples of the window (no padding here).
//
// Not here: padding maps to a multiple of the window (the image and the
// patch must give a map every stage can cut), non-square windows.
#ifndef CT_NN_SWIN_H
#define CT_NN_SWIN_H

#include "nn/mlp.h"
#include "nn/norm.h"
#include "nn/timm.h"

typedef struct ct_nn_swin_block_config {
  int64_t dim, heads;  // C, NH: C a multiple of NH
  int64_t H, W;        // the token map the block sees
  int64_t window;      // ws asked for (timm's window_size)
  bool shifted;        // shift by ws/2 (every second block of a stage)
  int64_t mlp_dim;     // hidden width of the MLP (mlp_ratio * C)
  float dropout;       // proj_drop and the MLP's drop
  float attn_dropout;  // on the attention weights
  float drop_path;     // stochastic depth of this block
} ct_nn_swin_block_config;

typedef struct ct_nn_swin_block {
  ct_nn_layernorm norm1, norm2;
  ct_tensor *relative_position_bias_table;  // ((2ws-1)^2, NH)
  ct_nn_linear qkv, proj;                   // "attn.qkv", "attn.proj"
  ct_nn_mlp mlp;
  int64_t dim, heads, H, W;
  int64_t window, shift;  // as used: after the map-size rule
  float dropout, attn_dropout, drop_path;
} ct_nn_swin_block;

// Checks the config (CT_ERR_ARG naming the field) and registers the
// parameters under `prefix`.
ct_status ct_nn_swin_block_init(ct_nn_swin_block *m, ct_params *p,
                                const char *prefix,
                                const ct_nn_swin_block_config *cfg,
                                ct_rng *init_rng);
// x (B, H, W, C) -> (B, H, W, C). Dropout sites (nn/module.h), in order:
// attention weights, proj dropout, drop path, MLP (two), drop path.
ct_tensor *ct_nn_swin_block_forward(const ct_nn_swin_block *m, ct_nn_ctx *ctx,
                                    ct_tensor *x);

typedef struct ct_nn_patch_merging {
  ct_nn_layernorm norm;    // "norm", 4C
  ct_nn_linear reduction;  // "reduction", 4C -> C_out, no bias
  int64_t dim, out_dim;
} ct_nn_patch_merging;

ct_status ct_nn_patch_merging_init(ct_nn_patch_merging *m, ct_params *p,
                                   const char *prefix, int64_t dim,
                                   int64_t out_dim, ct_rng *init_rng);
// x (B, H, W, C), H and W even -> (B, H/2, W/2, C_out)
ct_tensor *ct_nn_patch_merging_forward(const ct_nn_patch_merging *m,
                                       ct_tensor *x);

enum { CT_NN_SWIN_MAX_STAGES = 4 };

typedef struct ct_nn_swin_config {
  int64_t image_h, image_w, in_channels;
  int64_t patch;                          // P: the map is (H/P, W/P)
  int64_t embed_dim;                      // C of stage 0; stage i has C * 2^i
  int stages;                             // 1..CT_NN_SWIN_MAX_STAGES
  int64_t depths[CT_NN_SWIN_MAX_STAGES];  // blocks per stage
  int64_t heads[CT_NN_SWIN_MAX_STAGES];   // heads per stage
  int64_t window;                         // ws asked for
  float mlp_ratio;                        // MLP hidden = (int)(dim * ratio)
  int64_t num_classes;
  float dropout;       // proj_drop, the MLPs' drop, and before head.fc
  float attn_dropout;  // on the attention weights
  float drop_path;     // stochastic depth of the last block
} ct_nn_swin_config;

typedef struct ct_nn_swin_stage {
  bool has_downsample;  // every stage but the first
  ct_nn_patch_merging downsample;
  ct_nn_swin_block *blocks;
  int64_t depth, H, W, dim;  // the map and width of the stage's blocks
} ct_nn_swin_stage;

typedef struct ct_nn_swin {
  ct_nn_swin_config cfg;
  ct_nn_patch_proj patch_embed;                    // "patch_embed.proj.*"
  ct_nn_layernorm patch_norm;                      // "patch_embed.norm.*"
  ct_nn_swin_stage stages[CT_NN_SWIN_MAX_STAGES];  // "layers.N.*"
  ct_nn_layernorm norm;                            // "norm.*"
  ct_nn_linear head;                               // "head.fc.*"
} ct_nn_swin;

// Checks the config (CT_ERR_ARG naming the field and the sizes) and
// registers the parameters under `prefix` in timm's order. _free releases
// the block arrays (call it after a failed init too).
ct_status ct_nn_swin_init(ct_nn_swin *m, ct_params *p, const char *prefix,
                          const ct_nn_swin_config *cfg, ct_rng *init_rng);
void ct_nn_swin_free(ct_nn_swin *m);
// x (B, C_in, H, W) -> logits (B, K). x itself gets no gradient. With
// ctx->attention set (nn/module.h), each block records its per-head window
// weights (B*nW, NH, N, N) with its tokens' places in image pixels (the
// roll undone), computed beside the fused kernel.
ct_tensor *ct_nn_swin_forward(const ct_nn_swin *m, ct_nn_ctx *ctx,
                              ct_tensor *x);

// Attention rollout (Abnar & Zuidema 2020) for a model without a class
// token: the average pool's row (every token of the last map alike) carried
// back through each block's A' = (head-mean weights + I) / 2 on the map,
// and through each patch merging (a merged token is a quarter from each of
// its 2x2 neighbours), down to the patch grid. log->layers[first..] are the
// blocks' records of one ct_nn_swin_forward; out (B, H/P * W/P), scaled so
// each image's maximum is 1.
ct_status ct_nn_swin_rollout(const ct_nn_swin *m,
                             const ct_nn_attention_log *log, int first,
                             float *out);

#endif
