// Gradient checks of multi-scale deformable attention (autograd/
// ops_deform_attn.h) and of the MSDeformAttn module (nn/deform_attn.h),
// the op's values against a plain double-precision implementation, and its
// bad inputs.
//
// Bilinear sampling is not differentiable where a pixel coordinate is an
// integer (the neighbours change). Every point below sits in a cell at
// least 0.2 pixel away from such a line (0.2 to 0.8 of its cell), while the
// finite-difference steps move it by at most 0.01 pixel, so no difference
// straddles a kink. Cells range over [-2, size]: points wholly outside a
// map (no neighbour inside), points with only some neighbours inside, and
// points inside.
//
// Two checks of the op's gradients: ct_gradcheck in float (steps 1e-3), and
// central differences in double (steps 1e-6) of a double-precision copy of
// the forward, which the analytic gradients must match to 1e-4: float
// differences alone would hide errors below their own noise.
#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/ops_deform_attn.h"
#include "core/threads.h"
#include "nn/deform_attn.h"
#include "tests/grad_util.h"

// The reference's gradient-check shapes.
enum { N = 1, M = 2, D = 2, LQ = 2, L = 2, P = 2 };
static const int64_t levels[2 * L] = {6, 4, 3, 2};
enum { S = 6 * 4 + 3 * 2 };

static ct_rng point_rng = {.seed = 31, .stream = 4, .offset = 0};

// A normalized coordinate on a side of `size` pixels whose pixel coordinate
// (loc * size - 0.5) lies in [0.2, 0.8] of a cell k in [-2, size].
static float away_from_kinks(int64_t size) {
  const int64_t k = (int64_t)(ct_rng_next_u32(&point_rng) % (size + 3)) - 2;
  const double frac = 0.2 + 0.6 * ct_rng_next_double(&point_rng);
  return (float)(((double)k + frac + 0.5) / (double)size);
}

// locations (N, Lq, M, L*P, 2) for the levels, away from kinks.
static ct_tensor *make_locations(int64_t n, int64_t lq, int64_t m, int64_t nl,
                                 int64_t np, const int64_t *hw) {
  ct_tensor *t = ct_tensor_empty(CT_F32, CT_SHAPE(n, lq, m, nl * np, 2));
  float *v = ct_f32(t);
  for (int64_t i = 0; i < n * lq * m; i++)
    for (int64_t l = 0; l < nl; l++)
      for (int64_t p = 0; p < np; p++) {
        float *xy = v + ((i * nl + l) * np + p) * 2;
        xy[0] = away_from_kinks(hw[2 * l + 1]);
        xy[1] = away_from_kinks(hw[2 * l]);
      }
  return t;
}

// Positive weights (N, Lq, M, L, P) summing to 1 over (L, P) as after the
// softmax (the op does not rely on it).
static ct_tensor *make_weights(int ndim, const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(CT_F32, ndim, shape);
  float *w = ct_f32(t);
  for (int64_t i = 0; i < t->numel; i++)
    w[i] = 0.1f + (float)ct_rng_next_double(&point_rng);
  for (int64_t i = 0; i < t->numel; i += L * P) {
    float sum = 0.0f;
    for (int k = 0; k < L * P; k++) sum += w[i + k];
    for (int k = 0; k < L * P; k++) w[i + k] /= sum;
  }
  return t;
}

// ---- the op in float: ct_gradcheck ------------------------------------------

static ct_tensor *op_fn(ct_tensor *const *in, void *ctx) {
  (void)ctx;
  return ct_ms_deform_attn(in[0], levels, L, in[1], in[2]);
}

static void test_op_gradcheck(void) {
  ct_tensor *in[3] = {grad_input(CT_SHAPE(N, S, M, D)),
                      ct_requires_grad(make_locations(N, LQ, M, L, P, levels)),
                      ct_requires_grad(make_weights(CT_SHAPE(N, LQ, M, L, P)))};
  grad_check("ms_deform_attn (reference shapes)", op_fn, NULL, in, 3, NULL);
  // Two images, 3 heads of 5 channels, weights with L and P merged.
  ct_tensor *in2[3] = {
      grad_input(CT_SHAPE(2, S, 3, 5)),
      ct_requires_grad(make_locations(2, 3, 3, L, P, levels)),
      ct_requires_grad(make_weights(CT_SHAPE(2, 3, 3, L * P)))};
  grad_check("ms_deform_attn (N 2, Lq 3, M 3, D 5)", op_fn, NULL, in2, 3, NULL);
}

// ---- the op in double --------------------------------------------------------

typedef struct dbl_case {
  int64_t n, s, m, d, lq;
  double *value, *loc, *wts, *r;
} dbl_case;

// sum(out * r) of the op, in double, written plainly per output element.
static double dbl_loss(const dbl_case *c) {
  double loss = 0.0;
  for (int64_t b = 0; b < c->n; b++)
    for (int64_t q = 0; q < c->lq; q++)
      for (int64_t h = 0; h < c->m; h++)
        for (int64_t d = 0; d < c->d; d++) {
          double acc = 0.0;
          for (int64_t l = 0, start = 0; l < L; l++) {
            const int64_t H = levels[2 * l], W = levels[2 * l + 1];
            for (int64_t p = 0; p < P; p++) {
              const int64_t pt =
                  ((b * c->lq + q) * c->m + h) * L * P + l * P + p;
              const double x = c->loc[2 * pt] * W - 0.5;
              const double y = c->loc[2 * pt + 1] * H - 0.5;
              const double x0 = floor(x), y0 = floor(y);
              double sample = 0.0;
              for (int dy = 0; dy < 2; dy++)
                for (int dx = 0; dx < 2; dx++) {
                  const double xx = x0 + dx, yy = y0 + dy;
                  if (xx < 0 || xx >= W || yy < 0 || yy >= H) continue;
                  const double bw = (1.0 - fabs(x - xx)) * (1.0 - fabs(y - yy));
                  const int64_t row = start + (int64_t)yy * W + (int64_t)xx;
                  sample +=
                      bw * c->value[((b * c->s + row) * c->m + h) * c->d + d];
                }
              acc += c->wts[pt] * sample;
            }
            start += H * W;
          }
          loss += acc * c->r[((b * c->lq + q) * c->m + h) * c->d + d];
        }
  return loss;
}

static double *to_double(const ct_tensor *t) {
  double *d = ct_arena_alloc((size_t)t->numel * sizeof(double));
  for (int64_t i = 0; i < t->numel; i++) d[i] = ct_f32(t)[i];
  return d;
}

static void test_op_double(void) {
  const int64_t n = 2, m = 3, d = 4, lq = 3;
  ct_tensor *value = grad_input(CT_SHAPE(n, S, m, d));
  ct_tensor *loc = ct_requires_grad(make_locations(n, lq, m, L, P, levels));
  ct_tensor *wts = ct_requires_grad(make_weights(CT_SHAPE(n, lq, m, L, P)));
  ct_tensor *r =
      ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(n, lq, m * d));
  ct_tensor *y = ct_ms_deform_attn(value, levels, L, loc, wts);
  CHECK(y && ct_backward_seeded(y, ct_f32(r)) == CT_OK, "%s", ct_last_error());
  if (!y) return;
  dbl_case c = {.n = n,
                .s = S,
                .m = m,
                .d = d,
                .lq = lq,
                .value = to_double(value),
                .loc = to_double(loc),
                .wts = to_double(wts),
                .r = to_double(r)};
  // The forward: sum(out * r) in double from the op's float output.
  double got = 0.0;
  for (int64_t i = 0; i < y->numel; i++) got += (double)ct_f32(y)[i] * c.r[i];
  const double want = dbl_loss(&c);
  printf("  double forward: sum(out * r) %.9f, double %.9f\n", got, want);
  CHECK(fabs(got - want) <= 1e-5 * fmax(1.0, fabs(want)),
        "forward: %.9g vs double %.9g", got, want);
  struct {
    const char *what;
    double *x;
    const float *grad;
    int64_t numel;
  } parts[3] = {{"value", c.value, value->grad, value->numel},
                {"locations", c.loc, loc->grad, loc->numel},
                {"weights", c.wts, wts->grad, wts->numel}};
  const double eps = 1e-6;
  for (int k = 0; k < 3; k++) {
    double worst = 0.0;
    int64_t at = 0, nonzero = 0;
    for (int64_t i = 0; i < parts[k].numel; i++) {
      const double keep = parts[k].x[i];
      parts[k].x[i] = keep + eps;
      const double lp = dbl_loss(&c);
      parts[k].x[i] = keep - eps;
      const double lm = dbl_loss(&c);
      parts[k].x[i] = keep;
      const double numeric = (lp - lm) / (2 * eps);
      const double err =
          fabs(parts[k].grad[i] - numeric) / (1e-2 + fabs(numeric));
      nonzero += numeric != 0.0;
      if (err > worst) {
        worst = err;
        at = i;
      }
    }
    printf(
        "  double gradcheck %-9s %4lld elements (%lld nonzero), max err "
        "%.1e\n",
        parts[k].what, (long long)parts[k].numel, (long long)nonzero, worst);
    CHECK(worst <= 1e-4,
          "%s element %lld: analytic %.9g, double numeric off "
          "by %.2e (relative)",
          parts[k].what, (long long)at, (double)parts[k].grad[at], worst);
    CHECK(nonzero > parts[k].numel / 4, "%s: only %lld nonzero gradients",
          parts[k].what, (long long)nonzero);
  }
  ct_arena_reset();
}

// ---- the op: edges -------------------------------------------------------------

// A value used by two ops gets the sum of their gradients (the backward
// adds when the buffer is not fresh); inputs that do not require grad get
// none, and the others theirs all the same.
static void test_op_accumulates(void) {
  ct_tensor *value = grad_input(CT_SHAPE(N, S, M, D));
  ct_tensor *loc = ct_requires_grad(make_locations(N, LQ, M, L, P, levels));
  ct_tensor *wts = make_weights(CT_SHAPE(N, LQ, M, L, P));
  ct_tensor *y1 = ct_ms_deform_attn(value, levels, L, loc, wts);
  CHECK(y1 && ct_backward(ct_sum(y1)) == CT_OK, "%s", ct_last_error());
  const int64_t nv = value->numel, nl = loc->numel;
  float *gv = ct_arena_alloc((size_t)nv * sizeof(float));
  float *gl = ct_arena_alloc((size_t)nl * sizeof(float));
  memcpy(gv, value->grad, (size_t)nv * sizeof(float));
  memcpy(gl, loc->grad, (size_t)nl * sizeof(float));
  CHECK(wts->grad == NULL, "weights do not require grad: no gradient");
  ct_tensor_zero_grad(value);
  ct_tensor_zero_grad(loc);
  ct_tensor *y2 = ct_add(ct_ms_deform_attn(value, levels, L, loc, wts),
                         ct_ms_deform_attn(value, levels, L, loc, wts));
  CHECK(y2 && ct_backward(ct_sum(y2)) == CT_OK, "%s", ct_last_error());
  // Each location gets one term per op: exactly twice. A value row sums
  // several terms, added to the first op's sum one by one: within rounding.
  bool twice = y2 != NULL;
  for (int64_t i = 0; twice && i < nl; i++) twice = loc->grad[i] == 2 * gl[i];
  double worst = 0.0;
  for (int64_t i = 0; y2 && i < nv; i++)
    worst = fmax(
        worst, fabs(value->grad[i] - 2.0 * gv[i]) / (1.0 + fabs(2.0 * gv[i])));
  CHECK(twice, "two uses must give twice the location gradients");
  CHECK(y2 && worst <= 1e-6, "two uses: value gradients off twice by %.2e",
        worst);
  ct_arena_reset();
}

static void test_op_edges(void) {
  // One point per (level): inside, wholly outside, NaN.
  const int64_t hw[2] = {3, 4};
  float v[12 * 1];
  for (int i = 0; i < 12; i++) v[i] = (float)(i + 1);
  ct_tensor *value = ct_tensor_from(CT_F32, v, CT_SHAPE(1, 12, 1, 1));
  const float loc[6] = {0.5f, 0.5f, -5e30f, 7e30f, NAN, 0.5f};
  const float w[3] = {1.0f, 1.0f, 1.0f};
  ct_tensor *l3 = ct_tensor_from(CT_F32, loc, CT_SHAPE(1, 3, 1, 1, 2));
  ct_tensor *w3 = ct_tensor_from(CT_F32, w, CT_SHAPE(1, 3, 1, 1, 1));
  ct_tensor *y = ct_ms_deform_attn(value, hw, 1, l3, w3);
  CHECK(y != NULL, "%s", ct_last_error());
  if (y) {
    // Centre of a 3x4 map: pixel (1.5, 1): rows 1, columns 1 and 2.
    CHECK(ct_f32(y)[0] == 0.5f * (6 + 7), "centre sample %g, want 6.5",
          (double)ct_f32(y)[0]);
    CHECK(ct_f32(y)[1] == 0.0f, "a point far outside samples zeros, got %g",
          (double)ct_f32(y)[1]);
    CHECK(isnan(ct_f32(y)[2]), "a NaN point gives NaN, got %g",
          (double)ct_f32(y)[2]);
  }
  // Bad arguments name the op and the shapes.
  struct {
    const char *what;
    ct_tensor *value, *loc, *w;
    const int64_t *shapes;
    int64_t levels;
  } bad[] = {
      {"levels do not add up to S", value, l3, w3, (const int64_t[]){3, 3}, 1},
      {"no levels", value, l3, w3, hw, 0},
      {"an empty level", value, l3, w3, (const int64_t[]){0, 4}, 1},
      {"value not 4-d", ct_tensor_zeros(CT_F32, CT_SHAPE(12, 1, 1)), l3, w3, hw,
       1},
      {"locations without (x, y)", value,
       ct_tensor_zeros(CT_F32, CT_SHAPE(1, 3, 1, 1, 3)), w3, hw, 1},
      {"weights for another head count", value, l3,
       ct_tensor_zeros(CT_F32, CT_SHAPE(1, 3, 2, 1, 1)), hw, 1},
      {"i32 value", ct_tensor_zeros(CT_I32, CT_SHAPE(1, 12, 1, 1)), l3, w3, hw,
       1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ct_tensor *r = ct_ms_deform_attn(bad[i].value, bad[i].shapes, bad[i].levels,
                                     bad[i].loc, bad[i].w);
    CHECK(r == NULL && strstr(ct_last_error(), "ms_deform_attn"),
          "%s: want an error naming the op, got %s", bad[i].what,
          r ? "a result" : ct_last_error());
    printf("  %s: %s\n", bad[i].what, ct_last_error());
  }
  CHECK(ct_ms_deform_attn(NULL, hw, 1, l3, w3) == NULL,
        "a NULL input passes through");
  ct_arena_reset();
}

// ---- the module ----------------------------------------------------------------

enum { C = 8, MN = 2, ML = 2, MP = 2, MAX_INPUTS = 16 };
static const int64_t mlevels[2 * ML] = {4, 3, 2, 3};
enum { MS = 4 * 3 + 2 * 3 };

typedef struct module_case {
  ct_nn_ms_deform_attn attn;
  ct_tensor *mask;
} module_case;

static ct_tensor *module_fn(ct_tensor *const *in, void *ctx) {
  module_case *c = ctx;
  return ct_nn_ms_deform_attn_forward(&c->attn, in[0], in[1], in[2], mlevels,
                                      c->mask);
}

// Reference points whose samples stay away from kinks: with 2 heads the
// init's offsets are whole pixels ((+-1, 0) times p + 1), the perturbed
// offset weights move them by < 0.1, and a point at j / W_l (2-d) puts the
// sample at half a pixel; boxes of width 2P / W_l (4-d) scale the offsets
// back to pixels.
static ct_tensor *module_refs(int64_t n, int64_t lq, int dim) {
  ct_tensor *t = ct_tensor_empty(CT_F32, CT_SHAPE(n, lq, ML, dim));
  float *r = ct_f32(t);
  for (int64_t i = 0; i < n * lq; i++)
    for (int64_t l = 0; l < ML; l++) {
      float *v = r + (i * ML + l) * dim;
      const int64_t H = mlevels[2 * l], W = mlevels[2 * l + 1];
      v[0] = (float)(ct_rng_next_u32(&point_rng) % (W + 1)) / (float)W;
      v[1] = (float)(ct_rng_next_u32(&point_rng) % (H + 1)) / (float)H;
      if (dim == 4) {
        v[2] = 2.0f * MP / (float)W;
        v[3] = 2.0f * MP / (float)H;
      }
    }
  return t;
}

static void check_module(const char *what, int ref_dim, bool masked) {
  ct_params p;
  ct_params_init(&p);
  ct_rng init = ct_rng_make(7, 0);
  module_case c = {0};
  CHECK(ct_nn_ms_deform_attn_init(&c.attn, &p, "attn", C, ML, MN, MP, &init) ==
            CT_OK,
        "%s", ct_last_error());
  // Every parameter moves off its init; the offset weights only a little.
  ct_rng r = ct_rng_make(99, 1);
  for (int i = 0; i < p.n; i++) {
    ct_tensor *t = p.items[i].tensor;
    const bool offsets = t == c.attn.sampling_offsets.weight;
    const bool bias = t == c.attn.sampling_offsets.bias;
    const float scale = offsets ? 0.01f : bias ? 0.0f : 0.3f;
    for (int64_t j = 0; j < t->numel; j++)
      ct_f32(t)[j] += scale * (float)(ct_rng_next_double(&r) - 0.5);
  }
  if (masked) {
    c.mask = ct_tensor_zeros(CT_I32, CT_SHAPE(2, MS));
    for (int64_t s = 8; s < 12; s++) ct_i32(c.mask)[MS + s] = 1;
  }
  ct_tensor *in[MAX_INPUTS] = {
      ct_requires_grad(
          ct_tensor_randn(&grad_test_rng, 0.0f, 0.5f, CT_SHAPE(2, 3, C))),
      ct_requires_grad(module_refs(2, 3, ref_dim)),
      grad_input(CT_SHAPE(2, MS, C))};
  int n = 3;
  for (int i = 0; i < p.n && n < MAX_INPUTS; i++) in[n++] = p.items[i].tensor;
  grad_check(what, module_fn, &c, in, n, NULL);
  ct_params_free(&p);
}

static void test_module_bad_inputs(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng init = ct_rng_make(7, 0);
  ct_nn_ms_deform_attn m;
  CHECK(ct_nn_ms_deform_attn_init(&m, &p, "attn", 10, 2, 4, 2, &init) != CT_OK,
        "d_model 10 with 4 heads must be refused");
  printf("  %s\n", ct_last_error());
  ct_params_free(&p);
  ct_params_init(&p);
  CHECK(
      ct_nn_ms_deform_attn_init(&m, &p, "attn", C, ML, MN, MP, &init) == CT_OK,
      "%s", ct_last_error());
  ct_tensor *q = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3, C));
  ct_tensor *x = ct_tensor_zeros(CT_F32, CT_SHAPE(2, MS, C));
  ct_tensor *ref3 = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3, ML, 3));
  CHECK(!ct_nn_ms_deform_attn_forward(&m, q, ref3, x, mlevels, NULL) &&
            strstr(ct_last_error(), "reference_points"),
        "reference points of 3 coordinates: %s", ct_last_error());
  printf("  %s\n", ct_last_error());
  ct_tensor *ref = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3, ML, 2));
  ct_tensor *mask = ct_tensor_zeros(CT_I32, CT_SHAPE(2, MS + 1));
  CHECK(!ct_nn_ms_deform_attn_forward(&m, q, ref, x, mlevels, mask) &&
            strstr(ct_last_error(), "padding_mask"),
        "a mask of another length: %s", ct_last_error());
  ct_tensor *x2 = ct_tensor_zeros(CT_F32, CT_SHAPE(2, MS + 1, C));
  CHECK(!ct_nn_ms_deform_attn_forward(&m, q, ref, x2, mlevels, NULL),
        "input rows that the levels do not cover must be refused");
  printf("  %s\n", ct_last_error());
  ct_arena_reset();
  ct_params_free(&p);
}

int main(void) {
  ct_threads_from_env();
  test_op_gradcheck();
  test_op_double();
  test_op_accumulates();
  test_op_edges();
  check_module("MSDeformAttn, 2-d reference points", 2, false);
  check_module("MSDeformAttn, 4-d reference boxes", 4, false);
  check_module("MSDeformAttn, padding mask", 2, true);
  test_module_bad_inputs();
  return test_summary("grad_deform_attn");
}
