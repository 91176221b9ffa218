// Pieces shared by the models laid out after timm (ViT and DeiT in
// nn/vit.h, Swin in nn/swin.h): timm's Linear initialisation, the drop path
// (stochastic depth) residual, and the patch embedding's convolution.
#ifndef CT_NN_TIMM_H
#define CT_NN_TIMM_H

#include "nn/linear.h"

// "prefix.leaf" as a Linear IN -> OUT with timm's init: trunc_normal(std
// .02) weight, zero bias (bias false: none).
ct_status ct_nn_timm_linear_init(ct_nn_linear *l, ct_params *p,
                                 const char *prefix, const char *leaf,
                                 int64_t in, int64_t out, bool bias,
                                 ct_rng *rng);

// x + drop_path(branch), x and branch (R, ...) with R = samples *
// rows_per_sample (sample of row r: r / rows_per_sample; Swin's windows of
// one image drop together): each sample's branch is dropped with
// probability p, kept ones scaled by 1 / (1 - p); sample s keeps iff
// ct_rng_uniform_at(seed, stream, s) >= p. Takes one dropout site of ctx
// (nn/module.h) whether or not it drops anything.
ct_tensor *ct_nn_drop_path_add(ct_nn_ctx *ctx, ct_tensor *x, ct_tensor *branch,
                               float p, int64_t rows_per_sample);
// Whether ct_nn_drop_path_add would drop anything.
bool ct_nn_drop_path_active(const ct_nn_ctx *ctx, float p);

// timm's PatchEmbed.proj: a Conv2d(C, D, P, stride P), "prefix.proj.weight"
// (D, C, P, P) and "prefix.proj.bias" (D, NO_DECAY), with PyTorch's init
// (kaiming_uniform(a = sqrt(5)) weight, U(+-1/sqrt(C*P*P)) bias).
typedef struct ct_nn_patch_proj {
  ct_tensor *weight, *bias;
  int64_t in_channels, patch, dim;
} ct_nn_patch_proj;

ct_status ct_nn_patch_proj_init(ct_nn_patch_proj *m, ct_params *p,
                                const char *prefix, int64_t in_channels,
                                int64_t patch, int64_t dim, ct_rng *init_rng);
// x (B, C, H, W) f32, H and W multiples of P -> tokens (B, (H/P)*(W/P), D),
// the patch grid row-major. The conv runs as one linear map of the patches
// (each cut out in the weight's (c, ky, kx) order). x gets no gradient.
ct_tensor *ct_nn_patch_proj_forward(const ct_nn_patch_proj *m, ct_tensor *x);

#endif
