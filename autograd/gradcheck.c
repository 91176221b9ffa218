// Central-difference gradient check (see gradcheck.h for the method).
#include "autograd/gradcheck.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ct_gradcheck_opts ct_gradcheck_defaults(void) {
  return (ct_gradcheck_opts){
      .eps = 1e-3, .rtol = 1e-2, .atol = 1e-3, .seed = 1234};
}

static double contract(const ct_tensor *y, const float *r) {
  double s = 0.0;
  for (int64_t i = 0; i < y->numel; i++) s += (double)ct_f32(y)[i] * r[i];
  return s;
}

// L at the current input values, with recording off; arena use is rewound.
static bool eval_contracted(ct_gradcheck_fn fn, void *ctx,
                            ct_tensor *const *inputs, const float *r,
                            int64_t numel, double *out) {
  ct_arena_mark mark = ct_arena_get_mark();
  ct_tensor *y = fn(inputs, ctx);
  bool ok = y && y->numel == numel;
  if (ok) *out = contract(y, r);
  ct_arena_rewind(mark);
  return ok;
}

ct_gradcheck_result ct_gradcheck(ct_gradcheck_fn fn, void *ctx,
                                 ct_tensor *const *inputs, int n_inputs,
                                 const ct_gradcheck_opts *opts) {
  ct_gradcheck_opts o = opts ? *opts : ct_gradcheck_defaults();
  ct_gradcheck_result res = {.status = CT_OK, .ok = true, .worst_input = -1};

  for (int i = 0; i < n_inputs; i++) ct_tensor_zero_grad(inputs[i]);
  bool was = ct_grad_set_enabled(true);
  ct_tensor *y = fn(inputs, ctx);
  if (!y) {
    res.status = ct_last_status() ? ct_last_status() : CT_ERR_STATE;
    res.ok = false;
    ct_grad_set_enabled(was);
    return res;
  }
  ct_rng rng = ct_rng_make(o.seed, 0);
  float *r = ct_arena_alloc((size_t)y->numel * sizeof(float));
  if (!r) {
    res.status = CT_ERR_NOMEM;
    res.ok = false;
    ct_grad_set_enabled(was);
    return res;
  }
  ct_rng_fill_uniform(&rng, r, y->numel, -1.0f, 1.0f);
  ct_status st = ct_backward_seeded(y, r);
  if (st != CT_OK) {
    res.status = st;
    res.ok = false;
    ct_grad_set_enabled(was);
    return res;
  }
  ct_grad_set_enabled(false);

  for (int i = 0; i < n_inputs; i++) {
    ct_tensor *x = inputs[i];
    if (!x || x->dtype != CT_F32 || !x->requires_grad) continue;
    float *xd = ct_f32(x);
    for (int64_t j = 0; j < x->numel; j++) {
      float keep = xd[j];
      double lp, lm;
      xd[j] = keep + (float)o.eps;
      double hp = (double)xd[j] - keep;  // the step actually taken
      bool ok = eval_contracted(fn, ctx, inputs, r, y->numel, &lp);
      xd[j] = keep - (float)o.eps;
      double hm = keep - (double)xd[j];
      ok = ok && eval_contracted(fn, ctx, inputs, r, y->numel, &lm);
      xd[j] = keep;
      if (!ok) {
        res.status = ct_last_status() ? ct_last_status() : CT_ERR_STATE;
        res.ok = false;
        ct_grad_set_enabled(was);
        return res;
      }
      double numeric = (lp - lm) / (hp + hm);
      double analytic = x->grad ? x->grad[j] : 0.0;
      double err = fabs(analytic - numeric);
      double rel = err / fmax(fabs(numeric), o.atol / o.rtol);
      res.checked++;
      if (err > res.max_abs_err) res.max_abs_err = err;
      if (rel > res.max_rel_err || res.worst_input < 0) {
        if (rel > res.max_rel_err) res.max_rel_err = rel;
        res.worst_input = i;
        res.worst_index = j;
        res.worst_analytic = analytic;
        res.worst_numeric = numeric;
      }
      if (err > o.atol + o.rtol * fabs(numeric)) res.ok = false;
    }
  }
  ct_grad_set_enabled(was);
  return res;
}
