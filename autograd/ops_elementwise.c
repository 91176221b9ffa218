// Elementwise ops: broadcasting add/sub/mul, scale, activations, dropout.
// Forward and backward of each op sit together.
#include "autograd/ops.h"
#include "autograd/op_util.h"
#include "core/rng.h"
#include "core/vmath.h"

#include <math.h>
#include <string.h>

// ---- broadcasting -----------------------------------------------------------
//
// How an operand's elements line up with the output's: the same layout, a
// repeated suffix (operand index = i % n, e.g. a bias added to every row), a
// block of the output's dims with broadcast dims after it (index = (i /
// inner) % n, e.g. a (B, 1, 1) per-sample scale of a (B, T, D) tensor), or
// general numpy broadcasting through strides (0 on broadcast dims).
typedef enum { MAP_SAME, MAP_SUFFIX, MAP_BLOCK, MAP_GENERAL } map_kind;

typedef struct bmap {
  map_kind kind;
  int64_t n;                    // operand numel
  int64_t inner;                // MAP_BLOCK: output elements per operand one
  int ndim;                     // output dims
  int64_t shape[CT_MAX_DIMS];   // output shape
  int64_t stride[CT_MAX_DIMS];  // operand stride per output dim
} bmap;

static inline int64_t bmap_index(const bmap *m, int64_t i) {
  if (m->kind == MAP_SAME) return i;
  if (m->kind == MAP_SUFFIX) return i % m->n;
  if (m->kind == MAP_BLOCK) return (i / m->inner) % m->n;
  int64_t idx = 0;
  for (int d = m->ndim - 1; d >= 0; d--) {
    idx += (i % m->shape[d]) * m->stride[d];
    i /= m->shape[d];
  }
  return idx;
}

// The output shape of a op b, or false with an error.
static bool broadcast_shape(const char *op, const ct_tensor *a,
                            const ct_tensor *b, int *ndim, int64_t *shape) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < nd; d++) {
    int ia = d - (nd - a->ndim), ib = d - (nd - b->ndim);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      ct_error(CT_ERR_SHAPE,
               "%s: shapes %s and %s do not broadcast (dim %d: "
               "%lld vs %lld)",
               op, ct_shape_of(a), ct_shape_of(b), d, (long long)da,
               (long long)db);
      return false;
    }
    shape[d] = da == 1 ? db : da;
  }
  *ndim = nd;
  return true;
}

static bmap make_map(const ct_tensor *t, int ndim, const int64_t *shape,
                     int64_t out_numel) {
  bmap m = {.n = t->numel, .ndim = ndim};
  memcpy(m.shape, shape, sizeof m.shape);
  int lead = ndim - t->ndim;
  if (t->numel == out_numel) {
    m.kind = MAP_SAME;
    return m;
  }
  // Suffix: after t's leading 1s, its dims equal the output's trailing dims.
  int first = 0;
  while (first < t->ndim && t->shape[first] == 1) first++;
  bool suffix = true;
  for (int d = first; d < t->ndim; d++)
    if (t->shape[d] != shape[lead + d]) suffix = false;
  if (suffix) {
    m.kind = MAP_SUFFIX;
    return m;
  }
  // Block: the operand's dims other than 1 equal a run [lo, hi) of the
  // output's dims (leading 1s of the operand count as broadcast dims).
  int lo = 0, hi = ndim;
  while (lo < ndim && (lo < lead || t->shape[lo - lead] == 1)) lo++;
  while (hi > lo && t->shape[hi - 1 - lead] == 1) hi--;
  bool block = true;
  for (int d = lo; d < hi; d++)
    if (t->shape[d - lead] != shape[d]) block = false;
  if (block) {
    m.kind = MAP_BLOCK;
    m.inner = 1;
    for (int d = hi; d < ndim; d++) m.inner *= shape[d];
    return m;
  }
  m.kind = MAP_GENERAL;
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    int id = d - lead;
    int64_t dim = id >= 0 ? t->shape[id] : 1;
    m.stride[d] = dim == 1 ? 0 : s;
    s *= dim;
  }
  return m;
}

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL } bin_kind;

typedef struct bin_saved {
  bin_kind kind;
  bmap ma, mb;
} bin_saved;

// grad_in[map(i)] += g[i] * (other ? other[map_other(i)] : 1) * sign.
// fresh (only for MAP_SAME): grad_in is uninitialized, assign instead.
static void reduce_grad(float *grad_in, const bmap *m, const float *g,
                        int64_t n, const float *other, const bmap *mo,
                        float sign, bool fresh) {
  if (m->kind == MAP_SAME && other && mo->kind == MAP_BLOCK) {
    // One factor per row of `inner` elements (a per-sample scale).
    const int64_t inner = mo->inner, rows = inner ? n / inner : 0;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t r = 0; r < rows; r++) {
      const float o = other[r % mo->n];
      const float *gr = g + r * inner;
      float *dr = grad_in + r * inner;
      if (fresh)
        for (int64_t j = 0; j < inner; j++) dr[j] = sign * gr[j] * o;
      else
        for (int64_t j = 0; j < inner; j++) dr[j] += sign * gr[j] * o;
    }
  } else if (fresh && !other) {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++) grad_in[i] = sign * g[i];
  } else if (fresh) {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      grad_in[i] = sign * g[i] * other[bmap_index(mo, i)];
  } else if (m->kind == MAP_SAME && !other) {  // add, sub: a plain vector loop
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++) grad_in[i] += sign * g[i];
  } else if (m->kind == MAP_SAME) {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      grad_in[i] += sign * g[i] * (other ? other[bmap_index(mo, i)] : 1.0f);
  } else if (m->kind == MAP_SUFFIX && !other) {
    ct_add_column_sums(grad_in, g, m->n ? n / m->n : 0, m->n, sign);
  } else if (m->kind == MAP_SUFFIX) {
    // Each operand element sums its rows in order: thread-count independent.
    int64_t rows = m->n ? n / m->n : 0;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t j = 0; j < m->n; j++) {
      float acc = 0.0f;
      for (int64_t r = 0; r < rows; r++) {
        int64_t i = r * m->n + j;
        acc += g[i] * (other ? other[bmap_index(mo, i)] : 1.0f);
      }
      grad_in[j] += sign * acc;
    }
  } else {
    for (int64_t i = 0; i < n; i++)
      grad_in[bmap_index(m, i)] +=
          sign * g[i] * (other ? other[bmap_index(mo, i)] : 1.0f);
  }
}

static void binary_backward(ct_node *node) {
  const bin_saved *s = node->saved;
  ct_tensor *a = node->in[0], *b = node->in[1], *y = node->out;
  const float *g = y->grad;
  if (a->requires_grad)
    reduce_grad(a->grad, &s->ma, g, y->numel,
                s->kind == BIN_MUL ? ct_f32(b) : NULL, &s->mb, 1.0f,
                node->fresh & 1u);
  if (b->requires_grad)
    reduce_grad(b->grad, &s->mb, g, y->numel,
                s->kind == BIN_MUL ? ct_f32(a) : NULL, &s->ma,
                s->kind == BIN_SUB ? -1.0f : 1.0f, node->fresh & 2u);
}

static ct_tensor *binary(const char *op, bin_kind kind, ct_tensor *a,
                         ct_tensor *b) {
  if (!a || !b) return NULL;
  if (!ct_check_f32(op, a, "a") || !ct_check_f32(op, b, "b")) return NULL;
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  if (!broadcast_shape(op, a, b, &ndim, shape)) return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, ndim, shape);
  if (!y) return NULL;
  bmap ma = make_map(a, ndim, shape, y->numel);
  bmap mb = make_map(b, ndim, shape, y->numel);
  const float *pa = ct_f32(a), *pb = ct_f32(b);
  float *py = ct_f32(y);
  const int64_t n = y->numel;
  if (ma.kind == MAP_SAME && (mb.kind == MAP_SAME || mb.kind == MAP_SUFFIX)) {
    // The common cases (same shapes, a bias-like suffix) as plain loops
    // over rows of b's length (fixed 4096-element rows for same shapes).
    const int64_t nb = mb.kind == MAP_SAME ? 4096 : mb.n;
    const int64_t rows = nb ? (n + nb - 1) / nb : 0;
    const bool same = mb.kind == MAP_SAME;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t r = 0; r < rows; r++) {
      const int64_t len = r * nb + nb <= n ? nb : n - r * nb;
      const float *ar = pa + r * nb;
      const float *br = same ? pb + r * nb : pb;
      float *yr = py + r * nb;
      if (kind == BIN_ADD)
        for (int64_t j = 0; j < len; j++) yr[j] = ar[j] + br[j];
      else if (kind == BIN_SUB)
        for (int64_t j = 0; j < len; j++) yr[j] = ar[j] - br[j];
      else
        for (int64_t j = 0; j < len; j++) yr[j] = ar[j] * br[j];
    }
  } else if ((ma.kind == MAP_SAME && mb.kind == MAP_BLOCK) ||
             (ma.kind == MAP_BLOCK && mb.kind == MAP_SAME)) {
    // One operand holds a value per row of `inner` output elements.
    const bool a_block = ma.kind == MAP_BLOCK;
    const bmap *blk = a_block ? &ma : &mb;
    const int64_t inner = blk->inner, rows = inner ? n / inner : 0;
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t r = 0; r < rows; r++) {
      const float v = (a_block ? pa : pb)[r % blk->n];
      const float *full = (a_block ? pb : pa) + r * inner;
      float *yr = py + r * inner;
      if (kind == BIN_ADD)
        for (int64_t j = 0; j < inner; j++) yr[j] = full[j] + v;
      else if (kind == BIN_MUL)
        for (int64_t j = 0; j < inner; j++) yr[j] = full[j] * v;
      else if (a_block)
        for (int64_t j = 0; j < inner; j++) yr[j] = v - full[j];
      else
        for (int64_t j = 0; j < inner; j++) yr[j] = full[j] - v;
    }
  } else {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++) {
      float x = pa[bmap_index(&ma, i)], z = pb[bmap_index(&mb, i)];
      py[i] = kind == BIN_ADD ? x + z : kind == BIN_SUB ? x - z : x * z;
    }
  }
  bin_saved *s = NULL;
  if (ct_tape_wants(2, (ct_tensor *[]){a, b})) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    *s = (bin_saved){.kind = kind, .ma = ma, .mb = mb};
  }
  if (CT_RECORD(op, binary_backward, y, s, a, b) != CT_OK) return NULL;
  // Operands laid out like the output take their gradient by assignment.
  ct_node_set_flags(y, (ma.kind == MAP_SAME ? CT_NODE_FRESH_INPUT(0) : 0u) |
                           (mb.kind == MAP_SAME ? CT_NODE_FRESH_INPUT(1) : 0u));
  return y;
}

ct_tensor *ct_add(ct_tensor *a, ct_tensor *b) {
  return binary("add", BIN_ADD, a, b);
}
ct_tensor *ct_sub(ct_tensor *a, ct_tensor *b) {
  return binary("sub", BIN_SUB, a, b);
}
ct_tensor *ct_mul(ct_tensor *a, ct_tensor *b) {
  return binary("mul", BIN_MUL, a, b);
}

// ---- unary ops ----------------------------------------------------------------
//
// Each unary op is a forward map y = f(x) and a derivative dy/dx written in
// terms of x and y; one driver runs both.
typedef enum {
  UN_SCALE,
  UN_RELU,
  UN_GELU_ERF,
  UN_GELU_TANH,
  UN_GELU_QUICK,
  UN_SIGMOID,
  UN_TANH,
  UN_EXP,
  UN_INV_SIGMOID  // s = eps
} un_kind;

typedef struct un_saved {
  un_kind kind;
  float s;
} un_saved;

static const float SQRT_2_OVER_PI = 0.79788456080286536f;
static const float GELU_TANH_C = 0.044715f;
static const float GELU_QUICK_C = 1.702f;

static inline float unary_fwd(un_kind k, float x, float s) {
  switch (k) {
  case UN_SCALE: return s * x;
  case UN_RELU: return x > 0.0f ? x : 0.0f;
  case UN_GELU_ERF: break;  // whole arrays at once: ct_gelu_erf_blocks
  case UN_GELU_TANH: {
    float u = SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  }
  case UN_GELU_QUICK: break;  // whole arrays at once: quick_gelu_blocks
  case UN_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case UN_TANH: return tanhf(x);
  case UN_EXP: return expf(x);
  case UN_INV_SIGMOID: {
    const float c = fminf(fmaxf(x, 0.0f), 1.0f);
    return logf(fmaxf(c, s) / fmaxf(1.0f - c, s));
  }
  }
  return 0.0f;
}

static inline float unary_deriv(un_kind k, float x, float y, float s) {
  switch (k) {
  case UN_SCALE: return s;
  case UN_RELU: return step01(x > 0.0f);
  case UN_GELU_ERF: break;  // whole arrays at once: ct_gelu_erf_blocks
  case UN_GELU_TANH: {
    float u = SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x);
    float t = tanhf(u);
    float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_C * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
  }
  case UN_GELU_QUICK: break;  // whole arrays at once: quick_gelu_blocks
  case UN_SIGMOID: return y * (1.0f - y);
  case UN_TANH: return 1.0f - y * y;
  case UN_EXP: return y;
  case UN_INV_SIGMOID: {
    // PyTorch's clamp passes the gradient where min <= x <= max.
    const float c = fminf(fmaxf(x, 0.0f), 1.0f);
    const float d = step01(c >= s) / fmaxf(c, s) +
                    step01(1.0f - c >= s) / fmaxf(1.0f - c, s);
    return step01(x >= 0.0f && x <= 1.0f) * d;
  }
  }
  return 0.0f;
}

// The loops are spelled once per kind, so each compiles to straight-line
// (vectorizable) code instead of a switch per element.
#define UNARY_LOOP(n, KIND, STMT)                                              \
  case KIND: {                                                                 \
    _Pragma(                                                                   \
        "omp parallel for schedule(static) if (n > 32768)") for (int64_t i =   \
                                                                     0;        \
                                                                 i < (n); i++) \
        STMT;                                                                  \
    break;                                                                     \
  }
// The exact and the quick GELU are not among them: libm's erff and expf do
// not vectorize, so they run through core/vmath.h in fixed blocks (any
// thread count splits the same way; vmath's results do not depend on the
// split anyway).
#define UNARY_KINDS(n, STMT_OF)                          \
  UNARY_LOOP(n, UN_SCALE, STMT_OF(UN_SCALE))             \
  UNARY_LOOP(n, UN_RELU, STMT_OF(UN_RELU))               \
  UNARY_LOOP(n, UN_GELU_TANH, STMT_OF(UN_GELU_TANH))     \
  UNARY_LOOP(n, UN_SIGMOID, STMT_OF(UN_SIGMOID))         \
  UNARY_LOOP(n, UN_TANH, STMT_OF(UN_TANH))               \
  UNARY_LOOP(n, UN_EXP, STMT_OF(UN_EXP))                 \
  UNARY_LOOP(n, UN_INV_SIGMOID, STMT_OF(UN_INV_SIGMOID)) \
  case UN_GELU_ERF:                                      \
  case UN_GELU_QUICK: break;

// QuickGELU y = x sig(c x), sig the sigmoid, c = 1.702, and its backward
// gx (+)= g (sig + c x sig (1 - sig)): the sigmoid from core/vmath.h (libm's
// expf does not vectorize) in fixed blocks, each on one thread; an element's
// result depends on its value only.
enum { QUICK_BLOCK = 1024 };
static void quick_gelu_blocks(const float *restrict x, float *restrict y,
                              const float *restrict g, float *restrict gx,
                              int64_t n, bool accumulate) {
  const int64_t blocks = (n + QUICK_BLOCK - 1) / QUICK_BLOCK;
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t lo = b * QUICK_BLOCK;
    const int64_t len = n - lo < QUICK_BLOCK ? n - lo : QUICK_BLOCK;
    float sig[QUICK_BLOCK];
    for (int64_t i = 0; i < len; i++) sig[i] = GELU_QUICK_C * x[lo + i];
    ct_vmath_sigmoid(sig, sig, len);
    if (!gx) {
      for (int64_t i = 0; i < len; i++) y[lo + i] = x[lo + i] * sig[i];
      continue;
    }
    for (int64_t i = 0; i < len; i++) {
      const float s = sig[i];
      const float d =
          g[lo + i] * (s + GELU_QUICK_C * x[lo + i] * s * (1.0f - s));
      gx[lo + i] = accumulate ? gx[lo + i] + d : d;
    }
  }
}

static void unary_backward(ct_node *node) {
  const un_saved *s = node->saved;
  ct_tensor *x = node->in[0], *y = node->out;
  // restrict: the loops below then vectorize (the buffers are distinct).
  const float *restrict px = ct_f32(x), *restrict py = ct_f32(y);
  const float *restrict g = y->grad;
  float *restrict gx = x->grad;
  const float c = s->s;
  const int64_t n = y->numel;
  if (s->kind == UN_GELU_ERF) {
    ct_gelu_erf_blocks(px, NULL, g, gx, n, !(node->fresh & 1u));
    return;
  }
  if (s->kind == UN_GELU_QUICK) {
    quick_gelu_blocks(px, NULL, g, gx, n, !(node->fresh & 1u));
    return;
  }
  if (node->fresh & 1u) {
#define BACKWARD_STMT(K) gx[i] = g[i] * unary_deriv(K, px[i], py[i], c)
    switch (s->kind) { UNARY_KINDS(n, BACKWARD_STMT) }
#undef BACKWARD_STMT
    return;
  }
#define BACKWARD_STMT(K) gx[i] += g[i] * unary_deriv(K, px[i], py[i], c)
  switch (s->kind) { UNARY_KINDS(n, BACKWARD_STMT) }
#undef BACKWARD_STMT
}

static ct_tensor *unary(const char *op, un_kind kind, ct_tensor *x, float s) {
  if (!x) return NULL;
  if (!ct_check_f32(op, x, "input")) return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  if (!y) return NULL;
  const float *restrict px = ct_f32(x);
  float *restrict py = ct_f32(y);
  const int64_t n = x->numel;
#define FORWARD_STMT(K) py[i] = unary_fwd(K, px[i], s)
  if (kind == UN_GELU_ERF)
    ct_gelu_erf_blocks(px, py, NULL, NULL, n, false);
  else if (kind == UN_GELU_QUICK)
    quick_gelu_blocks(px, py, NULL, NULL, n, false);
  else
    switch (kind) { UNARY_KINDS(n, FORWARD_STMT) }
#undef FORWARD_STMT
  un_saved *sv = NULL;
  if (ct_tape_wants(1, &x)) {
    sv = ct_arena_alloc(sizeof *sv);
    if (!sv) return NULL;
    *sv = (un_saved){.kind = kind, .s = s};
  }
  if (CT_RECORD(op, unary_backward, y, sv, x) != CT_OK) return NULL;
  ct_node_set_flags(y, CT_NODE_FRESH_INPUT(0));
  return y;
}

ct_tensor *ct_scale(ct_tensor *x, float s) {
  return unary("scale", UN_SCALE, x, s);
}
ct_tensor *ct_relu(ct_tensor *x) { return unary("relu", UN_RELU, x, 0.0f); }
ct_tensor *ct_gelu(ct_tensor *x, ct_gelu_kind kind) {
  const un_kind k = kind == CT_GELU_TANH    ? UN_GELU_TANH
                    : kind == CT_GELU_QUICK ? UN_GELU_QUICK
                                            : UN_GELU_ERF;
  return unary("gelu", k, x, 0.0f);
}
ct_tensor *ct_sigmoid(ct_tensor *x) {
  return unary("sigmoid", UN_SIGMOID, x, 0.0f);
}
ct_tensor *ct_inverse_sigmoid(ct_tensor *x, float eps) {
  return unary("inverse_sigmoid", UN_INV_SIGMOID, x, eps);
}
ct_tensor *ct_tanh(ct_tensor *x) { return unary("tanh", UN_TANH, x, 0.0f); }
ct_tensor *ct_exp(ct_tensor *x) { return unary("exp", UN_EXP, x, 0.0f); }

// ---- dropout --------------------------------------------------------------------
//
// Element i is dropped when the Philox word at (seed, stream, i), as a
// uniform in [0, 1), is below p (core/rng.h). The forward pass draws the
// whole mask at once (four elements per Philox block) and keeps it, one
// byte per element, for the backward pass.

typedef struct dropout_saved {
  float scale;  // 1/(1-p), or 0 when p = 1
  uint8_t *dropped;
} dropout_saved;

static void dropout_backward(ct_node *node) {
  const dropout_saved *d = node->saved;
  ct_tensor *x = node->in[0], *y = node->out;
  const float *restrict g = y->grad;
  float *restrict gx = x->grad;
  const uint8_t *restrict dropped = d->dropped;
  const float scale = d->scale;
  const int64_t n = y->numel;
  if (node->fresh & 1u) {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      gx[i] = keep_or_zero(!dropped[i], g[i] * scale);
    return;
  }
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; i++)
    gx[i] += keep_or_zero(!dropped[i], g[i] * scale);
}

// y = dropout(relu(x)): keep_or_zero(kept, relu(x) * scale), the two ops'
// arithmetic in one pass. Backward, the dropout's gradient (assigned to the
// never-stored relu(x), as the tape would hand it a fresh buffer) times the
// ReLU's step: dx (=/+=) keep_or_zero(kept, g * scale) * step01(x > 0).
static void relu_dropout_backward(ct_node *node) {
  const dropout_saved *d = node->saved;
  ct_tensor *x = node->in[0], *y = node->out;
  const float *restrict px = ct_f32(x), *restrict g = y->grad;
  float *restrict gx = x->grad;
  const uint8_t *restrict dropped = d->dropped;
  const float scale = d->scale;
  const int64_t n = y->numel;
  if (node->fresh & 1u) {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      gx[i] = keep_or_zero(!dropped[i], g[i] * scale) *
              unary_deriv(UN_RELU, px[i], 0.0f, 0.0f);
    return;
  }
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; i++)
    gx[i] += keep_or_zero(!dropped[i], g[i] * scale) *
             unary_deriv(UN_RELU, px[i], 0.0f, 0.0f);
}

// z = x + dropout(y): the add's gradient of x (1 * g, as reduce_grad gives
// it), and the dropout's gradient of y taken from g directly (the add hands
// the dropped tensor 1 * g = g, assigned: it had no other reader).
static void add_dropout_backward(ct_node *node) {
  const dropout_saved *d = node->saved;
  ct_tensor *x = node->in[0], *y = node->in[1], *z = node->out;
  const float *restrict g = z->grad;
  const uint8_t *restrict dropped = d->dropped;
  const float scale = d->scale;
  const int64_t n = z->numel;
  if (x->requires_grad) {
    float *restrict gx = x->grad;
    if (node->fresh & 1u) {
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; i++) gx[i] = 1.0f * g[i];
    } else {
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; i++) gx[i] += 1.0f * g[i];
    }
  }
  if (y->requires_grad) {
    float *restrict gy = y->grad;
    if (node->fresh & 2u) {
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; i++)
        gy[i] = keep_or_zero(!dropped[i], g[i] * scale);
    } else {
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; i++)
        gy[i] += keep_or_zero(!dropped[i], g[i] * scale);
    }
  }
}

// What the dropout ops compute from the kept mask and the input.
typedef enum { DROP_PLAIN, DROP_RELU, DROP_ADD } drop_kind;

// The dropout ops' body: draws the mask and runs, with
// d = keep_or_zero(kept, f(y) * scale) and f = relu or the identity,
// out = d, or out = x + d (DROP_ADD); records the node with `backward` and
// inputs y (or x, y). p == 0 never gets here.
static ct_tensor *dropout_run(const char *op, drop_kind kind, ct_tensor *x,
                              ct_tensor *y, float p, uint64_t seed,
                              uint64_t stream, ct_backward_fn backward) {
  ct_tensor *out = ct_tensor_empty(CT_F32, y->ndim, y->shape);
  uint8_t *dropped = out ? ct_arena_alloc((size_t)y->numel) : NULL;
  if (!dropped) return NULL;
  ct_rng r = ct_rng_make(seed, stream);
  ct_rng_fill_bernoulli(&r, dropped, y->numel, p);
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const float *restrict py = ct_f32(y);
  float *restrict po = ct_f32(out);
  const uint8_t *restrict drop = dropped;
  const int64_t n = y->numel;
  if (kind == DROP_RELU) {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      po[i] = keep_or_zero(!drop[i], unary_fwd(UN_RELU, py[i], 0.0f) * scale);
  } else if (kind == DROP_ADD) {
    const float *restrict px = ct_f32(x);
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      po[i] = px[i] + keep_or_zero(!drop[i], py[i] * scale);
  } else {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; i++)
      po[i] = keep_or_zero(!drop[i], py[i] * scale);
  }
  ct_tensor *in[2] = {x, y};
  const int n_in = kind == DROP_ADD ? 2 : 1;
  ct_tensor **ins = kind == DROP_ADD ? in : in + 1;
  dropout_saved *sv = NULL;
  if (ct_tape_wants(n_in, ins)) {
    sv = ct_arena_alloc(sizeof *sv);
    if (!sv) return NULL;
    *sv = (dropout_saved){.scale = scale, .dropped = dropped};
  }
  if (ct_tape_record(op, backward, out, n_in, ins, sv) != CT_OK) return NULL;
  ct_node_set_flags(out, kind == DROP_ADD
                             ? CT_NODE_FRESH_INPUT(0) | CT_NODE_FRESH_INPUT(1)
                             : CT_NODE_FRESH_INPUT(0));
  return out;
}

static bool dropout_args_ok(const char *op, const ct_tensor *x, float p) {
  if (!ct_check_f32(op, x, "input")) return false;
  if (!(p >= 0.0f && p <= 1.0f)) {
    ct_error(CT_ERR_ARG, "%s: p = %g is outside [0, 1]", op, (double)p);
    return false;
  }
  return true;
}

ct_tensor *ct_dropout(ct_tensor *x, float p, uint64_t seed, uint64_t stream) {
  if (!x) return NULL;
  if (!dropout_args_ok("dropout", x, p)) return NULL;
  if (p == 0.0f) return unary("dropout", UN_SCALE, x, 1.0f);
  return dropout_run("dropout", DROP_PLAIN, NULL, x, p, seed, stream,
                     dropout_backward);
}

ct_tensor *ct_relu_dropout(ct_tensor *x, float p, uint64_t seed,
                           uint64_t stream) {
  if (!x) return NULL;
  if (!dropout_args_ok("relu_dropout", x, p)) return NULL;
  if (p == 0.0f) return ct_relu(x);  // dropout's p == 0 copy is x * 1
  return dropout_run("relu_dropout", DROP_RELU, NULL, x, p, seed, stream,
                     relu_dropout_backward);
}

ct_tensor *ct_add_dropout(ct_tensor *x, ct_tensor *y, float p, uint64_t seed,
                          uint64_t stream) {
  if (!x || !y) return NULL;
  if (!dropout_args_ok("add_dropout", y, p)) return NULL;
  if (p == 0.0f || x == y || !ct_tensor_same_shape(x, y))
    return ct_add(x, ct_dropout(y, p, seed, stream));
  if (!ct_check_f32("add_dropout", x, "x")) return NULL;
  return dropout_run("add_dropout", DROP_ADD, x, y, p, seed, stream,
                     add_dropout_backward);
}
