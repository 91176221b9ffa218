// nn.LayerNorm (see norm.h). The op (autograd/ops_norm.c) does the math.
#include "nn/norm.h"

#include "autograd/ops.h"
#include "nn/init.h"

ct_status ct_nn_layernorm_init(ct_nn_layernorm *m, ct_params *p,
                               const char *prefix, int64_t dim, float eps) {
  *m = (ct_nn_layernorm){.dim = dim, .eps = eps};
  if (dim < 1)
    return ct_error(CT_ERR_ARG, "layernorm '%s': dim %lld must be >= 1", prefix,
                    (long long)dim);
  m->weight =
      ct_nn_param(p, prefix, "weight", CT_SHAPE(dim), CT_PARAM_NO_DECAY);
  if (!m->weight) return ct_last_status();
  m->bias = ct_nn_param(p, prefix, "bias", CT_SHAPE(dim), CT_PARAM_NO_DECAY);
  if (!m->bias) return ct_last_status();
  return ct_nn_init_ones(m->weight);  // the bias is registered zero
}

// x (..., C), weight (C), bias (C) -> (..., C)
ct_tensor *ct_nn_layernorm_forward(const ct_nn_layernorm *m, ct_tensor *x) {
  return ct_layernorm(x, m->weight, m->bias, m->eps);
}

ct_tensor *ct_nn_layernorm_forward_as(const ct_nn_layernorm *m, ct_tensor *x,
                                      ct_dtype out_dtype) {
  return ct_layernorm_as(x, m->weight, m->bias, m->eps, out_dtype);
}
