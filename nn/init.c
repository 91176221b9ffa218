// torch.nn.init formulas over a ct_rng (see init.h).
#include "nn/init.h"

#include <math.h>

static ct_status check_f32(const ct_tensor *t, const char *fn) {
  if (!t) return ct_last_status() ? ct_last_status() : CT_ERR_ARG;
  if (t->dtype != CT_F32)
    return ct_error(CT_ERR_DTYPE, "%s: tensor '%s' is %s, need f32", fn,
                    t->name ? t->name : "?", ct_dtype_name(t->dtype));
  return CT_OK;
}

ct_status ct_nn_init_fans(const ct_tensor *t, int64_t *fan_in,
                          int64_t *fan_out) {
  ct_status st = check_f32(t, "init_fans");
  if (st != CT_OK) return st;
  if (t->ndim < 2)
    return ct_error(CT_ERR_SHAPE,
                    "init: fans need at least 2 dims, '%s' has %d",
                    t->name ? t->name : "?", t->ndim);
  int64_t receptive = 1;
  for (int d = 2; d < t->ndim; d++) receptive *= t->shape[d];
  *fan_in = t->shape[1] * receptive;
  *fan_out = t->shape[0] * receptive;
  return CT_OK;
}

ct_status ct_nn_init_constant(ct_tensor *t, float value) {
  ct_status st = check_f32(t, "init_constant");
  if (st != CT_OK) return st;
  for (int64_t i = 0; i < t->numel; i++) ct_f32(t)[i] = value;
  return CT_OK;
}

ct_status ct_nn_init_zeros(ct_tensor *t) {
  return ct_nn_init_constant(t, 0.0f);
}
ct_status ct_nn_init_ones(ct_tensor *t) { return ct_nn_init_constant(t, 1.0f); }

ct_status ct_nn_init_uniform(ct_tensor *t, ct_rng *rng, float lo, float hi) {
  ct_status st = check_f32(t, "init_uniform");
  if (st != CT_OK) return st;
  if (!(lo <= hi))
    return ct_error(CT_ERR_ARG, "init_uniform: lo %g > hi %g", (double)lo,
                    (double)hi);
  ct_rng_fill_uniform(rng, ct_f32(t), t->numel, lo, hi);
  return CT_OK;
}

ct_status ct_nn_init_normal(ct_tensor *t, ct_rng *rng, float mean, float std) {
  ct_status st = check_f32(t, "init_normal");
  if (st != CT_OK) return st;
  if (!(std >= 0.0f))
    return ct_error(CT_ERR_ARG, "init_normal: std %g < 0", (double)std);
  ct_rng_fill_normal(rng, ct_f32(t), t->numel, mean, std);
  return CT_OK;
}

ct_status ct_nn_init_trunc_normal(ct_tensor *t, ct_rng *rng, float mean,
                                  float std, float a, float b) {
  // Rejection needs a window holding some mass; 6 std from the mean it holds
  // under 1e-9 and redrawing would practically never end.
  if (!(a < b) || b < mean - 6.0f * std || a > mean + 6.0f * std)
    return ct_error(CT_ERR_ARG,
                    "init_trunc_normal: [%g, %g] holds (almost) no mass of "
                    "N(%g, %g^2)",
                    (double)a, (double)b, (double)mean, (double)std);
  ct_status st = ct_nn_init_normal(t, rng, mean, std);
  if (st != CT_OK) return st;
  // Redraw, in index order, the elements outside [a, b].
  float *x = ct_f32(t);
  for (int64_t i = 0; i < t->numel; i++)
    while (x[i] < a || x[i] > b) ct_rng_fill_normal(rng, &x[i], 1, mean, std);
  return CT_OK;
}

ct_status ct_nn_init_trunc_normal_std(ct_tensor *t, ct_rng *rng, float std) {
  return ct_nn_init_trunc_normal(t, rng, 0.0f, std, -2.0f * std, 2.0f * std);
}

ct_status ct_nn_init_xavier_uniform(ct_tensor *t, ct_rng *rng, float gain) {
  int64_t fan_in, fan_out;
  ct_status st = ct_nn_init_fans(t, &fan_in, &fan_out);
  if (st != CT_OK) return st;
  float bound = (float)(gain * sqrt(6.0 / (double)(fan_in + fan_out)));
  return ct_nn_init_uniform(t, rng, -bound, bound);
}

ct_status ct_nn_init_kaiming_uniform(ct_tensor *t, ct_rng *rng, float a) {
  int64_t fan_in, fan_out;
  ct_status st = ct_nn_init_fans(t, &fan_in, &fan_out);
  if (st != CT_OK) return st;
  double gain = sqrt(2.0 / (1.0 + (double)a * a));
  float bound = (float)(gain * sqrt(3.0 / (double)fan_in));
  return ct_nn_init_uniform(t, rng, -bound, bound);
}

ct_status ct_nn_init_linear_default(ct_tensor *weight, ct_tensor *bias,
                                    ct_rng *rng) {
  ct_status st = ct_nn_init_kaiming_uniform(weight, rng, sqrtf(5.0f));
  if (st != CT_OK || !bias) return st;
  int64_t fan_in, fan_out;
  ct_nn_init_fans(weight, &fan_in, &fan_out);
  float bound = fan_in > 0 ? (float)(1.0 / sqrt((double)fan_in)) : 0.0f;
  return ct_nn_init_uniform(bias, rng, -bound, bound);
}
