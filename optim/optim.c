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
#include <stdlib.h>
#include <string.h>

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
  if (cfg->n_lr_mults < 0 || cfg->n_lr_mults > CT_OPTIM_LR_MULTS)
    return ct_error(CT_ERR_ARG, "%s: %d lr multipliers (at most %d)", name,
                    cfg->n_lr_mults, (int)CT_OPTIM_LR_MULTS);
  for (int i = 0; i < cfg->n_lr_mults; i++) {
    const ct_optim_lr_mult *r = &cfg->lr_mults[i];
    if (!r->match[0] || !memchr(r->match, 0, sizeof r->match))
      return ct_error(CT_ERR_ARG,
                      "%s: lr multiplier %d: its name is empty or not "
                      "NUL-terminated",
                      name, i + 1);
    if (!(r->mult >= 0.0 && isfinite(r->mult)))
      return ct_error(CT_ERR_ARG,
                      "%s: lr multiplier '%s': %g must be finite and >= 0",
                      name, r->match, r->mult);
  }
  o->cfg = *cfg;
  o->step = 0;
  return CT_OK;
}

// ---- learning-rate multipliers ----

static bool lr_mult_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.';
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

// [*s, *e) without blanks at either end.
static void trim(const char **s, const char **e) {
  while (*s < *e && is_blank(**s)) (*s)++;
  while (*e > *s && is_blank((*e)[-1])) (*e)--;
}

ct_status ct_optim_lr_mults_parse(ct_optim_config *cfg, const char *text) {
  ct_optim_lr_mult rules[CT_OPTIM_LR_MULTS];
  int n = 0;
  const char *s = text;
  const char *end = text + strlen(text);
  trim(&s, &end);
  while (s < end) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *ie = comma ? comma : end, *is = s;
    trim(&is, &ie);
    const int item_len = (int)(ie - is);
    if (is == ie)
      return ct_error(CT_ERR_ARG,
                      "lr_mult: an empty item (write NAME:MULT items "
                      "separated by single commas)");
    if (n == CT_OPTIM_LR_MULTS)
      return ct_error(CT_ERR_ARG, "lr_mult: more than %d items",
                      (int)CT_OPTIM_LR_MULTS);
    const char *colon = memchr(is, ':', (size_t)(ie - is));
    if (!colon)
      return ct_error(CT_ERR_ARG,
                      "lr_mult: '%.*s' has no ':' (items are NAME:MULT, "
                      "e.g. sampling_offsets:0.1)",
                      item_len, is);
    const char *ns = is, *ne = colon, *vs = colon + 1, *ve = ie;
    trim(&ns, &ne);
    trim(&vs, &ve);
    if (ns == ne)
      return ct_error(CT_ERR_ARG, "lr_mult: '%.*s' has an empty name", item_len,
                      is);
    if (ne - ns >= CT_OPTIM_LR_MULT_NAME)
      return ct_error(CT_ERR_ARG,
                      "lr_mult: the name '%.*s' is longer than %d characters",
                      (int)(ne - ns), ns, (int)CT_OPTIM_LR_MULT_NAME - 1);
    for (const char *c = ns; c < ne; c++)
      if (!lr_mult_name_char(*c))
        return ct_error(CT_ERR_ARG,
                        "lr_mult: the name '%.*s' holds '%c' (names are "
                        "letters, digits, '_' and '.': a part of parameter "
                        "names)",
                        (int)(ne - ns), ns, *c);
    ct_optim_lr_mult *r = &rules[n];
    memcpy(r->match, ns, (size_t)(ne - ns));
    r->match[ne - ns] = '\0';
    for (int i = 0; i < n; i++)
      if (!strcmp(rules[i].match, r->match))
        return ct_error(CT_ERR_ARG, "lr_mult: '%s' is named twice", r->match);
    // strtod reads a copy ending where the number should end.
    char num[64];
    char *num_end = NULL;
    if (vs < ve && ve - vs < (ptrdiff_t)sizeof num) {
      memcpy(num, vs, (size_t)(ve - vs));
      num[ve - vs] = '\0';
      r->mult = strtod(num, &num_end);
    }
    if (!num_end || num_end == num || *num_end || !isfinite(r->mult))
      return ct_error(CT_ERR_ARG,
                      "lr_mult: '%.*s': '%.*s' is not a finite number",
                      item_len, is, (int)(ve - vs), vs);
    if (!(r->mult >= 0.0))
      return ct_error(CT_ERR_ARG,
                      "lr_mult: '%.*s': the multiplier must not be negative",
                      item_len, is);
    n++;
    s = comma ? comma + 1 : end;
    if (comma && s == end)
      return ct_error(CT_ERR_ARG, "lr_mult: a ',' with no item after it");
  }
  memcpy(cfg->lr_mults, rules, (size_t)n * sizeof *rules);
  cfg->n_lr_mults = n;
  return CT_OK;
}

// The index of the first rule matching `name`, or -1.
static int lr_mult_rule(const ct_optim_config *cfg, const char *name) {
  for (int i = 0; i < cfg->n_lr_mults; i++)
    if (strstr(name, cfg->lr_mults[i].match)) return i;
  return -1;
}

double ct_optim_lr_mult_of(const ct_optim_config *cfg, const char *name) {
  int i = lr_mult_rule(cfg, name);
  return i < 0 ? 1.0 : cfg->lr_mults[i].mult;
}

ct_status ct_optim_lr_mults_check(const ct_optim_config *cfg,
                                  const ct_params *p) {
  for (int i = 0; i < cfg->n_lr_mults; i++) {
    bool used = false;
    for (int k = 0; k < p->n && !used; k++)
      used = !(p->items[k].flags & CT_PARAM_FROZEN) &&
             lr_mult_rule(cfg, p->items[k].name) == i;
    if (!used)
      return ct_error(CT_ERR_ARG,
                      "lr_mult: '%s' is part of no trainable parameter's name "
                      "that an earlier item does not already take (first "
                      "match wins; `ctrain inspect` lists the names)",
                      cfg->lr_mults[i].match);
  }
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
// s0, s1 hold the state of those floats (s0[0] is float lo's). c[0] holds
// the coefficients of parameters without an lr multiplier, c[1 + i] those
// of multiplier rule i. Each thread takes the same fixed share of each
// parameter's part, so no barrier is needed between parameters.
static void params_update(ct_params *ps, const ct_optim_config *cfg,
                          const step_coeffs *c, range_update_fn fn, float *s0,
                          float *s1, size_t lo, size_t hi) {
#pragma omp parallel if (hi - lo >= OPTIM_PARALLEL_MIN)
  {
    size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
    for (int k = 0; k < ps->n; k++) {
      const ct_param *it = &ps->items[k];
      size_t a, b;
      if ((it->flags & CT_PARAM_FROZEN) || !ct_param_part(it, lo, hi, &a, &b))
        continue;
      const step_coeffs *ck = &c[1 + lr_mult_rule(cfg, it->name)];
      size_t n = b - a, first = a + n * t / nt, end = a + n * (t + 1) / nt;
      if (first < end)
        fn(ck, !(it->flags & CT_PARAM_NO_DECAY), ps->data + first,
           ps->grad + first, s0 ? s0 + (first - lo) : NULL,
           s1 ? s1 + (first - lo) : NULL, 0, end - first);
    }
  }
}

// The coefficients of one step at learning rate lr (a double: the schedule's
// float lr, or that times a multiplier).
static step_coeffs coeffs_make(const ct_optim *o, double lr) {
  const ct_optim_config *cfg = &o->cfg;
  step_coeffs c = {.wd = (float)cfg->weight_decay, .keep = 1.0f};
  if (cfg->kind == CT_OPTIM_SGD) {
    c.neg_lr = (float)-lr;
    c.momentum = (float)cfg->momentum;
    c.one_minus_damp = (float)(1.0 - cfg->dampening);
    c.first = o->step == 0;
    c.nesterov = cfg->nesterov;
    return c;
  }
  double t = (double)(o->step + 1);
  double bc1 = 1.0 - pow(cfg->beta1, t), bc2 = 1.0 - pow(cfg->beta2, t);
  c.beta1 = (float)cfg->beta1;
  c.one_minus_beta1 = (float)(1.0 - cfg->beta1);
  c.beta2 = (float)cfg->beta2;
  c.one_minus_beta2 = (float)(1.0 - cfg->beta2);
  c.bc2_sqrt = (float)sqrt(bc2);
  c.eps = (float)cfg->eps;
  c.neg_step_size = (float)(-lr / bc1);
  if (cfg->kind == CT_OPTIM_ADAMW) {
    c.keep = (float)(1.0 - lr * cfg->weight_decay);
    c.wd = 0.0f;
  }
  return c;
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
  step_coeffs c[1 + CT_OPTIM_LR_MULTS];
  c[0] = coeffs_make(o, (double)lr);
  for (int i = 0; i < cfg->n_lr_mults; i++)
    c[1 + i] = coeffs_make(o, (double)lr * cfg->lr_mults[i].mult);
  params_update(p, cfg, c, cfg->kind == CT_OPTIM_SGD ? sgd_range : adam_range,
                s0, cfg->kind == CT_OPTIM_SGD ? NULL : s1, lo, hi);
  o->step++;
  return CT_OK;
}
