// nn.Linear (see linear.h).
#include "nn/linear.h"

#include "autograd/ops.h"
#include "nn/init.h"

ct_status ct_nn_linear_init(ct_nn_linear *m, ct_params *p, const char *prefix,
                            int64_t in_features, int64_t out_features,
                            bool bias, ct_rng *init_rng) {
  *m = (ct_nn_linear){.in_features = in_features, .out_features = out_features};
  if (in_features < 1 || out_features < 1)
    return ct_error(CT_ERR_ARG,
                    "linear '%s': features %lld -> %lld must be >= 1", prefix,
                    (long long)in_features, (long long)out_features);
  m->weight =
      ct_nn_param(p, prefix, "weight", CT_SHAPE(out_features, in_features), 0);
  if (!m->weight) return ct_last_status();
  if (bias) {
    m->bias = ct_nn_param(p, prefix, "bias", CT_SHAPE(out_features),
                          CT_PARAM_NO_DECAY);
    if (!m->bias) return ct_last_status();
  }
  return ct_nn_init_linear_default(m->weight, m->bias, init_rng);
}

// x (..., IN), weight (OUT, IN), bias (OUT) -> (..., OUT)
ct_tensor *ct_nn_linear_forward(const ct_nn_linear *m, ct_tensor *x) {
  return ct_linear(x, m->weight, m->bias);
}
