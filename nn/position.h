// Positional encodings: the fixed sinusoids of "Attention Is All You Need"
// (Vaswani et al. 2017, section 3.5) and learned position embeddings.
#ifndef CT_NN_POSITION_H
#define CT_NN_POSITION_H

#include "nn/module.h"

// The table (T, D) in the arena, no gradient:
//   PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(same angle)
// computed in double. An odd D ends with a sine column.
ct_tensor *ct_nn_sinusoidal_table(int64_t T, int64_t D);

// x (B,T,D) -> x + PE[:T] (B,T,D)
ct_tensor *ct_nn_sinusoidal_add(ct_tensor *x);

// A learned table added to the input, as timm's pos_embed (a bare parameter
// (1, max_len, D), trunc_normal std .02, NO_DECAY).
typedef struct ct_nn_pos_embedding {
  ct_tensor *weight;  // (1, max_len, D)  registered as `name` itself
  int64_t max_len, dim;
} ct_nn_pos_embedding;

// `name` is the full parameter name ("pos_embed", "decoder.pos_embed").
ct_status ct_nn_pos_embedding_init(ct_nn_pos_embedding *m, ct_params *p,
                                   const char *name, int64_t max_len,
                                   int64_t dim, ct_rng *init_rng);

// x (B,T,D), T <= max_len -> x + weight[:, :T] (B,T,D)
ct_tensor *ct_nn_pos_embedding_forward(const ct_nn_pos_embedding *m,
                                       ct_tensor *x);

#endif
