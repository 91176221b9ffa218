// Group normalization (Wu & He 2018; PyTorch's nn.GroupNorm), forward and
// backward side by side. Deformable DETR normalizes its input projections
// with it (GroupNorm(32, d_model)).
//
// x (N, C, ...) with G groups of C/G channels: for image n and group g, the
// mean and biased variance over its C/G channels and every spatial position,
//   y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c].
// Statistics in double. Work is split by (n, g) in the forward and the input
// gradient, and by channel for the weight and bias gradients (each sums its
// images in order), so the bits do not depend on the thread count.
#include <math.h>

#include "autograd/op_util.h"
#include "autograd/ops_conv.h"
#include "autograd/tape.h"
#include "core/arena.h"

// Below this much work the loops stay on one thread.
enum { PAR_MIN_WORK = 1 << 15 };

typedef struct group_norm_saved {
  int64_t groups;
  double *mean, *rstd;  // (N, G)
} group_norm_saved;

// The sizes of x (N, C, rest...): N, C and the positions per channel.
static void sizes(const ct_tensor *x, int64_t *N, int64_t *C, int64_t *S) {
  *N = x->shape[0];
  *C = x->shape[1];
  *S = 1;
  for (int i = 2; i < x->ndim; i++) *S *= x->shape[i];
}

static void group_norm_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
  const group_norm_saved *s = node->saved;
  int64_t N, C, S;
  sizes(x, &N, &C, &S);
  const int64_t G = s->groups, Cg = C / G, count = Cg * S;
  const float *xd = ct_f32(x), *dy = node->out->grad;
  const float *wd = w ? ct_f32(w) : NULL;
  if (x->requires_grad) {
    float *dx = x->grad;
#pragma omp parallel for schedule(static) if (N * C * S >= PAR_MIN_WORK)
    for (int64_t ng = 0; ng < N * G; ng++) {
      const int64_t n = ng / G, g = ng % G;
      const double mean = s->mean[ng], rstd = s->rstd[ng];
      double sum_d = 0, sum_dx = 0;  // sums of dxhat and dxhat * xhat
      for (int64_t c = g * Cg; c < (g + 1) * Cg; c++) {
        const double wc = wd ? wd[c] : 1.0;
        const float *xr = xd + (n * C + c) * S, *dr = dy + (n * C + c) * S;
        for (int64_t i = 0; i < S; i++) {
          const double dh = dr[i] * wc;
          sum_d += dh;
          sum_dx += dh * (xr[i] - mean) * rstd;
        }
      }
      const double md = sum_d / (double)count, mdx = sum_dx / (double)count;
      for (int64_t c = g * Cg; c < (g + 1) * Cg; c++) {
        const double wc = wd ? wd[c] : 1.0;
        const float *xr = xd + (n * C + c) * S, *dr = dy + (n * C + c) * S;
        float *gr = dx + (n * C + c) * S;
        for (int64_t i = 0; i < S; i++) {
          const double xh = (xr[i] - mean) * rstd;
          gr[i] += (float)(rstd * (dr[i] * wc - md - xh * mdx));
        }
      }
    }
  }
  const bool dw = w && w->requires_grad, db = b && b->requires_grad;
  if (!dw && !db) return;
#pragma omp parallel for schedule(static) if (N * C * S >= PAR_MIN_WORK)
  for (int64_t c = 0; c < C; c++) {
    const int64_t g = c / Cg;
    double sw = 0, sb = 0;
    for (int64_t n = 0; n < N; n++) {
      const double mean = s->mean[n * G + g], rstd = s->rstd[n * G + g];
      const float *xr = xd + (n * C + c) * S, *dr = dy + (n * C + c) * S;
      for (int64_t i = 0; i < S; i++) {
        sw += dr[i] * (xr[i] - mean) * rstd;
        sb += dr[i];
      }
    }
    if (dw) w->grad[c] += (float)sw;
    if (db) b->grad[c] += (float)sb;
  }
}

static bool check_param(const ct_tensor *p, int64_t C, const char *what) {
  if (!ct_check_f32("group_norm", p, what)) return false;
  if (p->ndim == 1 && p->shape[0] == C) return true;
  ct_error(CT_ERR_SHAPE, "group_norm: %s must be (%lld), got %lld dims", what,
           (long long)C, (long long)p->ndim);
  return false;
}

ct_tensor *ct_group_norm(ct_tensor *x, int64_t groups, ct_tensor *weight,
                         ct_tensor *bias, float eps) {
  if (!x) return NULL;
  if (!ct_check_f32("group_norm", x, "input") ||
      !ct_check_min_dims("group_norm", x, 2, "input"))
    return NULL;
  int64_t N, C, S;
  sizes(x, &N, &C, &S);
  if (groups < 1 || C % groups) {
    ct_error(CT_ERR_ARG,
             "group_norm: %lld groups must divide the %lld channels",
             (long long)groups, (long long)C);
    return NULL;
  }
  if (weight && !check_param(weight, C, "weight")) return NULL;
  if (bias && !check_param(bias, C, "bias")) return NULL;
  if (!(eps >= 0.0f) || isinf(eps)) {
    ct_error(CT_ERR_ARG, "group_norm: eps must be finite and >= 0, got %g",
             (double)eps);
    return NULL;
  }
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  double *stats = ct_arena_alloc((size_t)(2 * N * groups) * sizeof(double));
  if (!y || !stats) return NULL;
  const int64_t G = groups, Cg = C / G, count = Cg * S;
  const float *xd = ct_f32(x), *wd = weight ? ct_f32(weight) : NULL,
              *bd = bias ? ct_f32(bias) : NULL;
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (N * C * S >= PAR_MIN_WORK)
  for (int64_t ng = 0; ng < N * G; ng++) {
    const int64_t n = ng / G, g = ng % G;
    const float *xg = xd + (n * C + g * Cg) * S;
    double sum = 0;
    for (int64_t i = 0; i < count; i++) sum += xg[i];
    const double mean = sum / (double)count;
    double var = 0;
    for (int64_t i = 0; i < count; i++) var += (xg[i] - mean) * (xg[i] - mean);
    const double rstd = 1.0 / sqrt(var / (double)count + eps);
    stats[ng] = mean;
    stats[N * G + ng] = rstd;
    for (int64_t c = g * Cg; c < (g + 1) * Cg; c++) {
      const double wc = wd ? wd[c] : 1.0, bc = bd ? bd[c] : 0.0;
      const float *xr = xd + (n * C + c) * S;
      float *yr = yd + (n * C + c) * S;
      for (int64_t i = 0; i < S; i++)
        yr[i] = (float)((xr[i] - mean) * rstd * wc + bc);
    }
  }
  ct_tensor *in[3] = {x, weight, bias};
  group_norm_saved *saved = NULL;
  if (ct_tape_wants(3, in)) {
    saved = ct_arena_alloc(sizeof *saved);
    if (!saved) return NULL;
    *saved = (group_norm_saved){G, stats, stats + N * G};
  }
  if (ct_tape_record("group_norm", group_norm_backward, y, 3, in, saved) !=
      CT_OK)
    return NULL;
  return y;
}
