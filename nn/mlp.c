// The feed-forward block and timm's Mlp (see mlp.h).
#include "nn/mlp.h"

#include "autograd/ops.h"

// fc2(dropout(act(fc1(x)))) [+ residual]. Without dropping, GELU, fc2 and
// the residual add run as one op (ct_linear_fused), which keeps only fc1's
// output for backward, not gelu of it nor fc2's; the dropout site is taken
// all the same. With dropping, a ReLU, the dropout, fc2 and the residual
// add run as one op too (ct_linear_fused's relu_dropout: the mask and fc1's
// output kept, not relu(fc1(x)) dropped). fc1's output, read only by that
// op, is kept as ct_nn_activation_dtype() (bf16 in bf16 precision).
// fc2(dropout(relu(fc1(x)))) + residual, the residual's branch dropped
// with residual_p > 0, as one op: the activation's dropout site, then the
// add's (when dropped), as in the separate ops. Dropout is active.
static ct_tensor *relu_dropout_block(ct_nn_ctx *ctx, const ct_nn_linear *fc1,
                                     const ct_nn_linear *fc2, float dropout,
                                     ct_tensor *x, ct_tensor *residual,
                                     float residual_p) {
  ct_linear_fusion f = {.relu_dropout = dropout,
                        .dropout_seed = ctx->seed,
                        .residual = residual,
                        .residual_dropout = residual_p};
  f.dropout_stream = ct_nn_next_dropout_stream(ctx);
  if (residual_p > 0.0f) f.residual_stream = ct_nn_next_dropout_stream(ctx);
  ct_tensor *u =
      ct_linear_as(x, fc1->weight, fc1->bias, ct_nn_activation_dtype());
  return ct_linear_fused(u, fc2->weight, fc2->bias, &f);
}

static ct_tensor *feedforward(ct_nn_ctx *ctx, const ct_nn_linear *fc1,
                              const ct_nn_linear *fc2, ct_nn_activation act,
                              float dropout, ct_tensor *x,
                              ct_tensor *residual) {
  if (!ct_nn_dropout_active(ctx, dropout)) {
    if (ctx) ct_nn_next_dropout_stream(ctx);
    ct_linear_fusion f = {.gelu_input = act == CT_NN_GELU,
                          .residual = residual};
    // The folded GELU is u's only reader: u may be kept in bf16.
    ct_tensor *u =
        ct_linear_as(x, fc1->weight, fc1->bias,
                     f.gelu_input ? ct_nn_activation_dtype() : CT_F32);
    if (!f.gelu_input) u = ct_nn_activate(u, act);
    if (!u) return NULL;
    return ct_linear_fused(u, fc2->weight, fc2->bias, &f);
  }
  if (act == CT_NN_RELU)  // ReLU, dropout, fc2 and the residual as one op
    return relu_dropout_block(ctx, fc1, fc2, dropout, x, residual, 0.0f);
  ct_tensor *u = ct_nn_linear_forward(fc1, x);
  ct_tensor *h = ct_nn_dropout(ctx, ct_nn_activate(u, act), dropout);
  ct_tensor *y = ct_nn_linear_forward(fc2, h);
  return residual ? ct_add(residual, y) : y;
}

ct_tensor *ct_nn_feedforward_add_dropout(ct_nn_ctx *ctx,
                                         const ct_nn_linear *fc1,
                                         const ct_nn_linear *fc2,
                                         ct_nn_activation act, float dropout,
                                         ct_tensor *x, ct_tensor *residual,
                                         float p) {
  if (act != CT_NN_RELU || !ct_nn_dropout_active(ctx, dropout) ||
      !ct_nn_dropout_active(ctx, p) || !residual)
    return ct_nn_add_dropout(
        ctx, residual, feedforward(ctx, fc1, fc2, act, dropout, x, NULL), p);
  return relu_dropout_block(ctx, fc1, fc2, dropout, x, residual, p);
}

ct_tensor *ct_nn_feedforward(ct_nn_ctx *ctx, const ct_nn_linear *fc1,
                             const ct_nn_linear *fc2, ct_nn_activation act,
                             float dropout, ct_tensor *x) {
  return feedforward(ctx, fc1, fc2, act, dropout, x, NULL);
}

ct_status ct_nn_mlp_init(ct_nn_mlp *m, ct_params *p, const char *prefix,
                         int64_t in_features, int64_t hidden_features,
                         int64_t out_features, ct_nn_activation act,
                         float dropout, ct_rng *init_rng) {
  *m = (ct_nn_mlp){.act = act, .dropout = dropout};
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "fc1");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->fc1, p, name, in_features, hidden_features, true,
                           init_rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "fc2");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->fc2, p, name, hidden_features, out_features,
                           true, init_rng);
  return st;
}

// x (..., IN) -> (..., OUT)
ct_tensor *ct_nn_mlp_forward(const ct_nn_mlp *m, ct_nn_ctx *ctx, ct_tensor *x) {
  ct_tensor *y =
      ct_nn_feedforward(ctx, &m->fc1, &m->fc2, m->act, m->dropout, x);
  return ct_nn_dropout(ctx, y, m->dropout);
}

ct_tensor *ct_nn_mlp_forward_residual(const ct_nn_mlp *m, ct_nn_ctx *ctx,
                                      ct_tensor *x, ct_tensor *residual) {
  if (ct_nn_dropout_active(ctx, m->dropout))
    return ct_add(residual, ct_nn_mlp_forward(m, ctx, x));
  ct_tensor *y =
      feedforward(ctx, &m->fc1, &m->fc2, m->act, m->dropout, x, residual);
  if (ctx) ct_nn_next_dropout_stream(ctx);  // the output dropout's site
  return y;
}
