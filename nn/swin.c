// Swin block and patch merging (see swin.h).
#include "nn/swin.h"

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
// Takes the attention dropout's site.
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
  if (!o.bias) return NULL;
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
