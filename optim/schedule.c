// Learning-rate schedules as pure functions of the step (formulas and step
// numbering in optim/schedule.h). Computed in double, returned as float.
#include "optim/schedule.h"

#include <math.h>

static const double PI = 3.14159265358979323846;

static const char *const kind_names[CT_SCHEDULE_KIND_COUNT] = {
    [CT_SCHEDULE_CONSTANT] = "constant",
    [CT_SCHEDULE_COSINE] = "cosine",
    [CT_SCHEDULE_LINEAR] = "linear",
    [CT_SCHEDULE_INVERSE_SQRT] = "inverse_sqrt",
    [CT_SCHEDULE_STEP] = "step",
};

const char *ct_schedule_kind_name(ct_schedule_kind kind) {
  return (unsigned)kind < CT_SCHEDULE_KIND_COUNT ? kind_names[kind] : "?";
}

// Negated comparisons so that NaN fails every range check.
ct_status ct_schedule_check(const ct_schedule *s) {
  if (!s) return ct_error(CT_ERR_ARG, "schedule: NULL schedule");
  if ((unsigned)s->kind >= CT_SCHEDULE_KIND_COUNT)
    return ct_error(CT_ERR_ARG, "schedule: unknown kind %d", (int)s->kind);
  const char *name = kind_names[s->kind];
  if (!(s->lr >= 0.0 && isfinite(s->lr)))
    return ct_error(CT_ERR_ARG, "schedule %s: lr %g must be finite and >= 0",
                    name, s->lr);
  if (s->warmup_steps < 0)
    return ct_error(CT_ERR_ARG, "schedule %s: warmup_steps %lld must be >= 0",
                    name, (long long)s->warmup_steps);
  switch (s->kind) {
  case CT_SCHEDULE_COSINE:
  case CT_SCHEDULE_LINEAR:
    if (!(s->min_lr >= 0.0 && s->min_lr <= s->lr))
      return ct_error(CT_ERR_ARG,
                      "schedule %s: min_lr %g must be in [0, lr "
                      "= %g]",
                      name, s->min_lr, s->lr);
    if (s->total_steps <= s->warmup_steps)
      return ct_error(CT_ERR_ARG,
                      "schedule %s: total_steps %lld must exceed "
                      "warmup_steps %lld",
                      name, (long long)s->total_steps,
                      (long long)s->warmup_steps);
    break;
  case CT_SCHEDULE_INVERSE_SQRT:
    if (s->d_model < 1)
      return ct_error(CT_ERR_ARG, "schedule %s: d_model %lld must be >= 1",
                      name, (long long)s->d_model);
    if (s->warmup_steps < 1)
      return ct_error(CT_ERR_ARG, "schedule %s: warmup_steps must be >= 1",
                      name);
    break;
  case CT_SCHEDULE_STEP:
    if (s->step_size < 1)
      return ct_error(CT_ERR_ARG, "schedule %s: step_size %lld must be >= 1",
                      name, (long long)s->step_size);
    if (!(s->gamma > 0.0 && isfinite(s->gamma)))
      return ct_error(CT_ERR_ARG, "schedule %s: gamma %g must be > 0", name,
                      s->gamma);
    break;
  default: break;
  }
  return CT_OK;
}

// Fraction of the decay phase done at `step`, clamped to [0, 1].
static double decay_progress(const ct_schedule *s, int64_t step) {
  double span = (double)(s->total_steps - s->warmup_steps);
  double q = (double)(step - s->warmup_steps) / (span > 0.0 ? span : 1.0);
  return q < 0.0 ? 0.0 : q > 1.0 ? 1.0 : q;
}

float ct_schedule_lr(const ct_schedule *s, int64_t step) {
  if (step < 0) step = 0;
  if (s->kind == CT_SCHEDULE_INVERSE_SQRT) {
    // Vaswani et al. eq. 3 with step_num = step + 1.
    double n = (double)(step + 1), w = (double)s->warmup_steps;
    return (float)(s->lr / sqrt((double)s->d_model) *
                   fmin(1.0 / sqrt(n), n * pow(w, -1.5)));
  }
  if (step < s->warmup_steps)
    return (float)(s->lr * (double)step / (double)s->warmup_steps);
  switch (s->kind) {
  case CT_SCHEDULE_COSINE: {
    double q = decay_progress(s, step);
    return (float)(s->min_lr + (s->lr - s->min_lr) * 0.5 * (1.0 + cos(PI * q)));
  }
  case CT_SCHEDULE_LINEAR:
    return (float)(s->lr + (s->min_lr - s->lr) * decay_progress(s, step));
  case CT_SCHEDULE_STEP:
    return (float)(s->lr * pow(s->gamma, (double)(step / s->step_size)));
  default: return (float)s->lr;
  }
}
