// LR schedules against torch's schedulers (StepLR, CosineAnnealingLR, and
// LambdaLR with the equivalent lambdas) at consecutive steps, and against the
// closed-form formulas at scattered steps, from tests/ref/schedule_fixtures.h
// (made by tests/ref/gen_optim_fixtures.py). Also: name parsing and the
// checks of bad fields.
#include "core/error.h"
#include "optim/schedule.h"
#include "ref/schedule_fixtures.h"
#include "tests/harness.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

// ct_schedule_lr returns a float: 1e-6 relative is a few float roundings.
// Values far below the peak (a cosine ending at 0) are judged on the peak.
static const double TOL = 1e-6;

static double lr_error(float got, double want, double peak) {
  return fabs((double)got - want) / fmax(fabs(want), 1e-3 * peak);
}

// The kind that ct_schedule_kind_name calls `name` (the fixtures name kinds
// as configs do).
static ct_schedule_kind kind_named(const char *name) {
  for (int k = 0; k < CT_SCHEDULE_KIND_COUNT; k++)
    if (!strcmp(ct_schedule_kind_name((ct_schedule_kind)k), name))
      return (ct_schedule_kind)k;
  CHECK(false, "no schedule kind is named '%s'", name);
  return CT_SCHEDULE_CONSTANT;
}

static ct_schedule fixture_schedule(const schedule_fixture *f) {
  ct_schedule s = {.kind = kind_named(f->kind),
                   .lr = f->lr,
                   .min_lr = f->min_lr,
                   .gamma = f->gamma,
                   .warmup_steps = f->warmup,
                   .total_steps = f->total,
                   .d_model = f->d_model,
                   .step_size = f->step_size};
  CHECK(ct_schedule_check(&s) == CT_OK, "%s: %s", f->name, ct_last_error());
  return s;
}

static double check_fixture(const schedule_fixture *f) {
  ct_schedule s = fixture_schedule(f);
  double peak = s.kind == CT_SCHEDULE_INVERSE_SQRT ? 0.0 : s.lr;
  for (int i = 0; i < f->n_torch; i++) peak = fmax(peak, f->torch_lr[i]);
  double worst_torch = 0.0, worst_formula = 0.0;
  for (int i = 0; i < f->n_torch; i++) {
    float got = ct_schedule_lr(&s, i);
    double e = lr_error(got, f->torch_lr[i], peak);
    CHECK(e <= TOL, "%s: step %d: %.9g, torch %s %.9g", f->name, i, got,
          f->torch, f->torch_lr[i]);
    worst_torch = fmax(worst_torch, e);
  }
  for (int i = 0; i < f->n_formula; i++) {
    float got = ct_schedule_lr(&s, f->formula_step[i]);
    double e = lr_error(got, f->formula_lr[i], peak);
    CHECK(e <= TOL, "%s: step %lld: %.9g, formula %.9g", f->name,
          (long long)f->formula_step[i], got, f->formula_lr[i]);
    worst_formula = fmax(worst_formula, e);
  }
  printf("  %-24s vs %-17s %3d steps %.2e, formula %d steps %.2e\n", f->name,
         f->torch, f->n_torch, worst_torch, f->n_formula, worst_formula);
  return fmax(worst_torch, worst_formula);
}

// Every kind has its own name; a value outside the enum is "?".
static void check_names(void) {
  CHECK(kind_named("inverse_sqrt") == CT_SCHEDULE_INVERSE_SQRT, "inverse_sqrt");
  for (int a = 0; a < CT_SCHEDULE_KIND_COUNT; a++)
    for (int b = 0; b < a; b++)
      CHECK(strcmp(ct_schedule_kind_name((ct_schedule_kind)a),
                   ct_schedule_kind_name((ct_schedule_kind)b)),
            "kinds %d and %d share a name", a, b);
  CHECK(!strcmp(ct_schedule_kind_name(CT_SCHEDULE_KIND_COUNT), "?"),
        "out of range");
}

// Each schedule is valid, then one field is broken: the message names it.
static void check_bad_fields(void) {
  static const struct {
    ct_schedule s;
    const char *field;
  } cases[] = {
      {{.kind = CT_SCHEDULE_CONSTANT, .lr = -1.0}, "lr"},
      {{.kind = CT_SCHEDULE_CONSTANT, .lr = NAN}, "lr"},
      {{.kind = CT_SCHEDULE_CONSTANT, .lr = 1.0, .warmup_steps = -1},
       "warmup_steps"},
      {{.kind = CT_SCHEDULE_COSINE,
        .lr = 1.0,
        .total_steps = 10,
        .warmup_steps = 10},
       "total_steps"},
      {{.kind = CT_SCHEDULE_LINEAR,
        .lr = 1.0,
        .min_lr = 2.0,
        .total_steps = 10},
       "min_lr"},
      {{.kind = CT_SCHEDULE_INVERSE_SQRT, .lr = 1.0, .warmup_steps = 10},
       "d_model"},
      {{.kind = CT_SCHEDULE_INVERSE_SQRT, .lr = 1.0, .d_model = 8},
       "warmup_steps"},
      {{.kind = CT_SCHEDULE_STEP, .lr = 1.0, .gamma = 0.5}, "step_size"},
      {{.kind = CT_SCHEDULE_STEP, .lr = 1.0, .step_size = 3}, "gamma"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CHECK(ct_schedule_check(&cases[i].s) == CT_ERR_ARG, "case %zu passed", i);
    CHECK(strstr(ct_last_error(), cases[i].field), "case %zu: %s", i,
          ct_last_error());
  }
}

// Purity: asking again, or out of order, gives the same value; a negative
// step counts as 0.
static void check_pure(void) {
  ct_schedule s = {.kind = CT_SCHEDULE_COSINE,
                   .lr = 1e-3,
                   .min_lr = 1e-5,
                   .warmup_steps = 10,
                   .total_steps = 100};
  float a = ct_schedule_lr(&s, 57);
  ct_schedule_lr(&s, 3);
  CHECK(ct_schedule_lr(&s, 57) == a, "not pure");
  CHECK(ct_schedule_lr(&s, -5) == ct_schedule_lr(&s, 0), "negative step");
  CHECK(ct_schedule_lr(&s, 10) == 1e-3f, "peak %.9g", ct_schedule_lr(&s, 10));
}

int main(void) {
  double worst = 0.0;
  for (int i = 0; i < schedule_fixture_count; i++)
    worst = fmax(worst, check_fixture(&schedule_fixtures[i]));
  printf("schedules: %d cases, max rel err %.2e (tol %.0e)\n",
         schedule_fixture_count, worst, TOL);
  check_names();
  check_bad_fields();
  check_pure();
  return test_summary("schedule");
}
