// core/vmath.h against double-precision libm: erf, exp, the exact GELU and
// its derivative, tanh and sigmoid, with the max errors printed; exp in
// double against long double expl, in ulps, and its sum's fixed order;
// special values; and results that do not depend on where an array is
// split (tails run the vector code).
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

// tanh and sigmoid: relative error over a wide grid and for small |x| (tanh
// keeps it near 0), special values, and any split giving the same bits.
static void test_tanh_sigmoid(void) {
  float *x = grid(-20.0f, 20.0f, N), *y = malloc(N * sizeof *y);
  float *s = malloc(N * sizeof *s);
  ct_vmath_tanh(x, y, N);
  ct_vmath_sigmoid(x, s, N);
  double wt = 0.0, ws = 0.0;
  for (int64_t i = 0; i < N; i++) {
    double t = tanh((double)x[i]), sg = 1.0 / (1.0 + exp(-(double)x[i]));
    if (t != 0.0) wt = fmax(wt, fabs((double)y[i] - t) / fabs(t));
    ws = fmax(ws, fabs((double)s[i] - sg) / sg);
  }
  double small = 0.0;
  for (int i = 0; i < 200; i++) {
    float v = ldexpf(1.0f, -i / 4) * (1.0f - (float)i / 401.0f), r;
    ct_vmath_tanh(&v, &r, 1);
    small = fmax(small, fabs((double)r - tanh((double)v)) / tanh((double)v));
  }
  printf("tanh: max relative error %.3g (small x %.3g); sigmoid %.3g\n", wt,
         small, ws);
  CHECK(wt <= 4e-7, "tanh relative error %.3g", wt);
  CHECK(small <= 3e-7, "tanh small-x relative error %.3g", small);
  CHECK(ws <= 4e-7, "sigmoid relative error %.3g", ws);
  float sp[6] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -100.0f}, r[6], q[6];
  ct_vmath_tanh(sp, r, 6);
  ct_vmath_sigmoid(sp, q, 6);
  CHECK(r[0] == 0.0f && !signbit(r[0]) && r[1] == 0.0f && signbit(r[1]),
        "tanh(+-0) = %g %g", r[0], r[1]);
  CHECK(r[2] == 1.0f && r[3] == -1.0f && r[5] == -1.0f,
        "tanh(inf, -inf, -100) = %g %g %g", r[2], r[3], r[5]);
  CHECK(isnan(r[4]) && isnan(q[4]), "tanh, sigmoid of nan: %g %g", r[4], q[4]);
  // exp's argument is clamped at 88: sigmoid bottoms out at 1/(1+e^88).
  CHECK(q[0] == 0.5f && q[2] == 1.0f && q[3] >= 0.0f && q[3] < 1e-37f &&
            q[5] == q[3],
        "sigmoid(0, inf, -inf, -100) = %g %g %g %g", q[0], q[2], q[3], q[5]);
  float *piece = malloc(N * sizeof *piece);
  for (int64_t i = 0; i < N;) {
    int64_t len = 1 + (i * 7919) % 37;
    if (len > N - i) len = N - i;
    ct_vmath_tanh(x + i, piece + i, len);
    i += len;
  }
  CHECK(memcmp(piece, y, N * sizeof *y) == 0, "split tanh differs");
  free(x);
  free(y);
  free(s);
  free(piece);
}

// |got - want| in units of the spacing of doubles at want (subnormal
// spacing below the normal range), want from long double expl.
static double ulps(double got, long double want) {
  const double w = (double)want;
  const double spacing =
      fabs(w) < DBL_MIN ? ldexp(1.0, -1074) : ldexp(1.0, ilogb(w) - 52);
  return (double)(fabsl((long double)got - want) / spacing);
}

static void test_exp_f64(void) {
  // Float inputs over the whole range where exp is neither 0 nor inf, with
  // a shift that is not a float (the argument is x - shift in double).
  const double shifts[3] = {0.0, 3.3333333333333335, -0.7071067811865476};
  double worst = 0.0, worst_at = 0.0;
  float *x = grid(-744.0f, 709.0f, N);
  double *y = malloc(N * sizeof *y);
  for (int k = 0; k < 3; k++) {
    ct_vmath_exp_shifted_f64(x, shifts[k], y, N);
    for (int64_t i = 0; i < N; i++) {
      const double a = (double)x[i] - shifts[k];
      if (a > 709.7) continue;
      const double e = ulps(y[i], expl((long double)a));
      if (e > worst) worst = e, worst_at = a;
    }
  }
  // The range of a softmax: (-40, 0], densely.
  float *z = grid(-40.0f, 0.0f, N);
  ct_vmath_exp_shifted_f64(z, 0.1, y, N);
  for (int64_t i = 0; i < N; i++) {
    const double a = (double)z[i] - 0.1, e = ulps(y[i], expl((long double)a));
    if (e > worst) worst = e, worst_at = a;
  }
  printf("exp (double): max error %.3f ulp at %.17g\n", worst, worst_at);
  CHECK(worst <= 1.0, "exp (double) max error %.3f ulp at %.17g", worst,
        worst_at);

  float sp[8] = {NAN,    -INFINITY, INFINITY, -745.5f,
                 709.5f, 710.0f,    -1e30f,   0.0f};
  double r[8];
  ct_vmath_exp_shifted_f64(sp, 0.0, r, 8);
  CHECK(isnan(r[0]), "exp(nan) = %g", r[0]);
  CHECK(r[1] == 0.0 && r[6] == 0.0 && r[3] == 0.0,
        "exp(-inf), exp(-1e30), exp(-745.5) = %g %g %g", r[1], r[6], r[3]);
  CHECK(r[2] == INFINITY && r[5] == INFINITY, "exp(inf), exp(710) = %g %g",
        r[2], r[5]);
  CHECK(isfinite(r[4]) && ulps(r[4], expl(709.5L)) <= 1.0,
        "exp(709.5) = %g (finite, within 1 ulp)", r[4]);
  CHECK(r[7] == 1.0, "exp(0) = %.17g", r[7]);

  // The sum: eight partial sums in a fixed order, whatever n, the same
  // exps as the row function; tails run the vector code.
  double *piece = malloc(N * sizeof *piece);
  for (int64_t i = 0; i < N;) {
    int64_t len = 1 + (i * 7919) % 37;
    if (len > N - i) len = N - i;
    ct_vmath_exp_shifted_f64(z + i, 0.1, piece + i, len);
    i += len;
  }
  CHECK(memcmp(piece, y, N * sizeof *y) == 0, "split exp (double) differs");
  const int64_t lens[4] = {1, 7, 1000, 4099};
  for (int k = 0; k < 4; k++) {
    double lane[8] = {0};
    for (int64_t i = 0; i < lens[k]; i++) lane[i % 8] += y[i];
    const double want = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                        ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    const double got = ct_vmath_sum_exp_shifted_f64(z, 0.1, lens[k]);
    CHECK(got == want, "sum of %lld exps %.17g, want %.17g in lane order",
          (long long)lens[k], got, want);
  }
  // The row log-sum-exp: short rows exactly as libm in one chain, long
  // ones through the sum above.
  const int64_t rows[2] = {CT_VMATH_ROW_MIN - 1, CT_VMATH_ROW_MIN};
  for (int k = 0; k < 2; k++) {
    const int64_t n = rows[k];
    double m = -INFINITY, se = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, z[i * 97]);
    if (n < CT_VMATH_ROW_MIN) {
      for (int64_t i = 0; i < n; i++) se += exp(z[i * 97] - m);
    } else {
      float *row = malloc((size_t)n * sizeof *row);
      for (int64_t i = 0; i < n; i++) row[i] = z[i * 97];
      se = ct_vmath_sum_exp_shifted_f64(row, m, n);
      free(row);
    }
    float *row = malloc((size_t)n * sizeof *row);
    for (int64_t i = 0; i < n; i++) row[i] = z[i * 97];
    const double got = ct_vmath_logsumexp_f64(row, n), want = m + log(se);
    CHECK(got == want, "logsumexp of %lld values %.17g, want %.17g",
          (long long)n, got, want);
    free(row);
  }
  free(x);
  free(y);
  free(z);
  free(piece);
}

int main(void) {
  test_erf();
  test_exp();
  test_exp_f64();
  test_gelu();
  test_tanh_sigmoid();
  return test_summary("vmath");
}
