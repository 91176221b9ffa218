// Optimizers, gradient clipping and the non-finite check against PyTorch 1.13
// (tests/ref/optim_fixtures.h, made by tests/ref/gen_optim_fixtures.py).
//
// Parity: a 2-layer MLP (linear 6->8, tanh, linear 8->3, mse or
// cross-entropy) trained 20 steps by ctrain's forward, backward and
// optimizer; every parameter after every step is compared with torch.optim
// run in float64 from the same float32 start. The tested error of an element
// is |got - ref| / max(|ref|, 0.1 * max|ref| over its parameter tensor):
// relative error, except that elements passing near zero are judged on a
// tenth of their tensor's scale. Twenty steps of float32 forward and backward
// leave ~1e-7 absolute noise in every parameter (torch in float32 shows the
// same), which a bare relative error turns into 1e-4 for an element that
// happens to pass within 1e-3 of zero. The errors with floors 0.01 * max and
// 1e-6 are printed too, to compare with torch float32's own in the fixture
// header.
//
// The optimizer alone: three steps on given float32 gradients (no forward or
// backward noise) must match torch to 1e-6 with the same floor.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/threads.h"
#include "optim/grads.h"
#include "optim/optim.h"
#include "ref/optim_fixtures.h"
#include "tests/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double TOL = 1e-5;        // model parity, floor 0.1 * max|ref|
static const double TOL_ALONE = 1e-6;  // optimizer alone, same floor

static const int64_t mlp_shapes[OPTIM_PARAMS][2] = {{OPTIM_HID, OPTIM_IN},
                                                    {OPTIM_HID, 0},
                                                    {OPTIM_OUT, OPTIM_HID},
                                                    {OPTIM_OUT, 0}};

// Registers `n` parameters (2-D shapes, or 1-D where the second dim is 0)
// with flags from the bit masks, and copies their values from `values` laid
// out one after another.
static void store_make(ct_params *p, ct_tensor **t, int n,
                       const char *const *names, const int64_t (*shapes)[2],
                       unsigned frozen, unsigned no_decay,
                       const float *values) {
  ct_params_init(p);
  for (int i = 0; i < n; i++) {
    unsigned flags = (frozen >> i & 1u ? CT_PARAM_FROZEN : 0u) |
                     (no_decay >> i & 1u ? CT_PARAM_NO_DECAY : 0u);
    t[i] = ct_params_add(p, names[i], shapes[i][1] ? 2 : 1, shapes[i], flags);
    memcpy(t[i]->data, values, (size_t)t[i]->numel * sizeof(float));
    values += t[i]->numel;
  }
}

typedef struct param_error {
  double tested;  // floor 0.1 * max|ref| of the tensor
  double fine;    // floor 0.01 * max|ref|
  double plain;   // floor 1e-6
  double abs;
} param_error;

static void error_merge(param_error *w, param_error e) {
  w->tested = fmax(w->tested, e.tested);
  w->fine = fmax(w->fine, e.fine);
  w->plain = fmax(w->plain, e.plain);
  w->abs = fmax(w->abs, e.abs);
}

// Compares n tensors with `ref` (their values one after another).
static param_error params_compare(ct_tensor *const *t, int n,
                                  const double *ref) {
  param_error e = {0};
  for (int i = 0; i < n; i++) {
    const float *got = ct_f32(t[i]);
    double scale = 0.0;
    for (int64_t j = 0; j < t[i]->numel; j++) scale = fmax(scale, fabs(ref[j]));
    for (int64_t j = 0; j < t[i]->numel; j++) {
      double d = fabs((double)got[j] - ref[j]), r = fabs(ref[j]);
      e.abs = fmax(e.abs, d);
      e.tested = fmax(e.tested, d / fmax(r, 0.1 * scale));
      e.fine = fmax(e.fine, d / fmax(r, 0.01 * scale));
      e.plain = fmax(e.plain, d / fmax(r, 1e-6));
    }
    ref += t[i]->numel;
  }
  return e;
}

static ct_optim make_optim(const optim_fixture *f) {
  // The fixtures name optimizers as configs do: by ct_optim_kind_name.
  int named = 0;
  ct_optim_kind kind = CT_OPTIM_SGD;
  for (int k = 0; k < CT_OPTIM_KIND_COUNT; k++)
    if (!strcmp(ct_optim_kind_name((ct_optim_kind)k), f->optimizer))
      kind = (ct_optim_kind)k, named++;
  CHECK(named == 1, "%d optimizers named '%s'", named, f->optimizer);
  ct_optim_config c = kind == CT_OPTIM_SGD    ? ct_sgd_defaults()
                      : kind == CT_OPTIM_ADAM ? ct_adam_defaults()
                                              : ct_adamw_defaults();
  c.momentum = f->momentum;
  c.dampening = f->dampening;
  c.nesterov = f->nesterov;
  c.weight_decay = f->weight_decay;
  c.beta1 = f->beta1;
  c.beta2 = f->beta2;
  c.eps = f->eps;
  ct_optim o;
  CHECK(ct_optim_init(&o, &c) == CT_OK, "%s: %s", f->name, ct_last_error());
  return o;
}

static ct_tensor *mlp_loss(ct_tensor *const *t, bool cross_entropy) {
  ct_tensor *x = ct_tensor_from(CT_F32, optim_x, CT_SHAPE(OPTIM_N, OPTIM_IN));
  ct_tensor *out = ct_linear(ct_tanh(ct_linear(x, t[0], t[1])), t[2], t[3]);
  if (cross_entropy)
    return ct_cross_entropy(
        out, ct_tensor_from(CT_I32, optim_labels, CT_SHAPE(OPTIM_N)), NULL);
  return ct_mse(out,
                ct_tensor_from(CT_F32, optim_y, CT_SHAPE(OPTIM_N, OPTIM_OUT)));
}

// Frozen parameters keep their values and get no optimizer state.
static void check_frozen(const optim_fixture *f, const ct_params *p,
                         ct_tensor *const *t) {
  const float *init = optim_init;
  for (int i = 0; i < OPTIM_PARAMS; init += t[i]->numel, i++) {
    if (!(f->frozen >> i & 1u)) continue;
    const ct_param *it = ct_params_find(p, optim_param_names[i]);
    size_t bytes = (size_t)t[i]->numel * sizeof(float);
    bool kept = memcmp(t[i]->data, init, bytes) == 0;
    for (int k = 0; k < CT_PARAM_STATE_SLOTS; k++)
      for (int64_t j = 0; p->state[k] && j < t[i]->numel; j++)
        kept = kept && p->state[k][it->offset + j] == 0.0f;
    CHECK(kept, "%s: frozen '%s' changed", f->name, it->name);
  }
}

// The MLP trained OPTIM_STEPS steps; returns the worst parameter error.
static param_error check_model_parity(const optim_fixture *f) {
  ct_params p;
  ct_tensor *t[OPTIM_PARAMS];
  store_make(&p, t, OPTIM_PARAMS, optim_param_names, mlp_shapes, f->frozen,
             f->no_decay, optim_init);
  ct_optim opt = make_optim(f);
  param_error worst = {0};
  double worst_loss = 0.0;
  for (int s = 0; s < OPTIM_STEPS; s++) {
    ct_params_zero_grad(&p);
    ct_tensor *loss = mlp_loss(t, f->cross_entropy);
    CHECK(loss && ct_backward(loss) == CT_OK, "%s: %s", f->name,
          ct_last_error());
    if (!loss) break;
    double loss_err = fabs(ct_f32(loss)[0] - f->loss[s]) / fabs(f->loss[s]);
    CHECK(ct_optim_step(&opt, &p, f->lr[s]) == CT_OK, "%s: %s", f->name,
          ct_last_error());
    ct_arena_reset();
    param_error e =
        params_compare(t, OPTIM_PARAMS, f->params + (size_t)s * OPTIM_NUMEL);
    CHECK(e.tested <= TOL, "%s: step %d: params differ from torch by %.2e",
          f->name, s, e.tested);
    CHECK(loss_err <= TOL, "%s: step %d: loss differs from torch by %.2e",
          f->name, s, loss_err);
    error_merge(&worst, e);
    worst_loss = fmax(worst_loss, loss_err);
  }
  CHECK(opt.step == OPTIM_STEPS, "%s: step counter %lld", f->name,
        (long long)opt.step);
  check_frozen(f, &p, t);
  ct_params_free(&p);
  printf("  %-44s %.2e  %.2e  %.2e  abs %.2e  loss %.2e\n", f->name,
         worst.tested, worst.fine, worst.plain, worst.abs, worst_loss);
  return worst;
}

// The optimizer alone on fixed gradients: no forward/backward rounding. The
// same 0.1 * max|ref| floor: an update that cancels most of a parameter
// leaves the float32 rounding of its inputs in a small result (torch in
// float32 shows 2e-6 with a 0.01 floor here, see the fixture header).
static param_error check_optimizer_alone(const optim_fixture *f) {
  static const char *const names[2] = {"w", "b"};
  static const int64_t shapes[2][2] = {{5, 8}, {OPTIM_VEC_B, 0}};
  ct_params p;
  ct_tensor *t[2];
  store_make(&p, t, 2, names, shapes, 0u, 2u, optim_vec_init);
  ct_optim opt = make_optim(f);
  param_error worst = {0};
  for (int s = 0; s < OPTIM_VEC_STEPS; s++) {
    const float *g = optim_vec_grad + (size_t)s * OPTIM_VEC_NUMEL;
    memcpy(t[0]->grad, g, OPTIM_VEC_W * sizeof(float));
    memcpy(t[1]->grad, g + OPTIM_VEC_W, OPTIM_VEC_B * sizeof(float));
    CHECK(ct_optim_step(&opt, &p, f->lr[s]) == CT_OK, "%s", ct_last_error());
    param_error e =
        params_compare(t, 2, f->vec_params + (size_t)s * OPTIM_VEC_NUMEL);
    CHECK(e.tested <= TOL_ALONE,
          "%s: alone, step %d: differs from torch by "
          "%.2e",
          f->name, s, e.tested);
    error_merge(&worst, e);
  }
  ct_params_free(&p);
  return worst;
}

static void check_optim_parity(void) {
  printf(
      "model parity, |d| / max(|ref|, floor), floor = 0.1 * max|ref|, "
      "0.01 * max|ref|, 1e-6:\n");
  param_error worst = {0};
  param_error alone = {0};
  for (int i = 0; i < optim_fixture_count; i++)
    error_merge(&worst, check_model_parity(&optim_fixtures[i]));
  printf("optimizer alone, the same three floors:\n");
  for (int i = 0; i < optim_fixture_count; i++) {
    param_error e = check_optimizer_alone(&optim_fixtures[i]);
    printf("  %-44s %.2e  %.2e  %.2e  abs %.2e\n", optim_fixtures[i].name,
           e.tested, e.fine, e.plain, e.abs);
    error_merge(&alone, e);
  }
  printf(
      "optim parity: %d cases x %d steps, max err %.2e (tol %.0e; floor "
      "0.01: %.2e, plain: %.2e); optimizer alone %.2e (tol %.0e)\n",
      optim_fixture_count, OPTIM_STEPS, worst.tested, TOL, worst.fine,
      worst.plain, alone.tested, TOL_ALONE);
}

// clip_grad_norm_ on fixed gradients: the norm and the scaled gradients.
static void check_clip(void) {
  for (int c = 0; c < clip_fixture_count; c++) {
    const clip_fixture *f = &clip_fixtures[c];
    ct_params p;
    ct_tensor *t[OPTIM_PARAMS];
    store_make(&p, t, OPTIM_PARAMS, optim_param_names, mlp_shapes, f->frozen,
               0u, optim_init);
    const float *g = optim_clip_grad;
    for (int i = 0; i < OPTIM_PARAMS; g += t[i]->numel, i++)
      memcpy(t[i]->grad, g, (size_t)t[i]->numel * sizeof(float));
    double norm = ct_grad_norm(&p);
    double clipped = ct_clip_grad_norm(&p, f->max_norm);
    double norm_err = fabs(clipped - f->norm) / f->norm;
    CHECK(norm == clipped, "%s: ct_grad_norm %.17g, clip returned %.17g",
          f->name, norm, clipped);
    CHECK(norm_err <= 1e-12, "%s: norm %.17g, torch %.17g", f->name, clipped,
          f->norm);
    double grad_err = 0.0;
    const double *want = f->clipped;
    for (int i = 0; i < OPTIM_PARAMS; want += t[i]->numel, i++)
      for (int64_t j = 0; j < t[i]->numel; j++)
        grad_err = fmax(grad_err, fabs(t[i]->grad[j] - want[j]) /
                                      fmax(fabs(want[j]), 1e-6));
    CHECK(grad_err <= 2e-7, "%s: clipped grads differ from torch by %.2e",
          f->name, grad_err);
    printf("  clip %-24s max_norm %g norm %.9g (rel err %.1e), grads %.1e\n",
           f->name, f->max_norm, clipped, norm_err, grad_err);
    ct_params_free(&p);
  }
  // max_norm <= 0 only measures.
  ct_params p;
  ct_tensor *t[OPTIM_PARAMS];
  store_make(&p, t, OPTIM_PARAMS, optim_param_names, mlp_shapes, 0u, 0u,
             optim_init);
  memcpy(p.grad, p.data, p.count * sizeof(float));
  double norm = ct_clip_grad_norm(&p, 0.0);
  CHECK(norm > 0.0 && memcmp(p.grad, p.data, p.count * sizeof(float)) == 0,
        "max_norm 0 changed the gradients");
  ct_params_free(&p);
}

// A store of a few large parameters (one frozen) with random gradients.
static void big_store(ct_params *p) {
  ct_params_init(p);
  ct_params_add(p, "a", CT_SHAPE(300, 301), 0);
  ct_params_add(p, "frozen", CT_SHAPE(5000), CT_PARAM_FROZEN);
  ct_params_add(p, "b", CT_SHAPE(77777), CT_PARAM_NO_DECAY);
  ct_params_add(p, "c", CT_SHAPE(3), 0);
  ct_rng r = ct_rng_make(5, 1);
  ct_rng_fill_normal(&r, p->data, (int64_t)p->count, 0.0f, 1.0f);
  ct_rng_fill_normal(&r, p->grad, (int64_t)p->count, 0.0f, 1e-2f);
}

// The norm, clipping and Adam steps are bit-identical at any thread count.
static void check_thread_independence(void) {
  double norm1 = 0.0;
  float *data1 = NULL;
  static const int threads[] = {1, 2, 3};
  for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
    ct_set_threads(threads[k]);
    ct_params p;
    big_store(&p);
    double norm = ct_clip_grad_norm(&p, 1.0);
    ct_optim_config cfg = ct_adamw_defaults();
    ct_optim o;
    ct_optim_init(&o, &cfg);
    for (int s = 0; s < 3; s++) ct_optim_step(&o, &p, 1e-3f);
    if (k == 0) {
      norm1 = norm;
      data1 = malloc(p.count * sizeof(float));
      memcpy(data1, p.data, p.count * sizeof(float));
      // Against a plain double sum, as a sanity check of the chunking.
      ct_params q;
      big_store(&q);
      double sum = 0.0;
      for (int i = 0; i < q.n; i++)
        for (int64_t j = 0; !(q.items[i].flags & CT_PARAM_FROZEN) &&
                            j < q.items[i].tensor->numel;
             j++) {
          double g = q.grad[q.items[i].offset + j];
          sum += g * g;
        }
      CHECK(fabs(norm - sqrt(sum)) <= 1e-12 * norm, "norm %.17g vs %.17g", norm,
            sqrt(sum));
      ct_params_free(&q);
    } else {
      CHECK(norm == norm1, "%d threads: norm %.17g, 1 thread %.17g", threads[k],
            norm, norm1);
      CHECK(memcmp(p.data, data1, p.count * sizeof(float)) == 0,
            "%d threads: Adam steps differ from 1 thread", threads[k]);
    }
    ct_params_free(&p);
  }
  free(data1);
  ct_threads_from_env();
}

// ZeRO-1's pieces (a data-parallel rank holds one range of the store):
// the norm from every range's span sums, clipping and optimizer steps range
// by range with range-sized moments, give the bits of the whole-store calls.
static void check_ranges(void) {
  ct_grad_span *spans;
  int64_t n_spans;
  ct_params p;
  big_store(&p);
  CHECK(ct_grad_spans(&p, &spans, &n_spans) == CT_OK, "%s", ct_last_error());
  // Ranges cut at span starts (as the shards are), three of them.
  const size_t cut[4] = {0, spans[n_spans / 3].lo, spans[2 * n_spans / 3].lo,
                         p.count};
  double *sums = malloc((size_t)n_spans * sizeof *sums);
  int64_t done = 0;
  for (int r = 0; r < 3; r++) {  // each range's own spans, in order
    int64_t first = done;
    while (done < n_spans && spans[done].lo < cut[r + 1]) done++;
    ct_grad_span_squares(p.grad, spans + first, done - first, sums + first);
  }
  const double norm = ct_grad_norm(&p);
  CHECK(done == n_spans && ct_grad_norm_from_squares(sums, n_spans) == norm,
        "the norm from range sums %.17g, ct_grad_norm %.17g",
        ct_grad_norm_from_squares(sums, n_spans), norm);
  free(sums);
  free(spans);

  static const ct_optim_kind kinds[] = {CT_OPTIM_ADAMW, CT_OPTIM_ADAM,
                                        CT_OPTIM_SGD};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    ct_params whole, shards;
    big_store(&whole);
    big_store(&shards);
    ct_optim_config cfg = kinds[k] == CT_OPTIM_SGD    ? ct_sgd_defaults()
                          : kinds[k] == CT_OPTIM_ADAM ? ct_adam_defaults()
                                                      : ct_adamw_defaults();
    cfg.weight_decay = 0.01;
    if (kinds[k] == CT_OPTIM_SGD) cfg.momentum = 0.9;
    // With learning-rate multipliers, as a ZeRO-1 rank steps them.
    CHECK(ct_optim_lr_mults_parse(&cfg, "a:0.5,c:3") == CT_OK, "%s",
          ct_last_error());
    ct_optim a, b[3];
    ct_optim_init(&a, &cfg);
    float *state[3][CT_PARAM_STATE_SLOTS] = {{NULL}};
    for (int r = 0; r < 3; r++) {
      ct_optim_init(&b[r], &cfg);
      for (int s = 0; s < 2; s++)
        state[r][s] = calloc(cut[r + 1] - cut[r], sizeof(float));
    }
    for (int step = 0; step < 3; step++) {
      double nw = ct_clip_grad_norm(&whole, 0.5);
      ct_optim_step(&a, &whole, 1e-2f);
      for (int r = 0; r < 3; r++) {
        ct_clip_grad_range(&shards, nw, 0.5, cut[r], cut[r + 1]);
        CHECK(ct_optim_step_range(&b[r], &shards, 1e-2f, cut[r], cut[r + 1],
                                  state[r]) == CT_OK,
              "%s", ct_last_error());
      }
    }
    CHECK(!memcmp(whole.data, shards.data, whole.count * sizeof(float)),
          "%s: steps range by range differ from whole-store steps",
          ct_optim_kind_name(kinds[k]));
    CHECK(b[2].step == 3, "range steps counted %lld", (long long)b[2].step);
    float *none[CT_PARAM_STATE_SLOTS] = {NULL};
    CHECK(ct_optim_step_range(&a, &whole, 1e-2f, 0, whole.count, none) ==
              CT_ERR_ARG,
          "%s: a step without its moments' buffers",
          ct_optim_kind_name(kinds[k]));
    CHECK(ct_optim_step_range(&a, &whole, 1e-2f, 5, whole.count + 1,
                              state[0]) == CT_ERR_ARG,
          "a range past the store");
    for (int r = 0; r < 3; r++)
      for (int s = 0; s < 2; s++) free(state[r][s]);
    ct_params_free(&whole);
    ct_params_free(&shards);
  }
  ct_params_free(&p);
}

static void check_non_finite(void) {
  ct_params p;
  ct_tensor *t[OPTIM_PARAMS];
  store_make(&p, t, OPTIM_PARAMS, optim_param_names, mlp_shapes, 1u, 0u,
             optim_init);
  memcpy(p.grad, p.data, p.count * sizeof(float));
  CHECK(ct_grads_check_finite(&p, 12) == CT_OK, "%s", ct_last_error());
  // A NaN in a frozen parameter's gradient is not looked at.
  t[0]->grad[3] = NAN;
  CHECK(ct_grads_check_finite(&p, 12) == CT_OK, "%s", ct_last_error());
  t[2]->grad[5] = NAN;
  t[3]->grad[0] = INFINITY;
  CHECK(ct_grads_check_finite(&p, 12) == CT_ERR_NUMERIC, "NaN not found");
  CHECK(strstr(ct_last_error(),
               "non-finite gradient in 'fc2.weight' at step 12 (element 5 "
               "is nan)") != NULL,
        "message: %s", ct_last_error());
  CHECK(!isfinite(ct_grad_norm(&p)), "norm of a NaN gradient is finite");
  t[2]->grad[5] = 0.0f;
  CHECK(ct_grads_check_finite(&p, -1) == CT_ERR_NUMERIC, "Inf not found");
  CHECK(strstr(ct_last_error(),
               "non-finite gradient in 'fc2.bias' (element 0 "
               "is inf)") != NULL,
        "message: %s", ct_last_error());
  // Clipping leaves non-finite gradients for the check to report.
  CHECK(isinf(ct_clip_grad_norm(&p, 1.0)) && t[1]->grad[0] == ct_f32(t[1])[0],
        "clipping scaled a non-finite gradient set");
  // A range check finds what lies in its range, with the element's index in
  // its parameter; a range past the culprit finds nothing.
  const size_t b_at = t[3]->grad - p.grad;
  CHECK(ct_grads_check_finite_range(&p, 3, 0, b_at) == CT_OK,
        "a range before the culprit: %s", ct_last_error());
  t[3]->grad[0] = 0.0f;
  t[3]->grad[2] = -INFINITY;
  CHECK(
      ct_grads_check_finite_range(&p, 3, b_at + 1, p.count) == CT_ERR_NUMERIC &&
          strstr(ct_last_error(), "'fc2.bias' at step 3 (element 2 is -inf)") !=
              NULL,
      "range check: %s", ct_last_error());
  ct_params_free(&p);
}

// A non-finite loss is traced to what went non-finite first: a parameter
// (an earlier update overflowed it), else the oldest activation on the
// tape, with the size the parameters have grown to.
static void check_loss_trace(void) {
  ct_params p;
  ct_params_init(&p);
  ct_tensor *w = ct_params_add(&p, "fc.weight", CT_SHAPE(3, 4), 0);
  ct_tensor *b = ct_params_add(&p, "fc.bias", CT_SHAPE(3), 0);
  for (int i = 0; i < 12; i++) ct_f32(w)[i] = 0.1f * (float)(i - 6);
  for (int i = 0; i < 3; i++) ct_f32(b)[i] = 0.5f;
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ct_tensor *loss =
      ct_mean(ct_linear(ct_tensor_from(CT_F32, x, CT_SHAPE(2, 4)), w, b));
  CHECK(loss && ct_loss_check_finite(&p, ct_f32(loss)[0], 5) == CT_OK, "%s",
        ct_last_error());
  ct_arena_reset();
  // An input so large that the product overflows: the linear layer's output
  // is the first non-finite activation.
  x[0] = x[1] = 3.3e38f;
  loss = ct_mean(ct_linear(ct_tensor_from(CT_F32, x, CT_SHAPE(2, 4)), w, b));
  CHECK(loss && !isfinite(ct_f32(loss)[0]), "no overflow");
  CHECK(loss &&
            ct_loss_check_finite(&p, ct_f32(loss)[0], 5) == CT_ERR_NUMERIC &&
            strstr(ct_last_error(), "non-finite loss") &&
            strstr(ct_last_error(), "at step 5") &&
            strstr(ct_last_error(), "output of linear [2, 3]") &&
            strstr(ct_last_error(), "largest parameter value is 0.6"),
        "activation: %s", ct_last_error());
  ct_arena_reset();
  // A parameter already non-finite is named first.
  ct_f32(b)[2] = INFINITY;
  CHECK(ct_loss_check_finite(&p, NAN, 7) == CT_ERR_NUMERIC &&
            strstr(ct_last_error(),
                   "at step 7: parameter 'fc.bias' holds inf (element 2)"),
        "parameter: %s", ct_last_error());
  ct_params_free(&p);
}

static void check_config_errors(void) {
  ct_optim o;
  ct_optim_config c = ct_sgd_defaults();
  c.nesterov = true;
  CHECK(ct_optim_init(&o, &c) == CT_ERR_ARG &&
            strstr(ct_last_error(), "nesterov"),
        "nesterov without momentum: %s", ct_last_error());
  c = ct_adam_defaults();
  c.beta2 = 1.0;
  CHECK(ct_optim_init(&o, &c) == CT_ERR_ARG && strstr(ct_last_error(), "beta2"),
        "beta2 1: %s", ct_last_error());
  c = ct_adamw_defaults();
  c.weight_decay = -0.1;
  CHECK(ct_optim_init(&o, &c) == CT_ERR_ARG &&
            strstr(ct_last_error(), "weight_decay"),
        "negative decay: %s", ct_last_error());
  c = ct_adam_defaults();
  CHECK(ct_optim_init(&o, &c) == CT_OK, "%s", ct_last_error());
  ct_params p;
  big_store(&p);
  CHECK(ct_optim_step(&o, &p, NAN) == CT_ERR_ARG && o.step == 0,
        "NaN learning rate accepted");
  CHECK(ct_optim_step(&o, &p, 1e-3f) == CT_OK && p.state[0] && p.state[1],
        "Adam did not allocate its moments");
  CHECK(ct_optim_state_slots(&c) == 3u, "Adam slots");
  ct_params_free(&p);
}

// ---- learning-rate multipliers ----

// A store of three parameters named as Deformable DETR's, with the same
// values and gradients every time it is made.
static void mult_store(ct_params *p, const char *const names[3]) {
  ct_params_init(p);
  ct_params_add(p, names[0], CT_SHAPE(40, 41), 0);
  ct_params_add(p, names[1], CT_SHAPE(333), 0);
  ct_params_add(p, names[2], CT_SHAPE(70000), CT_PARAM_NO_DECAY);
  ct_rng r = ct_rng_make(6, 1);
  ct_rng_fill_normal(&r, p->data, (int64_t)p->count, 0.0f, 1.0f);
  ct_rng_fill_normal(&r, p->grad, (int64_t)p->count, 0.0f, 1e-2f);
}

static const char *const mult_names[3] = {
    "transformer.encoder.layers.0.self_attn.sampling_offsets.weight",
    "backbone.0.body.conv1.weight", "transformer.level_embed"};

// Plain SGD (no momentum, no decay): a parameter with multiplier m moves by
// exactly m times what it moves without one (lr, m and the gradients powers
// of two, so no product rounds).
static void check_lr_mult_sgd(void) {
  ct_params p;
  ct_params_init(&p);
  ct_tensor *a = ct_params_add(&p, "blocks.0.attn.qkv.weight", CT_SHAPE(5), 0);
  ct_tensor *b = ct_params_add(&p, "head.weight", CT_SHAPE(5), 0);
  for (int i = 0; i < 5; i++) {
    ct_f32(a)[i] = ct_f32(b)[i] = (float)i;
    a->grad[i] = b->grad[i] = ldexpf(1.0f, i - 2);
  }
  ct_optim_config c = ct_sgd_defaults();
  CHECK(ct_optim_lr_mults_parse(&c, "attn:0.25") == CT_OK, "%s",
        ct_last_error());
  ct_optim o;
  CHECK(ct_optim_init(&o, &c) == CT_OK, "%s", ct_last_error());
  CHECK(ct_optim_step(&o, &p, 0.5f) == CT_OK, "%s", ct_last_error());
  for (int i = 0; i < 5; i++) {
    const float da = ct_f32(a)[i] - (float)i, db = ct_f32(b)[i] - (float)i;
    CHECK(da == 0.25f * db && db == -0.5f * ldexpf(1.0f, i - 2),
          "element %d: moved %g with multiplier 0.25, %g without", i, da, db);
  }
  ct_params_free(&p);
}

// Adam and AdamW (with decay) with rules give, parameter by parameter, the
// bits of a store without rules stepped at lr * m: the multiplier enters
// the step size and the decoupled decay and nothing else. Parameters no
// rule matches keep the bits of a run without rules, at 1 and 2 threads.
static void check_lr_mult_adam(void) {
  static const ct_optim_kind kinds[] = {CT_OPTIM_ADAM, CT_OPTIM_ADAMW};
  static const float lr = 0.0078125f;  // 2^-7: lr * 0.5 and lr * 0.25 exact
  static const double mults[3] = {0.5, 0.25, 1.0};
  for (size_t k = 0; k < 2; k++) {
    for (int threads = 1; threads <= 2; threads++) {
      ct_set_threads(threads);
      ct_optim_config with =
          kinds[k] == CT_OPTIM_ADAM ? ct_adam_defaults() : ct_adamw_defaults();
      with.weight_decay = 0.05;
      ct_optim_config without = with;
      CHECK(ct_optim_lr_mults_parse(
                &with, " sampling_offsets : 0.5 , backbone.0:0.25") == CT_OK,
            "%s", ct_last_error());
      ct_params p;
      mult_store(&p, mult_names);
      ct_optim o;
      CHECK(ct_optim_init(&o, &with) == CT_OK, "%s", ct_last_error());
      CHECK(ct_optim_lr_mults_check(&with, &p) == CT_OK, "%s", ct_last_error());
      for (int s = 0; s < 3; s++) ct_optim_step(&o, &p, lr);
      for (int i = 0; i < 3; i++) {
        CHECK(ct_optim_lr_mult_of(&with, mult_names[i]) == mults[i],
              "%s: multiplier %g", mult_names[i],
              ct_optim_lr_mult_of(&with, mult_names[i]));
        ct_params q;
        mult_store(&q, mult_names);
        ct_optim oq;
        ct_optim_init(&oq, &without);
        for (int s = 0; s < 3; s++)
          ct_optim_step(&oq, &q, (float)(lr * mults[i]));
        const ct_param *it = &p.items[i];
        CHECK(memcmp(p.data + it->offset, q.data + it->offset,
                     (size_t)it->tensor->numel * sizeof(float)) == 0,
              "%s, %d threads: %s with multiplier %g differs from lr * %g",
              ct_optim_kind_name(kinds[k]), threads, it->name, mults[i],
              mults[i]);
        ct_params_free(&q);
      }
      ct_params_free(&p);
    }
  }
  ct_threads_from_env();
}

// The list's grammar and its errors, each naming the item and the fault.
static void check_lr_mult_parse(void) {
  ct_optim_config c = ct_adamw_defaults();
  CHECK(ct_optim_lr_mults_parse(&c, "") == CT_OK && c.n_lr_mults == 0,
        "empty list: %s", ct_last_error());
  CHECK(ct_optim_lr_mults_parse(&c, " a.b:0.1, c_d : 2 ,e:0") == CT_OK &&
            c.n_lr_mults == 3 && !strcmp(c.lr_mults[0].match, "a.b") &&
            c.lr_mults[0].mult == 0.1 && !strcmp(c.lr_mults[1].match, "c_d") &&
            c.lr_mults[1].mult == 2.0 && c.lr_mults[2].mult == 0.0,
        "three items: %s", ct_last_error());
  static const struct {
    const char *text, *message;
  } bad[] = {
      {"sampling-offsets:0.1", "holds '-'"},
      {"x:abc", "'abc' is not a finite number"},
      {"x:0.1y", "'0.1y' is not a finite number"},
      {"x:", "'' is not a finite number"},
      {"x:1e999", "not a finite number"},
      {"x:nan", "not a finite number"},
      {"x:-0.1", "must not be negative"},
      {"x0.1", "has no ':'"},
      {":0.1", "empty name"},
      {"a:1,,b:2", "empty item"},
      {"a:1,", "no item after it"},
      {"a:1,a:2", "'a' is named twice"},
      {"a:1,b:1,c:1,d:1,e:1,f:1,g:1,h:1,i:1", "more than 8 items"},
      {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
       "longer than 63"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ct_status st = ct_optim_lr_mults_parse(&c, bad[i].text);
    CHECK(st == CT_ERR_ARG && strstr(ct_last_error(), bad[i].message) &&
              c.n_lr_mults == 3,
          "'%s': status %d, message '%s' (want '%s'; the rules kept)",
          bad[i].text, (int)st, ct_last_error(), bad[i].message);
  }
  // Set by hand past the parser: init refuses what the parser would.
  ct_optim o;
  c.lr_mults[1].mult = -1.0;
  CHECK(ct_optim_init(&o, &c) == CT_ERR_ARG && strstr(ct_last_error(), "'c_d'"),
        "negative multiplier accepted by init: %s", ct_last_error());
  // First match wins: "attn" takes every attention parameter, so a later
  // "attn.qkv" is the first match of none, which the check reports.
  CHECK(ct_optim_lr_mults_parse(&c, "attn:0.5,attn.qkv:2,head:3") == CT_OK,
        "%s", ct_last_error());
  CHECK(ct_optim_lr_mult_of(&c, "blocks.0.attn.qkv.weight") == 0.5 &&
            ct_optim_lr_mult_of(&c, "norm.weight") == 1.0,
        "first match");
  ct_params p;
  ct_params_init(&p);
  ct_params_add(&p, "blocks.0.attn.qkv.weight", CT_SHAPE(4), 0);
  ct_params_add(&p, "head.weight", CT_SHAPE(4), CT_PARAM_FROZEN);
  CHECK(ct_optim_lr_mults_check(&c, &p) == CT_ERR_ARG &&
            strstr(ct_last_error(), "'attn.qkv'"),
        "a rule shadowed by an earlier one: %s", ct_last_error());
  CHECK(ct_optim_lr_mults_parse(&c, "attn:0.5,head:3") == CT_OK &&
            ct_optim_lr_mults_check(&c, &p) == CT_ERR_ARG &&
            strstr(ct_last_error(), "'head'"),
        "a rule matching only a frozen parameter: %s", ct_last_error());
  ct_params_free(&p);
}

int main(void) {
  ct_threads_from_env();
  check_optim_parity();
  check_clip();
  check_thread_independence();
  check_ranges();
  check_non_finite();
  check_loss_trace();
  check_config_errors();
  check_lr_mult_sgd();
  check_lr_mult_adam();
  check_lr_mult_parse();
  ct_arena_release();
  return test_summary("optim");
}
