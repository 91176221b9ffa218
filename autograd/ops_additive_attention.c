// Additive attention (see ops_additive_attention.h): forward and backward
// side by side, one row (a query) at a time.
#include "autograd/ops_additive_attention.h"

#include <math.h>
#include <string.h>

#include "autograd/op_util.h"
#include "core/arena.h"
#include "core/flops.h"
#include "core/vmath.h"

// Rows are split over threads when a call has this many score elements.
enum { PAR_MIN = 8192 };

typedef struct additive_saved {
  int64_t B, S, A, D;
  const uint8_t *mask;  // (B,S) 1 = padding, or NULL
  float *w;             // (B,S) the weights
  const float *dw_out;  // (B,S) the gradient of the weights output, or NULL
} additive_saved;

// sum of a[i] * b[i] in 16 fixed lanes added in order: vectorizes, and the
// result does not depend on how a caller splits its work.
static float dot(const float *a, const float *b, int64_t n) {
  float lane[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; l++) lane[l] += a[i + l] * b[i + l];
  for (; i < n; i++) lane[i % 16] += a[i] * b[i];
  float sum = 0.0f;
  for (int l = 0; l < 16; l++) sum += lane[l];
  return sum;
}

// u (A) = tanh(q + k)
static void energy_input(const float *q, const float *k, float *u, int64_t A) {
  for (int64_t j = 0; j < A; j++) u[j] = q[j] + k[j];
  ct_vmath_tanh(u, u, A);
}

// Row b: w (S) and context (D); u is scratch of A floats.
static void row_forward(const additive_saved *s, const float *q,
                        const float *keys, const float *v, const float *values,
                        int64_t b, float *u, float *ctx) {
  const int64_t S = s->S, A = s->A, D = s->D;
  const uint8_t *m = s->mask ? s->mask + b * S : NULL;
  float *w = s->w + b * S;
  float mx = -INFINITY;
  for (int64_t j = 0; j < S; j++) {
    if (m && m[j]) continue;
    energy_input(q + b * A, keys + (b * S + j) * A, u, A);
    w[j] = dot(v, u, A);
    mx = fmaxf(mx, w[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < S; j++) {
    w[j] = m && m[j] ? 0.0f : expf(w[j] - mx);
    sum += w[j];
  }
  memset(ctx, 0, (size_t)D * sizeof(float));
  if (sum == 0.0f) return;  // every key is padding
  for (int64_t j = 0; j < S; j++) {
    w[j] /= sum;
    const float *val = values + (b * S + j) * D;
    for (int64_t d = 0; d < D; d++) ctx[d] += w[j] * val[d];
  }
}

// y[i] += x[i]
static void add_to(float *restrict y, const float *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

// y[i] += s * x[i]
static void add_scaled(float *restrict y, float s, const float *restrict x,
                       int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += s * x[i];
}

// Row b's gradients: dq, dkeys and dvalues (each NULL when not wanted) are
// added to; dv_row (A) receives this row's part of dv. Scratch: u and g (A
// floats each), dw (S).
static void row_backward(const additive_saved *s, const float *q,
                         const float *keys, const float *v, const float *values,
                         const float *dctx, int64_t b, float *dq, float *dkeys,
                         float *dvalues, float *dv_row, float *restrict u,
                         float *restrict g, float *dw) {
  const int64_t S = s->S, A = s->A, D = s->D;
  const float *w = s->w + b * S;
  if (dv_row) memset(dv_row, 0, (size_t)A * sizeof(float));
  // dw_j = dctx . values_j (+ the weights output's own gradient); softmax:
  // de_j = w_j (dw_j - sum_i w_i dw_i).
  const float *dw_out = s->dw_out ? s->dw_out + b * S : NULL;
  float wdw = 0.0f;
  for (int64_t j = 0; j < S; j++) {
    const float *val = values + (b * S + j) * D;
    dw[j] = w[j] == 0.0f ? 0.0f : dot(dctx, val, D) + (dw_out ? dw_out[j] : 0);
    wdw += w[j] * dw[j];
    if (dvalues && w[j] != 0.0f)
      add_scaled(dvalues + (b * S + j) * D, w[j], dctx, D);
  }
  for (int64_t j = 0; j < S; j++) {
    if (w[j] == 0.0f) continue;  // padding, or underflowed to 0
    const float de = w[j] * (dw[j] - wdw);
    energy_input(q + b * A, keys + (b * S + j) * A, u, A);
    // The gradient of q + k_j: de v (1 - u^2), as (1 - u)(1 + u).
    for (int64_t a = 0; a < A; a++)
      g[a] = de * v[a] * ((1.0f - u[a]) * (1.0f + u[a]));
    if (dv_row) add_scaled(dv_row, de, u, A);
    if (dq) add_to(dq + b * A, g, A);
    if (dkeys) add_to(dkeys + (b * S + j) * A, g, A);
  }
}

// in: q, keys, v, values
static void additive_backward(ct_node *n) {
  const additive_saved *s = n->saved;
  ct_tensor *q = n->in[0], *keys = n->in[1], *v = n->in[2], *values = n->in[3];
  const int64_t B = s->B, S = s->S, A = s->A, D = s->D;
  float *dv_rows =
      v->requires_grad ? ct_arena_alloc((size_t)(B * A) * sizeof(float)) : NULL;
  const int64_t row = 2 * A + S;  // u, g, dw
  float *scratch = ct_arena_alloc((size_t)(B * row) * sizeof(float));
  if ((v->requires_grad && !dv_rows) || !scratch) return;
  float *dq = q->requires_grad ? q->grad : NULL;
  float *dk = keys->requires_grad ? keys->grad : NULL;
  float *dval = values->requires_grad ? values->grad : NULL;
  const float *dctx = n->out->grad;
  // The transposes of the forward's two products (core/flops.h), each key
  // counted, padded or not: dw and dvalues (2 x 2D), dv and the energy
  // input's gradient (2 x 2A).
  ct_flops_add(CT_GEMM_FP32, (uint64_t)(4 * B * S * (A + D)));
#pragma omp parallel for schedule(static) if (B * S * A >= PAR_MIN)
  for (int64_t b = 0; b < B; b++)
    row_backward(s, ct_f32(q), ct_f32(keys), ct_f32(v), ct_f32(values),
                 dctx + b * D, b, dq, dk, dval,
                 dv_rows ? dv_rows + b * A : NULL, scratch + b * row,
                 scratch + b * row + A, scratch + b * row + 2 * A);
  if (dv_rows)
    for (int64_t b = 0; b < B; b++)
      for (int64_t a = 0; a < A; a++) v->grad[a] += dv_rows[b * A + a];
}

// The weights as a side output: their gradient is handed to the attention's
// backward, which runs after this (the attention was recorded first).
static void weights_backward(ct_node *n) {
  additive_saved *s = n->saved;
  const int64_t size = s->B * s->S;
  float *g = ct_arena_alloc((size_t)size * sizeof(float));
  if (!g) return;
  memcpy(g, n->out->grad, (size_t)size * sizeof(float));
  s->dw_out = g;
}

ct_tensor *ct_additive_attention(ct_tensor *q, ct_tensor *keys, ct_tensor *v,
                                 ct_tensor *values,
                                 const ct_tensor *key_padding_mask,
                                 ct_tensor **weights) {
  static const char *op = "additive_attention";
  if (weights) *weights = NULL;
  if (!q || !keys || !v || !values) return NULL;
  if (!ct_check_f32(op, q, "q") || !ct_check_f32(op, keys, "keys") ||
      !ct_check_f32(op, v, "v") || !ct_check_f32(op, values, "values"))
    return NULL;
  if (q->ndim != 2 || keys->ndim != 3 || v->ndim != 1 || values->ndim != 3 ||
      keys->shape[0] != q->shape[0] || keys->shape[2] != q->shape[1] ||
      v->shape[0] != q->shape[1] || values->shape[0] != q->shape[0] ||
      values->shape[1] != keys->shape[1]) {
    ct_error(CT_ERR_SHAPE,
             "%s: need q (B,A), keys (B,S,A), v (A), values (B,S,D), got q "
             "%s, keys %s, v %s, values %s",
             op, ct_shape_of(q), ct_shape_of(keys), ct_shape_of(v),
             ct_shape_of(values));
    return NULL;
  }
  const int64_t B = q->shape[0], A = q->shape[1], S = keys->shape[1],
                D = values->shape[2];
  additive_saved *s = ct_arena_alloc(sizeof *s);
  if (!s) return NULL;
  *s = (additive_saved){.B = B, .S = S, .A = A, .D = D};
  if (key_padding_mask) {
    const ct_tensor *m = key_padding_mask;
    if (!ct_check_mask_dtype(op, m, "key_padding_mask")) return NULL;
    if (m->ndim != 2 || m->shape[0] != B || m->shape[1] != S) {
      ct_error(CT_ERR_SHAPE,
               "%s: key_padding_mask %s must be (B, S) = [%lld, %lld]", op,
               ct_shape_of(m), (long long)B, (long long)S);
      return NULL;
    }
    uint8_t *mask = ct_arena_alloc((size_t)(B * S > 0 ? B * S : 1));
    if (!mask) return NULL;
    for (int64_t i = 0; i < B * S; i++)
      mask[i] = m->dtype == CT_I32 ? ct_i32(m)[i] != 0 : ct_f32(m)[i] != 0.0f;
    s->mask = mask;
  }
  ct_tensor *ctx = ct_tensor_empty(CT_F32, CT_SHAPE(B, D));
  ct_tensor *w = ct_tensor_empty(CT_F32, CT_SHAPE(B, S));
  if (!ctx || !w) return NULL;
  s->w = ct_f32(w);
  ct_arena_mark mark = ct_arena_get_mark();
  float *scratch = ct_arena_alloc((size_t)(B * A) * sizeof(float));
  if (!scratch) return NULL;
  // Products outside ct_gemm (core/flops.h), in fp32 whatever the gemm
  // precision, each key counted, padded or not: the energies v . u (2A) and
  // the context (2D).
  ct_flops_add(CT_GEMM_FP32, (uint64_t)(2 * B * S * (A + D)));
#pragma omp parallel for schedule(static) if (B * S * A >= PAR_MIN)
  for (int64_t b = 0; b < B; b++)
    row_forward(s, ct_f32(q), ct_f32(keys), ct_f32(v), ct_f32(values), b,
                scratch + b * A, ct_f32(ctx) + b * D);
  ct_arena_rewind(mark);
  if (CT_RECORD(op, additive_backward, ctx, s, q, keys, v, values) != CT_OK)
    return NULL;
  if (weights && ct_tape_wants(1, &ctx) &&
      CT_RECORD("additive_attention_weights", weights_backward, w, s, ctx) !=
          CT_OK)
    return NULL;
  if (weights) *weights = w;
  return ctx;
}
