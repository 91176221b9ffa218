// Optimizers: SGD (momentum, dampening, Nesterov, weight decay), Adam (L2
// weight decay added to the gradient) and AdamW (decoupled weight decay), each
// step matching torch.optim of PyTorch 1.13 element for element.
//
// An optimizer works on a whole ct_params store: one step is a flat loop over
// the registry, parameter by parameter (CT_PARAM_FROZEN ones are skipped;
// CT_PARAM_NO_DECAY ones get no weight decay). Its moments live in the store's
// state buffers (ct_params_state), so a checkpoint that saves the store and
// `ct_optim.step` can resume exactly. The learning rate is an argument of each
// step; it comes from a schedule (optim/schedule.h).
//
//   ct_optim opt;
//   ct_optim_config cfg = ct_adamw_defaults();
//   cfg.weight_decay = 0.05;
//   if (ct_optim_init(&opt, &cfg) != CT_OK) ... ct_last_error() ...
//   for (int64_t step = 0; step < n; step++) {
//     ... forward, ct_params_zero_grad(&p), ct_backward(loss) ...
//     ct_clip_grad_norm(&p, 1.0f);                      // optim/grads.h
//     ct_optim_step(&opt, &p, ct_schedule_lr(&sched, step));
//   }
//
// Learning-rate multipliers (the reference Deformable DETR's parameter
// groups: sampling_offsets and reference_points at 0.1x, the backbone at
// lr_backbone / lr): rules {match, mult}; a parameter whose name contains
// `match` (a plain substring, case-sensitive) takes the `mult` of the first
// such rule, else 1. Its update then uses lr * mult (in double, as torch's
// group lr, a Python float) wherever lr appears: SGD's step, Adam's step
// size, AdamW's decoupled decay 1 - lr * mult * wd. A parameter with no
// rule, or mult exactly 1, gets the bits it would get without rules. The
// rules are config (train: [optim] lr_mult, kept in every checkpoint's
// resolved config), not optimizer state.
//
// What this file does not do: gradient clipping or non-finite checks (see
// optim/grads.h), AMSGrad, `maximize`, or per-group hyperparameters other than
// the NO_DECAY flag and the learning-rate multipliers.
#ifndef CT_OPTIM_OPTIM_H
#define CT_OPTIM_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/params.h"

typedef enum ct_optim_kind {
  CT_OPTIM_SGD,
  CT_OPTIM_ADAM,
  CT_OPTIM_ADAMW,
  CT_OPTIM_KIND_COUNT
} ct_optim_kind;

// Which ct_params state slot holds what (a checkpoint saves the slots it
// finds allocated; see ct_optim_state_slots).
enum {
  CT_OPTIM_SLOT_MOMENTUM = 0,    // SGD momentum buffer (only if momentum > 0)
  CT_OPTIM_SLOT_EXP_AVG = 0,     // Adam/AdamW first moment m
  CT_OPTIM_SLOT_EXP_AVG_SQ = 1,  // Adam/AdamW second moment v
};

enum {
  CT_OPTIM_LR_MULTS = 8,       // rules at most
  CT_OPTIM_LR_MULT_NAME = 64,  // bytes of a rule's match, with its NUL
};

typedef struct ct_optim_lr_mult {
  char match[CT_OPTIM_LR_MULT_NAME];  // a substring of parameter names
  double mult;                        // >= 0, finite
} ct_optim_lr_mult;

typedef struct ct_optim_config {
  ct_optim_kind kind;
  // Doubles, as torch's Python floats: derived coefficients such as
  // 1 - beta2 = 0.001 are computed in double and rounded once to float (a
  // float beta2 would make that 0.000999987, off by 1.3e-5).
  double weight_decay;  // SGD/Adam: g += wd * p; AdamW: p *= 1 - lr * wd
  // SGD
  double momentum;   // 0 = plain SGD
  double dampening;  // buf = momentum * buf + (1 - dampening) * g
  bool nesterov;     // g + momentum * buf instead of buf
  // Adam, AdamW
  double beta1, beta2;
  double eps;  // added to sqrt(v_hat), outside the square root
  // Learning-rate multipliers by parameter name, in order (first match wins).
  int n_lr_mults;
  ct_optim_lr_mult lr_mults[CT_OPTIM_LR_MULTS];
} ct_optim_config;

// torch's defaults: SGD momentum 0, dampening 0, no Nesterov, no decay; Adam
// betas (0.9, 0.999), eps 1e-8, no decay; AdamW the same with decay 0.01.
ct_optim_config ct_sgd_defaults(void);
ct_optim_config ct_adam_defaults(void);
ct_optim_config ct_adamw_defaults(void);

typedef struct ct_optim {
  ct_optim_config cfg;
  int64_t step;  // updates taken so far; Adam's bias correction uses step + 1
} ct_optim;

// Validates the hyperparameters (as torch does: momentum, weight_decay >= 0,
// betas in [0, 1), eps >= 0; Nesterov needs momentum > 0 and dampening 0;
// lr multipliers finite and >= 0 with non-empty matches) and sets the step
// counter to 0. CT_ERR_ARG with a message naming the field.
ct_status ct_optim_init(ct_optim *o, const ct_optim_config *cfg);

// One update of every non-frozen parameter of `p` from its gradient, with
// learning rate `lr` (>= 0), then o->step += 1. Allocates the state slots on
// first use (CT_ERR_NOMEM if that fails; nothing is updated then).
//
// SGD (torch.optim.SGD), g = grad + wd * p:
//   momentum == 0: p -= lr * g
//   first step:    buf = g;  later: buf = momentum * buf + (1 - dampening) * g
//   p -= lr * (nesterov ? g + momentum * buf : buf)
// Adam (torch.optim.Adam), t = step + 1, g = grad + wd * p:
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// AdamW (torch.optim.AdamW, Loshchilov & Hutter 2019): p *= 1 - lr * wd, then
//   the Adam update with g = grad.
// CT_PARAM_NO_DECAY parameters use wd = 0.
ct_status ct_optim_step(ct_optim *o, ct_params *p, float lr);

// The same update of the floats [lo, hi) of the store only, with the state
// of those floats in state[slot] (hi - lo floats each, state[slot][0] for
// float lo; slots the optimizer does not use may be NULL): a ZeRO-1 rank
// updates its shard with the moments of its shard. The results are the bits
// of ct_optim_step (every update is elementwise). o->step += 1.
ct_status ct_optim_step_range(ct_optim *o, ct_params *p, float lr, size_t lo,
                              size_t hi, float *const *state);

// Parses a list of learning-rate multipliers into cfg->lr_mults (replacing
// any): "NAME:MULT[,NAME:MULT]..." (blanks around items, names and numbers
// are ignored; "" is no rules). NAME is 1 to CT_OPTIM_LR_MULT_NAME - 1
// characters of [A-Za-z0-9_.], each NAME once; MULT a finite number >= 0.
// CT_ERR_ARG "lr_mult: ..." quoting the item and saying what is wrong;
// cfg is unchanged then.
ct_status ct_optim_lr_mults_parse(ct_optim_config *cfg, const char *text);

// The multiplier of parameter `name`: the first rule whose match is a
// substring of it, else 1.
double ct_optim_lr_mult_of(const ct_optim_config *cfg, const char *name);

// CT_ERR_ARG when a rule is the first match of no non-frozen parameter of
// `p` (a misspelt name, or one an earlier rule already takes), naming it.
ct_status ct_optim_lr_mults_check(const ct_optim_config *cfg,
                                  const ct_params *p);

// The state slots the configured optimizer uses (a bit per slot), for
// checkpoints and `ctrain inspect`.
unsigned ct_optim_state_slots(const ct_optim_config *cfg);

// "sgd", "adam", "adamw" ("?" for a value outside the enum). Configs name
// the optimizer through train/schema.h's list, which tests check against it.
const char *ct_optim_kind_name(ct_optim_kind kind);

#endif
