// The plan of a budgeted run (train/budget.h): the total is what fits the
// budget after the measurement, capped by the configured total and never
// below one step; the warmup keeps its share of the run, stays at least
// one step when there was one and below the total (cosine and linear need
// total > warmup), and inverse_sqrt's warmup, which places its peak, is
// left alone.
#include <math.h>

#include "tests/harness.h"
#include "train/budget.h"

static ct_schedule cosine(int64_t warmup) {
  return (ct_schedule){
      .kind = CT_SCHEDULE_COSINE, .lr = 1e-3, .warmup_steps = warmup};
}

static void test_total(void) {
  ct_schedule s = cosine(100);
  // 60 s, 2 s measured, 0.1 s a step: 580 steps fit.
  ct_budget_timing tm = {
      .step_seconds = 0.1, .timed_steps = 10, .spent_seconds = 2.0};
  ct_budget_plan p = ct_budget_plan_make(&s, 60.0, &tm, 10000);
  CHECK(p.fits == 580 && p.steps == 580, "580 fit: %lld, planned %lld",
        (long long)p.fits, (long long)p.steps);
  CHECK(p.warmup == 5, "warmup 100 of 10000 -> 5 of 580: %lld",
        (long long)p.warmup);
  p = ct_budget_plan_make(&s, 60.0, &tm, 300);
  CHECK(p.fits == 580 && p.steps == 300 && p.warmup == 100,
        "the configured 300 fit: planned %lld, warmup %lld", (long long)p.steps,
        (long long)p.warmup);
  // A budget the measurement already used up still trains one step.
  tm.spent_seconds = 90.0;
  p = ct_budget_plan_make(&s, 60.0, &tm, 300);
  CHECK(p.steps == 1 && p.warmup == 0, "no time left: %lld steps, warmup %lld",
        (long long)p.steps, (long long)p.warmup);
  ct_budget_timing nan_tm = {.step_seconds = NAN, .timed_steps = 1};
  p = ct_budget_plan_make(&s, 60.0, &nan_tm, 300);
  CHECK(p.steps == 1, "NaN step time: %lld steps", (long long)p.steps);
  // An hour-long budget of microsecond steps does not overflow.
  ct_budget_timing fast = {.step_seconds = 1e-12, .timed_steps = 1};
  p = ct_budget_plan_make(&s, 3600.0, &fast, INT64_C(1000000000000));
  CHECK(p.steps == INT64_C(1000000000000), "fast steps: %lld",
        (long long)p.steps);
}

static void test_warmup(void) {
  ct_schedule s = cosine(50);
  CHECK(ct_budget_warmup(&s, 10, 10000) == 1, "a warmup stays >= 1: %lld",
        (long long)ct_budget_warmup(&s, 10, 10000));
  CHECK(ct_budget_warmup(&s, 1, 10000) == 0, "one step has no warmup");
  CHECK(ct_budget_warmup(&s, 5000, 10000) == 25, "half the run, half: %lld",
        (long long)ct_budget_warmup(&s, 5000, 10000));
  CHECK(ct_budget_warmup(&s, 10000, 10000) == 50, "the whole run: as is");
  s.kind = CT_SCHEDULE_CONSTANT;
  s.warmup_steps = 900;  // longer than the run: stays below it
  CHECK(ct_budget_warmup(&s, 100, 500) == 99, "constant: %lld",
        (long long)ct_budget_warmup(&s, 100, 500));
  s = cosine(0);
  CHECK(ct_budget_warmup(&s, 100, 1000) == 0, "no warmup stays none");
  s.kind = CT_SCHEDULE_INVERSE_SQRT;
  s.warmup_steps = 4000;
  CHECK(ct_budget_warmup(&s, 100, 100000) == 4000,
        "inverse_sqrt keeps its warmup");
  // Every planned schedule passes the checks the trainer makes.
  for (int64_t total = 1; total < 300; total += 7) {
    ct_schedule c = cosine(40);
    c.total_steps = total;
    c.warmup_steps = ct_budget_warmup(&c, total, 300);
    CHECK(ct_schedule_check(&c) == CT_OK, "total %lld warmup %lld: %s",
          (long long)total, (long long)c.warmup_steps, ct_last_error());
  }
}

int main(void) {
  test_total();
  test_warmup();
  return test_summary("budget_plan");
}
