// Additive attention (see additive_attention.h).
#include "nn/additive_attention.h"

#include "autograd/ops.h"
#include "autograd/ops_additive_attention.h"

ct_status ct_nn_additive_attention_init(ct_nn_additive_attention *m,
                                        ct_params *p, const char *prefix,
                                        int64_t query_dim, int64_t key_dim,
                                        int64_t attn_dim, ct_rng *init_rng) {
  *m = (ct_nn_additive_attention){
      .query_dim = query_dim, .key_dim = key_dim, .attn_dim = attn_dim};
  if (query_dim < 1 || key_dim < 1 || attn_dim < 1)
    return ct_error(CT_ERR_ARG,
                    "additive attention '%s': query %lld, key %lld and "
                    "attention %lld dims must be >= 1",
                    prefix, (long long)query_dim, (long long)key_dim,
                    (long long)attn_dim);
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "attn");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->attn, p, name, query_dim + key_dim, attn_dim,
                           true, init_rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "v");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->v, p, name, attn_dim, 1, false, init_rng);
  return st;
}

ct_status ct_nn_additive_attention_prepare(const ct_nn_additive_attention *m,
                                           ct_tensor *keys, ct_tensor *values,
                                           ct_tensor *mask,
                                           ct_nn_additive_memory *out) {
  const int64_t Dq = m->query_dim, Dk = m->key_dim;
  *out = (ct_nn_additive_memory){
      .w_query = ct_slice(m->attn.weight, 1, 0, Dq),
      .keys =
          ct_linear(keys, ct_slice(m->attn.weight, 1, Dq, Dk), m->attn.bias),
      .v = ct_reshape(m->v.weight, CT_SHAPE(m->attn_dim)),
      .values = values,
      .mask = mask};
  return out->w_query && out->keys && out->v && values ? CT_OK
                                                       : ct_last_status();
}

ct_tensor *ct_nn_additive_attention_forward(const ct_nn_additive_memory *mem,
                                            ct_tensor *query,
                                            ct_tensor **weights) {
  ct_tensor *q = ct_linear(query, mem->w_query, NULL);
  return ct_additive_attention(q, mem->keys, mem->v, mem->values, mem->mask,
                               weights);
}
