// Softmax, log-softmax, L2 normalization and layer norm over the last dim, forward and backward.
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
#include "core/gemm_bf16.h"
#include "core/vmath.h"

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

// ---- L2 row normalization ------------------------------------------------------
// x (N, C) -> y (N, C), y = x / max(|x|, eps)  (PyTorch's F.normalize, p = 2)
// Backward, n = max(|x|, eps): where |x| > eps, dx = (dy - y (dy . y)) / n;
// where the clamp holds n constant, dx = dy / eps.

typedef struct l2n_saved {
  float *norm;  // (N) max(|x|, eps)
  float eps;
} l2n_saved;

static void l2_normalize_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *y = node->out;
  if (!x->requires_grad) return;
  const l2n_saved *sv = node->saved;
  int64_t C = ct_last_dim(y), N = ct_rows(y);
  const float *yd = ct_f32(y), *dy = y->grad;
  float *dx = x->grad;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    const float *yr = yd + n * C, *gr = dy + n * C;
    const double inv = 1.0 / sv->norm[n];
    double dot = 0.0;
    if (sv->norm[n] > sv->eps)
      for (int64_t c = 0; c < C; c++) dot += (double)gr[c] * yr[c];
    for (int64_t c = 0; c < C; c++)
      dx[n * C + c] += (float)((gr[c] - yr[c] * dot) * inv);
  }
}

ct_tensor *ct_l2_normalize(ct_tensor *x, float eps) {
  if (!x || !ct_check_f32("l2_normalize", x, "input")) return NULL;
  if (!(eps > 0.0f)) {
    ct_error(CT_ERR_ARG, "l2_normalize: eps must be positive (got %g)",
             (double)eps);
    return NULL;
  }
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  if (!y) return NULL;
  const int64_t C = ct_last_dim(x), N = ct_rows(x);
  const bool record = ct_tape_wants(1, &x);
  l2n_saved *sv = NULL;
  float *norm = NULL;
  if (record) {
    sv = ct_arena_alloc(sizeof *sv);
    norm = ct_arena_alloc((size_t)(N > 0 ? N : 1) * sizeof *norm);
    if (!sv || !norm) return NULL;
    *sv = (l2n_saved){.norm = norm, .eps = eps};
  }
  const float *xd = ct_f32(x);
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t n = 0; n < N; n++) {
    const float *xr = xd + n * C;
    double ss = 0.0;
    for (int64_t c = 0; c < C; c++) ss += (double)xr[c] * xr[c];
    const float nr = fmaxf((float)sqrt(ss), eps);
    if (norm) norm[n] = nr;
    for (int64_t c = 0; c < C; c++) yd[n * C + c] = xr[c] / nr;
  }
  if (CT_RECORD("l2_normalize", l2_normalize_backward, y, sv, x) != CT_OK)
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
// 16 columns, one cache line of a row: a width of 64 is 4 blocks, so both
// threads of a 2-core machine take part, each reading its own lines.
enum { LN_COL_BLOCK = 16 };

// Rows are processed LN_ROWS at a time, and each row's sums over columns
// run in LN_LANES interleaved partial sums (lane j takes columns c with
// c % LN_LANES == j, in order; the lanes are then added in a fixed tree):
// the order is fixed by C alone, the same for one row or several, for any
// thread count and in every build, and the loops vectorize.
enum { LN_ROWS = 4, LN_LANES = 8 };
#define LN_INLINE static inline __attribute__((always_inline))

// Rows x[r * C ..] for r < R (R is LN_ROWS or 1 at each call): mean and
// rstd = 1 / sqrt(var + eps), both summed in double. The rows' lanes are
// walked side by side (each column step adds to all R x LN_LANES partial
// sums), so the R rows' chains of adds overlap instead of each waiting on
// its own; every partial sum still takes its columns in order.
LN_INLINE void row_moments(const float *x, int64_t C, float eps, int R,
                           double *mu, double *rs) {
  double m[LN_ROWS][LN_LANES] = {{0}}, v[LN_ROWS][LN_LANES] = {{0}};
  const int64_t body = C - C % LN_LANES;
  for (int64_t c = 0; c < body; c += LN_LANES)
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int j = 0; j < LN_LANES; j++) m[r][j] += x[r * C + c + j];
  for (int r = 0; r < R; r++)
    for (int64_t c = body; c < C; c++) m[r][c - body] += x[r * C + c];
  double mean[LN_ROWS];
  for (int r = 0; r < R; r++) mean[r] = ct_vmath_total8(m[r]) / C;
  for (int64_t c = 0; c < body; c += LN_LANES)
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int j = 0; j < LN_LANES; j++) {
        const double d = x[r * C + c + j] - mean[r];
        v[r][j] += d * d;
      }
  for (int r = 0; r < R; r++)
    for (int64_t c = body; c < C; c++) {
      const double d = x[r * C + c] - mean[r];
      v[r][c - body] += d * d;
    }
  for (int r = 0; r < R; r++) {
    mu[r] = mean[r];
    rs[r] = 1.0 / sqrt(ct_vmath_total8(v[r]) / C + eps);
  }
}

// Rows r < R of dy (with weight w or NULL) and x: the means over columns of
// g = dy * w (widened to double; dy alone without w) and of g * xhat,
// summed in double, the rows' lanes side by side as in row_moments. One
// body per case of w (has_w is a constant at both calls), so that its
// loops vectorize without a test per element. The lanes are an `omp simd`
// loop here: fully unrolled like row_moments' they were left scalar by GCC
// 12, with the partial sums spilled (LayerNorm's backward at 6400 x 128,
// one thread: 0.96-0.99 ms before, 0.55-0.58 this way).
LN_INLINE void grad_sums(const float *x, const float *dy, const float *w,
                         bool has_w, int64_t C, const double *mu,
                         const double *rs, int R, double (*sg)[LN_LANES],
                         double (*sgx)[LN_LANES]) {
  const int64_t body = C - C % LN_LANES;
  for (int64_t c = 0; c < body; c += LN_LANES)
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma omp simd
      for (int j = 0; j < LN_LANES; j++) {
        const float gf = dy[r * C + c + j];
        const double g = has_w ? (double)gf * w[c + j] : gf;
        sg[r][j] += g;
        sgx[r][j] += g * ((x[r * C + c + j] - mu[r]) * rs[r]);
      }
  for (int r = 0; r < R; r++)
    for (int64_t c = body; c < C; c++) {
      const float gf = dy[r * C + c];
      const double g = has_w ? (double)gf * w[c] : gf;
      sg[r][c - body] += g;
      sgx[r][c - body] += g * ((x[r * C + c] - mu[r]) * rs[r]);
    }
}

LN_INLINE void row_grad_means(const float *x, const float *dy, const float *w,
                              int64_t C, const double *mu, const double *rs,
                              int R, double *mean_g, double *mean_gx) {
  double sg[LN_ROWS][LN_LANES] = {{0}}, sgx[LN_ROWS][LN_LANES] = {{0}};
  if (w)
    grad_sums(x, dy, w, true, C, mu, rs, R, sg, sgx);
  else
    grad_sums(x, dy, NULL, false, C, mu, rs, R, sg, sgx);
  for (int r = 0; r < R; r++) {
    mean_g[r] = ct_vmath_total8(sg[r]) / C;
    mean_gx[r] = ct_vmath_total8(sgx[r]) / C;
  }
}

// The row groups of the forward and backward passes and the column blocks
// of the weight and bias gradients, as always-inline
// bodies compiled three times (baseline, AVX2, AVX-512 via target
// attributes, chosen at run time as core/attention_kernel.c does): the per-column
// loops vectorize wider. ISO C mode contracts no multiply-add, so every
// build computes the same bits.

typedef struct ln_fwd_args {
  const float *x, *w, *b;
  float *y;
  double *mean, *rstd;  // NULL when nothing is saved
  int64_t N, C;
  float eps;
} ln_fwd_args;

// Rows [n0, n0 + LN_ROWS) (cut at N).
LN_INLINE void ln_fwd_group(const ln_fwd_args *a, int64_t n0) {
  const int64_t N = a->N, C = a->C;
  double mu[LN_ROWS], rs[LN_ROWS];
  if (n0 + LN_ROWS <= N) {
    row_moments(a->x + n0 * C, C, a->eps, LN_ROWS, mu, rs);
  } else {
    for (int64_t n = n0; n < N; n++)
      row_moments(a->x + n * C, C, a->eps, 1, mu + (n - n0), rs + (n - n0));
  }
  const float *wd = a->w, *bd = a->b;
  for (int64_t n = n0; n < N && n < n0 + LN_ROWS; n++) {
    const float *xr = a->x + n * C;
    float *yr = a->y + n * C;
    const double m = mu[n - n0], r = rs[n - n0];
    for (int64_t c = 0; c < C; c++) {
      double v = (xr[c] - m) * r;
      if (wd) v *= wd[c];
      if (bd) v += bd[c];
      yr[c] = (float)v;
    }
    if (a->mean) {
      a->mean[n] = m;
      a->rstd[n] = r;
    }
  }
}

typedef struct ln_bwd_args {
  const float *x, *dy, *w;
  const double *mean, *rstd;
  float *dx;
  int64_t N, C;
  bool fresh;  // dx uninitialized: assign
} ln_bwd_args;

// dx of rows [n0, n0 + LN_ROWS) (cut at N).
LN_INLINE void ln_bwd_group(const ln_bwd_args *a, int64_t n0) {
  const int64_t N = a->N, C = a->C;
  const float *xd = a->x, *dy = a->dy, *wd = a->w;
  double mean_g[LN_ROWS], mean_gx[LN_ROWS];
  if (n0 + LN_ROWS <= N) {
    row_grad_means(xd + n0 * C, dy + n0 * C, wd, C, a->mean + n0, a->rstd + n0,
                   LN_ROWS, mean_g, mean_gx);
  } else {
    for (int64_t n = n0; n < N; n++)
      row_grad_means(xd + n * C, dy + n * C, wd, C, a->mean + n, a->rstd + n, 1,
                     mean_g + (n - n0), mean_gx + (n - n0));
  }
  for (int64_t n = n0; n < N && n < n0 + LN_ROWS; n++) {
    const float *xr = xd + n * C, *gr = dy + n * C;
    float *dxr = a->dx + n * C;
    const double mu = a->mean[n], rs = a->rstd[n];
    const double mg = mean_g[n - n0], mgx = mean_gx[n - n0];
    for (int64_t c = 0; c < C; c++) {
      double g = wd ? (double)gr[c] * wd[c] : gr[c];
      double xhat = (xr[c] - mu) * rs;
      const float d = (float)(rs * (g - mg - xhat * mgx));
      if (a->fresh)
        dxr[c] = d;
      else
        dxr[c] += d;
    }
  }
}

typedef struct ln_param_args {
  const float *x, *dy;
  const double *mean, *rstd;
  float *dw, *db;  // NULL when not wanted
  int64_t N, C;
} ln_param_args;

// Sums over all rows, in order, for W columns from c0: acc_w += dy * xhat,
// acc_b += dy. W is a constant in the full blocks (the sums stay in
// registers), the remainder's width otherwise.
LN_INLINE void ln_param_sums(const ln_param_args *a, int64_t c0, int64_t W,
                             double *acc_w, double *acc_b) {
  const int64_t C = a->C;
  for (int64_t n = 0; n < a->N; n++) {
    const float *xr = a->x + n * C + c0, *gr = a->dy + n * C + c0;
    double mu = a->mean[n], rs = a->rstd[n];
    for (int64_t c = 0; c < W; c++) {
      acc_w[c] += (double)gr[c] * ((xr[c] - mu) * rs);
      acc_b[c] += gr[c];
    }
  }
}

// dweight = sum_n dy * xhat, dbias = sum_n dy for columns [c0, c0 +
// LN_COL_BLOCK) (cut at C), each column summing its rows in order.
LN_INLINE void ln_param_block(const ln_param_args *a, int64_t c0) {
  const int64_t C = a->C;
  const int64_t c1 = c0 + LN_COL_BLOCK < C ? c0 + LN_COL_BLOCK : C;
  double acc_w[LN_COL_BLOCK] = {0}, acc_b[LN_COL_BLOCK] = {0};
  if (c1 - c0 == LN_COL_BLOCK)
    ln_param_sums(a, c0, LN_COL_BLOCK, acc_w, acc_b);
  else
    ln_param_sums(a, c0, c1 - c0, acc_w, acc_b);
  for (int64_t c = c0; c < c1; c++) {
    if (a->dw) a->dw[c] += (float)acc_w[c - c0];
    if (a->db) a->db[c] += (float)acc_b[c - c0];
  }
}

typedef void (*ln_fwd_fn)(const ln_fwd_args *, int64_t);
typedef void (*ln_bwd_fn)(const ln_bwd_args *, int64_t);
typedef void (*ln_param_fn)(const ln_param_args *, int64_t);
typedef struct ln_isa {
  ln_fwd_fn fwd;
  ln_bwd_fn bwd;
  ln_param_fn params;
} ln_isa;

static void ln_fwd_base(const ln_fwd_args *a, int64_t n0) {
  ln_fwd_group(a, n0);
}
static void ln_bwd_base(const ln_bwd_args *a, int64_t n0) {
  ln_bwd_group(a, n0);
}
static void ln_param_base(const ln_param_args *a, int64_t c0) {
  ln_param_block(a, c0);
}
#if defined(__x86_64__) || defined(__i386__)
#define LN_X86 1
__attribute__((target("avx2"))) static void ln_fwd_avx2(const ln_fwd_args *a,
                                                        int64_t n0) {
  ln_fwd_group(a, n0);
}
__attribute__((target("avx2"))) static void ln_bwd_avx2(const ln_bwd_args *a,
                                                        int64_t n0) {
  ln_bwd_group(a, n0);
}
__attribute__((target("avx2"))) static void ln_param_avx2(
    const ln_param_args *a, int64_t c0) {
  ln_param_block(a, c0);
}
__attribute__((target("avx512f"))) static void ln_param_avx512(
    const ln_param_args *a, int64_t c0) {
  ln_param_block(a, c0);
}
__attribute__((target("avx512f"))) static void ln_fwd_avx512(
    const ln_fwd_args *a, int64_t n0) {
  ln_fwd_group(a, n0);
}
__attribute__((target("avx512f"))) static void ln_bwd_avx512(
    const ln_bwd_args *a, int64_t n0) {
  ln_bwd_group(a, n0);
}
#endif

static ln_isa ln_pick_isa(void) {
#ifdef LN_X86
  if (__builtin_cpu_supports("avx512f"))
    return (ln_isa){ln_fwd_avx512, ln_bwd_avx512, ln_param_avx512};
  if (__builtin_cpu_supports("avx2"))
    return (ln_isa){ln_fwd_avx2, ln_bwd_avx2, ln_param_avx2};
#endif
  return (ln_isa){ln_fwd_base, ln_bwd_base, ln_param_base};
}

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
    const ln_isa isa = ln_pick_isa();
    const int64_t groups = (N + LN_ROWS - 1) / LN_ROWS;
    const ln_bwd_args a = {xd,      dy, wd, s->mean,         s->rstd,
                           x->grad, N,  C,  node->fresh & 1u};
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
    for (int64_t grp = 0; grp < groups; grp++) isa.bwd(&a, grp * LN_ROWS);
  }

  bool dw = w && w->requires_grad, db = b && b->requires_grad;
  if (!dw && !db) return;
  const ln_isa isa = ln_pick_isa();
  const ln_param_args a = {
      xd, dy, s->mean, s->rstd, dw ? w->grad : NULL, db ? b->grad : NULL, N, C};
  int64_t blocks = (C + LN_COL_BLOCK - 1) / LN_COL_BLOCK;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t blk = 0; blk < blocks; blk++) isa.params(&a, blk * LN_COL_BLOCK);
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
  return ct_layernorm_as(x, weight, bias, eps, CT_F32);
}

ct_tensor *ct_layernorm_as(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                           float eps, ct_dtype out_dtype) {
  if (!x) return NULL;
  if (out_dtype != CT_F32 && out_dtype != CT_BF16) {
    ct_error(CT_ERR_DTYPE, "layernorm: output must be f32 or bf16, not %s",
             ct_dtype_name(out_dtype));
    return NULL;
  }
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
  ct_tensor *y = ct_tensor_empty(out_dtype, x->ndim, x->shape);
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

  // A bf16 output is computed in float scratch and rounded (the backward
  // reads x, mean and rstd, never y).
  ct_arena_mark mark = ct_arena_get_mark();
  float *y32 = out_dtype == CT_F32
                   ? ct_f32(y)
                   : ct_arena_alloc((size_t)y->numel * sizeof(float));
  if (!y32) return NULL;
  const ln_fwd_args a = {ct_f32(x),
                         weight ? ct_f32(weight) : NULL,
                         bias ? ct_f32(bias) : NULL,
                         y32,
                         saved ? saved->mean : NULL,
                         saved ? saved->rstd : NULL,
                         N,
                         C,
                         eps};
  const ln_isa isa = ln_pick_isa();
  const int64_t groups = (N + LN_ROWS - 1) / LN_ROWS;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN_WORK)
  for (int64_t g = 0; g < groups; g++) isa.fwd(&a, g * LN_ROWS);
  if (out_dtype == CT_BF16) ct_bf16_store(y32, y->numel, ct_bf16(y));
  ct_arena_rewind(mark);
  if (ct_tape_record("layernorm", layernorm_backward, y, 3, in, saved) != CT_OK)
    return NULL;
  ct_node_set_flags(y, CT_NODE_FRESH_INPUT(0));
  return y;
}
