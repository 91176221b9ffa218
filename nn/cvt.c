// CvT blocks and classifier (see cvt.h).
#include "nn/cvt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_conv.h"
#include "nn/init.h"
#include "nn/timm.h"

static const float LN_EPS = 1e-5f;

// The depthwise convolutions of the dw_bn projection: 3x3, padding 1, as
// the reference's kernel_size, padding_q and padding_kv.
enum { QKV_KERNEL = 3, QKV_PADDING = 1 };

static bool is_rate(float r) { return r >= 0.0f && r < 1.0f; }

static ct_status check_block_config(const ct_nn_cvt_block_config *c) {
  if (c->dim < 1 || c->heads < 1 || c->dim % c->heads)
    return ct_error(CT_ERR_ARG,
                    "cvt block: dim %lld must be a positive multiple of "
                    "heads %lld",
                    (long long)c->dim, (long long)c->heads);
  if (c->h < 1 || c->w < 1 || c->mlp_dim < 1)
    return ct_error(CT_ERR_ARG,
                    "cvt block: need a map and mlp_dim >= 1 (got %lldx%lld, "
                    "mlp_dim %lld)",
                    (long long)c->h, (long long)c->w, (long long)c->mlp_dim);
  if (c->projection != CT_NN_CVT_DW_BN && c->projection != CT_NN_CVT_LINEAR)
    return ct_error(CT_ERR_ARG, "cvt block: unknown projection %d",
                    (int)c->projection);
  if (c->projection == CT_NN_CVT_DW_BN && (c->stride_q < 1 || c->stride_kv < 1))
    return ct_error(CT_ERR_ARG,
                    "cvt block: stride_q %d and stride_kv %d must be >= 1",
                    c->stride_q, c->stride_kv);
  if (!is_rate(c->dropout) || !is_rate(c->attn_dropout) ||
      !is_rate(c->drop_path))
    return ct_error(CT_ERR_ARG,
                    "cvt block: dropout rates must lie in [0, 1) (got %g, "
                    "%g, %g)",
                    (double)c->dropout, (double)c->attn_dropout,
                    (double)c->drop_path);
  return CT_OK;
}

// "prefix.conv_proj_X": a depthwise conv (D, 1, 3, 3) and its BatchNorm.
static ct_status conv_proj_init(ct_nn_cvt_conv_proj *m, ct_params *p,
                                const char *prefix, const char *leaf,
                                int64_t dim, int stride, ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "%s.conv", leaf);
  // in_channels 1: the weight (D, 1, 3, 3) and fan_in 9 of a Conv2d with
  // groups = D.
  if (st == CT_OK)
    st = ct_nn_conv2d_init(&m->conv, p, name, 1, dim, QKV_KERNEL, stride,
                           QKV_PADDING, false, rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "%s.bn", leaf);
  if (st == CT_OK) st = ct_nn_batchnorm2d_init(&m->bn, p, name, dim);
  return st;
}

ct_status ct_nn_cvt_block_init(ct_nn_cvt_block *m, ct_params *p,
                               const char *prefix,
                               const ct_nn_cvt_block_config *cfg,
                               ct_rng *init_rng) {
  *m = (ct_nn_cvt_block){0};
  ct_status st = check_block_config(cfg);
  if (st != CT_OK) return st;
  m->cfg = *cfg;
  const int64_t D = cfg->dim;
  const double width =
      cfg->scale == CT_NN_CVT_SCALE_HEAD ? (double)(D / cfg->heads) : (double)D;
  m->scale = (float)(1.0 / sqrt(width));
  char name[CT_NN_NAME_MAX];
  st = ct_nn_name(name, prefix, "norm1");
  if (st == CT_OK) st = ct_nn_layernorm_init(&m->norm1, p, name, D, LN_EPS);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "attn");
  if (st == CT_OK && cfg->projection == CT_NN_CVT_DW_BN) {
    st = conv_proj_init(&m->conv_q, p, name, "conv_proj_q", D, cfg->stride_q,
                        init_rng);
    if (st == CT_OK)
      st = conv_proj_init(&m->conv_k, p, name, "conv_proj_k", D, cfg->stride_kv,
                          init_rng);
    if (st == CT_OK)
      st = conv_proj_init(&m->conv_v, p, name, "conv_proj_v", D, cfg->stride_kv,
                          init_rng);
  }
  ct_nn_linear *projs[3] = {&m->proj_q, &m->proj_k, &m->proj_v};
  const char *leaves[3] = {"proj_q", "proj_k", "proj_v"};
  for (int i = 0; i < 3 && st == CT_OK; i++)
    st = ct_nn_timm_linear_init(projs[i], p, name, leaves[i], D, D,
                                cfg->qkv_bias, init_rng);
  if (st == CT_OK)
    st =
        ct_nn_timm_linear_init(&m->proj, p, name, "proj", D, D, true, init_rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "norm2");
  if (st == CT_OK) st = ct_nn_layernorm_init(&m->norm2, p, name, D, LN_EPS);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "mlp");
  m->mlp.act = cfg->act;
  m->mlp.dropout = cfg->dropout;
  if (st == CT_OK)
    st = ct_nn_timm_linear_init(&m->mlp.fc1, p, name, "fc1", D, cfg->mlp_dim,
                                true, init_rng);
  if (st == CT_OK)
    st = ct_nn_timm_linear_init(&m->mlp.fc2, p, name, "fc2", cfg->mlp_dim, D,
                                true, init_rng);
  return st;
}

// tokens (B, h*w, D) -> map (B, D, h, w)
static ct_tensor *tokens_to_map(ct_tensor *t, int64_t h, int64_t w) {
  if (!t) return NULL;
  return ct_reshape(ct_transpose(t, 1, 2),
                    CT_SHAPE(t->shape[0], t->shape[2], h, w));
}

// map (B, D, h, w) -> tokens (B, h*w, D), row-major over the map
static ct_tensor *map_to_tokens(ct_tensor *x) {
  if (!x) return NULL;
  return ct_transpose(ct_reshape(x, CT_SHAPE(x->shape[0], x->shape[1], -1)), 1,
                      2);
}

// tokens (B, h*w, D) of an h x w map -> tokens (B, h'*w', D): the
// depthwise conv and its BatchNorm2d, computed on the tokens (channels last)
// with the bits of the reference's conv and bn on the map.
static ct_tensor *conv_proj_forward(const ct_nn_cvt_conv_proj *m,
                                    ct_nn_ctx *ctx, ct_tensor *t, int64_t h,
                                    int64_t w) {
  ct_tensor *y = ct_conv2d_depthwise_tokens(t, h, w, m->conv.weight,
                                            m->conv.stride, m->conv.padding);
  return ct_nn_batchnorm_tokens_forward(&m->bn, ctx, y);
}

// [cls; t] along the tokens, or t alone.
static ct_tensor *join_cls(ct_tensor *cls, ct_tensor *t) {
  if (!cls) return t;
  ct_tensor *parts[2] = {cls, t};
  return ct_concat(parts, 2, 1);
}

// How the tokens of a block's queries (or keys and values) come from its
// h x w map: token (r, c) of their map is the output (r, c) of a conv
// (kernel, stride, padding) over it. dw_bn: the depthwise 3x3 conv at
// stride_q (stride_kv); linear: the map itself, a 1x1 conv at stride 1.
typedef struct token_conv {
  int64_t kernel, stride, padding;
} token_conv;

static token_conv query_conv(const ct_nn_cvt_block_config *c) {
  if (c->projection == CT_NN_CVT_LINEAR) return (token_conv){1, 1, 0};
  return (token_conv){QKV_KERNEL, c->stride_q, QKV_PADDING};
}

static token_conv key_conv(const ct_nn_cvt_block_config *c) {
  if (c->projection == CT_NN_CVT_LINEAR) return (token_conv){1, 1, 0};
  return (token_conv){QKV_KERNEL, c->stride_kv, QKV_PADDING};
}

// The side of the map a conv makes of `in` (PyTorch's Conv2d output size);
// 0 if it does not fit.
static int64_t conv_side(int64_t in, token_conv k) {
  const int64_t span = in + 2 * k.padding - k.kernel;
  return span < 0 ? 0 : span / k.stride + 1;
}

// The multi-head attention of normed tokens x (B, T, D), before proj.
// Takes the attention dropout's site; records the per-head weights (B, NH,
// Nq, Nk) in ctx's attention log when it has one.
static ct_tensor *attention(const ct_nn_cvt_block *m, ct_nn_ctx *ctx,
                            ct_tensor *x) {
  if (!x) return NULL;
  const ct_nn_cvt_block_config *c = &m->cfg;
  const int64_t B = x->shape[0], D = c->dim, NH = c->heads;
  ct_tensor *q = x, *k = x, *v = x;
  if (c->projection == CT_NN_CVT_DW_BN) {
    ct_tensor *cls = NULL, *t = x;
    if (c->cls_token) {
      cls = ct_slice(x, 1, 0, 1);
      t = ct_slice(x, 1, 1, c->h * c->w);
    }
    q = join_cls(cls, conv_proj_forward(&m->conv_q, ctx, t, c->h, c->w));
    k = join_cls(cls, conv_proj_forward(&m->conv_k, ctx, t, c->h, c->w));
    v = join_cls(cls, conv_proj_forward(&m->conv_v, ctx, t, c->h, c->w));
  }
  const int64_t Dh = D / NH;
  q = ct_reshape(ct_nn_linear_forward(&m->proj_q, q), CT_SHAPE(B, -1, NH, Dh));
  k = ct_reshape(ct_nn_linear_forward(&m->proj_k, k), CT_SHAPE(B, -1, NH, Dh));
  v = ct_reshape(ct_nn_linear_forward(&m->proj_v, v), CT_SHAPE(B, -1, NH, Dh));
  if (!q || !k || !v) return NULL;
  if (ctx && ctx->attention) {
    const ct_nn_attention_scores scores = {.q = ct_f32(q),
                                           .k = ct_f32(k),
                                           .q_stride = D,
                                           .k_stride = D,
                                           .groups = B,
                                           .heads = NH,
                                           .Nq = q->shape[1],
                                           .Nk = k->shape[1],
                                           .Dh = Dh,
                                           .scale = m->scale};
    ct_tensor *w = ct_nn_attention_weights(&scores);
    if (!w || !ct_nn_attention_record(ctx, w, 1)) return NULL;
  }
  ct_attention_opts o = ct_attention_defaults();
  o.scale = m->scale;
  const uint64_t stream = ctx ? ct_nn_next_dropout_stream(ctx) : 0;
  if (ct_nn_dropout_active(ctx, c->attn_dropout)) {
    o.dropout_p = c->attn_dropout;
    o.dropout_seed = ctx->seed;
    o.dropout_stream = stream;
  }
  return ct_reshape(ct_attention(q, k, v, &o), CT_SHAPE(B, -1, D));
}

ct_tensor *ct_nn_cvt_block_forward(const ct_nn_cvt_block *m, ct_nn_ctx *ctx,
                                   ct_tensor *x) {
  if (!x) return NULL;
  const ct_nn_cvt_block_config *c = &m->cfg;
  const int64_t T = c->h * c->w + (c->cls_token ? 1 : 0);
  if (x->ndim != 3 || x->shape[1] != T || x->shape[2] != c->dim) {
    char got[96];
    ct_error(CT_ERR_SHAPE, "cvt block: x must be (B, %lld, %lld), got %s",
             (long long)T, (long long)c->dim,
             ct_shape_str(x->ndim, x->shape, got, sizeof got));
    return NULL;
  }
  const bool no_drop_path = !ct_nn_drop_path_active(ctx, c->drop_path);
  ct_tensor *a = attention(m, ctx, ct_nn_layernorm_forward(&m->norm1, x));
  if (no_drop_path && !ct_nn_dropout_active(ctx, c->dropout)) {
    // proj and the residual add in one op
    x = a ? ct_linear_fused(a, m->proj.weight, m->proj.bias,
                            &(ct_linear_fusion){.residual = x})
          : NULL;
    if (ctx) {  // the sites of the proj dropout and the drop path
      ct_nn_next_dropout_stream(ctx);
      ct_nn_next_dropout_stream(ctx);
    }
  } else {
    ct_tensor *h =
        ct_nn_dropout(ctx, ct_nn_linear_forward(&m->proj, a), c->dropout);
    x = ct_nn_drop_path_add(ctx, x, h, c->drop_path, 1);
  }
  ct_tensor *h = ct_nn_layernorm_forward(&m->norm2, x);
  if (no_drop_path) {
    x = ct_nn_mlp_forward_residual(&m->mlp, ctx, h, x);
    if (ctx) ct_nn_next_dropout_stream(ctx);  // the drop path's site
  } else {
    x = ct_nn_drop_path_add(ctx, x, ct_nn_mlp_forward(&m->mlp, ctx, h),
                            c->drop_path, 1);
  }
  return x;
}

// ---- the classifier ------------------------------------------------------------

// A stage's token embedding as a conv.
static token_conv embed_conv(const ct_nn_cvt_config *c, int i) {
  return (token_conv){c->embed_kernel[i], c->embed_stride[i],
                      c->embed_padding[i]};
}

static ct_status check_config(const ct_nn_cvt_config *c) {
  if (c->image_h < 1 || c->image_w < 1 || c->in_channels < 1)
    return ct_error(CT_ERR_ARG, "cvt: images %lldx%lldx%lld must not be empty",
                    (long long)c->in_channels, (long long)c->image_h,
                    (long long)c->image_w);
  if (c->stages < 1 || c->stages > CT_NN_CVT_MAX_STAGES)
    return ct_error(CT_ERR_ARG, "cvt: %d stages, want 1 to %d", c->stages,
                    (int)CT_NN_CVT_MAX_STAGES);
  int64_t h = c->image_h, w = c->image_w;
  for (int i = 0; i < c->stages; i++) {
    if (c->embed_kernel[i] < 1 || c->embed_stride[i] < 1 ||
        c->embed_padding[i] < 0)
      return ct_error(CT_ERR_ARG,
                      "cvt: stage %d's embedding kernel %lld and stride %lld "
                      "must be >= 1, padding %lld >= 0",
                      i, (long long)c->embed_kernel[i],
                      (long long)c->embed_stride[i],
                      (long long)c->embed_padding[i]);
    if (c->dims[i] < 1 || c->depths[i] < 1 || c->heads[i] < 1 ||
        c->dims[i] % c->heads[i])
      return ct_error(CT_ERR_ARG,
                      "cvt: stage %d has dim %lld, depth %lld and %lld heads "
                      "(all >= 1, the dim a multiple of the heads)",
                      i, (long long)c->dims[i], (long long)c->depths[i],
                      (long long)c->heads[i]);
    if (!is_rate(c->drop_path[i]))
      return ct_error(CT_ERR_ARG,
                      "cvt: stage %d's drop path %g must lie in [0, 1)", i,
                      (double)c->drop_path[i]);
    const int64_t nh = conv_side(h, embed_conv(c, i)),
                  nw = conv_side(w, embed_conv(c, i));
    if (nh < 1 || nw < 1)
      return ct_error(CT_ERR_ARG,
                      "cvt: stage %d's embedding (kernel %lld, padding %lld) "
                      "does not fit its %lldx%lld input",
                      i, (long long)c->embed_kernel[i],
                      (long long)c->embed_padding[i], (long long)h,
                      (long long)w);
    h = nh;
    w = nw;
  }
  if (c->num_classes < 1 || !(c->mlp_ratio > 0.0f))
    return ct_error(CT_ERR_ARG,
                    "cvt: classes %lld and mlp_ratio %g must be positive",
                    (long long)c->num_classes, (double)c->mlp_ratio);
  for (int i = 0; i < c->stages; i++)
    if ((int64_t)((float)c->dims[i] * c->mlp_ratio) < 1)
      return ct_error(CT_ERR_ARG,
                      "cvt: mlp_ratio %g gives stage %d (dim %lld) an MLP "
                      "narrower than 1",
                      (double)c->mlp_ratio, i, (long long)c->dims[i]);
  return CT_OK;
}

static ct_status stage_init(ct_nn_cvt_stage *s, ct_params *p,
                            const char *prefix, const ct_nn_cvt_config *c,
                            int i, int64_t in_channels, int64_t in_h,
                            int64_t in_w, ct_rng *rng) {
  const int64_t D = c->dims[i];
  const int k = (int)c->embed_kernel[i], st_ = (int)c->embed_stride[i],
            pad = (int)c->embed_padding[i];
  s->dim = D;
  s->depth = c->depths[i];
  s->h = conv_side(in_h, embed_conv(c, i));
  s->w = conv_side(in_w, embed_conv(c, i));
  const bool cls = c->cls_token && i == c->stages - 1;
  char name[CT_NN_NAME_MAX];
  ct_status st = CT_OK;
  if (cls) {
    s->cls_token = ct_nn_param(p, prefix, "cls_token", CT_SHAPE(1, 1, D),
                               CT_PARAM_NO_DECAY);
    st = s->cls_token ? ct_nn_init_trunc_normal(s->cls_token, rng, 0.0f, 0.02f,
                                                -2.0f, 2.0f)
                      : ct_last_status();
  }
  if (st == CT_OK) st = ct_nn_name(name, prefix, "patch_embed.proj");
  if (st == CT_OK)
    st = ct_nn_conv2d_init(&s->embed, p, name, in_channels, D, k, st_, pad,
                           true, rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "patch_embed.norm");
  if (st == CT_OK)
    st = ct_nn_layernorm_init(&s->embed_norm, p, name, D, LN_EPS);
  s->blocks = calloc((size_t)s->depth, sizeof *s->blocks);
  if (!s->blocks) return ct_error(CT_ERR_NOMEM, "cvt: out of memory");
  for (int64_t j = 0; j < s->depth && st == CT_OK; j++) {
    ct_nn_cvt_block_config bc = {
        .dim = D,
        .heads = c->heads[i],
        .h = s->h,
        .w = s->w,
        .cls_token = cls,
        .projection = c->projection,
        .stride_q = c->stride_q,
        .stride_kv = c->stride_kv,
        .qkv_bias = c->qkv_bias,
        .mlp_dim = (int64_t)((float)D * c->mlp_ratio),
        .act = c->act,
        .scale = c->scale,
        .dropout = c->dropout,
        .attn_dropout = c->attn_dropout,
        // torch.linspace(0, rate, depth)[j]
        .drop_path = s->depth > 1
                         ? c->drop_path[i] * (float)j / (float)(s->depth - 1)
                         : 0.0f};
    st = ct_nn_name(name, prefix, "blocks.%lld", (long long)j);
    if (st == CT_OK)
      st = ct_nn_cvt_block_init(&s->blocks[j], p, name, &bc, rng);
  }
  return st;
}

ct_status ct_nn_cvt_init(ct_nn_cvt *m, ct_params *p, const char *prefix,
                         const ct_nn_cvt_config *cfg, ct_rng *init_rng) {
  *m = (ct_nn_cvt){0};
  ct_status st = check_config(cfg);
  if (st != CT_OK) return st;
  m->cfg = *cfg;
  char name[CT_NN_NAME_MAX];
  int64_t C = cfg->in_channels, h = cfg->image_h, w = cfg->image_w;
  for (int i = 0; i < cfg->stages && st == CT_OK; i++) {
    st = ct_nn_name(name, prefix, "stage%d", i);
    if (st == CT_OK)
      st = stage_init(&m->stages[i], p, name, cfg, i, C, h, w, init_rng);
    C = m->stages[i].dim;
    h = m->stages[i].h;
    w = m->stages[i].w;
  }
  if (st == CT_OK) st = ct_nn_name(name, prefix, "norm");
  if (st == CT_OK) st = ct_nn_layernorm_init(&m->norm, p, name, C, LN_EPS);
  // The reference: nn.Linear's init, then trunc_normal(.02) on the weight.
  if (st == CT_OK) st = ct_nn_name(name, prefix, "head");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->head, p, name, C, cfg->num_classes, true,
                           init_rng);
  if (st == CT_OK)
    st = ct_nn_init_trunc_normal(m->head.weight, init_rng, 0.0f, 0.02f, -2.0f,
                                 2.0f);
  return st;
}

void ct_nn_cvt_free(ct_nn_cvt *m) {
  for (int i = 0; i < CT_NN_CVT_MAX_STAGES; i++) {
    free(m->stages[i].blocks);
    m->stages[i].blocks = NULL;
  }
}

// token (1, 1, D) -> (B, 1, D)
static ct_tensor *repeat_token(ct_tensor *token, int64_t B) {
  ct_tensor *zeros = ct_tensor_zeros(CT_F32, CT_SHAPE(B, 1, token->shape[2]));
  return ct_add(zeros, token);
}

// The places of a block's query (or key) tokens for an attention log: (1,
// [1 +] h'*w', 2) pixel centres (y, x) of the tokens conv k makes of the
// stage's h x w map, for image_h x image_w images; the class token (first)
// NAN. Token (r, c) sits at the centre of its conv window, map row
// stride * r - padding + (kernel - 1) / 2 (row r itself for the queries),
// and map row y lies at (y + 0.5) * image_h / h pixels (columns alike).
static ct_tensor *token_places(token_conv k, int64_t h, int64_t w, bool cls,
                               int64_t image_h, int64_t image_w) {
  const int64_t hk = conv_side(h, k), wk = conv_side(w, k), first = cls ? 1 : 0;
  ct_tensor *yx = ct_tensor_empty(CT_F32, CT_SHAPE(1, first + hk * wk, 2));
  if (!yx) return NULL;
  float *v = ct_f32(yx);
  if (cls) v[0] = v[1] = NAN;
  const double centre = (double)(k.kernel - 1) / 2.0 - (double)k.padding;
  for (int64_t r = 0; r < hk; r++)
    for (int64_t c = 0; c < wk; c++) {
      float *p = v + (first + r * wk + c) * 2;
      p[0] = (float)(((double)(k.stride * r) + centre + 0.5) * (double)image_h /
                     (double)h);
      p[1] = (float)(((double)(k.stride * c) + centre + 0.5) * (double)image_w /
                     (double)w);
    }
  return yx;
}

ct_tensor *ct_nn_cvt_forward(const ct_nn_cvt *m, ct_nn_ctx *ctx, ct_tensor *x) {
  if (!x) return NULL;
  const ct_nn_cvt_config *c = &m->cfg;
  if (x->dtype != CT_F32 || x->ndim != 4 || x->shape[1] != c->in_channels ||
      x->shape[2] != c->image_h || x->shape[3] != c->image_w) {
    char got[96];
    ct_error(
        CT_ERR_SHAPE, "cvt: expected images (B, %lld, %lld, %lld) f32, got %s",
        (long long)c->in_channels, (long long)c->image_h, (long long)c->image_w,
        ct_shape_str(x->ndim, x->shape, got, sizeof got));
    return NULL;
  }
  const int64_t B = x->shape[0];
  ct_tensor *t = NULL;
  for (int i = 0; i < c->stages; i++) {
    const ct_nn_cvt_stage *s = &m->stages[i];
    if (i > 0) x = tokens_to_map(t, m->stages[i - 1].h, m->stages[i - 1].w);
    t = ct_nn_layernorm_forward(
        &s->embed_norm, map_to_tokens(ct_nn_conv2d_forward(&s->embed, x)));
    if (s->cls_token) t = join_cls(repeat_token(s->cls_token, B), t);
    t = ct_nn_dropout(ctx, t, c->dropout);       // the reference's pos_drop
    ct_tensor *query_yx = NULL, *key_yx = NULL;  // the stage's, once
    for (int64_t j = 0; j < s->depth; j++) {
      t = ct_nn_cvt_block_forward(&s->blocks[j], ctx, t);
      if (t && ctx && ctx->attention) {
        const ct_nn_cvt_block_config *bc = &s->blocks[j].cfg;
        if (!query_yx) {
          query_yx = token_places(query_conv(bc), s->h, s->w, bc->cls_token,
                                  c->image_h, c->image_w);
          key_yx = token_places(key_conv(bc), s->h, s->w, bc->cls_token,
                                c->image_h, c->image_w);
          if (!query_yx || !key_yx) return NULL;
        }
        ct_nn_attention_layer *l =
            &ctx->attention->layers[ctx->attention->count - 1];
        l->query_yx = query_yx;
        l->key_yx = key_yx;
      }
    }
  }
  if (!t) return NULL;
  const int64_t D = m->stages[c->stages - 1].dim;
  ct_tensor *f;
  if (m->stages[c->stages - 1].cls_token) {
    f = ct_nn_layernorm_forward(
        &m->norm, ct_reshape(ct_slice(t, 1, 0, 1), CT_SHAPE(B, D)));
  } else {  // norm, then the mean over the tokens
    f = ct_mean_last(ct_transpose(ct_nn_layernorm_forward(&m->norm, t), 1, 2),
                     false);
  }
  return ct_nn_linear_forward(&m->head, f);
}

// How many of conv k's windows along one side of n tokens cover token y.
static int64_t windows_over(int64_t y, token_conv k, int64_t n) {
  const int64_t out = conv_side(n, k);
  int64_t count = 0;
  for (int64_t r = 0; r < out; r++)
    count += k.stride * r - k.padding <= y &&
             y < k.stride * r - k.padding + k.kernel;
  return count;
}

// Spreads `mass` over the tokens of an h x w map inside the window of
// output token (r, c) of conv k over it, clipped to the map (a window
// wholly in the padding drops it), each token's share inversely
// proportional to how many windows cover it, so that where windows
// overlap (stride 2, kernel 3: every second row and column) a token is not
// counted twice: equal mass on every window gives the map's tokens equal
// shares, not a lattice.
static void spread_window(double mass, int64_t r, int64_t c, token_conv k,
                          int64_t h, int64_t w, double *to) {
  const int64_t y0 = k.stride * r - k.padding, x0 = k.stride * c - k.padding;
  const int64_t ya = y0 < 0 ? 0 : y0, xa = x0 < 0 ? 0 : x0,
                yb = y0 + k.kernel < h ? y0 + k.kernel : h,
                xb = x0 + k.kernel < w ? x0 + k.kernel : w;
  if (ya >= yb || xa >= xb) return;
  double sy = 0.0, sx = 0.0;
  for (int64_t y = ya; y < yb; y++) sy += 1.0 / (double)windows_over(y, k, h);
  for (int64_t x = xa; x < xb; x++) sx += 1.0 / (double)windows_over(x, k, w);
  for (int64_t y = ya; y < yb; y++)
    for (int64_t x = xa; x < xb; x++)
      to[y * w + x] += mass / (sy * sx) /
                       (double)(windows_over(y, k, h) * windows_over(x, k, w));
}

// One block backwards: row over the block's query tokens ([cls,] h*w) ->
// next over its input tokens, with the layer's weights w (B, NH, Nq, Nk)
// of image b. keys: scratch for Nk values.
static void block_rollout(const ct_nn_cvt_block *blk, const ct_tensor *w,
                          int64_t b, const double *row, double *keys,
                          double *next) {
  const ct_nn_cvt_block_config *c = &blk->cfg;
  const int64_t NH = w->shape[1], Nq = w->shape[2], Nk = w->shape[3],
                first = c->cls_token ? 1 : 0;
  const token_conv kc = key_conv(c);
  const int64_t wk = conv_side(c->w, kc);
  // The attention's share: keys = row * mean over heads of A.
  for (int64_t j = 0; j < Nk; j++) keys[j] = 0.0;
  for (int64_t i = 0; i < Nq; i++) {
    if (row[i] == 0.0) continue;
    for (int64_t h = 0; h < NH; h++) {
      const float *a = ct_f32(w) + ((b * NH + h) * Nq + i) * Nk;
      for (int64_t j = 0; j < Nk; j++)
        keys[j] += row[i] * (double)a[j] / (double)NH;
    }
  }
  // Half the residual, half the attention: a key carries what its value's
  // conv window held (the value conv is the key's), the class key the
  // class token.
  for (int64_t t = 0; t < Nq; t++) next[t] = 0.5 * row[t];
  if (first) next[0] += 0.5 * keys[0];
  for (int64_t j = first; j < Nk; j++)
    spread_window(0.5 * keys[j], (j - first) / wk, (j - first) % wk, kc, c->h,
                  c->w, next + first);
}

ct_status ct_nn_cvt_rollout(const ct_nn_cvt *m, const ct_nn_attention_log *log,
                            int first, float *out) {
  const ct_nn_cvt_config *c = &m->cfg;
  int64_t blocks = 0, cap = 0;
  for (int i = 0; i < c->stages; i++) {
    blocks += m->stages[i].depth;
    const int64_t T = 1 + m->stages[i].h * m->stages[i].w;
    if (T > cap) cap = T;
  }
  if (first < 0 || log->count - first != blocks)
    return ct_error(CT_ERR_SHAPE,
                    "cvt_rollout: the log holds %d layers from %d, the "
                    "model has %lld blocks",
                    log->count - first, first, (long long)blocks);
  // Each layer's weights as the blocks make them: (B, NH, Nq, Nk).
  const ct_tensor *w0 = log->layers[first].weights;
  const int64_t B = w0 && w0->ndim == 4 ? w0->shape[0] : 0;
  int layer = first;
  for (int i = 0; i < c->stages; i++)
    for (int64_t j = 0; j < m->stages[i].depth; j++) {
      const ct_nn_cvt_block_config *bc = &m->stages[i].blocks[j].cfg;
      const ct_tensor *w = log->layers[layer++].weights;
      const int64_t extra = bc->cls_token ? 1 : 0;
      const token_conv k = key_conv(bc);
      if (!w || w->ndim != 4 || w->shape[0] != B || w->shape[1] != bc->heads ||
          w->shape[2] != extra + bc->h * bc->w ||
          w->shape[3] != extra + conv_side(bc->h, k) * conv_side(bc->w, k))
        return ct_error(CT_ERR_SHAPE,
                        "cvt_rollout: layer %d's weights do not fit stage "
                        "%d's block %lld",
                        layer - 1, i, (long long)j);
    }
  const int64_t T0 = m->stages[0].h * m->stages[0].w;
  double *row = malloc((size_t)cap * sizeof *row);
  double *next = malloc((size_t)cap * sizeof *next);
  double *keys = malloc((size_t)cap * sizeof *keys);
  if (!row || !next || !keys) {
    free(row);
    free(next);
    free(keys);
    return ct_error(CT_ERR_NOMEM, "cvt_rollout: out of memory");
  }
  for (int64_t b = 0; b < B; b++) {
    // What the head reads: the class token, or every token of the last
    // map alike (the mean pool).
    const ct_nn_cvt_stage *last = &m->stages[c->stages - 1];
    const int64_t cls = last->cls_token ? 1 : 0, P = last->h * last->w;
    for (int64_t t = 0; t < cls + P; t++)
      row[t] = cls ? (t == 0 ? 1.0 : 0.0) : 1.0 / (double)P;
    layer = log->count;
    for (int i = c->stages - 1; i >= 0; i--) {
      const ct_nn_cvt_stage *s = &m->stages[i];
      const int64_t T = (s->cls_token ? 1 : 0) + s->h * s->w;
      for (int64_t j = s->depth - 1; j >= 0; j--) {
        block_rollout(&s->blocks[j], log->layers[--layer].weights, b, row, keys,
                      next);
        memcpy(row, next, (size_t)T * sizeof *row);
      }
      // The class token is a parameter, with no image in it: its mass
      // goes. Each map token came from its embedding conv's window over
      // the map before.
      if (s->cls_token) memmove(row, row + 1, (size_t)(T - 1) * sizeof *row);
      if (i > 0) {
        const ct_nn_cvt_stage *prev = &m->stages[i - 1];
        for (int64_t t = 0; t < prev->h * prev->w; t++) next[t] = 0.0;
        for (int64_t t = 0; t < s->h * s->w; t++)
          spread_window(row[t], t / s->w, t % s->w, embed_conv(c, i), prev->h,
                        prev->w, next);
        memcpy(row, next, (size_t)(prev->h * prev->w) * sizeof *row);
      }
    }
    ct_nn_rollout_scale(row, T0, out + b * T0);
  }
  free(row);
  free(next);
  free(keys);
  return CT_OK;
}
