// Transformer encoder/decoder layers, their stacks and nn.Transformer (see
// transformer.h). Each layer is a chain of residual sublayers; the two
// helpers below are the only place post-norm and pre-norm differ.
#include "nn/transformer.h"

#include <stdlib.h>

#include "autograd/ops.h"
#include "nn/init.h"
#include "nn/mlp.h"

ct_nn_transformer_config ct_nn_transformer_defaults(int64_t d_model,
                                                    int64_t nhead) {
  return (ct_nn_transformer_config){.d_model = d_model,
                                    .nhead = nhead,
                                    .dim_feedforward = 2048,
                                    .dropout = 0.1f,
                                    .activation = CT_NN_RELU,
                                    .layer_norm_eps = 1e-5f,
                                    .norm_first = false};
}

// ---- init -------------------------------------------------------------------

static ct_status init_mha(ct_nn_mha *m, ct_params *p, const char *prefix,
                          const char *child,
                          const ct_nn_transformer_config *cfg, ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "%s", child);
  if (st != CT_OK) return st;
  return ct_nn_mha_init(m, p, name, cfg->d_model, cfg->nhead, cfg->dropout,
                        true, rng);
}

static ct_status init_norm(ct_nn_layernorm *m, ct_params *p, const char *prefix,
                           const char *child,
                           const ct_nn_transformer_config *cfg) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "%s", child);
  if (st != CT_OK) return st;
  return ct_nn_layernorm_init(m, p, name, cfg->d_model, cfg->layer_norm_eps);
}

// linear1 (d_model -> ff) and linear2 (ff -> d_model).
static ct_status init_feedforward(ct_nn_linear *linear1, ct_nn_linear *linear2,
                                  ct_params *p, const char *prefix,
                                  const ct_nn_transformer_config *cfg,
                                  ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "linear1");
  if (st == CT_OK)
    st = ct_nn_linear_init(linear1, p, name, cfg->d_model, cfg->dim_feedforward,
                           true, rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "linear2");
  if (st == CT_OK)
    st = ct_nn_linear_init(linear2, p, name, cfg->dim_feedforward, cfg->d_model,
                           true, rng);
  return st;
}

static ct_status check_config(const ct_nn_transformer_config *cfg,
                              const char *prefix) {
  if (cfg->d_model < 1 || cfg->nhead < 1 || cfg->dim_feedforward < 1 ||
      !(cfg->dropout >= 0.0f && cfg->dropout < 1.0f) ||
      !(cfg->layer_norm_eps >= 0.0f))
    return ct_error(CT_ERR_ARG,
                    "transformer '%s': bad config (d_model %lld, nhead %lld, "
                    "dim_feedforward %lld, dropout %g, eps %g)",
                    prefix, (long long)cfg->d_model, (long long)cfg->nhead,
                    (long long)cfg->dim_feedforward, (double)cfg->dropout,
                    (double)cfg->layer_norm_eps);
  return CT_OK;
}

ct_status ct_nn_encoder_layer_init(ct_nn_encoder_layer *l, ct_params *p,
                                   const char *prefix,
                                   const ct_nn_transformer_config *cfg,
                                   ct_rng *init_rng) {
  *l = (ct_nn_encoder_layer){.cfg = *cfg};
  ct_status st = check_config(cfg, prefix);
  if (st == CT_OK)
    st = init_mha(&l->self_attn, p, prefix, "self_attn", cfg, init_rng);
  if (st == CT_OK)
    st = init_feedforward(&l->linear1, &l->linear2, p, prefix, cfg, init_rng);
  if (st == CT_OK) st = init_norm(&l->norm1, p, prefix, "norm1", cfg);
  if (st == CT_OK) st = init_norm(&l->norm2, p, prefix, "norm2", cfg);
  return st;
}

ct_status ct_nn_decoder_layer_init(ct_nn_decoder_layer *l, ct_params *p,
                                   const char *prefix,
                                   const ct_nn_transformer_config *cfg,
                                   ct_rng *init_rng) {
  *l = (ct_nn_decoder_layer){.cfg = *cfg};
  ct_status st = check_config(cfg, prefix);
  if (st == CT_OK)
    st = init_mha(&l->self_attn, p, prefix, "self_attn", cfg, init_rng);
  if (st == CT_OK)
    st = init_mha(&l->multihead_attn, p, prefix, "multihead_attn", cfg,
                  init_rng);
  if (st == CT_OK)
    st = init_feedforward(&l->linear1, &l->linear2, p, prefix, cfg, init_rng);
  if (st == CT_OK) st = init_norm(&l->norm1, p, prefix, "norm1", cfg);
  if (st == CT_OK) st = init_norm(&l->norm2, p, prefix, "norm2", cfg);
  if (st == CT_OK) st = init_norm(&l->norm3, p, prefix, "norm3", cfg);
  return st;
}

// ---- layer forward ----------------------------------------------------------

// The input a sublayer sees: norm(x) in pre-norm (read by the sublayer's
// products only, so kept as ct_nn_activation_dtype()), x in post-norm.
static ct_tensor *sublayer_input(const ct_nn_layernorm *norm, bool norm_first,
                                 ct_tensor *x) {
  return norm_first
             ? ct_nn_layernorm_forward_as(norm, x, ct_nn_activation_dtype())
             : x;
}

// The residual around a sublayer with output y (one dropout site): x +
// dropout(y) in pre-norm, norm(x + dropout(y)) in post-norm, the dropped add
// folded into the sublayer's last op where it can be; `sum` is x +
// dropout(y).
static ct_tensor *sublayer_output(const ct_nn_layernorm *norm,
                                  const ct_nn_transformer_config *cfg,
                                  ct_tensor *sum) {
  return cfg->norm_first ? sum : ct_nn_layernorm_forward(norm, sum);
}

// x (B,T,E) -> (B,T,E): the feed-forward sublayer
// (ct_nn_feedforward_add_dropout).
static ct_tensor *feedforward_block(ct_nn_ctx *ctx, const ct_nn_linear *linear1,
                                    const ct_nn_linear *linear2,
                                    const ct_nn_layernorm *norm,
                                    const ct_nn_transformer_config *cfg,
                                    ct_tensor *x) {
  ct_tensor *h = sublayer_input(norm, cfg->norm_first, x);
  ct_tensor *sum = ct_nn_feedforward_add_dropout(
      ctx, linear1, linear2, cfg->activation, cfg->dropout, h, x, cfg->dropout);
  return sublayer_output(norm, cfg, sum);
}

// The attention sublayer with query q and keys/values kv (self-attention:
// q = kv), the dropped add in out_proj (ct_nn_mha_forward_add_dropout).
static ct_tensor *attention_block(ct_nn_ctx *ctx, const ct_nn_mha *m,
                                  const ct_nn_layernorm *norm,
                                  const ct_nn_transformer_config *cfg,
                                  ct_tensor *x, ct_tensor *q, ct_tensor *kv,
                                  const ct_nn_attn_masks *masks) {
  ct_tensor *sum =
      ct_nn_mha_forward_add_dropout(m, ctx, q, kv, kv, masks, x, cfg->dropout);
  return sublayer_output(norm, cfg, sum);
}

// src (B,T,E) -> (B,T,E)
ct_tensor *ct_nn_encoder_layer_forward(const ct_nn_encoder_layer *l,
                                       ct_nn_ctx *ctx, ct_tensor *src,
                                       const ct_nn_attn_masks *src_masks) {
  const ct_nn_transformer_config *cfg = &l->cfg;
  ct_tensor *h = sublayer_input(&l->norm1, cfg->norm_first, src);
  ct_tensor *x =
      attention_block(ctx, &l->self_attn, &l->norm1, cfg, src, h, h, src_masks);
  return feedforward_block(ctx, &l->linear1, &l->linear2, &l->norm2, cfg, x);
}

// tgt (B,Tq,E), memory (B,Tk,E) -> (B,Tq,E)
ct_tensor *ct_nn_decoder_layer_forward(const ct_nn_decoder_layer *l,
                                       ct_nn_ctx *ctx, ct_tensor *tgt,
                                       ct_tensor *memory,
                                       const ct_nn_attn_masks *tgt_masks,
                                       const ct_nn_attn_masks *memory_masks) {
  const ct_nn_transformer_config *cfg = &l->cfg;
  ct_tensor *h = sublayer_input(&l->norm1, cfg->norm_first, tgt);
  ct_tensor *x =
      attention_block(ctx, &l->self_attn, &l->norm1, cfg, tgt, h, h, tgt_masks);
  h = sublayer_input(&l->norm2, cfg->norm_first, x);
  x = attention_block(ctx, &l->multihead_attn, &l->norm2, cfg, x, h, memory,
                      memory_masks);
  return feedforward_block(ctx, &l->linear1, &l->linear2, &l->norm3, cfg, x);
}

// ---- stacks -----------------------------------------------------------------

// "prefix.layers.i"
static ct_status layer_prefix(char name[CT_NN_NAME_MAX], const char *prefix,
                              int i) {
  return ct_nn_name(name, prefix, "layers.%d", i);
}

// num_layers zeroed layers of `size` bytes, or NULL with an error.
static void *alloc_layers(size_t size, int num_layers, const char *what,
                          const char *prefix) {
  if (num_layers < 1) {
    ct_error(CT_ERR_ARG, "%s '%s': num_layers %d must be >= 1", what, prefix,
             num_layers);
    return NULL;
  }
  void *layers = calloc((size_t)num_layers, size);
  if (!layers) ct_error(CT_ERR_NOMEM, "%s '%s': out of memory", what, prefix);
  return layers;
}

static ct_status init_final_norm(bool *has_norm, ct_nn_layernorm *norm,
                                 ct_params *p, const char *prefix,
                                 const ct_nn_transformer_config *cfg,
                                 bool final_norm) {
  *has_norm = final_norm;
  return final_norm ? init_norm(norm, p, prefix, "norm", cfg) : CT_OK;
}

ct_status ct_nn_encoder_init(ct_nn_encoder *e, ct_params *p, const char *prefix,
                             const ct_nn_transformer_config *cfg,
                             int num_layers, bool final_norm,
                             ct_rng *init_rng) {
  *e = (ct_nn_encoder){0};
  e->layers = alloc_layers(sizeof *e->layers, num_layers, "encoder", prefix);
  if (!e->layers) return ct_last_status();
  e->num_layers = num_layers;
  ct_status st = CT_OK;
  char name[CT_NN_NAME_MAX];
  for (int i = 0; i < num_layers && st == CT_OK; i++) {
    st = layer_prefix(name, prefix, i);
    if (st == CT_OK)
      st = ct_nn_encoder_layer_init(&e->layers[i], p, name, cfg, init_rng);
  }
  if (st == CT_OK)
    st = init_final_norm(&e->has_norm, &e->norm, p, prefix, cfg, final_norm);
  return st;
}

ct_status ct_nn_decoder_init(ct_nn_decoder *d, ct_params *p, const char *prefix,
                             const ct_nn_transformer_config *cfg,
                             int num_layers, bool final_norm,
                             ct_rng *init_rng) {
  *d = (ct_nn_decoder){0};
  d->layers = alloc_layers(sizeof *d->layers, num_layers, "decoder", prefix);
  if (!d->layers) return ct_last_status();
  d->num_layers = num_layers;
  ct_status st = CT_OK;
  char name[CT_NN_NAME_MAX];
  for (int i = 0; i < num_layers && st == CT_OK; i++) {
    st = layer_prefix(name, prefix, i);
    if (st == CT_OK)
      st = ct_nn_decoder_layer_init(&d->layers[i], p, name, cfg, init_rng);
  }
  if (st == CT_OK)
    st = init_final_norm(&d->has_norm, &d->norm, p, prefix, cfg, final_norm);
  return st;
}

void ct_nn_encoder_free(ct_nn_encoder *e) {
  free(e->layers);
  *e = (ct_nn_encoder){0};
}

void ct_nn_decoder_free(ct_nn_decoder *d) {
  free(d->layers);
  *d = (ct_nn_decoder){0};
}

// src (B,T,E) -> (B,T,E)
ct_tensor *ct_nn_encoder_forward(const ct_nn_encoder *e, ct_nn_ctx *ctx,
                                 ct_tensor *src,
                                 const ct_nn_attn_masks *src_masks) {
  ct_tensor *x = src;
  for (int i = 0; i < e->num_layers; i++)
    x = ct_nn_encoder_layer_forward(&e->layers[i], ctx, x, src_masks);
  return e->has_norm ? ct_nn_layernorm_forward(&e->norm, x) : x;
}

// tgt (B,Tq,E), memory (B,Tk,E) -> (B,Tq,E)
ct_tensor *ct_nn_decoder_forward(const ct_nn_decoder *d, ct_nn_ctx *ctx,
                                 ct_tensor *tgt, ct_tensor *memory,
                                 const ct_nn_attn_masks *tgt_masks,
                                 const ct_nn_attn_masks *memory_masks) {
  ct_tensor *x = tgt;
  for (int i = 0; i < d->num_layers; i++)
    x = ct_nn_decoder_layer_forward(&d->layers[i], ctx, x, memory, tgt_masks,
                                    memory_masks);
  return d->has_norm ? ct_nn_layernorm_forward(&d->norm, x) : x;
}

// ---- nn.Transformer ---------------------------------------------------------

ct_status ct_nn_transformer_init(ct_nn_transformer *t, ct_params *p,
                                 const char *prefix,
                                 const ct_nn_transformer_config *cfg,
                                 int num_encoder_layers, int num_decoder_layers,
                                 ct_rng *init_rng) {
  *t = (ct_nn_transformer){0};
  const int first = p->n;  // the registry entries this model adds
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "encoder");
  if (st == CT_OK)
    st = ct_nn_encoder_init(&t->encoder, p, name, cfg, num_encoder_layers, true,
                            init_rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "decoder");
  if (st == CT_OK)
    st = ct_nn_decoder_init(&t->decoder, p, name, cfg, num_decoder_layers, true,
                            init_rng);
  for (int i = first; i < p->n && st == CT_OK; i++)
    if (p->items[i].tensor->ndim > 1)
      st = ct_nn_init_xavier_uniform(p->items[i].tensor, init_rng, 1.0f);
  return st;
}

void ct_nn_transformer_free(ct_nn_transformer *t) {
  ct_nn_encoder_free(&t->encoder);
  ct_nn_decoder_free(&t->decoder);
}

// src (B,Tk,E), tgt (B,Tq,E) -> (B,Tq,E)
ct_tensor *ct_nn_transformer_forward(const ct_nn_transformer *t, ct_nn_ctx *ctx,
                                     ct_tensor *src, ct_tensor *tgt,
                                     const ct_nn_attn_masks *src_masks,
                                     const ct_nn_attn_masks *tgt_masks,
                                     const ct_nn_attn_masks *memory_masks) {
  ct_tensor *memory = ct_nn_encoder_forward(&t->encoder, ctx, src, src_masks);
  return ct_nn_decoder_forward(&t->decoder, ctx, tgt, memory, tgt_masks,
                               memory_masks);
}
