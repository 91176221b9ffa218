// Box ops for detection (see box.h): cxcywh <-> xyxy, the generalized IoU of
// matched pairs with its backward, the pairwise GIoU matrix, and the row
// gather. Forward and backward of each op sit side by side.
//
// Every output element depends on one box (or one pair of boxes), so the
// kernels split work by output and no result depends on the thread count.
// GIoU is computed in double and rounded once.
#include "autograd/ops_box.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"

#include <math.h>

// Below this many boxes a kernel runs on the calling thread (DETR has ~100
// queries per image: the parallel region would cost more than the work).
enum { PAR_MIN_BOXES = 1 << 13 };

// x (..., 4) with at least one dim and a last dim of 4.
static bool check_boxes(const char *op, const ct_tensor *x, const char *what) {
  if (!ct_check_f32(op, x, what) || !ct_check_min_dims(op, x, 1, what))
    return false;
  if (ct_last_dim(x) == 4) return true;
  ct_error(CT_ERR_SHAPE, "%s: %s %s must have a last dim of 4 (a box)", op,
           what, ct_shape_of(x));
  return false;
}

// ---- cxcywh <-> xyxy ----------------------------------------------------------
// x (..., 4) -> y (..., 4). Both conversions are linear and each output
// coordinate mixes two inputs: y[k] = c0 x[i0] + c1 x[i1]. The backward is
// the transpose: dx[i0] += c0 dy[k], dx[i1] += c1 dy[k].

typedef struct box_term {
  int i0, i1;
  float c0, c1;
} box_term;

// (cx - w/2, cy - h/2, cx + w/2, cy + h/2)
static const box_term to_xyxy[4] = {
    {0, 2, 1.0f, -0.5f},
    {1, 3, 1.0f, -0.5f},
    {0, 2, 1.0f, 0.5f},
    {1, 3, 1.0f, 0.5f},
};
// ((x0 + x1)/2, (y0 + y1)/2, x1 - x0, y1 - y0)
static const box_term to_cxcywh[4] = {
    {0, 2, 0.5f, 0.5f},
    {1, 3, 0.5f, 0.5f},
    {2, 0, 1.0f, -1.0f},
    {3, 1, 1.0f, -1.0f},
};

static void convert_backward(ct_node *node, const box_term *m) {
  ct_tensor *x = node->in[0];
  const float *gy = node->out->grad;
  float *gx = x->grad;
  const int64_t n = x->numel / 4;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN_BOXES)
  for (int64_t b = 0; b < n; b++) {
    float *g = gx + 4 * b;
    const float *d = gy + 4 * b;
    for (int k = 0; k < 4; k++) {
      g[m[k].i0] += m[k].c0 * d[k];
      g[m[k].i1] += m[k].c1 * d[k];
    }
  }
}

static void to_xyxy_backward(ct_node *node) { convert_backward(node, to_xyxy); }
static void to_cxcywh_backward(ct_node *node) {
  convert_backward(node, to_cxcywh);
}

static ct_tensor *convert(const char *op, ct_tensor *x, const box_term *m,
                          ct_backward_fn backward) {
  if (!x) return NULL;
  if (!check_boxes(op, x, "x")) return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  if (!y) return NULL;
  const float *xd = ct_f32(x);
  float *yd = ct_f32(y);
  const int64_t n = x->numel / 4;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN_BOXES)
  for (int64_t b = 0; b < n; b++)
    for (int k = 0; k < 4; k++)
      yd[4 * b + k] =
          m[k].c0 * xd[4 * b + m[k].i0] + m[k].c1 * xd[4 * b + m[k].i1];
  if (CT_RECORD(op, backward, y, NULL, x) != CT_OK) return NULL;
  return y;
}

ct_tensor *ct_box_cxcywh_to_xyxy(ct_tensor *x) {
  return convert("box_cxcywh_to_xyxy", x, to_xyxy, to_xyxy_backward);
}

ct_tensor *ct_box_xyxy_to_cxcywh(ct_tensor *x) {
  return convert("box_xyxy_to_cxcywh", x, to_cxcywh, to_cxcywh_backward);
}

// ---- generalized IoU ------------------------------------------------------------
// For boxes a, b in xyxy (Rezatofighi et al. 2019, as DETR's box_ops):
//   iw = max(0, min(ax1, bx1) - max(ax0, bx0)), ih likewise, I = iw ih
//   A = (ax1 - ax0)(ay1 - ay0), B likewise, U = A + B - I
//   cw = max(ax1, bx1) - min(ax0, bx0), ch likewise, C = cw ch
//   GIoU = I / U' - (C - U) / C' = I / U' - 1 + U' / C'
// with U' = U + eps, C' = C + eps (box.h). Its partial derivatives, holding
// the others fixed:
//   dG/dU = -I / U'^2 + 1 / C'       (then dU/dA = dU/dB = 1, dU/dI = -1)
//   dG/dI = 1 / U' - dG/dU           (the direct term plus through U)
//   dG/dC = -U' / C'^2
// and dI/diw = ih, dI/dih = iw, dC/dcw = ch, dC/dch = cw, with the clamps at 0
// passing the gradient at equality, as torch.clamp does.

typedef struct giou_terms {
  double iw_raw, ih_raw, iw, ih;  // intersection sides before / after clamping
  double cw, ch;                  // enclosing box sides
  double inter, uni, encl, giou;
} giou_terms;

static giou_terms giou_compute(const float *a, const float *b) {
  giou_terms t;
  t.iw_raw = fmin(a[2], b[2]) - fmax(a[0], b[0]);
  t.ih_raw = fmin(a[3], b[3]) - fmax(a[1], b[1]);
  t.iw = fmax(t.iw_raw, 0.0);
  t.ih = fmax(t.ih_raw, 0.0);
  t.cw = fmax(fmax(a[2], b[2]) - fmin(a[0], b[0]), 0.0);
  t.ch = fmax(fmax(a[3], b[3]) - fmin(a[1], b[1]), 0.0);
  double area_a = ((double)a[2] - a[0]) * ((double)a[3] - a[1]);
  double area_b = ((double)b[2] - b[0]) * ((double)b[3] - b[1]);
  t.inter = t.iw * t.ih;
  t.uni = area_a + area_b - t.inter;
  t.encl = t.cw * t.ch;
  double u = t.uni + CT_BOX_GIOU_EPS, c = t.encl + CT_BOX_GIOU_EPS;
  t.giou = t.inter / u - (t.encl - t.uni) / c;
  return t;
}

double ct_box_giou(const float a[4], const float b[4]) {
  return giou_compute(a, b).giou;
}

// Adds g to the derivative of whichever of va, vb is the max (take_max) or
// the min; half to each when they are equal.
static inline void split_extreme(double g, double va, double vb, bool take_max,
                                 double *da, double *db) {
  if (va == vb) {
    *da += 0.5 * g;
    *db += 0.5 * g;
  } else if ((va > vb) == take_max) {
    *da += g;
  } else {
    *db += g;
  }
}

// The gradient of GIoU(a, b), scaled by g, added to da[4] and db[4].
static void giou_backward_pair(const float *a, const float *b, double g,
                               double *da, double *db) {
  giou_terms t = giou_compute(a, b);
  double u = t.uni + CT_BOX_GIOU_EPS, c = t.encl + CT_BOX_GIOU_EPS;
  double g_u = g * (-t.inter / (u * u) + 1.0 / c);
  double g_i = g / u - g_u;
  double g_c = -g * u / (c * c);
  // Areas: A = (ax1 - ax0)(ay1 - ay0), B likewise, both with dG/dA = g_u.
  double aw = (double)a[2] - a[0], ah = (double)a[3] - a[1];
  double bw = (double)b[2] - b[0], bh = (double)b[3] - b[1];
  da[0] -= g_u * ah;
  da[2] += g_u * ah;
  da[1] -= g_u * aw;
  da[3] += g_u * aw;
  db[0] -= g_u * bh;
  db[2] += g_u * bh;
  db[1] -= g_u * bw;
  db[3] += g_u * bw;
  // Intersection sides: iw = min(ax1, bx1) - max(ax0, bx0), ih likewise.
  double g_iw = t.iw_raw >= 0.0 ? g_i * t.ih : 0.0;
  double g_ih = t.ih_raw >= 0.0 ? g_i * t.iw : 0.0;
  split_extreme(g_iw, a[2], b[2], false, &da[2], &db[2]);
  split_extreme(-g_iw, a[0], b[0], true, &da[0], &db[0]);
  split_extreme(g_ih, a[3], b[3], false, &da[3], &db[3]);
  split_extreme(-g_ih, a[1], b[1], true, &da[1], &db[1]);
  // Enclosing sides: cw = max(ax1, bx1) - min(ax0, bx0), ch likewise.
  double g_cw = g_c * t.ch, g_ch = g_c * t.cw;
  split_extreme(g_cw, a[2], b[2], true, &da[2], &db[2]);
  split_extreme(-g_cw, a[0], b[0], false, &da[0], &db[0]);
  split_extreme(g_ch, a[3], b[3], true, &da[3], &db[3]);
  split_extreme(-g_ch, a[1], b[1], false, &da[1], &db[1]);
}

// a (N, 4) xyxy with x0 <= x1 and y0 <= y1 in every row.
static bool check_xyxy(const char *op, const ct_tensor *x, const char *what) {
  if (!check_boxes(op, x, what)) return false;
  if (x->ndim != 2) {
    ct_error(CT_ERR_SHAPE, "%s: %s must be (N, 4), got %s", op, what,
             ct_shape_of(x));
    return false;
  }
  const float *d = ct_f32(x);
  for (int64_t n = 0; n < x->shape[0]; n++) {
    const float *r = d + 4 * n;
    if (r[2] < r[0] || r[3] < r[1]) {
      ct_error(CT_ERR_ARG,
               "%s: box %lld of %s is (%g, %g, %g, %g): xyxy boxes need "
               "x0 <= x1 and y0 <= y1 (converted from cxcywh with a negative "
               "width or height?)",
               op, (long long)n, what, (double)r[0], (double)r[1], (double)r[2],
               (double)r[3]);
      return false;
    }
  }
  return true;
}

static void giou_pairs_backward(ct_node *node) {
  ct_tensor *a = node->in[0], *b = node->in[1];
  const float *gy = node->out->grad, *ad = ct_f32(a), *bd = ct_f32(b);
  float *ga = a->requires_grad ? a->grad : NULL;
  float *gb = b->requires_grad ? b->grad : NULL;
  const int64_t n = a->shape[0];
#pragma omp parallel for schedule(static) if (n >= PAR_MIN_BOXES)
  for (int64_t i = 0; i < n; i++) {
    double da[4] = {0}, db[4] = {0};
    giou_backward_pair(ad + 4 * i, bd + 4 * i, gy[i], da, db);
    for (int k = 0; k < 4; k++) {
      if (ga) ga[4 * i + k] += (float)da[k];
      if (gb) gb[4 * i + k] += (float)db[k];
    }
  }
}

ct_tensor *ct_generalized_box_iou_pairs(ct_tensor *a, ct_tensor *b) {
  const char *op = "generalized_box_iou_pairs";
  if (!a || !b) return NULL;
  if (!check_xyxy(op, a, "a") || !check_xyxy(op, b, "b")) return NULL;
  if (a->shape[0] != b->shape[0]) {
    ct_error(CT_ERR_SHAPE,
             "%s: a %s and b %s must hold the same number of "
             "boxes (matched pairs)",
             op, ct_shape_of(a), ct_shape_of(b));
    return NULL;
  }
  const int64_t n = a->shape[0];
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(n));
  if (!y) return NULL;
  const float *ad = ct_f32(a), *bd = ct_f32(b);
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (n >= PAR_MIN_BOXES)
  for (int64_t i = 0; i < n; i++)
    yd[i] = (float)ct_box_giou(ad + 4 * i, bd + 4 * i);
  if (CT_RECORD(op, giou_pairs_backward, y, NULL, a, b) != CT_OK) return NULL;
  return y;
}

ct_tensor *ct_generalized_box_iou(ct_tensor *a, ct_tensor *b) {
  const char *op = "generalized_box_iou";
  if (!a || !b) return NULL;
  if (!check_xyxy(op, a, "a") || !check_xyxy(op, b, "b")) return NULL;
  const int64_t n = a->shape[0], m = b->shape[0];
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(n, m));
  if (!y) return NULL;
  const float *ad = ct_f32(a), *bd = ct_f32(b);
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (n * m >= PAR_MIN_BOXES)
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++)
      yd[i * m + j] = (float)ct_box_giou(ad + 4 * i, bd + 4 * j);
  return y;
}

// ---- row gather -------------------------------------------------------------------
// A row lookup is ct_embedding's forward and backward exactly (a copy per
// row; the backward scatter-adds in index order, deterministic for repeated
// indices), so this checks the shapes under its own name and hands over.

ct_tensor *ct_gather_rows(ct_tensor *x, ct_tensor *idx) {
  const char *op = "gather_rows";
  if (!x || !idx) return NULL;
  if (!ct_check_f32(op, x, "x") || !ct_check_i32(op, idx, "idx")) return NULL;
  if (x->ndim != 2 || idx->ndim != 1) {
    ct_error(CT_ERR_SHAPE,
             "%s: needs x (N, D) and idx (M), got x %s and idx "
             "%s",
             op, ct_shape_of(x), ct_shape_of(idx));
    return NULL;
  }
  const int32_t *id = ct_i32(idx);
  for (int64_t m = 0; m < idx->numel; m++) {
    if (id[m] < 0 || id[m] >= x->shape[0]) {
      ct_error(CT_ERR_INDEX,
               "%s: idx[%lld] = %d is outside the %lld rows of "
               "x %s",
               op, (long long)m, (int)id[m], (long long)x->shape[0],
               ct_shape_of(x));
      return NULL;
    }
  }
  return ct_embedding(x, idx, -1);
}
