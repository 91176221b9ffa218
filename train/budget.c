// Budgeted schedules: the step-time measurement and the plan (budget.h).
#include "train/budget.h"

#include <math.h>

#include "autograd/ops_conv.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "train/progress.h"

// One step's passes, every update left out: the gradients are zeroed
// afterwards and BatchNorm's running-statistics updates go to a log that is
// never applied.
static ct_status timed_step(ct_task *task, ct_params *p, uint64_t seed,
                            int64_t accum, int64_t first_micro,
                            ct_bn_update_log *bn) {
  ct_status st = CT_OK;
  for (int64_t a = 0; a < accum && st == CT_OK; a++) {
    ct_nn_ctx ctx = ct_nn_train_ctx(seed, (uint64_t)(first_micro + a));
    ct_bn_update_log_clear(bn);
    ctx.bn_updates = bn;
    ct_params_zero_grad(p);
    double items = 0.0;
    ct_tensor *loss = task->ops->train_loss(task, &ctx, &items);
    st = loss ? ct_backward(loss) : ct_last_status();
    if (st == CT_OK && loss == NULL) st = CT_ERR_STATE;
    ct_arena_reset();
  }
  ct_params_zero_grad(p);
  return st;
}

ct_status ct_budget_measure(ct_task *task, ct_params *p, uint64_t seed,
                            int64_t accum, int64_t first_micro,
                            double budget_seconds, ct_budget_timing *out) {
  *out = (ct_budget_timing){0};
  int64_t epoch, position;
  task->ops->data_position(task, &epoch, &position);
  ct_bn_update_log bn = {0};
  const double limit = fmin(CT_BUDGET_MAX_MEASURE_SECONDS, budget_seconds / 50);
  const double started = ct_time_now();
  // Untimed: the first step grows the arena block by block (and packing
  // buffers); the arena then swaps its blocks for one that holds them all,
  // whose fresh pages the second step touches first.
  ct_status st = CT_OK;
  for (int w = 0; w < CT_BUDGET_WARMUP_STEPS && st == CT_OK; w++)
    st = timed_step(task, p, seed, accum, first_micro, &bn);
  // The batches to be timed are passed once untimed, then again, timed:
  // where batches differ in shape (sentences of other lengths), one larger
  // than all before grows the arena and packing buffers, and its step pays
  // for the fresh pages. A run pays that a few times in its first steps;
  // timed in the first pass, it made a Multi30k step look half as long
  // again as it is.
  int64_t at_epoch, at_position;
  task->ops->data_position(task, &at_epoch, &at_position);
  const double first_from = ct_time_now();
  int64_t n = 0;
  while (st == CT_OK && n < CT_BUDGET_MAX_TIMED_STEPS &&
         (n == 0 || ct_time_now() - first_from < limit)) {
    st = timed_step(task, p, seed, accum, first_micro, &bn);
    n++;
  }
  if (st == CT_OK) st = task->ops->data_seek(task, at_epoch, at_position);
  const double timed_from = ct_time_now();
  for (; st == CT_OK && out->timed_steps < n; out->timed_steps++)
    st = timed_step(task, p, seed, accum, first_micro, &bn);
  const double now = ct_time_now();
  ct_bn_update_log_free(&bn);
  if (out->timed_steps > 0)
    out->step_seconds = (now - timed_from) / (double)out->timed_steps;
  out->spent_seconds = now - started;
  ct_status seek = task->ops->data_seek(task, epoch, position);
  return st != CT_OK ? st : seek;
}

int64_t ct_budget_warmup(const ct_schedule *schedule, int64_t steps,
                         int64_t configured_steps) {
  const int64_t w = schedule->warmup_steps;
  if (schedule->kind == CT_SCHEDULE_INVERSE_SQRT || w == 0 ||
      steps >= configured_steps)
    return w;
  // floor(w · steps / configured) without overflow: steps < configured.
  int64_t scaled =
      (int64_t)floor((double)w * (double)steps / (double)configured_steps);
  if (scaled < 1 && steps > 1) scaled = 1;
  if (scaled >= steps) scaled = steps - 1;
  return scaled < 0 ? 0 : scaled;
}

ct_budget_plan ct_budget_plan_make(const ct_schedule *schedule,
                                   double budget_seconds,
                                   const ct_budget_timing *tm,
                                   int64_t configured_steps) {
  ct_budget_plan plan = {0};
  double left = budget_seconds - tm->spent_seconds;
  double fits = tm->step_seconds > 0.0 ? floor(left / tm->step_seconds) : 0.0;
  if (!(fits >= 1.0)) fits = 1.0;  // NaN too: a budget still trains a step
  plan.fits = fits > 1e15 ? (int64_t)1e15 : (int64_t)fits;
  plan.steps = plan.fits < configured_steps ? plan.fits : configured_steps;
  plan.warmup = ct_budget_warmup(schedule, plan.steps, configured_steps);
  return plan;
}
