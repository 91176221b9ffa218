// Matrix products: batched matmul with transpose flags, and linear.
// Both call ct_gemm (core/gemm.h); backward passes are gemms with beta = 1,
// which accumulate into the gradients as the tape requires.
#include "autograd/ops.h"
#include "autograd/op_util.h"
#include "core/gemm.h"

// ---- matmul -------------------------------------------------------------------

typedef struct matmul_saved {
  bool ta, tb;
  int64_t batch, M, N, K;
  bool b_shared;  // b is 2-D, used by every batch entry
} matmul_saved;

// C = op(A) op(B) over the batch, shapes as in ops.h; all row-major.
static void matmul_backward(ct_node *node) {
  const matmul_saved *s = node->saved;
  ct_tensor *a = node->in[0], *b = node->in[1], *c = node->out;
  const int64_t M = s->M, N = s->N, K = s->K, batch = s->batch;
  const float *A = ct_f32(a), *B = ct_f32(b), *dC = c->grad;
  const int64_t lda = s->ta ? M : K, ldb = s->tb ? K : N;
  const int64_t sa = M * K, sb = s->b_shared ? 0 : K * N, sc = M * N;

  if (a->requires_grad) {
    if (!s->ta)  // dA (M,K) += dC (M,N) op(B)^T
      ct_gemm_batched(false, !s->tb, M, K, N, 1.0f, dC, N, sc, B, ldb, sb,
                      1.0f, a->grad, K, sa, batch);
    else         // dA stored (K,M) += op(B) (K,N) dC^T
      ct_gemm_batched(s->tb, true, K, M, N, 1.0f, B, ldb, sb, dC, N, sc, 1.0f,
                      a->grad, M, sa, batch);
  }
  if (b->requires_grad) {
    if (s->b_shared && !s->ta && !s->tb) {
      // One product over all batch rows: dB (K,N) += A_all^T dC_all.
      ct_gemm(true, false, K, N, batch * M, 1.0f, A, K, dC, N, 1.0f, b->grad,
              N);
    } else if (s->b_shared && !s->ta && s->tb) {
      // dB stored (N,K) += dC_all^T A_all.
      ct_gemm(true, false, N, K, batch * M, 1.0f, dC, N, A, K, 1.0f, b->grad,
              K);
    } else {
      // Per batch entry; with a shared b the entries add up in batch order.
      int64_t steps = s->b_shared ? batch : 1;
      int64_t inner = s->b_shared ? 1 : batch;
      for (int64_t i = 0; i < steps; i++) {
        const float *Ai = A + i * sa, *dCi = dC + i * sc;
        if (!s->tb)  // dB (K,N) += op(A)^T dC
          ct_gemm_batched(!s->ta, false, K, N, M, 1.0f, Ai, lda, sa, dCi, N,
                          sc, 1.0f, b->grad, N, sb, inner);
        else         // dB stored (N,K) += dC^T op(A)
          ct_gemm_batched(true, s->ta, N, K, M, 1.0f, dCi, N, sc, Ai, lda, sa,
                          1.0f, b->grad, K, sb, inner);
      }
    }
  }
}

ct_tensor *ct_matmul(ct_tensor *a, ct_tensor *b, bool trans_a, bool trans_b) {
  const char *op = "matmul";
  if (!a || !b) return NULL;
  if (!ct_check_f32(op, a, "a") || !ct_check_f32(op, b, "b")) return NULL;
  if (!ct_check_min_dims(op, a, 2, "a") || !ct_check_min_dims(op, b, 2, "b"))
    return NULL;
  int64_t M = a->shape[a->ndim - (trans_a ? 1 : 2)];
  int64_t K = a->shape[a->ndim - (trans_a ? 2 : 1)];
  int64_t Kb = b->shape[b->ndim - (trans_b ? 1 : 2)];
  int64_t N = b->shape[b->ndim - (trans_b ? 2 : 1)];
  if (K != Kb) {
    ct_error(CT_ERR_SHAPE, "matmul: inner dims differ: a %s%s has K=%lld, "
             "b %s%s has K=%lld", ct_shape_of(a), trans_a ? " (transposed)" : "",
             (long long)K, ct_shape_of(b), trans_b ? " (transposed)" : "",
             (long long)Kb);
    return NULL;
  }
  bool shared = b->ndim == 2;
  if (!shared) {
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim - 2; d++)
      same = a->shape[d] == b->shape[d];
    if (!same) {
      ct_error(CT_ERR_SHAPE, "matmul: batch dims of a %s and b %s differ (b "
               "may also be 2-D)", ct_shape_of(a), ct_shape_of(b));
      return NULL;
    }
  }
  int64_t shape[CT_MAX_DIMS];
  int64_t batch = 1;
  for (int d = 0; d < a->ndim - 2; d++) {
    shape[d] = a->shape[d];
    batch *= a->shape[d];
  }
  shape[a->ndim - 2] = M;
  shape[a->ndim - 1] = N;
  ct_tensor *c = ct_tensor_empty(CT_F32, a->ndim, shape);
  if (!c) return NULL;
  ct_gemm_batched(trans_a, trans_b, M, N, K, 1.0f, ct_f32(a),
                  trans_a ? M : K, M * K, ct_f32(b), trans_b ? K : N,
                  shared ? 0 : K * N, 0.0f, ct_f32(c), N, M * N, batch);
  matmul_saved *s = NULL;
  if (ct_tape_wants(2, (ct_tensor *[]){a, b})) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    *s = (matmul_saved){.ta = trans_a, .tb = trans_b, .batch = batch, .M = M,
                        .N = N, .K = K, .b_shared = shared};
  }
  if (CT_RECORD(op, matmul_backward, c, s, a, b) != CT_OK) return NULL;
  return c;
}

// ---- linear -------------------------------------------------------------------

// x (N, IN), w (OUT, IN), bias (OUT) -> y (N, OUT)
static void linear_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1], *bias = node->in[2];
  ct_tensor *y = node->out;
  const int64_t IN = ct_last_dim(x), OUT = w->shape[0], N = ct_rows(x);
  const float *dy = y->grad;
  // A fresh (uninitialized) gradient is assigned: beta 0 instead of 1.
  const float beta_x = node->fresh & 1u ? 0.0f : 1.0f;
  const float beta_w = node->fresh & 2u ? 0.0f : 1.0f;
  if (x->requires_grad)   // dx (N,IN) += dy (N,OUT) w (OUT,IN)
    ct_gemm(false, false, N, IN, OUT, 1.0f, dy, OUT, ct_f32(w), IN, beta_x,
            x->grad, IN);
  if (w->requires_grad)   // dw (OUT,IN) += dy^T (OUT,N) x (N,IN)
    ct_gemm(true, false, OUT, IN, N, 1.0f, dy, OUT, ct_f32(x), IN, beta_w,
            w->grad, IN);
  if (bias && bias->requires_grad)  // dbias (OUT) += column sums of dy
    ct_add_column_sums(bias->grad, dy, N, OUT, 1.0f);
}

ct_tensor *ct_linear(ct_tensor *x, ct_tensor *w, ct_tensor *bias) {
  const char *op = "linear";
  if (!x || !w) return NULL;
  if (!ct_check_f32(op, x, "input") || !ct_check_f32(op, w, "weight"))
    return NULL;
  if (!ct_check_min_dims(op, x, 1, "input")) return NULL;
  if (w->ndim != 2 || w->shape[1] != ct_last_dim(x)) {
    ct_error(CT_ERR_SHAPE, "linear: weight %s does not fit input %s (want "
             "[out, %lld])", ct_shape_of(w), ct_shape_of(x),
             (long long)ct_last_dim(x));
    return NULL;
  }
  const int64_t IN = w->shape[1], OUT = w->shape[0], N = ct_rows(x);
  if (bias) {
    if (!ct_check_f32(op, bias, "bias")) return NULL;
    if (bias->ndim != 1 || bias->shape[0] != OUT) {
      ct_error(CT_ERR_SHAPE, "linear: bias %s does not fit weight %s (want "
               "[%lld])", ct_shape_of(bias), ct_shape_of(w), (long long)OUT);
      return NULL;
    }
  }
  int64_t shape[CT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
  shape[x->ndim - 1] = OUT;
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, shape);
  if (!y) return NULL;
  float *py = ct_f32(y);
  if (bias) {
    const float *pb = ct_f32(bias);
    #pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++)
      for (int64_t o = 0; o < OUT; o++) py[n * OUT + o] = pb[o];
  }
  ct_gemm(false, true, N, OUT, IN, 1.0f, ct_f32(x), IN, ct_f32(w), IN,
          bias ? 1.0f : 0.0f, py, OUT);
  if (CT_RECORD(op, linear_backward, y, NULL, x, w, bias) != CT_OK)
    return NULL;
  ct_node_set_flags(y, CT_NODE_FRESH_INPUT(0) | CT_NODE_FRESH_INPUT(1));
  return y;
}
