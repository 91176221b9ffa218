// Window ops for Swin (autograd/ops_window.h): roll, partition, reverse and
// patch merging as one row permutation each, the bias table gather, and the
// shifted-window mask. Forward and backward sit side by side.
//
// A row permutation keeps src (rows): output row r is input row src[r], a
// bijection. The forward copies, the backward writes gx[src[r]] from gy[r]
// (assigning when the gradient buffer is fresh): every input row is written
// by one output row, so threads split rows freely.
#include "autograd/ops_window.h"

#include "autograd/op_util.h"
#include "autograd/ops.h"

#include <string.h>

// Below this many floats a permutation runs on the calling thread.
enum { PAR_MIN_FLOATS = 1 << 15 };

typedef struct perm_saved {
  const int64_t *src;  // (rows)
  int64_t rows, D;
} perm_saved;

static void permute_rows_backward(ct_node *node) {
  const perm_saved *s = node->saved;
  ct_tensor *x = node->in[0];
  float *gx = x->grad;
  const float *gy = node->out->grad;
  const int64_t D = s->D;
  const bool assign = node->fresh & 1u;
#pragma omp parallel for schedule(static) if (s->rows * D > PAR_MIN_FLOATS)
  for (int64_t r = 0; r < s->rows; r++) {
    float *restrict dst = gx + s->src[r] * D;
    const float *restrict g = gy + r * D;
    if (assign) {
      memcpy(dst, g, (size_t)D * sizeof(float));
    } else {
      for (int64_t c = 0; c < D; c++) dst[c] += g[c];
    }
  }
}

// y (shape) with row r (D floats) = row src[r] of x; src is a bijection on
// x->numel / D rows, in arena memory that lives as long as the step.
static ct_tensor *permute_rows(const char *op, ct_tensor *x, int ndim,
                               const int64_t *shape, int64_t D,
                               const int64_t *src) {
  ct_tensor *y = ct_tensor_empty(CT_F32, ndim, shape);
  if (!y) return NULL;
  const int64_t rows = D ? x->numel / D : 0;
  const float *xd = ct_f32(x);
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (x->numel > PAR_MIN_FLOATS)
  for (int64_t r = 0; r < rows; r++)
    memcpy(yd + r * D, xd + src[r] * D, (size_t)D * sizeof(float));
  perm_saved *s = NULL;
  if (ct_tape_wants(1, &x)) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    *s = (perm_saved){.src = src, .rows = rows, .D = D};
  }
  if (CT_RECORD(op, permute_rows_backward, y, s, x) != CT_OK) return NULL;
  ct_node_set_flags(y, CT_NODE_FRESH_INPUT(0));
  return y;
}

// x must be an f32 (B,H,W,C) map.
static bool check_map(const char *op, const ct_tensor *x) {
  if (!ct_check_f32(op, x, "x")) return false;
  if (x->ndim == 4) return true;
  ct_error(CT_ERR_SHAPE, "%s: x %s must be a (B, H, W, C) map", op,
           ct_shape_of(x));
  return false;
}

static int64_t wrap(int64_t i, int64_t n) {
  int64_t r = i % n;
  return r < 0 ? r + n : r;
}

static int64_t *alloc_index(int64_t n) {
  return ct_arena_alloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
}

// ---- roll ---------------------------------------------------------------------

ct_tensor *ct_roll2d(ct_tensor *x, int64_t shift_y, int64_t shift_x) {
  const char *op = "roll2d";
  if (!x) return NULL;
  if (!check_map(op, x)) return NULL;
  const int64_t B = x->shape[0], H = x->shape[1], W = x->shape[2],
                C = x->shape[3];
  int64_t *src = alloc_index(B * H * W);
  if (!src) return NULL;
  // out[b, i, j] = x[b, i - sy, j - sx] (mod H, W)
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < H; i++)
      for (int64_t j = 0; j < W; j++)
        src[(b * H + i) * W + j] =
            (b * H + wrap(i - shift_y, H)) * W + wrap(j - shift_x, W);
  return permute_rows(op, x, x->ndim, x->shape, C, src);
}

// ---- window partition and reverse ----------------------------------------------

// ws and shift against the map: false with an error naming op.
static bool check_windows(const char *op, int64_t H, int64_t W, int64_t ws,
                          int64_t shift) {
  if (ws >= 1 && H % ws == 0 && W % ws == 0 && shift >= 0 && shift < ws)
    return true;
  ct_error(CT_ERR_SHAPE,
           "%s: map %lldx%lld, window %lld, shift %lld: need a window >= 1 "
           "dividing both sides and 0 <= shift < window",
           op, (long long)H, (long long)W, (long long)ws, (long long)shift);
  return false;
}

// Windows as wide as the map, unshifted, are its rows in order: the
// partition and its reverse are views.
static bool windows_are_rows(int64_t W, int64_t ws, int64_t shift) {
  return shift == 0 && W == ws;
}

// The partition's src for a (B,H,W,·) map (checked by check_windows):
// window row r of the output -> map row.
static int64_t *partition_index(int64_t B, int64_t H, int64_t W, int64_t ws,
                                int64_t shift) {
  const int64_t nWh = H / ws, nWw = W / ws;
  int64_t *src = alloc_index(B * H * W);
  if (!src) return NULL;
  int64_t r = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t wy = 0; wy < nWh; wy++)
      for (int64_t wx = 0; wx < nWw; wx++)
        for (int64_t py = 0; py < ws; py++)
          for (int64_t px = 0; px < ws; px++) {
            // The rolled map's (y, x) is the map's (y + shift, x + shift).
            int64_t y = wrap(wy * ws + py + shift, H);
            int64_t xx = wrap(wx * ws + px + shift, W);
            src[r++] = (b * H + y) * W + xx;
          }
  return src;
}

ct_tensor *ct_window_partition(ct_tensor *x, int64_t ws, int64_t shift) {
  const char *op = "window_partition";
  if (!x) return NULL;
  if (!check_map(op, x)) return NULL;
  const int64_t B = x->shape[0], H = x->shape[1], W = x->shape[2],
                C = x->shape[3];
  if (!check_windows(op, H, W, ws, shift)) return NULL;
  const int64_t nW = (H / ws) * (W / ws);
  if (windows_are_rows(W, ws, shift))
    return ct_reshape(x, CT_SHAPE(B * nW, ws * ws, C));
  int64_t *src = partition_index(B, H, W, ws, shift);
  if (!src) return NULL;
  return permute_rows(op, x, CT_SHAPE(B * nW, ws * ws, C), C, src);
}

ct_tensor *ct_window_reverse(ct_tensor *x, int64_t ws, int64_t H, int64_t W,
                             int64_t shift) {
  const char *op = "window_reverse";
  if (!x) return NULL;
  if (!ct_check_f32(op, x, "x")) return NULL;
  const int64_t N = ws * ws, nW = ws >= 1 ? (H / ws) * (W / ws) : 0;
  if (x->ndim != 3 || ws < 1 || H < 1 || W < 1 || x->shape[1] != N || nW < 1 ||
      x->shape[0] % nW) {
    ct_error(CT_ERR_SHAPE,
             "%s: x %s must be (B*nW, ws*ws, C) for window %lld of a "
             "%lldx%lld map",
             op, ct_shape_of(x), (long long)ws, (long long)H, (long long)W);
    return NULL;
  }
  const int64_t B = x->shape[0] / nW, C = x->shape[2];
  if (!check_windows(op, H, W, ws, shift)) return NULL;
  if (windows_are_rows(W, ws, shift))
    return ct_reshape(x, CT_SHAPE(B, H, W, C));
  int64_t *fwd = partition_index(B, H, W, ws, shift);
  int64_t *src = fwd ? alloc_index(B * H * W) : NULL;
  if (!src) return NULL;
  // The inverse bijection: map row fwd[r] comes from window row r.
  for (int64_t r = 0; r < B * H * W; r++) src[fwd[r]] = r;
  return permute_rows(op, x, CT_SHAPE(B, H, W, C), C, src);
}

// ---- patch merging ----------------------------------------------------------------

ct_tensor *ct_patch_merge(ct_tensor *x) {
  const char *op = "patch_merge";
  if (!x) return NULL;
  if (!check_map(op, x)) return NULL;
  const int64_t B = x->shape[0], H = x->shape[1], W = x->shape[2],
                C = x->shape[3];
  if (H % 2 || W % 2) {
    ct_error(CT_ERR_SHAPE, "%s: x %s needs an even height and width", op,
             ct_shape_of(x));
    return NULL;
  }
  const int64_t H2 = H / 2, W2 = W / 2;
  int64_t *src = alloc_index(B * H * W);
  if (!src) return NULL;
  // Output row (b, i, j, k) of C floats: neighbour k = (dy, dx) with dy =
  // k & 1, dx = k >> 1 (timm's x0, x1, x2, x3).
  int64_t r = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < H2; i++)
      for (int64_t j = 0; j < W2; j++)
        for (int64_t k = 0; k < 4; k++)
          src[r++] = (b * H + 2 * i + (k & 1)) * W + 2 * j + (k >> 1);
  return permute_rows(op, x, CT_SHAPE(B, H2, W2, 4 * C), C, src);
}

// ---- relative position bias ------------------------------------------------------

int64_t ct_relative_position_index(int64_t ws, int64_t i, int64_t j) {
  const int64_t dy = i / ws - j / ws, dx = i % ws - j % ws;
  return (dy + ws - 1) * (2 * ws - 1) + (dx + ws - 1);
}

typedef struct bias_saved {
  int64_t ws;
} bias_saved;

// dtable[idx(i, j), h] += dout[h, i, j], h then i then j: one fixed order.
static void relative_position_bias_backward(ct_node *node) {
  const bias_saved *s = node->saved;
  ct_tensor *table = node->in[0];
  const int64_t NH = table->shape[1], N = s->ws * s->ws;
  float *gt = table->grad;
  const float *gy = node->out->grad;
  for (int64_t h = 0; h < NH; h++)
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < N; j++)
        gt[ct_relative_position_index(s->ws, i, j) * NH + h] +=
            gy[(h * N + i) * N + j];
}

ct_tensor *ct_relative_position_bias(ct_tensor *table, int64_t ws) {
  const char *op = "relative_position_bias";
  if (!table) return NULL;
  if (!ct_check_f32(op, table, "table")) return NULL;
  const int64_t rows = (2 * ws - 1) * (2 * ws - 1);
  if (ws < 1 || table->ndim != 2 || table->shape[0] != rows ||
      table->shape[1] < 1) {
    ct_error(CT_ERR_SHAPE,
             "%s: table %s must be ((2ws-1)^2, NH) = (%lld, NH) for window "
             "%lld",
             op, ct_shape_of(table), (long long)(ws >= 1 ? rows : 0),
             (long long)ws);
    return NULL;
  }
  const int64_t NH = table->shape[1], N = ws * ws;
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(NH, N, N));
  if (!y) return NULL;
  const float *t = ct_f32(table);
  float *out = ct_f32(y);
  for (int64_t h = 0; h < NH; h++)
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < N; j++)
        out[(h * N + i) * N + j] =
            t[ct_relative_position_index(ws, i, j) * NH + h];
  bias_saved *s = NULL;
  if (ct_tape_wants(1, &table)) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    s->ws = ws;
  }
  if (CT_RECORD(op, relative_position_bias_backward, y, s, table) != CT_OK)
    return NULL;
  return y;
}

// ---- shifted-window mask -----------------------------------------------------------

// Region piece of coordinate c on an axis of length L: timm's slices
// (0, -ws), (-ws, -shift), (-shift, None).
static int region_piece(int64_t c, int64_t L, int64_t ws, int64_t shift) {
  return c < L - ws ? 0 : (c < L - shift ? 1 : 2);
}

ct_tensor *ct_swin_shift_mask(int64_t H, int64_t W, int64_t ws, int64_t shift) {
  const char *op = "swin_shift_mask";
  if (ws < 1 || H < 1 || W < 1 || H % ws || W % ws || shift < 1 ||
      shift >= ws) {
    ct_error(CT_ERR_SHAPE,
             "%s: map %lldx%lld, window %lld, shift %lld: need a window "
             "dividing both sides and 0 < shift < window",
             op, (long long)H, (long long)W, (long long)ws, (long long)shift);
    return NULL;
  }
  const int64_t nWh = H / ws, nWw = W / ws, N = ws * ws;
  ct_tensor *m = ct_tensor_empty(CT_F32, CT_SHAPE(nWh * nWw, N, N));
  int *label = ct_arena_alloc((size_t)N * sizeof(int));
  if (!m || !label) return NULL;
  float *md = ct_f32(m);
  for (int64_t wy = 0; wy < nWh; wy++)
    for (int64_t wx = 0; wx < nWw; wx++) {
      for (int64_t t = 0; t < N; t++)
        label[t] = 3 * region_piece(wy * ws + t / ws, H, ws, shift) +
                   region_piece(wx * ws + t % ws, W, ws, shift);
      float *w = md + (wy * nWw + wx) * N * N;
      for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
          w[i * N + j] = label[i] == label[j] ? 0.0f : -100.0f;
    }
  return m;
}
