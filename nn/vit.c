// ViT and DeiT (see vit.h).
#include "nn/vit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "nn/init.h"
#include "nn/timm.h"

static const float LN_EPS = 1e-6f;

static ct_status check_config(const ct_nn_vit_config *c) {
  if (c->image_h < 1 || c->image_w < 1 || c->in_channels < 1)
    return ct_error(CT_ERR_ARG,
                    "vit: image size %lldx%lldx%lld: every side "
                    "must be at least 1",
                    (long long)c->in_channels, (long long)c->image_h,
                    (long long)c->image_w);
  if (c->patch < 1 || c->image_h % c->patch || c->image_w % c->patch)
    return ct_error(CT_ERR_ARG,
                    "vit: patch %lld does not divide the image "
                    "size %lldx%lld",
                    (long long)c->patch, (long long)c->image_h,
                    (long long)c->image_w);
  if (c->dim < 1 || c->heads < 1 || c->dim % c->heads)
    return ct_error(CT_ERR_ARG,
                    "vit: dim %lld is not a positive multiple of "
                    "heads %lld",
                    (long long)c->dim, (long long)c->heads);
  if (c->depth < 1 || c->mlp_dim < 1 || c->num_classes < 0 ||
      (c->num_classes == 0 && c->distilled))
    return ct_error(CT_ERR_ARG,
                    "vit: depth %lld, mlp_dim %lld and classes "
                    "%lld must all be at least 1 (classes 0, no head, "
                    "only without distillation)",
                    (long long)c->depth, (long long)c->mlp_dim,
                    (long long)c->num_classes);
  float rates[3] = {c->dropout, c->attn_dropout, c->drop_path};
  for (int i = 0; i < 3; i++)
    if (!(rates[i] >= 0.0f && rates[i] < 1.0f))
      return ct_error(CT_ERR_ARG,
                      "vit: dropout rates must lie in [0, 1) "
                      "(got %g)",
                      (double)rates[i]);
  return CT_OK;
}

// A Linear with timm's init: trunc_normal(std .02) weight, zero bias.
static ct_status timm_linear(ct_nn_linear *l, ct_params *p, const char *prefix,
                             const char *leaf, int64_t in, int64_t out,
                             ct_rng *rng) {
  return ct_nn_timm_linear_init(l, p, prefix, leaf, in, out, true, rng);
}

static ct_status block_init(ct_nn_vit_block *b, ct_params *p,
                            const char *prefix, const ct_nn_vit_config *c,
                            float drop_path, ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  const int64_t D = c->dim;
  b->drop_path = drop_path;
  ct_status st = ct_nn_name(name, prefix, "norm1");
  if (st == CT_OK) st = ct_nn_layernorm_init(&b->norm1, p, name, D, LN_EPS);
  // The attention: timm's qkv Linear is PyTorch's in_proj (rows [q; k; v]),
  // its proj Linear the out_proj, so the multi-head attention module runs
  // it with timm's names.
  ct_nn_linear qkv = {0};
  if (st == CT_OK) st = ct_nn_name(name, prefix, "attn");
  if (st == CT_OK) st = timm_linear(&qkv, p, name, "qkv", D, 3 * D, rng);
  if (st == CT_OK)
    st = timm_linear(&b->attn.out_proj, p, name, "proj", D, D, rng);
  b->attn.in_proj_weight = qkv.weight;
  b->attn.in_proj_bias = qkv.bias;
  b->attn.embed_dim = D;
  b->attn.num_heads = c->heads;
  b->attn.head_dim = D / c->heads;
  b->attn.dropout = c->attn_dropout;
  if (st == CT_OK) st = ct_nn_name(name, prefix, "norm2");
  if (st == CT_OK) st = ct_nn_layernorm_init(&b->norm2, p, name, D, LN_EPS);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "mlp");
  b->mlp.act = CT_NN_GELU;
  b->mlp.dropout = c->dropout;
  if (st == CT_OK)
    st = timm_linear(&b->mlp.fc1, p, name, "fc1", D, c->mlp_dim, rng);
  if (st == CT_OK)
    st = timm_linear(&b->mlp.fc2, p, name, "fc2", c->mlp_dim, D, rng);
  return st;
}

ct_status ct_nn_vit_init(ct_nn_vit *m, ct_params *p, const char *prefix,
                         const ct_nn_vit_config *cfg, ct_rng *init_rng) {
  memset(m, 0, sizeof *m);
  ct_status st = check_config(cfg);
  if (st != CT_OK) return st;
  m->cfg = *cfg;
  const int64_t D = cfg->dim, P = cfg->patch, C = cfg->in_channels;
  m->patches = (cfg->image_h / P) * (cfg->image_w / P);
  m->tokens = m->patches + (cfg->distilled ? 2 : 1);
  m->blocks = calloc((size_t)cfg->depth, sizeof *m->blocks);
  if (!m->blocks) return ct_error(CT_ERR_NOMEM, "vit: out of memory");

  // The patch embedding: a Conv2d(C, D, P, stride P) (nn/timm.h).
  char name[CT_NN_NAME_MAX];
  st = ct_nn_name(name, prefix, "patch_embed");
  if (st == CT_OK)
    st = ct_nn_patch_proj_init(&m->patch_embed, p, name, C, P, D, init_rng);
  if (st != CT_OK) return st;

  const unsigned token_flags = CT_PARAM_NO_DECAY;
  m->cls_token =
      ct_nn_param(p, prefix, "cls_token", CT_SHAPE(1, 1, D), token_flags);
  if (cfg->distilled)
    m->dist_token =
        ct_nn_param(p, prefix, "dist_token", CT_SHAPE(1, 1, D), token_flags);
  m->pos_embed = ct_nn_param(p, prefix, "pos_embed", CT_SHAPE(1, m->tokens, D),
                             token_flags);
  if (!m->cls_token || !m->pos_embed || (cfg->distilled && !m->dist_token))
    return ct_last_status();
  st =
      ct_nn_init_trunc_normal(m->pos_embed, init_rng, 0.0f, 0.02f, -2.0f, 2.0f);
  if (st == CT_OK)
    st = ct_nn_init_trunc_normal(m->cls_token, init_rng, 0.0f, 0.02f, -2.0f,
                                 2.0f);
  if (st == CT_OK && cfg->distilled)
    st = ct_nn_init_trunc_normal(m->dist_token, init_rng, 0.0f, 0.02f, -2.0f,
                                 2.0f);

  for (int64_t i = 0; i < cfg->depth && st == CT_OK; i++) {
    float rate = cfg->depth > 1
                     ? cfg->drop_path * (float)i / (float)(cfg->depth - 1)
                     : cfg->drop_path;
    st = ct_nn_name(name, prefix, "blocks.%lld", (long long)i);
    if (st == CT_OK)
      st = block_init(&m->blocks[i], p, name, cfg, rate, init_rng);
  }
  if (st == CT_OK) st = ct_nn_name(name, prefix, "norm");
  if (st == CT_OK) st = ct_nn_layernorm_init(&m->norm, p, name, D, LN_EPS);
  if (st == CT_OK && cfg->num_classes > 0)
    st =
        timm_linear(&m->head, p, prefix, "head", D, cfg->num_classes, init_rng);
  if (st == CT_OK && cfg->distilled)
    st = timm_linear(&m->head_dist, p, prefix, "head_dist", D, cfg->num_classes,
                     init_rng);
  return st;
}

void ct_nn_vit_free(ct_nn_vit *m) {
  free(m->blocks);
  m->blocks = NULL;
}

// x + drop_path(branch), one sample per row (nn/timm.h).
static ct_tensor *residual(ct_nn_ctx *ctx, ct_tensor *x, ct_tensor *branch,
                           float p) {
  return ct_nn_drop_path_add(ctx, x, branch, p, 1);
}

// Without dropout or drop path, the residual adds are folded into the
// attention's out_proj and the MLP's fc2 (ct_linear_fused: the same bits,
// and the branch outputs are not kept for backward). The dropout sites are
// taken in the same order either way.
static ct_tensor *block_forward(const ct_nn_vit_block *b, ct_nn_ctx *ctx,
                                float dropout, ct_tensor *x,
                                ct_tensor **weights) {
  const bool no_drop_path = !ct_nn_drop_path_active(ctx, b->drop_path);
  // The norms' outputs are read by products only (the qkv projection, fc1).
  const ct_dtype store = ct_nn_activation_dtype();
  ct_tensor *h = ct_nn_layernorm_forward_as(&b->norm1, x, store);
  if (no_drop_path && !ct_nn_dropout_active(ctx, dropout)) {
    x = ct_nn_mha_forward_residual(&b->attn, ctx, h, h, h, NULL, weights, x);
    if (ctx) {  // the sites of the dropout and the drop path
      ct_nn_next_dropout_stream(ctx);
      ct_nn_next_dropout_stream(ctx);
    }
  } else {
    h = ct_nn_mha_forward(&b->attn, ctx, h, h, h, NULL, weights);
    x = residual(ctx, x, ct_nn_dropout(ctx, h, dropout), b->drop_path);
  }
  h = ct_nn_layernorm_forward_as(&b->norm2, x, store);
  if (no_drop_path) {
    x = ct_nn_mlp_forward_residual(&b->mlp, ctx, h, x);
    if (ctx) ct_nn_next_dropout_stream(ctx);  // the drop path's site
    return x;
  }
  return residual(ctx, x, ct_nn_mlp_forward(&b->mlp, ctx, h), b->drop_path);
}

// A learned (1, 1, D) token repeated over the batch: (B, 1, D).
static ct_tensor *repeat_token(ct_tensor *token, int64_t B) {
  ct_tensor *zeros = ct_tensor_zeros(CT_F32, CT_SHAPE(B, 1, token->shape[2]));
  return ct_add(zeros, token);
}

// Token `i` of every sample after the final norm: (B, D).
static ct_tensor *final_token(const ct_nn_vit *m, ct_tensor *x, int64_t i) {
  ct_tensor *t = ct_slice(x, 1, i, 1);
  if (!t) return NULL;
  t = ct_reshape(t, CT_SHAPE(x->shape[0], m->cfg.dim));
  return ct_nn_layernorm_forward(&m->norm, t);
}

// The places of the tokens for an attention log (nn/module.h): (1, T, 2)
// pixel centres (y, x) of the patches, NAN for the class (and
// distillation) token.
static ct_tensor *token_places(const ct_nn_vit *m) {
  const int64_t T = m->tokens, first = T - m->patches, P = m->cfg.patch;
  const int64_t gw = m->cfg.image_w / P;
  ct_tensor *yx = ct_tensor_empty(CT_F32, CT_SHAPE(1, T, 2));
  if (!yx) return NULL;
  float *v = ct_f32(yx);
  for (int64_t t = 0; t < T; t++) {
    const int64_t p = t - first;
    v[2 * t] = t < first ? NAN : ((float)(p / gw) + 0.5f) * (float)P;
    v[2 * t + 1] = t < first ? NAN : ((float)(p % gw) + 0.5f) * (float)P;
  }
  return yx;
}

// x (B, C, H, W) -> the tokens after the last block (B, T, D).
static ct_tensor *encode(const ct_nn_vit *m, ct_nn_ctx *ctx, ct_tensor *x,
                         ct_tensor **attention) {
  if (!x) return NULL;
  const ct_nn_vit_config *c = &m->cfg;
  if (x->dtype != CT_F32 || x->ndim != 4 || x->shape[1] != c->in_channels ||
      x->shape[2] != c->image_h || x->shape[3] != c->image_w) {
    char got[96];
    ct_error(CT_ERR_SHAPE,
             "vit: expected images (B, %lld, %lld, %lld) f32, "
             "got %s",
             (long long)c->in_channels, (long long)c->image_h,
             (long long)c->image_w,
             ct_shape_str(x->ndim, x->shape, got, sizeof got));
    return NULL;
  }
  const int64_t B = x->shape[0];
  ct_tensor *tokens = ct_nn_patch_proj_forward(&m->patch_embed, x);
  ct_tensor *parts[3] = {repeat_token(m->cls_token, B), NULL, NULL};
  int n = 1;
  if (c->distilled) parts[n++] = repeat_token(m->dist_token, B);
  parts[n++] = tokens;
  ct_tensor *h = ct_add(ct_concat(parts, n, 1), m->pos_embed);
  h = ct_nn_dropout(ctx, h, c->dropout);
  const int logged = ctx && ctx->attention ? ctx->attention->count : 0;
  for (int64_t i = 0; i < c->depth; i++)
    h = block_forward(&m->blocks[i], ctx, c->dropout, h,
                      attention ? &attention[i] : NULL);
  if (!h) return NULL;
  if (ctx && ctx->attention && ctx->attention->count > logged) {
    ct_tensor *yx = token_places(m);
    if (!yx) return NULL;
    for (int i = logged; i < ctx->attention->count; i++)
      ctx->attention->layers[i].query_yx = ctx->attention->layers[i].key_yx =
          yx;
  }
  return h;
}

ct_tensor *ct_nn_vit_features(const ct_nn_vit *m, ct_nn_ctx *ctx,
                              ct_tensor *x) {
  ct_tensor *h = encode(m, ctx, x, NULL);
  return h ? final_token(m, h, 0) : NULL;
}

ct_tensor *ct_nn_vit_forward(const ct_nn_vit *m, ct_nn_ctx *ctx, ct_tensor *x,
                             ct_tensor **dist_logits, ct_tensor **attention) {
  if (m->cfg.num_classes < 1) {
    ct_error(CT_ERR_STATE,
             "vit: a model built with classes 0 has no head: use "
             "ct_nn_vit_features");
    return NULL;
  }
  const ct_nn_vit_config *c = &m->cfg;
  ct_tensor *h = encode(m, ctx, x, attention);
  if (!h) return NULL;
  if (c->distilled && dist_logits)
    *dist_logits = ct_nn_linear_forward(&m->head_dist, final_token(m, h, 1));
  return ct_nn_linear_forward(&m->head, final_token(m, h, 0));
}

ct_tensor *ct_nn_vit_predict(const ct_nn_vit *m, ct_tensor *x) {
  ct_tensor *dist = NULL;
  ct_tensor *logits = ct_nn_vit_forward(m, NULL, x, &dist, NULL);
  if (!m->cfg.distilled || !logits) return logits;
  return ct_scale(ct_add(logits, dist), 0.5f);
}

ct_status ct_nn_vit_rollout(const ct_nn_vit *m, ct_tensor *const *attention,
                            float *out) {
  const int64_t T = m->tokens, depth = m->cfg.depth;
  for (int64_t i = 0; i < depth; i++)
    if (!attention[i] || attention[i]->ndim != 3 ||
        attention[i]->shape[1] != T || attention[i]->shape[2] != T)
      return ct_error(CT_ERR_SHAPE,
                      "vit_rollout: block %lld's attention map "
                      "is not (B, %lld, %lld)",
                      (long long)i, (long long)T, (long long)T);
  const int64_t B = attention[0]->shape[0];
  const int64_t first = T - m->patches;  // the patch tokens start here
  double *row = malloc((size_t)T * sizeof *row);
  double *next = malloc((size_t)T * sizeof *next);
  if (!row || !next) {
    free(row);
    free(next);
    return ct_error(CT_ERR_NOMEM, "vit_rollout: out of memory");
  }
  for (int64_t b = 0; b < B; b++) {
    // The class token's row of (A'_L ... A'_1), built from the last layer
    // down: row <- row A'_l, starting from e_0.
    for (int64_t j = 0; j < T; j++) row[j] = j == 0;
    for (int64_t l = depth - 1; l >= 0; l--) {
      const float *a = ct_f32(attention[l]) + b * T * T;
      for (int64_t j = 0; j < T; j++) next[j] = 0.0;
      for (int64_t i = 0; i < T; i++) {
        if (row[i] == 0.0) continue;
        double sum = 1.0;  // row i of A + I, to renormalize
        for (int64_t j = 0; j < T; j++) sum += a[i * T + j];
        for (int64_t j = 0; j < T; j++)
          next[j] += row[i] * ((double)a[i * T + j] + (i == j)) / sum;
      }
      memcpy(row, next, (size_t)T * sizeof *row);
    }
    ct_nn_rollout_scale(row + first, T - first, out + b * m->patches);
  }
  free(row);
  free(next);
  return CT_OK;
}
