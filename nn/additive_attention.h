// Additive attention as a module (Bahdanau, Cho & Bengio 2015), laid out as
// the PyTorch tutorial's Attention (bentrevett/pytorch-seq2seq): one Linear
// over the concatenated query and key, and a bias-free scoring vector,
//
//   score(q, k_j) = v . tanh(attn([q; k_j])) = v . tanh(W_q q + W_k k_j + b)
//
// with [W_q W_k] = attn.weight split by columns. Since W_k k_j + b does not
// depend on the query, it is projected once per source (prepare) and each
// query (a decoder step) costs one (B,Dq)x(Dq,A) product and the fused
// scoring (autograd/ops_additive_attention.h).
//
// Parameters: attn.weight (A, Dq+Dk), attn.bias (A) (nn.Linear init),
// v.weight (1, A) (nn.Linear init, no bias).
#ifndef CT_NN_ADDITIVE_ATTENTION_H
#define CT_NN_ADDITIVE_ATTENTION_H

#include "nn/linear.h"

typedef struct ct_nn_additive_attention {
  ct_nn_linear attn;  // (A, Dq+Dk) "prefix.attn"
  ct_nn_linear v;     // (1, A) "prefix.v", no bias
  int64_t query_dim, key_dim, attn_dim;
} ct_nn_additive_attention;

ct_status ct_nn_additive_attention_init(ct_nn_additive_attention *m,
                                        ct_params *p, const char *prefix,
                                        int64_t query_dim, int64_t key_dim,
                                        int64_t attn_dim, ct_rng *init_rng);

// What the queries of one source batch attend to.
typedef struct ct_nn_additive_memory {
  ct_tensor *w_query;  // (A, Dq): the query columns of attn.weight
  ct_tensor *v;        // (A): v.weight as a vector
  ct_tensor *keys;     // (B,S,A) = W_k k + b
  ct_tensor *values;   // (B,S,Dv)
  ct_tensor *mask;     // (B,S) i32, nonzero at padding, or NULL
} ct_nn_additive_memory;

// keys (B,S,Dk) and values (B,S,Dv) (often the same tensor), mask as above.
ct_status ct_nn_additive_attention_prepare(const ct_nn_additive_attention *m,
                                           ct_tensor *keys, ct_tensor *values,
                                           ct_tensor *mask,
                                           ct_nn_additive_memory *out);

// query (B,Dq) -> context (B,Dv) over a prepared memory; *weights (B,S)
// when weights is not NULL (gradients flow through them, see
// autograd/ops_additive_attention.h).
ct_tensor *ct_nn_additive_attention_forward(const ct_nn_additive_memory *mem,
                                            ct_tensor *query,
                                            ct_tensor **weights);

#endif
