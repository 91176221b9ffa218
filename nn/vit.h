// Vision Transformer (ViT) and its distilled variant (DeiT), with the
// parameter names of timm's VisionTransformer / VisionTransformerDistilled:
//
//   patch_embed.proj.weight (D, C, P, P), patch_embed.proj.bias (D)
//   cls_token (1, 1, D), dist_token (1, 1, D) (DeiT only)
//   pos_embed (1, tokens, D)       tokens = patches + 1 (+ 1 for DeiT)
//   blocks.N.norm1.*, blocks.N.attn.qkv.* (3D, D), blocks.N.attn.proj.*,
//   blocks.N.norm2.*, blocks.N.mlp.fc1.*, blocks.N.mlp.fc2.*
//   norm.*, head.*, head_dist.* (DeiT only)
//
// The forward pass, for images x (B, C, H, W):
//   patches = x cut into (H/P)(W/P) patches of C*P*P values, ordered as the
//             conv weight's (c, ky, kx), so the patch embedding, a P-strided
//             P x P conv, is one linear map: tokens = patches W^T + b;
//   x = [cls, (dist,) tokens] + pos_embed, dropout;
//   per block: x = x + drop_path(proj_drop(attn(norm1(x))))
//              x = x + drop_path(mlp(norm2(x)))     (pre-norm, exact GELU);
//   x = norm(x); logits = head(x[:, 0]) (and head_dist(x[:, 1]) for DeiT).
// LayerNorm eps is 1e-6, as timm's. Initialisation follows timm's defaults:
// trunc_normal(std .02) for pos_embed, the tokens and every Linear weight,
// zero biases, LayerNorm ones/zeros, the patch conv PyTorch's Conv2d default.
//
// Drop path (stochastic depth) drops a whole residual branch per sample with
// probability drop_path * N / (depth - 1) in block N (timm's linear rule) and
// scales kept branches by 1 / (1 - p); its per-sample mask draws from a
// dropout site of ctx (nn/module.h), so it is a pure function of (seed, step).
//
// What this file does not do: resize position embeddings to another image
// size, or hybrid (CNN-stem) ViTs.
#ifndef CT_NN_VIT_H
#define CT_NN_VIT_H

#include "nn/multihead_attention.h"
#include "nn/mlp.h"
#include "nn/norm.h"
#include "nn/timm.h"

typedef struct ct_nn_vit_config {
  int64_t image_h, image_w, in_channels;
  int64_t patch;        // P: image_h and image_w must be multiples of it
  int64_t dim;          // D
  int64_t depth;        // blocks
  int64_t heads;        // D must be a multiple of it
  int64_t mlp_dim;      // hidden width of the blocks' MLPs
  int64_t num_classes;  // 0: no head (a feature extractor, not distilled)
  bool distilled;       // DeiT: a distillation token and head_dist
  float dropout;        // after pos_embed, attention proj and MLP layers
  float attn_dropout;   // on the attention weights
  float drop_path;      // stochastic depth rate of the last block
} ct_nn_vit_config;

typedef struct ct_nn_vit_block {
  ct_nn_layernorm norm1, norm2;
  ct_nn_mha attn;  // in_proj = "attn.qkv", out_proj = "attn.proj"
  ct_nn_mlp mlp;
  float drop_path;
} ct_nn_vit_block;

typedef struct ct_nn_vit {
  ct_nn_vit_config cfg;
  int64_t patches, tokens;       // tokens = patches + 1 (+ 1 when distilled)
  ct_nn_patch_proj patch_embed;  // "patch_embed.proj.*"
  ct_tensor *cls_token, *dist_token, *pos_embed;
  ct_nn_vit_block *blocks;
  ct_nn_layernorm norm;
  ct_nn_linear head, head_dist;
} ct_nn_vit;

// Checks the config (CT_ERR_ARG naming the field) and registers the
// parameters under `prefix`. _free releases the block array.
ct_status ct_nn_vit_init(ct_nn_vit *m, ct_params *p, const char *prefix,
                         const ct_nn_vit_config *cfg, ct_rng *init_rng);
void ct_nn_vit_free(ct_nn_vit *m);

// x (B, C, H, W) -> the class head's logits (B, K). For a distilled model,
// *dist_logits (when not NULL) receives head_dist's logits (B, K). With
// `attention` non-NULL, attention[N] receives block N's head-averaged
// attention weights (B, T, T) (the composed attention path; slower).
// x itself gets no gradient.
ct_tensor *ct_nn_vit_forward(const ct_nn_vit *m, ct_nn_ctx *ctx, ct_tensor *x,
                             ct_tensor **dist_logits, ct_tensor **attention);

// x (B, C, H, W) -> the class token after the final norm (B, D): what feeds
// the head (timm's forward_head(pre_logits=True)); for any num_classes.
ct_tensor *ct_nn_vit_features(const ct_nn_vit *m, ct_nn_ctx *ctx, ct_tensor *x);

// The prediction used for evaluation: the class head's logits, or for a
// distilled model the mean of the two heads' logits (DeiT's inference).
ct_tensor *ct_nn_vit_predict(const ct_nn_vit *m, ct_tensor *x);

// Attention rollout (Abnar & Zuidema 2020) of the class token: for each
// layer A' = (A + I) / 2 with rows renormalized, multiplied across layers;
// out (B, patches) receives the class token's row over the patch tokens,
// scaled so each image's maximum is 1. attention[N] are the (B, T, T) maps
// from ct_nn_vit_forward.
ct_status ct_nn_vit_rollout(const ct_nn_vit *m, ct_tensor *const *attention,
                            float *out);

#endif
