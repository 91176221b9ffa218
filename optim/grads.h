// Whole-store gradient operations run between backward and the optimizer
// step: the global L2 norm, clipping by it (torch.nn.utils.clip_grad_norm_),
// and the non-finite checks that stop training naming the parameter (or
// the activation) at fault.
//
// All of them cover the non-frozen parameters of a ct_params store (frozen
// ones have no gradient). The norm is the same, bit for bit, at any thread
// count: squares are summed in double over fixed 8192-float chunks of each
// parameter, and the chunk sums are added in registry order (DESIGN.md,
// determinism). Since float squares summed in double cannot overflow, the
// norm is finite exactly when every gradient is, so a training loop can test
// the norm and call ct_grads_check_finite only to name the culprit.
//
// A gradient spread over processes (a ZeRO-1 data-parallel step: each
// holds the summed gradient of its range of the store only) gets the same
// norm from the spans' sums: each process sums the squares of the spans in
// its range, the sums are gathered in span order, and
// ct_grad_norm_from_squares adds them as ct_grad_norm does. Clipping and
// the finite check then work on each range.
//
// What this file does not do: norms other than L2, or per-parameter
// clipping.
#ifndef CT_OPTIM_GRADS_H
#define CT_OPTIM_GRADS_H

#include <stdint.h>

#include "core/error.h"
#include "core/params.h"

// sqrt(sum of g^2) over every non-frozen gradient.
double ct_grad_norm(const ct_params *p);

// The pieces of the norm: spans of at most 8192 floats of each non-frozen
// parameter, in the order their sums of squares are added.
typedef struct ct_grad_span {
  size_t lo, hi;  // floats [lo, hi) of the grad buffer
} ct_grad_span;

// The store's spans, in norm order, into a malloc'd array of *n.
ct_status ct_grad_spans(const ct_params *p, ct_grad_span **spans, int64_t *n);
// sums[i] = the sum of g^2 over spans[i] (in double, front to back), for
// i < n: the same bits as inside ct_grad_norm.
void ct_grad_span_squares(const float *grad, const ct_grad_span *spans,
                          int64_t n, double *sums);
// The norm from the sums of all the store's spans, in span order: the bits
// of ct_grad_norm.
double ct_grad_norm_from_squares(const double *sums, int64_t n);

// torch.nn.utils.clip_grad_norm_(params, max_norm) with the L2 norm: with
// norm = ct_grad_norm(p) and coef = max_norm / (norm + 1e-6), every
// non-frozen gradient is multiplied by coef when coef < 1 (that is, when the
// norm exceeds max_norm, up to the 1e-6). Returns the norm before clipping.
// max_norm <= 0 only measures (a config's "no clipping"); a non-finite norm
// leaves the gradients as they are, for ct_grads_check_finite to report.
double ct_clip_grad_norm(ct_params *p, double max_norm);
// The clipping of ct_clip_grad_norm for a given norm, on the gradient
// values in floats [lo, hi) of the store only.
void ct_clip_grad_range(ct_params *p, double norm, double max_norm, size_t lo,
                        size_t hi);

// CT_OK when every non-frozen gradient is finite; otherwise CT_ERR_NUMERIC
// with a message naming the first parameter (registry order) holding a NaN
// or Inf: "non-finite gradient in 'fc1.weight' at step 12 (element 5 is
// nan)". Pass step < 0 to leave out "at step N".
ct_status ct_grads_check_finite(const ct_params *p, int64_t step);
// The same check over the gradient values in floats [lo, hi) only.
ct_status ct_grads_check_finite_range(const ct_params *p, int64_t step,
                                      size_t lo, size_t hi);

// CT_OK for a finite loss; otherwise CT_ERR_NUMERIC naming the step and the
// first thing that went non-finite: a parameter holding a NaN or Inf (an
// earlier update made it so), else the oldest activation on the tape whose
// values are not all finite (the op, its output's shape, and how large the
// parameters have grown):
// "non-finite loss (nan) at step 12: parameter 'fc1.weight' holds inf
// (element 5)". Call it before backward, while the tape holds the forward.
ct_status ct_loss_check_finite(const ct_params *p, double loss, int64_t step);

#endif
