// Multi-scale deformable attention (see ops_deform_attn.h): the bilinear
// neighbours of a sampling point, the forward split by queries and the
// backward split by (image, head) pairs, side by side.
#include "autograd/ops_deform_attn.h"

#include <math.h>
#include <string.h>

#include "autograd/op_util.h"
#include "core/arena.h"
#include "core/flops.h"
#include "core/target_clones.h"

// Helpers inlined into the per-ISA clones (a call would run the baseline
// code).
#define DA_INLINE static inline __attribute__((always_inline))

// Below this many multiply-adds a call runs on the calling thread.
enum { PAR_MIN = 1 << 14 };

typedef struct deform_saved {
  int64_t N, S, M, D, Lq, L, P;
  const int64_t *hw;     // (L, 2): H_l, W_l
  const int64_t *start;  // (L): the level's first value row
} deform_saved;

// The four bilinear neighbours of a point, in grid_sample's order: (y0, x0),
// (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1). off[c] is the neighbour's
// row within its level, or -1 outside the map: zero padding, so it adds
// nothing and gets no gradient whatever its bilinear weight.
typedef struct corners {
  int64_t off[4];
  float cw[4];   // bilinear weights
  float fx, fy;  // fractional parts of the pixel coordinates
  bool nan;      // the point is NaN
} corners;

// Point (lx, ly) in [0, 1] coordinates on an H x W map, align_corners=False:
// x = lx * W - 0.5, y = ly * H - 0.5.
DA_INLINE corners point_corners(float lx, float ly, int64_t H, int64_t W) {
  corners c = {.off = {-1, -1, -1, -1}};
  const float x = lx * (float)W - 0.5f, y = ly * (float)H - 0.5f;
  if (isnan(x) || isnan(y)) {
    c.nan = true;
    return c;
  }
  // No neighbour inside: also keeps huge coordinates away from the integer
  // conversion below.
  if (!(x >= -1.0f && x < (float)W && y >= -1.0f && y < (float)H)) return c;
  const float x0f = floorf(x), y0f = floorf(y);
  const int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f;
  c.fx = x - x0f;
  c.fy = y - y0f;
  c.cw[0] = (1.0f - c.fx) * (1.0f - c.fy);
  c.cw[1] = c.fx * (1.0f - c.fy);
  c.cw[2] = (1.0f - c.fx) * c.fy;
  c.cw[3] = c.fx * c.fy;
  for (int k = 0; k < 4; k++) {
    const int64_t yy = y0 + (k >> 1), xx = x0 + (k & 1);
    if (yy >= 0 && yy < H && xx >= 0 && xx < W) c.off[k] = yy * W + xx;
  }
  return c;
}

// The value rows of the four neighbours (zero for those outside): level
// base vl (value rows M*D floats apart), zero a row of D zeros.
DA_INLINE void corner_rows(const corners *c, const float *vl, int64_t MD,
                           const float *zero, const float *v[4]) {
  for (int k = 0; k < 4; k++)
    v[k] = c->off[k] >= 0 ? vl + c->off[k] * MD : zero;
}

// ---- forward -----------------------------------------------------------------

// Query row (n, q): out (M*D) for all heads. Compiled per ISA (the clones
// give the same bits: no contraction into FMA in ISO C).
CT_TARGET_CLONES static void query_forward(const deform_saved *s,
                                           const float *value, const float *loc,
                                           const float *wts, const float *zero,
                                           int64_t n, int64_t q,
                                           float *restrict out) {
  const int64_t M = s->M, D = s->D, L = s->L, P = s->P, MD = M * D;
  for (int64_t m = 0; m < M; m++) {
    float *restrict o = out + m * D;
    memset(o, 0, (size_t)D * sizeof(float));
    const int64_t pt0 = ((n * s->Lq + q) * M + m) * L * P;
    for (int64_t l = 0; l < L; l++) {
      const float *vl = value + (n * s->S + s->start[l]) * MD + m * D;
      for (int64_t p = 0; p < P; p++) {
        const int64_t pt = pt0 + l * P + p;
        const float w = wts[pt];
        corners c = point_corners(loc[2 * pt], loc[2 * pt + 1], s->hw[2 * l],
                                  s->hw[2 * l + 1]);
        if (c.nan) {
          for (int64_t d = 0; d < D; d++) o[d] = NAN;
          continue;
        }
        if (c.off[0] < 0 && c.off[1] < 0 && c.off[2] < 0 && c.off[3] < 0)
          continue;
        const float *v[4];
        corner_rows(&c, vl, MD, zero, v);
        // grid_sample's value at the point, then its weight.
        for (int64_t d = 0; d < D; d++) {
          const float sample = c.cw[0] * v[0][d] + c.cw[1] * v[1][d] +
                               c.cw[2] * v[2][d] + c.cw[3] * v[3][d];
          o[d] += w * sample;
        }
      }
    }
  }
}

// ---- backward ----------------------------------------------------------------

enum { LANES = 8 };

// g . v over D floats in LANES fixed lanes added in order: vectorizes, and
// no result depends on how the work is split.
DA_INLINE float dot_lanes(const float *restrict g, const float *restrict v,
                          int64_t D) {
  float acc[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= D; i += LANES)
    for (int j = 0; j < LANES; j++) acc[j] += g[i + j] * v[i + j];
  for (; i < D; i++) acc[i % LANES] += g[i] * v[i];
  float sum = 0.0f;
  for (int j = 0; j < LANES; j++) sum += acc[j];
  return sum;
}

typedef struct deform_grads {
  float *value, *loc, *wts;                // NULL when not wanted
  bool value_fresh, loc_fresh, wts_fresh;  // assign instead of add
} deform_grads;

// Head m of image n: every gradient it owns (see the header), in the order
// q, l, p, neighbour. Compiled per ISA, as query_forward.
CT_TARGET_CLONES static void head_backward(const deform_saved *s,
                                           const float *value, const float *loc,
                                           const float *wts, const float *gy,
                                           const deform_grads *gr, int64_t n,
                                           int64_t m) {
  const int64_t M = s->M, D = s->D, L = s->L, P = s->P, MD = M * D;
  if (gr->value && gr->value_fresh)
    for (int64_t r = 0; r < s->S; r++)
      memset(gr->value + (n * s->S + r) * MD + m * D, 0,
             (size_t)D * sizeof(float));
  for (int64_t q = 0; q < s->Lq; q++) {
    const float *g = gy + ((n * s->Lq + q) * M + m) * D;
    const int64_t pt0 = ((n * s->Lq + q) * M + m) * L * P;
    for (int64_t l = 0; l < L; l++) {
      const int64_t H = s->hw[2 * l], W = s->hw[2 * l + 1];
      const int64_t base = (n * s->S + s->start[l]) * MD + m * D;
      for (int64_t p = 0; p < P; p++) {
        const int64_t pt = pt0 + l * P + p;
        const float w = wts[pt];
        corners c = point_corners(loc[2 * pt], loc[2 * pt + 1], H, W);
        if (gr->loc || gr->wts) {
          float dot[4] = {0};  // g . neighbour row
          for (int k = 0; k < 4; k++)
            if (c.off[k] >= 0)
              dot[k] = dot_lanes(g, value + base + c.off[k] * MD, D);
          // d sample / d x and d y (grid_sample's), then the chain through
          // x = lx * W - 0.5 and y = ly * H - 0.5.
          const float dsx =
              (1.0f - c.fy) * (dot[1] - dot[0]) + c.fy * (dot[3] - dot[2]);
          const float dsy =
              (1.0f - c.fx) * (dot[2] - dot[0]) + c.fx * (dot[3] - dot[1]);
          const float dw = c.nan ? NAN
                                 : c.cw[0] * dot[0] + c.cw[1] * dot[1] +
                                       c.cw[2] * dot[2] + c.cw[3] * dot[3];
          const float dlx = c.nan ? NAN : w * dsx * (float)W;
          const float dly = c.nan ? NAN : w * dsy * (float)H;
          if (gr->wts) gr->wts[pt] = gr->wts_fresh ? dw : gr->wts[pt] + dw;
          if (gr->loc) {
            float *dl = gr->loc + 2 * pt;
            dl[0] = gr->loc_fresh ? dlx : dl[0] + dlx;
            dl[1] = gr->loc_fresh ? dly : dl[1] + dly;
          }
        }
        if (!gr->value) continue;
        for (int k = 0; k < 4; k++) {
          if (c.off[k] < 0) continue;
          float *restrict dv = gr->value + base + c.off[k] * MD;
          const float a = w * c.cw[k];
          for (int64_t d = 0; d < D; d++) dv[d] += a * g[d];
        }
      }
    }
  }
}

// in: value, locations, weights
static void deform_backward(ct_node *node) {
  const deform_saved *s = node->saved;
  ct_tensor *value = node->in[0], *loc = node->in[1], *wts = node->in[2];
  const deform_grads gr = {
      .value = value->requires_grad ? value->grad : NULL,
      .loc = loc->requires_grad ? loc->grad : NULL,
      .wts = wts->requires_grad ? wts->grad : NULL,
      .value_fresh = node->fresh & 1u,
      .loc_fresh = node->fresh & 2u,
      .wts_fresh = node->fresh & 4u,
  };
  const int64_t points = s->N * s->Lq * s->M * s->L * s->P;
  // Four dot products and four scaled adds of D floats per point.
  ct_flops_add(CT_GEMM_FP32, (uint64_t)(16 * points * s->D));
  const int64_t tasks = s->N * s->M;
#pragma omp parallel for schedule(static) if (points * s->D >= PAR_MIN)
  for (int64_t t = 0; t < tasks; t++)
    head_backward(s, ct_f32(value), ct_f32(loc), ct_f32(wts), node->out->grad,
                  &gr, t / s->M, t % s->M);
}

// ---- the op ------------------------------------------------------------------

// The levels against value's S: false with an error naming the op.
static bool check_levels(const char *op, const int64_t *shapes, int64_t levels,
                         int64_t S) {
  if (levels < 1 || !shapes) {
    ct_error(CT_ERR_ARG, "%s: need at least one level, got %lld", op,
             (long long)levels);
    return false;
  }
  int64_t total = 0;
  for (int64_t l = 0; l < levels; l++) {
    const int64_t H = shapes[2 * l], W = shapes[2 * l + 1];
    if (H < 1 || W < 1 || H > INT32_MAX || W > INT32_MAX) {
      ct_error(CT_ERR_ARG, "%s: level %lld has shape %lldx%lld: need >= 1", op,
               (long long)l, (long long)H, (long long)W);
      return false;
    }
    total += H * W;
  }
  if (total != S) {
    ct_error(CT_ERR_SHAPE,
             "%s: the %lld levels hold %lld value rows, value has S = %lld", op,
             (long long)levels, (long long)total, (long long)S);
    return false;
  }
  return true;
}

ct_tensor *ct_ms_deform_attn(ct_tensor *value, const int64_t *shapes,
                             int64_t levels, ct_tensor *locations,
                             ct_tensor *weights) {
  static const char *op = "ms_deform_attn";
  if (!value || !locations || !weights) return NULL;
  if (!ct_check_f32(op, value, "value") ||
      !ct_check_f32(op, locations, "locations") ||
      !ct_check_f32(op, weights, "weights"))
    return NULL;
  if (value->ndim != 4) {
    ct_error(CT_ERR_SHAPE, "%s: value %s must be (N, S, M, D)", op,
             ct_shape_of(value));
    return NULL;
  }
  const int64_t N = value->shape[0], S = value->shape[1], M = value->shape[2],
                D = value->shape[3];
  if (!check_levels(op, shapes, levels, S)) return NULL;
  const int64_t L = levels;
  // weights (N, Lq, M, L, P) or (N, Lq, M, L*P); locations (N, Lq, M, L*P, 2).
  const int64_t *ws = weights->shape;
  const bool w5 = weights->ndim == 5 && ws[3] == L,
             w4 = weights->ndim == 4 && ws[3] % L == 0;
  const int64_t Lq = weights->ndim >= 4 ? ws[1] : 0;
  const int64_t P = w5 ? ws[4] : w4 ? ws[3] / L : 0;
  const int64_t *ls = locations->shape;
  if (!(w5 || w4) || ws[0] != N || ws[2] != M || P < 1 ||
      locations->ndim != 5 || ls[0] != N || ls[1] != Lq || ls[2] != M ||
      ls[3] != L * P || ls[4] != 2) {
    char sw[96];  // ct_shape_of keeps two shapes at a time
    ct_error(CT_ERR_SHAPE,
             "%s: need value (N, S, M, D), locations (N, Lq, M, L*P, 2) and "
             "weights (N, Lq, M, L, P) with L = %lld levels; got value %s, "
             "locations %s, weights %s",
             op, (long long)L, ct_shape_of(value), ct_shape_of(locations),
             ct_shape_str(weights->ndim, weights->shape, sw, sizeof sw));
    return NULL;
  }
  deform_saved *s = ct_arena_alloc(sizeof *s);
  int64_t *hw = ct_arena_alloc((size_t)(3 * L) * sizeof(int64_t));
  float *zero = ct_arena_alloc((size_t)(D > 0 ? D : 1) * sizeof(float));
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(N, Lq, M * D));
  if (!s || !hw || !zero || !y) return NULL;
  memset(zero, 0, (size_t)(D > 0 ? D : 1) * sizeof(float));
  int64_t *start = hw + 2 * L;
  for (int64_t l = 0, row = 0; l < L; l++) {
    hw[2 * l] = shapes[2 * l];
    hw[2 * l + 1] = shapes[2 * l + 1];
    start[l] = row;
    row += shapes[2 * l] * shapes[2 * l + 1];
  }
  *s = (deform_saved){.N = N,
                      .S = S,
                      .M = M,
                      .D = D,
                      .Lq = Lq,
                      .L = L,
                      .P = P,
                      .hw = hw,
                      .start = start};
  const int64_t points = N * Lq * M * L * P;
  // Per point: the bilinear sample (4 multiply-adds) and its weighted add.
  ct_flops_add(CT_GEMM_FP32, (uint64_t)(10 * points * D));
  const float *v = ct_f32(value), *lc = ct_f32(locations),
              *wt = ct_f32(weights);
  float *out = ct_f32(y);
#pragma omp parallel for schedule(static) if (points * D >= PAR_MIN)
  for (int64_t r = 0; r < N * Lq; r++)
    query_forward(s, v, lc, wt, zero, r / Lq, r % Lq, out + r * M * D);
  if (CT_RECORD(op, deform_backward, y, s, value, locations, weights) != CT_OK)
    return NULL;
  ct_node_set_flags(y, CT_NODE_FRESH_INPUT(0) | CT_NODE_FRESH_INPUT(1) |
                           CT_NODE_FRESH_INPUT(2));
  return y;
}
