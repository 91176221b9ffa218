// Differentiable ops for convolutional networks on NCHW f32 tensors: 2-D
// convolution, batch norm, max/average pooling; the depthwise conv and batch
// norm also on tokens (N, H*W, C), channels last, for CvT. PyTorch semantics
// throughout (torch.nn.functional.conv2d, batch_norm, max_pool2d,
// avg_pool2d).
//
// Dimension letters: N images, C input channels, O output channels, H W the
// input height and width, Ho Wo the output's, k the (square) pooling window.
//
// Conventions are those of autograd/ops.h: NULL inputs pass an earlier error
// through, bad arguments return NULL with an error naming the op and the
// shapes, and no result depends on the thread count.
//
// Not here: dilation, groups other than 1 and C (depthwise), asymmetric
// padding, ceil_mode, non-square pooling windows, count_include_pad for
// padded average pooling.
#ifndef CT_AUTOGRAD_OPS_CONV_H
#define CT_AUTOGRAD_OPS_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

// x (N,C,H,W), w (O,C,kh,kw), bias (O) or NULL -> (N,O,Ho,Wo) with zero
// padding `padding` on every side:
//   Ho = (H + 2 padding - kh) / stride + 1, Wo likewise.
// Computed as im2col + gemm (core/gemm.h), a bounded chunk of images at a
// time; a 1x1 stride-1 unpadded conv reads x directly.
ct_tensor *ct_conv2d(ct_tensor *x, ct_tensor *w, ct_tensor *bias, int stride,
                     int padding);

// Depthwise convolution (Conv2d with groups = C, no bias): each channel
// convolved with its own k x k kernel.
// x (N,C,H,W), w (C,1,k,k) (PyTorch's weight layout) -> (N,C,Ho,Wo), zero
// padding `padding` on every side, Ho = (H + 2 padding - k) / stride + 1.
// Computed directly per (image, channel) plane (no im2col: a gemm with an
// inner dim of k*k would not pay), each plane on one thread.
ct_tensor *ct_conv2d_depthwise(ct_tensor *x, ct_tensor *w, int stride,
                               int padding);

// ct_conv2d_depthwise on tokens, channels last: x (N, H*W, C), the N maps
// row-major (token ih*W + iw holds position (ih, iw)), w (C,1,k,k) ->
// (N, Ho*Wo, C), likewise. The same bits as the NCHW op on the transposed
// map (every output and gradient element adds the same terms in the same
// order), without the transposes; the loops run along the channels.
ct_tensor *ct_conv2d_depthwise_tokens(ct_tensor *x, int64_t H, int64_t W,
                                      ct_tensor *w, int stride, int padding);

// BatchNorm2d over the channel dim of x (N,C,H,W) -> (N,C,H,W):
//   y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c
// training: mean and biased var over (N,H,W) of this batch, the gradient
//   flows through them; running_mean and running_var (C), if not NULL, are
//   updated in place: running = (1 - momentum) running + momentum stat, with
//   the UNBIASED variance for running_var (as PyTorch). Needs N*H*W > 1.
// eval: mean and var are running_mean and running_var (required); the op is
//   then a per-channel affine map.
// weight and bias (C) may be NULL (1 and 0). The running stats get no
// gradient and are not tape inputs.
ct_tensor *ct_batchnorm2d(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                          ct_tensor *running_mean, ct_tensor *running_var,
                          bool training, float momentum, float eps);

// Running-statistics updates recorded instead of applied. A data-parallel
// step must apply every micro-batch's updates in micro-batch order,
// whichever process ran it (as one process with gradient accumulation
// does): each process records its micro-batches' updates, the records are
// exchanged, and every process applies all of them in order. An update is
//   running = (1 - momentum) running + term
// with term = momentum * mean (running_mean) and momentum * var * M / (M - 1)
// (running_var), in double as the in-place update computes it, so applying
// a record later gives the bits of the in-place update.
typedef struct ct_bn_update {
  float *running_mean, *running_var;  // (C) each
  int64_t channels;
  float momentum;
  int64_t first;  // its 2C terms in the log's values: C mean terms, then C
                  // variance terms
} ct_bn_update;

// Zero-initialize ({0}).
typedef struct ct_bn_update_log {
  ct_bn_update *items;  // in the order the batch norms ran
  int64_t n, cap;
  double *values;  // every item's terms
  int64_t n_values, cap_values;
} ct_bn_update_log;

// ct_batchnorm2d in training mode whose running-statistics update goes to
// `log` (appended) instead of running_mean and running_var, which are only
// read from the log when it is applied. NULL with an error also when the
// log cannot grow.
ct_tensor *ct_batchnorm2d_logged(ct_tensor *x, ct_tensor *weight,
                                 ct_tensor *bias, ct_tensor *running_mean,
                                 ct_tensor *running_var, float momentum,
                                 float eps, ct_bn_update_log *log);
// Empties the log (keeps its memory).
void ct_bn_update_log_clear(ct_bn_update_log *log);
// Applies the log's updates in record order, with the terms `values`: the
// log's own (log->values) or those of another log of the same layout (the
// same batch norms in the same order: a micro-batch of another process).
void ct_bn_update_log_apply(const ct_bn_update_log *log, const double *values);
void ct_bn_update_log_free(ct_bn_update_log *log);

// ct_batchnorm2d and ct_batchnorm2d_logged on tokens, channels last: x
// (N,T,C) -> (N,T,C), channel c's statistics over all N*T tokens. The same
// bits as the NCHW ops on x transposed to (N,C,T,1) (outputs, gradients,
// running statistics and logged terms), without the transposes.
ct_tensor *ct_batchnorm_tokens(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                               ct_tensor *running_mean, ct_tensor *running_var,
                               bool training, float momentum, float eps);
ct_tensor *ct_batchnorm_tokens_logged(ct_tensor *x, ct_tensor *weight,
                                      ct_tensor *bias, ct_tensor *running_mean,
                                      ct_tensor *running_var, float momentum,
                                      float eps, ct_bn_update_log *log);

// Max over k x k windows, stride `stride`, padding `padding` (<= k/2) with
// -inf: (N,C,H,W) -> (N,C,Ho,Wo), Ho = (H + 2 padding - k) / stride + 1.
// The gradient goes to the first maximum of each window in row-major scan
// order (a NaN counts as a maximum).
ct_tensor *ct_max_pool2d(ct_tensor *x, int kernel, int stride, int padding);
// Mean over k x k windows, no padding: (N,C,H,W) -> (N,C,Ho,Wo),
// Ho = (H - k) / stride + 1.
ct_tensor *ct_avg_pool2d(ct_tensor *x, int kernel, int stride);
// Mean over H and W: (N,C,H,W) -> (N,C).
ct_tensor *ct_global_avg_pool2d(ct_tensor *x);

// Group normalization (PyTorch's nn.GroupNorm, autograd/ops_group_norm.c):
// x (N, C, ...) -> the same shape; per image and group of C / groups
// channels, (x - mean) / sqrt(var + eps) over the group's channels and
// positions (biased variance), then * weight[c] + bias[c] (each (C) or NULL).
ct_tensor *ct_group_norm(ct_tensor *x, int64_t groups, ct_tensor *weight,
                         ct_tensor *bias, float eps);

#endif
