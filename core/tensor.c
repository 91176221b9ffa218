// Tensor creation, views and printing. Storage comes from the step arena.
#include "core/tensor.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/gemm_bf16.h"
#include "core/rng.h"

#include <string.h>

size_t ct_dtype_size(ct_dtype dtype) { return dtype == CT_BF16 ? 2 : 4; }

char *ct_shape_str(int ndim, const int64_t *shape, char *buf, size_t size) {
  size_t n = 0;
  n += (size_t)snprintf(buf + n, size - n, "[");
  for (int i = 0; i < ndim && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld",
                          (long long)shape[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

int64_t ct_shape_numel(int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > CT_MAX_DIMS) {
    ct_error(CT_ERR_SHAPE, "tensor: %d dims requested, at most %d supported",
             ndim, CT_MAX_DIMS);
    return -1;
  }
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (shape[i] > 0 && n > INT64_MAX / 4 / shape[i])) {
      char s[128];
      ct_error(CT_ERR_SHAPE, "tensor: invalid shape %s (dim %d)",
               ct_shape_str(ndim, shape, s, sizeof s), i);
      return -1;
    }
    n *= shape[i];
  }
  return n;
}

ct_tensor *ct_tensor_empty(ct_dtype dtype, int ndim, const int64_t *shape) {
  int64_t numel = ct_shape_numel(ndim, shape);
  if (numel < 0) return NULL;
  ct_tensor *t = ct_arena_alloc(sizeof *t);
  void *data = t ? ct_arena_alloc((size_t)numel * ct_dtype_size(dtype)) : NULL;
  if (!data) return NULL;
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->numel = numel;
  t->data = data;
  return t;
}

ct_tensor *ct_tensor_zeros(ct_dtype dtype, int ndim, const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(dtype, ndim, shape);
  if (t) memset(t->data, 0, ct_tensor_bytes(t));
  return t;
}

ct_tensor *ct_tensor_full(ct_dtype dtype, double value, int ndim,
                          const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(dtype, ndim, shape);
  if (!t) return NULL;
  for (int64_t i = 0; i < t->numel; i++) {
    if (dtype == CT_F32)
      ct_f32(t)[i] = (float)value;
    else if (dtype == CT_BF16)
      ct_bf16(t)[i] = ct_bf16_from_f32((float)value);
    else
      ct_i32(t)[i] = (int32_t)value;
  }
  return t;
}

ct_tensor *ct_tensor_from(ct_dtype dtype, const void *src, int ndim,
                          const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(dtype, ndim, shape);
  if (t) memcpy(t->data, src, ct_tensor_bytes(t));
  return t;
}

ct_tensor *ct_tensor_arange(ct_dtype dtype, double start, double step,
                            int64_t n) {
  ct_tensor *t = ct_tensor_empty(dtype, 1, &n);
  if (!t) return NULL;
  for (int64_t i = 0; i < n; i++) {
    double v = start + step * (double)i;
    if (dtype == CT_F32)
      ct_f32(t)[i] = (float)v;
    else if (dtype == CT_BF16)
      ct_bf16(t)[i] = ct_bf16_from_f32((float)v);
    else
      ct_i32(t)[i] = (int32_t)v;
  }
  return t;
}

ct_tensor *ct_tensor_randn(ct_rng *rng, float mean, float std, int ndim,
                           const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(CT_F32, ndim, shape);
  if (t) ct_rng_fill_normal(rng, ct_f32(t), t->numel, mean, std);
  return t;
}

ct_tensor *ct_tensor_rand(ct_rng *rng, float lo, float hi, int ndim,
                          const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(CT_F32, ndim, shape);
  if (t) ct_rng_fill_uniform(rng, ct_f32(t), t->numel, lo, hi);
  return t;
}

// A header sharing `data`; no grad, no tape link.
static ct_tensor *view_header(const ct_tensor *t, void *data, int ndim,
                              const int64_t *shape, int64_t numel) {
  ct_tensor *v = ct_arena_alloc(sizeof *v);
  if (!v) return NULL;
  memset(v, 0, sizeof *v);
  v->dtype = t->dtype;
  v->ndim = ndim;
  for (int i = 0; i < ndim; i++) v->shape[i] = shape[i];
  v->numel = numel;
  v->data = data;
  v->persistent = t->persistent;
  return v;
}

ct_tensor *ct_tensor_view(const ct_tensor *t, int ndim, const int64_t *shape) {
  if (!t) return NULL;
  int64_t numel = ct_shape_numel(ndim, shape);
  if (numel < 0) return NULL;
  if (numel != t->numel) {
    char a[128], b[128];
    ct_error(CT_ERR_SHAPE, "view: cannot view %s (%lld elements) as %s",
             ct_shape_str(t->ndim, t->shape, a, sizeof a), (long long)t->numel,
             ct_shape_str(ndim, shape, b, sizeof b));
    return NULL;
  }
  return view_header(t, t->data, ndim, shape, numel);
}

ct_tensor *ct_tensor_slice0(const ct_tensor *t, int64_t start, int64_t len) {
  if (!t) return NULL;
  if (t->ndim == 0) {
    ct_error(CT_ERR_SHAPE, "slice0: a scalar has no first dimension");
    return NULL;
  }
  if (start < 0 || len < 0 || start + len > t->shape[0]) {
    ct_error(CT_ERR_INDEX, "slice0: rows [%lld, %lld) outside [0, %lld)",
             (long long)start, (long long)(start + len),
             (long long)t->shape[0]);
    return NULL;
  }
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[0] = len;
  int64_t row = t->shape[0] ? t->numel / t->shape[0] : 0;
  char *data =
      (char *)t->data + (size_t)(start * row) * ct_dtype_size(t->dtype);
  return view_header(t, data, t->ndim, shape, len * row);
}

ct_tensor *ct_tensor_copy(const ct_tensor *t) {
  if (!t) return NULL;
  return ct_tensor_from(t->dtype, t->data, t->ndim, t->shape);
}

bool ct_tensor_same_shape(const ct_tensor *a, const ct_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

void ct_tensor_print(const ct_tensor *t, const char *label, int max_items,
                     FILE *out) {
  char s[128];
  if (!t) {
    fprintf(out, "%s: (null tensor)\n", label ? label : "tensor");
    return;
  }
  fprintf(out, "%s: %s %s%s {", label ? label : (t->name ? t->name : "tensor"),
          ct_dtype_name(t->dtype), ct_shape_str(t->ndim, t->shape, s, sizeof s),
          t->requires_grad ? " requires_grad" : "");
  int64_t n = t->numel < max_items ? t->numel : max_items;
  for (int64_t i = 0; i < n; i++) {
    if (t->dtype == CT_F32)
      fprintf(out, i ? ", %.6g" : "%.6g", ct_f32(t)[i]);
    else if (t->dtype == CT_BF16)
      fprintf(out, i ? ", %.6g" : "%.6g", ct_bf16_to_f32(ct_bf16(t)[i]));
    else
      fprintf(out, i ? ", %d" : "%d", ct_i32(t)[i]);
  }
  fprintf(out, "%s}\n", t->numel > n ? ", ..." : "");
}
