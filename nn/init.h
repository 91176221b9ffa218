// Parameter initializers with PyTorch's formulas (torch.nn.init), drawing
// from a ct_rng (which advances by the words drawn).
//
// Each fills a tensor's data in place (a parameter, or any f32 tensor) and
// returns CT_OK, or an error for a non-f32 tensor, a tensor whose fans are
// undefined (fewer than 2 dims for xavier/kaiming) or bad bounds. Values
// differ from PyTorch's (another generator), the distributions do not.
//
// Fans (PyTorch's _calculate_fan_in_and_fan_out): a weight (OUT, IN, k...)
// has fan_in = IN * prod(k), fan_out = OUT * prod(k).
#ifndef CT_NN_INIT_H
#define CT_NN_INIT_H

#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

ct_status ct_nn_init_fans(const ct_tensor *t, int64_t *fan_in,
                          int64_t *fan_out);

ct_status ct_nn_init_constant(ct_tensor *t, float value);
ct_status ct_nn_init_zeros(ct_tensor *t);
ct_status ct_nn_init_ones(ct_tensor *t);
// U(lo, hi).
ct_status ct_nn_init_uniform(ct_tensor *t, ct_rng *rng, float lo, float hi);
// N(mean, std^2).
ct_status ct_nn_init_normal(ct_tensor *t, ct_rng *rng, float mean, float std);
// N(mean, std^2) restricted to [a, b] (absolute bounds, as
// nn.init.trunc_normal_ and timm's trunc_normal_): draws outside are redrawn.
// timm's ViT calls trunc_normal_(std=.02) with its default a=-2, b=2, i.e.
// practically untruncated; ct_nn_init_trunc_normal_std truncates at +-2 std,
// as BERT/JAX and timm's trunc_normal_tf_ do.
ct_status ct_nn_init_trunc_normal(ct_tensor *t, ct_rng *rng, float mean,
                                  float std, float a, float b);
ct_status ct_nn_init_trunc_normal_std(ct_tensor *t, ct_rng *rng, float std);
// U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)).
ct_status ct_nn_init_xavier_uniform(ct_tensor *t, ct_rng *rng, float gain);
// Kaiming (He) uniform, fan_in mode, leaky_relu gain sqrt(2 / (1 + a^2)):
// U(-bound, bound), bound = gain * sqrt(3 / fan_in). nn.Linear's weight
// default is a = sqrt(5), i.e. bound = 1 / sqrt(fan_in).
ct_status ct_nn_init_kaiming_uniform(ct_tensor *t, ct_rng *rng, float a);
// nn.Linear's default: weight kaiming_uniform(a = sqrt(5)) and, if bias is
// not NULL, bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
ct_status ct_nn_init_linear_default(ct_tensor *weight, ct_tensor *bias,
                                    ct_rng *rng);

#endif
