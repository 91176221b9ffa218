// core/vmath.h against double-precision libm: erf, exp, the exact GELU and
// its derivative, with the max errors printed; special values; and results
// that do not depend on where an array is split (tails run the vector code).
#include "core/vmath.h"
#include "harness.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1 << 20 };

static float *grid(float lo, float hi, int64_t n) {
  float *x = malloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; i++)
    x[i] = lo + (hi - lo) * (float)((double)i / (double)(n - 1));
  return x;
}

static void test_erf(void) {
  float *x = grid(-6.0f, 6.0f, N), *y = malloc(N * sizeof *y);
  ct_vmath_erf(x, y, N);
  double worst = 0.0, worst_at = 0.0;
  for (int64_t i = 0; i < N; i++) {
    double e = fabs((double)y[i] - erf((double)x[i]));
    if (e > worst) worst = e, worst_at = x[i];
  }
  printf("erf: max abs error %.3g at %.9g\n", worst, worst_at);
  CHECK(worst <= 1e-7, "erf max abs error %.3g at %.9g", worst, worst_at);
  // Small arguments keep their relative accuracy.
  double rel = 0.0;
  for (int i = 0; i < 200; i++) {
    float v = ldexpf(1.0f, -i / 2 - 3) * (1.0f + (float)i / 211.0f), r;
    ct_vmath_erf(&v, &r, 1);
    double want = erf((double)v);
    rel = fmax(rel, fabs((double)r - want) / want);
  }
  printf("erf: max relative error for small x %.3g\n", rel);
  CHECK(rel <= 3e-7, "erf small-x relative error %.3g", rel);
  float sp[6] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e30f}, r[6];
  ct_vmath_erf(sp, r, 6);
  CHECK(r[0] == 0.0f && !signbit(r[0]), "erf(0) = %g", r[0]);
  CHECK(r[1] == 0.0f && signbit(r[1]), "erf(-0) = %g", r[1]);
  CHECK(r[2] == 1.0f && r[3] == -1.0f, "erf(+-inf) = %g %g", r[2], r[3]);
  CHECK(isnan(r[4]), "erf(nan) = %g", r[4]);
  CHECK(r[5] == 1.0f, "erf(1e30) = %g", r[5]);
  free(x);
  free(y);
}

static void test_exp(void) {
  float *x = grid(-87.0f, 88.0f, N), *y = malloc(N * sizeof *y);
  ct_vmath_exp(x, y, N);
  double worst = 0.0, worst_at = 0.0;
  for (int64_t i = 0; i < N; i++) {
    double want = exp((double)x[i]);
    double e = fabs((double)y[i] - want) / want;
    if (e > worst) worst = e, worst_at = x[i];
  }
  printf("exp: max relative error %.3g at %.9g\n", worst, worst_at);
  CHECK(worst <= 3e-7, "exp max relative error %.3g at %.9g", worst, worst_at);
  float sp[4] = {-INFINITY, -100.0f, 0.0f, NAN}, r[4];
  ct_vmath_exp(sp, r, 4);
  CHECK(r[0] == 0.0f && r[1] == 0.0f, "exp(-inf), exp(-100) = %g %g", r[0],
        r[1]);
  CHECK(r[2] == 1.0f, "exp(0) = %g", r[2]);
  CHECK(isnan(r[3]), "exp(nan) = %g", r[3]);
  free(x);
  free(y);
}

static double gelu_ref(double x) {
  return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}
static double gelu_deriv_ref(double x) {
  return 0.5 * (1.0 + erf(x / sqrt(2.0))) +
         x * exp(-0.5 * x * x) * 0.39894228040143268;  // 1/sqrt(2 pi)
}

static void test_gelu(void) {
  float *x = grid(-12.0f, 12.0f, N), *y = malloc(N * sizeof *y);
  float *g = malloc(N * sizeof *g), *gx = malloc(N * sizeof *gx);
  for (int64_t i = 0; i < N; i++) g[i] = 1.0f + (float)(i % 7) * 0.25f;
  ct_vmath_gelu(x, y, N);
  ct_vmath_gelu_backward(x, g, gx, N, false);
  double wf = 0.0, wb = 0.0;
  for (int64_t i = 0; i < N; i++) {
    double s = fmax(1.0, fabs((double)x[i]));
    wf = fmax(wf, fabs((double)y[i] - gelu_ref(x[i])) / s);
    wb = fmax(wb,
              fabs((double)gx[i] - g[i] * gelu_deriv_ref(x[i])) / (s * g[i]));
  }
  printf("gelu: max error %.3g, derivative %.3g (relative to max(1,|x|))\n", wf,
         wb);
  CHECK(wf <= 2e-7, "gelu error %.3g", wf);
  CHECK(wb <= 4e-7, "gelu derivative error %.3g", wb);
  // Accumulating adds g gelu'(x) to what is there.
  float *acc = malloc(N * sizeof *acc);
  for (int64_t i = 0; i < N; i++) acc[i] = 0.0f;
  ct_vmath_gelu_backward(x, g, acc, N, true);
  CHECK(memcmp(acc, gx, N * sizeof *acc) == 0, "accumulate into zeros");
  // Any split gives the same bits: element by element, and odd pieces.
  float *piece = malloc(N * sizeof *piece);
  for (int64_t i = 0; i < 1000; i++) ct_vmath_gelu(x + i, piece + i, 1);
  for (int64_t i = 1000; i < N;) {
    int64_t len = 1 + (i * 7919) % 37;
    if (len > N - i) len = N - i;
    ct_vmath_gelu(x + i, piece + i, len);
    i += len;
  }
  CHECK(memcmp(piece, y, N * sizeof *y) == 0, "split gelu differs");
  for (int64_t i = 0; i < 999; i++)
    ct_vmath_gelu_backward(x + i, g + i, piece + i, 1, false);
  ct_vmath_gelu_backward(x + 999, g + 999, piece + 999, N - 999, false);
  CHECK(memcmp(piece, gx, N * sizeof *gx) == 0, "split backward differs");
  free(x);
  free(y);
  free(g);
  free(gx);
  free(acc);
  free(piece);
}

int main(void) {
  test_erf();
  test_exp();
  test_gelu();
  return test_summary("vmath");
}
