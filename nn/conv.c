// nn.Conv2d and nn.BatchNorm2d (see conv.h). The ops (autograd/ops_conv.c)
// do the math.
#include "nn/conv.h"

#include "autograd/ops_conv.h"
#include "nn/init.h"

ct_status ct_nn_conv2d_init(ct_nn_conv2d *m, ct_params *p, const char *prefix,
                            int64_t in_channels, int64_t out_channels,
                            int kernel, int stride, int padding, bool bias,
                            ct_rng *init_rng) {
  *m = (ct_nn_conv2d){.in_channels = in_channels,
                      .out_channels = out_channels,
                      .kernel = kernel,
                      .stride = stride,
                      .padding = padding};
  if (in_channels < 1 || out_channels < 1 || kernel < 1 || stride < 1 ||
      padding < 0)
    return ct_error(CT_ERR_ARG,
                    "conv2d '%s': channels %lld -> %lld and kernel %d, stride "
                    "%d must be >= 1, padding %d >= 0",
                    prefix, (long long)in_channels, (long long)out_channels,
                    kernel, stride, padding);
  m->weight =
      ct_nn_param(p, prefix, "weight",
                  CT_SHAPE(out_channels, in_channels, kernel, kernel), 0);
  if (!m->weight) return ct_last_status();
  if (bias) {
    m->bias = ct_nn_param(p, prefix, "bias", CT_SHAPE(out_channels),
                          CT_PARAM_NO_DECAY);
    if (!m->bias) return ct_last_status();
  }
  // The fans of a (O, C, k, k) weight are those of nn.Conv2d, so Linear's
  // default (kaiming_uniform a = sqrt(5), bias U(+-1/sqrt(fan_in))) is
  // Conv2d's too.
  return ct_nn_init_linear_default(m->weight, m->bias, init_rng);
}

// x (N,C,H,W), weight (O,C,k,k), bias (O) -> (N,O,Ho,Wo)
ct_tensor *ct_nn_conv2d_forward(const ct_nn_conv2d *m, ct_tensor *x) {
  return ct_conv2d(x, m->weight, m->bias, m->stride, m->padding);
}

ct_status ct_nn_batchnorm2d_init(ct_nn_batchnorm2d *m, ct_params *p,
                                 const char *prefix, int64_t channels) {
  *m =
      (ct_nn_batchnorm2d){.channels = channels, .momentum = 0.1f, .eps = 1e-5f};
  if (channels < 1)
    return ct_error(CT_ERR_ARG, "batchnorm2d '%s': channels %lld must be >= 1",
                    prefix, (long long)channels);
  const unsigned stats = CT_PARAM_FROZEN | CT_PARAM_NO_DECAY;
  m->weight =
      ct_nn_param(p, prefix, "weight", CT_SHAPE(channels), CT_PARAM_NO_DECAY);
  if (!m->weight) return ct_last_status();
  m->bias =
      ct_nn_param(p, prefix, "bias", CT_SHAPE(channels), CT_PARAM_NO_DECAY);
  if (!m->bias) return ct_last_status();
  m->running_mean =
      ct_nn_param(p, prefix, "running_mean", CT_SHAPE(channels), stats);
  if (!m->running_mean) return ct_last_status();
  m->running_var =
      ct_nn_param(p, prefix, "running_var", CT_SHAPE(channels), stats);
  if (!m->running_var) return ct_last_status();
  ct_status st = ct_nn_init_ones(m->weight);  // bias and running_mean stay 0
  return st == CT_OK ? ct_nn_init_ones(m->running_var) : st;
}

// x (N,C,H,W) -> (N,C,H,W)
ct_tensor *ct_nn_batchnorm2d_forward(const ct_nn_batchnorm2d *m, ct_nn_ctx *ctx,
                                     ct_tensor *x) {
  if (ctx && ctx->training && ctx->bn_updates)
    return ct_batchnorm2d_logged(x, m->weight, m->bias, m->running_mean,
                                 m->running_var, m->momentum, m->eps,
                                 ctx->bn_updates);
  return ct_batchnorm2d(x, m->weight, m->bias, m->running_mean, m->running_var,
                        ctx && ctx->training, m->momentum, m->eps);
}

// x (N,T,C) -> (N,T,C)
ct_tensor *ct_nn_batchnorm_tokens_forward(const ct_nn_batchnorm2d *m,
                                          ct_nn_ctx *ctx, ct_tensor *x) {
  if (ctx && ctx->training && ctx->bn_updates)
    return ct_batchnorm_tokens_logged(x, m->weight, m->bias, m->running_mean,
                                      m->running_var, m->momentum, m->eps,
                                      ctx->bn_updates);
  return ct_batchnorm_tokens(x, m->weight, m->bias, m->running_mean,
                             m->running_var, ctx && ctx->training, m->momentum,
                             m->eps);
}
