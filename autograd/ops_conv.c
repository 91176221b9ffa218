// Convolution, batch norm and pooling on NCHW tensors, forward and backward
// (see ops_conv.h for the semantics); the depthwise conv and batch norm also
// on tokens, channels last, with the same bits.
//
// conv2d is im2col + gemm. A chunk of nb images is unfolded into columns:
// image i's cols_i (K,P) holds, in row k = (c, ki, kj), the input value each
// of the P = Ho*Wo output positions sees at that kernel offset (K = C*kh*kw).
//   forward   y_i (O,P)     = w (O,K) cols_i (K,P)       (batched, w shared)
//   input     dcols_i (K,P) = w^T (K,O) dy_i (O,P), folded back by col2im
//   weight    dw^T (K,O)   += cols (K,nb*P) dyT^T         (one gemm per chunk)
// For the weight gradient the chunk's columns are laid out side by side,
// cols (K, nb*P), and dy likewise as dyT (O, nb*P): one product with a long
// inner dim instead of nb short ones. It computes dw^T, whose K rows split
// well over threads (dw has only O), and adds it transposed at the end.
// Chunks are bounded (CONV_SCRATCH_FLOATS), so memory does not grow with the
// batch and the columns stay in cache for the gemm that reads them. The
// columns are recomputed in backward instead of saved.
//
// Determinism: gemm never splits its inner dim; im2col is a copy; col2im
// gives each (image, channel) plane to one thread, which adds the kernel
// offsets in a fixed order; the weight gradient adds chunks in image order,
// and the chunk size depends on the shapes only. Batch norm and pooling split
// work by channel or plane (the tokens layout: by block of channels), and
// every per-channel sum runs in one fixed order (LANES interleaved double
// partial sums), whatever the thread count.
#include "autograd/ops_conv.h"

#include "autograd/op_util.h"
#include "core/arena.h"
#include "core/gemm.h"
#include "core/session_internal.h"
#include "core/target_clones.h"
#include "core/threads.h"
#include "core/vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Below this many elements a loop runs on the calling thread.
enum { PAR_MIN_WORK = 1 << 15 };

// ---- shared helpers -----------------------------------------------------------

// Per-channel sums keep LANES partial sums in double, element j going to lane
// j % LANES of its row, then add the lanes in a fixed order: one order for
// any thread count, and a loop the compiler can vectorize.
enum { LANES = 8 };

static inline void lanes_add(double acc[LANES], const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++) acc[j] += x[i + j];
  for (int j = 0; i + j < n; j++) acc[j] += x[i + j];
}

// acc += (x - mean)^2
static inline void lanes_add_sq_dev(double acc[LANES], const float *x,
                                    int64_t n, double mean) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++) {
      double d = x[i + j] - mean;
      acc[j] += d * d;
    }
  for (int j = 0; i + j < n; j++) {
    double d = x[i + j] - mean;
    acc[j] += d * d;
  }
}

// acc += g * (x - mean)
static inline void lanes_add_dot_dev(double acc[LANES], const float *g,
                                     const float *x, int64_t n, double mean) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++) acc[j] += g[i + j] * (x[i + j] - mean);
  for (int j = 0; i + j < n; j++) acc[j] += g[i + j] * (x[i + j] - mean);
}

// out[c] += sum over n and s < S of x[(n*C + c)*S + s]: the gradient of a
// per-channel broadcast. Channels run in parallel, each in a fixed order.
static void add_channel_sums(float *out, const float *x, int64_t N, int64_t C,
                             int64_t S) {
#pragma omp parallel for schedule(static) if (N * C * S >= PAR_MIN_WORK)
  for (int64_t c = 0; c < C; c++) {
    double acc[LANES] = {0};
    for (int64_t n = 0; n < N; n++) lanes_add(acc, x + (n * C + c) * S, S);
    out[c] += (float)ct_vmath_total8(acc);
  }
}

static bool check_nchw(const char *op, const ct_tensor *x) {
  if (!ct_check_f32(op, x, "input")) return false;
  if (x->ndim == 4) return true;
  ct_error(CT_ERR_SHAPE, "%s: input must be (N, C, H, W), got %s", op,
           ct_shape_of(x));
  return false;
}

// A per-channel parameter must be f32 (C).
static bool check_channel_param(const char *op, const ct_tensor *p,
                                const ct_tensor *x, int64_t C,
                                const char *what) {
  if (!ct_check_f32(op, p, what)) return false;
  if (p->ndim == 1 && p->shape[0] == C) return true;
  ct_error(CT_ERR_SHAPE, "%s: %s must be (%lld) for input %s, got %s", op, what,
           (long long)C, ct_shape_of(x), ct_shape_of(p));
  return false;
}

// ---- conv2d -------------------------------------------------------------------

typedef struct conv_geom {
  int64_t N, C, H, W;  // input
  int64_t O, kh, kw;   // weight (O, C, kh, kw)
  int64_t Ho, Wo;      // output
  int64_t stride, pad;
  int64_t K, P;  // C*kh*kw column rows, Ho*Wo columns per image
} conv_geom;

// The column buffers of one chunk hold at most this many floats (2 MB)
// unless one image alone needs more: small enough to stay in cache between
// im2col and the gemm that reads them.
enum { CONV_SCRATCH_FLOATS = 1 << 19 };

// The column buffers live in the session's workspace (core/session.h),
// grown on demand and kept: steady-state training allocates nothing. A
// forward that records reserves what its backward will need, so backward
// (which cannot fail) never allocates.
static float *scratch_reserve(size_t floats) {
  float *p = ct_session_workspace_reserve(floats * sizeof(float));
  if (!p)
    ct_error(CT_ERR_NOMEM, "conv2d: out of memory for %zu column floats",
             floats);
  return p;
}

// Images per chunk when each needs `per_image` floats of scratch.
static int64_t chunk_images(const conv_geom *g, int64_t per_image) {
  int64_t nb = CONV_SCRATCH_FLOATS / (per_image > 0 ? per_image : 1);
  if (nb > g->N) nb = g->N;
  return nb < 1 ? 1 : nb;
}
// Forward: the columns. Backward: the columns (dcols, then cols) and dyT.
static int64_t forward_chunk(const conv_geom *g) {
  return chunk_images(g, g->K * g->P);
}
static int64_t backward_chunk(const conv_geom *g) {
  return chunk_images(g, (g->K + g->O) * g->P);
}
// Backward's scratch: dw^T (K,O), then a chunk's columns and dyT.
static size_t backward_scratch(const conv_geom *g) {
  return (size_t)(g->K * g->O + backward_chunk(g) * (g->K + g->O) * g->P);
}

static bool conv_is_pointwise(const conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->stride == 1 && g->pad == 0;
}

static inline int64_t ceil_div_pos(int64_t a, int64_t b) {
  return a <= 0 ? 0 : (a + b - 1) / b;
}

// The outputs o in [*lo, *hi) whose input coordinate o*stride - pad + off
// lies inside [0, size); the others read padding.
static inline void valid_outputs(int64_t size, int64_t out, int64_t stride,
                                 int64_t pad, int64_t off, int64_t *lo,
                                 int64_t *hi) {
  *lo = ceil_div_pos(pad - off, stride);
  *hi = ceil_div_pos(size + pad - off, stride);
  if (*hi > out) *hi = out;
  if (*lo > *hi) *lo = *hi;
}

// Where image i's column row k starts: cols + k*row_stride + i*image_stride.
// Per-image blocks (K,P): row_stride P, image_stride K*P. Side by side
// (K, nb*P): row_stride nb*P, image_stride P.
typedef struct col_layout {
  int64_t row_stride, image_stride;
} col_layout;

static col_layout per_image_layout(const conv_geom *g) {
  return (col_layout){g->P, g->K * g->P};
}
static col_layout side_by_side_layout(const conv_geom *g, int64_t nb) {
  return (col_layout){nb * g->P, g->P};
}

// x: nb images (C,H,W) -> their columns: row k = (c, ki, kj), column
// oh*Wo + ow holds x_i[c][oh*s - pad + ki][ow*s - pad + kj] (0 outside).
static void im2col(const conv_geom *g, const float *x, int64_t nb, col_layout l,
                   float *cols) {
  const int64_t khw = g->kh * g->kw, HW = g->H * g->W;
  const int64_t Ho = g->Ho, Wo = g->Wo, s = g->stride, pad = g->pad;
#pragma omp parallel for collapse(2) \
    schedule(static) if (g->K * nb * g->P >= PAR_MIN_WORK)
  for (int64_t i = 0; i < nb; i++) {
    for (int64_t k = 0; k < g->K; k++) {
      const int64_t c = k / khw, ki = k % khw / g->kw, kj = k % g->kw;
      const float *plane = x + (i * g->C + c) * HW;
      float *dst = cols + k * l.row_stride + i * l.image_stride;
      int64_t oh0, oh1, ow0, ow1;
      valid_outputs(g->H, Ho, s, pad, ki, &oh0, &oh1);
      valid_outputs(g->W, Wo, s, pad, kj, &ow0, &ow1);
      memset(dst, 0, (size_t)(oh0 * Wo) * sizeof(float));
      for (int64_t oh = oh0; oh < oh1; oh++) {
        float *d = dst + oh * Wo;
        const float *src =
            plane + (oh * s - pad + ki) * g->W + ow0 * s - pad + kj;
        for (int64_t ow = 0; ow < ow0; ow++) d[ow] = 0.0f;
        if (s == 1) {  // a plain loop: rows are too short for memcpy calls
          for (int64_t ow = ow0; ow < ow1; ow++) d[ow] = src[ow - ow0];
        } else {
          for (int64_t ow = ow0; ow < ow1; ow++) d[ow] = src[(ow - ow0) * s];
        }
        for (int64_t ow = ow1; ow < Wo; ow++) d[ow] = 0.0f;
      }
      memset(dst + oh1 * Wo, 0, (size_t)((Ho - oh1) * Wo) * sizeof(float));
    }
  }
}

// The adjoint of im2col: dx (nb images) += per-image columns folded back.
// Each (image, channel) plane is one task adding its kernel offsets in
// (ki, kj) order.
static void col2im_add(const conv_geom *g, const float *cols, int64_t nb,
                       float *dx) {
  const int64_t HW = g->H * g->W, KP = g->K * g->P;
  const int64_t Wo = g->Wo, s = g->stride, pad = g->pad;
#pragma omp parallel for collapse(2) \
    schedule(static) if (nb * KP >= PAR_MIN_WORK)
  for (int64_t i = 0; i < nb; i++) {
    for (int64_t c = 0; c < g->C; c++) {
      float *plane = dx + (i * g->C + c) * HW;
      for (int64_t ki = 0; ki < g->kh; ki++) {
        int64_t oh0, oh1;
        valid_outputs(g->H, g->Ho, s, pad, ki, &oh0, &oh1);
        for (int64_t kj = 0; kj < g->kw; kj++) {
          int64_t ow0, ow1;
          valid_outputs(g->W, Wo, s, pad, kj, &ow0, &ow1);
          const float *src =
              cols + i * KP + ((c * g->kh + ki) * g->kw + kj) * g->P;
          for (int64_t oh = oh0; oh < oh1; oh++) {
            float *d = plane + (oh * s - pad + ki) * g->W + ow0 * s - pad + kj;
            const float *sr = src + oh * Wo + ow0;
            if (s == 1) {
              for (int64_t j = 0; j < ow1 - ow0; j++) d[j] += sr[j];
            } else {
              for (int64_t j = 0; j < ow1 - ow0; j++) d[j * s] += sr[j];
            }
          }
        }
      }
    }
  }
}

// dy: nb images (O,P) -> dyT (O, nb*P), the side-by-side layout.
static void gather_rows(const float *dy, int64_t nb, int64_t O, int64_t P,
                        float *dyT) {
#pragma omp parallel for collapse(2) \
    schedule(static) if (nb * O * P >= PAR_MIN_WORK)
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < nb; i++)
      memcpy(dyT + o * nb * P + i * P, dy + (i * O + o) * P,
             (size_t)P * sizeof(float));
}

// x (N,C,H,W), w (O,C,kh,kw), bias (O) -> y (N,O,Ho,Wo); see the top.
static void conv2d_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1], *bias = node->in[2];
  const conv_geom *g = node->saved;
  const float *dy = node->out->grad, *wd = ct_f32(w), *xd = ct_f32(x);
  const int64_t O = g->O, K = g->K, P = g->P, CHW = g->C * g->H * g->W;

  if (bias && bias->requires_grad)  // dbias[o] += sum over n, p of dy
    add_channel_sums(bias->grad, dy, g->N, O, P);

  const int64_t nb = backward_chunk(g);
  float *dwT = ct_session_workspace();  // reserved by the forward pass
  float *buf = dwT + K * O;
  if (x->requires_grad) {
    if (conv_is_pointwise(g)) {  // dx_i (C,P) += w^T (C,O) dy_i (O,P)
      ct_gemm_batched(true, false, g->C, P, O, 1.0f, wd, g->C, 0, dy, P, O * P,
                      1.0f, x->grad, P, CHW, g->N);
    } else {
      for (int64_t n0 = 0; n0 < g->N; n0 += nb) {
        const int64_t cnt = g->N - n0 < nb ? g->N - n0 : nb;
        // dcols_i (K,P) = w^T (K,O) dy_i (O,P)
        ct_gemm_batched(true, false, K, P, O, 1.0f, wd, K, 0, dy + n0 * O * P,
                        P, O * P, 0.0f, buf, P, K * P, cnt);
        col2im_add(g, buf, cnt, x->grad + n0 * CHW);
      }
    }
  }
  if (w->requires_grad && g->N > 0) {
    for (int64_t n0 = 0; n0 < g->N; n0 += nb) {
      const int64_t cnt = g->N - n0 < nb ? g->N - n0 : nb;
      float *cols = buf, *dyT = buf + K * cnt * P;
      im2col(g, xd + n0 * CHW, cnt, side_by_side_layout(g, cnt), cols);
      gather_rows(dy + n0 * O * P, cnt, O, P, dyT);
      // dw^T (K,O) (+)= cols (K, cnt*P) dyT^T (cnt*P, O)
      ct_gemm(false, true, K, O, cnt * P, 1.0f, cols, cnt * P, dyT, cnt * P,
              n0 == 0 ? 0.0f : 1.0f, dwT, O);
    }
    float *dw = w->grad;
#pragma omp parallel for schedule(static) if (K * O >= PAR_MIN_WORK)
    for (int64_t o = 0; o < O; o++)
      for (int64_t k = 0; k < K; k++) dw[o * K + k] += dwT[k * O + o];
  }
}

static bool conv_geometry(const ct_tensor *x, const ct_tensor *w,
                          const ct_tensor *bias, int stride, int padding,
                          conv_geom *g) {
  const char *op = "conv2d";
  if (!check_nchw(op, x) || !ct_check_f32(op, w, "weight")) return false;
  if (w->ndim != 4 || w->shape[1] != x->shape[1] || w->numel == 0) {
    ct_error(CT_ERR_SHAPE,
             "conv2d: weight %s does not fit input %s (want "
             "[out, %lld, kh, kw], all >= 1)",
             ct_shape_of(w), ct_shape_of(x), (long long)x->shape[1]);
    return false;
  }
  if (stride < 1 || padding < 0) {
    ct_error(CT_ERR_ARG, "conv2d: stride %d must be >= 1 and padding %d >= 0",
             stride, padding);
    return false;
  }
  *g = (conv_geom){.N = x->shape[0],
                   .C = x->shape[1],
                   .H = x->shape[2],
                   .W = x->shape[3],
                   .O = w->shape[0],
                   .kh = w->shape[2],
                   .kw = w->shape[3],
                   .stride = stride,
                   .pad = padding};
  const int64_t hp = g->H + 2 * g->pad - g->kh, wp = g->W + 2 * g->pad - g->kw;
  if (hp < 0 || wp < 0) {
    ct_error(CT_ERR_SHAPE,
             "conv2d: kernel %lldx%lld is larger than input %s "
             "padded by %d",
             (long long)g->kh, (long long)g->kw, ct_shape_of(x), padding);
    return false;
  }
  g->Ho = hp / g->stride + 1;
  g->Wo = wp / g->stride + 1;
  g->K = g->C * g->kh * g->kw;
  g->P = g->Ho * g->Wo;
  if (bias) {
    if (!ct_check_f32(op, bias, "bias")) return false;
    if (bias->ndim != 1 || bias->shape[0] != g->O) {
      ct_error(CT_ERR_SHAPE,
               "conv2d: bias %s does not fit weight %s (want "
               "[%lld])",
               ct_shape_of(bias), ct_shape_of(w), (long long)g->O);
      return false;
    }
  }
  return true;
}

ct_tensor *ct_conv2d(ct_tensor *x, ct_tensor *w, ct_tensor *bias, int stride,
                     int padding) {
  if (!x || !w) return NULL;
  conv_geom g;
  if (!conv_geometry(x, w, bias, stride, padding, &g)) return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(g.N, g.O, g.Ho, g.Wo));
  if (!y) return NULL;
  ct_tensor *in[3] = {x, w, bias};
  conv_geom *saved = NULL;
  const bool pointwise = conv_is_pointwise(&g);
  const int64_t nb = forward_chunk(&g);
  size_t need = pointwise ? 0 : (size_t)(nb * g.K * g.P);
  if (ct_tape_wants(3, in)) {
    saved = ct_arena_alloc(sizeof *saved);
    if (!saved) return NULL;
    *saved = g;
    if (backward_scratch(&g) > need) need = backward_scratch(&g);
  }
  float *cols = need ? scratch_reserve(need) : NULL;
  if (need && !cols) return NULL;

  const float *xd = ct_f32(x), *wd = ct_f32(w);
  float *yd = ct_f32(y);
  const int64_t P = g.P, CHW = g.C * g.H * g.W;
  if (bias) {
    const float *bd = ct_f32(bias);
#pragma omp parallel for schedule(static) if (g.N * g.O * P >= PAR_MIN_WORK)
    for (int64_t r = 0; r < g.N * g.O; r++)
      for (int64_t p = 0; p < P; p++) yd[r * P + p] = bd[r % g.O];
  }
  const float beta = bias ? 1.0f : 0.0f;
  if (pointwise) {  // y_i (O,P) = w (O,C) x_i (C,P)
    ct_gemm_batched(false, false, g.O, P, g.C, 1.0f, wd, g.C, 0, xd, P, CHW,
                    beta, yd, P, g.O * P, g.N);
  } else {
    for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
      const int64_t cnt = g.N - n0 < nb ? g.N - n0 : nb;
      im2col(&g, xd + n0 * CHW, cnt, per_image_layout(&g), cols);
      // y_i (O,P) = w (O,K) cols_i (K,P)
      ct_gemm_batched(false, false, g.O, P, g.K, 1.0f, wd, g.K, 0, cols, P,
                      g.K * P, beta, yd + n0 * g.O * P, P, g.O * P, cnt);
    }
  }
  if (ct_tape_record("conv2d", conv2d_backward, y, 3, in, saved) != CT_OK)
    return NULL;
  return y;
}

// ---- depthwise conv2d -----------------------------------------------------------
// Plane (n, c) of x (H,W) and of y (Ho,Wo), with channel c's kernel w_c (k,k):
//   y[oh][ow]     = sum over (ki,kj) of w_c[ki][kj] x[oh*s-pad+ki][ow*s-pad+kj]
//   dx[ih][iw]   += w_c[ki][kj] dy[oh][ow] for every output that reads it
//   dw_c[ki][kj] += sum over n, oh, ow of dy[oh][ow] x[oh*s-pad+ki][ow*s-pad+kj]
// The forward pass and dx give each plane to one thread, which walks the
// output rows and adds the kernel offsets in (ki, kj) order; dw gives each
// channel to one thread, which adds the images in order, every offset's sum
// in LANES double partial sums. The inner loops run along a row (unit stride
// in y and dy; stride s in x), so they vectorize; no result depends on the
// thread count.

typedef struct dw_geom {
  int64_t N, C, H, W, k, Ho, Wo, stride, pad;
} dw_geom;

// One plane: x (H,W), kernel wc (k,k) -> y (Ho,Wo).
static void dw_plane_forward(const dw_geom *g, const float *restrict x,
                             const float *restrict wc, float *restrict y) {
  const int64_t k = g->k, s = g->stride, pad = g->pad, W = g->W, Wo = g->Wo;
  for (int64_t oh = 0; oh < g->Ho; oh++) {
    float *restrict yr = y + oh * Wo;
    for (int64_t ow = 0; ow < Wo; ow++) yr[ow] = 0.0f;
    for (int64_t ki = 0; ki < k; ki++) {
      const int64_t ih = oh * s - pad + ki;
      if (ih < 0 || ih >= g->H) continue;
      for (int64_t kj = 0; kj < k; kj++) {
        int64_t ow0, ow1;
        valid_outputs(W, Wo, s, pad, kj, &ow0, &ow1);
        const float wv = wc[ki * k + kj];
        const float *restrict xr = x + ih * W + ow0 * s - pad + kj;
        float *restrict d = yr + ow0;
        const int64_t n = ow1 - ow0;
        if (s == 1) {
          for (int64_t j = 0; j < n; j++) d[j] += wv * xr[j];
        } else {
          for (int64_t j = 0; j < n; j++) d[j] += wv * xr[j * s];
        }
      }
    }
  }
}

// One plane: dx (H,W) += the adjoint of dw_plane_forward applied to dy.
static void dw_plane_backward_input(const dw_geom *g, const float *restrict dy,
                                    const float *restrict wc,
                                    float *restrict dx) {
  const int64_t k = g->k, s = g->stride, pad = g->pad, W = g->W, Wo = g->Wo;
  for (int64_t oh = 0; oh < g->Ho; oh++) {
    const float *restrict dyr = dy + oh * Wo;
    for (int64_t ki = 0; ki < k; ki++) {
      const int64_t ih = oh * s - pad + ki;
      if (ih < 0 || ih >= g->H) continue;
      for (int64_t kj = 0; kj < k; kj++) {
        int64_t ow0, ow1;
        valid_outputs(W, Wo, s, pad, kj, &ow0, &ow1);
        const float wv = wc[ki * k + kj];
        float *restrict d = dx + ih * W + ow0 * s - pad + kj;
        const float *restrict src = dyr + ow0;
        const int64_t n = ow1 - ow0;
        if (s == 1) {
          for (int64_t j = 0; j < n; j++) d[j] += wv * src[j];
        } else {
          for (int64_t j = 0; j < n; j++) d[j * s] += wv * src[j];
        }
      }
    }
  }
}

// acc += a[j] * b[j * s] for j < n, element j in lane j % LANES.
static inline void lanes_add_dot_strided(double acc[LANES],
                                         const float *restrict a,
                                         const float *restrict b, int64_t n,
                                         int64_t s) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int j = 0; j < LANES; j++) acc[j] += (double)a[i + j] * b[(i + j) * s];
  for (int j = 0; i + j < n; j++) acc[j] += (double)a[i + j] * b[(i + j) * s];
}

// x (N,C,H,W), w (C,1,k,k) -> y (N,C,Ho,Wo); see above.
static void conv2d_depthwise_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1];
  const dw_geom *g = node->saved;
  const float *dy = node->out->grad, *wd = ct_f32(w), *xd = ct_f32(x);
  const int64_t C = g->C, HW = g->H * g->W, P = g->Ho * g->Wo, kk = g->k * g->k;
  const int64_t work = g->N * C * P * kk;
  if (x->requires_grad) {
#pragma omp parallel for schedule(static) if (work >= PAR_MIN_WORK)
    for (int64_t pl = 0; pl < g->N * C; pl++)
      dw_plane_backward_input(g, dy + pl * P, wd + (pl % C) * kk,
                              x->grad + pl * HW);
  }
  if (!w->requires_grad) return;
  const int64_t k = g->k, s = g->stride, pad = g->pad, W = g->W, Wo = g->Wo;
#pragma omp parallel for schedule(static) if (work >= PAR_MIN_WORK)
  for (int64_t c = 0; c < C; c++) {
    for (int64_t kij = 0; kij < kk; kij++) {
      const int64_t ki = kij / k, kj = kij % k;
      int64_t oh0, oh1, ow0, ow1;
      valid_outputs(g->H, g->Ho, s, pad, ki, &oh0, &oh1);
      valid_outputs(W, Wo, s, pad, kj, &ow0, &ow1);
      double acc[LANES] = {0};
      for (int64_t n = 0; n < g->N; n++) {
        const float *xp = xd + (n * C + c) * HW, *dyp = dy + (n * C + c) * P;
        for (int64_t oh = oh0; oh < oh1; oh++)
          lanes_add_dot_strided(
              acc, dyp + oh * Wo + ow0,
              xp + (oh * s - pad + ki) * W + ow0 * s - pad + kj, ow1 - ow0, s);
      }
      w->grad[c * kk + kij] += (float)ct_vmath_total8(acc);
    }
  }
}

// The geometry of a depthwise conv with weight w over N images of C
// channels of H x W (NCHW or tokens), or false with an error naming op and
// input x.
static bool dw_geometry(const char *op, const ct_tensor *x, int64_t N,
                        int64_t C, int64_t H, int64_t W, const ct_tensor *w,
                        int stride, int padding, dw_geom *g) {
  if (!ct_check_f32(op, w, "weight")) return false;
  if (w->ndim != 4 || w->shape[0] != C || w->shape[1] != 1 ||
      w->shape[2] != w->shape[3] || w->shape[2] < 1) {
    ct_error(CT_ERR_SHAPE,
             "%s: weight %s does not fit input %s (want "
             "[%lld, 1, k, k], k >= 1)",
             op, ct_shape_of(w), ct_shape_of(x), (long long)C);
    return false;
  }
  if (stride < 1 || padding < 0) {
    ct_error(CT_ERR_ARG, "%s: stride %d must be >= 1 and padding %d >= 0", op,
             stride, padding);
    return false;
  }
  *g = (dw_geom){.N = N,
                 .C = C,
                 .H = H,
                 .W = W,
                 .k = w->shape[2],
                 .stride = stride,
                 .pad = padding};
  const int64_t hp = H + 2 * g->pad - g->k, wp = W + 2 * g->pad - g->k;
  if (hp < 0 || wp < 0) {
    ct_error(CT_ERR_SHAPE,
             "%s: kernel %lldx%lld is larger than input %s "
             "padded by %d",
             op, (long long)g->k, (long long)g->k, ct_shape_of(x), padding);
    return false;
  }
  g->Ho = hp / g->stride + 1;
  g->Wo = wp / g->stride + 1;
  return true;
}

ct_tensor *ct_conv2d_depthwise(ct_tensor *x, ct_tensor *w, int stride,
                               int padding) {
  const char *op = "conv2d_depthwise";
  if (!x || !w) return NULL;
  dw_geom g;
  if (!check_nchw(op, x) ||
      !dw_geometry(op, x, x->shape[0], x->shape[1], x->shape[2], x->shape[3], w,
                   stride, padding, &g))
    return NULL;
  const int64_t C = g.C;
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(g.N, C, g.Ho, g.Wo));
  if (!y) return NULL;
  ct_tensor *in[2] = {x, w};
  dw_geom *saved = NULL;
  if (ct_tape_wants(2, in)) {
    saved = ct_arena_alloc(sizeof *saved);
    if (!saved) return NULL;
    *saved = g;
  }
  const float *xd = ct_f32(x), *wd = ct_f32(w);
  float *yd = ct_f32(y);
  const int64_t HW = g.H * g.W, P = g.Ho * g.Wo, kk = g.k * g.k;
#pragma omp parallel for schedule(static) if (g.N * C * P * kk >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < g.N * C; pl++)
    dw_plane_forward(&g, xd + pl * HW, wd + (pl % C) * kk, yd + pl * P);
  if (ct_tape_record(op, conv2d_depthwise_backward, y, 2, in, saved) != CT_OK)
    return NULL;
  return y;
}

// ---- depthwise conv2d on tokens (channels last) -------------------------------
// x (N, H*W, C): token ih*W + iw of image n holds the C channels of map
// position (ih, iw); y (N, Ho*Wo, C) likewise. The same terms as the NCHW op
// above, added in the same order, so the same bits:
//   y   each output from 0.0f, adding w*x over (ki, kj) in order (float);
//   dx  each image in dw_plane_backward_input's order: output row oh, then
//       ki, kj, ow (float);
//   dw  per (channel, offset) LANES double partial sums over n, oh, ow, the
//       output at column ow in lane (ow - ow0) % LANES, ow0 the offset's first
//       valid column (lanes_add_dot_strided's lanes).
// But the inner loops run along the C contiguous channels of a token (CvT's
// 64..256) instead of along map rows of Wo <= 16 outputs. They read the
// weight transposed, wt (k*k, C), in the session's workspace. Threads take
// output rows (n, oh) for y, images for dx (each writes only its own) and
// blocks of CHANNEL_BLOCK channels for dw (single kernel offsets of a block
// when there are fewer blocks than threads) and the batch norm below, whose
// LANES x CHANNEL_BLOCK partial sums stay in L1.
enum { CHANNEL_BLOCK = 32 };

static inline int64_t channel_blocks(int64_t C) {
  return (C + CHANNEL_BLOCK - 1) / CHANNEL_BLOCK;
}

// The channels [c0, c0 + *nc) of block blk.
static inline int64_t block_channels(int64_t C, int64_t blk, int64_t *nc) {
  const int64_t c0 = blk * CHANNEL_BLOCK;
  *nc = C - c0 < CHANNEL_BLOCK ? C - c0 : CHANNEL_BLOCK;
  return c0;
}

// A block's per-channel sums: LANES partial sums of each channel side by
// side, so that adding a token's channels is one loop along them.
typedef double block_lanes[LANES][CHANNEL_BLOCK];

// ct_vmath_total8 of channel c's lanes.
static inline double block_lanes_total(double (*acc)[CHANNEL_BLOCK],
                                       int64_t c) {
  double lanes[LANES];
  for (int j = 0; j < LANES; j++) lanes[j] = acc[j][c];
  return ct_vmath_total8(lanes);
}

// The channels-last kernels below are compiled for the baseline ISA and
// again for AVX2 and AVX-512F (CT_TARGET_CLONES), whose wider vectors take
// more channels per instruction; the same operations (no FMA: C11 does not
// contract), so the same bits.

// wt (kk, C) = w (C, kk) transposed.
static void transpose_kernel(const float *w, int64_t C, int64_t kk, float *wt) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t kij = 0; kij < kk; kij++) wt[kij * C + c] = w[c * kk + kij];
}

// The workspace: wt (kk*C floats), then for the weight gradient every
// channel block's partial sums, one block_lanes per kernel offset.
static size_t dw_tokens_wt_bytes(const dw_geom *g) {
  const size_t b = (size_t)(g->k * g->k * g->C) * sizeof(float);
  return (b + 63) / 64 * 64;
}
static size_t dw_tokens_scratch_bytes(const dw_geom *g, bool backward) {
  const size_t acc =
      (size_t)(channel_blocks(g->C) * g->k * g->k) * sizeof(block_lanes);
  return dw_tokens_wt_bytes(g) + (backward ? acc : 0);
}

typedef struct dw_tokens_args {
  const dw_geom *g;
  const float *x, *wt, *dy;
  float *y, *dx, *dw;  // dw (C, kk)
  block_lanes *acc;    // the weight gradient's partial sums
} dw_tokens_args;

// y's output row (n, oh): every ow and channel.
CT_TARGET_CLONES static void dw_tokens_forward_row(const dw_tokens_args *a,
                                                   int64_t row) {
  const dw_geom *g = a->g;
  const int64_t C = g->C, k = g->k, s = g->stride, pad = g->pad;
  const int64_t n = row / g->Ho, oh = row % g->Ho;
  for (int64_t ow = 0; ow < g->Wo; ow++) {
    float *restrict yt = a->y + (row * g->Wo + ow) * C;
    for (int64_t c = 0; c < C; c++) yt[c] = 0.0f;
    for (int64_t ki = 0; ki < k; ki++) {
      const int64_t ih = oh * s - pad + ki;
      if (ih < 0 || ih >= g->H) continue;
      for (int64_t kj = 0; kj < k; kj++) {
        const int64_t iw = ow * s - pad + kj;
        if (iw < 0 || iw >= g->W) continue;
        const float *restrict xt = a->x + ((n * g->H + ih) * g->W + iw) * C;
        const float *restrict wk = a->wt + (ki * k + kj) * C;
        for (int64_t c = 0; c < C; c++) yt[c] += wk[c] * xt[c];
      }
    }
  }
}

// dx of image n += the adjoint of the forward pass applied to dy.
CT_TARGET_CLONES static void dw_tokens_backward_input(const dw_tokens_args *a,
                                                      int64_t n) {
  const dw_geom *g = a->g;
  const int64_t C = g->C, k = g->k, s = g->stride, pad = g->pad;
  for (int64_t oh = 0; oh < g->Ho; oh++) {
    const float *dyr = a->dy + (n * g->Ho + oh) * g->Wo * C;
    for (int64_t ki = 0; ki < k; ki++) {
      const int64_t ih = oh * s - pad + ki;
      if (ih < 0 || ih >= g->H) continue;
      float *dxr = a->dx + (n * g->H + ih) * g->W * C;
      for (int64_t kj = 0; kj < k; kj++) {
        int64_t ow0, ow1;
        valid_outputs(g->W, g->Wo, s, pad, kj, &ow0, &ow1);
        const float *restrict wk = a->wt + (ki * k + kj) * C;
        for (int64_t ow = ow0; ow < ow1; ow++) {
          float *restrict d = dxr + (ow * s - pad + kj) * C;
          const float *restrict src = dyr + ow * C;
          for (int64_t c = 0; c < C; c++) d[c] += wk[c] * src[c];
        }
      }
    }
  }
}

// dw of channel block blk += sum over n, oh, ow of dy x, for the kernel
// offsets ki*k + kj in [o0, o1). Each (channel, offset, lane) sum runs over
// n, oh, ow in order whatever the range, so the same bits for any split.
CT_TARGET_CLONES static void dw_tokens_backward_weight(const dw_tokens_args *a,
                                                       int64_t blk, int64_t o0,
                                                       int64_t o1) {
  const dw_geom *g = a->g;
  const int64_t C = g->C, k = g->k, kk = k * k, s = g->stride, pad = g->pad;
  int64_t nc;
  const int64_t c0 = block_channels(C, blk, &nc);
  block_lanes *acc = a->acc + blk * kk;  // acc[kij]: offset kij's sums
  memset(acc + o0, 0, (size_t)(o1 - o0) * sizeof *acc);
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t oh = 0; oh < g->Ho; oh++) {
      const float *dyr = a->dy + (n * g->Ho + oh) * g->Wo * C + c0;
      for (int64_t ki = o0 / k; ki <= (o1 - 1) / k; ki++) {
        const int64_t ih = oh * s - pad + ki;
        if (ih < 0 || ih >= g->H) continue;
        const float *xr = a->x + (n * g->H + ih) * g->W * C + c0;
        for (int64_t kj = 0; kj < k; kj++) {
          if (ki * k + kj < o0 || ki * k + kj >= o1) continue;
          int64_t ow0, ow1;
          valid_outputs(g->W, g->Wo, s, pad, kj, &ow0, &ow1);
          block_lanes *acc_k = &acc[ki * k + kj];
          for (int64_t ow = ow0; ow < ow1; ow++) {
            double *restrict l = (*acc_k)[(ow - ow0) % LANES];
            const float *restrict gt = dyr + ow * C;
            const float *restrict xt = xr + (ow * s - pad + kj) * C;
            for (int64_t c = 0; c < nc; c++) l[c] += (double)gt[c] * xt[c];
          }
        }
      }
    }
  for (int64_t kij = o0; kij < o1; kij++)
    for (int64_t c = 0; c < nc; c++)
      a->dw[(c0 + c) * kk + kij] += (float)block_lanes_total(acc[kij], c);
}

// x (N, H*W, C), w (C,1,k,k) -> y (N, Ho*Wo, C); see above.
static void conv2d_depthwise_tokens_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1];
  const dw_geom *g = node->saved;
  char *ws = ct_session_workspace();  // reserved by the forward pass
  float *wt = (float *)ws;
  transpose_kernel(ct_f32(w), g->C, g->k * g->k, wt);
  const dw_tokens_args a = {.g = g,
                            .x = ct_f32(x),
                            .wt = wt,
                            .dy = node->out->grad,
                            .dx = x->grad,
                            .dw = w->grad,
                            .acc = (block_lanes *)(ws + dw_tokens_wt_bytes(g))};
  const int64_t work = g->N * g->C * g->Ho * g->Wo * g->k * g->k;
  if (x->requires_grad) {
#pragma omp parallel for schedule(static) if (work >= PAR_MIN_WORK)
    for (int64_t n = 0; n < g->N; n++) dw_tokens_backward_input(&a, n);
  }
  if (!w->requires_grad) return;
  // A unit is a channel block with all its offsets, or, when the blocks do
  // not go round the threads (CvT's 64..384 channels are 2..12 blocks), one
  // offset of a block.
  const int64_t blocks = channel_blocks(g->C), kk = g->k * g->k;
  const bool by_offset = blocks < ct_get_threads();
  const int64_t units = by_offset ? blocks * kk : blocks;
#pragma omp parallel for schedule(static) if (work >= PAR_MIN_WORK)
  for (int64_t u = 0; u < units; u++) {
    if (by_offset)
      dw_tokens_backward_weight(&a, u / kk, u % kk, u % kk + 1);
    else
      dw_tokens_backward_weight(&a, u, 0, kk);
  }
}

ct_tensor *ct_conv2d_depthwise_tokens(ct_tensor *x, int64_t H, int64_t W,
                                      ct_tensor *w, int stride, int padding) {
  const char *op = "conv2d_depthwise_tokens";
  if (!x || !w) return NULL;
  if (!ct_check_f32(op, x, "input")) return NULL;
  if (x->ndim != 3) {
    ct_error(CT_ERR_SHAPE, "%s: input must be (B, H*W, C), got %s", op,
             ct_shape_of(x));
    return NULL;
  }
  if (H < 1 || W < 1 || H * W != x->shape[1]) {
    ct_error(CT_ERR_SHAPE,
             "%s: a %lldx%lld map does not hold the %lld tokens of input %s",
             op, (long long)H, (long long)W, (long long)x->shape[1],
             ct_shape_of(x));
    return NULL;
  }
  dw_geom g;
  if (!dw_geometry(op, x, x->shape[0], x->shape[2], H, W, w, stride, padding,
                   &g))
    return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(g.N, g.Ho * g.Wo, g.C));
  if (!y) return NULL;
  ct_tensor *in[2] = {x, w};
  dw_geom *saved = NULL;
  if (ct_tape_wants(2, in)) {
    saved = ct_arena_alloc(sizeof *saved);
    if (!saved) return NULL;
    *saved = g;
  }
  float *wt =
      ct_session_workspace_reserve(dw_tokens_scratch_bytes(&g, saved != NULL));
  if (!wt) return NULL;
  transpose_kernel(ct_f32(w), g.C, g.k * g.k, wt);
  const dw_tokens_args a = {.g = &g, .x = ct_f32(x), .wt = wt, .y = ct_f32(y)};
  const int64_t rows = g.N * g.Ho;
#pragma omp parallel for schedule(static) if (rows * g.Wo * g.C * g.k * g.k >= \
                                              PAR_MIN_WORK)
  for (int64_t row = 0; row < rows; row++) dw_tokens_forward_row(&a, row);
  if (ct_tape_record(op, conv2d_depthwise_tokens_backward, y, 2, in, saved) !=
      CT_OK)
    return NULL;
  return y;
}

// ---- batch norm -----------------------------------------------------------------
// x (N,C,H,W) seen as C channels of M = N*S values (S = H*W), channel c being
// rows x[(n*C + c)*S ..] for n < N:
//   y = (x - mean_c) * rstd_c * weight_c + bias_c,  rstd = 1 / sqrt(var + eps)
// computed as PyTorch does: y = x * a_c + b_c with a = rstd * weight,
// b = bias - mean * a. The tokens layout (below) computes the same per-channel
// quantities with the helpers here, so both give the same bits.

typedef struct bn_saved {
  double *mean, *rstd;  // (C): the statistics used (batch or running)
  bool training;
} bn_saved;

// The update of one running statistic (ct_bn_update): the same float and
// double operations whether applied at once or from a log.
static inline float running_update(float running, float momentum, double term) {
  return (float)((1.0 - momentum) * running + term);
}

// Channel c's batch statistics (biased var over M values) -> its running
// statistics' terms, recorded in terms (2C) when not NULL, else applied to
// rm and rv (either may be NULL).
static inline void bn_update_running(double *terms, float *rm, float *rv,
                                     int64_t C, int64_t c, float momentum,
                                     double mean, double var, int64_t M) {
  const double mean_term = momentum * mean;
  const double var_term = momentum * var * M / (M - 1);  // unbiased
  if (terms) {
    terms[c] = mean_term;
    terms[C + c] = var_term;
  } else {
    if (rm) rm[c] = running_update(rm[c], momentum, mean_term);
    if (rv) rv[c] = running_update(rv[c], momentum, var_term);
  }
}

// y = x * a + b for channel c; saves its mean and rstd for backward.
typedef struct bn_affine {
  float a, b;
} bn_affine;

static inline bn_affine bn_channel_affine(bn_saved *s, int64_t c, double mean,
                                          double var, float eps,
                                          const float *wd, const float *bd) {
  const double rstd = 1.0 / sqrt(var + eps);
  s->mean[c] = mean;
  s->rstd[c] = rstd;
  const double a = rstd * (wd ? wd[c] : 1.0);
  return (bn_affine){(float)a, (float)((bd ? bd[c] : 0.0) - mean * a)};
}

// training: with xhat = (x - mean) * rstd and g = dy * weight,
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over M)
// eval (mean, rstd constants): dx = g * rstd.
// Both: dweight = sum dy * xhat, dbias = sum dy.
// Computed as dx = k * (dy - gm - (x - mean) * proj) with k = rstd * weight;
// training: gm = sum_dy / M and the projection proj = rstd^2 * sum_dy_xmu / M
// (sum_dy_xmu = sum dy (x - mean)); eval: gm = proj = 0.
typedef struct bn_dx {
  float k, mean, gm, proj;
} bn_dx;

// Channel c's gradients from its sums: dweight and dbias added (dw, db may be
// NULL), dx's coefficients returned.
static inline bn_dx bn_channel_grads(const bn_saved *s, int64_t c, int64_t M,
                                     double sum_dy, double sum_dy_xmu,
                                     const float *wd, float *dw, float *db) {
  const double mean = s->mean[c], rstd = s->rstd[c];
  if (dw) dw[c] += (float)(sum_dy_xmu * rstd);
  if (db) db[c] += (float)sum_dy;
  const double k = rstd * (wd ? wd[c] : 1.0);
  return (bn_dx){
      .k = (float)k,
      .mean = (float)mean,
      .gm = s->training ? (float)(sum_dy / M) : 0.0f,
      .proj = s->training ? (float)(rstd * rstd * sum_dy_xmu / M) : 0.0f};
}

static void batchnorm_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
  const bn_saved *s = node->saved;
  const int64_t N = x->shape[0], C = x->shape[1];
  const int64_t S = x->shape[2] * x->shape[3], M = N * S;
  const float *xd = ct_f32(x), *dy = node->out->grad;
  const float *wd = w ? ct_f32(w) : NULL;
  float *dw = w && w->requires_grad ? w->grad : NULL;
  float *db = b && b->requires_grad ? b->grad : NULL;
  const bool dx = x->requires_grad;
#pragma omp parallel for schedule(static) if (M * C >= PAR_MIN_WORK)
  for (int64_t c = 0; c < C; c++) {
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    if (dw || db || (dx && s->training)) {
      double acc_g[LANES] = {0}, acc_gx[LANES] = {0};
      for (int64_t n = 0; n < N; n++) {
        const float *xr = xd + (n * C + c) * S, *gr = dy + (n * C + c) * S;
        lanes_add(acc_g, gr, S);
        lanes_add_dot_dev(acc_gx, gr, xr, S, s->mean[c]);
      }
      sum_dy = ct_vmath_total8(acc_g);
      sum_dy_xmu = ct_vmath_total8(acc_gx);
    }
    const bn_dx d = bn_channel_grads(s, c, M, sum_dy, sum_dy_xmu, wd, dw, db);
    if (!dx) continue;
    for (int64_t n = 0; n < N; n++) {
      const float *xr = xd + (n * C + c) * S, *gr = dy + (n * C + c) * S;
      float *dxr = x->grad + (n * C + c) * S;
      for (int64_t i = 0; i < S; i++)
        dxr[i] += d.k * (gr[i] - d.gm - (xr[i] - d.mean) * d.proj);
    }
  }
}

// Room for one more update of C channels in the log; its 2C terms, or NULL
// with an error naming op.
static double *log_reserve(const char *op, ct_bn_update_log *log, ct_tensor *rm,
                           ct_tensor *rv, int64_t C, float momentum) {
  if (log->n == log->cap) {
    int64_t cap = log->cap ? 2 * log->cap : 16;
    ct_bn_update *items = realloc(log->items, (size_t)cap * sizeof *items);
    if (!items) goto nomem;
    log->items = items;
    log->cap = cap;
  }
  if (log->n_values + 2 * C > log->cap_values) {
    int64_t cap = log->cap_values ? 2 * log->cap_values : 256;
    while (cap < log->n_values + 2 * C) cap *= 2;
    double *values = realloc(log->values, (size_t)cap * sizeof *values);
    if (!values) goto nomem;
    log->values = values;
    log->cap_values = cap;
  }
  log->items[log->n++] = (ct_bn_update){.running_mean = rm ? ct_f32(rm) : NULL,
                                        .running_var = rv ? ct_f32(rv) : NULL,
                                        .channels = C,
                                        .momentum = momentum,
                                        .first = log->n_values};
  log->n_values += 2 * C;
  return log->values + log->n_values - 2 * C;
nomem:
  ct_error(CT_ERR_NOMEM, "%s: out of memory for the update log", op);
  return NULL;
}

void ct_bn_update_log_clear(ct_bn_update_log *log) {
  log->n = 0;
  log->n_values = 0;
}

void ct_bn_update_log_apply(const ct_bn_update_log *log, const double *values) {
  for (int64_t k = 0; k < log->n; k++) {
    const ct_bn_update *u = &log->items[k];
    const double *terms = values + u->first;
    for (int64_t c = 0; c < u->channels; c++) {
      if (u->running_mean)
        u->running_mean[c] =
            running_update(u->running_mean[c], u->momentum, terms[c]);
      if (u->running_var)
        u->running_var[c] = running_update(u->running_var[c], u->momentum,
                                           terms[u->channels + c]);
    }
  }
}

void ct_bn_update_log_free(ct_bn_update_log *log) {
  free(log->items);
  free(log->values);
  *log = (ct_bn_update_log){0};
}

// What both layouts check and allocate, for x holding C channels of M values
// each: y (x's shape), the saved statistics *saved, and *terms, the log's 2C
// running-statistics terms when training with a log (else NULL). NULL with an
// error naming op.
static ct_tensor *bn_begin(const char *op, ct_tensor *x, int64_t C, int64_t M,
                           ct_tensor *weight, ct_tensor *bias,
                           ct_tensor *running_mean, ct_tensor *running_var,
                           bool training, float momentum, float eps,
                           ct_bn_update_log *log, bn_saved **saved,
                           double **terms) {
  if ((weight && !check_channel_param(op, weight, x, C, "weight")) ||
      (bias && !check_channel_param(op, bias, x, C, "bias")) ||
      (running_mean &&
       !check_channel_param(op, running_mean, x, C, "running_mean")) ||
      (running_var &&
       !check_channel_param(op, running_var, x, C, "running_var")))
    return NULL;
  if (!training && (!running_mean || !running_var)) {
    ct_error(CT_ERR_ARG,
             "%s: eval mode needs running_mean and "
             "running_var (input %s)",
             op, ct_shape_of(x));
    return NULL;
  }
  if (training && M <= 1) {
    ct_error(CT_ERR_SHAPE,
             "%s: training needs more than 1 value per "
             "channel, got input %s",
             op, ct_shape_of(x));
    return NULL;
  }
  if (!(eps >= 0.0f) || isinf(eps) || !(momentum >= 0.0f && momentum <= 1.0f)) {
    ct_error(CT_ERR_ARG,
             "%s: eps %g must be finite and >= 0, "
             "momentum %g in [0, 1]",
             op, (double)eps, (double)momentum);
    return NULL;
  }
  *terms = NULL;
  if (training && log &&
      !(*terms = log_reserve(op, log, running_mean, running_var, C, momentum)))
    return NULL;
  ct_tensor *y = ct_tensor_empty(CT_F32, x->ndim, x->shape);
  bn_saved *s = ct_arena_alloc(sizeof *s);
  double *stats = ct_arena_alloc((size_t)(2 * (C ? C : 1)) * sizeof(double));
  if (!y || !s || !stats) return NULL;
  *s = (bn_saved){.mean = stats, .rstd = stats + C, .training = training};
  *saved = s;
  return y;
}

// batchnorm2d; in training, the running-statistics update goes to `log`
// when it is not NULL, else it is applied at once.
static ct_tensor *batchnorm2d(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                              ct_tensor *running_mean, ct_tensor *running_var,
                              bool training, float momentum, float eps,
                              ct_bn_update_log *log) {
  const char *op = "batchnorm2d";
  if (!x || !check_nchw(op, x)) return NULL;
  const int64_t N = x->shape[0], C = x->shape[1];
  const int64_t S = x->shape[2] * x->shape[3], M = N * S;
  bn_saved *s;
  double *terms;
  ct_tensor *y = bn_begin(op, x, C, M, weight, bias, running_mean, running_var,
                          training, momentum, eps, log, &s, &terms);
  if (!y) return NULL;
  const float *xd = ct_f32(x);
  const float *wd = weight ? ct_f32(weight) : NULL;
  const float *bd = bias ? ct_f32(bias) : NULL;
  float *rm = running_mean ? ct_f32(running_mean) : NULL;
  float *rv = running_var ? ct_f32(running_var) : NULL;
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (M * C >= PAR_MIN_WORK)
  for (int64_t c = 0; c < C; c++) {
    double mean, var;
    if (training) {  // two passes: mean, then the biased variance
      double acc[LANES] = {0};
      for (int64_t n = 0; n < N; n++) lanes_add(acc, xd + (n * C + c) * S, S);
      mean = ct_vmath_total8(acc) / M;
      double acc2[LANES] = {0};
      for (int64_t n = 0; n < N; n++)
        lanes_add_sq_dev(acc2, xd + (n * C + c) * S, S, mean);
      var = ct_vmath_total8(acc2) / M;
      bn_update_running(terms, rm, rv, C, c, momentum, mean, var, M);
    } else {
      mean = rm[c];
      var = rv[c];
    }
    const bn_affine f = bn_channel_affine(s, c, mean, var, eps, wd, bd);
    for (int64_t n = 0; n < N; n++) {
      const float *xr = xd + (n * C + c) * S;
      float *yr = yd + (n * C + c) * S;
      for (int64_t i = 0; i < S; i++) yr[i] = xr[i] * f.a + f.b;
    }
  }
  if (CT_RECORD(op, batchnorm_backward, y, s, x, weight, bias) != CT_OK)
    return NULL;
  return y;
}

ct_tensor *ct_batchnorm2d(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                          ct_tensor *running_mean, ct_tensor *running_var,
                          bool training, float momentum, float eps) {
  return batchnorm2d(x, weight, bias, running_mean, running_var, training,
                     momentum, eps, NULL);
}

ct_tensor *ct_batchnorm2d_logged(ct_tensor *x, ct_tensor *weight,
                                 ct_tensor *bias, ct_tensor *running_mean,
                                 ct_tensor *running_var, float momentum,
                                 float eps, ct_bn_update_log *log) {
  return batchnorm2d(x, weight, bias, running_mean, running_var, true, momentum,
                     eps, log);
}

// ---- batch norm on tokens (channels last) ---------------------------------------
// x (N,T,C): channel c is column c of the N*T rows, M = N*T values. The
// per-channel sums of the NCHW op, over the same values in the same lanes
// (token t of each image in lane t % LANES, images in order), so the same
// bits; but threads take blocks of CHANNEL_BLOCK channels, and each block
// keeps its LANES partial sums side by side, (LANES, CHANNEL_BLOCK), so the
// inner loops run along the contiguous channels of a token.

typedef struct bn_tokens_args {
  const float *x, *dy, *w, *b;  // w, b NULL: 1 and 0
  float *y, *dx, *dw, *db;      // dx, dw, db NULL: not wanted
  float *rm, *rv;
  double *terms;  // the log's, or NULL
  bn_saved *s;
  int64_t N, T, C;
  float momentum, eps;
  bool training;
} bn_tokens_args;

// y of the channels of block blk, and their statistics.
CT_TARGET_CLONES static void bn_tokens_forward_block(const bn_tokens_args *a,
                                                     int64_t blk) {
  const int64_t C = a->C, M = a->N * a->T;
  int64_t nc;
  const int64_t c0 = block_channels(C, blk, &nc);
  const float *x = a->x + c0;
  double mean[CHANNEL_BLOCK], var[CHANNEL_BLOCK];
  if (a->training) {  // two passes: mean, then the biased variance
    block_lanes acc = {{0}};
    for (int64_t n = 0; n < a->N; n++)
      for (int64_t t = 0; t < a->T; t++) {
        const float *restrict xt = x + (n * a->T + t) * C;
        double *restrict l = acc[t % LANES];
        for (int64_t c = 0; c < nc; c++) l[c] += xt[c];
      }
    for (int64_t c = 0; c < nc; c++) mean[c] = block_lanes_total(acc, c) / M;
    memset(acc, 0, sizeof acc);
    for (int64_t n = 0; n < a->N; n++)
      for (int64_t t = 0; t < a->T; t++) {
        const float *restrict xt = x + (n * a->T + t) * C;
        double *restrict l = acc[t % LANES];
        for (int64_t c = 0; c < nc; c++) {
          double d = xt[c] - mean[c];
          l[c] += d * d;
        }
      }
    for (int64_t c = 0; c < nc; c++) {
      var[c] = block_lanes_total(acc, c) / M;
      bn_update_running(a->terms, a->rm, a->rv, C, c0 + c, a->momentum, mean[c],
                        var[c], M);
    }
  } else {
    for (int64_t c = 0; c < nc; c++) {
      mean[c] = a->rm[c0 + c];
      var[c] = a->rv[c0 + c];
    }
  }
  float fa[CHANNEL_BLOCK], fb[CHANNEL_BLOCK];
  for (int64_t c = 0; c < nc; c++) {
    const bn_affine f =
        bn_channel_affine(a->s, c0 + c, mean[c], var[c], a->eps, a->w, a->b);
    fa[c] = f.a;
    fb[c] = f.b;
  }
  for (int64_t r = 0; r < M; r++) {
    const float *restrict xr = x + r * C;
    float *restrict yr = a->y + r * C + c0;
    for (int64_t c = 0; c < nc; c++) yr[c] = xr[c] * fa[c] + fb[c];
  }
}

// The gradients of the channels of block blk (batchnorm_backward's).
CT_TARGET_CLONES static void bn_tokens_backward_block(const bn_tokens_args *a,
                                                      int64_t blk) {
  const int64_t C = a->C, M = a->N * a->T;
  int64_t nc;
  const int64_t c0 = block_channels(C, blk, &nc);
  const float *x = a->x + c0, *dy = a->dy + c0;
  double sum_dy[CHANNEL_BLOCK] = {0}, sum_dy_xmu[CHANNEL_BLOCK] = {0};
  if (a->dw || a->db || (a->dx && a->s->training)) {
    const double *mean = a->s->mean + c0;
    block_lanes acc_g = {{0}}, acc_gx = {{0}};
    for (int64_t n = 0; n < a->N; n++)
      for (int64_t t = 0; t < a->T; t++) {
        const float *restrict xt = x + (n * a->T + t) * C;
        const float *restrict gt = dy + (n * a->T + t) * C;
        double *restrict lg = acc_g[t % LANES], *restrict lgx =
                                                    acc_gx[t % LANES];
        for (int64_t c = 0; c < nc; c++) {
          lg[c] += gt[c];
          lgx[c] += gt[c] * (xt[c] - mean[c]);
        }
      }
    for (int64_t c = 0; c < nc; c++) {
      sum_dy[c] = block_lanes_total(acc_g, c);
      sum_dy_xmu[c] = block_lanes_total(acc_gx, c);
    }
  }
  float k[CHANNEL_BLOCK], mf[CHANNEL_BLOCK], gm[CHANNEL_BLOCK],
      proj[CHANNEL_BLOCK];
  for (int64_t c = 0; c < nc; c++) {
    const bn_dx d = bn_channel_grads(a->s, c0 + c, M, sum_dy[c], sum_dy_xmu[c],
                                     a->w, a->dw, a->db);
    k[c] = d.k;
    mf[c] = d.mean;
    gm[c] = d.gm;
    proj[c] = d.proj;
  }
  if (!a->dx) return;
  for (int64_t r = 0; r < M; r++) {
    const float *restrict xr = x + r * C, *restrict gr = dy + r * C;
    float *restrict dxr = a->dx + r * C + c0;
    for (int64_t c = 0; c < nc; c++)
      dxr[c] += k[c] * (gr[c] - gm[c] - (xr[c] - mf[c]) * proj[c]);
  }
}

// When there are fewer channel blocks than threads, a unit is one lane of
// a block instead of the whole block: lane l's sums run over the tokens
// t % LANES == l, images then tokens in order, with the block loops'
// expressions, so every lane holds the same bits either way. Then each
// block's channels get their coefficients, and the rows their outputs.

// Lane `lane` of block blk's sums of x (mean NULL) or of (x - mean)^2.
CT_TARGET_CLONES static void bn_tokens_lane_x(const bn_tokens_args *a,
                                              int64_t blk, int lane,
                                              const double *mean,
                                              double *restrict l) {
  const int64_t C = a->C;
  int64_t nc;
  const int64_t c0 = block_channels(C, blk, &nc);
  for (int64_t c = 0; c < nc; c++) l[c] = 0.0;
  for (int64_t n = 0; n < a->N; n++)
    for (int64_t t = lane; t < a->T; t += LANES) {
      const float *restrict xt = a->x + (n * a->T + t) * C + c0;
      if (mean) {
        for (int64_t c = 0; c < nc; c++) {
          double d = xt[c] - mean[c];
          l[c] += d * d;
        }
      } else {
        for (int64_t c = 0; c < nc; c++) l[c] += xt[c];
      }
    }
}

// Lane `lane` of block blk's sums of dy and of dy (x - mean).
CT_TARGET_CLONES static void bn_tokens_lane_grad(const bn_tokens_args *a,
                                                 int64_t blk, int lane,
                                                 double *restrict lg,
                                                 double *restrict lgx) {
  const int64_t C = a->C;
  int64_t nc;
  const int64_t c0 = block_channels(C, blk, &nc);
  const double *mean = a->s->mean + c0;
  for (int64_t c = 0; c < nc; c++) lg[c] = lgx[c] = 0.0;
  for (int64_t n = 0; n < a->N; n++)
    for (int64_t t = lane; t < a->T; t += LANES) {
      const float *restrict xt = a->x + (n * a->T + t) * C + c0;
      const float *restrict gt = a->dy + (n * a->T + t) * C + c0;
      for (int64_t c = 0; c < nc; c++) {
        lg[c] += gt[c];
        lgx[c] += gt[c] * (xt[c] - mean[c]);
      }
    }
}

// The forward pass by lanes; f holds 2C floats (a, then b, per channel),
// acc and acc2 a block_lanes per block.
static void bn_tokens_forward_lanes(const bn_tokens_args *a, block_lanes *acc,
                                    block_lanes *acc2, float *f) {
  const int64_t C = a->C, M = a->N * a->T, blocks = channel_blocks(C);
  const int64_t units = blocks * LANES;
#pragma omp parallel
  {
    if (a->training) {  // two passes: mean, then the biased variance
#pragma omp for schedule(static)
      for (int64_t u = 0; u < units; u++)
        bn_tokens_lane_x(a, u / LANES, (int)(u % LANES), NULL,
                         acc[u / LANES][u % LANES]);
#pragma omp for schedule(static)
      for (int64_t u = 0; u < units; u++) {
        int64_t nc;
        block_channels(C, u / LANES, &nc);
        double mean[CHANNEL_BLOCK];
        for (int64_t c = 0; c < nc; c++)
          mean[c] = block_lanes_total(acc[u / LANES], c) / M;
        bn_tokens_lane_x(a, u / LANES, (int)(u % LANES), mean,
                         acc2[u / LANES][u % LANES]);
      }
    }
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; blk++) {
      int64_t nc;
      const int64_t c0 = block_channels(C, blk, &nc);
      for (int64_t c = 0; c < nc; c++) {
        double mean, var;
        if (a->training) {
          mean = block_lanes_total(acc[blk], c) / M;
          var = block_lanes_total(acc2[blk], c) / M;
          bn_update_running(a->terms, a->rm, a->rv, C, c0 + c, a->momentum,
                            mean, var, M);
        } else {
          mean = a->rm[c0 + c];
          var = a->rv[c0 + c];
        }
        const bn_affine af =
            bn_channel_affine(a->s, c0 + c, mean, var, a->eps, a->w, a->b);
        f[c0 + c] = af.a;
        f[C + c0 + c] = af.b;
      }
    }
#pragma omp for schedule(static)
    for (int64_t r = 0; r < M; r++) {
      const float *restrict xr = a->x + r * C;
      float *restrict yr = a->y + r * C;
      for (int64_t c = 0; c < C; c++) yr[c] = xr[c] * f[c] + f[C + c];
    }
  }
}

// The backward pass by lanes; k holds 4C floats (k, mean, gm, proj per
// channel), acc_g and acc_gx a block_lanes per block.
static void bn_tokens_backward_lanes(const bn_tokens_args *a,
                                     block_lanes *acc_g, block_lanes *acc_gx,
                                     float *k) {
  const int64_t C = a->C, M = a->N * a->T, blocks = channel_blocks(C);
  const int64_t units = blocks * LANES;
  const bool sums = a->dw || a->db || (a->dx && a->s->training);
#pragma omp parallel
  {
    if (sums) {
#pragma omp for schedule(static)
      for (int64_t u = 0; u < units; u++)
        bn_tokens_lane_grad(a, u / LANES, (int)(u % LANES),
                            acc_g[u / LANES][u % LANES],
                            acc_gx[u / LANES][u % LANES]);
    }
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; blk++) {
      int64_t nc;
      const int64_t c0 = block_channels(C, blk, &nc);
      for (int64_t c = 0; c < nc; c++) {
        const double sum_dy = sums ? block_lanes_total(acc_g[blk], c) : 0.0;
        const double sum_dy_xmu =
            sums ? block_lanes_total(acc_gx[blk], c) : 0.0;
        const bn_dx d = bn_channel_grads(a->s, c0 + c, M, sum_dy, sum_dy_xmu,
                                         a->w, a->dw, a->db);
        k[c0 + c] = d.k;
        k[C + c0 + c] = d.mean;
        k[2 * C + c0 + c] = d.gm;
        k[3 * C + c0 + c] = d.proj;
      }
    }
    if (a->dx) {
      const float *kk = k, *mf = k + C, *gm = k + 2 * C, *proj = k + 3 * C;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < M; r++) {
        const float *restrict xr = a->x + r * C, *restrict gr = a->dy + r * C;
        float *restrict dxr = a->dx + r * C;
        for (int64_t c = 0; c < C; c++)
          dxr[c] += kk[c] * (gr[c] - gm[c] - (xr[c] - mf[c]) * proj[c]);
      }
    }
  }
}

// Whether the lanes path runs: more threads than channel blocks, on work
// worth a parallel region.
static bool bn_tokens_by_lanes(int64_t C, int64_t numel) {
  return numel >= PAR_MIN_WORK && channel_blocks(C) < ct_get_threads();
}

static void batchnorm_tokens_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
  const bn_tokens_args a = {.x = ct_f32(x),
                            .dy = node->out->grad,
                            .w = w ? ct_f32(w) : NULL,
                            .dx = x->requires_grad ? x->grad : NULL,
                            .dw = w && w->requires_grad ? w->grad : NULL,
                            .db = b && b->requires_grad ? b->grad : NULL,
                            .s = node->saved,
                            .N = x->shape[0],
                            .T = x->shape[1],
                            .C = x->shape[2]};
  const int64_t blocks = channel_blocks(a.C);
  if (bn_tokens_by_lanes(a.C, x->numel)) {
    ct_arena_mark mark = ct_arena_get_mark();
    block_lanes *acc = ct_arena_alloc((size_t)(2 * blocks) * sizeof *acc);
    float *k = ct_arena_alloc((size_t)(4 * a.C) * sizeof(float));
    if (acc && k) {
      bn_tokens_backward_lanes(&a, acc, acc + blocks, k);
      ct_arena_rewind(mark);
      return;
    }
    ct_arena_rewind(mark);  // no room for the lanes: by blocks
  }
#pragma omp parallel for schedule(static) if (x->numel >= PAR_MIN_WORK)
  for (int64_t blk = 0; blk < blocks; blk++) bn_tokens_backward_block(&a, blk);
}

// batchnorm_tokens; the running statistics as batchnorm2d's.
static ct_tensor *batchnorm_tokens(ct_tensor *x, ct_tensor *weight,
                                   ct_tensor *bias, ct_tensor *running_mean,
                                   ct_tensor *running_var, bool training,
                                   float momentum, float eps,
                                   ct_bn_update_log *log) {
  const char *op = "batchnorm_tokens";
  if (!x || !ct_check_f32(op, x, "input")) return NULL;
  if (x->ndim != 3) {
    ct_error(CT_ERR_SHAPE, "%s: input must be (B, T, C), got %s", op,
             ct_shape_of(x));
    return NULL;
  }
  const int64_t N = x->shape[0], T = x->shape[1], C = x->shape[2];
  bn_saved *s;
  double *terms;
  ct_tensor *y =
      bn_begin(op, x, C, N * T, weight, bias, running_mean, running_var,
               training, momentum, eps, log, &s, &terms);
  if (!y) return NULL;
  const bn_tokens_args a = {.x = ct_f32(x),
                            .w = weight ? ct_f32(weight) : NULL,
                            .b = bias ? ct_f32(bias) : NULL,
                            .y = ct_f32(y),
                            .rm = running_mean ? ct_f32(running_mean) : NULL,
                            .rv = running_var ? ct_f32(running_var) : NULL,
                            .terms = terms,
                            .s = s,
                            .N = N,
                            .T = T,
                            .C = C,
                            .momentum = momentum,
                            .eps = eps,
                            .training = training};
  const int64_t blocks = channel_blocks(C);
  bool done = false;
  if (bn_tokens_by_lanes(C, x->numel)) {
    ct_arena_mark mark = ct_arena_get_mark();
    block_lanes *acc = ct_arena_alloc((size_t)(2 * blocks) * sizeof *acc);
    float *f = ct_arena_alloc((size_t)(2 * C) * sizeof(float));
    if (acc && f) bn_tokens_forward_lanes(&a, acc, acc + blocks, f);
    done = acc && f;
    ct_arena_rewind(mark);  // without room for the lanes: by blocks
  }
  if (!done) {
#pragma omp parallel for schedule(static) if (x->numel >= PAR_MIN_WORK)
    for (int64_t blk = 0; blk < blocks; blk++) bn_tokens_forward_block(&a, blk);
  }
  if (CT_RECORD(op, batchnorm_tokens_backward, y, s, x, weight, bias) != CT_OK)
    return NULL;
  return y;
}

ct_tensor *ct_batchnorm_tokens(ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                               ct_tensor *running_mean, ct_tensor *running_var,
                               bool training, float momentum, float eps) {
  return batchnorm_tokens(x, weight, bias, running_mean, running_var, training,
                          momentum, eps, NULL);
}

ct_tensor *ct_batchnorm_tokens_logged(ct_tensor *x, ct_tensor *weight,
                                      ct_tensor *bias, ct_tensor *running_mean,
                                      ct_tensor *running_var, float momentum,
                                      float eps, ct_bn_update_log *log) {
  return batchnorm_tokens(x, weight, bias, running_mean, running_var, true,
                          momentum, eps, log);
}

// ---- pooling --------------------------------------------------------------------

// Output size of a k-window pooling along one dim; < 1 when it does not fit.
static int64_t pooled_size(int64_t size, int kernel, int stride, int pad) {
  int64_t span = size + 2 * (int64_t)pad - kernel;
  return span < 0 ? 0 : span / stride + 1;
}

static ct_tensor *pooled_output(const char *op, const ct_tensor *x, int kernel,
                                int stride, int padding, int64_t *Ho,
                                int64_t *Wo) {
  if (kernel < 1 || stride < 1 || padding < 0 || padding > kernel / 2) {
    ct_error(CT_ERR_ARG,
             "%s: kernel %d and stride %d must be >= 1, padding "
             "%d in [0, kernel/2]",
             op, kernel, stride, padding);
    return NULL;
  }
  *Ho = pooled_size(x->shape[2], kernel, stride, padding);
  *Wo = pooled_size(x->shape[3], kernel, stride, padding);
  if (*Ho < 1 || *Wo < 1) {
    ct_error(CT_ERR_SHAPE,
             "%s: window %dx%d (padding %d) does not fit input "
             "%s",
             op, kernel, kernel, padding, ct_shape_of(x));
    return NULL;
  }
  return ct_tensor_empty(CT_F32, CT_SHAPE(x->shape[0], x->shape[1], *Ho, *Wo));
}

// x (N,C,H,W) -> y (N,C,Ho,Wo); arg[j] is the index in its input plane of
// output j's maximum. Planes are independent: each backward plane adds its
// outputs' gradients in output order.
static void max_pool_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *y = node->out;
  if (!x->requires_grad) return;
  const int32_t *arg = node->saved;
  const int64_t planes = x->shape[0] * x->shape[1];
  const int64_t HW = x->shape[2] * x->shape[3], PO = y->shape[2] * y->shape[3];
  const float *dy = y->grad;
#pragma omp parallel for schedule(static) if (planes * PO >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t j = 0; j < PO; j++)
      x->grad[pl * HW + arg[pl * PO + j]] += dy[pl * PO + j];
}

ct_tensor *ct_max_pool2d(ct_tensor *x, int kernel, int stride, int padding) {
  const char *op = "max_pool2d";
  if (!x || !check_nchw(op, x)) return NULL;
  int64_t Ho, Wo;
  ct_tensor *y = pooled_output(op, x, kernel, stride, padding, &Ho, &Wo);
  if (!y) return NULL;
  const int64_t H = x->shape[2], W = x->shape[3];
  const int64_t planes = x->shape[0] * x->shape[1], PO = Ho * Wo;
  if (H * W > INT32_MAX) {
    ct_error(CT_ERR_SHAPE, "max_pool2d: input planes of %s are too large",
             ct_shape_of(x));
    return NULL;
  }
  int32_t *arg = NULL;
  if (ct_tape_wants(1, &x)) {
    arg = ct_arena_alloc((size_t)(planes * PO) * sizeof(int32_t));
    if (!arg) return NULL;
  }
  const float *xd = ct_f32(x);
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (planes * PO * kernel * kernel >= \
                                              PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *plane = xd + pl * H * W;
    for (int64_t oh = 0; oh < Ho; oh++) {
      int64_t h0 = oh * stride - padding, h1 = h0 + kernel;
      if (h0 < 0) h0 = 0;
      if (h1 > H) h1 = H;
      for (int64_t ow = 0; ow < Wo; ow++) {
        int64_t w0 = ow * stride - padding, w1 = w0 + kernel;
        if (w0 < 0) w0 = 0;
        if (w1 > W) w1 = W;
        // PyTorch's scan: the first strict maximum, and a NaN always wins.
        float m = -INFINITY;
        int64_t best = h0 * W + w0;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) {
            const float v = plane[ih * W + iw];
            if (v > m || isnan(v)) {
              m = v;
              best = ih * W + iw;
            }
          }
        yd[pl * PO + oh * Wo + ow] = m;
        if (arg) arg[pl * PO + oh * Wo + ow] = (int32_t)best;
      }
    }
  }
  if (CT_RECORD(op, max_pool_backward, y, arg, x) != CT_OK) return NULL;
  return y;
}

typedef struct avg_pool_saved {
  int kernel, stride;
} avg_pool_saved;

// dx[window] += dy / k^2 for each output, plane by plane in output order.
static void avg_pool_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *y = node->out;
  if (!x->requires_grad) return;
  const avg_pool_saved *s = node->saved;
  const int64_t k = s->kernel, st = s->stride;
  const int64_t planes = x->shape[0] * x->shape[1];
  const int64_t W = x->shape[3], HW = x->shape[2] * W;
  const int64_t Ho = y->shape[2], Wo = y->shape[3];
  const float *dy = y->grad;
  const float inv = 1.0f / (float)(k * k);
#pragma omp parallel for schedule(static) if (planes * Ho * Wo * k * k >= \
                                              PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++) {
    float *dx = x->grad + pl * HW;
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++) {
        const float g = dy[(pl * Ho + oh) * Wo + ow] * inv;
        for (int64_t ih = oh * st; ih < oh * st + k; ih++)
          for (int64_t iw = ow * st; iw < ow * st + k; iw++)
            dx[ih * W + iw] += g;
      }
  }
}

ct_tensor *ct_avg_pool2d(ct_tensor *x, int kernel, int stride) {
  const char *op = "avg_pool2d";
  if (!x || !check_nchw(op, x)) return NULL;
  int64_t Ho, Wo;
  ct_tensor *y = pooled_output(op, x, kernel, stride, 0, &Ho, &Wo);
  if (!y) return NULL;
  avg_pool_saved *s = NULL;
  if (ct_tape_wants(1, &x)) {
    s = ct_arena_alloc(sizeof *s);
    if (!s) return NULL;
    *s = (avg_pool_saved){.kernel = kernel, .stride = stride};
  }
  const int64_t planes = x->shape[0] * x->shape[1];
  const int64_t W = x->shape[3], HW = x->shape[2] * W;
  const int64_t k = kernel, st = stride;
  const float *xd = ct_f32(x);
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (planes * Ho * Wo * k * k >= \
                                              PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *plane = xd + pl * HW;
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++) {
        float sum = 0.0f;
        for (int64_t ih = oh * st; ih < oh * st + k; ih++)
          for (int64_t iw = ow * st; iw < ow * st + k; iw++)
            sum += plane[ih * W + iw];
        yd[(pl * Ho + oh) * Wo + ow] = sum / (float)(k * k);
      }
  }
  if (CT_RECORD(op, avg_pool_backward, y, s, x) != CT_OK) return NULL;
  return y;
}

// x (N,C,H,W) -> y (N,C): dx = dy / (H*W) on the whole plane.
static void global_avg_pool_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *y = node->out;
  if (!x->requires_grad) return;
  const int64_t planes = y->numel, S = x->shape[2] * x->shape[3];
  const float *dy = y->grad;
#pragma omp parallel for schedule(static) if (planes * S >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++) {
    const float g = (float)(dy[pl] / (double)S);
    float *dx = x->grad + pl * S;
    for (int64_t i = 0; i < S; i++) dx[i] += g;
  }
}

ct_tensor *ct_global_avg_pool2d(ct_tensor *x) {
  const char *op = "global_avg_pool2d";
  if (!x || !check_nchw(op, x)) return NULL;
  const int64_t S = x->shape[2] * x->shape[3];
  if (S < 1) {
    ct_error(CT_ERR_SHAPE, "global_avg_pool2d: input %s has empty planes",
             ct_shape_of(x));
    return NULL;
  }
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(x->shape[0], x->shape[1]));
  if (!y) return NULL;
  const int64_t planes = y->numel;
  const float *xd = ct_f32(x);
  float *yd = ct_f32(y);
#pragma omp parallel for schedule(static) if (planes * S >= PAR_MIN_WORK)
  for (int64_t pl = 0; pl < planes; pl++) {
    double acc[LANES] = {0};
    lanes_add(acc, xd + pl * S, S);
    yd[pl] = (float)(ct_vmath_total8(acc) / (double)S);
  }
  if (CT_RECORD(op, global_avg_pool_backward, y, NULL, x) != CT_OK) return NULL;
  return y;
}
