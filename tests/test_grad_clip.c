// Finite-difference gradient checks of what CLIP (nn/clip.h) adds: the exp
// op (the temperature exp(s)), the L2 row normalization (F.normalize), the
// end-of-text pooling head of the text tower (row gather at eot, ln_final,
// text_projection, normalization) and the contrastive loss, including the
// temperature s and the offset (data-parallel local_loss) form with
// img_all/txt_all distinct tensors; plus the loss's value against a double
// computation and its bad-input errors.
#include "autograd/ops.h"
#include "autograd/ops_box.h"
#include "core/threads.h"
#include "nn/clip.h"
#include "tests/grad_util.h"

#include <math.h>
#include <string.h>

enum { OP_EXP, OP_L2N, OP_POOL, OP_LOSS_SAME, OP_LOSS_LOCAL, OP_LOSS_NORM };

typedef struct grad_case {
  int op;
  int64_t offset;
} grad_case;

static ct_tensor *run(ct_tensor *const *in, void *ctx) {
  const grad_case *c = ctx;
  switch (c->op) {
  case OP_EXP: return ct_exp(in[0]);
  case OP_L2N: return ct_l2_normalize(in[0], 1e-12f);
  case OP_POOL: {  // x (B,T,W), idx (B) rows b*T+eot[b], ln w/b, proj (W,E)
    ct_tensor *x = in[0];
    const int64_t B = x->shape[0], T = x->shape[1], W = x->shape[2];
    ct_tensor *h = ct_gather_rows(ct_reshape(x, CT_SHAPE(B * T, W)), in[1]);
    h = ct_layernorm(h, in[2], in[3], 1e-5f);
    return ct_l2_normalize(ct_matmul(h, in[4], false, false), 1e-12f);
  }
  case OP_LOSS_SAME:  // one process: img_all = img, txt_all = txt
    return ct_nn_clip_loss(in[0], in[1], in[0], in[1], 0, in[2]);
  case OP_LOSS_LOCAL:
    return ct_nn_clip_loss(in[0], in[1], in[2], in[3], c->offset, in[4]);
  case OP_LOSS_NORM:  // on normalized features, as the model feeds it
    return ct_nn_clip_loss(ct_l2_normalize(in[0], 1e-12f),
                           ct_l2_normalize(in[1], 1e-12f),
                           ct_l2_normalize(in[0], 1e-12f),
                           ct_l2_normalize(in[1], 1e-12f), 0, in[2]);
  }
  return NULL;
}

static void check(const char *what, grad_case c, ct_tensor *const *in, int n) {
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  grad_check(what, run, &c, in, n, &o);
}

// A scalar s (0-dim) that requires grad.
static ct_tensor *scale_input(float s) {
  return ct_requires_grad(ct_tensor_from(CT_F32, &s, 0, NULL));
}

static void test_exp(void) {
  check("exp (4, 5)", (grad_case){OP_EXP, 0},
        (ct_tensor *[]){grad_input(CT_SHAPE(4, 5))}, 1);
  check("exp 0-dim", (grad_case){OP_EXP, 0},
        (ct_tensor *[]){scale_input(2.659f)}, 1);
  ct_tensor *y =
      ct_exp(ct_tensor_from(CT_F32, (float[]){0.0f, 1.0f, -2.0f}, CT_SHAPE(3)));
  CHECK(y && ct_f32(y)[0] == 1.0f && ct_f32(y)[1] == expf(1.0f) &&
            ct_f32(y)[2] == expf(-2.0f),
        "exp values");
  ct_arena_reset();
}

static void test_l2_normalize(void) {
  check("l2_normalize (5, 4)", (grad_case){OP_L2N, 0},
        (ct_tensor *[]){grad_input(CT_SHAPE(5, 4))}, 1);
  check("l2_normalize (2, 3, 7)", (grad_case){OP_L2N, 0},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 7))}, 1);
  check("l2_normalize (3, 1)", (grad_case){OP_L2N, 0},
        (ct_tensor *[]){grad_input(CT_SHAPE(3, 1))}, 1);

  // Values: a unit row, a 3-4-5 row, and a zero row (the clamp: zeros, no
  // NaN, and the gradient dy / eps of F.normalize's clamped norm).
  const float v[6] = {3.0f, 4.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  ct_tensor *x = ct_requires_grad(ct_tensor_from(CT_F32, v, CT_SHAPE(3, 2)));
  memcpy(ct_f32(x) + 2, (float[]){1.0f, 0.0f}, 2 * sizeof(float));
  ct_tensor *y = ct_l2_normalize(x, 1e-12f);
  CHECK(y && fabsf(ct_f32(y)[0] - 0.6f) < 1e-7f &&
            fabsf(ct_f32(y)[1] - 0.8f) < 1e-7f && ct_f32(y)[2] == 1.0f &&
            ct_f32(y)[3] == 0.0f && ct_f32(y)[4] == 0.0f &&
            ct_f32(y)[5] == 0.0f,
        "l2_normalize values");
  ct_tensor *loss = ct_sum(
      ct_mul(y, ct_tensor_from(CT_F32, (float[]){0, 0, 0, 0, 1e-12f, 2e-12f},
                               CT_SHAPE(3, 2))));
  CHECK(loss && ct_backward(loss) == CT_OK, "l2_normalize backward: %s",
        ct_last_error());
  CHECK(x->grad && fabsf(x->grad[4] - 1.0f) < 1e-6f &&
            fabsf(x->grad[5] - 2.0f) < 1e-6f,
        "l2_normalize of a zero row: gradient dy / eps, got %g %g",
        x->grad ? x->grad[4] : NAN, x->grad ? x->grad[5] : NAN);
  CHECK(!ct_l2_normalize(x, 0.0f) && strstr(ct_last_error(), "eps"),
        "l2_normalize eps 0: %s", ct_last_error());
  ct_arena_reset();
}

// The text tower's pooling head: rows at each caption's end-of-text, so
// gradient reaches only those positions (checked by the gradcheck: every
// element of x, the unpooled ones with gradient 0).
static void test_eot_pooling(void) {
  const int64_t B = 3, T = 5, W = 4, E = 3;
  const int64_t eot[3] = {4, 1, 2};
  ct_tensor *idx = ct_tensor_empty(CT_I32, CT_SHAPE(B));
  for (int64_t b = 0; b < B; b++) ct_i32(idx)[b] = (int32_t)(b * T + eot[b]);
  ct_tensor *in[5] = {grad_input(CT_SHAPE(B, T, W)), idx,
                      grad_input(CT_SHAPE(W)), grad_input(CT_SHAPE(W)),
                      grad_input(CT_SHAPE(W, E))};
  check("eot pooling (3, 5, 4) -> (3, 3)", (grad_case){OP_POOL, 0}, in, 5);
}

static void test_loss_grads(void) {
  check("clip loss img=img_all (4, 3), s", (grad_case){OP_LOSS_SAME, 0},
        (ct_tensor *[]){grad_input(CT_SHAPE(4, 3)), grad_input(CT_SHAPE(4, 3)),
                        scale_input(0.7f)},
        3);
  check("clip loss on normalized (5, 4), s", (grad_case){OP_LOSS_NORM, 0},
        (ct_tensor *[]){grad_input(CT_SHAPE(5, 4)), grad_input(CT_SHAPE(5, 4)),
                        scale_input(1.2f)},
        3);
  // The local form: rows 2..3 of a global batch of 6, img_all/txt_all
  // distinct tensors (another rank's view of the gathered features).
  check("clip loss local (2, 3) at 2 of 6, s", (grad_case){OP_LOSS_LOCAL, 2},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3)), grad_input(CT_SHAPE(2, 3)),
                        grad_input(CT_SHAPE(6, 3)), grad_input(CT_SHAPE(6, 3)),
                        scale_input(0.3f)},
        5);
  check("clip loss local (3, 3) at 3 of 6, s", (grad_case){OP_LOSS_LOCAL, 3},
        (ct_tensor *[]){grad_input(CT_SHAPE(3, 3)), grad_input(CT_SHAPE(3, 3)),
                        grad_input(CT_SHAPE(6, 3)), grad_input(CT_SHAPE(6, 3)),
                        scale_input(-0.4f)},
        5);
}

// -log softmax_j(z_j)[t] in double.
static double ce_row(const double *z, int64_t n, int64_t t) {
  double m = -INFINITY, s = 0.0;
  for (int64_t j = 0; j < n; j++) m = fmax(m, z[j]);
  for (int64_t j = 0; j < n; j++) s += exp(z[j] - m);
  return m + log(s) - z[t];
}

// The loss against the formula in double: local rows 1..2 of 4.
static void test_loss_value(void) {
  const int64_t B = 2, N = 4, E = 3, off = 1;
  ct_tensor *img = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(B, E));
  ct_tensor *txt = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(B, E));
  ct_tensor *ia = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(N, E));
  ct_tensor *ta = ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(N, E));
  const float s = 0.5f;
  ct_tensor *loss = ct_nn_clip_loss(img, txt, ia, ta, off,
                                    ct_tensor_from(CT_F32, &s, 0, NULL));
  double want = 0.0;
  for (int dir = 0; dir < 2; dir++) {
    const float *q = ct_f32(dir ? txt : img), *k = ct_f32(dir ? ia : ta);
    for (int64_t i = 0; i < B; i++) {
      double z[4];
      for (int64_t j = 0; j < N; j++) {
        double d = 0.0;
        for (int64_t e = 0; e < E; e++)
          d += (double)q[i * E + e] * k[j * E + e];
        z[j] = exp((double)s) * d;
      }
      want += ce_row(z, N, off + i) / (double)B / 2.0;
    }
  }
  const double got = loss ? ct_f32(loss)[0] : NAN;
  printf("  clip loss value %.7f, double %.7f\n", got, want);
  CHECK(loss && fabs(got - want) <= 1e-5 * fabs(want), "clip loss %.9g vs %.9g",
        got, want);

  // Bad input: the errors name the problem.
  ct_tensor *sc = ct_tensor_from(CT_F32, &s, 0, NULL);
  CHECK(!ct_nn_clip_loss(img, txt, ia, ta, 3, sc) &&
            strstr(ct_last_error(), "offset 3"),
        "offset past the gathered rows: %s", ct_last_error());
  CHECK(!ct_nn_clip_loss(img, ct_tensor_zeros(CT_F32, CT_SHAPE(B, E + 1)), ia,
                         ta, 0, sc) &&
            strstr(ct_last_error(), "argument 2"),
        "a text of another width: %s", ct_last_error());
  CHECK(!ct_nn_clip_loss(img, txt, ia, ta, 0,
                         ct_tensor_zeros(CT_F32, CT_SHAPE(2))) &&
            strstr(ct_last_error(), "logit_scale"),
        "a 2-element scale: %s", ct_last_error());
  ct_arena_reset();
}

int main(void) {
  ct_threads_from_env();
  test_exp();
  test_l2_normalize();
  test_eot_pooling();
  test_loss_grads();
  test_loss_value();
  ct_arena_release();
  return test_summary("grad_clip");
}
