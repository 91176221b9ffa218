// Shape ops: reshape (a view), permute/transpose, concat, slice (copies),
// and the embedding row lookup.
#include "autograd/ops.h"
#include "autograd/op_util.h"

#include <string.h>

// ---- reshape ------------------------------------------------------------------

// Runs only when x already has a gradient or y is where backward started:
// otherwise x takes over y's buffer (CT_NODE_GRAD_IDENTITY).
static void reshape_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *y = node->out;
  float *restrict gx = x->grad;
  const float *restrict gy = y->grad;
  const int64_t n = y->numel;
  if (node->fresh & 1u) {
    memcpy(gx, gy, (size_t)n * sizeof(float));
    return;
  }
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; i++) gx[i] += gy[i];
}

ct_tensor *ct_reshape(ct_tensor *x, int ndim, const int64_t *shape) {
  if (!x) return NULL;
  if (ndim < 0 || ndim > CT_MAX_DIMS) {
    ct_error(CT_ERR_SHAPE, "reshape: %d dims requested, at most %d", ndim,
             CT_MAX_DIMS);
    return NULL;
  }
  int64_t s[CT_MAX_DIMS];
  int infer = -1;
  int64_t known = 1;
  for (int d = 0; d < ndim; d++) {
    s[d] = shape[d];
    if (shape[d] == -1 && infer < 0)
      infer = d;
    else
      known *= shape[d] < 0 ? 0 : shape[d];
    if (shape[d] < -1 || (shape[d] == -1 && infer != d)) {
      char b[128];
      ct_error(CT_ERR_SHAPE, "reshape: invalid target shape %s for %s",
               ct_shape_str(ndim, shape, b, sizeof b), ct_shape_of(x));
      return NULL;
    }
  }
  if (infer >= 0) {
    if (known == 0 || x->numel % known) {
      char b[128];
      ct_error(CT_ERR_SHAPE, "reshape: cannot infer -1 in %s for %s",
               ct_shape_str(ndim, shape, b, sizeof b), ct_shape_of(x));
      return NULL;
    }
    s[infer] = x->numel / known;
  }
  ct_tensor *y = ct_tensor_view(x, ndim, s);
  if (!y) return NULL;
  if (CT_RECORD("reshape", reshape_backward, y, NULL, x) != CT_OK) return NULL;
  ct_node_set_flags(y, CT_NODE_GRAD_IDENTITY | CT_NODE_FRESH_INPUT(0));
  return y;
}

// ---- permute --------------------------------------------------------------------

typedef struct permute_saved {
  int perm[CT_MAX_DIMS];
} permute_saved;

// The input offset of every output element, for out = x.permute(perm).
// Each output element reads one distinct input element.
static inline int64_t permuted_offset(const ct_tensor *x, const int *perm,
                                      const int64_t *out_shape, int ndim,
                                      int64_t i) {
  int64_t in_stride[CT_MAX_DIMS];
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    in_stride[d] = s;
    s *= x->shape[d];
  }
  int64_t off = 0;
  for (int d = ndim - 1; d >= 0; d--) {
    off += (i % out_shape[d]) * in_stride[perm[d]];
    i /= out_shape[d];
  }
  return off;
}

// Whether perm swaps the last two dims and keeps the others: a batch of
// matrix transposes, (..., R, C) -> (..., C, R).
static bool swaps_last_two(const int *perm, int ndim) {
  if (ndim < 2 || perm[ndim - 2] != ndim - 1 || perm[ndim - 1] != ndim - 2)
    return false;
  for (int d = 0; d < ndim - 2; d++)
    if (perm[d] != d) return false;
  return true;
}

// y (B, C, R) (+)= x (B, R, C) transposed, in 32 x 32 tiles so that both
// sides stay in cache. Each task owns a band of y's columns r: every output
// element is written by one task, whatever the thread count.
static void transpose_last_two(const float *restrict x, float *restrict y,
                               int64_t B, int64_t R, int64_t C,
                               bool accumulate) {
  enum { TILE = 32 };
  const int64_t bands = (R + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) if (B * R * C >= 32768)
  for (int64_t t = 0; t < B * bands; t++) {
    const int64_t b = t / bands, r0 = t % bands * TILE;
    const int64_t r1 = r0 + TILE < R ? r0 + TILE : R;
    const float *xb = x + b * R * C;
    float *yb = y + b * R * C;
    for (int64_t c0 = 0; c0 < C; c0 += TILE) {
      const int64_t c1 = c0 + TILE < C ? c0 + TILE : C;
      for (int64_t c = c0; c < c1; c++) {
        if (accumulate) {
          for (int64_t r = r0; r < r1; r++) yb[c * R + r] += xb[r * C + c];
        } else {
          for (int64_t r = r0; r < r1; r++) yb[c * R + r] = xb[r * C + c];
        }
      }
    }
  }
}

static void permute_backward(ct_node *node) {
  const permute_saved *s = node->saved;
  ct_tensor *x = node->in[0], *y = node->out;
  const int nd = x->ndim;
  if (x->dtype == CT_F32 && swaps_last_two(s->perm, nd) && x->numel > 0) {
    const int64_t R = x->shape[nd - 2], C = x->shape[nd - 1];
    transpose_last_two(y->grad, x->grad, x->numel / (R * C), C, R, true);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < y->numel; i++)
    x->grad[permuted_offset(x, s->perm, y->shape, y->ndim, i)] += y->grad[i];
}

ct_tensor *ct_permute(ct_tensor *x, const int *perm) {
  if (!x) return NULL;
  bool seen[CT_MAX_DIMS] = {false};
  for (int d = 0; d < x->ndim; d++) {
    if (perm[d] < 0 || perm[d] >= x->ndim || seen[perm[d]]) {
      ct_error(CT_ERR_ARG,
               "permute: not a permutation of the %d dims of %s "
               "(entry %d is %d)",
               x->ndim, ct_shape_of(x), d, perm[d]);
      return NULL;
    }
    seen[perm[d]] = true;
  }
  int64_t shape[CT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[perm[d]];
  ct_tensor *y = ct_tensor_empty(x->dtype, x->ndim, shape);
  if (!y) return NULL;
  const size_t es = ct_dtype_size(x->dtype);
  const char *src = x->data;
  char *dst = y->data;
  if (x->dtype == CT_F32 && swaps_last_two(perm, x->ndim) && x->numel > 0) {
    const int64_t R = x->shape[x->ndim - 2], C = x->shape[x->ndim - 1];
    transpose_last_two(ct_f32(x), ct_f32(y), x->numel / (R * C), R, C, false);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < y->numel; i++)
      memcpy(dst + (size_t)i * es,
             src + (size_t)permuted_offset(x, perm, shape, x->ndim, i) * es,
             es);
  }
  permute_saved *s = NULL;
  if (ct_tape_wants(1, &x)) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    memcpy(s->perm, perm, (size_t)x->ndim * sizeof(int));
  }
  if (CT_RECORD("permute", permute_backward, y, s, x) != CT_OK) return NULL;
  return y;
}

ct_tensor *ct_transpose(ct_tensor *x, int dim0, int dim1) {
  if (!x) return NULL;
  int a = ct_resolve_dim("transpose", dim0, x->ndim);
  int b = a < 0 ? -1 : ct_resolve_dim("transpose", dim1, x->ndim);
  if (b < 0) return NULL;
  int perm[CT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) perm[d] = d;
  perm[a] = b;
  perm[b] = a;
  return ct_permute(x, perm);
}

// ---- concat and slice -------------------------------------------------------------
//
// Both view a tensor as (outer, dim * inner): a slab of `inner` elements per
// index along `dim`, repeated `outer` times.

static void outer_inner(const ct_tensor *t, int dim, int64_t *outer,
                        int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= t->shape[d];
  for (int d = dim + 1; d < t->ndim; d++) *inner *= t->shape[d];
}

// Adds (or copies) a (outer, len*inner) block at column `col` of a
// (outer, total*inner) array, in either direction.
static void block_copy(float *dst, int64_t dst_row, const float *src,
                       int64_t src_row, int64_t outer, int64_t width,
                       bool accumulate) {
#pragma omp parallel for schedule(static) if (outer * width > 32768)
  for (int64_t o = 0; o < outer; o++) {
    float *d = dst + o * dst_row;
    const float *s = src + o * src_row;
    if (accumulate)
      for (int64_t j = 0; j < width; j++) d[j] += s[j];
    else
      memcpy(d, s, (size_t)width * sizeof(float));
  }
}

typedef struct slice_saved {
  int dim;
  int64_t start;
} slice_saved;

static void concat_backward(ct_node *node) {
  const slice_saved *s = node->saved;
  ct_tensor *y = node->out;
  int64_t outer, inner;
  outer_inner(y, s->dim, &outer, &inner);
  const int64_t row = y->shape[s->dim] * inner;
  int64_t col = 0;
  for (int k = 0; k < node->n_in; k++) {
    ct_tensor *x = node->in[k];
    int64_t width = x->shape[s->dim] * inner;
    if (x->requires_grad)
      block_copy(x->grad, width, y->grad + col, row, outer, width, true);
    col += width;
  }
}

// More tensors than a tape node holds: concatenated in groups, then the
// groups (each element is copied once per level, log6(n) levels).
static ct_tensor *concat_groups(ct_tensor *const *xs, int n, int dim) {
  const int groups = (n + CT_NODE_MAX_INPUTS - 1) / CT_NODE_MAX_INPUTS;
  ct_tensor **parts = ct_arena_alloc((size_t)groups * sizeof *parts);
  if (!parts) return NULL;
  for (int g = 0; g < groups; g++) {
    const int first = g * CT_NODE_MAX_INPUTS;
    const int len =
        n - first < CT_NODE_MAX_INPUTS ? n - first : CT_NODE_MAX_INPUTS;
    parts[g] = ct_concat(xs + first, len, dim);
  }
  return ct_concat(parts, groups, dim);
}

ct_tensor *ct_concat(ct_tensor *const *xs, int n, int dim) {
  const char *op = "concat";
  if (n < 1) {
    ct_error(CT_ERR_ARG, "concat: %d tensors given, at least 1 needed", n);
    return NULL;
  }
  if (n > CT_NODE_MAX_INPUTS) return concat_groups(xs, n, dim);
  for (int k = 0; k < n; k++)
    if (!xs[k]) return NULL;
  const ct_tensor *x0 = xs[0];
  int d = ct_resolve_dim(op, dim, x0->ndim);
  if (d < 0) return NULL;
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, x0->shape, sizeof shape);
  shape[d] = 0;
  for (int k = 0; k < n; k++) {
    const ct_tensor *x = xs[k];
    if (!ct_check_f32(op, x, "input")) return NULL;
    bool fits = x->ndim == x0->ndim;
    for (int e = 0; fits && e < x0->ndim; e++)
      fits = e == d || x->shape[e] == x0->shape[e];
    if (!fits) {
      ct_error(CT_ERR_SHAPE,
               "concat: input %d %s does not match input 0 %s "
               "outside dim %d",
               k, ct_shape_of(x), ct_shape_of(x0), d);
      return NULL;
    }
    shape[d] += x->shape[d];
  }
  ct_tensor *y = ct_tensor_empty(CT_F32, x0->ndim, shape);
  if (!y) return NULL;
  int64_t outer, inner;
  outer_inner(y, d, &outer, &inner);
  const int64_t row = shape[d] * inner;
  int64_t col = 0;
  for (int k = 0; k < n; k++) {
    int64_t width = xs[k]->shape[d] * inner;
    block_copy(ct_f32(y) + col, row, ct_f32(xs[k]), width, outer, width, false);
    col += width;
  }
  slice_saved *s = NULL;
  if (ct_tape_wants(n, xs)) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    *s = (slice_saved){.dim = d};
  }
  if (ct_tape_record(op, concat_backward, y, n, xs, s) != CT_OK) return NULL;
  return y;
}

static void slice_backward(ct_node *node) {
  const slice_saved *s = node->saved;
  ct_tensor *x = node->in[0], *y = node->out;
  int64_t outer, inner;
  outer_inner(x, s->dim, &outer, &inner);
  const int64_t width = y->shape[s->dim] * inner;
  block_copy(x->grad + s->start * inner, x->shape[s->dim] * inner, y->grad,
             width, outer, width, true);
}

ct_tensor *ct_slice(ct_tensor *x, int dim, int64_t start, int64_t len) {
  const char *op = "slice";
  if (!x) return NULL;
  if (!ct_check_f32(op, x, "input")) return NULL;
  int d = ct_resolve_dim(op, dim, x->ndim);
  if (d < 0) return NULL;
  if (start < 0 || len < 0 || start + len > x->shape[d]) {
    ct_error(CT_ERR_INDEX, "slice: [%lld, %lld) is outside dim %d of %s",
             (long long)start, (long long)(start + len), d, ct_shape_of(x));
    return NULL;
  }
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[d] = len;
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, shape);
  if (!y) return NULL;
  int64_t outer, inner;
  outer_inner(x, d, &outer, &inner);
  const int64_t width = len * inner;
  block_copy(ct_f32(y), width, ct_f32(x) + start * inner, x->shape[d] * inner,
             outer, width, false);
  slice_saved *s = NULL;
  if (ct_tape_wants(1, &x)) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    *s = (slice_saved){.dim = d, .start = start};
  }
  if (CT_RECORD(op, slice_backward, y, s, x) != CT_OK) return NULL;
  return y;
}

// ---- embedding --------------------------------------------------------------------

typedef struct embedding_saved {
  int64_t padding_idx;
} embedding_saved;

// dtable[id] += dy[row]. Parallel over columns: each thread owns a range of
// columns and walks the rows in order, so repeated ids sum deterministically.
static void embedding_backward(ct_node *node) {
  const embedding_saved *s = node->saved;
  ct_tensor *table = node->in[0], *ids = node->in[1], *y = node->out;
  const int64_t D = table->shape[0] ? table->numel / table->shape[0] : 0;
  const int32_t *id = ct_i32(ids);
  const float *g = y->grad;
  float *gt = table->grad;
  enum { COLS = 64 };
  const int64_t blocks = (D + COLS - 1) / COLS;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; b++) {
    int64_t c0 = b * COLS, c1 = c0 + COLS < D ? c0 + COLS : D;
    for (int64_t r = 0; r < ids->numel; r++) {
      if (id[r] == s->padding_idx) continue;
      float *dst = gt + (int64_t)id[r] * D;
      const float *src = g + r * D;
      for (int64_t c = c0; c < c1; c++) dst[c] += src[c];
    }
  }
}

ct_tensor *ct_embedding(ct_tensor *table, ct_tensor *ids, int64_t padding_idx) {
  const char *op = "embedding";
  if (!table || !ids) return NULL;
  if (!ct_check_f32(op, table, "table") || !ct_check_i32(op, ids, "ids") ||
      !ct_check_min_dims(op, table, 1, "table"))
    return NULL;
  const int64_t V = table->shape[0];
  const int extra = table->ndim - 1;
  if (ids->ndim + extra > CT_MAX_DIMS) {
    ct_error(CT_ERR_SHAPE,
             "embedding: ids %s and table %s make more than %d "
             "dims",
             ct_shape_of(ids), ct_shape_of(table), CT_MAX_DIMS);
    return NULL;
  }
  const int32_t *id = ct_i32(ids);
  for (int64_t r = 0; r < ids->numel; r++) {
    if (id[r] < 0 || id[r] >= V) {
      ct_error(CT_ERR_INDEX,
               "embedding: id %d at position %lld is outside "
               "the table's %lld rows",
               id[r], (long long)r, (long long)V);
      return NULL;
    }
  }
  int64_t shape[CT_MAX_DIMS];
  for (int d = 0; d < ids->ndim; d++) shape[d] = ids->shape[d];
  for (int d = 0; d < extra; d++) shape[ids->ndim + d] = table->shape[1 + d];
  ct_tensor *y = ct_tensor_empty(CT_F32, ids->ndim + extra, shape);
  if (!y) return NULL;
  const int64_t D = V ? table->numel / V : 0;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < ids->numel; r++)
    memcpy(ct_f32(y) + r * D, ct_f32(table) + (int64_t)id[r] * D,
           (size_t)D * sizeof(float));
  embedding_saved *s = NULL;
  if (ct_tape_wants(1, &table)) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    s->padding_idx = padding_idx;
  }
  if (CT_RECORD(op, embedding_backward, y, s, table, ids) != CT_OK) return NULL;
  return y;
}
