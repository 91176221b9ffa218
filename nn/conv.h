// nn.Conv2d and nn.BatchNorm2d with PyTorch's names and default init.
//
// BatchNorm2d keeps its running statistics as parameters flagged
// CT_PARAM_FROZEN | CT_PARAM_NO_DECAY: checkpoints and export save them
// (PyTorch's state_dict has them as buffers), optimizers never touch them,
// and the forward pass updates them in place while training. PyTorch's
// num_batches_tracked buffer is left out: it only matters with momentum=None
// (a cumulative average), which is not supported.
#ifndef CT_NN_CONV_H
#define CT_NN_CONV_H

#include "nn/module.h"

typedef struct ct_nn_conv2d {
  ct_tensor *weight;  // (O, C, k, k)  "prefix.weight"
  ct_tensor *bias;    // (O)           "prefix.bias" (NO_DECAY), or NULL
  int64_t in_channels, out_channels;
  int kernel, stride, padding;
} ct_nn_conv2d;

// PyTorch's Conv2d default init: weight kaiming_uniform(a = sqrt(5)), i.e.
// U(+-1/sqrt(fan_in)), bias U(+-1/sqrt(fan_in)), fan_in = C * k * k.
ct_status ct_nn_conv2d_init(ct_nn_conv2d *m, ct_params *p, const char *prefix,
                            int64_t in_channels, int64_t out_channels,
                            int kernel, int stride, int padding, bool bias,
                            ct_rng *init_rng);

// x (N, C, H, W) -> (N, O, Ho, Wo), Ho = (H + 2 padding - k) / stride + 1
ct_tensor *ct_nn_conv2d_forward(const ct_nn_conv2d *m, ct_tensor *x);

typedef struct ct_nn_batchnorm2d {
  ct_tensor *weight;        // (C)  "prefix.weight" (NO_DECAY), ones
  ct_tensor *bias;          // (C)  "prefix.bias" (NO_DECAY), zeros
  ct_tensor *running_mean;  // (C)  "prefix.running_mean" (FROZEN), zeros
  ct_tensor *running_var;   // (C)  "prefix.running_var" (FROZEN), ones
  int64_t channels;
  float momentum;  // PyTorch's default 0.1
  float eps;       // PyTorch's default 1e-5
} ct_nn_batchnorm2d;

// momentum 0.1, eps 1e-5 (change the fields after init for others).
ct_status ct_nn_batchnorm2d_init(ct_nn_batchnorm2d *m, ct_params *p,
                                 const char *prefix, int64_t channels);

// x (N, C, H, W) -> (N, C, H, W). Training mode (batch statistics, running
// stats updated, or their update recorded in ctx->bn_updates when set) when
// ctx && ctx->training; else the running statistics.
ct_tensor *ct_nn_batchnorm2d_forward(const ct_nn_batchnorm2d *m, ct_nn_ctx *ctx,
                                     ct_tensor *x);

// The same batch norm on tokens, channels last: x (N, T, C) -> (N, T, C),
// the statistics of channel c over all N*T tokens (ct_batchnorm_tokens).
// The same bits as ct_nn_batchnorm2d_forward on the transposed map.
ct_tensor *ct_nn_batchnorm_tokens_forward(const ct_nn_batchnorm2d *m,
                                          ct_nn_ctx *ctx, ct_tensor *x);

#endif
