// What the PyTorch parity tests share: loading a fixture's parameters into
// a ct_params store by state_dict name (which also checks that a module
// registers exactly PyTorch's names), the error metric, sum(y * r), and
// init range checks.
#ifndef CT_TESTS_PARITY_UTIL_H
#define CT_TESTS_PARITY_UTIL_H

#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "core/params.h"
#include "tests/harness.h"

// The fixture names as many parameters as the store holds.
static inline bool parity_count(const ct_params *p, const char *what, int n) {
  CHECK(p->n == n, "%s: ctrain registers %d parameters, torch has %d", what,
        p->n, n);
  return p->n == n;
}

// Copies a fixture's values of parameter `name` into the store.
static inline bool parity_load(ct_params *p, const char *what, const char *name,
                               int64_t numel, const float *value) {
  ct_param *cp = ct_params_find(p, name);
  CHECK(cp != NULL, "%s: no parameter named '%s'", what, name);
  if (!cp) return false;
  CHECK(cp->tensor->numel == numel, "%s: '%s' has %lld values, torch %lld",
        what, name, (long long)cp->tensor->numel, (long long)numel);
  if (cp->tensor->numel != numel) return false;
  memcpy(ct_f32(cp->tensor), value, (size_t)numel * sizeof(float));
  return true;
}

// max |got - want| / max |want|
static inline double parity_rel_err(const float *got, const double *want,
                                    int64_t n) {
  double diff = 0.0, scale = 0.0;
  for (int64_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)got[i] - want[i]));
    scale = fmax(scale, fabs(want[i]));
  }
  return diff / fmax(scale, 1e-30);
}

// sum(y * r), r of y's shape.
static inline ct_tensor *parity_contract(ct_tensor *y, const float *r) {
  if (!y) return NULL;
  return ct_sum(ct_mul(y, ct_tensor_from(CT_F32, r, y->ndim, y->shape)));
}

// All values of t within [lo, hi], and not all equal (they were drawn).
static inline void parity_check_range(const ct_tensor *t, double lo,
                                      double hi) {
  float mn = INFINITY, mx = -INFINITY;
  for (int64_t i = 0; i < t->numel; i++) {
    mn = fminf(mn, ct_f32(t)[i]);
    mx = fmaxf(mx, ct_f32(t)[i]);
  }
  CHECK(mn >= lo && mx <= hi && mn < mx,
        "%s: values in [%g, %g], want [%g, %g]", t->name, (double)mn,
        (double)mx, lo, hi);
}

#endif
