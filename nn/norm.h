// nn.LayerNorm over the last dim, with a weight and a bias.
#ifndef CT_NN_NORM_H
#define CT_NN_NORM_H

#include "nn/module.h"

typedef struct ct_nn_layernorm {
  ct_tensor *weight;  // (C)  "prefix.weight" (NO_DECAY), ones
  ct_tensor *bias;    // (C)  "prefix.bias" (NO_DECAY), zeros
  int64_t dim;
  float eps;  // PyTorch's default 1e-5
} ct_nn_layernorm;

ct_status ct_nn_layernorm_init(ct_nn_layernorm *m, ct_params *p,
                               const char *prefix, int64_t dim, float eps);

// x (..., C) -> (..., C)
ct_tensor *ct_nn_layernorm_forward(const ct_nn_layernorm *m, ct_tensor *x);
// The same stored as out_dtype (ct_layernorm_as): for an output whose only
// readers are products, ct_nn_activation_dtype() (nn/module.h).
ct_tensor *ct_nn_layernorm_forward_as(const ct_nn_layernorm *m, ct_tensor *x,
                                      ct_dtype out_dtype);

#endif
