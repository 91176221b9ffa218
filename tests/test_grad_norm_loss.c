// Finite-difference gradient checks, forward values and bad-input errors for
// softmax, log-softmax, layer norm (autograd/ops_norm.c) and the losses
// (autograd/ops_loss.c). PyTorch parity of cross-entropy is in
// test_ce_parity.c.
//
// Loss gradients are small (a mean over many elements), so their checks use
// a larger step and an absolute tolerance scaled to them: with the default
// atol a wrong backward could hide under it.
#include "autograd/ops.h"
#include "core/threads.h"
#include "tests/grad_util.h"

#include <string.h>

enum {
  OP_SOFTMAX,
  OP_LOG_SOFTMAX,
  OP_LAYERNORM,
  OP_CE,
  OP_KL,
  OP_MSE,
  OP_L1,
  OP_FOCAL,
};

typedef struct op_case {
  int op;
  ct_ce_opts ce;        // OP_CE
  bool log_target;      // OP_KL
  ct_reduction reduce;  // OP_KL, OP_FOCAL
  float alpha, gamma;   // OP_FOCAL
  ct_tensor *targets;   // OP_FOCAL (no gradient)
} op_case;

// in[0] is the main input; layernorm takes (x, weight, bias) with NULLs for
// missing ones, the losses (a, b) or (logits, targets).
static ct_tensor *run(ct_tensor *const *in, void *ctx) {
  const op_case *c = ctx;
  switch (c->op) {
  case OP_SOFTMAX: return ct_softmax(in[0]);
  case OP_LOG_SOFTMAX: return ct_log_softmax(in[0]);
  case OP_LAYERNORM: return ct_layernorm(in[0], in[1], in[2], 1e-5f);
  case OP_CE: return ct_cross_entropy(in[0], in[1], &c->ce);
  case OP_KL: return ct_kl_div(in[0], in[1], c->log_target, c->reduce);
  case OP_MSE: return ct_mse(in[0], in[1]);
  case OP_L1: return ct_l1(in[0], in[1]);
  case OP_FOCAL:
    return ct_sigmoid_focal_loss(in[0], c->targets, c->alpha, c->gamma,
                                 c->reduce);
  }
  return NULL;
}

// The softmaxes and layer norm: a step of 1e-2, not 1e-3, because perturbing
// one element changes its whole row, and the float rounding of C outputs,
// divided by the step, would otherwise approach atol for C = 129.
static void check(const char *what, op_case c, ct_tensor *const *in, int n,
                  const ct_gradcheck_opts *opts) {
  ct_gradcheck_opts norm = ct_gradcheck_defaults();
  norm.eps = 1e-2;
  grad_check(what, run, &c, in, n, opts ? opts : &norm);
}

// For the scalar losses: atol is set per case to about 1% of the typical
// gradient. It must stay above the finite-difference noise, half an ulp of
// the float loss over 2 eps (6e-6 for a loss in [2, 4) and eps 1e-2), hence
// the floor.
static ct_gradcheck_opts loss_opts(double atol) {
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.eps = 1e-2;
  o.atol = fmax(atol, 2e-5);
  o.rtol = 5e-3;
  return o;
}

static ct_tensor *targets_for(int ndim, const int64_t *shape, int64_t K,
                              double ignore_frac, int32_t ignore_index) {
  ct_tensor *t = ct_tensor_empty(CT_I32, ndim, shape);
  for (int64_t i = 0; i < t->numel; i++) {
    ct_i32(t)[i] = (int32_t)ct_rng_next_below(&grad_test_rng, (uint64_t)K);
    if (ct_rng_next_double(&grad_test_rng) < ignore_frac)
      ct_i32(t)[i] = ignore_index;
  }
  return t;
}

static ct_tensor *uniform(float lo, float hi, int ndim, const int64_t *shape,
                          bool grad) {
  ct_tensor *t = ct_tensor_rand(&grad_test_rng, lo, hi, ndim, shape);
  return grad ? ct_requires_grad(t) : t;
}

// ---- softmax, log-softmax, layer norm -------------------------------------------

static void test_softmax_grads(void) {
  const op_case sm = {.op = OP_SOFTMAX}, lsm = {.op = OP_LOG_SOFTMAX};
  check("softmax (1)", sm, (ct_tensor *[]){grad_input(CT_SHAPE(1))}, 1, NULL);
  check("softmax (5, 1)", sm, (ct_tensor *[]){grad_input(CT_SHAPE(5, 1))}, 1,
        NULL);
  check("softmax (129, 7)", sm, (ct_tensor *[]){grad_input(CT_SHAPE(129, 7))},
        1, NULL);
  check("softmax (3, 129)", sm, (ct_tensor *[]){grad_input(CT_SHAPE(3, 129))},
        1, NULL);
  check("softmax (2, 3, 7)", sm, (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 7))},
        1, NULL);
  check("log_softmax (1)", lsm, (ct_tensor *[]){grad_input(CT_SHAPE(1))}, 1,
        NULL);
  check("log_softmax (129, 7)", lsm,
        (ct_tensor *[]){grad_input(CT_SHAPE(129, 7))}, 1, NULL);
  check("log_softmax (3, 129)", lsm,
        (ct_tensor *[]){grad_input(CT_SHAPE(3, 129))}, 1, NULL);
  check("log_softmax (2, 3, 7)", lsm,
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 7))}, 1, NULL);
}

static void test_layernorm_grads(void) {
  const op_case ln = {.op = OP_LAYERNORM};
  check("layernorm (129, 7) w, b", ln,
        (ct_tensor *[]){grad_input(CT_SHAPE(129, 7)), grad_input(CT_SHAPE(7)),
                        grad_input(CT_SHAPE(7))},
        3, NULL);
  check("layernorm (3, 129) w, b", ln,
        (ct_tensor *[]){grad_input(CT_SHAPE(3, 129)), grad_input(CT_SHAPE(129)),
                        grad_input(CT_SHAPE(129))},
        3, NULL);
  check("layernorm (2, 3, 7) w, b", ln,
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 7)), grad_input(CT_SHAPE(7)),
                        grad_input(CT_SHAPE(7))},
        3, NULL);
  check("layernorm (2, 3, 7) no w, b", ln,
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 7)), NULL, NULL}, 3, NULL);
  check("layernorm (5, 7) w only", ln,
        (ct_tensor *[]){grad_input(CT_SHAPE(5, 7)), grad_input(CT_SHAPE(7)),
                        NULL},
        3, NULL);
  check("layernorm (5, 7) b only", ln,
        (ct_tensor *[]){grad_input(CT_SHAPE(5, 7)), NULL,
                        grad_input(CT_SHAPE(7))},
        3, NULL);
  // Only the parameters require grad (x is a constant input).
  ct_tensor *x = ct_tensor_randn(&grad_test_rng, 0.5f, 2.0f, CT_SHAPE(4, 9));
  check("layernorm (4, 9) params only", ln,
        (ct_tensor *[]){x, grad_input(CT_SHAPE(9)), grad_input(CT_SHAPE(9))}, 3,
        NULL);
  // C = 1: the output is the bias, and x gets zero gradient.
  check("layernorm (6, 1) w, b", ln,
        (ct_tensor *[]){grad_input(CT_SHAPE(6, 1)), grad_input(CT_SHAPE(1)),
                        grad_input(CT_SHAPE(1))},
        3, NULL);
}

// Forward values: rows of softmax sum to 1 and match exp(log_softmax); layer
// norm rows have mean 0 and (biased) variance 1 before the affine part.
static void test_norm_values(void) {
  ct_tensor *x = ct_tensor_randn(&grad_test_rng, 0.0f, 3.0f, CT_SHAPE(4, 129));
  ct_f32(x)[0] = 80.0f;  // large: exp would overflow without the max shift
  ct_tensor *p = ct_softmax(x), *lp = ct_log_softmax(x);
  double worst_sum = 0.0, worst_exp = 0.0;
  for (int64_t n = 0; n < 4; n++) {
    double s = 0.0;
    for (int64_t c = 0; c < 129; c++) {
      float pv = ct_f32(p)[n * 129 + c], lv = ct_f32(lp)[n * 129 + c];
      s += pv;
      worst_exp = fmax(worst_exp, fabs(exp(lv) - pv));
    }
    worst_sum = fmax(worst_sum, fabs(s - 1.0));
  }
  printf(
      "  softmax rows sum to 1 within %.2e; |exp(log_softmax) - softmax| "
      "<= %.2e\n",
      worst_sum, worst_exp);
  CHECK(worst_sum < 1e-6, "softmax row sum off by %g", worst_sum);
  CHECK(worst_exp < 1e-6, "exp(log_softmax) differs from softmax by %g",
        worst_exp);
  CHECK(ct_f32(p)[0] > 0.999f, "softmax of a dominant logit: %g", ct_f32(p)[0]);

  ct_tensor *w = ct_tensor_full(CT_F32, 2.0, CT_SHAPE(129));
  ct_tensor *b = ct_tensor_full(CT_F32, -1.0, CT_SHAPE(129));
  ct_tensor *y = ct_layernorm(x, w, b, 0.0f);
  double worst_mean = 0.0, worst_var = 0.0;
  for (int64_t n = 0; n < 4; n++) {
    double m = 0.0, v = 0.0;
    for (int64_t c = 0; c < 129; c++) m += (ct_f32(y)[n * 129 + c] + 1.0) / 2;
    m /= 129;
    for (int64_t c = 0; c < 129; c++) {
      double z = (ct_f32(y)[n * 129 + c] + 1.0) / 2 - m;
      v += z * z;
    }
    worst_mean = fmax(worst_mean, fabs(m));
    worst_var = fmax(worst_var, fabs(v / 129 - 1.0));
  }
  printf("  layernorm rows: |mean| <= %.2e, |var - 1| <= %.2e\n", worst_mean,
         worst_var);
  CHECK(worst_mean < 1e-6 && worst_var < 1e-5,
        "layernorm rows not normalized: mean %g, var-1 %g", worst_mean,
        worst_var);
  ct_arena_reset();
}

// Results must be bit-identical at any thread count (the sizes here are
// large enough for the kernels to go parallel): outputs and gradients of each
// op with 1 and with 3 threads.
static void run_ops_for_threads(int threads, float *sums) {
  ct_set_threads(threads);
  ct_rng r = ct_rng_make(5, 5);
  ct_tensor *x =
      ct_requires_grad(ct_tensor_randn(&r, 0, 1, CT_SHAPE(300, 257)));
  ct_tensor *w = ct_requires_grad(ct_tensor_randn(&r, 1, 1, CT_SHAPE(257)));
  ct_tensor *b = ct_requires_grad(ct_tensor_randn(&r, 0, 1, CT_SHAPE(257)));
  ct_tensor *u =
      ct_requires_grad(ct_tensor_randn(&r, 0, 1, CT_SHAPE(300, 257)));
  ct_tensor *cw = ct_tensor_rand(&r, 0.1f, 2.0f, CT_SHAPE(257));
  ct_tensor *t = ct_tensor_empty(CT_I32, CT_SHAPE(300));
  for (int64_t i = 0; i < 300; i++)
    ct_i32(t)[i] = i % 5 ? (int32_t)ct_rng_next_below(&r, 257) : -100;
  ct_ce_opts o = {.ignore_index = -100, .label_smoothing = 0.1f, .weight = cw};
  // Each term is its own graph; backward consumes the tape, and the leaves'
  // gradients accumulate over the four passes.
  double total = 0;
  for (int i = 0; i < 4; i++) {
    ct_tensor *term =
        i == 0   ? ct_mse(ct_layernorm(x, w, b, 1e-5f), u)
        : i == 1 ? ct_l1(ct_softmax(x), ct_log_softmax(u))
        : i == 2 ? ct_cross_entropy(x, t, &o)
                 : ct_kl_div(ct_log_softmax(x), u, true, CT_REDUCE_BATCHMEAN);
    CHECK(term && ct_backward(term) == CT_OK, "threads %d, term %d: %s",
          threads, i, ct_last_error());
    if (term) total += ct_f32(term)[0];
  }
  sums[0] = (float)total;
  memcpy(sums + 1, x->grad, 300 * 257 * sizeof(float));
  memcpy(sums + 1 + 300 * 257, w->grad, 257 * sizeof(float));
  memcpy(sums + 1 + 300 * 258, b->grad, 257 * sizeof(float));
  memcpy(sums + 1 + 300 * 258 + 257, u->grad, 300 * 257 * sizeof(float));
  ct_arena_reset();
}

static void test_thread_invariance(void) {
  enum { LEN = 1 + 300 * 258 + 257 + 300 * 257 };
  static float one[LEN], three[LEN];
  int threads = ct_get_threads();
  run_ops_for_threads(1, one);
  run_ops_for_threads(3, three);
  ct_set_threads(threads);
  CHECK(memcmp(one, three, sizeof one) == 0,
        "losses or gradients differ between 1 and 3 threads");
}

// ---- losses ----------------------------------------------------------------------

static op_case ce_case(int32_t ignore_index, float smoothing, ct_tensor *w) {
  op_case c = {.op = OP_CE, .ce = ct_ce_defaults()};
  c.ce.ignore_index = ignore_index;
  c.ce.label_smoothing = smoothing;
  c.ce.weight = w;
  return c;
}

static void check_ce(const char *what, op_case c, int ndim,
                     const int64_t *shape, double ignore_frac) {
  int64_t K = shape[ndim - 1];
  ct_tensor *x = ct_requires_grad(
      ct_tensor_randn(&grad_test_rng, 0.0f, 2.0f, ndim, shape));
  ct_tensor *t =
      targets_for(ndim - 1, shape, K, ignore_frac, c.ce.ignore_index);
  int64_t rows = t->numel;
  ct_gradcheck_opts o = loss_opts(1e-2 / (double)rows / 10);
  check(what, c, (ct_tensor *[]){x, t}, 2, &o);
}

static void test_ce_grads(void) {
  check_ce("ce (7, 5)", ce_case(-100, 0, NULL), CT_SHAPE(7, 5), 0);
  check_ce("ce (129, 7)", ce_case(-100, 0, NULL), CT_SHAPE(129, 7), 0);
  check_ce("ce (3, 129)", ce_case(-100, 0, NULL), CT_SHAPE(3, 129), 0);
  check_ce("ce (2, 3, 7)", ce_case(-100, 0, NULL), CT_SHAPE(2, 3, 7), 0);
  check_ce("ce (1, 1)", ce_case(-100, 0, NULL), CT_SHAPE(1, 1), 0);
  check_ce("ce (9) unbatched", ce_case(-100, 0, NULL), CT_SHAPE(9), 0);
  check_ce("ce (20, 7) ignore -100", ce_case(-100, 0, NULL), CT_SHAPE(20, 7),
           0.3);
  check_ce("ce (20, 7) ignore 0", ce_case(0, 0, NULL), CT_SHAPE(20, 7), 0.3);
  check_ce("ce (20, 7) smoothing 0.1", ce_case(-100, 0.1f, NULL),
           CT_SHAPE(20, 7), 0);
  check_ce("ce (2, 3, 7) smoothing 0.3 ignore", ce_case(-100, 0.3f, NULL),
           CT_SHAPE(2, 3, 7), 0.3);
  ct_tensor *w = uniform(0.1f, 2.0f, CT_SHAPE(7), false);
  check_ce("ce (20, 7) weights", ce_case(-100, 0, w), CT_SHAPE(20, 7), 0);
  w = uniform(0.1f, 2.0f, CT_SHAPE(7), false);
  check_ce("ce (20, 7) weights ignore", ce_case(-100, 0, w), CT_SHAPE(20, 7),
           0.3);
  w = uniform(0.1f, 2.0f, CT_SHAPE(7), false);
  check_ce("ce (20, 7) weights smoothing 0.1", ce_case(-100, 0.1f, w),
           CT_SHAPE(20, 7), 0);
  w = uniform(0.1f, 2.0f, CT_SHAPE(129), false);
  check_ce("ce (5, 129) weights smoothing 0.3 ignore", ce_case(3, 0.3f, w),
           CT_SHAPE(5, 129), 0.3);
}

// Every row ignored: loss exactly 0 and gradient exactly 0 (PyTorch gives nan).
static void test_ce_all_ignored(void) {
  for (int smoothing = 0; smoothing < 2; smoothing++) {
    ct_tensor *x = grad_input(CT_SHAPE(4, 6));
    ct_tensor *t = ct_tensor_full(CT_I32, -100, CT_SHAPE(4));
    ct_ce_opts o = ct_ce_defaults();
    o.label_smoothing = smoothing ? 0.2f : 0.0f;
    ct_tensor *loss = ct_cross_entropy(x, t, &o);
    CHECK(loss && loss->ndim == 0 && loss->numel == 1, "all ignored: %s",
          ct_last_error());
    if (!loss) continue;
    CHECK(ct_f32(loss)[0] == 0.0f, "all-ignored loss %g, want 0",
          ct_f32(loss)[0]);
    CHECK(ct_backward(loss) == CT_OK, "%s", ct_last_error());
    int nonzero = 0;
    for (int i = 0; i < 24; i++) nonzero += x->grad && x->grad[i] != 0.0f;
    CHECK(x->grad && nonzero == 0, "all-ignored grad has %d nonzeros", nonzero);
    ct_arena_reset();
  }
}

static void test_kl_grads(void) {
  static const struct {
    const char *name;
    bool log_target;
    ct_reduction reduce;
  } kinds[] = {
      {"kl_div mean", false, CT_REDUCE_MEAN},
      {"kl_div sum", false, CT_REDUCE_SUM},
      {"kl_div batchmean", false, CT_REDUCE_BATCHMEAN},
      {"kl_div log_target mean", true, CT_REDUCE_MEAN},
      {"kl_div log_target sum", true, CT_REDUCE_SUM},
      {"kl_div log_target batchmean", true, CT_REDUCE_BATCHMEAN},
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    op_case c = {.op = OP_KL,
                 .log_target = kinds[i].log_target,
                 .reduce = kinds[i].reduce};
    ct_tensor *x = uniform(-3.0f, 0.0f, CT_SHAPE(2, 3, 7), true);
    // Probabilities away from 0 (log's curvature), or log-probabilities.
    ct_tensor *t = kinds[i].log_target
                       ? uniform(-3.0f, 0.0f, CT_SHAPE(2, 3, 7), true)
                       : uniform(0.2f, 1.0f, CT_SHAPE(2, 3, 7), true);
    double divisor = kinds[i].reduce == CT_REDUCE_MEAN  ? 42
                     : kinds[i].reduce == CT_REDUCE_SUM ? 1
                                                        : 2;
    ct_gradcheck_opts o = loss_opts(1e-2 / divisor);
    o.eps = 1e-3;
    check(kinds[i].name, c, (ct_tensor *[]){x, t}, 2, &o);
  }
  // Only the input requires grad; a (1, 129) row.
  op_case c = {.op = OP_KL, .reduce = CT_REDUCE_BATCHMEAN};
  ct_tensor *x = uniform(-3.0f, 0.0f, CT_SHAPE(1, 129), true);
  ct_tensor *t = uniform(0.0f, 1.0f, CT_SHAPE(1, 129), false);
  ct_gradcheck_opts o = loss_opts(1e-3);
  check("kl_div (1, 129) input only", c, (ct_tensor *[]){x, t}, 2, &o);
}

// Values: target 0 contributes 0 (xlogy), not nan; the reductions divide by
// numel, 1 and the first dim.
static void test_kl_values(void) {
  const float in[6] = {-1.0f, -2.0f, -0.5f, -0.1f, -3.0f, -1.5f};
  const float tg[6] = {0.5f, 0.0f, 0.25f, 0.0f, 0.125f, 0.125f};
  double sum = 0.0, sum_log = 0.0;
  for (int i = 0; i < 6; i++) {
    if (tg[i] > 0) sum += tg[i] * (log(tg[i]) - in[i]);
    sum_log += exp(tg[i]) * (tg[i] - in[i]);  // tg read as log-probabilities
  }
  ct_tensor *x = ct_tensor_from(CT_F32, in, CT_SHAPE(3, 2));
  ct_tensor *t = ct_tensor_from(CT_F32, tg, CT_SHAPE(3, 2));
  float mean = ct_f32(ct_kl_div(x, t, false, CT_REDUCE_MEAN))[0];
  float total = ct_f32(ct_kl_div(x, t, false, CT_REDUCE_SUM))[0];
  float batch = ct_f32(ct_kl_div(x, t, false, CT_REDUCE_BATCHMEAN))[0];
  float logt = ct_f32(ct_kl_div(x, t, true, CT_REDUCE_SUM))[0];
  CHECK_CLOSE(mean, sum / 6, 1e-6, "kl_div mean");
  CHECK_CLOSE(total, sum, 1e-6, "kl_div sum");
  CHECK_CLOSE(batch, sum / 3, 1e-6, "kl_div batchmean");
  CHECK_CLOSE(logt, sum_log, 1e-6, "kl_div log_target sum");
  // The input's gradient is -target / divisor, so 0 where the target is 0.
  ct_requires_grad(x);
  ct_tensor *loss = ct_kl_div(x, t, false, CT_REDUCE_SUM);
  CHECK(ct_backward(loss) == CT_OK, "%s", ct_last_error());
  for (int i = 0; i < 6; i++)
    CHECK(x->grad[i] == -tg[i], "kl_div grad[%d] %g, want %g", i, x->grad[i],
          -tg[i]);
  ct_arena_reset();
}

static void test_mse_l1(void) {
  const op_case mse = {.op = OP_MSE}, l1 = {.op = OP_L1};
  ct_tensor *a = grad_input(CT_SHAPE(129, 7)),
            *b = grad_input(CT_SHAPE(129, 7));
  ct_gradcheck_opts o = loss_opts(2e-2 / (129 * 7));
  check("mse (129, 7)", mse, (ct_tensor *[]){a, b}, 2, &o);
  a = grad_input(CT_SHAPE(2, 3, 7));
  b = grad_input(CT_SHAPE(2, 3, 7));
  o = loss_opts(2e-2 / 42);
  check("mse (2, 3, 7)", mse, (ct_tensor *[]){a, b}, 2, &o);
  a = grad_input(CT_SHAPE(1));
  b = ct_tensor_full(CT_F32, 0.25, CT_SHAPE(1));
  o = loss_opts(1e-3);
  check("mse (1) one operand", mse, (ct_tensor *[]){a, b}, 2, &o);

  // l1: b = a + d with |d| in [0.1, 1], far from the kink at a == b.
  for (int k = 0; k < 2; k++) {
    int64_t shape[2] = {k ? 3 : 129, k ? 129 : 7};
    a = grad_input(2, shape);
    b = grad_input(2, shape);
    for (int64_t i = 0; i < a->numel; i++) {
      float d = 0.1f + 0.9f * (float)ct_rng_next_double(&grad_test_rng);
      ct_f32(b)[i] = ct_f32(a)[i] + (i % 2 ? d : -d);
    }
    o = loss_opts(1e-2 / (double)a->numel);
    check(k ? "l1 (3, 129)" : "l1 (129, 7)", l1, (ct_tensor *[]){a, b}, 2, &o);
  }

  // Values, and the gradient at the kink: sign(0) = 0.
  const float av[4] = {1.0f, -2.0f, 0.5f, 3.0f},
              bv[4] = {0.0f, 1.0f, 0.5f, 1.0f};
  ct_tensor *x = ct_requires_grad(ct_tensor_from(CT_F32, av, CT_SHAPE(2, 2)));
  ct_tensor *y = ct_tensor_from(CT_F32, bv, CT_SHAPE(2, 2));
  ct_tensor *m = ct_mse(x, y);
  CHECK(m && m->ndim == 0 && ct_f32(m)[0] == 14.0f / 4, "mse value %g",
        m ? ct_f32(m)[0] : NAN);
  ct_tensor *l = ct_l1(x, y);
  CHECK(l && l->ndim == 0 && ct_f32(l)[0] == 6.0f / 4, "l1 value %g",
        l ? ct_f32(l)[0] : NAN);
  CHECK(ct_backward(l) == CT_OK, "%s", ct_last_error());
  const float want[4] = {0.25f, -0.25f, 0.0f, 0.25f};
  CHECK(memcmp(x->grad, want, sizeof want) == 0,
        "l1 grad %g %g %g %g, want 0.25 -0.25 0 0.25", x->grad[0], x->grad[1],
        x->grad[2], x->grad[3]);
  ct_arena_reset();
}

// With recording off, nothing is recorded and no saved state is made.
static void test_no_grad(void) {
  ct_tensor *x = grad_input(CT_SHAPE(3, 4));
  ct_tensor *t = targets_for(1, (const int64_t[]){3}, 4, 0, -100);
  bool was = ct_grad_set_enabled(false);
  int before = ct_tape_size();
  ct_tensor *outs[] = {ct_softmax(x),
                       ct_log_softmax(x),
                       ct_layernorm(x, NULL, NULL, 1e-5f),
                       ct_cross_entropy(x, t, NULL),
                       ct_mse(x, x),
                       ct_l1(x, x),
                       ct_kl_div(x, x, true, CT_REDUCE_SUM)};
  ct_grad_set_enabled(was);
  CHECK(ct_tape_size() == before, "recording off, yet %d nodes recorded",
        ct_tape_size() - before);
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
    CHECK(outs[i] && !outs[i]->requires_grad, "no-grad output %zu", i);
  ct_arena_reset();
}

// ---- bad input ---------------------------------------------------------------------

static void expect_error(const char *what, ct_tensor *got, ct_status want,
                         const char *op, const char *also) {
  const char *msg = ct_last_error();
  CHECK(got == NULL, "%s: expected NULL", what);
  CHECK(ct_last_status() == want, "%s: status %s, want %s (%s)", what,
        ct_status_name(ct_last_status()), ct_status_name(want), msg);
  CHECK(strstr(msg, op) != NULL, "%s: message does not name %s: %s", what, op,
        msg);
  CHECK(!also || strstr(msg, also) != NULL, "%s: message lacks \"%s\": %s",
        what, also, msg);
  ct_clear_error();
}

static void test_bad_input(void) {
  ct_tensor *x = grad_input(CT_SHAPE(4, 5));
  ct_tensor *ids = ct_tensor_zeros(CT_I32, CT_SHAPE(4, 5));
  ct_tensor *t = ct_tensor_zeros(CT_I32, CT_SHAPE(4));

  expect_error("softmax i32", ct_softmax(ids), CT_ERR_DTYPE, "softmax", "i32");
  expect_error("log_softmax i32", ct_log_softmax(ids), CT_ERR_DTYPE,
               "log_softmax", NULL);
  expect_error("layernorm i32", ct_layernorm(ids, NULL, NULL, 1e-5f),
               CT_ERR_DTYPE, "layernorm", NULL);
  expect_error(
      "layernorm weight (4)",
      ct_layernorm(x, ct_tensor_zeros(CT_F32, CT_SHAPE(4)), NULL, 1e-5f),
      CT_ERR_SHAPE, "layernorm", "[4]");
  expect_error(
      "layernorm bias (5, 1)",
      ct_layernorm(x, NULL, ct_tensor_zeros(CT_F32, CT_SHAPE(5, 1)), 1e-5f),
      CT_ERR_SHAPE, "layernorm", "bias");
  expect_error(
      "layernorm weight i32",
      ct_layernorm(x, ct_tensor_zeros(CT_I32, CT_SHAPE(5)), NULL, 1e-5f),
      CT_ERR_DTYPE, "layernorm", "weight");
  expect_error("layernorm eps < 0", ct_layernorm(x, NULL, NULL, -1.0f),
               CT_ERR_ARG, "layernorm", "eps");

  ct_tensor *ft = ct_tensor_zeros(CT_F32, CT_SHAPE(4));
  expect_error("ce f32 targets", ct_cross_entropy(x, ft, NULL), CT_ERR_DTYPE,
               "cross_entropy", "targets");
  expect_error("ce i32 logits", ct_cross_entropy(ids, t, NULL), CT_ERR_DTYPE,
               "cross_entropy", "logits");
  expect_error("ce targets (5)",
               ct_cross_entropy(x, ct_tensor_zeros(CT_I32, CT_SHAPE(5)), NULL),
               CT_ERR_SHAPE, "cross_entropy", "[5]");
  expect_error(
      "ce targets (4, 1)",
      ct_cross_entropy(x, ct_tensor_zeros(CT_I32, CT_SHAPE(4, 1)), NULL),
      CT_ERR_SHAPE, "cross_entropy", NULL);
  ct_i32(t)[2] = 5;
  expect_error("ce target 5 of K 5", ct_cross_entropy(x, t, NULL), CT_ERR_INDEX,
               "cross_entropy", "target 5 at row 2");
  ct_i32(t)[2] = -1;
  expect_error("ce target -1", ct_cross_entropy(x, t, NULL), CT_ERR_INDEX,
               "cross_entropy", "target -1 at row 2");
  ct_ce_opts o = ct_ce_defaults();
  o.ignore_index = -1;  // now row 2 is ignored: fine
  CHECK(ct_cross_entropy(x, t, &o) != NULL, "ignored -1: %s", ct_last_error());
  ct_i32(t)[2] = 0;
  o = ct_ce_defaults();
  o.weight = ct_tensor_zeros(CT_F32, CT_SHAPE(4));
  expect_error("ce weight (4) for K 5", ct_cross_entropy(x, t, &o),
               CT_ERR_SHAPE, "cross_entropy", "weight");
  o.weight = ct_tensor_zeros(CT_I32, CT_SHAPE(5));
  expect_error("ce weight i32", ct_cross_entropy(x, t, &o), CT_ERR_DTYPE,
               "cross_entropy", "weight");
  o = ct_ce_defaults();
  o.label_smoothing = 1.5f;
  expect_error("ce smoothing 1.5", ct_cross_entropy(x, t, &o), CT_ERR_ARG,
               "cross_entropy", "label_smoothing");

  ct_tensor *y = grad_input(CT_SHAPE(5, 4));
  expect_error("mse (4, 5) vs (5, 4)", ct_mse(x, y), CT_ERR_SHAPE, "mse",
               "[5, 4]");
  expect_error("l1 (4, 5) vs (5, 4)", ct_l1(x, y), CT_ERR_SHAPE, "l1", NULL);
  expect_error("l1 i32", ct_l1(x, ids), CT_ERR_DTYPE, "l1", "i32");
  expect_error("kl_div shapes", ct_kl_div(x, y, false, CT_REDUCE_SUM),
               CT_ERR_SHAPE, "kl_div", NULL);
  expect_error("kl_div i32 target", ct_kl_div(x, ids, false, CT_REDUCE_SUM),
               CT_ERR_DTYPE, "kl_div", "target");
  expect_error("kl_div reduction", ct_kl_div(x, x, false, (ct_reduction)7),
               CT_ERR_ARG, "kl_div", "reduction");

  // NULL input: NULL out, and the earlier error is kept.
  ct_error(CT_ERR_NOMEM, "an earlier failure");
  CHECK(!ct_softmax(NULL) && !ct_log_softmax(NULL) &&
            !ct_layernorm(NULL, NULL, NULL, 1e-5f) &&
            !ct_cross_entropy(NULL, t, NULL) &&
            !ct_cross_entropy(x, NULL, NULL) && !ct_mse(x, NULL) &&
            !ct_l1(NULL, x) && !ct_kl_div(NULL, x, false, CT_REDUCE_SUM),
        "an op returned non-NULL for a NULL input");
  CHECK(ct_last_status() == CT_ERR_NOMEM &&
            strcmp(ct_last_error(), "an earlier failure") == 0,
        "a NULL input replaced the earlier error: %s", ct_last_error());
  ct_clear_error();
  ct_arena_reset();
}

// The reference's sigmoid_focal_loss written out naively, in double.
static double focal_naive(const float *x, const float *t, int64_t n,
                          double alpha, double gamma, bool mean) {
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    double p = 1 / (1 + exp(-(double)x[i]));
    double ce = -(t[i] * log(p) + (1 - t[i]) * log(1 - p));
    double pt = p * t[i] + (1 - p) * (1 - t[i]);
    double a = alpha < 0 ? 1 : alpha * t[i] + (1 - alpha) * (1 - t[i]);
    sum += a * ce * pow(1 - pt, gamma);
  }
  return mean ? sum / (double)n : sum;
}

// The focal loss: gradchecks with 0/1 and soft targets, gamma 2 (DETR's),
// 1.5 and 0 without alpha (plain binary cross-entropy), sum and mean;
// values against the naive formula; logits far out stay finite.
static void test_focal(void) {
  const struct {
    const char *what;
    float alpha, gamma;
    ct_reduction reduce;
    bool soft;
  } cases[] = {
      {"focal a.25 g2 sum (6, 9, 5)", 0.25f, 2.0f, CT_REDUCE_SUM, false},
      {"focal a.25 g2 mean (6, 9, 5)", 0.25f, 2.0f, CT_REDUCE_MEAN, false},
      {"focal a.6 g1.5 soft sum", 0.6f, 1.5f, CT_REDUCE_SUM, true},
      {"focal no alpha g0 (= BCE) sum", -1.0f, 0.0f, CT_REDUCE_SUM, false},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    ct_tensor *x = grad_input(CT_SHAPE(6, 9, 5));
    for (int64_t i = 0; i < x->numel; i++) ct_f32(x)[i] *= 2.0f;
    ct_tensor *t = ct_tensor_zeros(CT_F32, CT_SHAPE(6, 9, 5));
    for (int64_t i = 0; i < t->numel; i++)
      ct_f32(t)[i] = cases[k].soft
                         ? (float)ct_rng_next_double(&grad_test_rng)
                         : (float)(ct_rng_next_below(&grad_test_rng, 4) == 0);
    const op_case c = {.op = OP_FOCAL,
                       .reduce = cases[k].reduce,
                       .alpha = cases[k].alpha,
                       .gamma = cases[k].gamma,
                       .targets = t};
    const bool mean = cases[k].reduce == CT_REDUCE_MEAN;
    ct_tensor *l = run((ct_tensor *[]){x}, (void *)&c);
    double want = focal_naive(ct_f32(x), ct_f32(t), x->numel, cases[k].alpha,
                              cases[k].gamma, mean);
    CHECK(l && fabs(ct_f32(l)[0] - want) <= 1e-6 * fabs(want) + 1e-7,
          "%s: value %.9g, naive %.9g", cases[k].what, l ? ct_f32(l)[0] : NAN,
          want);
    ct_tape_clear();
    // A sum of 270 terms near 100: its float rounding over 2 eps is ~4e-4.
    ct_gradcheck_opts o = loss_opts(mean ? 1e-2 / 270 : 1e-3);
    check(cases[k].what, c, (ct_tensor *[]){x}, 1, &o);
  }
  // Far out: finite, and the gradient of a confident right answer ~0.
  const float xv[4] = {80.0f, -80.0f, 80.0f, -80.0f}, tv[4] = {1, 0, 0, 1};
  ct_tensor *x = ct_requires_grad(ct_tensor_from(CT_F32, xv, CT_SHAPE(4)));
  ct_tensor *t = ct_tensor_from(CT_F32, tv, CT_SHAPE(4));
  ct_tensor *l = ct_sigmoid_focal_loss(x, t, 0.25f, 2.0f, CT_REDUCE_SUM);
  CHECK(l && isfinite(ct_f32(l)[0]) && ct_backward(l) == CT_OK,
        "focal far out: %s", ct_last_error());
  CHECK(fabs(ct_f32(l)[0] - (0.75 * 80 + 0.25 * 80)) < 1e-3,
        "focal far out: %g, want 80", ct_f32(l)[0]);
  CHECK(x->grad[0] == 0.0f && x->grad[1] == 0.0f &&
            fabs(x->grad[2] - 0.75) < 1e-6 && fabs(x->grad[3] + 0.25) < 1e-6,
        "focal far out: grads %g %g %g %g", x->grad[0], x->grad[1], x->grad[2],
        x->grad[3]);
  CHECK(!ct_sigmoid_focal_loss(x, t, 0.25f, -1.0f, CT_REDUCE_SUM) &&
            strstr(ct_last_error(), "gamma"),
        "focal: a negative gamma is refused (%s)", ct_last_error());
  ct_arena_reset();
}

int main(void) {
  ct_threads_from_env();
  test_softmax_grads();
  test_layernorm_grads();
  test_norm_values();
  test_thread_invariance();
  test_ce_grads();
  test_ce_all_ignored();
  test_kl_grads();
  test_kl_values();
  test_mse_l1();
  test_focal();
  test_no_grad();
  test_bad_input();
  ct_arena_release();
  return test_summary("grad_norm_loss");
}
