// The feed-forward block and timm's Mlp (see mlp.h).
#include "nn/mlp.h"

ct_tensor *ct_nn_feedforward(ct_nn_ctx *ctx, const ct_nn_linear *fc1,
                             const ct_nn_linear *fc2, ct_nn_activation act,
                             float dropout, ct_tensor *x) {
  ct_tensor *h = ct_nn_activate(ct_nn_linear_forward(fc1, x), act);
  return ct_nn_linear_forward(fc2, ct_nn_dropout(ctx, h, dropout));
}

ct_status ct_nn_mlp_init(ct_nn_mlp *m, ct_params *p, const char *prefix,
                         int64_t in_features, int64_t hidden_features,
                         int64_t out_features, ct_nn_activation act,
                         float dropout, ct_rng *init_rng) {
  *m = (ct_nn_mlp){.act = act, .dropout = dropout};
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "fc1");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->fc1, p, name, in_features, hidden_features,
                           true, init_rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "fc2");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->fc2, p, name, hidden_features, out_features,
                           true, init_rng);
  return st;
}

// x (..., IN) -> (..., OUT)
ct_tensor *ct_nn_mlp_forward(const ct_nn_mlp *m, ct_nn_ctx *ctx,
                             ct_tensor *x) {
  ct_tensor *y =
      ct_nn_feedforward(ctx, &m->fc1, &m->fc2, m->act, m->dropout, x);
  return ct_nn_dropout(ctx, y, m->dropout);
}
