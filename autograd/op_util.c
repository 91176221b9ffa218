// Shared argument checks for the ops.
#include "autograd/op_util.h"
#include "core/vmath.h"
#include "core/target_clones.h"

const char *ct_shape_of(const ct_tensor *t) {
  static _Thread_local char bufs[2][96];
  static _Thread_local int next;
  char *b = bufs[next];
  next ^= 1;
  return ct_shape_str(t->ndim, t->shape, b, sizeof bufs[0]);
}

bool ct_check_f32(const char *op, const ct_tensor *t, const char *what) {
  if (t->dtype == CT_F32) return true;
  ct_error(CT_ERR_DTYPE, "%s: %s must be f32, got %s %s", op, what,
           ct_dtype_name(t->dtype), ct_shape_of(t));
  return false;
}

bool ct_check_mask_dtype(const char *op, const ct_tensor *t, const char *what) {
  if (t->dtype == CT_F32 || t->dtype == CT_I32) return true;
  ct_error(CT_ERR_DTYPE, "%s: %s must be f32 or i32, got %s %s", op, what,
           ct_dtype_name(t->dtype), ct_shape_of(t));
  return false;
}

bool ct_check_i32(const char *op, const ct_tensor *t, const char *what) {
  if (t->dtype == CT_I32) return true;
  ct_error(CT_ERR_DTYPE, "%s: %s must be i32, got %s %s", op, what,
           ct_dtype_name(t->dtype), ct_shape_of(t));
  return false;
}

bool ct_check_same_shape(const char *op, const ct_tensor *a,
                         const ct_tensor *b) {
  if (ct_tensor_same_shape(a, b)) return true;
  ct_error(CT_ERR_SHAPE, "%s: shapes %s and %s differ", op, ct_shape_of(a),
           ct_shape_of(b));
  return false;
}

bool ct_check_min_dims(const char *op, const ct_tensor *t, int ndim,
                       const char *what) {
  if (t->ndim >= ndim) return true;
  ct_error(CT_ERR_SHAPE, "%s: %s needs at least %d dims, got %s", op, what,
           ndim, ct_shape_of(t));
  return false;
}

int ct_resolve_dim(const char *op, int dim, int ndim) {
  int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim) {
    ct_error(CT_ERR_INDEX, "%s: dim %d out of range for %d dims", op, dim,
             ndim);
    return -1;
  }
  return d;
}

// Columns per block: 64 floats of running sums stay in registers while a
// block walks all rows.
enum { COLUMN_BLOCK = 64, COLUMN_SUMS_PAR_MIN = 1 << 15 };

// One block of columns [c0, c0 + COLUMN_BLOCK) (cut at cols). Compiled per
// ISA by target_clones (wider vectors across the block's columns; each
// column still sums its rows in order, so every build gives the same bits).
CT_TARGET_CLONES static void column_sums_block(float *out, const float *x,
                                               int64_t rows, int64_t cols,
                                               float sign, int64_t c0) {
  const int64_t w = cols - c0 < COLUMN_BLOCK ? cols - c0 : COLUMN_BLOCK;
  float acc[COLUMN_BLOCK] = {0};
  for (int64_t r = 0; r < rows; r++) {
    const float *row = x + r * cols + c0;
    for (int64_t c = 0; c < w; c++) acc[c] += row[c];
  }
  for (int64_t c = 0; c < w; c++) out[c0 + c] += sign * acc[c];
}

void ct_add_column_sums(float *out, const float *x, int64_t rows, int64_t cols,
                        float sign) {
  const int64_t blocks = (cols + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
#pragma omp parallel for schedule( \
    static) if (rows * cols >= COLUMN_SUMS_PAR_MIN && blocks > 1)
  for (int64_t blk = 0; blk < blocks; blk++)
    column_sums_block(out, x, rows, cols, sign, blk * COLUMN_BLOCK);
}

enum { GELU_BLOCK = 4096 };

void ct_gelu_erf_blocks(const float *x, float *y, const float *g, float *gx,
                        int64_t n, bool accumulate) {
  const int64_t blocks = (n + GELU_BLOCK - 1) / GELU_BLOCK;
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t lo = b * GELU_BLOCK;
    const int64_t len = n - lo < GELU_BLOCK ? n - lo : GELU_BLOCK;
    if (gx)
      ct_vmath_gelu_backward(x + lo, g + lo, gx + lo, len, accumulate);
    else
      ct_vmath_gelu(x + lo, y + lo, len);
  }
}
