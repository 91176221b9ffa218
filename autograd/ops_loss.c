// Losses: cross-entropy (fused log-softmax + NLL with label smoothing and
// class weights), KL divergence, mean squared and mean absolute error.
//
// Every loss returns a scalar (0-dim tensor). Sums are accumulated in double
// over fixed pieces (one row, or a fixed-size chunk of elements) that are
// computed in parallel and then added in order on one thread, so a loss is
// bit-identical at any thread count. The cross-entropy's softmax over rows
// of CT_VMATH_ROW_MIN classes or more (vocabularies) takes its exps in
// double from core/vmath.h (vectorized; libm's exp per logit was a sixth of
// a Multi30k step), a row's sums in eight fixed partial sums.
//
// Not here: reductions other than those listed per op ('none' outputs), and
// gradients for class weights (they are constants, as in PyTorch).
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/arena.h"
#include "core/vmath.h"

#include <math.h>
#include <string.h>

// Below this many elements a kernel runs on the calling thread: starting a
// parallel region costs more than the work (and results do not depend on it).
enum { PAR_MIN_WORK = 1 << 15 };

// The cross-entropy's backward takes a row's softmax CE_CHUNK classes at a
// time (exps in double on the stack).
enum { CE_CHUNK = 256 };

static ct_tensor *scalar_out(void) { return ct_tensor_empty(CT_F32, 0, NULL); }

// ---- cross-entropy ------------------------------------------------------------
// logits (N, K) (any leading dims), targets i32 (N), weight (K) or NULL
// -> scalar loss.
//
// PyTorch 1.13 nn.CrossEntropyLoss(reduction='mean') with w[k] = 1 when there
// are no weights, eps = label_smoothing, lp = log_softmax(logits), and rows
// whose target is ignore_index left out of both sums:
//   row loss  l_n = (1 - eps) w[t_n] (-lp[n, t_n]) + eps/K sum_k w[k] (-lp[n, k])
//   loss      = sum_n l_n / D,   D = sum_n w[t_n]
// (checked against torch with tests/ref/gen_ce_fixtures.py: with weights the
// smoothing term is weighted per class too, and both terms share D).
// Gradient, with s = softmax(logits[n]) and W = sum_k w[k]:
//   dloss/dlogits[n, j] = ((1 - eps) w[t_n] (s_j - [j == t_n])
//                          + eps/K (W s_j - w[j])) / D
// When D is 0 (every row ignored, an empty batch, or zero weight on every
// target) PyTorch returns nan; we deliberately return 0 with a zero gradient,
// so that a batch that happens to be all padding does not poison training.
// label_smoothing may be 1, as PyTorch allows.

ct_ce_opts ct_ce_defaults(void) {
  return (ct_ce_opts){
      .ignore_index = -100, .label_smoothing = 0.0f, .weight = NULL};
}

typedef struct ce_saved {
  double *lse;        // (N) log-sum-exp of each row
  double denom;       // D
  double weight_sum;  // W
  double smoothing;   // eps
  int32_t ignore_index;
  const float *weight;  // (K) or NULL
} ce_saved;

static void cross_entropy_backward(ct_node *node) {
  ct_tensor *logits = node->in[0], *targets = node->in[1], *loss = node->out;
  const ce_saved *s = node->saved;
  if (!logits->requires_grad) return;
  int64_t K = ct_last_dim(logits), N = targets->numel;
  float *dx = logits->grad;
  // A fresh (uninitialized) gradient is assigned: 0 + g, the bits of adding
  // g to a zeroed buffer (-0 becomes +0 as it would there).
  const bool fresh = node->fresh & 1u;
  if (s->denom == 0.0) {
    if (fresh) memset(dx, 0, (size_t)logits->numel * sizeof(float));
    return;
  }
  const float *x = ct_f32(logits), *w = s->weight;
  const int32_t *t = ct_i32(targets);
  double scale = loss->grad[0] / s->denom;
  double eps = s->smoothing, W = s->weight_sum;
#pragma omp parallel for schedule(static) if (N * K >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    float *gr = dx + n * K;
    if (t[n] == s->ignore_index) {
      if (fresh) memset(gr, 0, (size_t)K * sizeof(float));
      continue;
    }
    const float *xr = x + n * K;
    double wt = w ? w[t[n]] : 1.0;
    double p[CE_CHUNK];
    for (int64_t j0 = 0; j0 < K; j0 += CE_CHUNK) {
      const int64_t len = K - j0 < CE_CHUNK ? K - j0 : CE_CHUNK;
      if (K >= CT_VMATH_ROW_MIN)
        ct_vmath_exp_shifted_f64(xr + j0, s->lse[n], p, len);
      else
        for (int64_t i = 0; i < len; i++) p[i] = exp(xr[j0 + i] - s->lse[n]);
      for (int64_t i = 0; i < len; i++) {
        const int64_t j = j0 + i;
        double g = (1.0 - eps) * wt * (p[i] - (j == t[n]));
        if (eps != 0.0) g += eps / K * (W * p[i] - (w ? w[j] : 1.0));
        gr[j] = (fresh ? 0.0f : gr[j]) + (float)(scale * g);
      }
    }
  }
}

// sum_k x[k] w[k] (w NULL: 1) in double: rows of CT_VMATH_ROW_MIN classes
// or more in eight partial sums (k % 8, in order) added pairwise (eight
// chains instead of one, the same order at any vector width), shorter
// rows in one chain (core/vmath.h says why).
static double dot_lanes(const float *x, const float *w, int64_t K) {
  if (K < CT_VMATH_ROW_MIN) {
    double wx = 0.0;
    for (int64_t k = 0; k < K; k++) wx += (w ? w[k] : 1.0) * x[k];
    return wx;
  }
  double lane[8] = {0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
#pragma omp simd
    for (int j = 0; j < 8; j++)
      lane[j] += (double)x[k + j] * (w ? (double)w[k + j] : 1.0);
  for (; k < K; k++) lane[k % 8] += (double)x[k] * (w ? (double)w[k] : 1.0);
  return ct_vmath_total8(lane);
}

static bool check_ce_args(const ct_tensor *logits, const ct_tensor *targets,
                          const ct_ce_opts *o) {
  const char *op = "cross_entropy";
  if (!ct_check_f32(op, logits, "logits") ||
      !ct_check_i32(op, targets, "targets") ||
      !ct_check_min_dims(op, logits, 1, "logits"))
    return false;
  bool fit = targets->ndim == logits->ndim - 1;
  for (int i = 0; fit && i < targets->ndim; i++)
    fit = targets->shape[i] == logits->shape[i];
  if (!fit) {
    ct_error(CT_ERR_SHAPE,
             "%s: targets %s must have the shape of logits %s without the "
             "last (class) dim",
             op, ct_shape_of(targets), ct_shape_of(logits));
    return false;
  }
  if (ct_last_dim(logits) < 1) {
    ct_error(CT_ERR_SHAPE, "%s: logits %s have no classes", op,
             ct_shape_of(logits));
    return false;
  }
  if (!(o->label_smoothing >= 0.0f && o->label_smoothing <= 1.0f)) {
    ct_error(CT_ERR_ARG, "%s: label_smoothing must be in [0, 1], got %g", op,
             (double)o->label_smoothing);
    return false;
  }
  if (o->weight) {
    if (!ct_check_f32(op, o->weight, "weight")) return false;
    if (o->weight->ndim != 1 || o->weight->shape[0] != ct_last_dim(logits)) {
      ct_error(CT_ERR_SHAPE, "%s: weight must be (%lld) for logits %s, got %s",
               op, (long long)ct_last_dim(logits), ct_shape_of(logits),
               ct_shape_of(o->weight));
      return false;
    }
  }
  // Serial, so that the first bad row is the one reported.
  int64_t K = ct_last_dim(logits);
  const int32_t *t = ct_i32(targets);
  for (int64_t n = 0; n < targets->numel; n++) {
    if (t[n] == o->ignore_index || (t[n] >= 0 && t[n] < K)) continue;
    ct_error(CT_ERR_INDEX,
             "%s: target %d at row %lld is outside [0, %lld) and is not "
             "ignore_index (%d)",
             op, (int)t[n], (long long)n, (long long)K, (int)o->ignore_index);
    return false;
  }
  return true;
}

ct_tensor *ct_cross_entropy(ct_tensor *logits, ct_tensor *targets,
                            const ct_ce_opts *opts) {
  if (!logits || !targets) return NULL;
  ct_ce_opts o = opts ? *opts : ct_ce_defaults();
  if (!check_ce_args(logits, targets, &o)) return NULL;
  int64_t K = ct_last_dim(logits), N = targets->numel;
  const float *x = ct_f32(logits), *w = o.weight ? ct_f32(o.weight) : NULL;
  const int32_t *t = ct_i32(targets);
  double eps = o.label_smoothing;

  ct_tensor *loss = scalar_out();
  // Per-row loss and weight, summed in row order below.
  double *row = ct_arena_alloc((size_t)(2 * N) * sizeof(double));
  if (!loss || !row) return NULL;
  ce_saved *saved = NULL;
  ct_tensor *in[2] = {logits, targets};
  if (ct_tape_wants(2, in)) {
    saved = ct_arena_alloc(sizeof *saved);
    double *lse = saved ? ct_arena_alloc((size_t)N * sizeof(double)) : NULL;
    if (!lse) return NULL;
    saved->lse = lse;
  }
  double W = K;
  if (w) {
    W = 0.0;
    for (int64_t k = 0; k < K; k++) W += w[k];
  }

#pragma omp parallel for schedule(static) if (N * K >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    if (t[n] == o.ignore_index) {
      row[n] = row[N + n] = 0.0;
      continue;
    }
    const float *xr = x + n * K;
    double lse = ct_vmath_logsumexp_f64(xr, K);
    double wt = w ? w[t[n]] : 1.0;
    double l = (1.0 - eps) * wt * (lse - xr[t[n]]);
    if (eps != 0.0)  // sum_k w[k] (lse - x[k]) = W lse - sum_k w[k] x[k]
      l += eps / K * (W * lse - dot_lanes(xr, w, K));
    row[n] = l;
    row[N + n] = wt;
    if (saved) saved->lse[n] = lse;
  }
  double total = 0.0, denom = 0.0;
  for (int64_t n = 0; n < N; n++) {
    total += row[n];
    denom += row[N + n];
  }
  ct_f32(loss)[0] = denom != 0.0 ? (float)(total / denom) : 0.0f;

  if (saved) {
    saved->denom = denom;
    saved->weight_sum = W;
    saved->smoothing = eps;
    saved->ignore_index = o.ignore_index;
    saved->weight = w;
  }
  if (ct_tape_record("cross_entropy", cross_entropy_backward, loss, 2, in,
                     saved) != CT_OK)
    return NULL;
  ct_node_set_flags(loss, CT_NODE_FRESH_INPUT(0));
  return loss;
}

// ---- pointwise losses: KL divergence, MSE, L1 --------------------------------
// a, b of the same shape -> scalar sum_i f(a_i, b_i) / divisor.

typedef enum pointwise_kind {
  PW_KL,
  PW_KL_LOG_TARGET,
  PW_MSE,
  PW_L1
} pointwise_kind;

// Fixed chunk size for the ordered sum: the split never depends on threads.
enum { SUM_CHUNK = 4096 };

static inline double pointwise(pointwise_kind kind, double a, double b) {
  switch (kind) {
  case PW_KL:  // a = input (log-prob), b = target (prob); xlogy(b, b) - b a
    return (b == 0.0 ? 0.0 : b * log(b)) - b * a;
  case PW_KL_LOG_TARGET:  // b = log target: exp(b) (b - a)
    return exp(b) * (b - a);
  case PW_MSE: return (a - b) * (a - b);
  case PW_L1: return fabs(a - b);
  }
  return 0.0;
}

// d f / d a and d f / d b.
static inline void pointwise_grad(pointwise_kind kind, double a, double b,
                                  double *da, double *db) {
  switch (kind) {
  case PW_KL:
    // d/db xlogy(b, b) = log b + 1. At b == 0 PyTorch's gradient is nan
    // (0/0 in xlogy's backward); we take that term as 0 so it stays finite.
    *da = -b;
    *db = (b == 0.0 ? 0.0 : log(b) + 1.0) - a;
    return;
  case PW_KL_LOG_TARGET:
    *da = -exp(b);
    *db = exp(b) * (b - a + 1.0);
    return;
  case PW_MSE:
    *da = 2.0 * (a - b);
    *db = -*da;
    return;
  case PW_L1: {
    double d = a - b;
    *da = d > 0.0 ? 1.0 : d < 0.0 ? -1.0 : 0.0;  // sign(0) = 0, as PyTorch
    *db = -*da;
    return;
  }
  }
}

typedef struct pointwise_saved {
  pointwise_kind kind;
  double divisor;
} pointwise_saved;

static void pointwise_backward(ct_node *node) {
  ct_tensor *a = node->in[0], *b = node->in[1];
  const pointwise_saved *s = node->saved;
  double scale = node->out->grad[0] / s->divisor;
  const float *ad = ct_f32(a), *bd = ct_f32(b);
  float *ga = a->requires_grad ? a->grad : NULL;
  float *gb = b->requires_grad ? b->grad : NULL;
#pragma omp parallel for schedule(static) if (a->numel >= PAR_MIN_WORK)
  for (int64_t i = 0; i < a->numel; i++) {
    double da = 0.0, db = 0.0;
    pointwise_grad(s->kind, ad[i], bd[i], &da, &db);
    if (ga) ga[i] += (float)(scale * da);
    if (gb) gb[i] += (float)(scale * db);
  }
}

// The shared forward: checks, the ordered chunked sum, and the tape record.
// An empty input gives 0 (PyTorch's mean of nothing is nan).
static ct_tensor *pointwise_loss(const char *op, pointwise_kind kind,
                                 ct_tensor *a, ct_tensor *b,
                                 ct_reduction reduction, const char *a_name,
                                 const char *b_name) {
  if (!a || !b) return NULL;
  if (!ct_check_f32(op, a, a_name) || !ct_check_f32(op, b, b_name) ||
      !ct_check_same_shape(op, a, b))
    return NULL;
  double divisor;
  switch (reduction) {
  case CT_REDUCE_MEAN: divisor = (double)a->numel; break;
  case CT_REDUCE_SUM: divisor = 1.0; break;
  case CT_REDUCE_BATCHMEAN:
    divisor = a->ndim ? (double)a->shape[0] : 1.0;
    break;
  default:
    ct_error(CT_ERR_ARG, "%s: unknown reduction %d", op, (int)reduction);
    return NULL;
  }
  if (divisor == 0.0) divisor = 1.0;  // empty input: the sum is 0 anyway

  int64_t n = a->numel, chunks = (n + SUM_CHUNK - 1) / SUM_CHUNK;
  ct_tensor *loss = scalar_out();
  double *part = ct_arena_alloc((size_t)chunks * sizeof(double));
  if (!loss || !part) return NULL;
  const float *ad = ct_f32(a), *bd = ct_f32(b);
#pragma omp parallel for schedule(static) if (n >= PAR_MIN_WORK)
  for (int64_t c = 0; c < chunks; c++) {
    int64_t i0 = c * SUM_CHUNK, i1 = i0 + SUM_CHUNK < n ? i0 + SUM_CHUNK : n;
    double s = 0.0;
    for (int64_t i = i0; i < i1; i++) s += pointwise(kind, ad[i], bd[i]);
    part[c] = s;
  }
  double total = 0.0;
  for (int64_t c = 0; c < chunks; c++) total += part[c];
  ct_f32(loss)[0] = (float)(total / divisor);

  ct_tensor *in[2] = {a, b};
  pointwise_saved *saved = NULL;
  if (ct_tape_wants(2, in)) {
    saved = ct_arena_alloc(sizeof *saved);
    if (!saved) return NULL;
    saved->kind = kind;
    saved->divisor = divisor;
  }
  if (ct_tape_record(op, pointwise_backward, loss, 2, in, saved) != CT_OK)
    return NULL;
  return loss;
}

// F.kl_div: mean divides by all elements, batchmean by the first dim.
ct_tensor *ct_kl_div(ct_tensor *input, ct_tensor *target, bool log_target,
                     ct_reduction reduction) {
  return pointwise_loss("kl_div", log_target ? PW_KL_LOG_TARGET : PW_KL, input,
                        target, reduction, "input", "target");
}

ct_tensor *ct_mse(ct_tensor *a, ct_tensor *b) {
  return pointwise_loss("mse", PW_MSE, a, b, CT_REDUCE_MEAN, "a", "b");
}

ct_tensor *ct_l1(ct_tensor *a, ct_tensor *b) {
  return pointwise_loss("l1", PW_L1, a, b, CT_REDUCE_MEAN, "a", "b");
}

// ---- the sigmoid focal loss ------------------------------------------------------

typedef struct focal_saved {
  double alpha, gamma, divisor;
  const ct_tensor *targets;
} focal_saved;

// f and d f / d x of one element (see ops.h). sigmoid(x) and 1 - sigmoid(x)
// are each taken from the stable side, so 1 - p_t keeps its precision when
// p_t is near 1.
static inline void focal_point(double x, double t, double alpha, double gamma,
                               double *f, double *df) {
  const double e = exp(-fabs(x));
  const double p = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
  const double q = x >= 0 ? e / (1.0 + e) : 1.0 / (1.0 + e);  // 1 - p
  const double ce = fmax(x, 0.0) + log1p(e) - t * x;          // with logits
  const double m = t * q + (1.0 - t) * p;                     // 1 - p_t
  const double a = alpha < 0 ? 1.0 : alpha * t + (1.0 - alpha) * (1.0 - t);
  const double mg = gamma == 0 ? 1.0 : pow(m, gamma);
  *f = a * ce * mg;
  if (!df) return;
  // d ce / dx = p - t;  d (1 - p_t) / dx = -p (1 - p) (2 t - 1).
  double dm = 0.0;
  if (gamma != 0 && m > 0)
    dm = gamma * pow(m, gamma - 1.0) * -(p * q * (2.0 * t - 1.0));
  *df = a * ((p - t) * mg + ce * dm);
}

static void focal_backward(ct_node *node) {
  ct_tensor *x = node->in[0];
  const focal_saved *s = node->saved;
  const ct_tensor *t = s->targets;
  const double scale = node->out->grad[0] / s->divisor;
  const float *xd = ct_f32(x), *td = ct_f32(t);
  float *g = x->grad;
#pragma omp parallel for schedule(static) if (x->numel >= PAR_MIN_WORK)
  for (int64_t i = 0; i < x->numel; i++) {
    double f, df;
    focal_point(xd[i], td[i], s->alpha, s->gamma, &f, &df);
    g[i] += (float)(scale * df);
  }
}

ct_tensor *ct_sigmoid_focal_loss(ct_tensor *logits, ct_tensor *targets,
                                 float alpha, float gamma,
                                 ct_reduction reduction) {
  const char *op = "sigmoid_focal_loss";
  if (!logits || !targets) return NULL;
  if (!ct_check_f32(op, logits, "logits") ||
      !ct_check_f32(op, targets, "targets") ||
      !ct_check_same_shape(op, logits, targets))
    return NULL;
  if (!(gamma >= 0.0f) || !isfinite(gamma) || !isfinite(alpha) ||
      alpha > 1.0f) {
    ct_error(CT_ERR_ARG,
             "%s: alpha %g must be <= 1 (negative: none) and gamma %g >= 0", op,
             (double)alpha, (double)gamma);
    return NULL;
  }
  if (reduction != CT_REDUCE_MEAN && reduction != CT_REDUCE_SUM) {
    ct_error(CT_ERR_ARG, "%s: the reduction must be mean or sum", op);
    return NULL;
  }
  const int64_t n = logits->numel, chunks = (n + SUM_CHUNK - 1) / SUM_CHUNK;
  double divisor = reduction == CT_REDUCE_MEAN && n ? (double)n : 1.0;
  ct_tensor *loss = scalar_out();
  double *part = ct_arena_alloc((size_t)(chunks ? chunks : 1) * sizeof(double));
  if (!loss || !part) return NULL;
  const float *xd = ct_f32(logits), *td = ct_f32(targets);
#pragma omp parallel for schedule(static) if (n >= PAR_MIN_WORK)
  for (int64_t c = 0; c < chunks; c++) {
    int64_t i0 = c * SUM_CHUNK, i1 = i0 + SUM_CHUNK < n ? i0 + SUM_CHUNK : n;
    double sum = 0.0;
    for (int64_t i = i0; i < i1; i++) {
      double f;
      focal_point(xd[i], td[i], alpha, gamma, &f, NULL);
      sum += f;
    }
    part[c] = sum;
  }
  double total = 0.0;
  for (int64_t c = 0; c < chunks; c++) total += part[c];
  ct_f32(loss)[0] = (float)(total / divisor);

  // Only the logits get a gradient (the targets are labels).
  ct_tensor *in[1] = {logits};
  focal_saved *saved = NULL;
  if (ct_tape_wants(1, in)) {
    saved = ct_arena_alloc(sizeof *saved);
    if (!saved) return NULL;
    *saved = (focal_saved){alpha, gamma, divisor, targets};
  }
  if (ct_tape_record(op, focal_backward, loss, 1, in, saved) != CT_OK)
    return NULL;
  return loss;
}
