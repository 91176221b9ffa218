// Reductions: sum and mean over everything, or over the last dim.
//
// The sum over everything is split into fixed chunks of CHUNK elements
// (independent of the thread count), summed in double, and the chunk sums are
// added in chunk order: the same bits at any thread count.
#include "autograd/ops.h"
#include "autograd/op_util.h"

enum { CHUNK = 4096 };

static double sum_all(const float *x, int64_t n) {
  int64_t chunks = (n + CHUNK - 1) / CHUNK;
  double *partial =
      ct_arena_alloc((size_t)(chunks ? chunks : 1) * sizeof *partial);
  if (!partial) return 0.0;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; c++) {
    int64_t end = (c + 1) * CHUNK < n ? (c + 1) * CHUNK : n;
    double s = 0.0;
    for (int64_t i = c * CHUNK; i < end; i++) s += x[i];
    partial[c] = s;
  }
  double total = 0.0;
  for (int64_t c = 0; c < chunks; c++) total += partial[c];
  return total;
}

typedef struct reduce_saved {
  float scale;  // 1 for sum, 1/count for mean
} reduce_saved;

static void reduce_all_backward(ct_node *node) {
  const reduce_saved *s = node->saved;
  ct_tensor *x = node->in[0];
  float g = node->out->grad[0] * s->scale;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < x->numel; i++) x->grad[i] += g;
}

static void reduce_last_backward(ct_node *node) {
  const reduce_saved *s = node->saved;
  ct_tensor *x = node->in[0];
  const int64_t C = ct_last_dim(x), rows = ct_rows(x);
  const float *g = node->out->grad;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < C; c++) x->grad[r * C + c] += g[r] * s->scale;
}

static ct_tensor *record_reduce(const char *op, ct_backward_fn bw, ct_tensor *x,
                                ct_tensor *y, float scale) {
  reduce_saved *s = NULL;
  if (ct_tape_wants(1, &x)) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    s->scale = scale;
  }
  if (CT_RECORD(op, bw, y, s, x) != CT_OK) return NULL;
  return y;
}

static ct_tensor *reduce_all(const char *op, ct_tensor *x, bool mean) {
  if (!x) return NULL;
  if (!ct_check_f32(op, x, "input")) return NULL;
  if (mean && x->numel == 0) {
    ct_error(CT_ERR_SHAPE, "mean: the mean of an empty tensor %s is undefined",
             ct_shape_of(x));
    return NULL;
  }
  ct_tensor *y = ct_tensor_empty(CT_F32, 0, NULL);
  if (!y) return NULL;
  double s = sum_all(ct_f32(x), x->numel);
  float scale = mean ? 1.0f / (float)x->numel : 1.0f;
  ct_f32(y)[0] = (float)(mean ? s / (double)x->numel : s);
  return record_reduce(op, reduce_all_backward, x, y, scale);
}

ct_tensor *ct_sum(ct_tensor *x) { return reduce_all("sum", x, false); }
ct_tensor *ct_mean(ct_tensor *x) { return reduce_all("mean", x, true); }

static ct_tensor *reduce_last(const char *op, ct_tensor *x, bool keepdim,
                              bool mean) {
  if (!x) return NULL;
  if (!ct_check_f32(op, x, "input") || !ct_check_min_dims(op, x, 1, "input"))
    return NULL;
  const int64_t C = ct_last_dim(x);
  if (mean && C == 0) {
    ct_error(CT_ERR_SHAPE, "%s: the last dim of %s is empty", op,
             ct_shape_of(x));
    return NULL;
  }
  int64_t shape[CT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
  shape[x->ndim - 1] = 1;
  ct_tensor *y =
      ct_tensor_empty(CT_F32, keepdim ? x->ndim : x->ndim - 1, shape);
  if (!y) return NULL;
  const float *px = ct_f32(x);
  float *py = ct_f32(y);
  const int64_t rows = y->numel;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    double s = 0.0;
    for (int64_t c = 0; c < C; c++) s += px[r * C + c];
    py[r] = (float)(mean ? s / (double)C : s);
  }
  return record_reduce(op, reduce_last_backward, x, y,
                       mean ? 1.0f / (float)C : 1.0f);
}

ct_tensor *ct_sum_last(ct_tensor *x, bool keepdim) {
  return reduce_last("sum_last", x, keepdim, false);
}
ct_tensor *ct_mean_last(ct_tensor *x, bool keepdim) {
  return reduce_last("mean_last", x, keepdim, true);
}
