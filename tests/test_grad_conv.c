// Finite-difference gradient checks of the CNN ops (autograd/ops_conv.c):
// conv2d (bias or not, strides 1 and 2, padding 0..2, kernels 1, 3 and 2x3,
// odd sizes, batches > 1, the 1x1 fast path), batch norm in training and
// eval mode (w.r.t. input, weight and bias, with and without the affine
// parameters), max/avg/global-average pooling, and a conv -> bn -> pool
// chain; depthwise convolution (kernels 3 and 1, strides 1 and 2,
// padding 0..2, odd and tiny maps), the token-map path of CvT's
// convolutional projection (tokens -> map -> depthwise conv -> batch norm in
// training and eval mode -> tokens), and the channels-last depthwise conv
// and batch norm on tokens that CvT uses instead.
//
// conv2d and the pools are linear in each input, so central differences are
// exact up to float rounding whatever the step: they use a large step and
// tolerances 10x tighter than the defaults, so a backward that is off by a
// little (a missed border column, a wrong stride) cannot pass. Max pooling is
// linear while no window's argmax changes; its inputs are distinct values
// spaced wider than twice the step. Batch norm is smooth but not linear: it
// uses the layer-norm step (1e-2) and tolerances 3x tighter than the
// defaults (its errors stay below 4e-4).
#include "autograd/ops_conv.h"
#include "autograd/ops.h"
#include "tests/grad_util.h"

#include <string.h>

typedef enum {
  OP_CONV,
  OP_BN,
  OP_MAX,
  OP_AVG,
  OP_GAP,
  OP_CHAIN,
  OP_DW,
  OP_DW_TOKENS,
  OP_DW_CL,
  OP_BN_CL,
  OP_GN
} op_kind;

typedef struct op_case {
  op_kind op;
  int stride, padding, kernel;
  int64_t h, w;  // the token map (OP_DW_TOKENS, OP_DW_CL)
  bool training;
  bool channels_last;  // OP_DW_TOKENS: the tokens ops, no transposes
  int64_t groups;      // OP_GN
  ct_tensor *running_mean, *running_var;  // batch norm (not checked)
} op_case;

// in: conv (x, w, bias), bn (x, weight, bias), pools (x),
// chain (x, w, weight, bias), depthwise (x, w), tokens (x, w, weight, bias),
// channels-last depthwise (x, w) and batch norm (x, weight, bias).
static ct_tensor *run(ct_tensor *const *in, void *ctx) {
  const op_case *c = ctx;
  switch (c->op) {
  case OP_DW: return ct_conv2d_depthwise(in[0], in[1], c->stride, c->padding);
  case OP_DW_TOKENS: {  // x (B, h*w, C) -> (B, h'*w', C)
    const int64_t B = in[0]->shape[0], C = in[0]->shape[2];
    if (c->channels_last)
      return ct_batchnorm_tokens(
          ct_conv2d_depthwise_tokens(in[0], c->h, c->w, in[1], c->stride,
                                     c->padding),
          in[2], in[3], c->running_mean, c->running_var, c->training, 0.1f,
          1e-5f);
    ct_tensor *map =
        ct_reshape(ct_transpose(in[0], 1, 2), CT_SHAPE(B, C, c->h, c->w));
    ct_tensor *y = ct_batchnorm2d(
        ct_conv2d_depthwise(map, in[1], c->stride, c->padding), in[2], in[3],
        c->running_mean, c->running_var, c->training, 0.1f, 1e-5f);
    return y ? ct_transpose(ct_reshape(y, CT_SHAPE(B, C, -1)), 1, 2) : NULL;
  }
  case OP_DW_CL:
    return ct_conv2d_depthwise_tokens(in[0], c->h, c->w, in[1], c->stride,
                                      c->padding);
  case OP_BN_CL:
    return ct_batchnorm_tokens(in[0], in[1], in[2], c->running_mean,
                               c->running_var, c->training, 0.1f, 1e-5f);
  case OP_CONV: return ct_conv2d(in[0], in[1], in[2], c->stride, c->padding);
  case OP_BN:
    return ct_batchnorm2d(in[0], in[1], in[2], c->running_mean, c->running_var,
                          c->training, 0.1f, 1e-5f);
  case OP_MAX: return ct_max_pool2d(in[0], c->kernel, c->stride, c->padding);
  case OP_AVG: return ct_avg_pool2d(in[0], c->kernel, c->stride);
  case OP_GAP: return ct_global_avg_pool2d(in[0]);
  case OP_GN: return ct_group_norm(in[0], c->groups, in[1], in[2], 1e-5f);
  case OP_CHAIN:
    return ct_global_avg_pool2d(ct_batchnorm2d(
        ct_conv2d(in[0], in[1], NULL, c->stride, c->padding), in[2], in[3],
        c->running_mean, c->running_var, c->training, 0.1f, 1e-5f));
  }
  return NULL;
}

// For the ops that are linear in each input.
static ct_gradcheck_opts linear_opts(void) {
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.eps = 0.1;
  o.rtol = 1e-3;
  o.atol = 1e-4;
  return o;
}

static ct_gradcheck_opts bn_opts(void) {
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.eps = 1e-2;
  o.rtol = 3e-3;
  o.atol = 3e-4;
  return o;
}

// ---- conv2d -------------------------------------------------------------------

static void check_conv(const char *what, int64_t N, int64_t C, int64_t H,
                       int64_t W, int64_t O, int64_t kh, int64_t kw, bool bias,
                       int stride, int padding) {
  op_case c = {.op = OP_CONV, .stride = stride, .padding = padding};
  ct_tensor *in[3] = {grad_input(CT_SHAPE(N, C, H, W)),
                      grad_input(CT_SHAPE(O, C, kh, kw)),
                      bias ? grad_input(CT_SHAPE(O)) : NULL};
  ct_gradcheck_opts o = linear_opts();
  grad_check(what, run, &c, in, 3, &o);
}

static void test_conv(void) {
  check_conv("conv 3x3 s1 p1 bias", 2, 3, 5, 5, 4, 3, 3, true, 1, 1);
  check_conv("conv 3x3 s2 p1 no bias, 7x6", 2, 3, 7, 6, 4, 3, 3, false, 2, 1);
  check_conv("conv 3x3 s2 p0 bias, 5x7", 3, 2, 5, 7, 3, 3, 3, true, 2, 0);
  check_conv("conv 3x3 s1 p0 no bias, 6x5", 2, 2, 6, 5, 3, 3, 3, false, 1, 0);
  check_conv("conv 3x3 s1 p2 (grows), 4x4", 1, 2, 4, 4, 2, 3, 3, true, 1, 2);
  check_conv("conv 3x3 s3 p1, 8x7", 2, 2, 8, 7, 3, 3, 3, true, 3, 1);
  check_conv("conv 1x1 s1 p0 bias (direct path)", 2, 4, 3, 5, 5, 1, 1, true, 1,
             0);
  check_conv("conv 1x1 s1 p0 no bias (direct path)", 3, 3, 4, 4, 2, 1, 1, false,
             1, 0);
  check_conv("conv 1x1 s2 p0 (downsample)", 2, 4, 5, 5, 3, 1, 1, false, 2, 0);
  check_conv("conv 1x1 s1 p1", 2, 2, 3, 3, 2, 1, 1, true, 1, 1);
  check_conv("conv 2x3 s1 p1", 2, 2, 5, 6, 3, 2, 3, true, 1, 1);
  check_conv("conv 3x3 on 3x3 input s2 p1", 2, 3, 3, 3, 2, 3, 3, true, 2, 1);
}

// ---- depthwise conv2d ------------------------------------------------------------

static void check_depthwise(const char *what, int64_t N, int64_t C, int64_t H,
                            int64_t W, int64_t k, int stride, int padding) {
  op_case c = {.op = OP_DW, .stride = stride, .padding = padding};
  ct_tensor *in[2] = {grad_input(CT_SHAPE(N, C, H, W)),
                      grad_input(CT_SHAPE(C, 1, k, k))};
  ct_gradcheck_opts o = linear_opts();
  grad_check(what, run, &c, in, 2, &o);
}

static void test_depthwise(void) {
  check_depthwise("depthwise 3x3 s1 p1", 2, 3, 5, 5, 3, 1, 1);
  check_depthwise("depthwise 3x3 s2 p1, 7x6", 2, 3, 7, 6, 3, 2, 1);
  check_depthwise("depthwise 3x3 s2 p1, 4x4 (even)", 3, 2, 4, 4, 3, 2, 1);
  check_depthwise("depthwise 3x3 s1 p0, 6x5", 2, 2, 6, 5, 3, 1, 0);
  check_depthwise("depthwise 3x3 s1 p2 (grows), 3x4", 1, 2, 3, 4, 3, 1, 2);
  check_depthwise("depthwise 3x3 s2 p1 on 1x1", 2, 3, 1, 1, 3, 2, 1);
  check_depthwise("depthwise 3x3 s2 p1 on 2x3", 2, 2, 2, 3, 3, 2, 1);
  check_depthwise("depthwise 1x1 s1 p0", 2, 4, 3, 5, 1, 1, 0);
  check_depthwise("depthwise 5x5 s3 p2, 9x8", 2, 2, 9, 8, 5, 3, 2);
  // Rows long enough for the vector loops and the 8 lanes (20 = 2*8 + 4).
  check_depthwise("depthwise 3x3 s1 p1, 3x20", 2, 2, 3, 20, 3, 1, 1);
  check_depthwise("depthwise 3x3 s2 p1, 5x37", 2, 2, 5, 37, 3, 2, 1);
}

// tokens (B, h*w, C) -> map -> depthwise conv -> batch norm -> tokens, as
// CvT's convolutional projection (nn/cvt.c) computes it with the
// channels-last ops, or with the NCHW ops and transposes.
static void check_tokens(const char *what, int64_t h, int64_t w, int stride,
                         bool training, bool channels_last) {
  const int64_t B = 2, C = 3;
  op_case c = {.op = OP_DW_TOKENS,
               .stride = stride,
               .padding = 1,
               .h = h,
               .w = w,
               .training = training,
               .channels_last = channels_last};
  c.running_mean = ct_tensor_randn(&grad_test_rng, 0.0f, 0.5f, CT_SHAPE(C));
  c.running_var = ct_tensor_rand(&grad_test_rng, 0.5f, 2.0f, CT_SHAPE(C));
  ct_tensor *in[4] = {
      ct_requires_grad(
          ct_tensor_randn(&grad_test_rng, 0.3f, 1.5f, CT_SHAPE(B, h * w, C))),
      grad_input(CT_SHAPE(C, 1, 3, 3)),
      ct_requires_grad(ct_tensor_rand(&grad_test_rng, 0.5f, 1.5f, CT_SHAPE(C))),
      grad_input(CT_SHAPE(C))};
  ct_gradcheck_opts o = bn_opts();
  grad_check(what, run, &c, in, 4, &o);
}

static void test_tokens(void) {
  for (int cl = 0; cl <= 1; cl++) {
    const char *const names[2][3] = {
        {"tokens 4x5 -> map -> depthwise s1 -> batchnorm train",
         "tokens 4x5 -> map -> depthwise s2 -> batchnorm train",
         "tokens 3x3 -> map -> depthwise s2 -> batchnorm eval"},
        {"tokens 4x5 -> depthwise s1 -> batchnorm train (channels last)",
         "tokens 4x5 -> depthwise s2 -> batchnorm train (channels last)",
         "tokens 3x3 -> depthwise s2 -> batchnorm eval (channels last)"}};
    check_tokens(names[cl][0], 4, 5, 1, true, cl);
    check_tokens(names[cl][1], 4, 5, 2, true, cl);
    check_tokens(names[cl][2], 3, 3, 2, false, cl);
  }
}

// The channels-last ops CvT's projection now uses (autograd/ops_conv.h):
// the depthwise conv on tokens (B, h*w, C), with channel counts that leave a
// vector tail, and the batch norm on tokens.
static void check_dw_cl(const char *what, int64_t B, int64_t C, int64_t h,
                        int64_t w, int stride, int padding) {
  op_case c = {
      .op = OP_DW_CL, .stride = stride, .padding = padding, .h = h, .w = w};
  ct_tensor *in[2] = {grad_input(CT_SHAPE(B, h * w, C)),
                      grad_input(CT_SHAPE(C, 1, 3, 3))};
  ct_gradcheck_opts o = linear_opts();
  grad_check(what, run, &c, in, 2, &o);
}

// A batch norm gradcheck of op (OP_BN, or OP_BN_CL on tokens) on an input
// x of the given shape with C channels; running statistics when `running`
// (eval needs them).
static void check_bn_op(const char *what, op_kind op, int ndim,
                        const int64_t *shape, int64_t C, bool training,
                        bool affine, bool running) {
  op_case c = {.op = op, .training = training};
  if (running) {
    c.running_mean = ct_tensor_randn(&grad_test_rng, 0.0f, 0.5f, CT_SHAPE(C));
    c.running_var = ct_tensor_rand(&grad_test_rng, 0.5f, 2.0f, CT_SHAPE(C));
  }
  ct_tensor *x = ct_tensor_randn(&grad_test_rng, 0.3f, 1.5f, ndim, shape);
  ct_tensor *in[3] = {ct_requires_grad(x), NULL, NULL};
  if (affine) {
    in[1] = ct_requires_grad(
        ct_tensor_rand(&grad_test_rng, 0.5f, 1.5f, CT_SHAPE(C)));
    in[2] = grad_input(CT_SHAPE(C));
  }
  ct_gradcheck_opts o = bn_opts();
  grad_check(what, run, &c, in, 3, &o);
}

static void check_bn_cl(const char *what, int64_t B, int64_t T, int64_t C,
                        bool training, bool affine) {
  check_bn_op(what, OP_BN_CL, CT_SHAPE(B, T, C), C, training, affine, true);
}

static void test_channels_last(void) {
  check_dw_cl("depthwise tokens 4x5 s1 p1, C 3", 2, 3, 4, 5, 1, 1);
  check_dw_cl("depthwise tokens 4x5 s2 p1, C 5", 2, 5, 4, 5, 2, 1);
  check_dw_cl("depthwise tokens 7x6 s2 p0, C 2", 3, 2, 7, 6, 2, 0);
  check_dw_cl("depthwise tokens 3x3 s2 p1, C 4", 1, 4, 3, 3, 2, 1);
  check_dw_cl("depthwise tokens 3x4 s1 p1, C 35", 1, 35, 3, 4, 1, 1);
  check_bn_cl("batchnorm tokens train affine, 2x6x3", 2, 6, 3, true, true);
  check_bn_cl("batchnorm tokens train no affine, 3x4x2", 3, 4, 2, true, false);
  check_bn_cl("batchnorm tokens train affine, 1x10x35", 1, 10, 35, true, true);
  check_bn_cl("batchnorm tokens eval affine, 2x5x3", 2, 5, 3, false, true);
  check_bn_cl("batchnorm tokens eval no affine, 2x5x3", 2, 5, 3, false, false);
}

// ---- batch norm -----------------------------------------------------------------

static void check_bn(const char *what, bool training, bool affine,
                     bool running) {
  const int64_t C = 3;
  check_bn_op(what, OP_BN, CT_SHAPE(3, C, 2, 3), C, training, affine, running);
}

static void test_batchnorm(void) {
  check_bn("batchnorm train affine + running stats", true, true, true);
  check_bn("batchnorm train affine, no running stats", true, true, false);
  check_bn("batchnorm train no affine", true, false, true);
  check_bn("batchnorm eval affine", false, true, true);
  check_bn("batchnorm eval no affine", false, false, true);
}

// ---- pooling --------------------------------------------------------------------

// A leaf (shape) whose values are a shuffle of 0.05 * (i - n/2): distinct,
// 0.05 apart, so a step of 1e-2 changes no window's maximum.
static ct_tensor *distinct_input(int ndim, const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(CT_F32, ndim, shape);
  float *d = ct_f32(t);
  for (int64_t i = 0; i < t->numel; i++)
    d[i] = 0.05f * (float)(i - t->numel / 2);
  for (int64_t i = t->numel - 1; i > 0; i--) {
    int64_t j = (int64_t)ct_rng_next_below(&grad_test_rng, (uint64_t)i + 1);
    float v = d[i];
    d[i] = d[j];
    d[j] = v;
  }
  return ct_requires_grad(t);
}

static void check_pool(const char *what, op_kind op, int kernel, int stride,
                       int padding, int ndim, const int64_t *shape) {
  op_case c = {
      .op = op, .kernel = kernel, .stride = stride, .padding = padding};
  ct_tensor *x =
      op == OP_MAX ? distinct_input(ndim, shape) : grad_input(ndim, shape);
  ct_gradcheck_opts o = linear_opts();
  if (op == OP_MAX) o.eps = 1e-2;
  grad_check(what, run, &c, &x, 1, &o);
}

static void test_pools(void) {
  check_pool("max_pool 2 s2", OP_MAX, 2, 2, 0, CT_SHAPE(2, 3, 4, 6));
  check_pool("max_pool 3 s2 p1, 7x5", OP_MAX, 3, 2, 1, CT_SHAPE(2, 2, 7, 5));
  check_pool("max_pool 3 s1 p1 (overlapping)", OP_MAX, 3, 1, 1,
             CT_SHAPE(1, 2, 5, 5));
  check_pool("max_pool 2 s2, odd 5x5 (drops a row)", OP_MAX, 2, 2, 0,
             CT_SHAPE(2, 2, 5, 5));
  check_pool("avg_pool 2 s2", OP_AVG, 2, 2, 0, CT_SHAPE(2, 3, 4, 6));
  check_pool("avg_pool 3 s1 (overlapping), 5x6", OP_AVG, 3, 1, 0,
             CT_SHAPE(2, 2, 5, 6));
  check_pool("avg_pool 3 s2, 7x7", OP_AVG, 3, 2, 0, CT_SHAPE(1, 3, 7, 7));
  check_pool("global_avg_pool 5x3", OP_GAP, 0, 0, 0, CT_SHAPE(3, 4, 5, 3));
  check_pool("global_avg_pool 1x1", OP_GAP, 0, 0, 0, CT_SHAPE(2, 3, 1, 1));
}

// ---- a chain ----------------------------------------------------------------------

static void check_chain(const char *what, bool training) {
  const int64_t C = 2, O = 3;
  op_case c = {.op = OP_CHAIN, .stride = 2, .padding = 1, .training = training};
  c.running_mean = ct_tensor_randn(&grad_test_rng, 0.0f, 0.5f, CT_SHAPE(O));
  c.running_var = ct_tensor_rand(&grad_test_rng, 0.5f, 2.0f, CT_SHAPE(O));
  ct_tensor *in[4] = {
      grad_input(CT_SHAPE(2, C, 5, 5)), grad_input(CT_SHAPE(O, C, 3, 3)),
      ct_requires_grad(ct_tensor_rand(&grad_test_rng, 0.5f, 1.5f, CT_SHAPE(O))),
      grad_input(CT_SHAPE(O))};
  ct_gradcheck_opts o = bn_opts();
  grad_check(what, run, &c, in, 4, &o);
}

// ---- group norm ------------------------------------------------------------------

static void check_gn(const char *what, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t groups, bool affine) {
  op_case c = {.op = OP_GN, .groups = groups};
  ct_tensor *in[3] = {grad_input(CT_SHAPE(N, C, H, W)),
                      affine ? grad_input(CT_SHAPE(C)) : NULL,
                      affine ? grad_input(CT_SHAPE(C)) : NULL};
  ct_gradcheck_opts o = bn_opts();
  grad_check(what, run, &c, in, 3, &o);
}

// Gradients (groups of 1, 2 and all channels, with and without the affine
// parameters, a 1x1 map), values against a direct computation, bad input.
static void test_group_norm(void) {
  check_gn("group_norm 2x6x3x5 groups 3 affine", 2, 6, 3, 5, 3, true);
  check_gn("group_norm 2x4x4x4 groups 1 affine", 2, 4, 4, 4, 1, true);
  check_gn("group_norm 3x4x2x3 groups 4 no affine", 3, 4, 2, 3, 4, false);
  check_gn("group_norm 2x8x1x1 groups 2 affine", 2, 8, 1, 1, 2, true);
  ct_tensor *x = grad_input(CT_SHAPE(2, 6, 3, 4)), *w = grad_input(CT_SHAPE(6)),
            *b = grad_input(CT_SHAPE(6));
  ct_tensor *y = ct_group_norm(x, 2, w, b, 1e-5f);
  double worst = 0;
  for (int64_t n = 0; n < 2; n++)
    for (int64_t g = 0; g < 2; g++) {
      const float *xg = ct_f32(x) + (n * 6 + g * 3) * 12;
      double mean = 0, var = 0;
      for (int i = 0; i < 36; i++) mean += xg[i] / 36.0;
      for (int i = 0; i < 36; i++) var += (xg[i] - mean) * (xg[i] - mean) / 36;
      for (int i = 0; i < 36; i++) {
        const int64_t c = g * 3 + i / 12;
        double want =
            (xg[i] - mean) / sqrt(var + 1e-5) * ct_f32(w)[c] + ct_f32(b)[c];
        worst = fmax(worst, fabs(ct_f32(y)[(n * 6 + g * 3) * 12 + i] - want));
      }
    }
  printf("  group_norm values: max |diff| %.2e\n", worst);
  CHECK(worst < 1e-5, "group_norm values differ by %g", worst);
  CHECK(!ct_group_norm(x, 4, w, b, 1e-5f) && strstr(ct_last_error(), "divide"),
        "4 groups of 6 channels accepted: %s", ct_last_error());
  CHECK(!ct_group_norm(x, 2, grad_input(CT_SHAPE(5)), b, 1e-5f) &&
            ct_last_status() == CT_ERR_SHAPE,
        "weight (5) for 6 channels accepted");
  ct_arena_reset();
}

int main(void) {
  test_conv();
  test_depthwise();
  test_tokens();
  test_channels_last();
  test_batchnorm();
  test_pools();
  test_group_norm();
  check_chain("conv s2 -> batchnorm train -> global pool", true);
  check_chain("conv s2 -> batchnorm eval -> global pool", false);
  ct_arena_release();
  return test_summary("grad_conv");
}
