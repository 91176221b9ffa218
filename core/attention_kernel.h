// Fused scaled-dot-product attention kernels on raw float pointers.
//
//   q (B,Tq,NH,Dh), k (B,Tk,NH,Dh), v (B,Tk,NH,Dh) -> out (B,Tq,NH,Dh), lse (B,NH,Tq)
//
//   out[b,i,h,:] = sum_j softmax_j(scale * q_i . k_j + bias[h,i,j] + mask)
//                        * drop(b,h,i,j) * v_j
//
// The forward pass runs an online softmax (Milakov & Gimelshein 2018; the
// FlashAttention blocking of Dao et al. 2022) over tiles of 64 queries x 128
// keys and keeps only the per-row log-sum-exp; the backward pass recomputes
// the scores from q, k and lse. Extra memory is O(B*NH*Tq) for lse plus, per
// thread, a few tiles and one head's K^T and V^T (Dh x Tk): never O(T^2).
//
// Layouts: every operand is read in place through strides (in floats) for
// batch, row (time) and head; the Dh values of one head are contiguous.
// ct_attn_layout_bthd describes separate [B,T,NH,Dh] tensors; for a fused
// qkv [B,T,3,NH,Dh] tensor use ct_attn_layout_qkv with q = qkv,
// k = qkv + NH*Dh, v = qkv + 2*NH*Dh. Gradients use the layout of their input
// (dq like q, ...), and dout that of out.
//
// Masks (all optional, combined):
// - causal: query i sees keys j <= i + (Tk - Tq), i.e. the queries are
//   aligned with the END of the keys, as PyTorch's and flash-attn's
//   bottom-right causal mask: with a KV cache of Tk - Tq earlier keys, query
//   i is position i + Tk - Tq. For Tq == Tk this is the usual j <= i.
// - key_lengths (B): keys j >= key_lengths[b] are padding. 0..Tk.
// - key_mask (B,Tk): nonzero = that key is masked out.
// - bias (NH,Tq,Tk): added to the scaled scores (relative position biases; a
//   -inf entry masks a key too).
// - window_mask (nW,Tq,Tk): added after the bias, batch row b taking
//   window_mask[b % nW], the same for every head: windowed attention over
//   B = images * nW windows ordered batch-major (Swin's shifted-window mask
//   of 0 and -100, autograd/ops_window.h). No gradient.
// A query row that sees no key at all gets out = 0, lse = -inf, and zero
// gradients (not the NaN a plain softmax of all -inf would give).
//
// Dropout on the attention weights: weight (b,h,i,j) is kept iff
// ct_rng_uniform_at(seed, stream, ((b*NH + h)*Tq + i)*Tk + j) >= p and kept
// weights are scaled by 1/(1-p). The mask is a pure function of the indices,
// so backward recomputes it and no thread count changes it.
//
// Determinism: results are bit-identical for any thread count. The forward
// pass gives each thread whole (b, h) pairs, or single (b, h, query block)
// units when there are too few pairs to go round; either way each query
// block is computed by the same code, writing only its own rows of out and
// lse. The backward pass gives each (b, h) pair to one
// thread, which walks query blocks then key blocks in a fixed order and
// accumulates its own rows of dq, dk and dv. dbias (a sum over b) is added
// up in b order for each element: either a unit is a whole head h, walking
// b in order, or, when the heads do not go round the threads evenly, each
// (b, h) unit writes its term into a stage of per-b slices (at most 4 MiB,
// at least one slice; without room for it, by heads) that is then added up
// in b order, which is the same chain of adds. Nothing is accumulated
// atomically.
//
// Not here: tensors, shapes and autograd (autograd/ops_attention.h), Dv != Dh.
#ifndef CT_CORE_ATTENTION_KERNEL_H
#define CT_CORE_ATTENTION_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

// Strides in floats; the innermost (Dh) stride is 1.
typedef struct ct_attn_layout {
  int64_t batch, row, head;
} ct_attn_layout;

// Separate [B,T,NH,Dh] tensors.
static inline ct_attn_layout ct_attn_layout_bthd(int64_t T, int64_t NH,
                                                 int64_t Dh) {
  return (ct_attn_layout){.batch = T * NH * Dh, .row = NH * Dh, .head = Dh};
}
// One of q/k/v inside a fused [B,T,3,NH,Dh] tensor (offset the base pointer
// by 0, NH*Dh or 2*NH*Dh).
static inline ct_attn_layout ct_attn_layout_qkv(int64_t T, int64_t NH,
                                                int64_t Dh) {
  return (ct_attn_layout){
      .batch = 3 * T * NH * Dh, .row = 3 * NH * Dh, .head = Dh};
}

typedef struct ct_attn_params {
  int64_t B, Tq, Tk, NH, Dh;
  ct_attn_layout q, k, v, out;  // dq/dk/dv/dout share these
  float scale;                  // multiplies q.k (1/sqrt(Dh) by default)
  bool causal;                  // bottom-right aligned, see above
  const int32_t *key_lengths;   // (B) or NULL
  const uint8_t *key_mask;      // (B,Tk), nonzero = masked out, or NULL
  const float *bias;            // (NH,Tq,Tk) contiguous, or NULL
  const float *window_mask;     // (n_windows,Tq,Tk) contiguous, or NULL
  int64_t n_windows;            // >= 1 dividing B when window_mask is set
  float dropout_p;              // in [0, 1); 0 = no dropout
  uint64_t dropout_seed, dropout_stream;
  // Backward only: CT_ATTN_ASSIGN_* bits for the gradients whose buffers are
  // uninitialized; the backward then assigns them instead of adding.
  unsigned assign_grads;
  // q, k, v as bf16 storage (core/tensor.h) in their layouts, or NULL. When
  // set, the q, k, v pointers of the calls are not read (pass NULL): each
  // (b, h) is widened into thread scratch, which gives the results of the
  // widened values as fp32 inputs.
  const uint16_t *q16, *k16, *v16;
} ct_attn_params;

enum {
  CT_ATTN_ASSIGN_DQ = 1u << 0,
  CT_ATTN_ASSIGN_DK = 1u << 1,
  CT_ATTN_ASSIGN_DV = 1u << 2,
};

// Parameters for separate [B,T,NH,Dh] tensors, scale 1/sqrt(Dh), no masks,
// no dropout.
ct_attn_params ct_attn_params_make(int64_t B, int64_t Tq, int64_t Tk,
                                   int64_t NH, int64_t Dh);

// Checks sizes, dropout_p, key_lengths (each in 0..Tk) and n_windows. CT_OK or an
// error naming the field.
ct_status ct_attention_check(const ct_attn_params *p);

// out and lse (B,NH,Tq) are written. Per-thread scratch comes from the step
// arena (a few tiles per thread). Returns CT_OK, or an error from
// ct_attention_check / CT_ERR_NOMEM (then nothing is written).
ct_status ct_attention_forward(const ct_attn_params *p, const float *q,
                               const float *k, const float *v, float *out,
                               float *lse);

// Given out and lse from the forward pass and dout = dL/dout, ADDS dL/dq,
// dL/dk, dL/dv and dL/dbias (NH,Tq,Tk) into the buffers given; any of them may
// be NULL when not wanted. dq, dk, dv may alias one fused qkv gradient.
// With p->assign_grads bits, those of dq, dk, dv are assigned instead (their
// old contents are never read). Its scratch (a few tiles per thread, and
// the stage of a bias gradient) comes from the step arena and is given back
// before it returns.
ct_status ct_attention_backward(const ct_attn_params *p, const float *q,
                                const float *k, const float *v,
                                const float *out, const float *lse,
                                const float *dout, float *dq, float *dk,
                                float *dv, float *dbias);

#endif
