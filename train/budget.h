// Budgeted schedules: a run with [train] max_minutes > 0 fixes its total
// step count before its first step, from the time a step takes on this
// machine, and lays its learning-rate schedule over that total.
//
//   ct_budget_timing tm;
//   ct_budget_measure(&task, &params, seed, accum, first_micro, budget_s, &tm);
//   ct_budget_plan plan = ct_budget_plan_make(&schedule, budget_s, &tm,
//                                             configured_steps);
//   // train plan.steps steps with schedule.warmup_steps = plan.warmup
//
// The measurement times forward and backward passes on the first training
// batches and then puts the data back where it was: no parameter, moment,
// BatchNorm statistic or data position changes, so the planned run has the
// bits of a run configured with `steps = plan.steps` and `warmup =
// plan.warmup` from the start (what the trainer writes into the resolved
// config.ini). The optimizer update and a data-parallel run's exchange are
// not in the timed passes (a small part of a step); validations,
// checkpoints and the final evaluation take wall time beyond the plan.
//
// What this file does not do: keep the plan (checkpoints do, train/run.h),
// agree on it across ranks (the trainer takes rank 0's), or cut a run off.
#ifndef CT_TRAIN_BUDGET_H
#define CT_TRAIN_BUDGET_H

#include <stdint.h>

#include "core/params.h"
#include "optim/schedule.h"
#include "train/task.h"

// Timed passes: after untimed warm-up steps, at most this many batches, as
// many as this long holds (and at most a fiftieth of the budget), passed
// once untimed and then again, timed.
enum { CT_BUDGET_WARMUP_STEPS = 2, CT_BUDGET_MAX_TIMED_STEPS = 10 };
#define CT_BUDGET_MAX_MEASURE_SECONDS 10.0

typedef struct ct_budget_timing {
  double step_seconds;   // mean time of a timed step
  int64_t timed_steps;   // how many were timed (>= 1 unless an error)
  double spent_seconds;  // the whole measurement, warm-up and untimed pass
                         // included
} ct_budget_timing;

// Times steps of `accum` micro-batches (the training passes the trainer's
// step makes, keyed as micro-batches first_micro .. first_micro + accum - 1
// of step 0) without updating anything, then seeks the task's data back.
// A micro-batch that fails is the error (the task's message).
ct_status ct_budget_measure(ct_task *task, ct_params *p, uint64_t seed,
                            int64_t accum, int64_t first_micro,
                            double budget_seconds, ct_budget_timing *out);

typedef struct ct_budget_plan {
  int64_t steps;   // the run's total: min(configured, what fits), >= 1
  int64_t fits;    // steps that fit in the budget after the measurement
  int64_t warmup;  // the schedule's warmup over `steps`
} ct_budget_plan;

// The plan for `budget_seconds` of training at tm's step time, capped by
// the configured total. The warmup keeps its share of the run (warmup ·
// steps / configured, at least 1 when there was one, and below `steps`),
// except for inverse_sqrt, whose warmup places its peak and does not
// depend on the total.
ct_budget_plan ct_budget_plan_make(const ct_schedule *schedule,
                                   double budget_seconds,
                                   const ct_budget_timing *tm,
                                   int64_t configured_steps);

// The warmup of a plan of `steps` out of `configured_steps` (see above).
int64_t ct_budget_warmup(const ct_schedule *schedule, int64_t steps,
                         int64_t configured_steps);

#endif
