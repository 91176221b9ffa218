// Differentiable ops for convolutional networks on NCHW f32 tensors: 2-D
// convolution, batch norm, max/average pooling. PyTorch semantics throughout
// (torch.nn.functional.conv2d, batch_norm, max_pool2d, avg_pool2d).
//
// Dimension letters: N images, C input channels, O output channels, H W the
// input height and width, Ho Wo the output's, k the (square) pooling window.
//
// Conventions are those of autograd/ops.h: NULL inputs pass an earlier error
// through, bad arguments return NULL with an error naming the op and the
// shapes, and no result depends on the thread count.
//
// Not here: dilation, groups, asymmetric padding, ceil_mode, non-square
// pooling windows, count_include_pad for padded average pooling.
#ifndef CT_AUTOGRAD_OPS_CONV_H
#define CT_AUTOGRAD_OPS_CONV_H

#include <stdbool.h>

#include "core/tensor.h"

// x (N,C,H,W), w (O,C,kh,kw), bias (O) or NULL -> (N,O,Ho,Wo) with zero
// padding `padding` on every side:
//   Ho = (H + 2 padding - kh) / stride + 1, Wo likewise.
// Computed as im2col + gemm (core/gemm.h), a bounded chunk of images at a
// time; a 1x1 stride-1 unpadded conv reads x directly.
ct_tensor *ct_conv2d(ct_tensor *x, ct_tensor *w, ct_tensor *bias, int stride,
                     int padding);

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

#endif
