// Deformable DETR: the model (see deformable_detr.h); its loss is DETR's set
// loss with the focal options (nn/detr.h).
#include "nn/deformable_detr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/ops_conv.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "nn/init.h"
#include "nn/mlp.h"

// The reference's eps of inverse_sigmoid and its prior probability.
static const float INV_SIGMOID_EPS = 1e-5f;
static const double PRIOR_PROB = 0.01;

ct_nn_detr_loss_opts ct_nn_ddetr_loss_defaults(void) {
  ct_nn_detr_loss_opts o = ct_nn_detr_loss_defaults();
  o.match.class_w = 2.0;
  o.match.focal = true;
  o.match.focal_alpha = 0.25;
  o.match.focal_gamma = 2.0;
  o.ce_w = 2.0;
  return o;
}

// ---- init -------------------------------------------------------------------

static ct_status check_config(const ct_nn_ddetr_config *c) {
  if (c->in_channels < 1 || c->num_classes < 1 || c->num_queries < 1)
    return ct_error(CT_ERR_ARG,
                    "deformable_detr: in_channels %lld, num_classes %lld and "
                    "num_queries %lld must be >= 1",
                    (long long)c->in_channels, (long long)c->num_classes,
                    (long long)c->num_queries);
  if (c->nhead < 1 || c->d_model < CT_NN_DDETR_GROUPS ||
      c->d_model % CT_NN_DDETR_GROUPS || c->d_model % c->nhead ||
      c->d_model % 2)
    return ct_error(CT_ERR_ARG,
                    "deformable_detr: d_model %lld must be a multiple of %d "
                    "(GroupNorm's groups) and of the %lld heads",
                    (long long)c->d_model, (int)CT_NN_DDETR_GROUPS,
                    (long long)c->nhead);
  if (c->enc_layers < 1 || c->dec_layers < 1 ||
      c->dec_layers > CT_NN_DETR_MAX_LAYERS)
    return ct_error(CT_ERR_ARG,
                    "deformable_detr: enc_layers %d must be >= 1 and "
                    "dec_layers %d in 1..%d",
                    c->enc_layers, c->dec_layers, (int)CT_NN_DETR_MAX_LAYERS);
  if (c->n_levels < 1 || c->n_levels > CT_NN_DDETR_MAX_LEVELS ||
      c->n_points < 1)
    return ct_error(CT_ERR_ARG,
                    "deformable_detr: n_levels %d must be in 1..%d and "
                    "n_points %d >= 1",
                    c->n_levels, (int)CT_NN_DDETR_MAX_LEVELS, c->n_points);
  if (c->dim_feedforward < 1 || !(c->dropout >= 0.0f && c->dropout < 1.0f))
    return ct_error(CT_ERR_ARG,
                    "deformable_detr: dim_feedforward %lld must be >= 1 and "
                    "dropout %g in [0, 1)",
                    (long long)c->dim_feedforward, (double)c->dropout);
  return CT_OK;
}

static ct_status linear_at(ct_nn_linear *l, ct_params *p, const char *prefix,
                           const char *leaf, int64_t in, int64_t out,
                           ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "%s", leaf);
  return st == CT_OK ? ct_nn_linear_init(l, p, name, in, out, true, rng) : st;
}

static ct_status layernorm_at(ct_nn_layernorm *n, ct_params *p,
                              const char *prefix, const char *leaf, int64_t d) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "%s", leaf);
  return st == CT_OK ? ct_nn_layernorm_init(n, p, name, d, 1e-5f) : st;
}

// The transformer's xavier_uniform pass over a layer's own >= 2-d weights
// (MSDeformAttn's keep their reset).
static ct_status xavier(ct_tensor *const *ws, int n, ct_rng *rng) {
  ct_status st = CT_OK;
  for (int i = 0; i < n && st == CT_OK; i++)
    st = ct_nn_init_xavier_uniform(ws[i], rng, 1.0f);
  return st;
}

static ct_status encoder_layer_init(ct_nn_ddetr_enc_layer *l, ct_params *p,
                                    const char *prefix,
                                    const ct_nn_ddetr_config *c, ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "self_attn");
  if (st == CT_OK)
    st = ct_nn_ms_deform_attn_init(&l->self_attn, p, name, c->d_model,
                                   c->n_levels, c->nhead, c->n_points, rng);
  if (st == CT_OK) st = layernorm_at(&l->norm1, p, prefix, "norm1", c->d_model);
  if (st == CT_OK)
    st = linear_at(&l->linear1, p, prefix, "linear1", c->d_model,
                   c->dim_feedforward, rng);
  if (st == CT_OK)
    st = linear_at(&l->linear2, p, prefix, "linear2", c->dim_feedforward,
                   c->d_model, rng);
  if (st == CT_OK) st = layernorm_at(&l->norm2, p, prefix, "norm2", c->d_model);
  if (st == CT_OK)
    st = xavier((ct_tensor *[]){l->linear1.weight, l->linear2.weight}, 2, rng);
  return st;
}

static ct_status decoder_layer_init(ct_nn_ddetr_dec_layer *l, ct_params *p,
                                    const char *prefix,
                                    const ct_nn_ddetr_config *c, ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "cross_attn");
  if (st == CT_OK)
    st = ct_nn_ms_deform_attn_init(&l->cross_attn, p, name, c->d_model,
                                   c->n_levels, c->nhead, c->n_points, rng);
  if (st == CT_OK) st = layernorm_at(&l->norm1, p, prefix, "norm1", c->d_model);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "self_attn");
  if (st == CT_OK)
    st = ct_nn_mha_init(&l->self_attn, p, name, c->d_model, c->nhead,
                        c->dropout, true, rng);
  if (st == CT_OK) st = layernorm_at(&l->norm2, p, prefix, "norm2", c->d_model);
  if (st == CT_OK)
    st = linear_at(&l->linear1, p, prefix, "linear1", c->d_model,
                   c->dim_feedforward, rng);
  if (st == CT_OK)
    st = linear_at(&l->linear2, p, prefix, "linear2", c->dim_feedforward,
                   c->d_model, rng);
  if (st == CT_OK) st = layernorm_at(&l->norm3, p, prefix, "norm3", c->d_model);
  if (st == CT_OK)
    st = xavier((ct_tensor *[]){l->self_attn.in_proj_weight,
                                l->self_attn.out_proj.weight, l->linear1.weight,
                                l->linear2.weight},
                4, rng);
  return st;
}

// input_proj.l: the conv (1x1 of a backbone stage, or 3x3 stride 2) and
// GroupNorm(32, d).
static ct_status input_proj_init(ct_nn_deformable_detr *m, ct_params *p,
                                 const char *prefix, int l, ct_rng *rng) {
  const ct_nn_ddetr_config *c = &m->cfg;
  const int S = c->backbone_stages, Lb = m->backbone_levels;
  int64_t in;
  if (l < Lb)
    in = c->backbone_width << (S - Lb + l);
  else
    in = l == Lb ? m->backbone.feature_channels : c->d_model;
  const bool extra = l >= Lb;
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "input_proj.%d.0", l);
  if (st == CT_OK)
    st = ct_nn_conv2d_init(&m->input_conv[l], p, name, in, c->d_model,
                           extra ? 3 : 1, extra ? 2 : 1, extra ? 1 : 0, true,
                           rng);
  if (st == CT_OK)
    st = ct_nn_init_xavier_uniform(m->input_conv[l].weight, rng, 1.0f);
  if (st == CT_OK) st = ct_nn_init_zeros(m->input_conv[l].bias);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "input_proj.%d.1", l);
  if (st != CT_OK) return st;
  m->gn_weight[l] =
      ct_nn_param(p, name, "weight", CT_SHAPE(c->d_model), CT_PARAM_NO_DECAY);
  m->gn_bias[l] =
      ct_nn_param(p, name, "bias", CT_SHAPE(c->d_model), CT_PARAM_NO_DECAY);
  if (!m->gn_weight[l] || !m->gn_bias[l]) return ct_last_status();
  return ct_nn_init_ones(m->gn_weight[l]);
}

// class_embed.j and bbox_embed.j.layers.{0,1,2}, with the reference's init.
static ct_status heads_init(ct_nn_deformable_detr *m, ct_params *p,
                            const char *prefix, ct_rng *rng) {
  const int64_t d = m->cfg.d_model, K = m->cfg.num_classes;
  const float bias = (float)-log((1.0 - PRIOR_PROB) / PRIOR_PROB);
  ct_status st = CT_OK;
  for (int j = 0; j < m->heads && st == CT_OK; j++) {
    char leaf[64];
    snprintf(leaf, sizeof leaf, "class_embed.%d", j);
    st = linear_at(&m->class_embed[j], p, prefix, leaf, d, K, rng);
    for (int i = 0; i < 3 && st == CT_OK; i++) {
      snprintf(leaf, sizeof leaf, "bbox_embed.%d.layers.%d", j, i);
      st = linear_at(&m->bbox_embed[j].layers[i], p, prefix, leaf, d,
                     i == 2 ? 4 : d, rng);
    }
  }
  if (st != CT_OK) return st;
  // Head 0 as the reference's __init__ leaves it; the other heads are its
  // deep copies (_get_clones), made before the -2 of head 0's box sides.
  st = ct_nn_init_constant(m->class_embed[0].bias, bias);
  if (st == CT_OK) st = ct_nn_init_zeros(m->bbox_embed[0].layers[2].weight);
  if (st == CT_OK) st = ct_nn_init_zeros(m->bbox_embed[0].layers[2].bias);
  for (int j = 1; j < m->heads; j++) {
    ct_tensor *const from[] = {
        m->class_embed[0].weight,          m->class_embed[0].bias,
        m->bbox_embed[0].layers[0].weight, m->bbox_embed[0].layers[0].bias,
        m->bbox_embed[0].layers[1].weight, m->bbox_embed[0].layers[1].bias,
        m->bbox_embed[0].layers[2].weight, m->bbox_embed[0].layers[2].bias};
    ct_tensor *const to[] = {
        m->class_embed[j].weight,          m->class_embed[j].bias,
        m->bbox_embed[j].layers[0].weight, m->bbox_embed[j].layers[0].bias,
        m->bbox_embed[j].layers[1].weight, m->bbox_embed[j].layers[1].bias,
        m->bbox_embed[j].layers[2].weight, m->bbox_embed[j].layers[2].bias};
    for (size_t i = 0; i < sizeof to / sizeof *to; i++)
      memcpy(ct_f32(to[i]), ct_f32(from[i]), ct_tensor_bytes(to[i]));
  }
  ct_f32(m->bbox_embed[0].layers[2].bias)[2] = -2.0f;
  ct_f32(m->bbox_embed[0].layers[2].bias)[3] = -2.0f;
  return CT_OK;
}

// In the order the reference's build() draws: backbone, transformer, then
// DeformableDETR.__init__'s heads, query_embed and input_proj.
ct_status ct_nn_ddetr_init(ct_nn_deformable_detr *m, ct_params *p,
                           const char *prefix, const ct_nn_ddetr_config *cfg,
                           ct_rng *init_rng) {
  memset(m, 0, sizeof *m);
  ct_status st = check_config(cfg);
  if (st != CT_OK) return st;
  m->cfg = *cfg;
  const ct_nn_ddetr_config *c = &m->cfg;
  const int64_t d = c->d_model;
  int Lb = c->n_levels < CT_NN_DDETR_BACKBONE_LEVELS
               ? c->n_levels
               : CT_NN_DDETR_BACKBONE_LEVELS;
  m->backbone_levels = Lb < c->backbone_stages ? Lb : c->backbone_stages;
  m->heads = c->box_refine ? c->dec_layers : 1;
  m->enc = calloc((size_t)c->enc_layers, sizeof *m->enc);
  m->dec = calloc((size_t)c->dec_layers, sizeof *m->dec);
  if (!m->enc || !m->dec) {
    ct_nn_ddetr_free(m);
    return ct_error(CT_ERR_NOMEM, "deformable_detr: out of memory");
  }
  char name[CT_NN_NAME_MAX];
  st = ct_nn_name(name, prefix, "backbone.0.body");
  const ct_nn_resnet_config rc = {.in_channels = c->in_channels,
                                  .num_classes = 0,
                                  .width = c->backbone_width,
                                  .stages = c->backbone_stages,
                                  .blocks = c->backbone_blocks};
  if (st == CT_OK) st = ct_nn_resnet_init(&m->backbone, p, name, &rc, init_rng);
  for (int i = 0; i < c->enc_layers && st == CT_OK; i++) {
    st = ct_nn_name(name, prefix, "transformer.encoder.layers.%d", i);
    if (st == CT_OK) st = encoder_layer_init(&m->enc[i], p, name, c, init_rng);
  }
  for (int i = 0; i < c->dec_layers && st == CT_OK; i++) {
    st = ct_nn_name(name, prefix, "transformer.decoder.layers.%d", i);
    if (st == CT_OK) st = decoder_layer_init(&m->dec[i], p, name, c, init_rng);
  }
  if (st == CT_OK)
    st = linear_at(&m->reference_points, p, prefix,
                   "transformer.reference_points", d, 2, init_rng);
  if (st == CT_OK)
    st = ct_nn_init_xavier_uniform(m->reference_points.weight, init_rng, 1.0f);
  if (st == CT_OK) st = ct_nn_init_zeros(m->reference_points.bias);
  if (st == CT_OK) {
    m->level_embed = ct_nn_param(p, prefix, "transformer.level_embed",
                                 CT_SHAPE(c->n_levels, d), CT_PARAM_NO_DECAY);
    st = m->level_embed ? ct_nn_init_normal(m->level_embed, init_rng, 0, 1)
                        : ct_last_status();
  }
  if (st == CT_OK) st = heads_init(m, p, prefix, init_rng);
  if (st == CT_OK) {
    m->query_embed =
        ct_nn_param(p, prefix, "query_embed.weight",
                    CT_SHAPE(c->num_queries, 2 * d), CT_PARAM_NO_DECAY);
    st = m->query_embed ? ct_nn_init_normal(m->query_embed, init_rng, 0, 1)
                        : ct_last_status();
  }
  for (int l = 0; l < c->n_levels && st == CT_OK; l++)
    st = input_proj_init(m, p, prefix, l, init_rng);
  if (st != CT_OK) ct_nn_ddetr_free(m);
  return st;
}

void ct_nn_ddetr_free(ct_nn_deformable_detr *m) {
  ct_nn_resnet_free(&m->backbone);
  free(m->enc);
  free(m->dec);
  m->enc = NULL;
  m->dec = NULL;
}

// ---- forward ----------------------------------------------------------------

// The status after an op chain returned NULL.
static ct_status failed(const char *what) {
  ct_status st = ct_last_status();
  return st != CT_OK
             ? st
             : ct_error(CT_ERR_STATE, "deformable_detr: %s failed", what);
}

// norm(x + dropout(y)): the post-norm residual (one dropout site).
static ct_tensor *residual_norm(ct_nn_ctx *ctx, const ct_nn_layernorm *norm,
                                float p, ct_tensor *x, ct_tensor *y) {
  return ct_nn_layernorm_forward(norm, ct_nn_add_dropout(ctx, x, y, p));
}

// The feed-forward sublayer (forward_ffn): two dropout sites.
static ct_tensor *feedforward(ct_nn_ctx *ctx, const ct_nn_linear *linear1,
                              const ct_nn_linear *linear2,
                              const ct_nn_layernorm *norm, float p,
                              ct_tensor *x) {
  ct_tensor *y = ct_nn_feedforward(ctx, linear1, linear2, CT_NN_RELU, p, x);
  return residual_norm(ctx, norm, p, x, y);
}

// The feature levels (B, d, h_l, w_l) of images; shapes gets (h_l, w_l).
static ct_status feature_levels(const ct_nn_deformable_detr *m, ct_nn_ctx *ctx,
                                ct_tensor *images, ct_tensor **src,
                                int64_t *shapes) {
  const ct_nn_ddetr_config *c = &m->cfg;
  ct_tensor *stages[16];
  ct_status st = ct_nn_resnet_stage_features(&m->backbone, ctx, images, stages);
  if (st != CT_OK) return st;
  const int S = c->backbone_stages, Lb = m->backbone_levels;
  for (int l = 0; l < c->n_levels; l++) {
    ct_tensor *in = l < Lb    ? stages[S - Lb + l]
                    : l == Lb ? stages[S - 1]
                              : src[l - 1];
    src[l] = ct_group_norm(ct_nn_conv2d_forward(&m->input_conv[l], in),
                           CT_NN_DDETR_GROUPS, m->gn_weight[l], m->gn_bias[l],
                           1e-5f);
    if (!src[l]) return failed("input projection");
    shapes[2 * l] = src[l]->shape[2];
    shapes[2 * l + 1] = src[l]->shape[3];
  }
  return CT_OK;
}

// The encoder's reference points (B, S, L, 2): every token's pixel centre
// ((x + 0.5) / w_l, (y + 0.5) / h_l) of its own level, repeated for every
// level (valid ratios 1). In float, as the reference's linspace / H.
static ct_tensor *encoder_reference(int64_t B, int L, const int64_t *shapes,
                                    int64_t S) {
  ct_tensor *r = ct_tensor_empty(CT_F32, CT_SHAPE(B, S, L, 2));
  if (!r) return NULL;
  float *o = ct_f32(r);
  int64_t t = 0;
  for (int l = 0; l < L; l++) {
    const int64_t h = shapes[2 * l], w = shapes[2 * l + 1];
    for (int64_t y = 0; y < h; y++)
      for (int64_t x = 0; x < w; x++, t++)
        for (int k = 0; k < L; k++) {
          o[(t * L + k) * 2] = ((float)x + 0.5f) / (float)w;
          o[(t * L + k) * 2 + 1] = ((float)y + 0.5f) / (float)h;
        }
  }
  for (int64_t b = 1; b < B; b++)
    memcpy(o + b * S * L * 2, o, sizeof(float) * (size_t)(S * L * 2));
  return r;
}

// ref (B, N, k) -> (B, N, L, k): the same point on every level.
static ct_tensor *per_level(ct_tensor *ref, int L) {
  if (!ref) return NULL;
  const int64_t B = ref->shape[0], N = ref->shape[1], k = ref->shape[2];
  ct_tensor *one = ct_reshape(ref, CT_SHAPE(B, N, 1, k));
  ct_tensor *copies[CT_NN_DDETR_MAX_LEVELS];
  for (int l = 0; l < L; l++) copies[l] = one;
  return L == 1 ? one : ct_concat(copies, L, 2);
}

// bbox_embed(hs) + inverse_sigmoid(ref) on (cx, cy) (2-d ref) or on all four.
static ct_tensor *box_logits(const ct_nn_detr_mlp *mlp, ct_tensor *hs,
                             ct_tensor *ref) {
  ct_tensor *x = hs;
  for (int i = 0; i < 3; i++) {
    x = ct_nn_linear_forward(&mlp->layers[i], x);
    if (i < 2) x = ct_relu(x);
  }
  ct_tensor *inv = ct_inverse_sigmoid(ref, INV_SIGMOID_EPS);
  if (inv && inv->shape[2] == 2) {
    ct_tensor *z =
        ct_tensor_zeros(CT_F32, CT_SHAPE(inv->shape[0], inv->shape[1], 2));
    inv = ct_concat((ct_tensor *[]){inv, z}, 2, 2);
  }
  return ct_add(x, inv);
}

// A copy without gradient (the reference's .detach()).
static ct_tensor *detach(const ct_tensor *x) {
  if (!x) return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  if (y) memcpy(ct_f32(y), ct_f32(x), ct_tensor_bytes(x));
  return y;
}

ct_status ct_nn_ddetr_forward(const ct_nn_deformable_detr *m, ct_nn_ctx *ctx,
                              ct_tensor *images, ct_nn_detr_out *out) {
  memset(out, 0, sizeof *out);
  if (!images) return failed("forward (images NULL)");
  const ct_nn_ddetr_config *c = &m->cfg;
  if (images->dtype != CT_F32 || images->ndim != 4 ||
      images->shape[1] != c->in_channels) {
    char s[64];
    return ct_error(CT_ERR_SHAPE,
                    "deformable_detr: images must be f32 (B, %lld, H, W), "
                    "got %s %s",
                    (long long)c->in_channels, ct_dtype_name(images->dtype),
                    ct_shape_str(images->ndim, images->shape, s, sizeof s));
  }
  const int64_t B = images->shape[0], d = c->d_model, N = c->num_queries;
  const int L = c->n_levels;
  ct_tensor *src[CT_NN_DDETR_MAX_LEVELS];
  int64_t shapes[2 * CT_NN_DDETR_MAX_LEVELS];
  ct_status st = feature_levels(m, ctx, images, src, shapes);
  if (st != CT_OK) return st;

  // Tokens (B, S, d) and positions (S, d), level by level.
  ct_tensor *tokens[CT_NN_DDETR_MAX_LEVELS], *pos[CT_NN_DDETR_MAX_LEVELS];
  int64_t S = 0;
  for (int l = 0; l < L; l++) {
    const int64_t h = shapes[2 * l], w = shapes[2 * l + 1];
    tokens[l] = ct_transpose(ct_reshape(src[l], CT_SHAPE(B, d, h * w)), 1, 2);
    pos[l] = ct_add(ct_nn_position_sine_offset(h, w, d, -0.5),
                    ct_slice(m->level_embed, 0, l, 1));
    S += h * w;
  }
  ct_tensor *x = L == 1 ? tokens[0] : ct_concat(tokens, L, 1);
  ct_tensor *pos_all = L == 1 ? pos[0] : ct_concat(pos, L, 0);
  ct_tensor *enc_ref = encoder_reference(B, L, shapes, S);
  const float p = c->dropout;
  for (int i = 0; i < c->enc_layers; i++) {
    const ct_nn_ddetr_enc_layer *l = &m->enc[i];
    ct_tensor *a = ct_nn_ms_deform_attn_forward(
        &l->self_attn, ct_add(x, pos_all), enc_ref, x, shapes, NULL);
    x = residual_norm(ctx, &l->norm1, p, x, a);
    x = feedforward(ctx, &l->linear1, &l->linear2, &l->norm2, p, x);
  }
  ct_tensor *memory = x;
  if (!memory) return failed("encoder");

  // The decoder: query_pos and tgt from query_embed's halves.
  ct_tensor *zeros = ct_tensor_zeros(CT_F32, CT_SHAPE(B, N, d));
  ct_tensor *query_pos = ct_add(zeros, ct_slice(m->query_embed, 1, 0, d));
  ct_tensor *t = ct_add(zeros, ct_slice(m->query_embed, 1, d, d));
  ct_tensor *ref =
      ct_sigmoid(ct_nn_linear_forward(&m->reference_points, query_pos));
  const int D = c->dec_layers;
  out->layers = c->aux_loss ? D : 1;
  for (int i = 0; i < D; i++) {
    const ct_nn_ddetr_dec_layer *l = &m->dec[i];
    ct_tensor *qk = ct_add(t, query_pos);
    ct_tensor *a = ct_nn_mha_forward(&l->self_attn, ctx, qk, qk, t, NULL, NULL);
    t = residual_norm(ctx, &l->norm2, p, t, a);
    a = ct_nn_ms_deform_attn_forward(&l->cross_attn, ct_add(t, query_pos),
                                     per_level(ref, L), memory, shapes, NULL);
    t = residual_norm(ctx, &l->norm1, p, t, a);
    t = feedforward(ctx, &l->linear1, &l->linear2, &l->norm3, p, t);
    const int slot = i - (D - out->layers);
    const int head = c->box_refine ? i : 0;
    ct_tensor *boxes = NULL;
    if (c->box_refine || slot >= 0)
      boxes = ct_sigmoid(box_logits(&m->bbox_embed[head], t, ref));
    if (slot >= 0) {
      out->logits[slot] = ct_nn_linear_forward(&m->class_embed[head], t);
      out->boxes[slot] = boxes;
    }
    if (c->box_refine) ref = detach(boxes);
  }
  for (int l = 0; l < out->layers; l++)
    if (!out->logits[l] || !out->boxes[l]) return failed("forward");
  return CT_OK;
}
