// The fused dropout ops (autograd/ops_elementwise.c) against the separate
// ops, bit for bit, forward and backward, both when the inputs' gradients
// start with this op (assigned) and when another op wrote them first
// (accumulated), for p in {0, 0.1, 0.5, 1}:
//   ct_relu_dropout(x)    = ct_dropout(ct_relu(x))
//   ct_add_dropout(x, y)  = ct_add(x, ct_dropout(y))
// Also finite-difference gradient checks (the mask is fixed by seed and
// stream, so each op is a fixed piecewise-linear map) and the errors for p
// outside [0, 1]. Prints the max differences.
#include "autograd/ops.h"
#include "tests/grad_util.h"

#include <stdlib.h>
#include <string.h>

typedef struct rcase {
  float p;
  uint64_t seed, stream;
} rcase;

static ct_tensor *run_fused(ct_tensor *const *in, void *ctx) {
  const rcase *c = ctx;
  return ct_relu_dropout(in[0], c->p, c->seed, c->stream);
}

static ct_tensor *run_add(ct_tensor *const *in, void *ctx) {
  const rcase *c = ctx;
  return ct_add_dropout(in[0], in[1], c->p, c->seed, c->stream);
}

static double max_diff(const float *a, const float *b, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
  return m;
}

// y and dx of loss = sum(y * s) [+ sum(x * t), recorded after y, so that
// x's gradient is written first by that mul], fused or composed.
static void forward_backward(const rcase *c, bool fused, bool twice,
                             ct_tensor *x, ct_tensor *s, ct_tensor *t,
                             float *y_out, float *dx_out) {
  x->grad = NULL;
  ct_tensor *y = fused ? ct_relu_dropout(x, c->p, c->seed, c->stream)
                       : ct_dropout(ct_relu(x), c->p, c->seed, c->stream);
  ct_tensor *loss = ct_sum(ct_mul(y, s));
  if (twice) loss = ct_add(loss, ct_sum(ct_mul(x, t)));
  CHECK(loss && ct_backward(loss) == CT_OK, "backward: %s", ct_last_error());
  memcpy(y_out, ct_f32(y), (size_t)x->numel * sizeof(float));
  memcpy(dx_out, x->grad, (size_t)x->numel * sizeof(float));
}

static void check_same_bits(const rcase *c, bool twice, int64_t n) {
  ct_tensor *x = grad_input(CT_SHAPE(n));
  ct_tensor *s = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(n));
  ct_tensor *t = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(n));
  // Signed zeros and a few exact zeros in x and in the incoming gradient.
  for (int64_t i = 0; i < n; i += 97) ct_f32(x)[i] = i % 2 ? -0.0f : 0.0f;
  for (int64_t i = 5; i < n; i += 89) ct_f32(s)[i] = -0.0f;
  float *yf = malloc((size_t)n * sizeof(float)),
        *yc = malloc((size_t)n * sizeof(float)),
        *df = malloc((size_t)n * sizeof(float)),
        *dc = malloc((size_t)n * sizeof(float));
  forward_backward(c, true, twice, x, s, t, yf, df);
  forward_backward(c, false, twice, x, s, t, yc, dc);
  printf("  n %lld p %g %s: max diff y %g dx %g\n", (long long)n, (double)c->p,
         twice ? "accumulated dx" : "assigned dx", max_diff(yf, yc, n),
         max_diff(df, dc, n));
  CHECK(memcmp(yf, yc, (size_t)n * sizeof(float)) == 0,
        "relu_dropout y differs (p %g twice %d)", (double)c->p, twice);
  CHECK(memcmp(df, dc, (size_t)n * sizeof(float)) == 0,
        "relu_dropout dx differs (p %g twice %d)", (double)c->p, twice);
  free(yf);
  free(yc);
  free(df);
  free(dc);
  ct_arena_reset();
}

// z, dx, dy of loss = sum(z * s) [+ sum(x * t) + sum(y * t), recorded
// after z], fused or composed.
static void add_forward_backward(const rcase *c, bool fused, bool twice,
                                 ct_tensor *x, ct_tensor *y, ct_tensor *s,
                                 ct_tensor *t, float *out[3]) {
  x->grad = y->grad = NULL;
  ct_tensor *z = fused ? ct_add_dropout(x, y, c->p, c->seed, c->stream)
                       : ct_add(x, ct_dropout(y, c->p, c->seed, c->stream));
  ct_tensor *loss = ct_sum(ct_mul(z, s));
  if (twice)
    loss = ct_add(loss, ct_add(ct_sum(ct_mul(x, t)), ct_sum(ct_mul(y, t))));
  CHECK(loss && ct_backward(loss) == CT_OK, "backward: %s", ct_last_error());
  const float *from[3] = {ct_f32(z), x->grad, y->grad};
  for (int i = 0; i < 3; i++)
    memcpy(out[i], from[i], (size_t)x->numel * sizeof(float));
}

static void check_add_same_bits(const rcase *c, bool twice, int64_t n) {
  ct_tensor *x = grad_input(CT_SHAPE(n)), *y = grad_input(CT_SHAPE(n));
  ct_tensor *s = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(n));
  ct_tensor *t = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(n));
  for (int64_t i = 5; i < n; i += 89) ct_f32(s)[i] = -0.0f;
  float *f[3], *g[3];
  for (int i = 0; i < 3; i++) {
    f[i] = malloc((size_t)n * sizeof(float));
    g[i] = malloc((size_t)n * sizeof(float));
  }
  add_forward_backward(c, true, twice, x, y, s, t, f);
  add_forward_backward(c, false, twice, x, y, s, t, g);
  static const char *names[3] = {"z", "dx", "dy"};
  printf("  add_dropout n %lld p %g %s: max diff", (long long)n, (double)c->p,
         twice ? "accumulated" : "assigned");
  for (int i = 0; i < 3; i++) {
    printf(" %s %g", names[i], max_diff(f[i], g[i], n));
    CHECK(memcmp(f[i], g[i], (size_t)n * sizeof(float)) == 0,
          "add_dropout %s differs (p %g twice %d)", names[i], (double)c->p,
          twice);
    free(f[i]);
    free(g[i]);
  }
  printf("\n");
  ct_arena_reset();
}

int main(void) {
  const float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
  for (int k = 0; k < 4; k++) {
    rcase c = {.p = ps[k], .seed = 11, .stream = 3 + (uint64_t)k};
    // Small (one thread) and past the parallel threshold, odd sizes.
    check_same_bits(&c, false, 1001);
    check_same_bits(&c, true, 1001);
    check_same_bits(&c, false, 70001);
    check_same_bits(&c, true, 70001);
    // Values away from the ReLU kink, so central differences are exact.
    ct_tensor *x = grad_input(CT_SHAPE(3, 7));
    for (int64_t i = 0; i < x->numel; i++)
      if (fabsf(ct_f32(x)[i]) < 0.05f) ct_f32(x)[i] = 0.5f;
    char what[64];
    snprintf(what, sizeof what, "relu_dropout p %g", (double)c.p);
    grad_check(what, run_fused, &c, &x, 1, NULL);

    check_add_same_bits(&c, false, 1001);
    check_add_same_bits(&c, true, 1001);
    check_add_same_bits(&c, false, 70001);
    check_add_same_bits(&c, true, 70001);
    ct_tensor *xy[2] = {grad_input(CT_SHAPE(3, 7)), grad_input(CT_SHAPE(3, 7))};
    snprintf(what, sizeof what, "add_dropout p %g", (double)c.p);
    grad_check(what, run_add, &c, xy, 2, NULL);
  }
  ct_tensor *x = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3));
  CHECK(ct_relu_dropout(x, 1.5f, 0, 0) == NULL &&
            strstr(ct_last_error(), "relu_dropout") != NULL,
        "p outside [0, 1]: %s", ct_last_error());
  CHECK(ct_add_dropout(x, x, -0.5f, 0, 0) == NULL &&
            strstr(ct_last_error(), "add_dropout") != NULL,
        "p outside [0, 1]: %s", ct_last_error());
  ct_arena_reset();
  return test_summary("dropout_fused");
}
