// The CNN ops and modules: conv2d forward and backward against a direct
// double-precision loop (strides, padding, the 1x1 path, a batch large enough
// to be split into chunks), the depthwise conv against conv2d with a
// block-diagonal weight, the tokens (channels-last) depthwise conv and batch
// norm bit for bit against the NCHW ones with transposes around them,
// bit-identical results at 1 and 2 threads, batch
// norm's running statistics and eval mode against hand computation, pooling
// values, argument errors, and the ResNet: shapes, torchvision parameter
// names and flags, init scale, and a loss that falls when fitting a batch.
#include "autograd/ops_conv.h"
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/threads.h"
#include "nn/conv.h"
#include "nn/resnet.h"
#include "optim/optim.h"
#include "tests/harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static ct_rng rng = {.seed = 7, .stream = 3, .offset = 0};

// ---- conv2d against a direct loop ---------------------------------------------

typedef struct conv_shape {
  int64_t N, C, H, W, O, kh, kw;
  int stride, padding;
  bool bias;
} conv_shape;

// y, and the gradients for upstream gradient dy, by the definition, in
// double. sum_abs[j] = sum of |terms| of output j, to scale the tolerance.
static void direct_conv(const conv_shape *s, const float *x, const float *w,
                        const float *b, const float *dy, int64_t Ho, int64_t Wo,
                        double *y, double *sum_abs, double *dx, double *dw,
                        double *db) {
  const int64_t C = s->C, H = s->H, W = s->W, O = s->O, kh = s->kh, kw = s->kw;
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t oh = 0; oh < Ho; oh++)
        for (int64_t ow = 0; ow < Wo; ow++) {
          const int64_t j = ((n * O + o) * Ho + oh) * Wo + ow;
          double acc = b ? b[o] : 0.0, mag = b ? fabs(b[o]) : 0.0;
          const double g = dy[j];
          for (int64_t c = 0; c < C; c++)
            for (int64_t ki = 0; ki < kh; ki++)
              for (int64_t kj = 0; kj < kw; kj++) {
                int64_t ih = oh * s->stride - s->padding + ki;
                int64_t iw = ow * s->stride - s->padding + kj;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t xi = ((n * C + c) * H + ih) * W + iw;
                const int64_t wi = ((o * C + c) * kh + ki) * kw + kj;
                acc += (double)w[wi] * x[xi];
                mag += fabs((double)w[wi] * x[xi]);
                dx[xi] += g * w[wi];
                dw[wi] += g * x[xi];
              }
          y[j] = acc;
          sum_abs[j] = mag;
          db[o] += g;
        }
}

// max over i of |got - want| / scale_i, where scale_i is sum_abs or 1.
static double worst_err(const float *got, const double *want,
                        const double *scale, int64_t n) {
  double worst = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs(got[i] - want[i]) / fmax(scale ? scale[i] : 1.0, 1.0);
    if (!(e <= worst)) worst = e;  // NaN sticks
  }
  return worst;
}

static double max_abs(const double *v, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
  return m;
}

static void check_conv_direct(const char *what, conv_shape s) {
  ct_tensor *x = ct_requires_grad(
      ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(s.N, s.C, s.H, s.W)));
  ct_tensor *w = ct_requires_grad(
      ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(s.O, s.C, s.kh, s.kw)));
  ct_tensor *b =
      s.bias
          ? ct_requires_grad(ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(s.O)))
          : NULL;
  ct_tensor *y = ct_conv2d(x, w, b, s.stride, s.padding);
  CHECK(y != NULL, "%s: %s", what, ct_last_error());
  if (!y) return;
  const int64_t Ho = (s.H + 2 * s.padding - s.kh) / s.stride + 1;
  const int64_t Wo = (s.W + 2 * s.padding - s.kw) / s.stride + 1;
  CHECK(y->ndim == 4 && y->shape[0] == s.N && y->shape[1] == s.O &&
            y->shape[2] == Ho && y->shape[3] == Wo,
        "%s: output %lld x %lld x %lld x %lld, want %lld x %lld", what,
        (long long)y->shape[0], (long long)y->shape[1], (long long)y->shape[2],
        (long long)y->shape[3], (long long)Ho, (long long)Wo);
  ct_tensor *dy = ct_tensor_randn(&rng, 0.0f, 1.0f, y->ndim, y->shape);
  CHECK(ct_backward_seeded(y, ct_f32(dy)) == CT_OK, "%s: backward: %s", what,
        ct_last_error());

  double *ref = calloc((size_t)(2 * y->numel + x->numel + w->numel + s.O),
                       sizeof(double));
  double *sum_abs = ref + y->numel, *dx = sum_abs + y->numel,
         *dw = dx + x->numel, *db = dw + w->numel;
  direct_conv(&s, ct_f32(x), ct_f32(w), b ? ct_f32(b) : NULL, ct_f32(dy), Ho,
              Wo, ref, sum_abs, dx, dw, db);
  // Float sums over K = C*kh*kw terms (and over N*Ho*Wo for dw): a relative
  // error of 1e-5 of the summed magnitudes is far below one missing term.
  double ey = worst_err(ct_f32(y), ref, sum_abs, y->numel);
  double ex =
      worst_err(x->grad, dx, NULL, x->numel) / fmax(1, max_abs(dx, x->numel));
  double ew =
      worst_err(w->grad, dw, NULL, w->numel) / fmax(1, max_abs(dw, w->numel));
  double eb =
      b ? worst_err(b->grad, db, NULL, s.O) / fmax(1, max_abs(db, s.O)) : 0.0;
  printf("  %-36s y %.1e  dx %.1e  dw %.1e  db %.1e\n", what, ey, ex, ew, eb);
  CHECK(ey <= 1e-5, "%s: forward error %.3g", what, ey);
  CHECK(ex <= 1e-5 && ew <= 1e-5 && eb <= 1e-5,
        "%s: gradient errors dx %.3g dw %.3g db %.3g", what, ex, ew, eb);
  free(ref);
  ct_arena_reset();
}

static void test_conv_direct(void) {
  printf("conv2d vs direct loop (relative errors)\n");
  check_conv_direct("3x3 s1 p1 bias",
                    (conv_shape){2, 3, 8, 8, 5, 3, 3, 1, 1, true});
  check_conv_direct("3x3 s2 p1, 9x7",
                    (conv_shape){3, 4, 9, 7, 6, 3, 3, 2, 1, false});
  check_conv_direct("3x3 s2 p0 bias, 8x8",
                    (conv_shape){2, 3, 8, 8, 4, 3, 3, 2, 0, true});
  check_conv_direct("5x5 s1 p2 bias",
                    (conv_shape){2, 2, 7, 6, 3, 5, 5, 1, 2, true});
  check_conv_direct("3x2 s1 p1",
                    (conv_shape){1, 3, 5, 6, 2, 3, 2, 1, 1, false});
  check_conv_direct("1x1 s1 p0 bias (direct path)",
                    (conv_shape){4, 8, 6, 5, 7, 1, 1, 1, 0, true});
  check_conv_direct("1x1 s2 p0 (downsample)",
                    (conv_shape){3, 8, 7, 7, 4, 1, 1, 2, 0, false});
  check_conv_direct("3x3 s1 p1 C=1 (stem), 28x28",
                    (conv_shape){4, 1, 28, 28, 8, 3, 3, 1, 1, false});
  // Chunks (the column scratch holds 2^19 floats): 72 x 576 column floats
  // per image make forward chunks of 12 + 12 + 1 images and backward ones of
  // 11 + 11 + 3; at 32 x 64 x 64 one image alone exceeds the bound.
  check_conv_direct("3x3 s1 p1, 25 x 8 x 24 x 24 (chunks)",
                    (conv_shape){25, 8, 24, 24, 8, 3, 3, 1, 1, true});
  check_conv_direct("3x3 s2 p1, 3 x 32 x 64 x 64 (1/chunk)",
                    (conv_shape){3, 32, 64, 64, 8, 3, 3, 2, 1, false});
  check_conv_direct("3x3 s1 p1, 3 x 32 x 64 x 64 (1/chunk)",
                    (conv_shape){3, 32, 64, 64, 8, 3, 3, 1, 1, true});
}

// ---- depthwise conv against the dense one ---------------------------------------

// max |a - b| / max |b|
static double rel_diff(const float *a, const float *b, int64_t n) {
  double d = 0.0, m = 0.0;
  for (int64_t i = 0; i < n; i++) {
    d = fmax(d, fabs((double)a[i] - b[i]));
    m = fmax(m, fabs((double)b[i]));
  }
  return d / fmax(m, 1e-30);
}

// ct_conv2d_depthwise(x, w) and ct_conv2d(x, W) with W (C, C, k, k) zero
// but W[c][c] = w[c]: the same output and input gradient, and dw the
// diagonal of dW (up to the summation order).
static void check_depthwise(const char *what, int64_t N, int64_t C, int64_t H,
                            int64_t W, int64_t k, int stride, int padding) {
  ct_rng r = ct_rng_make(11, (uint64_t)(H * 100 + W));
  ct_tensor *x = ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(N, C, H, W));
  ct_tensor *w = ct_tensor_randn(&r, 0.0f, 0.5f, CT_SHAPE(C, 1, k, k));
  ct_tensor *dense = ct_tensor_zeros(CT_F32, CT_SHAPE(C, C, k, k));
  for (int64_t c = 0; c < C; c++)
    memcpy(ct_f32(dense) + (c * C + c) * k * k, ct_f32(w) + c * k * k,
           (size_t)(k * k) * sizeof(float));
  ct_tensor *xd = ct_requires_grad(ct_tensor_copy(x));
  ct_requires_grad(x);
  ct_requires_grad(w);
  ct_requires_grad(dense);
  ct_tensor *y = ct_conv2d_depthwise(x, w, stride, padding);
  ct_tensor *yd = ct_conv2d(xd, dense, NULL, stride, padding);
  CHECK(y && yd, "%s: %s", what, ct_last_error());
  if (!y || !yd) return;
  CHECK(y->ndim == 4 && y->shape[2] == yd->shape[2] &&
            y->shape[3] == yd->shape[3],
        "%s: output shape", what);
  // The same upstream gradient for both: L = sum(y * r) + sum(yd * r), one
  // backward pass.
  ct_tensor *rr = ct_tensor_randn(&r, 0.0f, 1.0f, y->ndim, y->shape);
  ct_tensor *loss = ct_add(ct_sum(ct_mul(y, rr)), ct_sum(ct_mul(yd, rr)));
  ct_status st = loss ? ct_backward(loss) : ct_last_status();
  CHECK(st == CT_OK, "%s backward: %s", what, ct_last_error());
  if (st != CT_OK) return;
  float *diag = malloc((size_t)(C * k * k) * sizeof(float));
  for (int64_t c = 0; c < C; c++)
    memcpy(diag + c * k * k, dense->grad + (c * C + c) * k * k,
           (size_t)(k * k) * sizeof(float));
  const double ey = rel_diff(ct_f32(y), ct_f32(yd), y->numel);
  const double ex = rel_diff(x->grad, xd->grad, x->numel);
  const double ew = rel_diff(w->grad, diag, w->numel);
  printf("  %-36s y %.1e  dx %.1e  dw %.1e\n", what, ey, ex, ew);
  CHECK(ey <= 1e-6 && ex <= 1e-6 && ew <= 1e-5, "%s: y %.2e dx %.2e dw %.2e",
        what, ey, ex, ew);
  free(diag);
  ct_arena_reset();
}

static void test_depthwise(void) {
  printf("depthwise conv against conv2d\n");
  check_depthwise("3x3 s1 p1, 7x9", 3, 5, 7, 9, 3, 1, 1);
  check_depthwise("3x3 s2 p1, 7x9", 3, 5, 7, 9, 3, 2, 1);
  check_depthwise("3x3 s2 p1, 16x16 (parallel)", 8, 32, 16, 16, 3, 2, 1);
  check_depthwise("5x5 s2 p2, 6x11", 2, 4, 6, 11, 5, 2, 2);
  check_depthwise("3x3 s1 p0, 5x5", 2, 3, 5, 5, 3, 1, 0);
}

// ---- determinism across thread counts -------------------------------------------

typedef struct snapshot {
  float *data;
  size_t n, cap;
} snapshot;

static void snap(snapshot *s, const float *v, int64_t n) {
  if (s->n + (size_t)n > s->cap) {
    s->cap = 2 * (s->n + (size_t)n);
    s->data = realloc(s->data, s->cap * sizeof(float));
  }
  memcpy(s->data + s->n, v, (size_t)n * sizeof(float));
  s->n += (size_t)n;
}

// Every op of the file, big enough that each takes its parallel path: all
// outputs and all input gradients go into `out`.
static void run_ops(snapshot *out) {
  ct_rng r = ct_rng_make(5, 9);
  ct_tensor *x = ct_requires_grad(
      ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(8, 16, 20, 20)));
  ct_tensor *w =
      ct_requires_grad(ct_tensor_randn(&r, 0.0f, 0.2f, CT_SHAPE(24, 16, 3, 3)));
  ct_tensor *b =
      ct_requires_grad(ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(24)));
  ct_tensor *w1 =
      ct_requires_grad(ct_tensor_randn(&r, 0.0f, 0.2f, CT_SHAPE(12, 24, 1, 1)));
  ct_tensor *bw =
      ct_requires_grad(ct_tensor_rand(&r, 0.5f, 1.5f, CT_SHAPE(24)));
  ct_tensor *bb =
      ct_requires_grad(ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(24)));
  ct_tensor *rm = ct_tensor_zeros(CT_F32, CT_SHAPE(12));
  ct_tensor *rv = ct_tensor_full(CT_F32, 1.0, CT_SHAPE(12));
  ct_tensor *outs[7];
  outs[0] = ct_conv2d(x, w, b, 2, 1);  // (8,24,10,10)
  outs[1] = ct_batchnorm2d(outs[0], bw, bb, NULL, NULL, true, 0.1f, 1e-5f);
  outs[2] = ct_conv2d(ct_max_pool2d(outs[1], 3, 1, 1), w1, NULL, 1, 0);
  outs[3] = ct_batchnorm2d(outs[2], NULL, NULL, rm, rv, false, 0.1f, 1e-5f);
  outs[4] = ct_batchnorm2d(outs[3], NULL, NULL, rm, rv, true, 0.1f, 1e-5f);
  outs[5] = ct_avg_pool2d(outs[4], 2, 2);
  outs[6] = ct_global_avg_pool2d(outs[5]);
  ct_tensor *loss = ct_mean(ct_mul(outs[6], outs[6]));
  CHECK(loss && ct_backward(loss) == CT_OK, "ops: %s", ct_last_error());
  if (!loss) return;
  for (int i = 0; i < 7; i++) snap(out, ct_f32(outs[i]), outs[i]->numel);
  ct_tensor *leaves[6] = {x, w, b, w1, bw, bb};
  for (int i = 0; i < 6; i++) snap(out, leaves[i]->grad, leaves[i]->numel);
  snap(out, ct_f32(rm), 12);
  snap(out, ct_f32(rv), 12);
  ct_arena_reset();
}

// The depthwise conv, large enough for its parallel paths, strides 1 and 2:
// outputs and all gradients.
static void run_depthwise(snapshot *out) {
  ct_rng r = ct_rng_make(6, 1);
  ct_tensor *x = ct_requires_grad(
      ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(8, 32, 15, 17)));
  ct_tensor *w1 =
      ct_requires_grad(ct_tensor_randn(&r, 0.0f, 0.3f, CT_SHAPE(32, 1, 3, 3)));
  ct_tensor *w2 =
      ct_requires_grad(ct_tensor_randn(&r, 0.0f, 0.3f, CT_SHAPE(32, 1, 3, 3)));
  ct_tensor *a = ct_conv2d_depthwise(x, w1, 1, 1);
  ct_tensor *b = ct_conv2d_depthwise(a, w2, 2, 1);
  ct_tensor *loss = ct_mean(ct_mul(b, b));
  CHECK(loss && ct_backward(loss) == CT_OK, "depthwise: %s", ct_last_error());
  if (!loss) return;
  snap(out, ct_f32(a), a->numel);
  snap(out, ct_f32(b), b->numel);
  snap(out, x->grad, x->numel);
  snap(out, w1->grad, w1->numel);
  snap(out, w2->grad, w2->numel);
  ct_arena_reset();
}

static ct_nn_resnet_config small_resnet(void) {
  return (ct_nn_resnet_config){.in_channels = 3,
                               .num_classes = 5,
                               .width = 16,
                               .stages = 2,
                               .blocks = 1};
}

// A ResNet training step: logits, every parameter gradient and the updated
// running statistics.
static void run_resnet(snapshot *out) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_resnet m;
  ct_rng init = ct_rng_make(3, 0);
  ct_nn_resnet_config cfg = small_resnet();
  CHECK(ct_nn_resnet_init(&m, &p, "", &cfg, &init) == CT_OK, "init: %s",
        ct_last_error());
  ct_rng r = ct_rng_make(8, 8);
  ct_tensor *x = ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(16, 3, 16, 16));
  int32_t labels[16];
  for (int i = 0; i < 16; i++) labels[i] = i % 5;
  ct_nn_ctx ctx = ct_nn_train_ctx(1, 0);
  ct_tensor *logits = ct_nn_resnet_forward(&m, &ctx, x);
  ct_tensor *loss = ct_cross_entropy(
      logits, ct_tensor_from(CT_I32, labels, CT_SHAPE(16)), NULL);
  ct_params_zero_grad(&p);
  CHECK(loss && ct_backward(loss) == CT_OK, "resnet: %s", ct_last_error());
  if (loss) {
    snap(out, ct_f32(logits), logits->numel);
    snap(out, p.grad, (int64_t)p.count);
    snap(out, p.data, (int64_t)p.count);
  }
  ct_arena_reset();
  ct_nn_resnet_free(&m);
  ct_params_free(&p);
}

static void check_threads(const char *what, void (*fn)(snapshot *)) {
  const int saved = ct_get_threads();
  snapshot one = {0}, two = {0};
  ct_set_threads(1);
  fn(&one);
  ct_set_threads(2);
  fn(&two);
  ct_set_threads(saved);
  size_t diff = 0;
  for (size_t i = 0; i < one.n && i < two.n; i++)
    diff += memcmp(&one.data[i], &two.data[i], sizeof(float)) != 0;
  printf("  %-36s %zu values, %zu differ\n", what, one.n, diff);
  CHECK(one.n == two.n && one.n > 0 && diff == 0,
        "%s: 1 vs 2 threads: %zu of %zu values differ", what, diff, one.n);
  free(one.data);
  free(two.data);
}

// ---- the tokens (channels-last) ops against the NCHW ones -----------------------

typedef enum { BN_TRAIN, BN_EVAL, BN_LOGGED } bn_mode;
static const char *const bn_mode_names[] = {"train", "eval", "logged"};

typedef struct tokens_case {
  int64_t B, C, H, W;
  int stride, padding;
  bn_mode mode;
} tokens_case;

// One layout's run of CvT's projection, tokens (B, H*W, C) -> depthwise conv
// -> batch norm -> tokens, and a backward pass: outputs, gradients, running
// statistics and logged terms go into `out`. channels_last: the tokens ops;
// else the NCHW ops with the transposes around them (nn/cvt.c's old path).
// False when the ops refuse the shapes (an error is recorded).
static bool run_projection(const tokens_case *tc, bool channels_last,
                           snapshot *out) {
  const int64_t B = tc->B, C = tc->C, H = tc->H, W = tc->W;
  ct_rng r = ct_rng_make(17, (uint64_t)(((B * 1000 + C) * 100 + H) * 100 + W));
  ct_tensor *x =
      ct_requires_grad(ct_tensor_randn(&r, 0.3f, 1.5f, CT_SHAPE(B, H * W, C)));
  ct_tensor *w =
      ct_requires_grad(ct_tensor_randn(&r, 0.0f, 0.4f, CT_SHAPE(C, 1, 3, 3)));
  ct_tensor *bw = ct_requires_grad(ct_tensor_rand(&r, 0.5f, 1.5f, CT_SHAPE(C)));
  ct_tensor *bb =
      ct_requires_grad(ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(C)));
  ct_tensor *rm = ct_tensor_randn(&r, 0.0f, 0.5f, CT_SHAPE(C));
  ct_tensor *rv = ct_tensor_rand(&r, 0.5f, 2.0f, CT_SHAPE(C));
  const bool training = tc->mode != BN_EVAL;
  ct_bn_update_log log = {0};
  ct_bn_update_log *lg = tc->mode == BN_LOGGED ? &log : NULL;
  ct_tensor *y;
  if (channels_last) {
    y = ct_conv2d_depthwise_tokens(x, H, W, w, tc->stride, tc->padding);
    y = lg ? ct_batchnorm_tokens_logged(y, bw, bb, rm, rv, 0.1f, 1e-5f, lg)
           : ct_batchnorm_tokens(y, bw, bb, rm, rv, training, 0.1f, 1e-5f);
  } else {
    ct_tensor *map = ct_reshape(ct_transpose(x, 1, 2), CT_SHAPE(B, C, H, W));
    y = ct_conv2d_depthwise(map, w, tc->stride, tc->padding);
    y = lg ? ct_batchnorm2d_logged(y, bw, bb, rm, rv, 0.1f, 1e-5f, lg)
           : ct_batchnorm2d(y, bw, bb, rm, rv, training, 0.1f, 1e-5f);
    y = y ? ct_transpose(ct_reshape(y, CT_SHAPE(B, C, -1)), 1, 2) : NULL;
  }
  ct_tensor *dy = y ? ct_tensor_randn(&r, 0.0f, 1.0f, y->ndim, y->shape) : NULL;
  ct_tensor *loss = y ? ct_sum(ct_mul(y, dy)) : NULL;
  const bool ok = loss && ct_backward(loss) == CT_OK;
  if (ok) {
    snap(out, ct_f32(y), y->numel);
    ct_tensor *leaves[4] = {x, w, bw, bb};
    for (int i = 0; i < 4; i++) snap(out, leaves[i]->grad, leaves[i]->numel);
    snap(out, ct_f32(rm), C);
    snap(out, ct_f32(rv), C);
    if (lg) {  // the terms as floats, two per double, then applied
      snap(out, (const float *)log.values, 2 * log.n_values);
      ct_bn_update_log_apply(&log, log.values);
      snap(out, ct_f32(rm), C);
      snap(out, ct_f32(rv), C);
    }
  }
  ct_bn_update_log_free(&log);
  ct_arena_reset();
  return ok;
}

// Values of a and b that differ in their bits; SIZE_MAX if the counts differ.
static size_t bits_differ(const snapshot *a, const snapshot *b) {
  if (a->n != b->n) return SIZE_MAX;
  size_t diff = 0;
  for (size_t i = 0; i < a->n; i++)
    diff += memcmp(&a->data[i], &b->data[i], sizeof(float)) != 0;
  return diff;
}

// The tokens ops give the bits of the NCHW ops with the transposes around
// them (outputs, dx, dweight, the batch norm's dweight and dbias, running
// statistics, logged terms) for maps of 3x3 to 16x16, strides 1 and 2,
// padding 0 and 1, channel counts below, at and past the vector blocks, one
// or three images, the three batch norm modes; and at 1, 2 and 3 threads
// (fewer channel blocks than threads split the weight gradient by kernel
// offset: C = 5 at 2 threads, C = 5 and 64 at 3).
static void test_tokens_layout(void) {
  printf("tokens (channels-last) ops against NCHW + transposes\n");
  static const int64_t maps[][2] = {{4, 5}, {7, 7}, {16, 16}, {3, 3}};
  static const int64_t channels[] = {5, 64, 67}, batches[] = {1, 3};
  const int saved = ct_get_threads();
  for (int threads = 1; threads <= 3; threads++) {
    ct_set_threads(threads);
    int cases = 0, refused = 0;
    size_t values = 0, differ = 0;
    for (int m = 0; m < 4; m++)
      for (int stride = 1; stride <= 2; stride++)
        for (int padding = 0; padding <= 1; padding++)
          for (int ci = 0; ci < 3; ci++)
            for (int bi = 0; bi < 2; bi++)
              for (int mode = BN_TRAIN; mode <= BN_LOGGED; mode++) {
                const tokens_case tc = {.B = batches[bi],
                                        .C = channels[ci],
                                        .H = maps[m][0],
                                        .W = maps[m][1],
                                        .stride = stride,
                                        .padding = padding,
                                        .mode = mode};
                snapshot tok = {0}, ref = {0};
                const bool ok_tok = run_projection(&tc, true, &tok);
                const bool ok_ref = run_projection(&tc, false, &ref);
                // One value per channel (a 3x3 map, no padding, one
                // image) is refused by both in training.
                CHECK(ok_tok == ok_ref,
                      "%lldx%lld s%d p%d C%lld B%lld %s: tokens %s, NCHW %s",
                      (long long)tc.H, (long long)tc.W, stride, padding,
                      (long long)tc.C, (long long)tc.B, bn_mode_names[mode],
                      ok_tok ? "ran" : "refused", ok_ref ? "ran" : "refused");
                const size_t d = bits_differ(&tok, &ref);
                CHECK(d == 0,
                      "%lldx%lld s%d p%d C%lld B%lld %s, %d threads: %zu of "
                      "%zu values differ",
                      (long long)tc.H, (long long)tc.W, stride, padding,
                      (long long)tc.C, (long long)tc.B, bn_mode_names[mode],
                      threads, d, ref.n);
                cases++;
                refused += !ok_ref;
                values += ref.n;
                differ += d == SIZE_MAX ? ref.n : d;
                free(tok.data);
                free(ref.data);
                ct_clear_error();
              }
    printf(
        "  %d thread(s): %d cases (%d refused by both), %zu values, %zu "
        "differ\n",
        threads, cases, refused, values, differ);
  }
  ct_set_threads(saved);
}

// The tokens ops, big enough for their parallel paths (a channel tail
// included), in each batch norm mode.
static void run_tokens(snapshot *out) {
  for (int mode = BN_TRAIN; mode <= BN_LOGGED; mode++) {
    const tokens_case tc = {8, 67, 16, 16, 1, 1, mode};
    const tokens_case strided = {8, 131, 15, 16, 2, 1, mode};
    CHECK(run_projection(&tc, true, out) && run_projection(&strided, true, out),
          "tokens ops: %s", ct_last_error());
  }
}

// ---- batch norm statistics ------------------------------------------------------

static void test_batchnorm_stats(void) {
  enum { N = 2, C = 2, S = 3 };
  const float xs[N * C * S] = {1, 2, 4, -1, 0, 3, 2, 5, 7, 2, 2, -4};
  const float w[C] = {1.5f, 0.5f}, b[C] = {0.25f, -1.0f};
  float rm0[C] = {0.5f, -0.2f}, rv0[C] = {2.0f, 0.7f};
  ct_tensor *x = ct_tensor_from(CT_F32, xs, CT_SHAPE(N, C, 1, S));
  ct_tensor *weight = ct_tensor_from(CT_F32, w, CT_SHAPE(C));
  ct_tensor *bias = ct_tensor_from(CT_F32, b, CT_SHAPE(C));
  ct_tensor *rm = ct_tensor_from(CT_F32, rm0, CT_SHAPE(C));
  ct_tensor *rv = ct_tensor_from(CT_F32, rv0, CT_SHAPE(C));
  const float momentum = 0.1f, eps = 1e-5f;

  // eval first: y = (x - rm) / sqrt(rv + eps) * w + b, stats untouched
  ct_tensor *y = ct_batchnorm2d(x, weight, bias, rm, rv, false, momentum, eps);
  CHECK(y != NULL, "bn eval: %s", ct_last_error());
  double err = 0.0;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int s = 0; s < S; s++) {
        int i = (n * C + c) * S + s;
        double want =
            (xs[i] - rm0[c]) / sqrt(rv0[c] + (double)eps) * w[c] + b[c];
        err = fmax(err, fabs(ct_f32(y)[i] - want));
      }
  CHECK(err < 1e-6, "bn eval: max error %.3g", err);
  CHECK(ct_f32(rm)[0] == rm0[0] && ct_f32(rv)[1] == rv0[1],
        "bn eval changed the running stats");

  // training: batch statistics, running stats updated with unbiased var
  y = ct_batchnorm2d(x, weight, bias, rm, rv, true, momentum, eps);
  CHECK(y != NULL, "bn train: %s", ct_last_error());
  double yerr = 0.0;
  for (int c = 0; c < C; c++) {
    double sum = 0.0, sq = 0.0;
    for (int n = 0; n < N; n++)
      for (int s = 0; s < S; s++) sum += xs[(n * C + c) * S + s];
    double mean = sum / (N * S);
    for (int n = 0; n < N; n++)
      for (int s = 0; s < S; s++) {
        double d = xs[(n * C + c) * S + s] - mean;
        sq += d * d;
      }
    double var = sq / (N * S), unbiased = sq / (N * S - 1);
    for (int n = 0; n < N; n++)
      for (int s = 0; s < S; s++) {
        int i = (n * C + c) * S + s;
        double want = (xs[i] - mean) / sqrt(var + eps) * w[c] + b[c];
        yerr = fmax(yerr, fabs(ct_f32(y)[i] - want));
      }
    CHECK_CLOSE(ct_f32(rm)[c], (1 - momentum) * rm0[c] + momentum * mean, 1e-6,
                "running_mean");
    CHECK_CLOSE(ct_f32(rv)[c], (1 - momentum) * rv0[c] + momentum * unbiased,
                1e-6, "running_var (unbiased)");
  }
  CHECK(yerr < 1e-5, "bn train: max error %.3g", yerr);

  // Eval after the update uses the new running stats (module level).
  ct_params p;
  ct_params_init(&p);
  ct_nn_batchnorm2d bn;
  CHECK(ct_nn_batchnorm2d_init(&bn, &p, "bn", C) == CT_OK, "%s",
        ct_last_error());
  ct_nn_ctx train = ct_nn_train_ctx(0, 0), eval = ct_nn_eval_ctx();
  ct_tensor *yt = ct_nn_batchnorm2d_forward(&bn, &train, x);
  CHECK(yt && fabsf(ct_f32(bn.running_mean)[0] - 0.1f * 3.5f) < 1e-6f,
        "module running_mean %g, want 0.35", ct_f32(bn.running_mean)[0]);
  ct_tensor *ye = ct_nn_batchnorm2d_forward(&bn, &eval, x);
  ct_tensor *yn = ct_nn_batchnorm2d_forward(&bn, NULL, x);
  const float rm1 = ct_f32(bn.running_mean)[1], rv1 = ct_f32(bn.running_var)[1];
  CHECK(ye && yn &&
            fabsf(ct_f32(ye)[S] - (float)((xs[S] - rm1) / sqrt(rv1 + 1e-5))) <
                1e-5f,
        "module eval output %g", ye ? ct_f32(ye)[S] : 0.0f);
  CHECK(ye && yn &&
            memcmp(ct_f32(ye), ct_f32(yn), sizeof(float) * N * C * S) == 0,
        "a NULL ctx is eval mode");
  ct_params_free(&p);
  ct_arena_reset();
}

// ---- pooling values ----------------------------------------------------------------

// Running statistics recorded (ct_batchnorm2d_logged) and applied later
// in order: the outputs and the running statistics of the in-place
// updates, bit for bit, also when the terms come from another log of the
// same layout (a micro-batch run by another process).
static void test_batchnorm_log(void) {
  enum { N = 3, C = 4, H = 5, W = 6, STEPS = 3 };
  ct_rng r = ct_rng_make(11, 2);
  ct_tensor *x[STEPS];
  for (int k = 0; k < STEPS; k++) {
    x[k] = ct_tensor_empty(CT_F32, CT_SHAPE(N, C, H, W));
    ct_rng_fill_normal(&r, ct_f32(x[k]), x[k]->numel, (float)k, 1.0f + k);
  }
  ct_tensor *rm[2], *rv[2];
  for (int j = 0; j < 2; j++) {
    rm[j] = ct_tensor_zeros(CT_F32, CT_SHAPE(C));
    rv[j] = ct_tensor_zeros(CT_F32, CT_SHAPE(C));
    for (int c = 0; c < C; c++) ct_f32(rv[j])[c] = 1.0f + 0.25f * c;
  }
  // Two batch norms per micro-batch, in place (j = 0) or logged (j = 1).
  ct_bn_update_log log = {0};
  double *terms = NULL;
  int64_t per = 0;
  int same_y = 1;
  for (int k = 0; k < STEPS; k++) {
    ct_bn_update_log_clear(&log);
    ct_tensor *a =
        ct_batchnorm2d(x[k], NULL, NULL, rm[0], rv[0], true, 0.1f, 1e-5f);
    a = ct_batchnorm2d(ct_relu(a), NULL, NULL, rm[0], rv[0], true, 0.3f, 1e-5f);
    ct_tensor *b = ct_batchnorm2d_logged(x[k], NULL, NULL, rm[1], rv[1], 0.1f,
                                         1e-5f, &log);
    b = ct_batchnorm2d_logged(ct_relu(b), NULL, NULL, rm[1], rv[1], 0.3f, 1e-5f,
                              &log);
    same_y &= a && b && !memcmp(ct_f32(a), ct_f32(b), ct_tensor_bytes(a));
    if (k == 0) {
      per = log.n_values;
      terms = malloc((size_t)(STEPS * per) * sizeof *terms);
    }
    CHECK(log.n == 2 && log.n_values == per && per == 4 * C,
          "micro-batch %d: %lld updates, %lld terms", k, (long long)log.n,
          (long long)log.n_values);
    memcpy(terms + k * per, log.values, (size_t)per * sizeof *terms);
  }
  CHECK(same_y, "logged batch norms give other outputs");
  CHECK(ct_f32(rm[1])[0] == 0.0f && ct_f32(rv[1])[1] == 1.25f,
        "logging changed the running statistics");
  for (int k = 0; k < STEPS; k++)  // the last log's layout, each one's terms
    ct_bn_update_log_apply(&log, terms + k * per);
  CHECK(!memcmp(ct_f32(rm[0]), ct_f32(rm[1]), C * sizeof(float)) &&
            !memcmp(ct_f32(rv[0]), ct_f32(rv[1]), C * sizeof(float)),
        "applied logs: running mean %.9g vs %.9g, var %.9g vs %.9g",
        ct_f32(rm[1])[0], ct_f32(rm[0])[0], ct_f32(rv[1])[0], ct_f32(rv[0])[0]);
  free(terms);
  ct_bn_update_log_free(&log);
  ct_arena_reset();
}

static void test_pool_values(void) {
  // One 4x4 plane 0..15; ties resolved to the first maximum in scan order.
  float v[16];
  for (int i = 0; i < 16; i++) v[i] = (float)i;
  v[5] = 15.0f;  // ties with v[15] in the padded 3x3 windows that see both
  ct_tensor *x =
      ct_requires_grad(ct_tensor_from(CT_F32, v, CT_SHAPE(1, 1, 4, 4)));
  ct_tensor *y = ct_max_pool2d(x, 3, 2, 1);  // (1,1,2,2)
  CHECK(y && y->shape[2] == 2 && y->shape[3] == 2, "max_pool shape");
  if (!y) return;
  const float want[4] = {15, 15, 15, 15};
  CHECK(memcmp(ct_f32(y), want, sizeof want) == 0,
        "max_pool values %g %g %g %g", ct_f32(y)[0], ct_f32(y)[1], ct_f32(y)[2],
        ct_f32(y)[3]);
  ct_backward_seeded(y, NULL);
  // windows: rows/cols [0,2) [1,4): every window holds v[5] (at 1,1) first
  CHECK(x->grad[5] == 4.0f && x->grad[15] == 0.0f,
        "max_pool grad at first max %g (want 4), at the tie %g (want 0)",
        x->grad[5], x->grad[15]);

  ct_tensor *a =
      ct_avg_pool2d(ct_tensor_from(CT_F32, v, CT_SHAPE(1, 1, 4, 4)), 2, 2);
  CHECK(a && ct_f32(a)[0] == (0 + 1 + 4 + 15) / 4.0f &&
            ct_f32(a)[3] == (10 + 11 + 14 + 15) / 4.0f,
        "avg_pool values");
  ct_tensor *g =
      ct_global_avg_pool2d(ct_tensor_from(CT_F32, v, CT_SHAPE(1, 1, 4, 4)));
  CHECK(g && g->ndim == 2 && fabsf(ct_f32(g)[0] - 130.0f / 16) < 1e-6f,
        "global_avg_pool value");
  ct_arena_reset();
}

// ---- argument errors ----------------------------------------------------------------

static void expect_error(const char *what, ct_tensor *t, const char *needle) {
  CHECK(t == NULL && strstr(ct_last_error(), needle) != NULL,
        "%s: want an error naming '%s', got '%s'", what, needle,
        t ? "(a tensor)" : ct_last_error());
  ct_clear_error();
}

static void test_errors(void) {
  ct_tensor *x = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3, 5, 5));
  ct_tensor *w = ct_tensor_zeros(CT_F32, CT_SHAPE(4, 2, 3, 3));
  expect_error("conv channels", ct_conv2d(x, w, NULL, 1, 1), "conv2d: weight");
  ct_tensor *w3 = ct_tensor_zeros(CT_F32, CT_SHAPE(4, 3, 7, 7));
  expect_error("conv kernel too big", ct_conv2d(x, w3, NULL, 1, 0),
               "larger than input");
  ct_tensor *w33 = ct_tensor_zeros(CT_F32, CT_SHAPE(4, 3, 3, 3));
  expect_error("conv stride", ct_conv2d(x, w33, NULL, 0, 1), "stride 0");
  expect_error("conv bias",
               ct_conv2d(x, w33, ct_tensor_zeros(CT_F32, CT_SHAPE(3)), 1, 1),
               "bias");
  expect_error(
      "conv 3-D input",
      ct_conv2d(ct_tensor_zeros(CT_F32, CT_SHAPE(3, 5, 5)), w33, NULL, 1, 1),
      "(N, C, H, W)");
  CHECK(ct_conv2d(NULL, w33, NULL, 1, 1) == NULL, "NULL input passes through");
  expect_error("bn eval without stats",
               ct_batchnorm2d(x, NULL, NULL, NULL, NULL, false, 0.1f, 1e-5f),
               "running_mean");
  expect_error("bn weight shape",
               ct_batchnorm2d(x, ct_tensor_zeros(CT_F32, CT_SHAPE(4)), NULL,
                              NULL, NULL, true, 0.1f, 1e-5f),
               "weight must be (3)");
  expect_error("bn one value per channel",
               ct_batchnorm2d(ct_tensor_zeros(CT_F32, CT_SHAPE(1, 3, 1, 1)),
                              NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f),
               "more than 1 value");
  ct_tensor *tok = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 20, 3));
  ct_tensor *wdw = ct_tensor_zeros(CT_F32, CT_SHAPE(3, 1, 3, 3));
  expect_error("dw tokens 4-D input",
               ct_conv2d_depthwise_tokens(x, 5, 5, wdw, 1, 1), "(B, H*W, C)");
  expect_error("dw tokens map",
               ct_conv2d_depthwise_tokens(tok, 4, 4, wdw, 1, 1),
               "4x4 map does not hold the 20 tokens");
  expect_error(
      "dw tokens weight",
      ct_conv2d_depthwise_tokens(
          tok, 4, 5, ct_tensor_zeros(CT_F32, CT_SHAPE(4, 1, 3, 3)), 1, 1),
      "conv2d_depthwise_tokens: weight [4, 1, 3, 3]");
  expect_error(
      "dw tokens kernel too big",
      ct_conv2d_depthwise_tokens(
          tok, 4, 5, ct_tensor_zeros(CT_F32, CT_SHAPE(3, 1, 7, 7)), 1, 0),
      "larger than input");
  expect_error("dw tokens stride",
               ct_conv2d_depthwise_tokens(tok, 4, 5, wdw, 0, 1), "stride 0");
  expect_error(
      "bn tokens 4-D input",
      ct_batchnorm_tokens(x, NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f),
      "batchnorm_tokens: input must be (B, T, C)");
  expect_error("bn tokens weight",
               ct_batchnorm_tokens(tok, ct_tensor_zeros(CT_F32, CT_SHAPE(4)),
                                   NULL, NULL, NULL, true, 0.1f, 1e-5f),
               "batchnorm_tokens: weight must be (3)");
  expect_error("bn tokens one value per channel",
               ct_batchnorm_tokens(ct_tensor_zeros(CT_F32, CT_SHAPE(1, 1, 3)),
                                   NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f),
               "more than 1 value");
  expect_error(
      "bn tokens eval without stats",
      ct_batchnorm_tokens(tok, NULL, NULL, NULL, NULL, false, 0.1f, 1e-5f),
      "running_mean");
  expect_error("max_pool padding", ct_max_pool2d(x, 2, 2, 2), "padding 2");
  expect_error("avg_pool too big", ct_avg_pool2d(x, 6, 1), "does not fit");
  ct_arena_reset();
}

// ---- ResNet -----------------------------------------------------------------------

static void test_resnet_names(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_resnet m;
  ct_rng init = ct_rng_make(1, 0);
  ct_nn_resnet_config cfg = {.in_channels = 3,
                             .num_classes = 10,
                             .width = 16,
                             .stages = 3,
                             .blocks = 2};
  CHECK(ct_nn_resnet_init(&m, &p, "", &cfg, &init) == CT_OK, "init: %s",
        ct_last_error());
  // torchvision's state_dict order, without num_batches_tracked.
  char want[128][128];
  int n = 0;
  const char *bn_leaves[4] = {"weight", "bias", "running_mean", "running_var"};
#define ADD_BN(pre)           \
  for (int k = 0; k < 4; k++) \
  snprintf(want[n++], 128, "%s.%s", pre, bn_leaves[k])
  snprintf(want[n++], 128, "conv1.weight");
  ADD_BN("bn1");
  for (int s = 1; s <= 3; s++)
    for (int j = 0; j < 2; j++) {
      char pre[32], sub[64];
      snprintf(pre, sizeof pre, "layer%d.%d", s, j);
      snprintf(want[n++], 128, "%s.conv1.weight", pre);
      snprintf(sub, sizeof sub, "%s.bn1", pre);
      ADD_BN(sub);
      snprintf(want[n++], 128, "%s.conv2.weight", pre);
      snprintf(sub, sizeof sub, "%s.bn2", pre);
      ADD_BN(sub);
      if (s > 1 && j == 0) {
        snprintf(want[n++], 128, "%s.downsample.0.weight", pre);
        snprintf(sub, sizeof sub, "%s.downsample.1", pre);
        ADD_BN(sub);
      }
    }
#undef ADD_BN
  snprintf(want[n++], 128, "fc.weight");
  snprintf(want[n++], 128, "fc.bias");
  CHECK(p.n == n, "resnet has %d parameters, want %d", p.n, n);
  for (int i = 0; i < n && i < p.n; i++)
    CHECK(strcmp(p.items[i].name, want[i]) == 0,
          "parameter %d is '%s', want '%s'", i, p.items[i].name, want[i]);

  const ct_param *rv = ct_params_find(&p, "layer2.0.downsample.1.running_var");
  const ct_param *bw = ct_params_find(&p, "layer3.1.bn2.weight");
  const ct_param *cw = ct_params_find(&p, "layer2.0.conv1.weight");
  const ct_param *dw = ct_params_find(&p, "layer3.0.downsample.0.weight");
  CHECK(rv && rv->flags == (CT_PARAM_FROZEN | CT_PARAM_NO_DECAY) &&
            !rv->tensor->requires_grad && ct_f32(rv->tensor)[0] == 1.0f,
        "running_var: frozen, no decay, ones");
  CHECK(bw && bw->flags == CT_PARAM_NO_DECAY && ct_f32(bw->tensor)[3] == 1.0f,
        "bn weight: no decay, ones");
  CHECK(cw && cw->flags == 0 && cw->tensor->shape[0] == 32 &&
            cw->tensor->shape[1] == 16 && cw->tensor->shape[2] == 3,
        "layer2.0.conv1.weight: (32, 16, 3, 3), decays");
  CHECK(dw && dw->tensor->shape[0] == 64 && dw->tensor->shape[1] == 32 &&
            dw->tensor->shape[2] == 1,
        "layer3.0.downsample.0.weight: (64, 32, 1, 1)");
  // kaiming_normal fan_out: std sqrt(2 / (32 * 9)) = 0.0833 over 4608 draws
  if (cw) {
    double sq = 0.0;
    for (int64_t i = 0; i < cw->tensor->numel; i++)
      sq += (double)ct_f32(cw->tensor)[i] * ct_f32(cw->tensor)[i];
    double std = sqrt(sq / cw->tensor->numel);
    CHECK(fabs(std - sqrt(2.0 / (32 * 9))) < 0.05 * sqrt(2.0 / (32 * 9)),
          "conv init std %.4f, want %.4f", std, sqrt(2.0 / (32 * 9)));
  }
  CHECK(m.feature_channels == 64, "feature channels %lld",
        (long long)m.feature_channels);

  // Shapes: 28x28 -> 28, 14, 7.
  ct_tensor *x = ct_tensor_randn(&rng, 0, 1, CT_SHAPE(2, 3, 28, 28));
  ct_nn_ctx eval = ct_nn_eval_ctx();
  ct_tensor *f = ct_nn_resnet_features(&m, &eval, x);
  ct_tensor *logits = ct_nn_resnet_forward(&m, &eval, x);
  CHECK(f && f->shape[0] == 2 && f->shape[1] == 64 && f->shape[2] == 7 &&
            f->shape[3] == 7,
        "features shape");
  CHECK(logits && logits->ndim == 2 && logits->shape[0] == 2 &&
            logits->shape[1] == 10,
        "logits shape");
  ct_arena_reset();
  ct_nn_resnet_free(&m);

  // A prefix is prepended to every name.
  ct_params q;
  ct_params_init(&q);
  cfg.stages = 1;
  cfg.blocks = 1;
  CHECK(ct_nn_resnet_init(&m, &q, "backbone", &cfg, &init) == CT_OK, "%s",
        ct_last_error());
  CHECK(ct_params_find(&q, "backbone.layer1.0.bn2.running_mean") &&
            ct_params_find(&q, "backbone.fc.bias"),
        "prefixed names");
  ct_nn_resnet_free(&m);
  ct_params_free(&q);
  ct_params_free(&p);
}

// A tiny ResNet fits a fixed random batch: the loss falls over 20 Adam steps.
static void test_resnet_learns(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_resnet m;
  ct_rng init = ct_rng_make(2, 0);
  ct_nn_resnet_config cfg = {
      .in_channels = 1, .num_classes = 4, .width = 8, .stages = 2, .blocks = 1};
  CHECK(ct_nn_resnet_init(&m, &p, "", &cfg, &init) == CT_OK, "%s",
        ct_last_error());
  enum { B = 16, HW = 12 };
  float *images = malloc(sizeof(float) * B * HW * HW);
  int32_t labels[B];
  ct_rng r = ct_rng_make(4, 4);
  for (int i = 0; i < B * HW * HW; i++)
    images[i] = (float)ct_rng_next_double(&r) * 2.0f - 1.0f;
  for (int i = 0; i < B; i++) labels[i] = i % 4;
  ct_optim opt;
  ct_optim_config oc = ct_adam_defaults();
  CHECK(ct_optim_init(&opt, &oc) == CT_OK, "%s", ct_last_error());
  float first = 0.0f, last = 0.0f;
  for (int step = 0; step < 20; step++) {
    ct_nn_ctx ctx = ct_nn_train_ctx(1, (uint64_t)step);
    ct_tensor *x = ct_tensor_from(CT_F32, images, CT_SHAPE(B, 1, HW, HW));
    ct_tensor *y = ct_tensor_from(CT_I32, labels, CT_SHAPE(B));
    ct_tensor *loss =
        ct_cross_entropy(ct_nn_resnet_forward(&m, &ctx, x), y, NULL);
    CHECK(loss != NULL, "step %d: %s", step, ct_last_error());
    if (!loss) break;
    last = ct_f32(loss)[0];
    if (step == 0) first = last;
    ct_params_zero_grad(&p);
    CHECK(ct_backward(loss) == CT_OK, "%s", ct_last_error());
    ct_optim_step(&opt, &p, 1e-2f);
    ct_arena_reset();
  }
  // Eval mode after training runs on the learned running statistics.
  ct_nn_ctx eval = ct_nn_eval_ctx();
  ct_tensor *x = ct_tensor_from(CT_F32, images, CT_SHAPE(B, 1, HW, HW));
  ct_tensor *ev =
      ct_cross_entropy(ct_nn_resnet_forward(&m, &eval, x),
                       ct_tensor_from(CT_I32, labels, CT_SHAPE(B)), NULL);
  printf("resnet fit: loss %.4f -> %.4f (eval mode %.4f)\n", first, last,
         ev ? ct_f32(ev)[0] : -1.0f);
  CHECK(last < 0.3f * first, "loss %.4f -> %.4f did not fall enough", first,
        last);
  CHECK(ev && isfinite(ct_f32(ev)[0]), "eval loss");
  ct_arena_reset();
  free(images);
  ct_nn_resnet_free(&m);
  ct_params_free(&p);
}

int main(void) {
  ct_threads_from_env();
  test_conv_direct();
  test_depthwise();
  printf("1 vs 2 threads\n");
  check_threads("ops (conv, bn, pools)", run_ops);
  check_threads("depthwise conv", run_depthwise);
  check_threads("resnet training step", run_resnet);
  check_threads("tokens depthwise conv + batch norm", run_tokens);
  test_tokens_layout();
  test_batchnorm_stats();
  test_batchnorm_log();
  test_pool_values();
  test_errors();
  test_resnet_names();
  test_resnet_learns();
  ct_arena_release();
  return test_summary("conv");
}
