// timm's Linear init and the drop path residual (see timm.h).
#include "nn/timm.h"

#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "nn/init.h"

ct_status ct_nn_timm_linear_init(ct_nn_linear *l, ct_params *p,
                                 const char *prefix, const char *leaf,
                                 int64_t in, int64_t out, bool bias,
                                 ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "%s", leaf);
  if (st == CT_OK) st = ct_nn_linear_init(l, p, name, in, out, bias, rng);
  if (st == CT_OK)
    st = ct_nn_init_trunc_normal(l->weight, rng, 0.0f, 0.02f, -2.0f, 2.0f);
  if (st == CT_OK && bias) st = ct_nn_init_zeros(l->bias);
  return st;
}

ct_tensor *ct_nn_drop_path_add(ct_nn_ctx *ctx, ct_tensor *x, ct_tensor *branch,
                               float p, int64_t rows_per_sample) {
  if (!ctx || !x || !branch) return ct_add(x, branch);
  uint64_t stream = ct_nn_next_dropout_stream(ctx);
  if (!ctx->training || p <= 0.0f) return ct_add(x, branch);
  const int64_t R = branch->shape[0];
  const int64_t per = rows_per_sample > 0 ? rows_per_sample : 1;
  ct_tensor *mask = ct_tensor_empty(CT_F32, CT_SHAPE(R, 1, 1));
  if (!mask) return NULL;
  for (int64_t r = 0; r < R; r++)
    ct_f32(mask)[r] =
        ct_rng_uniform_at(ctx->seed, stream, (uint64_t)(r / per)) < p
            ? 0.0f
            : 1.0f / (1.0f - p);
  return ct_add(x, ct_mul(branch, mask));
}

bool ct_nn_drop_path_active(const ct_nn_ctx *ctx, float p) {
  return ctx && ctx->training && p > 0.0f;
}

ct_status ct_nn_patch_proj_init(ct_nn_patch_proj *m, ct_params *p,
                                const char *prefix, int64_t in_channels,
                                int64_t patch, int64_t dim, ct_rng *init_rng) {
  *m = (ct_nn_patch_proj){
      .in_channels = in_channels, .patch = patch, .dim = dim};
  const int64_t C = in_channels, P = patch, D = dim, K = C * P * P;
  m->weight = ct_nn_param(p, prefix, "proj.weight", CT_SHAPE(D, C, P, P), 0);
  m->bias = ct_nn_param(p, prefix, "proj.bias", CT_SHAPE(D), CT_PARAM_NO_DECAY);
  if (!m->weight || !m->bias) return ct_last_status();
  ct_status st = ct_nn_init_kaiming_uniform(m->weight, init_rng, sqrtf(5.0f));
  const float bound = 1.0f / sqrtf((float)K);
  if (st == CT_OK) st = ct_nn_init_uniform(m->bias, init_rng, -bound, bound);
  return st;
}

// x (B, C, H, W) -> (B, patches, C*P*P), each patch in (c, ky, kx) order.
static ct_tensor *patchify(ct_tensor *x, int64_t P) {
  const int64_t B = x->shape[0], C = x->shape[1], H = x->shape[2],
                W = x->shape[3];
  const int64_t gh = H / P, gw = W / P, row = C * P * P;
  ct_tensor *out = ct_tensor_empty(CT_F32, CT_SHAPE(B, gh * gw, row));
  if (!out) return NULL;
  const float *src = ct_f32(x);
  float *dst = ct_f32(out);
#pragma omp parallel for collapse(2) if (B * gh > 16)
  for (int64_t b = 0; b < B; b++)
    for (int64_t py = 0; py < gh; py++)
      for (int64_t px = 0; px < gw; px++) {
        float *d = dst + ((b * gh + py) * gw + px) * row;
        for (int64_t c = 0; c < C; c++)
          for (int64_t ky = 0; ky < P; ky++) {
            const float *s = src + ((b * C + c) * H + py * P + ky) * W + px * P;
            memcpy(d + (c * P + ky) * P, s, (size_t)P * sizeof *s);
          }
      }
  return out;
}

ct_tensor *ct_nn_patch_proj_forward(const ct_nn_patch_proj *m, ct_tensor *x) {
  if (!x) return NULL;
  const int64_t P = m->patch;
  if (x->dtype != CT_F32 || x->ndim != 4 || x->shape[1] != m->in_channels ||
      x->shape[2] % P || x->shape[3] % P) {
    char got[96];
    ct_error(CT_ERR_SHAPE,
             "patch embedding: expected images (B, %lld, H, W) f32 with H and "
             "W multiples of %lld, got %s",
             (long long)m->in_channels, (long long)P,
             ct_shape_str(x->ndim, x->shape, got, sizeof got));
    return NULL;
  }
  ct_tensor *w2 =
      ct_reshape(m->weight, CT_SHAPE(m->dim, m->in_channels * P * P));
  return ct_linear(patchify(x, P), w2, m->bias);
}
