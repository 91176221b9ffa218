// CLIP (see clip.h): the image tower (a ViT or ResNet under "visual." and
// visual.proj), the causal text Transformer with open_clip's names, and the
// symmetric contrastive loss composed from differentiable ops (matmul, exp,
// cross-entropy), so every gradient, the temperature's included, comes from
// ops that have their own gradchecks.
//
// Registration order follows the twin's state_dict (tests/ref, bench/ref/
// clip_model.py): the model's own tensors (positional_embedding,
// text_projection, logit_scale), then visual.*, transformer.*,
// token_embedding, ln_final.
#include "nn/clip.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/ops_box.h"
#include "autograd/ops_conv.h"
#include "nn/init.h"

// The text tower's LayerNorm eps (nn.LayerNorm's default, as open_clip's).
static const float TEXT_LN_EPS = 1e-5f;
// F.normalize's clamp of the norm.
static const float NORMALIZE_EPS = 1e-12f;

typedef struct text_block {
  ct_nn_layernorm ln_1, ln_2;
  ct_nn_mha attn;  // "attn.in_proj_weight", "attn.in_proj_bias", out_proj
  ct_nn_mlp mlp;   // fc1 = "mlp.c_fc", fc2 = "mlp.c_proj", exact GELU
} text_block;

struct ct_nn_clip {
  ct_nn_clip_config cfg;
  ct_nn_vit vit;        // image_arch == CT_NN_CLIP_VIT
  ct_nn_resnet resnet;  // image_arch == CT_NN_CLIP_RESNET
  int64_t visual_width;
  ct_tensor *visual_proj;           // (visual_width, E)
  ct_tensor *token_embedding;       // (V, W)
  ct_tensor *positional_embedding;  // (T, W)
  text_block *blocks;
  ct_nn_layernorm ln_final;
  ct_tensor *text_projection;  // (W, E)
  ct_tensor *logit_scale;      // 0-dim, s
};

static ct_status check_config(const ct_nn_clip_config *c) {
  if (c->image_arch != CT_NN_CLIP_VIT && c->image_arch != CT_NN_CLIP_RESNET)
    return ct_error(CT_ERR_ARG, "clip: unknown image_arch %d",
                    (int)c->image_arch);
  if (c->embed_dim < 1 || c->vocab < 2 || c->context_length < 1)
    return ct_error(CT_ERR_ARG,
                    "clip: embed_dim %lld, vocab %lld and context_length "
                    "%lld must be at least 1, 2 and 1",
                    (long long)c->embed_dim, (long long)c->vocab,
                    (long long)c->context_length);
  if (c->text_width < 1 || c->text_layers < 1 || c->text_mlp < 1 ||
      c->text_heads < 1 || c->text_width % c->text_heads)
    return ct_error(CT_ERR_ARG,
                    "clip: text_width %lld must be a positive multiple of "
                    "text_heads %lld, text_layers %lld and text_mlp %lld "
                    "at least 1",
                    (long long)c->text_width, (long long)c->text_heads,
                    (long long)c->text_layers, (long long)c->text_mlp);
  return CT_OK;
}

// Registers "prefix.leaf" drawn N(0, std^2).
static ct_tensor *normal_param(ct_params *p, const char *prefix,
                               const char *leaf, int ndim, const int64_t *shape,
                               unsigned flags, float std, ct_rng *rng) {
  ct_tensor *t = ct_nn_param(p, prefix, leaf, ndim, shape, flags);
  if (t && ct_nn_init_normal(t, rng, 0.0f, std) != CT_OK) return NULL;
  return t;
}

// transformer.resblocks.N: open_clip's ResidualAttentionBlock with its
// init_parameters stds; attention biases zero (nn.MultiheadAttention's),
// MLP biases nn.Linear's default.
static ct_status block_init(text_block *b, ct_params *p, const char *prefix,
                            const ct_nn_clip_config *c, ct_rng *rng) {
  const int64_t W = c->text_width;
  const float attn_std = 1.0f / sqrtf((float)W);
  const float proj_std = attn_std / sqrtf(2.0f * (float)c->text_layers);
  const float fc_std = 1.0f / sqrtf(2.0f * (float)W);
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "ln_1");
  if (st == CT_OK) st = ct_nn_layernorm_init(&b->ln_1, p, name, W, TEXT_LN_EPS);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "attn");
  if (st == CT_OK)
    st = ct_nn_mha_init(&b->attn, p, name, W, c->text_heads, 0.0f, true, rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "ln_2");
  if (st == CT_OK) st = ct_nn_layernorm_init(&b->ln_2, p, name, W, TEXT_LN_EPS);
  b->mlp.act = CT_NN_GELU;
  b->mlp.dropout = 0.0f;
  if (st == CT_OK) st = ct_nn_name(name, prefix, "mlp.c_fc");
  if (st == CT_OK)
    st = ct_nn_linear_init(&b->mlp.fc1, p, name, W, c->text_mlp, true, rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "mlp.c_proj");
  if (st == CT_OK)
    st = ct_nn_linear_init(&b->mlp.fc2, p, name, c->text_mlp, W, true, rng);
  if (st == CT_OK)
    st = ct_nn_init_normal(b->attn.in_proj_weight, rng, 0.0f, attn_std);
  if (st == CT_OK)
    st = ct_nn_init_normal(b->attn.out_proj.weight, rng, 0.0f, proj_std);
  if (st == CT_OK) st = ct_nn_init_normal(b->mlp.fc1.weight, rng, 0.0f, fc_std);
  if (st == CT_OK)
    st = ct_nn_init_normal(b->mlp.fc2.weight, rng, 0.0f, proj_std);
  return st;
}

static ct_status visual_init(ct_nn_clip *m, ct_params *p, const char *prefix,
                             ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "visual");
  if (st != CT_OK) return st;
  if (m->cfg.image_arch == CT_NN_CLIP_VIT) {
    m->cfg.vit.num_classes = 0;  // no head: the class token's features
    m->cfg.vit.distilled = false;
    st = ct_nn_vit_init(&m->vit, p, name, &m->cfg.vit, rng);
    m->visual_width = m->cfg.vit.dim;
  } else {
    m->cfg.resnet.num_classes = 0;  // no fc: the pooled features
    st = ct_nn_resnet_init(&m->resnet, p, name, &m->cfg.resnet, rng);
    m->visual_width = m->resnet.feature_channels;
  }
  if (st != CT_OK) return st;
  // open_clip's VisionTransformer: proj = width^-.5 * randn(width, E).
  m->visual_proj =
      normal_param(p, name, "proj", CT_SHAPE(m->visual_width, m->cfg.embed_dim),
                   0, 1.0f / sqrtf((float)m->visual_width), rng);
  return m->visual_proj ? CT_OK : ct_last_status();
}

ct_status ct_nn_clip_init(ct_nn_clip **out, ct_params *p, const char *prefix,
                          const ct_nn_clip_config *cfg, ct_rng *init_rng) {
  *out = NULL;
  ct_status st = check_config(cfg);
  if (st != CT_OK) return st;
  ct_nn_clip *m = calloc(1, sizeof *m);
  if (m) m->blocks = calloc((size_t)cfg->text_layers, sizeof *m->blocks);
  if (!m || !m->blocks) {
    free(m);
    return ct_error(CT_ERR_NOMEM, "clip: out of memory");
  }
  m->cfg = *cfg;
  const int64_t W = cfg->text_width, T = cfg->context_length;
  // Registered (zero) first, drawn after the towers below, in open_clip's
  // order of draws: visual, then init_parameters.
  m->positional_embedding = ct_nn_param(p, prefix, "positional_embedding",
                                        CT_SHAPE(T, W), CT_PARAM_NO_DECAY);
  m->text_projection =
      ct_nn_param(p, prefix, "text_projection", CT_SHAPE(W, cfg->embed_dim), 0);
  m->logit_scale =
      ct_nn_param(p, prefix, "logit_scale", 0, NULL, CT_PARAM_NO_DECAY);
  if (!m->positional_embedding || !m->text_projection || !m->logit_scale)
    st = ct_last_status();
  if (st == CT_OK) st = visual_init(m, p, prefix, init_rng);
  char name[CT_NN_NAME_MAX];
  for (int64_t i = 0; i < cfg->text_layers && st == CT_OK; i++) {
    st = ct_nn_name(name, prefix, "transformer.resblocks.%lld", (long long)i);
    if (st == CT_OK) st = block_init(&m->blocks[i], p, name, cfg, init_rng);
  }
  if (st == CT_OK) {
    m->token_embedding = normal_param(p, prefix, "token_embedding.weight",
                                      CT_SHAPE(cfg->vocab, W),
                                      CT_PARAM_NO_DECAY, 0.02f, init_rng);
    if (!m->token_embedding) st = ct_last_status();
  }
  if (st == CT_OK) st = ct_nn_name(name, prefix, "ln_final");
  if (st == CT_OK)
    st = ct_nn_layernorm_init(&m->ln_final, p, name, W, TEXT_LN_EPS);
  if (st == CT_OK)
    st = ct_nn_init_normal(m->positional_embedding, init_rng, 0.0f, 0.01f);
  if (st == CT_OK)
    st = ct_nn_init_normal(m->text_projection, init_rng, 0.0f,
                           1.0f / sqrtf((float)W));
  if (st == CT_OK) st = ct_nn_init_constant(m->logit_scale, logf(1 / 0.07f));
  if (st != CT_OK) {
    ct_nn_clip_free(m);
    return st;
  }
  *out = m;
  return CT_OK;
}

void ct_nn_clip_free(ct_nn_clip *m) {
  if (!m) return;
  if (m->cfg.image_arch == CT_NN_CLIP_VIT)
    ct_nn_vit_free(&m->vit);
  else
    ct_nn_resnet_free(&m->resnet);
  free(m->blocks);
  free(m);
}

const ct_nn_clip_config *ct_nn_clip_cfg(const ct_nn_clip *m) { return &m->cfg; }

ct_tensor *ct_nn_clip_encode_image(const ct_nn_clip *m, ct_nn_ctx *ctx,
                                   ct_tensor *images) {
  ct_tensor *f = m->cfg.image_arch == CT_NN_CLIP_VIT
                     ? ct_nn_vit_features(&m->vit, ctx, images)
                     : ct_global_avg_pool2d(
                           ct_nn_resnet_features(&m->resnet, ctx, images));
  if (f && f->ndim != 2) f = ct_reshape(f, CT_SHAPE(f->shape[0], -1));
  return ct_l2_normalize(ct_matmul(f, m->visual_proj, false, false),
                         NORMALIZE_EPS);
}

// tokens (B,T') -> the rows b * T' + eot[b] of the flattened (B*T', W)
// activations, as an i32 index (B); NULL with an error naming the bad row.
static ct_tensor *eot_rows(const ct_tensor *tokens, const int64_t *eot) {
  const int64_t B = tokens->shape[0], T = tokens->shape[1];
  ct_tensor *idx = ct_tensor_empty(CT_I32, CT_SHAPE(B));
  if (!idx) return NULL;
  for (int64_t b = 0; b < B; b++) {
    if (eot[b] < 0 || eot[b] >= T) {
      ct_error(CT_ERR_INDEX,
               "clip: eot[%lld] = %lld is outside the %lld token positions",
               (long long)b, (long long)eot[b], (long long)T);
      return NULL;
    }
    ct_i32(idx)[b] = (int32_t)(b * T + eot[b]);
  }
  return idx;
}

ct_tensor *ct_nn_clip_encode_text(const ct_nn_clip *m, ct_nn_ctx *ctx,
                                  ct_tensor *tokens, const int64_t *eot) {
  if (!tokens) return NULL;
  const ct_nn_clip_config *c = &m->cfg;
  if (tokens->dtype != CT_I32 || tokens->ndim != 2 || tokens->shape[1] < 1 ||
      tokens->shape[1] > c->context_length) {
    char got[96];
    ct_error(CT_ERR_SHAPE,
             "clip: expected tokens (B, T') i32 with 1 <= T' <= "
             "context_length %lld, got %s",
             (long long)c->context_length,
             ct_shape_str(tokens->ndim, tokens->shape, got, sizeof got));
    return NULL;
  }
  const int64_t B = tokens->shape[0], T = tokens->shape[1], W = c->text_width;
  ct_tensor *idx = eot_rows(tokens, eot);
  if (!idx) return NULL;
  ct_tensor *x = ct_add(ct_embedding(m->token_embedding, tokens, -1),
                        ct_slice(m->positional_embedding, 0, 0, T));
  const ct_nn_attn_masks causal = {.causal = true};
  for (int64_t i = 0; i < c->text_layers; i++) {
    const text_block *b = &m->blocks[i];
    ct_tensor *h = ct_nn_layernorm_forward(&b->ln_1, x);
    x = ct_nn_mha_forward_residual(&b->attn, ctx, h, h, h, &causal, NULL, x);
    h = ct_nn_layernorm_forward(&b->ln_2, x);
    x = ct_nn_mlp_forward_residual(&b->mlp, ctx, h, x);
  }
  // ln_final is per row: applied to the B pooled rows only (open_clip applies
  // it to every position, then pools; the same values).
  ct_tensor *pooled =
      x ? ct_gather_rows(ct_reshape(x, CT_SHAPE(B * T, W)), idx) : NULL;
  pooled = ct_nn_layernorm_forward(&m->ln_final, pooled);
  return ct_l2_normalize(ct_matmul(pooled, m->text_projection, false, false),
                         NORMALIZE_EPS);
}

ct_tensor *ct_nn_clip_logit_scale(const ct_nn_clip *m) {
  return m->logit_scale;
}

// CE(exp(s) q k_all^T, offset + i): q (N, E), k_all (M, E).
static ct_tensor *one_way(ct_tensor *q, ct_tensor *k_all, int64_t offset,
                          ct_tensor *scale) {
  const int64_t N = q->shape[0];
  ct_tensor *targets = ct_tensor_empty(CT_I32, CT_SHAPE(N));
  if (!targets) return NULL;
  for (int64_t i = 0; i < N; i++) ct_i32(targets)[i] = (int32_t)(offset + i);
  ct_tensor *logits = ct_mul(ct_matmul(q, k_all, false, true), scale);
  return ct_cross_entropy(logits, targets, NULL);
}

ct_tensor *ct_nn_clip_loss(ct_tensor *img, ct_tensor *txt, ct_tensor *img_all,
                           ct_tensor *txt_all, int64_t offset,
                           ct_tensor *logit_scale) {
  if (!img || !txt || !img_all || !txt_all || !logit_scale) return NULL;
  const ct_tensor *t[4] = {img, txt, img_all, txt_all};
  for (int i = 0; i < 4; i++)
    if (t[i]->dtype != CT_F32 || t[i]->ndim != 2 ||
        t[i]->shape[1] != img->shape[1]) {
      ct_error(CT_ERR_SHAPE,
               "clip loss: img, txt, img_all and txt_all must be f32 (rows, "
               "E) with one E (argument %d is not)",
               i + 1);
      return NULL;
    }
  const int64_t B = img->shape[0];
  if (B < 1 || txt->shape[0] != B || img_all->shape[0] != txt_all->shape[0] ||
      offset < 0 || offset + B > txt_all->shape[0]) {
    ct_error(CT_ERR_SHAPE,
             "clip loss: %lld images and %lld texts at offset %lld do not "
             "fit in %lld gathered images and %lld gathered texts",
             (long long)B, (long long)txt->shape[0], (long long)offset,
             (long long)img_all->shape[0], (long long)txt_all->shape[0]);
    return NULL;
  }
  if (logit_scale->numel != 1) {
    ct_error(CT_ERR_SHAPE, "clip loss: logit_scale must hold one value");
    return NULL;
  }
  ct_tensor *scale = ct_exp(logit_scale);
  return ct_scale(ct_add(one_way(img, txt_all, offset, scale),
                         one_way(txt, img_all, offset, scale)),
                  0.5f);
}

void ct_nn_clip_clamp_scale(ct_nn_clip *m) {
  float *s = ct_f32(m->logit_scale);
  const float hi = logf(100.0f);
  // NaN stays NaN: the trainer's non-finite check sees it.
  if (*s < 0.0f) *s = 0.0f;
  if (*s > hi) *s = hi;
}
