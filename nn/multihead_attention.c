// nn.MultiheadAttention (see attention.h): projections, mask plumbing, and
// the fused and composed attention paths.
#include "nn/multihead_attention.h"

#include <math.h>

#include "autograd/op_util.h"
#include "autograd/ops_attention.h"
#include "autograd/ops.h"
#include "nn/init.h"

ct_status ct_nn_mha_init(ct_nn_mha *m, ct_params *p, const char *prefix,
                         int64_t embed_dim, int64_t num_heads, float dropout,
                         bool bias, ct_rng *init_rng) {
  *m = (ct_nn_mha){
      .embed_dim = embed_dim, .num_heads = num_heads, .dropout = dropout};
  if (embed_dim < 1 || num_heads < 1 || embed_dim % num_heads != 0)
    return ct_error(CT_ERR_ARG,
                    "mha '%s': embed_dim %lld must be a positive multiple of "
                    "num_heads %lld",
                    prefix, (long long)embed_dim, (long long)num_heads);
  if (!(dropout >= 0.0f && dropout < 1.0f))
    return ct_error(CT_ERR_ARG, "mha '%s': dropout %g outside [0, 1)", prefix,
                    (double)dropout);
  m->head_dim = embed_dim / num_heads;
  m->in_proj_weight = ct_nn_param(p, prefix, "in_proj_weight",
                                  CT_SHAPE(3 * embed_dim, embed_dim), 0);
  if (!m->in_proj_weight) return ct_last_status();
  if (bias) {
    m->in_proj_bias = ct_nn_param(p, prefix, "in_proj_bias",
                                  CT_SHAPE(3 * embed_dim), CT_PARAM_NO_DECAY);
    if (!m->in_proj_bias) return ct_last_status();
  }
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "out_proj");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->out_proj, p, name, embed_dim, embed_dim, bias,
                           init_rng);
  // PyTorch's _reset_parameters: xavier for in_proj, zero biases.
  if (st == CT_OK)
    st = ct_nn_init_xavier_uniform(m->in_proj_weight, init_rng, 1.0f);
  if (st == CT_OK && bias) st = ct_nn_init_zeros(m->out_proj.bias);
  return st;
}

ct_tensor *ct_nn_causal_mask(int64_t Tq, int64_t Tk, ct_dtype dtype) {
  ct_tensor *mask = ct_tensor_empty(dtype, CT_SHAPE(Tq, Tk));
  if (!mask) return NULL;
  for (int64_t i = 0; i < Tq; i++)
    for (int64_t j = 0; j < Tk; j++) {
      bool hidden = j > i + (Tk - Tq);
      if (dtype == CT_I32)
        ct_i32(mask)[i * Tk + j] = hidden;
      else
        ct_f32(mask)[i * Tk + j] = hidden ? -INFINITY : 0.0f;
    }
  return mask;
}

// A mask as scores to add: f32 masks already are; i32 (bool) masks become
// -inf where nonzero, 0 elsewhere.
static ct_tensor *additive_mask(ct_tensor *mask) {
  if (mask->dtype == CT_F32) return mask;
  ct_tensor *add = ct_tensor_empty(CT_F32, mask->ndim, mask->shape);
  if (!add) return NULL;
  for (int64_t i = 0; i < mask->numel; i++)
    ct_f32(add)[i] = ct_i32(mask)[i] ? -INFINITY : 0.0f;
  return add;
}

static bool check_masks(const ct_nn_attn_masks *mk, int64_t B, int64_t NH,
                        int64_t Tq, int64_t Tk) {
  const ct_tensor *am = mk->attn_mask, *kpm = mk->key_padding_mask;
  if (am) {
    if (!ct_check_mask_dtype("mha", am, "attn_mask")) return false;
    bool square = am->ndim == 2 && am->shape[0] == Tq && am->shape[1] == Tk;
    bool per_head = am->ndim == 3 && am->shape[0] == B * NH &&
                    am->shape[1] == Tq && am->shape[2] == Tk;
    if (!square && !per_head) {
      char got[64];
      ct_error(CT_ERR_SHAPE,
               "mha: attn_mask %s must be (Tq,Tk) = [%lld, %lld] or "
               "(B*NH,Tq,Tk) = [%lld, %lld, %lld]",
               ct_shape_str(am->ndim, am->shape, got, sizeof got),
               (long long)Tq, (long long)Tk, (long long)(B * NH), (long long)Tq,
               (long long)Tk);
      return false;
    }
  }
  if (kpm && (kpm->dtype != CT_I32 || kpm->ndim != 2 || kpm->shape[0] != B ||
              kpm->shape[1] != Tk)) {
    char got[64];
    ct_error(CT_ERR_SHAPE,
             "mha: key_padding_mask %s %s must be i32 (B,Tk) = [%lld, %lld] "
             "(nonzero = padding)",
             ct_dtype_name(kpm->dtype),
             ct_shape_str(kpm->ndim, kpm->shape, got, sizeof got), (long long)B,
             (long long)Tk);
    return false;
  }
  return true;
}

// Rows [i*E, (i+1)*E) of the in-projection (i = 0 q, 1 k, 2 v) applied to x:
// x (B,T,E) -> (B,T,NH,Dh)
static ct_tensor *project(const ct_nn_mha *m, ct_tensor *x, int i) {
  const int64_t E = m->embed_dim;
  ct_tensor *w = ct_slice(m->in_proj_weight, 0, i * E, E);
  ct_tensor *b =
      m->in_proj_bias ? ct_slice(m->in_proj_bias, 0, i * E, E) : NULL;
  if (m->in_proj_bias && !b) return NULL;
  return ct_reshape(ct_linear(x, w, b), CT_SHAPE(x->shape[0], x->shape[1],
                                                 m->num_heads, m->head_dim));
}

// q (B,Tq,NH,Dh), k (B,Tk,NH,Dh), v (B,Tk,NH,Dh) -> (B,Tq,NH,Dh); *weights
// (B,NH,Tq,Tk) after dropout. The composed twin of the fused kernel.
static ct_tensor *composed_attention(ct_tensor *q, ct_tensor *k, ct_tensor *v,
                                     const ct_nn_attn_masks *mk, float drop_p,
                                     uint64_t seed, uint64_t stream,
                                     ct_tensor **weights) {
  static const int to_heads[4] = {0, 2, 1, 3};  // (B,T,NH,Dh) <-> (B,NH,T,Dh)
  if (!q || !k || !v) return NULL;
  const int64_t B = q->shape[0], Tq = q->shape[1], NH = q->shape[2],
                Dh = q->shape[3], Tk = k->shape[1];
  ct_tensor *qh =
      ct_permute(ct_scale(q, (float)(1.0 / sqrt((double)Dh))), to_heads);
  ct_tensor *scores =
      ct_matmul(qh, ct_permute(k, to_heads), false, true);  // (B,NH,Tq,Tk)
  if (mk->attn_mask) {
    ct_tensor *am = additive_mask(mk->attn_mask);
    if (am && am->ndim == 3) am = ct_reshape(am, CT_SHAPE(B, NH, Tq, Tk));
    scores = ct_add(scores, am);
  }
  if (mk->causal) scores = ct_add(scores, ct_nn_causal_mask(Tq, Tk, CT_F32));
  if (mk->key_padding_mask) {
    ct_tensor *pad = additive_mask(mk->key_padding_mask);
    scores = ct_add(scores, ct_reshape(pad, CT_SHAPE(B, 1, 1, Tk)));
  }
  ct_tensor *w = ct_dropout(ct_softmax(scores), drop_p, seed, stream);
  *weights = w;
  return ct_permute(ct_matmul(w, ct_permute(v, to_heads), false, false),
                    to_heads);
}

// attn_mask (Tq,Tk) -> the fused op's bias (NH,Tq,Tk), by broadcasting.
static ct_tensor *bias_over_heads(ct_tensor *attn_mask, int64_t NH) {
  return ct_add(ct_tensor_zeros(CT_F32, CT_SHAPE(NH, 1, 1)),
                additive_mask(attn_mask));
}

// query (B,Tq,E), key (B,Tk,E), value (B,Tk,E) -> (B,Tq,E); weights (B,Tq,Tk)
// The attention before out_proj: (B,Tq,E).
static ct_tensor *mha_heads(const ct_nn_mha *m, ct_nn_ctx *ctx,
                            ct_tensor *query, ct_tensor *key, ct_tensor *value,
                            const ct_nn_attn_masks *masks,
                            ct_tensor **weights) {
  if (!query || !key || !value) return NULL;
  const int64_t E = m->embed_dim, NH = m->num_heads;
  if (query->ndim != 3 || key->ndim != 3 || !ct_tensor_same_shape(key, value) ||
      query->shape[2] != E || key->shape[2] != E ||
      key->shape[0] != query->shape[0]) {
    char qs[64], ks[64], vs[64];
    ct_error(CT_ERR_SHAPE,
             "mha: need query (B,Tq,%lld), key and value (B,Tk,%lld); got "
             "query %s, key %s, value %s",
             (long long)E, (long long)E,
             ct_shape_str(query->ndim, query->shape, qs, sizeof qs),
             ct_shape_str(key->ndim, key->shape, ks, sizeof ks),
             ct_shape_str(value->ndim, value->shape, vs, sizeof vs));
    return NULL;
  }
  const int64_t B = query->shape[0], Tq = query->shape[1], Tk = key->shape[1];
  const ct_nn_attn_masks no_masks = {0};
  const ct_nn_attn_masks *mk = masks ? masks : &no_masks;
  if (!check_masks(mk, B, NH, Tq, Tk)) return NULL;

  ct_attention_opts o = ct_attention_defaults();
  if (ctx) {
    o.dropout_stream = ct_nn_next_dropout_stream(ctx);
    o.dropout_seed = ctx->seed;
    o.dropout_p = ctx->training ? m->dropout : 0.0f;
  }
  const bool record = ctx && ctx->attention;
  const bool composed =
      weights || record || (mk->attn_mask && mk->attn_mask->ndim == 3);
  ct_tensor *heads;  // (B,Tq,NH,Dh)
  if (composed) {
    ct_tensor *w = NULL;
    heads = composed_attention(project(m, query, 0), project(m, key, 1),
                               project(m, value, 2), mk, o.dropout_p,
                               o.dropout_seed, o.dropout_stream, &w);
    if (record && w) ct_nn_attention_record(ctx, w, 1);
    if (weights) {
      static const int heads_last[4] = {0, 2, 3, 1};  // (B,Tq,Tk,NH)
      *weights = ct_mean_last(ct_permute(w, heads_last), false);
      if (!*weights) return NULL;
    }
  } else {
    o.causal = mk->causal;
    o.key_mask = mk->key_padding_mask;
    if (mk->attn_mask) {
      o.bias = bias_over_heads(mk->attn_mask, NH);
      if (!o.bias) return NULL;
    }
    if (query == key && key == value) {
      // Read by the kernel's products only.
      ct_tensor *qkv = ct_linear_as(query, m->in_proj_weight, m->in_proj_bias,
                                    ct_nn_activation_dtype());
      heads = ct_attention_qkv(
          ct_reshape(qkv, CT_SHAPE(B, Tq, 3, NH, m->head_dim)), &o);
    } else {
      heads = ct_attention(project(m, query, 0), project(m, key, 1),
                           project(m, value, 2), &o);
    }
  }
  return ct_reshape(heads, CT_SHAPE(B, Tq, E));
}

ct_tensor *ct_nn_mha_forward(const ct_nn_mha *m, ct_nn_ctx *ctx,
                             ct_tensor *query, ct_tensor *key, ct_tensor *value,
                             const ct_nn_attn_masks *masks,
                             ct_tensor **weights) {
  return ct_nn_linear_forward(
      &m->out_proj, mha_heads(m, ctx, query, key, value, masks, weights));
}

ct_tensor *ct_nn_mha_forward_add_dropout(const ct_nn_mha *m, ct_nn_ctx *ctx,
                                         ct_tensor *query, ct_tensor *key,
                                         ct_tensor *value,
                                         const ct_nn_attn_masks *masks,
                                         ct_tensor *residual, float p) {
  if (!ct_nn_dropout_active(ctx, p) || !residual)
    return ct_nn_add_dropout(
        ctx, residual,
        ct_nn_mha_forward(m, ctx, query, key, value, masks, NULL), p);
  ct_tensor *heads = mha_heads(m, ctx, query, key, value, masks, NULL);
  if (!heads) return NULL;
  // The add's dropout site comes after the attention's own, as in the
  // separate ops.
  const ct_linear_fusion f = {
      .residual = residual,
      .residual_dropout = p,
      .dropout_seed = ctx->seed,
      .residual_stream = ct_nn_next_dropout_stream(ctx)};
  return ct_linear_fused(heads, m->out_proj.weight, m->out_proj.bias, &f);
}

ct_tensor *ct_nn_mha_forward_residual(const ct_nn_mha *m, ct_nn_ctx *ctx,
                                      ct_tensor *query, ct_tensor *key,
                                      ct_tensor *value,
                                      const ct_nn_attn_masks *masks,
                                      ct_tensor **weights,
                                      ct_tensor *residual) {
  ct_tensor *heads = mha_heads(m, ctx, query, key, value, masks, weights);
  if (!heads) return NULL;
  const ct_linear_fusion f = {.residual = residual};
  return ct_linear_fused(heads, m->out_proj.weight, m->out_proj.bias, &f);
}
