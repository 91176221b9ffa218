// nn.GRU and nn.LSTM (see rnn.h): parameters, and the layer loop over
// autograd/ops_rnn.h's scans.
#include "nn/rnn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/ops_rnn.h"
#include "core/arena.h"
#include "nn/init.h"

ct_nn_rnn_config ct_nn_rnn_defaults(int64_t input_size, int64_t hidden_size) {
  return (ct_nn_rnn_config){.input_size = input_size,
                            .hidden_size = hidden_size,
                            .num_layers = 1,
                            .bias = true};
}

static int64_t directions(const ct_nn_rnn *m) {
  return m->cfg.bidirectional ? 2 : 1;
}

static const char *kind_name(ct_nn_rnn_kind kind) {
  return kind == CT_NN_RNN_GRU ? "gru" : "lstm";
}

// Registers "prefix.<what>_l<layer><suffix>" and draws it U(-bound, bound).
static ct_tensor *uniform_param(ct_params *p, const char *prefix,
                                const char *what, int layer, const char *suffix,
                                int ndim, const int64_t *shape, unsigned flags,
                                float bound, ct_rng *rng) {
  char leaf[64];
  snprintf(leaf, sizeof leaf, "%s_l%d%s", what, layer, suffix);
  ct_tensor *t = ct_nn_param(p, prefix, leaf, ndim, shape, flags);
  if (t && ct_nn_init_uniform(t, rng, -bound, bound) != CT_OK) return NULL;
  return t;
}

static ct_status rnn_init(ct_nn_rnn *m, ct_nn_rnn_kind kind, ct_params *p,
                          const char *prefix, const ct_nn_rnn_config *cfg,
                          ct_rng *rng) {
  memset(m, 0, sizeof *m);
  m->kind = kind;
  m->cfg = *cfg;
  const int64_t I = cfg->input_size, H = cfg->hidden_size;
  if (I < 1 || H < 1 || cfg->num_layers < 1 ||
      !(cfg->dropout >= 0.0f && cfg->dropout < 1.0f))
    return ct_error(CT_ERR_ARG,
                    "%s '%s': input_size %lld, hidden_size %lld and "
                    "num_layers %d must be >= 1, dropout %g in [0, 1)",
                    kind_name(kind), prefix, (long long)I, (long long)H,
                    cfg->num_layers, (double)cfg->dropout);
  const int64_t D = directions(m), G = kind == CT_NN_RNN_GRU ? 3 : 4;
  m->cells = calloc((size_t)(cfg->num_layers * D), sizeof *m->cells);
  if (!m->cells) return ct_error(CT_ERR_NOMEM, "%s: out of memory", prefix);
  const float bound = (float)(1.0 / sqrt((double)H));
  for (int l = 0; l < cfg->num_layers; l++) {
    const int64_t in = l == 0 ? I : D * H;
    for (int64_t d = 0; d < D; d++) {
      const char *sfx = d ? "_reverse" : "";
      ct_nn_rnn_cell *c = &m->cells[l * D + d];
      c->w_ih = uniform_param(p, prefix, "weight_ih", l, sfx,
                              CT_SHAPE(G * H, in), 0, bound, rng);
      c->w_hh = c->w_ih ? uniform_param(p, prefix, "weight_hh", l, sfx,
                                        CT_SHAPE(G * H, H), 0, bound, rng)
                        : NULL;
      if (!c->w_hh) return ct_last_status();
      if (!cfg->bias) continue;
      c->b_ih = uniform_param(p, prefix, "bias_ih", l, sfx, CT_SHAPE(G * H),
                              CT_PARAM_NO_DECAY, bound, rng);
      c->b_hh =
          c->b_ih ? uniform_param(p, prefix, "bias_hh", l, sfx, CT_SHAPE(G * H),
                                  CT_PARAM_NO_DECAY, bound, rng)
                  : NULL;
      if (!c->b_hh) return ct_last_status();
    }
  }
  return CT_OK;
}

ct_status ct_nn_gru_init(ct_nn_gru *m, ct_params *p, const char *prefix,
                         const ct_nn_rnn_config *cfg, ct_rng *init_rng) {
  return rnn_init(m, CT_NN_RNN_GRU, p, prefix, cfg, init_rng);
}

ct_status ct_nn_lstm_init(ct_nn_lstm *m, ct_params *p, const char *prefix,
                          const ct_nn_rnn_config *cfg, ct_rng *init_rng) {
  return rnn_init(m, CT_NN_RNN_LSTM, p, prefix, cfg, init_rng);
}

void ct_nn_rnn_free(ct_nn_rnn *m) {
  free(m->cells);
  m->cells = NULL;
}

static bool check_states(const ct_nn_rnn *m, const ct_tensor *s,
                         const char *what, int64_t B) {
  const int64_t LD = m->cfg.num_layers * directions(m), H = m->cfg.hidden_size;
  if (s->dtype == CT_F32 && s->ndim == 3 && s->shape[0] == LD &&
      s->shape[1] == B && s->shape[2] == H)
    return true;
  char got[64];
  ct_error(CT_ERR_SHAPE,
           "%s: %s must be f32 (L*D, B, H) = [%lld, %lld, %lld], got %s",
           kind_name(m->kind), what, (long long)LD, (long long)B, (long long)H,
           ct_shape_str(s->ndim, s->shape, got, sizeof got));
  return false;
}

// Row `index` of states (L*D,B,H) as (B,H), or NULL when states is NULL.
static ct_tensor *state_row(ct_tensor *states, int64_t index) {
  if (!states) return NULL;
  return ct_reshape(ct_slice(states, 0, index, 1),
                    CT_SHAPE(states->shape[1], states->shape[2]));
}

// finals[L*D] (B,H) -> (L*D,B,H)
static ct_tensor *stack_states(ct_tensor **finals, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (finals[i])
      finals[i] = ct_reshape(
          finals[i], CT_SHAPE(1, finals[i]->shape[0], finals[i]->shape[1]));
  for (int64_t i = 0; i < n; i++)
    if (!finals[i]) return NULL;
  return ct_concat(finals, (int)n, 0);
}

static ct_tensor *rnn_forward(const ct_nn_rnn *m, ct_nn_ctx *ctx, ct_tensor *x,
                              ct_tensor *lengths, ct_tensor *h0, ct_tensor *c0,
                              ct_tensor **h_n, ct_tensor **c_n) {
  if (h_n) *h_n = NULL;
  if (c_n) *c_n = NULL;
  if (!x) return NULL;
  const char *name = kind_name(m->kind);
  const ct_nn_rnn_config *cfg = &m->cfg;
  if (x->dtype != CT_F32 || x->ndim != 3 || x->shape[2] != cfg->input_size) {
    char got[64];
    ct_error(CT_ERR_SHAPE, "%s: x must be f32 %s with I = %lld, got %s", name,
             cfg->batch_first ? "(B,T,I)" : "(T,B,I)",
             (long long)cfg->input_size,
             ct_shape_str(x->ndim, x->shape, got, sizeof got));
    return NULL;
  }
  ct_tensor *in = cfg->batch_first ? x : ct_transpose(x, 0, 1);
  if (!in) return NULL;
  const int64_t B = in->shape[0], D = directions(m);
  const int64_t LD = cfg->num_layers * D;
  if ((h0 && !check_states(m, h0, "h0", B)) ||
      (c0 && !check_states(m, c0, "c0", B)))
    return NULL;
  ct_tensor **finals_h = ct_arena_calloc((size_t)(2 * LD) * sizeof *finals_h);
  if (!finals_h) return NULL;
  ct_tensor **finals_c = finals_h + LD;
  const bool lstm = m->kind == CT_NN_RNN_LSTM;
  for (int l = 0; l < cfg->num_layers && in; l++) {
    ct_tensor *outs[2] = {NULL, NULL};
    for (int64_t d = 0; d < D; d++) {
      const int64_t idx = l * D + d;
      const ct_nn_rnn_cell *c = &m->cells[idx];
      ct_rnn_scan_args a = {.gx = ct_linear(in, c->w_ih, c->b_ih),
                            .h0 = state_row(h0, idx),
                            .c0 = state_row(c0, idx),
                            .w_hh = c->w_hh,
                            .b_hh = c->b_hh,
                            .lengths = lengths,
                            .reverse = d == 1};
      ct_tensor **hf = h_n ? &finals_h[idx] : NULL;
      outs[d] = lstm ? ct_lstm_scan(&a, hf, c_n ? &finals_c[idx] : NULL)
                     : ct_gru_scan(&a, hf);
      if (!outs[d]) return NULL;
    }
    in = D == 2 ? ct_concat(outs, 2, 2) : outs[0];
    if (l + 1 < cfg->num_layers) in = ct_nn_dropout(ctx, in, cfg->dropout);
  }
  ct_tensor *out = cfg->batch_first ? in : ct_transpose(in, 0, 1);
  if (!out) return NULL;
  if (h_n && !(*h_n = stack_states(finals_h, LD))) return NULL;
  if (c_n && lstm && !(*c_n = stack_states(finals_c, LD))) return NULL;
  return out;
}

ct_tensor *ct_nn_gru_forward(const ct_nn_gru *m, ct_nn_ctx *ctx, ct_tensor *x,
                             ct_tensor *lengths, ct_tensor *h0,
                             ct_tensor **h_n) {
  if (m->kind != CT_NN_RNN_GRU) {
    ct_error(CT_ERR_ARG, "gru_forward: the module is an LSTM");
    return NULL;
  }
  return rnn_forward(m, ctx, x, lengths, h0, NULL, h_n, NULL);
}

ct_tensor *ct_nn_lstm_forward(const ct_nn_lstm *m, ct_nn_ctx *ctx, ct_tensor *x,
                              ct_tensor *lengths, ct_tensor *h0, ct_tensor *c0,
                              ct_tensor **h_n, ct_tensor **c_n) {
  if (m->kind != CT_NN_RNN_LSTM) {
    ct_error(CT_ERR_ARG, "lstm_forward: the module is a GRU");
    return NULL;
  }
  return rnn_forward(m, ctx, x, lengths, h0, c0, h_n, c_n);
}
