// Differentiable fused scaled-dot-product attention over heads.
//
//   q (B,Tq,NH,Dh), k (B,Tk,NH,Dh), v (B,Tk,NH,Dh) -> out (B,Tq,NH,Dh)
//   qkv (B,T,3,NH,Dh)                             -> out (B,T,NH,Dh)
//
//   out = softmax(q k^T * scale + bias + window_mask + masks) v, per (batch,
//   head)
//
// Example (a causal self-attention block; x (B,T,3*NH*Dh) from a qkv linear):
//
//   ct_tensor *qkv = ct_reshape(x, CT_SHAPE(B, T, 3, NH, Dh));
//   ct_attention_opts o = ct_attention_defaults();
//   o.causal = true;
//   ct_tensor *y = ct_attention_qkv(qkv, &o);   // (B,T,NH,Dh)
//
// The kernel (core/attention_kernel.h) never materializes the (Tq,Tk) weights: the
// tape saves only the per-row log-sum-exp (B,NH,Tq), and backward recomputes
// the scores. The mask semantics (bottom-right causal alignment when
// Tq != Tk; fully masked rows give 0 and zero gradients) are documented
// there.
#ifndef CT_AUTOGRAD_OPS_ATTENTION_H
#define CT_AUTOGRAD_OPS_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

typedef struct ct_attention_opts {
  bool causal;             // query i sees keys j <= i + (Tk - Tq)
  ct_tensor *key_lengths;  // i32 (B), each in 0..Tk, or NULL
  ct_tensor *key_mask;     // i32 or f32 (B,Tk), nonzero = masked out, or NULL
  ct_tensor *bias;         // f32 (NH,Tq,Tk) added to the scores, or NULL;
                           // gets a gradient when it requires grad
  ct_tensor *window_mask;  // f32 (nW,Tq,Tk) added after the bias, batch row
                           // b taking window b % nW (B = images * nW,
                           // batch-major), every head alike; or NULL. No
                           // gradient (Swin's shifted-window mask).
  float scale;             // 0 = 1/sqrt(Dh)
  float dropout_p;         // on the attention weights, in [0, 1); 0 = none
  uint64_t dropout_seed,
      dropout_stream;  // the keyed mask (core/attention_kernel.h)
} ct_attention_opts;

// No masks, no bias, default scale, no dropout.
ct_attention_opts ct_attention_defaults(void);

// opts NULL = defaults. Returns NULL with an error naming the op and shapes
// on bad shapes or dtypes, key_lengths outside 0..Tk, or dropout_p outside
// [0, 1); NULL inputs pass an earlier error through.
ct_tensor *ct_attention(ct_tensor *q, ct_tensor *k, ct_tensor *v,
                        const ct_attention_opts *opts);
// qkv (B,T,3,NH,Dh) may be f32 or bf16 storage (read as the floats it
// widens to; its gradient is f32); the output is f32.
ct_tensor *ct_attention_qkv(ct_tensor *qkv, const ct_attention_opts *opts);

#endif
