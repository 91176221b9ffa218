// SGD, Adam and AdamW over a whole parameter store, as torch.optim (1.13)
// computes them in float32: per-step coefficients are computed in double
// (torch's Python floats) and rounded once to float, and each elementwise
// update does the same float operations in the same order as torch's CPU
// kernels, e.g. addcdiv: p + value * m / denom = p + (value * m) / denom.
//
// Updates are elementwise, so splitting a parameter between threads cannot
// change a result: every thread takes a fixed share of every parameter.
#include "optim/optim.h"

#include <math.h>
#include <omp.h>

// Below this many floats a step runs on one thread (spawning costs more).
enum { OPTIM_PARALLEL_MIN = 1 << 15 };

static const char *const kind_names[CT_OPTIM_KIND_COUNT] = {
    [CT_OPTIM_SGD] = "sgd",
    [CT_OPTIM_ADAM] = "adam",
    [CT_OPTIM_ADAMW] = "adamw",
};

const char *ct_optim_kind_name(ct_optim_kind kind) {
  return (unsigned)kind < CT_OPTIM_KIND_COUNT ? kind_names[kind] : "?";
}

ct_optim_config ct_sgd_defaults(void) {
  return (ct_optim_config){
      .kind = CT_OPTIM_SGD, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

ct_optim_config ct_adam_defaults(void) {
  ct_optim_config c = ct_sgd_defaults();
  c.kind = CT_OPTIM_ADAM;
  return c;
}

ct_optim_config ct_adamw_defaults(void) {
  ct_optim_config c = ct_sgd_defaults();
  c.kind = CT_OPTIM_ADAMW;
  c.weight_decay = 0.01;
  return c;
}

// Negated comparisons so that NaN fails every range check.
ct_status ct_optim_init(ct_optim *o, const ct_optim_config *cfg) {
  if (!o || !cfg)
    return ct_error(CT_ERR_ARG, "optim: NULL optimizer or config");
  if ((unsigned)cfg->kind >= CT_OPTIM_KIND_COUNT)
    return ct_error(CT_ERR_ARG, "optim: unknown kind %d", (int)cfg->kind);
  const char *name = kind_names[cfg->kind];
  if (!(cfg->weight_decay >= 0.0 && isfinite(cfg->weight_decay)))
    return ct_error(CT_ERR_ARG, "%s: weight_decay %g must be >= 0", name,
                    cfg->weight_decay);
  if (cfg->kind == CT_OPTIM_SGD) {
    if (!(cfg->momentum >= 0.0 && isfinite(cfg->momentum)))
      return ct_error(CT_ERR_ARG, "sgd: momentum %g must be >= 0",
                      cfg->momentum);
    if (!isfinite(cfg->dampening))
      return ct_error(CT_ERR_ARG, "sgd: dampening %g must be finite",
                      cfg->dampening);
    if (cfg->nesterov && (cfg->momentum <= 0.0 || cfg->dampening != 0.0))
      return ct_error(CT_ERR_ARG,
                      "sgd: nesterov needs momentum > 0 and dampening 0 "
                      "(got momentum %g, dampening %g)",
                      cfg->momentum, cfg->dampening);
  } else {
    if (!(cfg->beta1 >= 0.0 && cfg->beta1 < 1.0))
      return ct_error(CT_ERR_ARG, "%s: beta1 %g must be in [0, 1)", name,
                      cfg->beta1);
    if (!(cfg->beta2 >= 0.0 && cfg->beta2 < 1.0))
      return ct_error(CT_ERR_ARG, "%s: beta2 %g must be in [0, 1)", name,
                      cfg->beta2);
    if (!(cfg->eps >= 0.0 && isfinite(cfg->eps)))
      return ct_error(CT_ERR_ARG, "%s: eps %g must be >= 0", name, cfg->eps);
  }
  o->cfg = *cfg;
  o->step = 0;
  return CT_OK;
}

unsigned ct_optim_state_slots(const ct_optim_config *cfg) {
  if (cfg->kind == CT_OPTIM_SGD)
    return cfg->momentum != 0.0 ? 1u << CT_OPTIM_SLOT_MOMENTUM : 0u;
  return 1u << CT_OPTIM_SLOT_EXP_AVG | 1u << CT_OPTIM_SLOT_EXP_AVG_SQ;
}

// One step's coefficients, as the float scalars torch's kernels receive.
typedef struct step_coeffs {
  float neg_lr;          // SGD: p += -lr * d
  float wd;              // SGD/Adam: g = grad + wd * p
  float momentum;        // SGD
  float one_minus_damp;  // SGD: 1 - dampening
  bool first;            // SGD: the momentum buffer starts as g
  bool nesterov;
  float beta1, one_minus_beta1, beta2, one_minus_beta2;  // Adam
  float bc2_sqrt;                                        // sqrt(1 - beta2^t)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^t)
  float keep;           // AdamW: p *= 1 - lr * wd
} step_coeffs;

// Updates floats [lo, hi) of the store; `decay` is false for NO_DECAY
// parameters. s0, s1: the state slots the optimizer uses (or NULL).
typedef void (*range_update_fn)(const step_coeffs *c, bool decay, float *p,
                                const float *g, float *s0, float *s1, size_t lo,
                                size_t hi);

static void sgd_range(const step_coeffs *c, bool decay, float *p,
                      const float *g, float *buf, float *unused, size_t lo,
                      size_t hi) {
  (void)unused;
  float wd = decay ? c->wd : 0.0f;
  for (size_t i = lo; i < hi; i++) {
    float d = wd != 0.0f ? g[i] + wd * p[i] : g[i];
    if (buf) {
      buf[i] = c->first ? d : buf[i] * c->momentum + c->one_minus_damp * d;
      d = c->nesterov ? d + c->momentum * buf[i] : buf[i];
    }
    p[i] = p[i] + c->neg_lr * d;
  }
}

// One element of Adam/AdamW; keep is 1 (an exact no-op) without decoupled
// decay, wd 0 without L2 decay.
static inline float adam_one(const step_coeffs *c, float wd, float keep,
                             float *p, const float *g, float *m, float *v) {
  const float pi = *p * keep;
  const float gi = wd != 0.0f ? *g + wd * pi : *g;
  const float mi = *m * c->beta1 + c->one_minus_beta1 * gi;
  const float vi = *v * c->beta2 + c->one_minus_beta2 * gi * gi;
  *m = mi;
  *v = vi;
  return pi + c->neg_step_size * mi / (sqrtf(vi) / c->bc2_sqrt + c->eps);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ADAM_X86 1
// The same float operations in the same order as adam_one, 16 lanes at a
// time (vector sqrt and division round as the scalar ones do, and nothing
// is fused into FMAs), so the bits do not depend on the path. Returns the
// index where the scalar tail starts.
__attribute__((target("avx512f"))) static size_t adam_avx512(
    const step_coeffs *c, float wd, float keep, float *p, const float *g,
    float *m, float *v, size_t lo, size_t hi) {
  const __m512 vkeep = _mm512_set1_ps(keep), vwd = _mm512_set1_ps(wd);
  const __m512 b1 = _mm512_set1_ps(c->beta1);
  const __m512 omb1 = _mm512_set1_ps(c->one_minus_beta1);
  const __m512 b2 = _mm512_set1_ps(c->beta2);
  const __m512 omb2 = _mm512_set1_ps(c->one_minus_beta2);
  const __m512 bc2 = _mm512_set1_ps(c->bc2_sqrt);
  const __m512 eps = _mm512_set1_ps(c->eps);
  const __m512 nss = _mm512_set1_ps(c->neg_step_size);
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    const __m512 pi = _mm512_mul_ps(_mm512_loadu_ps(p + i), vkeep);
    __m512 gi = _mm512_loadu_ps(g + i);
    if (wd != 0.0f) gi = _mm512_add_ps(gi, _mm512_mul_ps(vwd, pi));
    const __m512 mi = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(m + i), b1),
                                    _mm512_mul_ps(omb1, gi));
    const __m512 vi = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(v + i), b2),
                                    _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    const __m512 denom =
        _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2), eps);
    _mm512_storeu_ps(
        p + i, _mm512_add_ps(pi, _mm512_div_ps(_mm512_mul_ps(nss, mi), denom)));
  }
  return i;
}
#endif

// Adam and AdamW share the moment update; they differ in where the decay
// goes (c->wd is 0 for AdamW, c->keep is 1 for Adam).
static void adam_range(const step_coeffs *c, bool decay, float *p,
                       const float *g, float *m, float *v, size_t lo,
                       size_t hi) {
  const float wd = decay ? c->wd : 0.0f;
  const float keep = decay ? c->keep : 1.0f;
  size_t i = lo;
#ifdef ADAM_X86
  static int avx512 = -1;  // the same answer from any thread
  if (avx512 < 0) avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
  if (avx512) i = adam_avx512(c, wd, keep, p, g, m, v, lo, hi);
#endif
  for (; i < hi; i++) p[i] = adam_one(c, wd, keep, p + i, g + i, m + i, v + i);
}

// Runs fn over the non-frozen parameters' floats in [lo, hi) of the store;
// s0, s1 hold the state of those floats (s0[0] is float lo's). Each thread
// takes the same fixed share of each parameter's part, so no barrier is
// needed between parameters.
static void params_update(ct_params *ps, const step_coeffs *c,
                          range_update_fn fn, float *s0, float *s1, size_t lo,
                          size_t hi) {
#pragma omp parallel if (hi - lo >= OPTIM_PARALLEL_MIN)
  {
    size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
    for (int k = 0; k < ps->n; k++) {
      const ct_param *it = &ps->items[k];
      size_t a, b;
      if ((it->flags & CT_PARAM_FROZEN) || !ct_param_part(it, lo, hi, &a, &b))
        continue;
      size_t n = b - a, first = a + n * t / nt, end = a + n * (t + 1) / nt;
      if (first < end)
        fn(c, !(it->flags & CT_PARAM_NO_DECAY), ps->data + first,
           ps->grad + first, s0 ? s0 + (first - lo) : NULL,
           s1 ? s1 + (first - lo) : NULL, 0, end - first);
    }
  }
}

static ct_status check_step(const ct_optim *o, const ct_params *p, float lr) {
  if (!o || !p) return ct_error(CT_ERR_ARG, "optim: NULL optimizer or params");
  if (!(lr >= 0.0f && isfinite(lr)))
    return ct_error(CT_ERR_ARG,
                    "%s: learning rate %g at step %lld must be "
                    "finite and >= 0",
                    ct_optim_kind_name(o->cfg.kind), lr, (long long)o->step);
  return CT_OK;
}

ct_status ct_optim_step(ct_optim *o, ct_params *p, float lr) {
  ct_status st = check_step(o, p, lr);
  if (st != CT_OK) return st;
  // Allocate every slot before touching any parameter.
  float *state[CT_PARAM_STATE_SLOTS] = {NULL};
  unsigned slots = ct_optim_state_slots(&o->cfg);
  for (int k = 0; k < CT_PARAM_STATE_SLOTS && p->count; k++)
    if (slots & 1u << k && !(state[k] = ct_params_state(p, k)))
      return CT_ERR_NOMEM;
  return ct_optim_step_range(o, p, lr, 0, p->count, state);
}

ct_status ct_optim_step_range(ct_optim *o, ct_params *p, float lr, size_t lo,
                              size_t hi, float *const *state) {
  ct_status st = check_step(o, p, lr);
  if (st != CT_OK) return st;
  const ct_optim_config *cfg = &o->cfg;
  if (lo > hi || hi > p->count)
    return ct_error(CT_ERR_ARG, "%s: floats [%zu, %zu) of a store of %zu",
                    ct_optim_kind_name(cfg->kind), lo, hi, p->count);
  unsigned slots = ct_optim_state_slots(cfg);
  for (int k = 0; k < CT_PARAM_STATE_SLOTS && lo < hi; k++)
    if (slots & 1u << k && !state[k])
      return ct_error(CT_ERR_ARG, "%s: no buffer for state slot %d",
                      ct_optim_kind_name(cfg->kind), k);
  if (lo == hi) {
    o->step++;
    return CT_OK;
  }
  float *s0 = state[0], *s1 = state[1];
  step_coeffs c = {.wd = (float)cfg->weight_decay, .keep = 1.0f};
  if (cfg->kind == CT_OPTIM_SGD) {
    c.neg_lr = -lr;
    c.momentum = (float)cfg->momentum;
    c.one_minus_damp = (float)(1.0 - cfg->dampening);
    c.first = o->step == 0;
    c.nesterov = cfg->nesterov;
    params_update(p, &c, sgd_range, s0, NULL, lo, hi);
  } else {
    double t = (double)(o->step + 1);
    double bc1 = 1.0 - pow(cfg->beta1, t), bc2 = 1.0 - pow(cfg->beta2, t);
    c.beta1 = (float)cfg->beta1;
    c.one_minus_beta1 = (float)(1.0 - cfg->beta1);
    c.beta2 = (float)cfg->beta2;
    c.one_minus_beta2 = (float)(1.0 - cfg->beta2);
    c.bc2_sqrt = (float)sqrt(bc2);
    c.eps = (float)cfg->eps;
    c.neg_step_size = (float)(-(double)lr / bc1);
    if (cfg->kind == CT_OPTIM_ADAMW) {
      c.keep = (float)(1.0 - (double)lr * cfg->weight_decay);
      c.wd = 0.0f;
    }
    params_update(p, &c, adam_range, s0, s1, lo, hi);
  }
  o->step++;
  return CT_OK;
}
