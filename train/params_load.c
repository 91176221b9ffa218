// Loading named tensors into a parameter store: matching them to parameters
// by name, checking shapes, listing what is missing or unexpected, and
// converting F16, BF16 and F64 values to f32.
#include "train/params_load.h"
#include "train/little_endian.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// IEEE binary16 to binary32 (exact: every half value is a float).
static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31,
           man = h & 1023u, bits;
  if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);  // inf or nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: renormalize
    exp = 113;
    while (!(man & 1024u)) {
      man <<= 1;
      exp--;
    }
    bits = sign | (exp << 23) | ((man & 1023u) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static void convert_to_f32(float *dst, const unsigned char *src, int64_t n,
                           ct_file_dtype dtype) {
  if (dtype == CT_FILE_F32) {
    memcpy(dst, src, (size_t)n * 4);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (dtype == CT_FILE_F64) {
      uint64_t bits = ct_get_le(src + 8 * i, 8);
      double v;
      memcpy(&v, &bits, 8);
      dst[i] = (float)v;
    } else if (dtype == CT_FILE_BF16) {
      uint32_t bits = (uint32_t)ct_get_le(src + 2 * i, 2) << 16;
      memcpy(&dst[i], &bits, 4);
    } else {
      dst[i] = half_to_float((uint16_t)ct_get_le(src + 2 * i, 2));
    }
  }
}

// The value of element i of a file tensor, in double (exact for every
// dtype read here).
static double file_value(const ct_named_tensor *t, int64_t i) {
  const unsigned char *src = t->data;
  switch (t->dtype) {
  case CT_FILE_F32: {
    uint32_t bits = (uint32_t)ct_get_le(src + 4 * i, 4);
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  case CT_FILE_F64: {
    uint64_t bits = ct_get_le(src + 8 * i, 8);
    double v;
    memcpy(&v, &bits, 8);
    return v;
  }
  case CT_FILE_BF16: {
    uint32_t bits = (uint32_t)ct_get_le(src + 2 * i, 2) << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  case CT_FILE_F16: break;
  }
  return half_to_float((uint16_t)ct_get_le(src + 2 * i, 2));
}

// The first element of t that is NaN or Inf (or, from F64, beyond float's
// range, which converts to Inf); -1 when all load as finite floats.
static int64_t first_nonfinite(const ct_named_tensor *t, int64_t numel) {
  for (int64_t i = 0; i < numel; i++) {
    double v = file_value(t, i);
    if (!isfinite(v) || fabs(v) > FLT_MAX) return i;
  }
  return -1;
}

static bool same_shape(const ct_named_tensor *e, const ct_tensor *t) {
  if (e->ndim != t->ndim) return false;
  for (int d = 0; d < e->ndim; d++)
    if (e->shape[d] != t->shape[d]) return false;
  return true;
}

// Appends "'name' [2, 3]" items to a message, at most three then "(and N
// more)".
typedef struct name_list {
  char text[600];
  int count;
} name_list;

static void name_list_add(name_list *l, const char *name, int ndim,
                          const int64_t *shape) {
  if (l->count++ >= 3) return;
  char dims[128];
  size_t used = strlen(l->text);
  ct_shape_str(ndim > CT_MAX_DIMS ? CT_MAX_DIMS : ndim, shape, dims,
               sizeof dims);
  snprintf(l->text + used, sizeof l->text - used, "%s'%.120s' %s%s",
           used ? ", " : "", name, dims, ndim > CT_MAX_DIMS ? "..." : "");
}

static const char *name_list_end(name_list *l) {
  size_t used = strlen(l->text);
  if (l->count > 3)
    snprintf(l->text + used, sizeof l->text - used, " (and %d more)",
             l->count - 3);
  return l->text;
}

ct_status ct_params_load_named(ct_params *dst, float *buf,
                               const ct_named_tensor *t, int n, unsigned flags,
                               const char *source) {
  return ct_params_load_named_reported(dst, buf, t, n, flags, source, NULL);
}

ct_status ct_params_load_named_reported(ct_params *dst, float *buf,
                                        const ct_named_tensor *t, int n,
                                        unsigned flags, const char *source,
                                        ct_load_report *report) {
  if (report) *report = (ct_load_report){0};
  if (!dst || (!buf && dst->n) || (n && !t) || n < 0)
    return ct_error(CT_ERR_ARG, "load: needs a store, a buffer and tensors");
  if (!source) source = "file";
  // found[i]: which file tensor fills parameter i (-1 none).
  int *found = malloc((size_t)(dst->n ? dst->n : 1) * sizeof *found);
  if (!found) return ct_error(CT_ERR_NOMEM, "%s: out of memory", source);
  for (int i = 0; i < dst->n; i++) found[i] = -1;
  name_list unexpected = {{0}, 0}, missing = {{0}, 0};
  ct_status st = CT_OK;
  for (int k = 0; k < n && st == CT_OK; k++) {
    ct_param *it = ct_params_find(dst, t[k].name);
    if (!it) {
      name_list_add(&unexpected, t[k].name, t[k].ndim, t[k].shape);
      continue;
    }
    int i = (int)(it - dst->items);
    char want[128], got[128];
    if (found[i] >= 0) {
      st = ct_error(CT_ERR_FORMAT, "%s: has '%s' twice", source, t[k].name);
    } else if (!same_shape(&t[k], it->tensor)) {
      ct_shape_str(it->tensor->ndim, it->tensor->shape, want, sizeof want);
      if (t[k].ndim > CT_MAX_DIMS)
        snprintf(got, sizeof got, "with %d dims", t[k].ndim);
      else
        ct_shape_str(t[k].ndim, t[k].shape, got, sizeof got);
      st = ct_error(CT_ERR_SHAPE, "%s: has '%s' %s, the model expects %s",
                    source, t[k].name, got, want);
    }
    found[i] = k;
  }
  for (int i = 0; i < dst->n && st == CT_OK; i++)
    if (found[i] < 0)
      name_list_add(&missing, dst->items[i].name, dst->items[i].tensor->ndim,
                    dst->items[i].tensor->shape);
  name_list_end(&unexpected);
  name_list_end(&missing);
  if (report) {
    report->unexpected = unexpected.count;
    report->missing = missing.count;
    snprintf(report->unexpected_names, sizeof report->unexpected_names, "%s",
             unexpected.text);
    snprintf(report->missing_names, sizeof report->missing_names, "%s",
             missing.text);
  }
  if (st == CT_OK && unexpected.count && !(flags & CT_LOAD_ALLOW_UNEXPECTED)) {
    st = ct_error(CT_ERR_FORMAT, "%s: has %d tensor(s) the model does not: %s",
                  source, unexpected.count, unexpected.text);
    if (report) report->refused_unexpected = true;
  }
  if (st == CT_OK && missing.count && !(flags & CT_LOAD_ALLOW_MISSING))
    st = ct_error(CT_ERR_FORMAT,
                  "%s: lacks %d model parameter(s): %s (the weights of "
                  "another model or configuration?)",
                  source, missing.count, missing.text);
  // A NaN or Inf in a file is an error naming the tensor: loaded, it would
  // only surface as a non-finite loss (or a nonsense answer) later.
  for (int i = 0; i < dst->n && st == CT_OK; i++) {
    if (found[i] < 0) continue;
    int64_t bad = first_nonfinite(&t[found[i]], dst->items[i].tensor->numel);
    if (bad >= 0)
      st = ct_error(CT_ERR_NUMERIC,
                    "%s: tensor '%s' holds a non-finite value (%g at element "
                    "%lld)",
                    source, t[found[i]].name, file_value(&t[found[i]], bad),
                    (long long)bad);
  }
  for (int i = 0; i < dst->n && st == CT_OK; i++)
    if (found[i] >= 0)
      convert_to_f32(buf + dst->items[i].offset, t[found[i]].data,
                     dst->items[i].tensor->numel, t[found[i]].dtype);
  free(found);
  return st;
}
