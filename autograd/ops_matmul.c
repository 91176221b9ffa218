// Matrix products: batched matmul with transpose flags, linear, and
// linear_fused (an activation before it, a residual add after it). All call
// ct_gemm (core/gemm.h); backward passes are gemms with beta = 1, which
// accumulate into the gradients as the tape requires.
//
// The linear ops also take an input stored in bf16 (core/tensor.h), and
// ct_linear_as makes one. In bf16 precision the products read and write
// that storage in place (ct_gemm_bf16_stored); elsewhere (fp32 products,
// the GELU and ReLU) its rows are widened to floats in chunks that stay in
// cache, or whole in scratch for an fp32 weight gradient, which sums over
// all rows.
#include "autograd/ops.h"
#include "autograd/op_util.h"
#include "core/arena.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "core/vmath.h"

#include <string.h>

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
      ct_gemm_batched(false, !s->tb, M, K, N, 1.0f, dC, N, sc, B, ldb, sb, 1.0f,
                      a->grad, K, sa, batch);
    else  // dA stored (K,M) += op(B) (K,N) dC^T
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
          ct_gemm_batched(!s->ta, false, K, N, M, 1.0f, Ai, lda, sa, dCi, N, sc,
                          1.0f, b->grad, N, sb, inner);
        else  // dB stored (N,K) += dC^T op(A)
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
    ct_error(CT_ERR_SHAPE,
             "matmul: inner dims differ: a %s%s has K=%lld, "
             "b %s%s has K=%lld",
             ct_shape_of(a), trans_a ? " (transposed)" : "", (long long)K,
             ct_shape_of(b), trans_b ? " (transposed)" : "", (long long)Kb);
    return NULL;
  }
  bool shared = b->ndim == 2;
  if (!shared) {
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim - 2; d++)
      same = a->shape[d] == b->shape[d];
    if (!same) {
      ct_error(CT_ERR_SHAPE,
               "matmul: batch dims of a %s and b %s differ (b "
               "may also be 2-D)",
               ct_shape_of(a), ct_shape_of(b));
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
  ct_gemm_batched(trans_a, trans_b, M, N, K, 1.0f, ct_f32(a), trans_a ? M : K,
                  M * K, ct_f32(b), trans_b ? K : N, shared ? 0 : K * N, 0.0f,
                  ct_f32(c), N, M * N, batch);
  matmul_saved *s = NULL;
  if (ct_tape_wants(2, (ct_tensor *[]){a, b})) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    *s = (matmul_saved){.ta = trans_a,
                        .tb = trans_b,
                        .batch = batch,
                        .M = M,
                        .N = N,
                        .K = K,
                        .b_shared = shared};
  }
  if (CT_RECORD(op, matmul_backward, c, s, a, b) != CT_OK) return NULL;
  return c;
}

// ---- linear -------------------------------------------------------------------

// Rows of the (N, IN) input handled at a time where rows are independent:
// about 1 MiB of floats, still in cache when the next step reads them.
static int64_t chunk_rows(int64_t IN) {
  const int64_t rows = ((int64_t)1 << 18) / (IN > 0 ? IN : 1);
  return rows < 16 ? 16 : rows;
}

// Rows [r0, r0 + rows) of x (., IN) as floats: x's own (f32), or widened
// into buf (bf16).
static const float *rows_f32(const ct_tensor *x, int64_t r0, int64_t rows,
                             int64_t IN, float *buf) {
  if (x->dtype == CT_F32) return ct_f32(x) + r0 * IN;
  ct_bf16_load(ct_bf16(x) + r0 * IN, rows * IN, buf);
  return buf;
}

// All of x as floats: its own data, or a widened copy in the arena (the
// caller rewinds). NULL when out of memory.
static const float *all_f32(const ct_tensor *x) {
  if (x->dtype == CT_F32) return ct_f32(x);
  float *buf = ct_arena_alloc((size_t)x->numel * sizeof(float));
  if (buf) ct_bf16_load(ct_bf16(x), x->numel, buf);
  return buf;
}

// The weight and bias gradients of y = h w^T + bias, h (N,IN):
// dw (OUT,IN) += dy^T (OUT,N) h (N,IN), dbias (OUT) += column sums of dy.
// h is fp32 values, or (h NULL) the bf16 storage h16.
// dy is the gradient of the product's output (the node's own, or, for
// linear_fused with a dropped branch, the branch's).
static void linear_param_grads_src(const ct_node *node, const float *dy,
                                   const float *h, const uint16_t *h16,
                                   int64_t N, int64_t IN) {
  ct_tensor *w = node->in[1], *bias = node->in[2];
  const int64_t OUT = w->shape[0];
  // A fresh (uninitialized) gradient is assigned: beta 0 instead of 1.
  const float beta_w = node->fresh & 2u ? 0.0f : 1.0f;
  float *db = bias && bias->requires_grad ? bias->grad : NULL;
  if (w->requires_grad && h) {  // db summed from dy's packed panels
    ct_gemm_sum_a(true, false, OUT, IN, N, 1.0f, dy, OUT, h, IN, beta_w,
                  w->grad, IN, db);
  } else if (w->requires_grad) {
    const ct_gemm_src a = {.f = dy, .ld = OUT}, b = {.h = h16, .ld = IN};
    ct_gemm_bf16_stored(true, false, OUT, IN, N, 1.0f, &a, &b, beta_w, NULL,
                        w->grad, NULL, IN, db);
  } else if (db) {
    ct_add_column_sums(db, dy, N, OUT, 1.0f);
  }
}

static void linear_param_grads(const ct_node *node, const float *dy,
                               const float *h, int64_t N, int64_t IN) {
  linear_param_grads_src(node, dy, h, NULL, N, IN);
}

// The same for the input x of either storage: a bf16 x is read in place by
// bf16 products, and widened into scratch for fp32 ones.
static void linear_param_grads_of(const ct_node *node, const float *dy,
                                  const ct_tensor *x) {
  const int64_t N = ct_rows(x), IN = ct_last_dim(x);
  if (x->dtype == CT_BF16 && ct_gemm_get_precision() == CT_GEMM_BF16) {
    linear_param_grads_src(node, dy, NULL, ct_bf16(x), N, IN);
    return;
  }
  ct_arena_mark mark = ct_arena_get_mark();
  const float *h = all_f32(x);
  if (h) linear_param_grads(node, dy, h, N, IN);
  ct_arena_rewind(mark);
}

// x (N, IN), w (OUT, IN), bias (OUT) -> y (N, OUT)
static void linear_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1], *y = node->out;
  const int64_t IN = ct_last_dim(x), OUT = w->shape[0], N = ct_rows(x);
  const float beta_x = node->fresh & 1u ? 0.0f : 1.0f;
  if (x->requires_grad)  // dx (N,IN) += dy (N,OUT) w (OUT,IN)
    ct_gemm(false, false, N, IN, OUT, 1.0f, y->grad, OUT, ct_f32(w), IN, beta_x,
            x->grad, IN);
  linear_param_grads_of(node, y->grad, x);
}

static bool check_linear_input(const char *op, const ct_tensor *x) {
  if (x->dtype == CT_BF16) return true;
  return ct_check_f32(op, x, "input");
}

// Checks x, w, bias of a linear op and returns y (..., OUT) uninitialized,
// or NULL with an error.
static ct_tensor *linear_output(const char *op, ct_tensor *x, ct_tensor *w,
                                ct_tensor *bias, ct_dtype out_dtype) {
  if (!x || !w) return NULL;
  if (!check_linear_input(op, x) || !ct_check_f32(op, w, "weight")) return NULL;
  if (!ct_check_min_dims(op, x, 1, "input")) return NULL;
  if (w->ndim != 2 || w->shape[1] != ct_last_dim(x)) {
    ct_error(CT_ERR_SHAPE,
             "%s: weight %s does not fit input %s (want "
             "[out, %lld])",
             op, ct_shape_of(w), ct_shape_of(x), (long long)ct_last_dim(x));
    return NULL;
  }
  const int64_t OUT = w->shape[0];
  if (bias) {
    if (!ct_check_f32(op, bias, "bias")) return NULL;
    if (bias->ndim != 1 || bias->shape[0] != OUT) {
      ct_error(CT_ERR_SHAPE,
               "%s: bias %s does not fit weight %s (want "
               "[%lld])",
               op, ct_shape_of(bias), ct_shape_of(w), (long long)OUT);
      return NULL;
    }
  }
  int64_t shape[CT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
  shape[x->ndim - 1] = OUT;
  return ct_tensor_empty(out_dtype, x->ndim, shape);
}

// y (N,OUT) = h (N,IN) w^T + bias: the gemm adds the product to the bias
// rows (the micro-kernel reads the bias where it would read y).
static void linear_into(const float *h, int64_t N, int64_t IN,
                        const ct_tensor *w, const ct_tensor *bias, float *y) {
  const int64_t OUT = w->shape[0];
  if (bias)
    ct_gemm_bias(false, true, N, OUT, IN, h, IN, ct_f32(w), IN, ct_f32(bias), y,
                 OUT);
  else
    ct_gemm(false, true, N, OUT, IN, 1.0f, h, IN, ct_f32(w), IN, 0.0f, y, OUT);
}

// y = x w^T + bias for x and y of either storage: by row chunks through
// float scratch where one of them is bf16 (rows are independent products,
// so the bits are those of one whole product). False when out of memory.
static bool linear_rows(const ct_tensor *x, const ct_tensor *w,
                        const ct_tensor *bias, ct_tensor *y) {
  const int64_t N = ct_rows(x), IN = ct_last_dim(x), OUT = w->shape[0];
  if (x->dtype == CT_F32 && y->dtype == CT_F32) {
    linear_into(ct_f32(x), N, IN, w, bias, ct_f32(y));
    return true;
  }
  if (ct_gemm_get_precision() == CT_GEMM_BF16) {
    // bf16 products read a bf16 x in place and round a bf16 y from their
    // own output strips.
    const ct_gemm_src a = x->dtype == CT_F32
                              ? (ct_gemm_src){.f = ct_f32(x), .ld = IN}
                              : (ct_gemm_src){.h = ct_bf16(x), .ld = IN};
    const ct_gemm_src b = {.f = ct_f32(w), .ld = IN};
    const bool y16 = y->dtype == CT_BF16;
    ct_gemm_bf16_stored(false, true, N, OUT, IN, 1.0f, &a, &b,
                        bias ? 1.0f : 0.0f, bias ? ct_f32(bias) : NULL,
                        y16 ? NULL : ct_f32(y), y16 ? ct_bf16(y) : NULL, OUT,
                        NULL);
    return true;
  }
  const int64_t chunk = chunk_rows(IN > OUT ? IN : OUT);
  const int64_t most = N < chunk ? N : chunk;
  ct_arena_mark mark = ct_arena_get_mark();
  float *in = x->dtype == CT_F32
                  ? NULL
                  : ct_arena_alloc((size_t)(most * IN) * sizeof(float));
  float *out = y->dtype == CT_F32
                   ? NULL
                   : ct_arena_alloc((size_t)(most * OUT) * sizeof(float));
  const bool ok = (x->dtype == CT_F32 || in) && (y->dtype == CT_F32 || out);
  for (int64_t r0 = 0; ok && r0 < N; r0 += chunk) {
    const int64_t rows = N - r0 < chunk ? N - r0 : chunk;
    float *dst = out ? out : ct_f32(y) + r0 * OUT;
    linear_into(rows_f32(x, r0, rows, IN, in), rows, IN, w, bias, dst);
    if (out) ct_bf16_store(out, rows * OUT, ct_bf16(y) + r0 * OUT);
  }
  ct_arena_rewind(mark);
  return ok;
}

ct_tensor *ct_linear(ct_tensor *x, ct_tensor *w, ct_tensor *bias) {
  return ct_linear_as(x, w, bias, CT_F32);
}

ct_tensor *ct_linear_as(ct_tensor *x, ct_tensor *w, ct_tensor *bias,
                        ct_dtype out_dtype) {
  const char *op = "linear";
  if (out_dtype != CT_F32 && out_dtype != CT_BF16) {
    ct_error(CT_ERR_DTYPE, "linear: output must be f32 or bf16, not %s",
             ct_dtype_name(out_dtype));
    return NULL;
  }
  ct_tensor *y = linear_output(op, x, w, bias, out_dtype);
  if (!y || !linear_rows(x, w, bias, y)) return NULL;
  if (CT_RECORD(op, linear_backward, y, NULL, x, w, bias) != CT_OK) return NULL;
  ct_node_set_flags(y, CT_NODE_FRESH_INPUT(0) | CT_NODE_FRESH_INPUT(1));
  return y;
}

// ---- linear_fused --------------------------------------------------------------
//
// y = act(x) w^T + bias (+ r) with act the exact GELU, dropout(relu(x)) or
// the identity: the activation before a linear and the residual add after
// it, folded in.
// - GELU, ReLU + dropout: h = act(x) lives in scratch during the forward
//   pass and is recomputed by the backward pass (cheap next to the gemms),
//   instead of staying in the step arena as the separate ops keep it; the
//   dropout's mask (one byte per element, as ct_relu_dropout keeps it) is
//   drawn once and kept.
// - residual: y is computed as the linear's output and r added in place, so
//   the branch tensor is never kept.
// The arithmetic is that of the separate ops (gelu, linear, add(r, branch)),
// so the results are the same bits.

typedef enum fused_input { IN_PLAIN, IN_GELU, IN_RELU_DROP } fused_input;

typedef struct fused_saved {
  fused_input kind;
  float scale;             // IN_RELU_DROP: 1/(1-p), 0 for p = 1
  const uint8_t *dropped;  // IN_RELU_DROP: the mask, one byte per element
  // The branch's dropout before the residual add (rdropped NULL: none).
  float rscale;
  const uint8_t *rdropped;
} fused_saved;

// h = act(v) for elements [lo, lo + n) of the input, v their floats (h may
// equal v), on the calling thread.
static void activate(const fused_saved *s, const float *v, int64_t lo,
                     int64_t n, float *h) {
  if (s->kind == IN_GELU) {
    ct_vmath_gelu(v, h, n);
    return;
  }
  const uint8_t *restrict d = s->dropped + lo;
  const float scale = s->scale;
#pragma omp simd
  for (int64_t i = 0; i < n; i++)
    h[i] = keep_or_zero(!d[i], (v[i] > 0.0f ? v[i] : 0.0f) * scale);
}

// n bf16 values widened, on the calling thread.
static void widen(const uint16_t *restrict src, int64_t n,
                  float *restrict dst) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const uint32_t u = (uint32_t)src[i] << 16;
    memcpy(dst + i, &u, sizeof u);
  }
}

// act(x) for all of x (either storage) into h (fp32) or h16 (rounded as
// ct_bf16_store rounds): one parallel pass by blocks, each widened, made
// and rounded in the thread's own stack buffer.
enum { ACT_BLOCK = 4096 };

static int64_t act_blocks(const ct_tensor *x) {
  return (x->numel + ACT_BLOCK - 1) / ACT_BLOCK;
}

// Block k (ACT_BLOCK elements from *lo, *len of them) of x as floats: x's
// own, or widened into buf.
static const float *act_block(const ct_tensor *x, int64_t k, float *buf,
                              int64_t *lo, int64_t *len) {
  *lo = k * ACT_BLOCK;
  *len = x->numel - *lo < ACT_BLOCK ? x->numel - *lo : ACT_BLOCK;
  if (x->dtype == CT_F32) return ct_f32(x) + *lo;
  widen(ct_bf16(x) + *lo, *len, buf);
  return buf;
}

static void activate_all(const fused_saved *s, const ct_tensor *x, float *h,
                         uint16_t *h16) {
  const ct_gemm_mode mode = ct_gemm_current_mode();
  const int64_t blocks = act_blocks(x);
#pragma omp parallel if (blocks > 8)
  {
    float buf[ACT_BLOCK];
#pragma omp for schedule(static)
    for (int64_t k = 0; k < blocks; k++) {
      int64_t lo, len;
      const float *src = act_block(x, k, buf, &lo, &len);
      activate(s, src, lo, len, h16 ? buf : h + lo);
      if (h16) ct_bf16_store_in_mode(&mode, buf, len, h16 + lo);
    }
  }
}

// g = g act'(x) in place for all of x (either storage): one parallel pass
// by blocks, the arithmetic of the chunked loop below element by element.
static void activate_backward_all(const fused_saved *s, const ct_tensor *x,
                                  float *g) {
  const int64_t blocks = act_blocks(x);
#pragma omp parallel if (blocks > 8)
  {
    float buf[ACT_BLOCK];
#pragma omp for schedule(static)
    for (int64_t k = 0; k < blocks; k++) {
      int64_t lo, len;
      const float *v = act_block(x, k, buf, &lo, &len);
      float *restrict gx = g + lo;
      if (s->kind == IN_GELU) {
        ct_vmath_gelu_backward(v, gx, gx, len, false);
        continue;
      }
      const uint8_t *restrict d = s->dropped + lo;
      const float scale = s->scale;
#pragma omp simd
      for (int64_t i = 0; i < len; i++)
        gx[i] = keep_or_zero(!d[i], gx[i] * scale) * step01(v[i] > 0.0f);
    }
  }
}

static void fused_backward_body(ct_node *node, const float *dy);

// x (N, IN), w (OUT, IN), bias (OUT), r (N, OUT) -> y (N, OUT). With the
// branch dropped before the residual add, the product's gradient is
// keep_or_zero(kept, dy * scale) (add_dropout's), in scratch.
static void linear_fused_backward(ct_node *node) {
  const fused_saved *s = node->saved;
  ct_tensor *y = node->out;
  if (!s->rdropped) {
    fused_backward_body(node, y->grad);
    return;
  }
  ct_arena_mark mark = ct_arena_get_mark();
  const int64_t n = y->numel;
  float *restrict db = ct_arena_alloc((size_t)n * sizeof(float));
  if (db) {
    const float *restrict g = y->grad;
    const uint8_t *restrict d = s->rdropped;
    const float scale = s->rscale;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++) db[i] = keep_or_zero(!d[i], g[i] * scale);
    fused_backward_body(node, db);
  }
  ct_arena_rewind(mark);
}

// The backward with dy the product's gradient (the residual's is y's own).
static void fused_backward_body(ct_node *node, const float *dy) {
  const fused_saved *s = node->saved;
  ct_tensor *x = node->in[0], *w = node->in[1], *r = node->in[3];
  ct_tensor *y = node->out;
  const int64_t IN = ct_last_dim(x), OUT = w->shape[0], N = ct_rows(x);
  // dr = dy (add's backward), unless r takes over y's gradient buffer
  // after this backward (CT_NODE_GRAD_PASS: r->grad is NULL then).
  if (r && r->requires_grad && r->grad) {
    const float *g = y->grad;
    float *dr = r->grad;
    const int64_t n = y->numel;
    if (node->fresh & (1u << 3)) {  // in[3] = r fresh: assign
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; i++) dr[i] = 1.0f * g[i];
    } else {
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; i++) dr[i] += 1.0f * g[i];
    }
  }
  const bool fresh = node->fresh & 1u;
  if (s->kind == IN_PLAIN) {
    linear_param_grads_of(node, dy, x);
    if (x->requires_grad)  // dx (N,IN) += dy (N,OUT) w (OUT,IN)
      ct_gemm(false, false, N, IN, OUT, 1.0f, dy, OUT, ct_f32(w), IN,
              fresh ? 0.0f : 1.0f, x->grad, IN);
    return;
  }
  // dw sums over all rows: h = act(x) whole, kept in bf16 where the
  // products are bf16 (they would round it anyway; read in place). Its
  // room is x's gradient buffer when that is fresh (contents undefined, and
  // overwritten by dx once h has served dw), else scratch.
  ct_arena_mark mark = ct_arena_get_mark();
  const bool dx = x->requires_grad, chunked = dx && !fresh;
  const bool h_bf16 = ct_gemm_get_precision() == CT_GEMM_BF16;
  const int64_t chunk = chunk_rows(IN), most = N < chunk ? N : chunk;
  const size_t chunk_bytes = (size_t)(most * IN) * sizeof(float);
  void *h = dx && fresh
                ? (void *)x->grad
                : ct_arena_alloc((size_t)x->numel *
                                 (h_bf16 ? sizeof(uint16_t) : sizeof(float)));
  // Scratch for a dx that adds (by row chunks): dh, and x's rows widened.
  float *dh = chunked ? ct_arena_alloc(chunk_bytes) : NULL;
  float *xc =
      chunked && x->dtype == CT_BF16 ? ct_arena_alloc(chunk_bytes) : NULL;
  if (!h || (chunked && (!dh || (x->dtype == CT_BF16 && !xc)))) {
    ct_arena_rewind(mark);
    return;
  }
  activate_all(s, x, h_bf16 ? NULL : h, h_bf16 ? h : NULL);
  if (h_bf16)
    linear_param_grads_src(node, dy, NULL, h, N, IN);
  else
    linear_param_grads(node, dy, h, N, IN);
  // dh = dy w, then dx = (or +=) dh act'(x): for the ReLU and dropout,
  // keep_or_zero(kept, dh * scale) * step(x > 0), as ct_relu_dropout's
  // backward. A fresh dx takes dh whole (h has served) and act' in place;
  // one that adds goes by row chunks through scratch.
  if (dx && fresh) {
    ct_gemm(false, false, N, IN, OUT, 1.0f, dy, OUT, ct_f32(w), IN, 0.0f,
            x->grad, IN);
    activate_backward_all(s, x, x->grad);
  }
  for (int64_t r0 = 0; chunked && r0 < N; r0 += chunk) {
    const int64_t rows = N - r0 < chunk ? N - r0 : chunk, n = rows * IN;
    ct_gemm(false, false, rows, IN, OUT, 1.0f, dy + r0 * OUT, OUT, ct_f32(w),
            IN, 0.0f, dh, IN);
    const float *v = rows_f32(x, r0, rows, IN, xc);
    float *restrict gx = x->grad + r0 * IN;
    if (s->kind == IN_GELU) {
      ct_gelu_erf_blocks(v, NULL, dh, gx, n, true);
      continue;
    }
    const uint8_t *restrict d = s->dropped + r0 * IN;
    const float scale = s->scale;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      gx[i] += keep_or_zero(!d[i], dh[i] * scale) * step01(v[i] > 0.0f);
  }
  ct_arena_rewind(mark);
}

ct_tensor *ct_linear_fused(ct_tensor *x, ct_tensor *w, ct_tensor *bias,
                           const ct_linear_fusion *f) {
  const char *op = "linear_fused";
  const ct_linear_fusion none = {0};
  if (!f) f = &none;
  ct_tensor *y = linear_output(op, x, w, bias, CT_F32);
  if (!y) return NULL;
  ct_tensor *r = f->residual;
  if (r && (!ct_check_f32(op, r, "residual") || !ct_check_same_shape(op, r, y)))
    return NULL;
  const float p = f->relu_dropout, rp = f->residual_dropout;
  if (!(p >= 0.0f && p <= 1.0f) || (p > 0.0f && f->gelu_input)) {
    ct_error(CT_ERR_ARG,
             "%s: relu_dropout = %g must be in [0, 1], and 0 with gelu_input",
             op, (double)p);
    return NULL;
  }
  if (!(rp >= 0.0f && rp <= 1.0f) || (rp > 0.0f && !r)) {
    ct_error(CT_ERR_ARG,
             "%s: residual_dropout = %g must be in [0, 1], and 0 without a "
             "residual",
             op, (double)rp);
    return NULL;
  }
  fused_saved fs = {.kind = f->gelu_input ? IN_GELU
                            : p > 0.0f    ? IN_RELU_DROP
                                          : IN_PLAIN};
  float *py = ct_f32(y);
  const int64_t N = ct_rows(x), IN = ct_last_dim(x), OUT = w->shape[0];
  if (fs.kind == IN_RELU_DROP) {  // ct_relu_dropout's mask and scale
    uint8_t *dropped = ct_arena_alloc((size_t)(x->numel > 0 ? x->numel : 1));
    if (!dropped) return NULL;
    ct_rng rng = ct_rng_make(f->dropout_seed, f->dropout_stream);
    ct_rng_fill_bernoulli(&rng, dropped, x->numel, p);
    fs.dropped = dropped;
    fs.scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  }
  if (fs.kind == IN_PLAIN) {
    if (!linear_rows(x, w, bias, y)) return NULL;
  } else if (ct_gemm_get_precision() == CT_GEMM_BF16) {
    // act(x) whole in bf16 scratch (the product would round it anyway),
    // read in place by one product.
    ct_arena_mark mark = ct_arena_get_mark();
    uint16_t *h16 = ct_arena_alloc((size_t)x->numel * sizeof(uint16_t));
    if (!h16) return NULL;
    activate_all(&fs, x, NULL, h16);
    const ct_gemm_src a = {.h = h16, .ld = IN}, b = {.f = ct_f32(w), .ld = IN};
    ct_gemm_bf16_stored(false, true, N, OUT, IN, 1.0f, &a, &b,
                        bias ? 1.0f : 0.0f, bias ? ct_f32(bias) : NULL, py,
                        NULL, OUT, NULL);
    ct_arena_rewind(mark);
  } else {  // act(x) whole in scratch, one product
    // (The GELU went by row chunks of 1 MiB, each its own activation and
    // product: two parallel regions and a packing of the weight per chunk,
    // 26 regions for a ViT's fc2, their threads idle a seventh of the op's
    // time. Whole, linear_fused's forward in a vit_fmnist_b128 step went
    // from 27.9-28.8 to 24.1-24.7 ms on a Zen 5 EPYC; the scratch, freed
    // before the next op, stays below the step's peak, which comes in
    // backward.)
    ct_arena_mark mark = ct_arena_get_mark();
    float *h = ct_arena_alloc((size_t)x->numel * sizeof(float));
    if (!h) return NULL;
    activate_all(&fs, x, h, NULL);
    linear_into(h, N, IN, w, bias, py);
    ct_arena_rewind(mark);
  }
  if (r && rp > 0.0f) {  // ct_add_dropout(r, branch)'s mask and arithmetic
    const int64_t n = y->numel;
    uint8_t *restrict d = ct_arena_alloc((size_t)(n > 0 ? n : 1));
    if (!d) return NULL;
    ct_rng rng = ct_rng_make(f->dropout_seed, f->residual_stream);
    ct_rng_fill_bernoulli(&rng, d, n, rp);
    fs.rdropped = d;
    fs.rscale = rp < 1.0f ? 1.0f / (1.0f - rp) : 0.0f;
    const float *restrict pr = ct_f32(r);
    const float scale = fs.rscale;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      py[i] = pr[i] + keep_or_zero(!d[i], py[i] * scale);
  } else if (r) {
    const float *pr = ct_f32(r);
    const int64_t n = y->numel;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++) py[i] = pr[i] + py[i];
  }
  fused_saved *s = NULL;
  if (ct_tape_wants(4, (ct_tensor *[]){x, w, bias, r})) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    *s = fs;
  }
  if (CT_RECORD(op, linear_fused_backward, y, s, x, w, bias, r) != CT_OK)
    return NULL;
  ct_node_set_flags(y, CT_NODE_FRESH_INPUT(0) | CT_NODE_FRESH_INPUT(1) |
                           CT_NODE_FRESH_INPUT(3) | CT_NODE_GRAD_PASS(3));
  return y;
}
