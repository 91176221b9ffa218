// Sinusoidal and learned positional encodings (see position.h).
#include "nn/position.h"

#include <math.h>

#include "autograd/ops.h"
#include "nn/init.h"

ct_tensor *ct_nn_sinusoidal_table(int64_t T, int64_t D) {
  ct_tensor *pe = ct_tensor_empty(CT_F32, CT_SHAPE(T, D));
  if (!pe) return NULL;
  for (int64_t pos = 0; pos < T; pos++)
    for (int64_t c = 0; c < D; c++) {
      int64_t two_i = c - c % 2;
      double angle = (double)pos / pow(10000.0, (double)two_i / (double)D);
      ct_f32(pe)[pos * D + c] = (float)(c % 2 ? cos(angle) : sin(angle));
    }
  return pe;
}

// x (B,T,D) + PE (T,D) broadcast over B -> (B,T,D)
ct_tensor *ct_nn_sinusoidal_add(ct_tensor *x) {
  if (!x) return NULL;
  if (x->ndim != 3) {
    ct_error(CT_ERR_SHAPE, "sinusoidal_add: need x (B,T,D), got %d dims",
             x->ndim);
    return NULL;
  }
  return ct_add(x, ct_nn_sinusoidal_table(x->shape[1], x->shape[2]));
}

ct_status ct_nn_pos_embedding_init(ct_nn_pos_embedding *m, ct_params *p,
                                   const char *name, int64_t max_len,
                                   int64_t dim, ct_rng *init_rng) {
  *m = (ct_nn_pos_embedding){.max_len = max_len, .dim = dim};
  m->weight =
      ct_nn_param(p, NULL, name, CT_SHAPE(1, max_len, dim), CT_PARAM_NO_DECAY);
  if (!m->weight) return ct_last_status();
  return ct_nn_init_trunc_normal(m->weight, init_rng, 0.0f, 0.02f, -2.0f, 2.0f);
}

// x (B,T,D), weight (1,max_len,D) -> x + weight[:, :T] (B,T,D)
ct_tensor *ct_nn_pos_embedding_forward(const ct_nn_pos_embedding *m,
                                       ct_tensor *x) {
  if (!x) return NULL;
  if (x->ndim != 3 || x->shape[1] > m->max_len || x->shape[2] != m->dim) {
    ct_error(CT_ERR_SHAPE,
             "pos_embedding '%s': need x (B, T<=%lld, %lld), got %d dims "
             "(T=%lld)",
             m->weight->name, (long long)m->max_len, (long long)m->dim, x->ndim,
             x->ndim >= 2 ? (long long)x->shape[1] : -1LL);
    return NULL;
  }
  ct_tensor *w = m->weight;
  if (x->shape[1] < m->max_len) w = ct_slice(w, 1, 0, x->shape[1]);
  return ct_add(x, w);
}
