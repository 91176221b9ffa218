// Differentiable additive attention (Bahdanau, Cho & Bengio 2015, eq. 6 and
// appendix A.1.2), fused: scores, the masked softmax and the weighted sum in
// one op, for one query per row (a decoder step).
//
//   q (B,A)        the projected query W_q s (per step)
//   keys (B,S,A)   the projected keys W_k h + b (once per source sentence)
//   v (A)          the scoring vector
//   values (B,S,D) what is averaged (the encoder outputs h)
//   -> context (B,D) = sum_s w[b,s] values[b,s], with
//      w[b,:] = softmax over s of e[b,s] = v . tanh(q[b] + keys[b,s])
//
// key_padding_mask i32 or f32 (B,S), nonzero at padding, or NULL: padded
// keys get weight exactly 0 (and no gradient); a row whose keys are all
// padding gets zero weights and a zero context. *weights (B,S), when
// weights is not NULL, receives w (alignment matrices, or a penalty on the
// weights as Show, Attend and Tell's doubly stochastic regularization): a
// side output recorded on the tape, so gradients reaching it flow back
// through the softmax into q, keys and v as the context's do.
//
// Backward recomputes tanh(q + keys) instead of keeping the (B,S,A) tensor
// of every step (saved: w, B*S floats, which is also *weights' data). Rows
// are split over threads; the gradient of v, a sum over rows, is summed per
// row and the rows added in order, so results are the same bits at any
// thread count.
#ifndef CT_AUTOGRAD_OPS_ADDITIVE_ATTENTION_H
#define CT_AUTOGRAD_OPS_ADDITIVE_ATTENTION_H

#include "core/tensor.h"

ct_tensor *ct_additive_attention(ct_tensor *q, ct_tensor *keys, ct_tensor *v,
                                 ct_tensor *values,
                                 const ct_tensor *key_padding_mask,
                                 ct_tensor **weights);

#endif
