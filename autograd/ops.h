// Differentiable ops. Each returns a new arena tensor and, when recording is
// on and an input requires grad, records a tape node (autograd/tape.h).
//
// Conventions:
// - Inputs may be NULL, meaning an earlier call failed: the op returns NULL
//   and keeps that error. A bad argument (shape, dtype, index) returns NULL
//   with an error naming the op and the shapes.
// - Softmax-like ops, norms and reductions with "last" work on the last dim.
// - Elementwise binary ops broadcast as numpy does: shapes are aligned at the
//   trailing dim, and each dim must match or be 1 (or be missing in the
//   shorter operand).
// - Determinism: no result depends on the thread count.
#ifndef CT_AUTOGRAD_OPS_H
#define CT_AUTOGRAD_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

// ---- elementwise (ops_elementwise.c) --------------------------------------
ct_tensor *ct_add(ct_tensor *a, ct_tensor *b);
ct_tensor *ct_sub(ct_tensor *a, ct_tensor *b);
ct_tensor *ct_mul(ct_tensor *a, ct_tensor *b);
// s * x
ct_tensor *ct_scale(ct_tensor *x, float s);
ct_tensor *ct_relu(ct_tensor *x);
typedef enum ct_gelu_kind {
  CT_GELU_ERF,    // x * Phi(x), PyTorch's default
  CT_GELU_TANH,   // the tanh approximation (approximate='tanh')
  CT_GELU_QUICK,  // x * sigmoid(1.702 x): CLIP's and CvT's QuickGELU
} ct_gelu_kind;
ct_tensor *ct_gelu(ct_tensor *x, ct_gelu_kind kind);
ct_tensor *ct_sigmoid(ct_tensor *x);
// Deformable DETR's inverse_sigmoid: with c = clamp(x, 0, 1),
// log(max(c, eps) / max(1 - c, eps)); the gradient is PyTorch's through its
// clamps (zero outside [0, 1], each term only where it is not clamped).
ct_tensor *ct_inverse_sigmoid(ct_tensor *x, float eps);
ct_tensor *ct_tanh(ct_tensor *x);
// e^x (libm's expf); backward g * e^x from the output (CLIP's temperature).
ct_tensor *ct_exp(ct_tensor *x);
// Inverted dropout: zero each element with probability p, scale the rest by
// 1/(1-p). Element i's mask is drawn from Philox at (seed, stream, i), so the
// mask is the same at any thread count and backward recomputes it instead of
// storing it. p == 0 is the identity (use it for evaluation).
ct_tensor *ct_dropout(ct_tensor *x, float p, uint64_t seed, uint64_t stream);
// ct_dropout(ct_relu(x), p, seed, stream) in one pass, the same bits forward
// and backward; relu(x) is never stored (a feed-forward block's hidden
// activations are the step's largest tensors).
ct_tensor *ct_relu_dropout(ct_tensor *x, float p, uint64_t seed,
                           uint64_t stream);
// ct_add(x, ct_dropout(y, p, seed, stream)) in one pass, the same bits
// forward and backward, the dropped tensor never stored (a residual
// connection). x and y have the same shape; otherwise, and when x == y, it
// runs as the two ops.
ct_tensor *ct_add_dropout(ct_tensor *x, ct_tensor *y, float p, uint64_t seed,
                          uint64_t stream);

// ---- matrix products (ops_matmul.c) ---------------------------------------
// a (..., M, K) @ b (..., K, N) -> (..., M, N). trans_a means a is stored
// (..., K, M); trans_b means b is stored (..., N, K). The leading (batch)
// dims of a and b must be equal, or b is 2-D and shared by the whole batch.
ct_tensor *ct_matmul(ct_tensor *a, ct_tensor *b, bool trans_a, bool trans_b);
// x (..., IN), w (OUT, IN), bias (OUT) or NULL -> x w^T + bias (..., OUT)
// x may be f32 or bf16 storage (read as the floats it widens to; its
// gradient is f32).
ct_tensor *ct_linear(ct_tensor *x, ct_tensor *w, ct_tensor *bias);
// ct_linear with the output stored as out_dtype: CT_F32, or CT_BF16 (each
// output rounded as bf16 products round their inputs, core/gemm_bf16.h).
ct_tensor *ct_linear_as(ct_tensor *x, ct_tensor *w, ct_tensor *bias,
                        ct_dtype out_dtype);
// What ct_linear_fused folds into a linear.
typedef struct ct_linear_fusion {
  bool gelu_input;  // the input goes through the exact GELU first
  // Or, p in (0, 1] (0: none): the input goes through
  // ct_relu_dropout(x, p, dropout_seed, dropout_stream) first, same mask.
  float relu_dropout;
  uint64_t dropout_seed, dropout_stream;
  ct_tensor *residual;  // added to the output (shape of the output), or NULL
  // p in (0, 1] (0: none; needs a residual): the output is
  // ct_add_dropout(residual, x w^T + bias, p, dropout_seed, residual_stream).
  float residual_dropout;
  uint64_t residual_stream;
} ct_linear_fusion;
// [residual +] (gelu(x), relu_dropout(x) or x) w^T + bias: the same bits as
// ct_add(residual, ct_linear(ct_gelu(x, CT_GELU_ERF), w, bias)) (or with
// ct_relu_dropout, or ct_add_dropout for the residual add), with less kept
// for backward: not the activation's output (recomputed there) nor the
// linear's own output. For MLPs and residual blocks (nn/mlp.c, nn/vit.c). f NULL: none.
// x may be bf16 storage, as for ct_linear.
ct_tensor *ct_linear_fused(ct_tensor *x, ct_tensor *w, ct_tensor *bias,
                           const ct_linear_fusion *f);

// ---- reductions (ops_reduce.c) ----------------------------------------------
// Over all elements -> a scalar (0-dim tensor).
ct_tensor *ct_sum(ct_tensor *x);
ct_tensor *ct_mean(ct_tensor *x);
// Over the last dim: (..., C) -> (...), or (..., 1) with keepdim.
ct_tensor *ct_sum_last(ct_tensor *x, bool keepdim);
ct_tensor *ct_mean_last(ct_tensor *x, bool keepdim);
// (..., K) -> i32 (...): the index of each row's largest value (the first
// one on ties). Not differentiable (nothing is recorded).
ct_tensor *ct_argmax_last(const ct_tensor *x);

// ---- shape (ops_shape.c) ----------------------------------------------------
// Same data, another shape; one dim may be -1 (inferred). A view: no copy.
ct_tensor *ct_reshape(ct_tensor *x, int ndim, const int64_t *shape);
// out dim i = x dim perm[i] (a copy).
ct_tensor *ct_permute(ct_tensor *x, const int *perm);
// Swaps two dims (a copy). Negative dims count from the end.
ct_tensor *ct_transpose(ct_tensor *x, int dim0, int dim1);
// Joins n >= 1 tensors along `dim`; other dims must match. (More than a
// tape node's inputs are joined in groups, then the groups.)
ct_tensor *ct_concat(ct_tensor *const *xs, int n, int dim);
// Elements [start, start+len) along `dim` (a copy).
ct_tensor *ct_slice(ct_tensor *x, int dim, int64_t start, int64_t len);
// Row lookup: table (V, D...), ids i32 of any shape -> (ids..., D...).
// Rows whose id equals padding_idx get no gradient (PyTorch's padding_idx);
// pass -1 for none. Ids outside [0, V) are an error.
ct_tensor *ct_embedding(ct_tensor *table, ct_tensor *ids, int64_t padding_idx);

// ---- softmax and normalization (ops_norm.c) ---------------------------------
ct_tensor *ct_softmax(ct_tensor *x);
ct_tensor *ct_log_softmax(ct_tensor *x);
// x / max(|x|, eps) per row of the last dim: PyTorch's F.normalize(x, dim=-1)
// (its eps is 1e-12). eps must be positive.
ct_tensor *ct_l2_normalize(ct_tensor *x, float eps);
// Layer norm over the last dim C: (x - mean) / sqrt(var + eps) * weight + bias,
// biased variance as PyTorch. weight and bias are (C) or NULL.
ct_tensor *ct_layernorm(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                        float eps);
// The same with the output stored as out_dtype (CT_F32 or CT_BF16: each
// value rounded as bf16 products round their inputs); x stays f32.
ct_tensor *ct_layernorm_as(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                           float eps, ct_dtype out_dtype);

// ---- losses (ops_loss.c) ------------------------------------------------------
typedef struct ct_ce_opts {
  int32_t ignore_index;   // targets equal to it count for nothing (-100)
  float label_smoothing;  // in [0, 1]
  ct_tensor *weight;      // (K) class weights, or NULL; no gradient
} ct_ce_opts;
// PyTorch's defaults: ignore_index -100, no smoothing, no weights.
ct_ce_opts ct_ce_defaults(void);
// Fused log-softmax + negative log-likelihood with PyTorch CrossEntropyLoss
// semantics (reduction 'mean'): logits (N, K) or (..., K), targets i32 (N)
// or (...). A target outside [0, K) that is not ignore_index is an error. An
// all-ignored batch gives 0 (and zero gradient). opts NULL = defaults.
ct_tensor *ct_cross_entropy(ct_tensor *logits, ct_tensor *targets,
                            const ct_ce_opts *opts);
typedef enum ct_reduction {
  CT_REDUCE_MEAN,  // over all elements
  CT_REDUCE_SUM,
  CT_REDUCE_BATCHMEAN,  // sum / size of the first dim (KL's proper mean)
} ct_reduction;
// PyTorch's F.kl_div(input, target): input holds log-probabilities; target
// holds probabilities, or log-probabilities when log_target. Pointwise
// target * (log target - input), then reduced.
ct_tensor *ct_kl_div(ct_tensor *input, ct_tensor *target, bool log_target,
                     ct_reduction reduction);
// Mean squared error and mean absolute error over all elements.
ct_tensor *ct_mse(ct_tensor *a, ct_tensor *b);
ct_tensor *ct_l1(ct_tensor *a, ct_tensor *b);
// The sigmoid focal loss (Lin et al. 2017, RetinaNet; torchvision's and
// Deformable DETR's sigmoid_focal_loss): logits x and targets t (same shape,
// t usually 0/1; no gradient), per element with p = sigmoid(x)
//   ce = -(t log p + (1 - t) log(1 - p)),  p_t = p t + (1 - p)(1 - t),
//   alpha_t = alpha t + (1 - alpha)(1 - t)  (alpha < 0: 1),
//   f = alpha_t ce (1 - p_t)^gamma,
// reduced (mean over all elements, or sum). gamma >= 0; computed in double.
ct_tensor *ct_sigmoid_focal_loss(ct_tensor *logits, ct_tensor *targets,
                                 float alpha, float gamma,
                                 ct_reduction reduction);

#endif
