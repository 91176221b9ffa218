// ct_linear_fused (autograd/ops_matmul.c): finite-difference gradient
// checks, and the same bits as the separate ops,
// ct_add(r, ct_linear(ct_gelu(x, CT_GELU_ERF), w, b)) (or ct_relu_dropout
// for the GELU, ct_add_dropout for the add), forward and backward, with and
// without the GELU, the ReLU and dropout, and the residual (dropped or not), both when x's gradient starts
// with this op (assigned) and when another op wrote it first (accumulated),
// in fp32 and in bf16 precision.
// Prints the max differences.
#include "autograd/ops.h"
#include "core/gemm.h"
#include "tests/grad_util.h"

#include <stdlib.h>
#include <string.h>

typedef struct fcase {
  bool gelu, residual, bias;
  bool relu_drop;  // instead of the GELU: ct_relu_dropout(x, 0.3, 5, 9)
  bool res_drop;   // ct_add_dropout(r, branch, 0.2, 5, 11) for the add
} fcase;

enum { DROP_SEED = 5, DROP_STREAM = 9, RES_STREAM = 11 };
static const float drop_p = 0.3f, res_p = 0.2f;

static ct_tensor *run_fused(ct_tensor *const *in, void *ctx) {
  const fcase *c = ctx;
  ct_linear_fusion f = {.gelu_input = c->gelu,
                        .relu_dropout = c->relu_drop ? drop_p : 0.0f,
                        .dropout_seed = DROP_SEED,
                        .dropout_stream = DROP_STREAM,
                        .residual = c->residual ? in[3] : NULL,
                        .residual_dropout = c->res_drop ? res_p : 0.0f,
                        .residual_stream = RES_STREAM};
  return ct_linear_fused(in[0], in[1], c->bias ? in[2] : NULL, &f);
}

static double max_diff(const float *a, const float *b, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
  return m;
}

enum { N_OUT = 5 };  // y, dx, dw, db, dr

// Outputs of loss = sum(y * s) [+ sum(x * t) + sum(r * s), recorded after
// y, so that x's and r's gradients are written first by those muls], fused
// or composed. Without them, r takes over y's gradient buffer
// (CT_NODE_GRAD_PASS) in the fused op.
static void forward_backward(const fcase *c, bool fused, bool twice,
                             ct_tensor *const *in, ct_tensor *s, ct_tensor *t,
                             float **out) {
  for (int i = 0; i < 4; i++) in[i]->grad = NULL;
  ct_tensor *x = in[0], *w = in[1], *b = c->bias ? in[2] : NULL;
  ct_tensor *r = c->residual ? in[3] : NULL;
  ct_tensor *y;
  if (fused) {
    y = run_fused(in, (void *)c);
  } else {
    ct_tensor *h = c->gelu ? ct_gelu(x, CT_GELU_ERF)
                   : c->relu_drop
                       ? ct_relu_dropout(x, drop_p, DROP_SEED, DROP_STREAM)
                       : x;
    y = ct_linear(h, w, b);
    if (r)
      y = c->res_drop ? ct_add_dropout(r, y, res_p, DROP_SEED, RES_STREAM)
                      : ct_add(r, y);
  }
  ct_tensor *loss = ct_sum(ct_mul(y, s));
  if (twice) loss = ct_add(loss, ct_sum(ct_mul(x, t)));
  // r's gradient then written first too (added to, not taken over).
  if (twice && r) loss = ct_add(loss, ct_sum(ct_mul(r, s)));
  CHECK(loss && ct_backward(loss) == CT_OK, "backward: %s", ct_last_error());
  const ct_tensor *src[N_OUT] = {y, x, w, in[2], in[3]};
  for (int i = 0; i < N_OUT; i++) {
    const int64_t n = src[i]->numel;
    out[i] = calloc((size_t)n, sizeof(float));
    const float *from = i == 0 ? ct_f32(y) : src[i]->grad;
    if (from) memcpy(out[i], from, (size_t)n * sizeof(float));
  }
}

// Sizes: past one vector and one GELU block with odd tails (37, 131, 29);
// or rows in two chunks of the GELU path (40, 8200, 3).
static void check_same_bits(const fcase *c, bool twice, int64_t N, int64_t IN,
                            int64_t OUT) {
  ct_tensor *in[4] = {grad_input(CT_SHAPE(N, IN)),
                      grad_input(CT_SHAPE(OUT, IN)), grad_input(CT_SHAPE(OUT)),
                      grad_input(CT_SHAPE(N, OUT))};
  ct_tensor *s = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(N, OUT));
  ct_tensor *t = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(N, IN));
  float *f[N_OUT], *g[N_OUT];
  forward_backward(c, true, twice, in, s, t, f);
  forward_backward(c, false, twice, in, s, t, g);
  static const char *names[N_OUT] = {"y", "dx", "dw", "db", "dr"};
  const int64_t sizes[N_OUT] = {N * OUT, N * IN, OUT * IN, OUT, N * OUT};
  printf(
      "  (%lld, %lld, %lld) gelu %d relu_dropout %d residual %d%s bias %d "
      "%s: max diff",
      (long long)N, (long long)IN, (long long)OUT, c->gelu, c->relu_drop,
      c->residual, c->res_drop ? " (dropped)" : "", c->bias,
      twice ? "accumulated dx" : "assigned dx");
  for (int i = 0; i < N_OUT; i++) {
    printf(" %s %g", names[i], max_diff(f[i], g[i], sizes[i]));
    CHECK(memcmp(f[i], g[i], (size_t)sizes[i] * sizeof(float)) == 0,
          "fused %s differs (gelu %d relu_dropout %d residual %d bias %d "
          "twice %d)",
          names[i], c->gelu, c->relu_drop, c->residual, c->bias, twice);
    free(f[i]);
    free(g[i]);
  }
  printf("\n");
  ct_arena_reset();
}

int main(void) {
  for (int k = 0; k < 15; k++) {
    // k 0-7: GELU or not; 8-11: ReLU and dropout; 12-14: the residual's
    // branch dropped (plain, GELU, ReLU and dropout).
    const int j = k < 8 ? k : k < 12 ? 2 * (k - 8) : 6;  // residual, bias
    fcase c = {.gelu = (k < 8 && (k & 1)) || k == 13,
               .residual = j & 2,
               .bias = j & 4,
               .relu_drop = (k >= 8 && k < 12) || k == 14,
               .res_drop = k >= 12};
    ct_tensor *in[4] = {grad_input(CT_SHAPE(2, 3, 5)),
                        grad_input(CT_SHAPE(4, 5)), grad_input(CT_SHAPE(4)),
                        grad_input(CT_SHAPE(2, 3, 4))};
    char what[96];
    snprintf(what, sizeof what,
             "linear_fused gelu %d relu_dropout %d residual %d%s bias %d",
             c.gelu, c.relu_drop, c.residual, c.res_drop ? " (dropped)" : "",
             c.bias);
    grad_check(what, run_fused, &c, in, 4, NULL);
    check_same_bits(&c, false, 37, 131, 29);
    check_same_bits(&c, true, 37, 131, 29);
    check_same_bits(&c, false, 40, 8200, 3);
    check_same_bits(&c, true, 40, 8200, 3);
    // In bf16 precision too (the GELU's output for dw then kept in bf16).
    ct_gemm_set_precision(CT_GEMM_BF16);
    check_same_bits(&c, false, 37, 131, 29);
    check_same_bits(&c, true, 40, 8200, 3);
    ct_gemm_set_precision(CT_GEMM_FP32);
  }
  // Errors name the op.
  ct_tensor *x = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3));
  ct_tensor *w = ct_tensor_zeros(CT_F32, CT_SHAPE(4, 3));
  ct_tensor *bad = ct_tensor_zeros(CT_F32, CT_SHAPE(4, 5));
  CHECK(ct_linear_fused(x, bad, NULL, NULL) == NULL &&
            strstr(ct_last_error(), "linear_fused") != NULL,
        "weight shape error: %s", ct_last_error());
  ct_linear_fusion f = {.residual = bad};
  CHECK(ct_linear_fused(x, w, NULL, &f) == NULL &&
            strstr(ct_last_error(), "linear_fused") != NULL,
        "residual shape error: %s", ct_last_error());
  ct_linear_fusion both = {.gelu_input = true, .relu_dropout = 0.5f};
  ct_linear_fusion bad_p = {.relu_dropout = 1.5f};
  ct_linear_fusion no_r = {.residual_dropout = 0.5f};
  CHECK(ct_linear_fused(x, w, NULL, &no_r) == NULL &&
            strstr(ct_last_error(), "residual_dropout") != NULL,
        "residual_dropout without a residual: %s", ct_last_error());
  CHECK(ct_linear_fused(x, w, NULL, &both) == NULL &&
            ct_linear_fused(x, w, NULL, &bad_p) == NULL &&
            strstr(ct_last_error(), "relu_dropout") != NULL,
        "relu_dropout errors: %s", ct_last_error());
  ct_arena_reset();
  return test_summary("linear_fused");
}
