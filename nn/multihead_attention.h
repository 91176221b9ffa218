// nn.MultiheadAttention with PyTorch's semantics and parameter names
// (batch_first layout), on the fused attention op (autograd/ops_attention.h).
//
//   query (B,Tq,E), key (B,Tk,E), value (B,Tk,E) -> out (B,Tq,E)
//   q = query Wq^T + bq, k = key Wk^T + bk, v = value Wv^T + bv,
//   split into NH heads of Dh = E/NH; per head
//   softmax(q k^T / sqrt(Dh) + mask) v; heads concatenated, then out_proj.
//
// Self-attention (query, key and value the same tensor) runs one (3E, E)
// projection into the fused qkv layout; cross-attention (Tq != Tk allowed)
// projects with row slices of in_proj_weight, as PyTorch does.
//
// Masks (all optional, combined; PyTorch's meanings):
// - attn_mask (Tq,Tk) or (B*NH,Tq,Tk), i32 or f32. i32 is PyTorch's bool mask:
//   nonzero = that key is masked out for that query. f32 is added to the
//   scores (-inf masks); it gets a gradient when it requires grad.
// - key_padding_mask i32 (B,Tk): nonzero = that key is padding.
// - causal: query i sees keys j <= i + (Tk - Tq) (for Tq == Tk the usual
//   j <= i; for Tq < Tk aligned with the end of the keys, as the fused
//   kernel, core/attention_kernel.h). PyTorch 1.13 has no flag: it is the
//   attn_mask of nn.Transformer.generate_square_subsequent_mask.
//
// Two paths, the same math:
// - fused (default): ct_attention with causal, key_mask = key_padding_mask
//   and bias = attn_mask broadcast over heads (NH,Tq,Tk). Never materializes
//   the weights. A query row with every key masked gives 0 (not PyTorch's NaN).
// - composed, when the weights are asked for or attn_mask is (B*NH,Tq,Tk):
//   matmul, softmax, dropout and matmul ops over (B,NH,Tq,Tk). Fully masked
//   rows give NaN as in PyTorch.
// Dropout on the attention weights takes one site of ctx (nn/module.h) per
// call; both paths draw the same mask (element (b,h,i,j) of the weights at
// the same Philox index), so they agree in training too.
#ifndef CT_NN_MULTIHEAD_ATTENTION_H
#define CT_NN_MULTIHEAD_ATTENTION_H

#include "nn/linear.h"

typedef struct ct_nn_mha {
  ct_tensor *in_proj_weight;  // (3E, E) rows [Wq; Wk; Wv], xavier_uniform
  ct_tensor *in_proj_bias;    // (3E) zeros (NO_DECAY), or NULL
  ct_nn_linear out_proj;      // E -> E, bias zeros; "prefix.out_proj.*"
  int64_t embed_dim, num_heads, head_dim;
  float dropout;  // on the attention weights
} ct_nn_mha;

typedef struct ct_nn_attn_masks {
  ct_tensor *attn_mask;         // (Tq,Tk) or (B*NH,Tq,Tk), i32 or f32, or NULL
  ct_tensor *key_padding_mask;  // i32 (B,Tk), nonzero = padding, or NULL
  bool causal;
} ct_nn_attn_masks;

// embed_dim must be a multiple of num_heads. bias = false leaves out
// in_proj_bias and out_proj.bias (PyTorch's bias=False).
ct_status ct_nn_mha_init(ct_nn_mha *m, ct_params *p, const char *prefix,
                         int64_t embed_dim, int64_t num_heads, float dropout,
                         bool bias, ct_rng *init_rng);

// query (B,Tq,E), key (B,Tk,E), value (B,Tk,E) -> (B,Tq,E)
// masks NULL = none. weights non-NULL asks for the head-averaged attention
// weights (B,Tq,Tk) (after dropout, as PyTorch's need_weights=True,
// average_attn_weights=True); *weights is set to them. With ctx->attention
// set (nn/module.h), the per-head weights (B,NH,Tq,Tk) are recorded there
// (the composed path; token places left NULL for the caller).
ct_tensor *ct_nn_mha_forward(const ct_nn_mha *m, ct_nn_ctx *ctx,
                             ct_tensor *query, ct_tensor *key, ct_tensor *value,
                             const ct_nn_attn_masks *masks,
                             ct_tensor **weights);
// residual (B,Tq,E) + ct_nn_mha_forward(...), the same bits, with the add
// folded into out_proj (whose own output is then not kept for backward).
ct_tensor *ct_nn_mha_forward_residual(const ct_nn_mha *m, ct_nn_ctx *ctx,
                                      ct_tensor *query, ct_tensor *key,
                                      ct_tensor *value,
                                      const ct_nn_attn_masks *masks,
                                      ct_tensor **weights, ct_tensor *residual);
// ct_nn_add_dropout(ctx, residual, ct_nn_mha_forward(..., NULL), p), the
// same bits (same dropout streams); while dropping, the dropped add is
// folded into out_proj, whose own output is then not kept for backward.
ct_tensor *ct_nn_mha_forward_add_dropout(const ct_nn_mha *m, ct_nn_ctx *ctx,
                                         ct_tensor *query, ct_tensor *key,
                                         ct_tensor *value,
                                         const ct_nn_attn_masks *masks,
                                         ct_tensor *residual, float p);

// The causal mask (Tq,Tk) as an attn_mask: i32 with 1 where key j is hidden
// from query i (j > i + Tk - Tq), or f32 with -inf there and 0 elsewhere
// (generate_square_subsequent_mask for Tq == Tk). Arena, no gradient.
ct_tensor *ct_nn_causal_mask(int64_t Tq, int64_t Tk, ct_dtype dtype);

#endif
