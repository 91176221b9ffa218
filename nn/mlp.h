// The feed-forward block of transformers: Linear -> activation -> dropout ->
// Linear, and timm's Mlp module (fc1, act, drop, fc2, drop) built on it.
#ifndef CT_NN_MLP_H
#define CT_NN_MLP_H

#include "nn/linear.h"

// The shared block: fc2(dropout(act(fc1(x)))); one dropout site.
// x (..., IN) -> (..., OUT), fc1 IN -> HIDDEN, fc2 HIDDEN -> OUT
ct_tensor *ct_nn_feedforward(ct_nn_ctx *ctx, const ct_nn_linear *fc1,
                             const ct_nn_linear *fc2, ct_nn_activation act,
                             float dropout, ct_tensor *x);
// ct_nn_add_dropout(ctx, residual, ct_nn_feedforward(...), p), the same bits
// (same dropout streams); with the ReLU while dropping, the whole block is
// one op (ct_linear_fused: no activation, branch or sum kept but the
// output).
ct_tensor *ct_nn_feedforward_add_dropout(ct_nn_ctx *ctx,
                                         const ct_nn_linear *fc1,
                                         const ct_nn_linear *fc2,
                                         ct_nn_activation act, float dropout,
                                         ct_tensor *x, ct_tensor *residual,
                                         float p);

typedef struct ct_nn_mlp {
  ct_nn_linear fc1;  // "prefix.fc1.*"  IN -> HIDDEN
  ct_nn_linear fc2;  // "prefix.fc2.*"  HIDDEN -> OUT
  ct_nn_activation act;
  float dropout;  // after the activation and after fc2
} ct_nn_mlp;

ct_status ct_nn_mlp_init(ct_nn_mlp *m, ct_params *p, const char *prefix,
                         int64_t in_features, int64_t hidden_features,
                         int64_t out_features, ct_nn_activation act,
                         float dropout, ct_rng *init_rng);

// x (..., IN) -> (..., OUT); two dropout sites.
ct_tensor *ct_nn_mlp_forward(const ct_nn_mlp *m, ct_nn_ctx *ctx, ct_tensor *x);
// residual + mlp(x), the same bits as ct_add(residual, ct_nn_mlp_forward(m,
// ctx, x)) and the same dropout sites; without dropping, the add is folded
// into fc2 (less memory kept for backward).
ct_tensor *ct_nn_mlp_forward_residual(const ct_nn_mlp *m, ct_nn_ctx *ctx,
                                      ct_tensor *x, ct_tensor *residual);

#endif
