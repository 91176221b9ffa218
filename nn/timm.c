// timm's Linear init and the drop path residual (see timm.h).
#include "nn/timm.h"

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
