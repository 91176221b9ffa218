// Learning-rate schedules: the LR as a pure function of the step, so resuming
// needs only the step number.
//
// Step numbering: `step` counts optimizer updates from 0; ct_schedule_lr(s, 0)
// is the LR of the first update. This is the `last_epoch` that torch's
// schedulers pass to their formulas after `step` calls of scheduler.step(),
// so each kind below equals a torch scheduler (or a LambdaLR with the lambda
// written next to it) at the same step:
//
//   constant      lr after the warmup
//   cosine        warmup, then min_lr + (lr - min_lr) * (1 + cos(pi * q)) / 2,
//                 q = (step - warmup) / (total - warmup)   (warmup 0:
//                 CosineAnnealingLR, T_max = total, eta_min = min_lr)
//   linear        warmup, then lr + (min_lr - lr) * q      (transformers'
//                 get_linear_schedule_with_warmup when min_lr = 0)
//   inverse_sqrt  lr * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5),
//                 s = step + 1 (Vaswani et al. 2017, eq. 3, whose step_num
//                 counts from 1;
//                 `lr` is the factor in front, peak at step = warmup - 1)
//   step          lr * gamma^floor(step / step_size)       (StepLR)
//
// Warmup (constant, cosine, linear, step) is linear from 0: lr * step / warmup
// for step < warmup (transformers' get_*_schedule_with_warmup), so the peak is
// reached at step = warmup. After `total` steps cosine and linear stay at
// min_lr (torch's cosine would rise again). The step kind counts `step` from
// 0, not from the end of the warmup.
//
// What this file does not do: restarts, cycles, or schedules that depend on
// metrics (ReduceLROnPlateau).
#ifndef CT_OPTIM_SCHEDULE_H
#define CT_OPTIM_SCHEDULE_H

#include <stdint.h>

#include "core/error.h"

typedef enum ct_schedule_kind {
  CT_SCHEDULE_CONSTANT,
  CT_SCHEDULE_COSINE,
  CT_SCHEDULE_LINEAR,
  CT_SCHEDULE_INVERSE_SQRT,
  CT_SCHEDULE_STEP,
  CT_SCHEDULE_KIND_COUNT
} ct_schedule_kind;

typedef struct ct_schedule {
  ct_schedule_kind kind;
  double lr;             // peak LR (inverse_sqrt: the factor)
  double min_lr;         // cosine, linear: the LR at and after `total_steps`
  int64_t warmup_steps;  // 0 = none (inverse_sqrt needs >= 1)
  int64_t total_steps;   // cosine, linear: end of the decay (> warmup_steps)
  int64_t d_model;       // inverse_sqrt: model width
  int64_t step_size;     // step: decay every step_size steps
  double gamma;          // step: multiplier per decay
} ct_schedule;

// The LR for update number `step` (from 0; negative steps count as 0).
// Pure: no state, same answer for the same arguments. The schedule must have
// passed ct_schedule_check.
float ct_schedule_lr(const ct_schedule *s, int64_t step);

// Checks the fields the kind uses: lr >= 0; cosine and linear need
// 0 <= min_lr <= lr and total_steps > warmup_steps; inverse_sqrt needs
// d_model >= 1 and warmup_steps >= 1; step needs step_size >= 1 and
// gamma > 0. CT_ERR_ARG with a message naming the field.
ct_status ct_schedule_check(const ct_schedule *s);

// "constant", "cosine", "linear", "inverse_sqrt", "step" ("?" for a value
// outside the enum). Configs name the schedule through train/schema.h's list,
// which tests check against it.
const char *ct_schedule_kind_name(ct_schedule_kind kind);

#endif
