// Softmax, log-softmax and layer norm over the last dim, forward and backward.
//
// Every op sees its input as rows: x (N, C) where C is the last dim and N the
// product of the others. Rows are independent, so each kernel runs rows in
// parallel and the result does not depend on the thread count. Per-row sums
// are accumulated in double. Layer norm's weight and bias gradients are sums
// over rows; they are split by columns, each column summing its rows in order,
// so they too are the same at any thread count.
//
// Not here: other normalizations (batch/group norm) and masked softmax (the
// fused attention kernel keeps its own online softmax).
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/arena.h"

#include <math.h>

// Below this many elements a kernel runs on the calling thread: starting a
// parallel region costs more than the work (and results do not depend on it).
enum { PAR_MIN_WORK = 1 << 15 };

// ---- softmax ----------------------------------------------------------------
// x (N, C) -> y (N, C), y = exp(x - max) / sum exp(x - max)

static void softmax_rows(const float *x, float *y, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    const float *xr = x + n * C;
    float *yr = y + n * C;
    float m = -INFINITY;
    for (int64_t c = 0; c < C; c++) m = fmaxf(m, xr[c]);
    double s = 0.0;
    for (int64_t c = 0; c < C; c++) {
      float e = expf(xr[c] - m);
      yr[c] = e;
      s += e;
    }
    float inv = (float)(1.0 / s);
    for (int64_t c = 0; c < C; c++) yr[c] *= inv;
  }
}

// dx = y * (dy - sum_c dy_c y_c)   (y is the op's output)
static void softmax_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *y = node->out;
  if (!x->requires_grad) return;
  int64_t C = ct_last_dim(y), N = ct_rows(y);
  const float *yd = ct_f32(y), *dy = y->grad;
  float *dx = x->grad;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    const float *yr = yd + n * C, *gr = dy + n * C;
    double dot = 0.0;
    for (int64_t c = 0; c < C; c++) dot += (double)gr[c] * yr[c];
    for (int64_t c = 0; c < C; c++)
      dx[n * C + c] += (float)(yr[c] * (gr[c] - dot));
  }
}

ct_tensor *ct_softmax(ct_tensor *x) {
  if (!x || !ct_check_f32("softmax", x, "input")) return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  if (!y) return NULL;
  softmax_rows(ct_f32(x), ct_f32(y), ct_rows(x), ct_last_dim(x));
  if (CT_RECORD("softmax", softmax_backward, y, NULL, x) != CT_OK) return NULL;
  return y;
}

// ---- log-softmax ------------------------------------------------------------
// x (N, C) -> y (N, C), y = x - max - log sum exp(x - max)

static void log_softmax_rows(const float *x, float *y, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    const float *xr = x + n * C;
    float *yr = y + n * C;
    float m = -INFINITY;
    for (int64_t c = 0; c < C; c++) m = fmaxf(m, xr[c]);
    double s = 0.0;
    for (int64_t c = 0; c < C; c++) s += exp((double)xr[c] - m);
    double lse = m + log(s);
    for (int64_t c = 0; c < C; c++) yr[c] = (float)(xr[c] - lse);
  }
}

// dx = dy - exp(y) * sum_c dy_c
static void log_softmax_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *y = node->out;
  if (!x->requires_grad) return;
  int64_t C = ct_last_dim(y), N = ct_rows(y);
  const float *yd = ct_f32(y), *dy = y->grad;
  float *dx = x->grad;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    const float *yr = yd + n * C, *gr = dy + n * C;
    double gs = 0.0;
    for (int64_t c = 0; c < C; c++) gs += gr[c];
    for (int64_t c = 0; c < C; c++)
      dx[n * C + c] += (float)(gr[c] - exp((double)yr[c]) * gs);
  }
}

ct_tensor *ct_log_softmax(ct_tensor *x) {
  if (!x || !ct_check_f32("log_softmax", x, "input")) return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  if (!y) return NULL;
  log_softmax_rows(ct_f32(x), ct_f32(y), ct_rows(x), ct_last_dim(x));
  if (CT_RECORD("log_softmax", log_softmax_backward, y, NULL, x) != CT_OK)
    return NULL;
  return y;
}

// ---- layer norm ---------------------------------------------------------------
// x (N, C), weight (C) or NULL, bias (C) or NULL -> y (N, C)
// y = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + eps),
// var the biased (divide by C) variance, as torch.nn.LayerNorm.

typedef struct layernorm_saved {
  double *mean;  // (N)
  double *rstd;  // (N)
} layernorm_saved;

// Column block for the weight/bias gradient: each block sums all rows in
// order, so the split is over outputs and the sums are thread-count free.
enum { LN_COL_BLOCK = 64 };

// dxhat = dy * weight; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
// dweight = sum_n dy * xhat; dbias = sum_n dy
static void layernorm_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
  ct_tensor *y = node->out;
  const layernorm_saved *s = node->saved;
  int64_t C = ct_last_dim(x), N = ct_rows(x);
  const float *xd = ct_f32(x), *dy = y->grad;
  const float *wd = w ? ct_f32(w) : NULL;

  if (x->requires_grad) {
    float *dx = x->grad;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
    for (int64_t n = 0; n < N; n++) {
      const float *xr = xd + n * C, *gr = dy + n * C;
      double mu = s->mean[n], rs = s->rstd[n];
      double sum_g = 0.0, sum_gx = 0.0;
      for (int64_t c = 0; c < C; c++) {
        double g = wd ? (double)gr[c] * wd[c] : gr[c];
        sum_g += g;
        sum_gx += g * ((xr[c] - mu) * rs);
      }
      double mean_g = sum_g / C, mean_gx = sum_gx / C;
      for (int64_t c = 0; c < C; c++) {
        double g = wd ? (double)gr[c] * wd[c] : gr[c];
        double xhat = (xr[c] - mu) * rs;
        dx[n * C + c] += (float)(rs * (g - mean_g - xhat * mean_gx));
      }
    }
  }

  bool dw = w && w->requires_grad, db = b && b->requires_grad;
  if (!dw && !db) return;
  int64_t blocks = (C + LN_COL_BLOCK - 1) / LN_COL_BLOCK;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t blk = 0; blk < blocks; blk++) {
    int64_t c0 = blk * LN_COL_BLOCK;
    int64_t c1 = c0 + LN_COL_BLOCK < C ? c0 + LN_COL_BLOCK : C;
    double acc_w[LN_COL_BLOCK] = {0}, acc_b[LN_COL_BLOCK] = {0};
    for (int64_t n = 0; n < N; n++) {
      const float *xr = xd + n * C, *gr = dy + n * C;
      double mu = s->mean[n], rs = s->rstd[n];
      for (int64_t c = c0; c < c1; c++) {
        acc_w[c - c0] += (double)gr[c] * ((xr[c] - mu) * rs);
        acc_b[c - c0] += gr[c];
      }
    }
    for (int64_t c = c0; c < c1; c++) {
      if (dw) w->grad[c] += (float)acc_w[c - c0];
      if (db) b->grad[c] += (float)acc_b[c - c0];
    }
  }
}

static bool check_layernorm_param(const ct_tensor *p, const ct_tensor *x,
                                  const char *what) {
  if (!ct_check_f32("layernorm", p, what)) return false;
  if (p->ndim == 1 && p->shape[0] == ct_last_dim(x)) return true;
  ct_error(CT_ERR_SHAPE, "layernorm: %s must be (%lld) for input %s, got %s",
           what, (long long)ct_last_dim(x), ct_shape_of(x), ct_shape_of(p));
  return false;
}

ct_tensor *ct_layernorm(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                        float eps) {
  if (!x) return NULL;
  if (!ct_check_f32("layernorm", x, "input") ||
      !ct_check_min_dims("layernorm", x, 1, "input"))
    return NULL;
  if (weight && !check_layernorm_param(weight, x, "weight")) return NULL;
  if (bias && !check_layernorm_param(bias, x, "bias")) return NULL;
  if (!(eps >= 0.0f) || isinf(eps)) {
    ct_error(CT_ERR_ARG, "layernorm: eps must be finite and >= 0, got %g",
             (double)eps);
    return NULL;
  }
  int64_t C = ct_last_dim(x), N = ct_rows(x);
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  if (!y) return NULL;

  ct_tensor *in[3] = {x, weight, bias};
  layernorm_saved *saved = NULL;
  if (ct_tape_wants(3, in)) {
    saved = ct_arena_alloc(sizeof *saved);
    double *buf =
        saved ? ct_arena_alloc((size_t)(2 * N) * sizeof(double)) : NULL;
    if (!buf) return NULL;
    saved->mean = buf;
    saved->rstd = buf + N;
  }

  const float *xd = ct_f32(x);
  const float *wd = weight ? ct_f32(weight) : NULL;
  const float *bd = bias ? ct_f32(bias) : NULL;
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    const float *xr = xd + n * C;
    float *yr = yd + n * C;
    double mu = 0.0, var = 0.0;
    for (int64_t c = 0; c < C; c++) mu += xr[c];
    mu /= C;
    for (int64_t c = 0; c < C; c++) var += (xr[c] - mu) * (xr[c] - mu);
    var /= C;
    double rs = 1.0 / sqrt(var + eps);
    for (int64_t c = 0; c < C; c++) {
      double v = (xr[c] - mu) * rs;
      if (wd) v *= wd[c];
      if (bd) v += bd[c];
      yr[c] = (float)v;
    }
    if (saved) {
      saved->mean[n] = mu;
      saved->rstd[n] = rs;
    }
  }
  if (ct_tape_record("layernorm", layernorm_backward, y, 3, in, saved) != CT_OK)
    return NULL;
  return y;
}
