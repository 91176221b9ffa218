// nn.Embedding (see embedding.h).
#include "nn/embedding.h"

#include "autograd/ops.h"
#include "nn/init.h"

ct_status ct_nn_embedding_init(ct_nn_embedding *m, ct_params *p,
                               const char *prefix, int64_t num_embeddings,
                               int64_t embedding_dim, int64_t padding_idx,
                               ct_rng *init_rng) {
  *m = (ct_nn_embedding){.num_embeddings = num_embeddings,
                         .embedding_dim = embedding_dim,
                         .padding_idx = padding_idx};
  if (num_embeddings < 1 || embedding_dim < 1)
    return ct_error(CT_ERR_ARG, "embedding '%s': size %lld x %lld must be >= 1",
                    prefix, (long long)num_embeddings,
                    (long long)embedding_dim);
  if (padding_idx >= num_embeddings || padding_idx < -1)
    return ct_error(CT_ERR_INDEX,
                    "embedding '%s': padding_idx %lld outside [-1, %lld)",
                    prefix, (long long)padding_idx, (long long)num_embeddings);
  m->weight =
      ct_nn_param(p, prefix, "weight", CT_SHAPE(num_embeddings, embedding_dim),
                  CT_PARAM_NO_DECAY);
  if (!m->weight) return ct_last_status();
  ct_status st = ct_nn_init_normal(m->weight, init_rng, 0.0f, 1.0f);
  if (st == CT_OK && padding_idx >= 0) {
    float *row = ct_f32(m->weight) + padding_idx * embedding_dim;
    for (int64_t d = 0; d < embedding_dim; d++) row[d] = 0.0f;
  }
  return st;
}

// ids i32 (...), weight (V, D) -> (..., D)
ct_tensor *ct_nn_embedding_forward(const ct_nn_embedding *m, ct_tensor *ids) {
  return ct_embedding(m->weight, ids, m->padding_idx);
}
