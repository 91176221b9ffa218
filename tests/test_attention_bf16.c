// Fused attention with bf16 products (core/attention_kernel.c, precision
// CT_GEMM_BF16): every block product must multiply its operands rounded to
// bf16 (q, k, v, dO, the unnormalized weights of the forward pass, the
// weights and the logit gradient of the backward pass) and accumulate in
// fp32: on the automatic path (the kernel's own vdpbf16ps block products
// where the CPU has AVX512-BF16, else ct_gemm's best bf16 path) and with
// ct_gemm's emulation forced.
//
// The reference is computed in double from the same rounded operands, so it
// differs from the kernel only by fp32 accumulation, and by the rare weight
// that the kernel (fp32, its own exp) and the reference (double) put on two
// sides of a bf16 rounding boundary: root mean square relative errors of
// 2e-5 for the output and 2e-4 for the gradients (observed: 1e-7 and up to
// 5e-5), against 3e-3 to 4e-3 for products that round nothing. The forward
// pass rounds the weights of each block of 128 keys relative to the running
// max, as the kernel's online softmax does; the reference follows those
// blocks. The automatic path and the emulated bf16 gemm round the same
// operands, so they must agree row by row to 2e-5 (observed: up to 3e-6
// between AVX512-BF16, which sums in its own order and reads subnormals as
// zero, and the emulation), except where the two paths' score sums, taken
// in different orders, put one weight on two sides of a bf16 rounding
// boundary: that moves one row of dv (or of the output) by 2^-8 of one
// term (AMX on 2026-12-01: one row of dv in 784, 2.3e-5 over the whole
// tensor). So at most 1% of the rows may differ by more, and the whole
// tensor by 1e-4; an operand one path left unrounded moves every row by
// about 1e-3. Last, the same problem in fp32 must
// differ from the reference by more than 1e-3, so the test cannot pass with
// the rounding switched off.
//
// Shapes: a Swin window (T = 49, 2 heads, a per-head bias and a window mask,
// several windows), and a cross attention with multi-block queries and keys
// (Tq = 70, Tk = 140, Dh = 40: the column tails of every product) with
// causal limits and key lengths.
#include "core/attention_kernel.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "tests/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// The kernel's key block (BK in core/attention_kernel.c): the forward pass
// rounds its weights relative to the running max of the blocks so far.
enum { KEY_BLOCK = 128 };

typedef struct shape {
  int64_t B, Tq, Tk, NH, Dh, nw;
  bool bias, causal, lengths;
} shape;

static double rb(float x) { return ct_bf16_to_f32(ct_bf16_from_f32(x)); }

// A float in fp32 but rounded to bf16 (what the kernel must multiply).
static double rbd(double x) { return rb((float)x); }

typedef struct problem {
  shape s;
  ct_attn_params p;
  float *q, *k, *v, *bias, *wmask, *dout;
  int32_t *len;
  int64_t nq, nk;  // elements of q/out and of k/v
} problem;

static float *randn(ct_rng *r, int64_t n, float sd) {
  float *x = malloc((size_t)n * sizeof *x);
  ct_rng_fill_normal(r, x, n, 0.0f, sd);
  return x;
}

static problem make(const shape *s) {
  problem pr = {.s = *s};
  ct_rng r = ct_rng_make(2026, 11);
  pr.p = ct_attn_params_make(s->B, s->Tq, s->Tk, s->NH, s->Dh);
  pr.nq = s->B * s->Tq * s->NH * s->Dh;
  pr.nk = s->B * s->Tk * s->NH * s->Dh;
  pr.q = randn(&r, pr.nq, 1.0f);
  pr.k = randn(&r, pr.nk, 1.0f);
  pr.v = randn(&r, pr.nk, 1.0f);
  pr.dout = randn(&r, pr.nq, 1.0f);
  if (s->bias) {
    pr.bias = randn(&r, s->NH * s->Tq * s->Tk, 0.5f);
    pr.p.bias = pr.bias;
  }
  if (s->nw > 0) {
    pr.wmask = randn(&r, s->nw * s->Tq * s->Tk, 0.5f);
    for (int64_t i = 0; i < s->nw * s->Tq * s->Tk; i++)
      if (i % 3 == 1 && i / s->Tk % s->Tq != i % s->Tk) pr.wmask[i] = -100.0f;
    pr.p.window_mask = pr.wmask;
    pr.p.n_windows = s->nw;
  }
  if (s->lengths) {
    pr.len = malloc((size_t)s->B * sizeof *pr.len);
    for (int64_t b = 0; b < s->B; b++)
      pr.len[b] = (int32_t)(s->Tk - 7 * b > 1 ? s->Tk - 7 * b : 1);
    pr.p.key_lengths = pr.len;
  }
  pr.p.causal = s->causal;
  return pr;
}

static void problem_free(problem *pr) {
  free(pr->q), free(pr->k), free(pr->v), free(pr->dout);
  free(pr->bias), free(pr->wmask), free(pr->len);
}

static int64_t at(const problem *pr, int64_t b, int64_t t, int64_t h,
                  int64_t T) {
  return ((b * T + t) * pr->s.NH + h) * pr->s.Dh;
}

// Visible key j of query i in batch row b.
static bool visible(const problem *pr, int64_t b, int64_t i, int64_t j) {
  if (pr->len && j >= pr->len[b]) return false;
  if (pr->s.causal && j > i + (pr->s.Tk - pr->s.Tq)) return false;
  return true;
}

// Logit of (b, h, i, j) from rounded q and k, in double.
static double logit(const problem *pr, int64_t b, int64_t h, int64_t i,
                    int64_t j) {
  const shape *s = &pr->s;
  const float *qi = pr->q + at(pr, b, i, h, s->Tq);
  const float *kj = pr->k + at(pr, b, j, h, s->Tk);
  double dot = 0.0;
  for (int64_t d = 0; d < s->Dh; d++) dot += rb(qi[d]) * rb(kj[d]);
  double x = (double)pr->p.scale * dot;
  if (pr->bias) x += pr->bias[(h * s->Tq + i) * s->Tk + j];
  if (pr->wmask) x += pr->wmask[((b % s->nw) * s->Tq + i) * s->Tk + j];
  return x;
}

// The reference forward and backward: out, dq, dk, dv (all in double).
static void reference(const problem *pr, double *out, double *dq, double *dk,
                      double *dv) {
  const shape *s = &pr->s;
  memset(dq, 0, (size_t)pr->nq * sizeof *dq);
  memset(dk, 0, (size_t)pr->nk * sizeof *dk);
  memset(dv, 0, (size_t)pr->nk * sizeof *dv);
  double *x = malloc((size_t)s->Tk * sizeof *x);
  double *e = malloc((size_t)s->Tk * sizeof *e);
  double *dp = malloc((size_t)s->Tk * sizeof *dp);
  for (int64_t b = 0; b < s->B; b++)
    for (int64_t h = 0; h < s->NH; h++)
      for (int64_t i = 0; i < s->Tq; i++) {
        double m = -INFINITY;
        for (int64_t j = 0; j < s->Tk; j++) {
          x[j] = visible(pr, b, i, j) ? logit(pr, b, h, i, j) : -INFINITY;
          if (x[j] > m) m = x[j];
        }
        // The forward pass multiplies V by unnormalized weights, exp(x -
        // the running max) of each block of KEY_BLOCK keys (online softmax),
        // rounded; the accumulator is rescaled when the max grows, and
        // divided by the sum of the unrounded weights at the end.
        double *o = out + at(pr, b, i, h, s->Tq);
        const float *g = pr->dout + at(pr, b, i, h, s->Tq);
        double mr = -INFINITY, l = 0.0;
        for (int64_t d = 0; d < s->Dh; d++) o[d] = 0.0;
        for (int64_t j0 = 0; j0 < s->Tk; j0 += KEY_BLOCK) {
          const int64_t j1 = j0 + KEY_BLOCK < s->Tk ? j0 + KEY_BLOCK : s->Tk;
          double bm = mr;
          for (int64_t j = j0; j < j1; j++)
            if (x[j] > bm) bm = x[j];
          if (bm == -INFINITY) continue;
          const double corr = mr == -INFINITY ? 0.0 : exp(mr - bm);
          l *= corr;
          for (int64_t d = 0; d < s->Dh; d++) o[d] *= corr;
          for (int64_t j = j0; j < j1; j++) {
            const double w = x[j] == -INFINITY ? 0.0 : exp(x[j] - bm);
            l += w;
            const float *vj = pr->v + at(pr, b, j, h, s->Tk);
            for (int64_t d = 0; d < s->Dh; d++) o[d] += rbd(w) * rb(vj[d]);
          }
          mr = bm;
        }
        for (int64_t d = 0; d < s->Dh; d++) o[d] /= l;
        for (int64_t j = 0; j < s->Tk; j++)
          e[j] = x[j] == -INFINITY ? 0.0 : exp(x[j] - m);
        double sum = 0.0;
        for (int64_t j = 0; j < s->Tk; j++) sum += e[j];
        for (int64_t j = 0; j < s->Tk; j++) e[j] /= sum;
        // Backward: P normalized, delta = dO . O (unrounded), dS = P (dP -
        // delta) with dP from rounded dO and V.
        double delta = 0.0;
        for (int64_t d = 0; d < s->Dh; d++) delta += (double)g[d] * o[d];
        for (int64_t j = 0; j < s->Tk; j++) {
          const float *vj = pr->v + at(pr, b, j, h, s->Tk);
          double acc = 0.0;
          for (int64_t d = 0; d < s->Dh; d++) acc += rb(g[d]) * rb(vj[d]);
          const double p = e[j];
          dp[j] = p * (acc - delta);
          double *dvj = dv + at(pr, b, j, h, s->Tk);
          for (int64_t d = 0; d < s->Dh; d++) dvj[d] += rbd(p) * rb(g[d]);
        }
        double *dqi = dq + at(pr, b, i, h, s->Tq);
        const float *qi = pr->q + at(pr, b, i, h, s->Tq);
        for (int64_t j = 0; j < s->Tk; j++) {
          const float *kj = pr->k + at(pr, b, j, h, s->Tk);
          double *dkj = dk + at(pr, b, j, h, s->Tk);
          const double ds = pr->p.scale * rbd(dp[j]);
          for (int64_t d = 0; d < s->Dh; d++) {
            dqi[d] += ds * rb(kj[d]);
            dkj[d] += ds * rb(qi[d]);
          }
        }
      }
  free(x), free(e), free(dp);
}

// rms(got - want) / rms(want) over n values (NaN gives infinity). Root
// mean squares, not maxima: a weight the kernel computes in fp32 with its
// own exp can sit on the other side of a bf16 rounding boundary from the
// double reference's, which moves a few elements by 2^-8 of one term; an
// operand left unrounded moves them all.
static double rel_err(const float *got, const double *want, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const double d = (double)got[i] - want[i];
    if (isnan(d)) return INFINITY;
    num += d * d;
    den += want[i] * want[i];
  }
  return sqrt(num / (den + 1e-30));
}

// Rows of n values (Dh, one (b, t, h)) whose rms(got - want) exceeds tol
// times rms(want) over all the rows.
static int64_t rows_apart(const float *got, const double *want, int64_t rows,
                          int64_t n, double tol) {
  double den = 0.0;
  for (int64_t i = 0; i < rows * n; i++) den += want[i] * want[i];
  const double limit = tol * tol * (den / (double)rows + 1e-30);
  int64_t apart = 0;
  for (int64_t r = 0; r < rows; r++) {
    double num = 0.0;
    for (int64_t d = 0; d < n; d++) {
      const double x = (double)got[r * n + d] - want[r * n + d];
      num += isnan(x) ? INFINITY : x * x;
    }
    apart += !(num <= limit);
  }
  return apart;
}

typedef struct result {
  float *out, *lse, *dq, *dk, *dv;
} result;

static result run(const problem *pr) {
  result r = {
      .out = malloc((size_t)pr->nq * sizeof(float)),
      .lse = malloc((size_t)(pr->s.B * pr->s.NH * pr->s.Tq) * sizeof(float)),
      .dq = calloc((size_t)pr->nq, sizeof(float)),
      .dk = calloc((size_t)pr->nk, sizeof(float)),
      .dv = calloc((size_t)pr->nk, sizeof(float))};
  CHECK(
      ct_attention_forward(&pr->p, pr->q, pr->k, pr->v, r.out, r.lse) == CT_OK,
      "forward runs");
  CHECK(ct_attention_backward(&pr->p, pr->q, pr->k, pr->v, r.out, r.lse,
                              pr->dout, r.dq, r.dk, r.dv, NULL) == CT_OK,
        "backward runs");
  return r;
}

static void result_free(result *r) {
  free(r->out), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
}

static void check_shape(const shape *s, const char *name) {
  problem pr = make(s);
  double *out = malloc((size_t)pr.nq * sizeof *out);
  double *dq = malloc((size_t)pr.nq * sizeof *dq);
  double *dk = malloc((size_t)pr.nk * sizeof *dk);
  double *dv = malloc((size_t)pr.nk * sizeof *dv);
  reference(&pr, out, dq, dk, dv);

  // The automatic path, then the emulated bf16 gemm forced (ct_gemm does the
  // block products): both must match the rounded reference, and each other
  // to fp32 accumulation (they round the same weights).
  const ct_gemm_bf16_path paths[] = {CT_GEMM_BF16_AUTO, CT_GEMM_BF16_EMULATED};
  result r[2];
  ct_gemm_set_precision(CT_GEMM_BF16);
  for (int i = 0; i < 2; i++) {
    ct_gemm_bf16_force_path(paths[i]);
    r[i] = run(&pr);
    const double e_out = rel_err(r[i].out, out, pr.nq),
                 e_dq = rel_err(r[i].dq, dq, pr.nq),
                 e_dk = rel_err(r[i].dk, dk, pr.nk),
                 e_dv = rel_err(r[i].dv, dv, pr.nk);
    CHECK(e_out < 2e-5 && e_dq < 2e-4 && e_dk < 2e-4 && e_dv < 2e-4,
          "%s, bf16 path %s: relative errors out %.2e (< 2e-5) dq %.2e dk "
          "%.2e dv %.2e (< 2e-4) against the rounded reference",
          name, ct_gemm_bf16_path_name(paths[i]), e_out, e_dq, e_dk, e_dv);
  }
  ct_gemm_bf16_force_path(CT_GEMM_BF16_AUTO);
  const struct {
    const char *what;
    const float *a, *b;
    int64_t n;
  } pairs[] = {{"out", r[0].out, r[1].out, pr.nq},
               {"dq", r[0].dq, r[1].dq, pr.nq},
               {"dk", r[0].dk, r[1].dk, pr.nk},
               {"dv", r[0].dv, r[1].dv, pr.nk}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    double *want = malloc((size_t)pairs[i].n * sizeof *want);
    for (int64_t j = 0; j < pairs[i].n; j++) want[j] = pairs[i].b[j];
    const double e = rel_err(pairs[i].a, want, pairs[i].n);
    const int64_t rows = pairs[i].n / s->Dh;
    const int64_t apart = rows_apart(pairs[i].a, want, rows, s->Dh, 2e-5);
    CHECK(e < 1e-4 && apart * 100 <= rows,
          "%s: %s of the automatic and the emulated bf16 path differ by "
          "%.2e (< 1e-4), %lld of %lld rows by more than 2e-5 (at most 1%%)",
          name, pairs[i].what, e, (long long)apart, (long long)rows);
    free(want);
  }
  result_free(&r[0]);
  result_free(&r[1]);

  // fp32 products are measurably different: the reference above is not
  // what an unrounded kernel computes.
  ct_gemm_set_precision(CT_GEMM_FP32);
  result r32 = run(&pr);
  const double e32 = rel_err(r32.out, out, pr.nq);
  CHECK(e32 > 1e-3,
        "%s: fp32 products differ from the bf16 reference (%.2e > 1e-3)", name,
        e32);
  result_free(&r32);

  free(out), free(dq), free(dk), free(dv);
  problem_free(&pr);
}

int main(void) {
  const shape swin = {
      .B = 8, .Tq = 49, .Tk = 49, .NH = 2, .Dh = 32, .nw = 4, .bias = true};
  const shape cross = {.B = 3,
                       .Tq = 70,
                       .Tk = 140,
                       .NH = 2,
                       .Dh = 40,
                       .causal = true,
                       .lengths = true};
  check_shape(&swin, "swin window T=49");
  check_shape(&cross, "cross Tq=70 Tk=140 Dh=40");
  return test_summary("attention_bf16");
}
