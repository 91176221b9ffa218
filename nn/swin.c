// Swin block and patch merging (see swin.h).
#include "nn/swin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_window.h"
#include "nn/init.h"
#include "nn/timm.h"

static const float LN_EPS = 1e-5f;

static ct_status check_block_config(const ct_nn_swin_block_config *c) {
  if (c->dim < 1 || c->heads < 1 || c->dim % c->heads)
    return ct_error(CT_ERR_ARG,
                    "swin block: dim %lld must be a positive multiple of "
                    "heads %lld",
                    (long long)c->dim, (long long)c->heads);
  if (c->H < 1 || c->W < 1 || c->window < 1 || c->mlp_dim < 1)
    return ct_error(CT_ERR_ARG,
                    "swin block: need a map, window and mlp_dim >= 1 (got "
                    "%lldx%lld, window %lld, mlp_dim %lld)",
                    (long long)c->H, (long long)c->W, (long long)c->window,
                    (long long)c->mlp_dim);
  const float rates[3] = {c->dropout, c->attn_dropout, c->drop_path};
  for (int i = 0; i < 3; i++)
    if (!(rates[i] >= 0.0f && rates[i] < 1.0f))
      return ct_error(CT_ERR_ARG,
                      "swin block: dropout rates must lie in [0, 1) (got %g)",
                      (double)rates[i]);
  return CT_OK;
}

// timm's rule: a map no larger than the window is one window, unshifted.
static ct_status block_window(const ct_nn_swin_block_config *c, int64_t *window,
                              int64_t *shift) {
  if (c->H <= c->window && c->W <= c->window) {
    if (c->H != c->W)
      return ct_error(CT_ERR_ARG,
                      "swin block: a %lldx%lld map within window %lld would "
                      "need a rectangular window",
                      (long long)c->H, (long long)c->W, (long long)c->window);
    *window = c->H;
    *shift = 0;
    return CT_OK;
  }
  if (c->H % c->window || c->W % c->window)
    return ct_error(CT_ERR_ARG,
                    "swin block: window %lld does not divide the %lldx%lld "
                    "map (pad the map to a multiple of the window)",
                    (long long)c->window, (long long)c->H, (long long)c->W);
  *window = c->window;
  *shift = c->shifted ? c->window / 2 : 0;
  return CT_OK;
}

ct_status ct_nn_swin_block_init(ct_nn_swin_block *m, ct_params *p,
                                const char *prefix,
                                const ct_nn_swin_block_config *cfg,
                                ct_rng *init_rng) {
  *m = (ct_nn_swin_block){0};
  ct_status st = check_block_config(cfg);
  if (st == CT_OK) st = block_window(cfg, &m->window, &m->shift);
  if (st != CT_OK) return st;
  const int64_t C = cfg->dim, ws = m->window;
  m->dim = C;
  m->heads = cfg->heads;
  m->H = cfg->H;
  m->W = cfg->W;
  m->dropout = cfg->dropout;
  m->attn_dropout = cfg->attn_dropout;
  m->drop_path = cfg->drop_path;
  char name[CT_NN_NAME_MAX];
  st = ct_nn_name(name, prefix, "norm1");
  if (st == CT_OK) st = ct_nn_layernorm_init(&m->norm1, p, name, C, LN_EPS);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "attn");
  if (st == CT_OK) {
    // timm: no weight decay on relative_position_bias_table.
    m->relative_position_bias_table = ct_nn_param(
        p, name, "relative_position_bias_table",
        CT_SHAPE((2 * ws - 1) * (2 * ws - 1), cfg->heads), CT_PARAM_NO_DECAY);
    st = m->relative_position_bias_table ? CT_OK : ct_last_status();
  }
  if (st == CT_OK)
    st = ct_nn_timm_linear_init(&m->qkv, p, name, "qkv", C, 3 * C, true,
                                init_rng);
  if (st == CT_OK)
    st =
        ct_nn_timm_linear_init(&m->proj, p, name, "proj", C, C, true, init_rng);
  if (st == CT_OK)
    st = ct_nn_init_trunc_normal(m->relative_position_bias_table, init_rng,
                                 0.0f, 0.02f, -2.0f, 2.0f);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "norm2");
  if (st == CT_OK) st = ct_nn_layernorm_init(&m->norm2, p, name, C, LN_EPS);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "mlp");
  m->mlp.act = CT_NN_GELU;
  m->mlp.dropout = cfg->dropout;
  if (st == CT_OK)
    st = ct_nn_timm_linear_init(&m->mlp.fc1, p, name, "fc1", C, cfg->mlp_dim,
                                true, init_rng);
  if (st == CT_OK)
    st = ct_nn_timm_linear_init(&m->mlp.fc2, p, name, "fc2", cfg->mlp_dim, C,
                                true, init_rng);
  return st;
}

// Window attention on windows h (B*nW, N, C) -> (B*nW, N, C), before proj.
// Takes the attention dropout's site; records the weights in ctx's
// attention log when it has one.
static ct_tensor *window_attention(const ct_nn_swin_block *m, ct_nn_ctx *ctx,
                                   ct_tensor *h) {
  const int64_t ws = m->window, N = ws * ws, C = m->dim, NH = m->heads;
  ct_tensor *qkv = ct_reshape(ct_nn_linear_forward(&m->qkv, h),
                              CT_SHAPE(-1, N, 3, NH, C / NH));
  ct_attention_opts o = ct_attention_defaults();
  o.bias = ct_relative_position_bias(m->relative_position_bias_table, ws);
  if (m->shift) {
    o.window_mask = ct_swin_shift_mask(m->H, m->W, ws, m->shift);
    if (!o.window_mask) return NULL;
  }
  if (!o.bias || !qkv) return NULL;
  if (ctx && ctx->attention) {
    // qkv (B*nW, N, 3, NH, Dh) -> (B*nW, NH, N, N), the bias and the
    // shift mask as the fused kernel adds them.
    const int64_t nW = (m->H / ws) * (m->W / ws), Dh = C / NH;
    const ct_nn_attention_scores scores = {.q = ct_f32(qkv),
                                           .k = ct_f32(qkv) + NH * Dh,
                                           .q_stride = 3 * C,
                                           .k_stride = 3 * C,
                                           .groups = qkv->shape[0],
                                           .heads = NH,
                                           .Nq = N,
                                           .Nk = N,
                                           .Dh = Dh,
                                           .scale = 1.0 / sqrt((double)Dh),
                                           .bias = o.bias,
                                           .mask = o.window_mask};
    ct_tensor *w = ct_nn_attention_weights(&scores);
    if (!w || !ct_nn_attention_record(ctx, w, nW)) return NULL;
  }
  const uint64_t stream = ctx ? ct_nn_next_dropout_stream(ctx) : 0;
  if (ct_nn_dropout_active(ctx, m->attn_dropout)) {
    o.dropout_p = m->attn_dropout;
    o.dropout_seed = ctx->seed;
    o.dropout_stream = stream;
  }
  return ct_reshape(ct_attention_qkv(qkv, &o), CT_SHAPE(-1, N, C));
}

ct_tensor *ct_nn_swin_block_forward(const ct_nn_swin_block *m, ct_nn_ctx *ctx,
                                    ct_tensor *x) {
  if (!x) return NULL;
  if (x->ndim != 4 || x->shape[1] != m->H || x->shape[2] != m->W ||
      x->shape[3] != m->dim) {
    ct_error(CT_ERR_SHAPE,
             "swin block: x must be (B, %lld, %lld, %lld), got ndim %d",
             (long long)m->H, (long long)m->W, (long long)m->dim, x->ndim);
    return NULL;
  }
  const int64_t ws = m->window, nW = (m->H / ws) * (m->W / ws);
  const bool no_drop_path = !ct_nn_drop_path_active(ctx, m->drop_path);
  ct_tensor *xw = ct_window_partition(x, ws, m->shift);  // (B*nW, N, C)
  ct_tensor *a =
      window_attention(m, ctx, ct_nn_layernorm_forward(&m->norm1, xw));
  if (no_drop_path && !ct_nn_dropout_active(ctx, m->dropout)) {
    xw = a ? ct_linear_fused(a, m->proj.weight, m->proj.bias,
                             &(ct_linear_fusion){.residual = xw})
           : NULL;
    if (ctx) {  // the sites of the dropout and the drop path
      ct_nn_next_dropout_stream(ctx);
      ct_nn_next_dropout_stream(ctx);
    }
  } else {
    ct_tensor *h =
        ct_nn_dropout(ctx, ct_nn_linear_forward(&m->proj, a), m->dropout);
    xw = ct_nn_drop_path_add(ctx, xw, h, m->drop_path, nW);
  }
  ct_tensor *h = ct_nn_layernorm_forward(&m->norm2, xw);
  if (no_drop_path) {
    xw = ct_nn_mlp_forward_residual(&m->mlp, ctx, h, xw);
    if (ctx) ct_nn_next_dropout_stream(ctx);  // the drop path's site
  } else {
    xw = ct_nn_drop_path_add(ctx, xw, ct_nn_mlp_forward(&m->mlp, ctx, h),
                             m->drop_path, nW);
  }
  return ct_window_reverse(xw, ws, m->H, m->W, m->shift);
}

ct_status ct_nn_patch_merging_init(ct_nn_patch_merging *m, ct_params *p,
                                   const char *prefix, int64_t dim,
                                   int64_t out_dim, ct_rng *init_rng) {
  *m = (ct_nn_patch_merging){.dim = dim, .out_dim = out_dim};
  if (dim < 1 || out_dim < 1)
    return ct_error(CT_ERR_ARG,
                    "patch merging: dims must be >= 1 (got %lld -> %lld)",
                    (long long)dim, (long long)out_dim);
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "norm");
  if (st == CT_OK)
    st = ct_nn_layernorm_init(&m->norm, p, name, 4 * dim, LN_EPS);
  if (st == CT_OK)
    st = ct_nn_timm_linear_init(&m->reduction, p, prefix, "reduction", 4 * dim,
                                out_dim, false, init_rng);
  return st;
}

ct_tensor *ct_nn_patch_merging_forward(const ct_nn_patch_merging *m,
                                       ct_tensor *x) {
  if (x && (x->ndim != 4 || x->shape[3] != m->dim)) {
    ct_error(CT_ERR_SHAPE,
             "patch merging: x must be (B, H, W, %lld), got ndim %d last %lld",
             (long long)m->dim, x->ndim,
             (long long)(x->ndim ? x->shape[x->ndim - 1] : 0));
    return NULL;
  }
  return ct_nn_linear_forward(
      &m->reduction, ct_nn_layernorm_forward(&m->norm, ct_patch_merge(x)));
}

// ---- the classifier ------------------------------------------------------------

static ct_status check_config(const ct_nn_swin_config *c) {
  if (c->image_h < 1 || c->image_w < 1 || c->in_channels < 1 || c->patch < 1 ||
      c->image_h % c->patch || c->image_w % c->patch)
    return ct_error(CT_ERR_ARG,
                    "swin: patch %lld must divide the image %lldx%lldx%lld",
                    (long long)c->patch, (long long)c->in_channels,
                    (long long)c->image_h, (long long)c->image_w);
  if (c->stages < 1 || c->stages > CT_NN_SWIN_MAX_STAGES)
    return ct_error(CT_ERR_ARG, "swin: %d stages, want 1 to %d", c->stages,
                    (int)CT_NN_SWIN_MAX_STAGES);
  const int64_t down = (int64_t)1 << (c->stages - 1);
  const int64_t gh = c->image_h / c->patch, gw = c->image_w / c->patch;
  if (gh % down || gw % down)
    return ct_error(CT_ERR_ARG,
                    "swin: the %lldx%lld patch map cannot be halved %d times "
                    "for %d stages",
                    (long long)gh, (long long)gw, c->stages - 1, c->stages);
  for (int i = 0; i < c->stages; i++)
    if (c->depths[i] < 1 || c->heads[i] < 1)
      return ct_error(CT_ERR_ARG,
                      "swin: stage %d has depth %lld and %lld heads (both "
                      "must be at least 1)",
                      i, (long long)c->depths[i], (long long)c->heads[i]);
  if (c->embed_dim < 1 || c->num_classes < 1 || !(c->mlp_ratio > 0.0f))
    return ct_error(CT_ERR_ARG,
                    "swin: embed_dim %lld, classes %lld and mlp_ratio %g must "
                    "be positive",
                    (long long)c->embed_dim, (long long)c->num_classes,
                    (double)c->mlp_ratio);
  return CT_OK;
}

static ct_status stage_init(ct_nn_swin_stage *s, ct_params *p,
                            const char *prefix, const ct_nn_swin_config *c,
                            int i, int64_t first_block, int64_t total_blocks,
                            ct_rng *rng) {
  const int64_t gh = c->image_h / c->patch, gw = c->image_w / c->patch;
  s->dim = c->embed_dim << i;
  s->H = gh >> i;
  s->W = gw >> i;
  s->depth = c->depths[i];
  s->has_downsample = i > 0;
  char name[CT_NN_NAME_MAX];
  ct_status st = CT_OK;
  if (s->has_downsample) {
    st = ct_nn_name(name, prefix, "downsample");
    if (st == CT_OK)
      st = ct_nn_patch_merging_init(&s->downsample, p, name, s->dim / 2, s->dim,
                                    rng);
  }
  s->blocks = calloc((size_t)s->depth, sizeof *s->blocks);
  if (!s->blocks) return ct_error(CT_ERR_NOMEM, "swin: out of memory");
  for (int64_t j = 0; j < s->depth && st == CT_OK; j++) {
    const int64_t k = first_block + j;
    ct_nn_swin_block_config bc = {
        .dim = s->dim,
        .heads = c->heads[i],
        .H = s->H,
        .W = s->W,
        .window = c->window,
        .shifted = j % 2 == 1,
        .mlp_dim = (int64_t)((float)s->dim * c->mlp_ratio),
        .dropout = c->dropout,
        .attn_dropout = c->attn_dropout,
        .drop_path = total_blocks > 1
                         ? c->drop_path * (float)k / (float)(total_blocks - 1)
                         : 0.0f};
    st = ct_nn_name(name, prefix, "blocks.%lld", (long long)j);
    if (st == CT_OK)
      st = ct_nn_swin_block_init(&s->blocks[j], p, name, &bc, rng);
  }
  return st;
}

ct_status ct_nn_swin_init(ct_nn_swin *m, ct_params *p, const char *prefix,
                          const ct_nn_swin_config *cfg, ct_rng *init_rng) {
  *m = (ct_nn_swin){0};
  ct_status st = check_config(cfg);
  if (st != CT_OK) return st;
  m->cfg = *cfg;
  const int64_t C = cfg->embed_dim;
  char name[CT_NN_NAME_MAX];
  st = ct_nn_name(name, prefix, "patch_embed");
  if (st == CT_OK)
    st = ct_nn_patch_proj_init(&m->patch_embed, p, name, cfg->in_channels,
                               cfg->patch, C, init_rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "patch_embed.norm");
  if (st == CT_OK)
    st = ct_nn_layernorm_init(&m->patch_norm, p, name, C, LN_EPS);
  int64_t total = 0, first = 0;
  for (int i = 0; i < cfg->stages; i++) total += cfg->depths[i];
  for (int i = 0; i < cfg->stages && st == CT_OK; i++) {
    st = ct_nn_name(name, prefix, "layers.%d", i);
    if (st == CT_OK)
      st = stage_init(&m->stages[i], p, name, cfg, i, first, total, init_rng);
    first += cfg->depths[i];
  }
  const int64_t F = m->stages[cfg->stages - 1].dim;
  if (st == CT_OK) st = ct_nn_name(name, prefix, "norm");
  if (st == CT_OK) st = ct_nn_layernorm_init(&m->norm, p, name, F, LN_EPS);
  if (st == CT_OK)
    st = ct_nn_timm_linear_init(&m->head, p, prefix, "head.fc", F,
                                cfg->num_classes, true, init_rng);
  return st;
}

void ct_nn_swin_free(ct_nn_swin *m) {
  for (int i = 0; i < CT_NN_SWIN_MAX_STAGES; i++) {
    free(m->stages[i].blocks);
    m->stages[i].blocks = NULL;
  }
}

// The places of a block's window tokens for an attention log: (nW, N, 2)
// pixel centres (y, x) in the image, the roll undone (token (r, c) of the
// rolled map is token ((r + shift) mod H, (c + shift) mod W) of the map),
// for a map whose tokens are `scale` pixels wide.
static ct_tensor *window_places(const ct_nn_swin_block *b, int64_t scale) {
  const int64_t ws = b->window, N = ws * ws, nx = b->W / ws,
                nW = (b->H / ws) * nx;
  ct_tensor *yx = ct_tensor_empty(CT_F32, CT_SHAPE(nW, N, 2));
  if (!yx) return NULL;
  float *v = ct_f32(yx);
  for (int64_t g = 0; g < nW; g++)
    for (int64_t n = 0; n < N; n++) {
      const int64_t r = (g / nx) * ws + n / ws, c = (g % nx) * ws + n % ws;
      v[(g * N + n) * 2] =
          ((float)((r + b->shift) % b->H) + 0.5f) * (float)scale;
      v[(g * N + n) * 2 + 1] =
          ((float)((c + b->shift) % b->W) + 0.5f) * (float)scale;
    }
  return yx;
}

ct_tensor *ct_nn_swin_forward(const ct_nn_swin *m, ct_nn_ctx *ctx,
                              ct_tensor *x) {
  if (!x) return NULL;
  const ct_nn_swin_config *c = &m->cfg;
  if (x->dtype != CT_F32 || x->ndim != 4 || x->shape[1] != c->in_channels ||
      x->shape[2] != c->image_h || x->shape[3] != c->image_w) {
    char got[96];
    ct_error(
        CT_ERR_SHAPE, "swin: expected images (B, %lld, %lld, %lld) f32, got %s",
        (long long)c->in_channels, (long long)c->image_h, (long long)c->image_w,
        ct_shape_str(x->ndim, x->shape, got, sizeof got));
    return NULL;
  }
  const int64_t B = x->shape[0];
  ct_tensor *h = ct_nn_layernorm_forward(
      &m->patch_norm, ct_nn_patch_proj_forward(&m->patch_embed, x));
  h = ct_reshape(h, CT_SHAPE(B, m->stages[0].H, m->stages[0].W, c->embed_dim));
  for (int i = 0; i < c->stages; i++) {
    const ct_nn_swin_stage *s = &m->stages[i];
    if (s->has_downsample) h = ct_nn_patch_merging_forward(&s->downsample, h);
    for (int64_t j = 0; j < s->depth; j++) {
      h = ct_nn_swin_block_forward(&s->blocks[j], ctx, h);
      if (h && ctx && ctx->attention) {
        ct_nn_attention_layer *l =
            &ctx->attention->layers[ctx->attention->count - 1];
        l->query_yx = l->key_yx =
            window_places(&s->blocks[j], c->image_h / s->H);
        if (!l->query_yx) return NULL;
      }
    }
  }
  // norm, then the average over the map: (B, H*W, F) -> (B, F, H*W) -> mean.
  const ct_nn_swin_stage *last = &m->stages[c->stages - 1];
  h = ct_nn_layernorm_forward(&m->norm, h);
  h = ct_reshape(h, CT_SHAPE(B, last->H * last->W, last->dim));
  h = ct_mean_last(ct_transpose(h, 1, 2), false);
  h = ct_nn_dropout(ctx, h, c->dropout);
  return ct_nn_linear_forward(&m->head, h);
}

ct_status ct_nn_swin_rollout(const ct_nn_swin *m,
                             const ct_nn_attention_log *log, int first,
                             float *out) {
  const ct_nn_swin_config *c = &m->cfg;
  int64_t blocks = 0;
  for (int i = 0; i < c->stages; i++) blocks += m->stages[i].depth;
  if (first < 0 || log->count - first != blocks)
    return ct_error(CT_ERR_SHAPE,
                    "swin_rollout: the log holds %d layers from %d, the "
                    "model has %lld blocks",
                    log->count - first, first, (long long)blocks);
  const int64_t B =
      log->layers[first].weights->shape[0] / log->layers[first].groups;
  const int64_t T0 = m->stages[0].H * m->stages[0].W;
  double *row = malloc((size_t)T0 * sizeof *row);
  double *next = malloc((size_t)T0 * sizeof *next);
  if (!row || !next) {
    free(row);
    free(next);
    return ct_error(CT_ERR_NOMEM, "swin_rollout: out of memory");
  }
  for (int64_t b = 0; b < B; b++) {
    // The average pool's row: every token of the last map alike.
    const ct_nn_swin_stage *last = &m->stages[c->stages - 1];
    int64_t T = last->H * last->W;
    for (int64_t t = 0; t < T; t++) row[t] = 1.0 / (double)T;
    int layer = log->count;
    for (int i = c->stages - 1; i >= 0; i--) {
      const ct_nn_swin_stage *s = &m->stages[i];
      for (int64_t j = s->depth - 1; j >= 0; j--) {
        // row <- row A' with A' = (mean over heads + I) / 2 (each row of
        // the weights sums to 1), A' on the map's tokens: window token n
        // of window g is map token `place`.
        const ct_nn_swin_block *k = &s->blocks[j];
        const ct_tensor *w = log->layers[--layer].weights;
        const int64_t ws = k->window, N = ws * ws, nx = k->W / ws,
                      nW = (k->H / ws) * nx, NH = k->heads;
        for (int64_t t = 0; t < T; t++) next[t] = 0.5 * row[t];
        for (int64_t g = 0; g < nW; g++)
          for (int64_t qi = 0; qi < N; qi++) {
            const int64_t rq = (g / nx) * ws + qi / ws,
                          cq = (g % nx) * ws + qi % ws;
            const int64_t tq =
                ((rq + k->shift) % k->H) * k->W + (cq + k->shift) % k->W;
            if (row[tq] == 0.0) continue;
            for (int64_t kj = 0; kj < N; kj++) {
              const int64_t rk = (g / nx) * ws + kj / ws,
                            ck = (g % nx) * ws + kj % ws;
              const int64_t tk =
                  ((rk + k->shift) % k->H) * k->W + (ck + k->shift) % k->W;
              double a = 0.0;
              for (int64_t h = 0; h < NH; h++)
                a += ct_f32(w)[(((b * nW + g) * NH + h) * N + qi) * N + kj];
              next[tk] += 0.5 * row[tq] * a / (double)NH;
            }
          }
        memcpy(row, next, (size_t)T * sizeof *row);
      }
      if (s->has_downsample) {
        // Patch merging: a merged token is made of its 2x2 neighbours of
        // the map before, each a quarter of it.
        const int64_t W2 = s->W * 2;
        for (int64_t t = 0; t < 4 * T; t++) {
          const int64_t y = t / W2, x = t % W2;
          next[t] = row[(y / 2) * s->W + x / 2] / 4.0;
        }
        T *= 4;
        memcpy(row, next, (size_t)T * sizeof *row);
      }
    }
    ct_nn_rollout_scale(row, T0, out + b * T0);
  }
  free(row);
  free(next);
  return CT_OK;
}
