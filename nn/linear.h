// nn.Linear: y = x W^T + b, with PyTorch's names and default init.
#ifndef CT_NN_LINEAR_H
#define CT_NN_LINEAR_H

#include "nn/module.h"

typedef struct ct_nn_linear {
  ct_tensor *weight;  // (OUT, IN)  "prefix.weight"
  ct_tensor *bias;    // (OUT)      "prefix.bias" (NO_DECAY), or NULL
  int64_t in_features, out_features;
} ct_nn_linear;

// Weight kaiming_uniform(a = sqrt(5)), bias U(+-1/sqrt(IN)) (nn/init.h).
ct_status ct_nn_linear_init(ct_nn_linear *m, ct_params *p, const char *prefix,
                            int64_t in_features, int64_t out_features,
                            bool bias, ct_rng *init_rng);

// x (..., IN) -> (..., OUT)
ct_tensor *ct_nn_linear_forward(const ct_nn_linear *m, ct_tensor *x);

#endif
