// Argument checks shared by the op files (internal to autograd/).
#ifndef CT_AUTOGRAD_OP_UTIL_H
#define CT_AUTOGRAD_OP_UTIL_H

#include "autograd/tape.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/tensor.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

// Each returns false after recording an error that names the op.
bool ct_check_f32(const char *op, const ct_tensor *t, const char *what);
bool ct_check_i32(const char *op, const ct_tensor *t, const char *what);
// A mask read as "nonzero or not": f32 or i32 (not bf16 storage).
bool ct_check_mask_dtype(const char *op, const ct_tensor *t, const char *what);
bool ct_check_same_shape(const char *op, const ct_tensor *a,
                         const ct_tensor *b);
bool ct_check_min_dims(const char *op, const ct_tensor *t, int ndim,
                       const char *what);
// Resolves a possibly negative dim against ndim; -1 with an error if out of
// range.
int ct_resolve_dim(const char *op, int dim, int ndim);

// A tensor's shape as "[2, 3]" in a static per-thread buffer (two slots, so
// one message can show two shapes).
const char *ct_shape_of(const ct_tensor *t);

// Rows and row length of a tensor seen as (rows, last dim).
static inline int64_t ct_last_dim(const ct_tensor *t) {
  return t->ndim ? t->shape[t->ndim - 1] : 1;
}
static inline int64_t ct_rows(const ct_tensor *t) {
  int64_t c = ct_last_dim(t);
  return c ? t->numel / c : 0;
}

// out[c] += sign * (sum over r of x[r * cols + c]) for c < cols: the
// gradient of a row broadcast (a bias). Each column is summed in row order
// in float, whatever the thread count; threads take blocks of columns and
// walk the rows contiguously.
void ct_add_column_sums(float *out, const float *x, int64_t rows, int64_t cols,
                        float sign);

// The exact GELU over n floats on all threads (core/vmath.h, in fixed
// blocks): y = gelu(x) when gx is NULL, else gx = g gelu'(x), or += when
// accumulate (g may equal gx).
void ct_gelu_erf_blocks(const float *x, float *y, const float *g, float *gx,
                        int64_t n, bool accumulate);

// 1.0f when on, else 0.0f, built from bits: the compiler turns a ?: of the
// two constants, once multiplied into a gradient, back into a branch that
// mispredicts on random signs and keeps the loop scalar.
static inline float step01(bool on) {
  uint32_t bits = 0x3f800000u & (0u - (uint32_t)on);
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

// v when keep, else +0.0f, by masking v's bits (a branch-free ?:, see
// step01).
static inline float keep_or_zero(bool keep, float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  bits &= 0u - (uint32_t)keep;
  memcpy(&v, &bits, sizeof v);
  return v;
}

// Records a node with inputs given inline: CT_RECORD("relu", bw, y, NULL, x).
#define CT_RECORD(op, bw, out, saved, ...)                               \
  ct_tape_record(                                                        \
      (op), (bw), (out),                                                 \
      (int)(sizeof((ct_tensor *[]){__VA_ARGS__}) / sizeof(ct_tensor *)), \
      (ct_tensor *[]){__VA_ARGS__}, (saved))

#endif
