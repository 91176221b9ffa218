// Finite-difference gradient checking.
//
// The function under test maps the inputs to one tensor y of any shape. The
// check contracts y with a fixed random vector r, L = sum(y * r), so every
// output element matters, then compares the analytic gradient dL/dx (one
// backward pass seeded with r) with central differences
// (L(x + eps e_j) - L(x - eps e_j)) / (2 eps), accumulated in double, for every
// element j of every f32 input that requires grad.
//
// An element passes when |analytic - numeric| <= atol + rtol * |numeric|.
// The reported relative error is |analytic - numeric| / max(|numeric|, atol/rtol).
#ifndef CT_AUTOGRAD_GRADCHECK_H
#define CT_AUTOGRAD_GRADCHECK_H

#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

typedef ct_tensor *(*ct_gradcheck_fn)(ct_tensor *const *inputs, void *ctx);

typedef struct ct_gradcheck_opts {
  double eps;     // finite-difference step (1e-3)
  double rtol;    // (1e-2)
  double atol;    // (1e-3)
  uint64_t seed;  // for r
} ct_gradcheck_opts;

ct_gradcheck_opts ct_gradcheck_defaults(void);

typedef struct ct_gradcheck_result {
  ct_status status;  // CT_OK when the function ran (pass or fail)
  bool ok;           // every element passed
  double max_abs_err;
  double max_rel_err;
  int worst_input;  // where the worst relative error is
  int64_t worst_index;
  double worst_analytic, worst_numeric;
  int64_t checked;  // elements compared
} ct_gradcheck_result;

// Inputs that are f32 and require grad are checked; others (targets, masks)
// are passed through unchanged. The inputs must be arena tensors whose data
// the check may perturb (it restores them). opts NULL = defaults.
ct_gradcheck_result ct_gradcheck(ct_gradcheck_fn fn, void *ctx,
                                 ct_tensor *const *inputs, int n_inputs,
                                 const ct_gradcheck_opts *opts);

#endif
