// nn.Embedding: a table of vectors looked up by integer id.
#ifndef CT_NN_EMBEDDING_H
#define CT_NN_EMBEDDING_H

#include "nn/module.h"

typedef struct ct_nn_embedding {
  ct_tensor *weight;  // (V, D)  "prefix.weight" (NO_DECAY)
  int64_t num_embeddings, embedding_dim;
  int64_t padding_idx;  // -1 for none
} ct_nn_embedding;

// N(0, 1) as PyTorch, with the padding_idx row zeroed; that row then gets no
// gradient (ct_embedding). padding_idx is in [0, V), or -1 for none (write
// PyTorch's negative padding_idx as V + padding_idx).
ct_status ct_nn_embedding_init(ct_nn_embedding *m, ct_params *p,
                               const char *prefix, int64_t num_embeddings,
                               int64_t embedding_dim, int64_t padding_idx,
                               ct_rng *init_rng);

// ids i32 (...) -> (..., D)
ct_tensor *ct_nn_embedding_forward(const ct_nn_embedding *m, ct_tensor *ids);

#endif
