// Helpers for gradient-check tests: random inputs and a checked gradcheck.
#ifndef CT_TESTS_GRAD_UTIL_H
#define CT_TESTS_GRAD_UTIL_H

#include "autograd/gradcheck.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/rng.h"
#include "tests/harness.h"

static ct_rng grad_test_rng = {.seed = 2024, .stream = 77, .offset = 0};

// A leaf f32 tensor with N(0, 1) values that requires grad.
static inline ct_tensor *grad_input(int ndim, const int64_t *shape) {
  return ct_requires_grad(
      ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, ndim, shape));
}

// Runs ct_gradcheck and records one check with the worst error.
static inline void grad_check(const char *what, ct_gradcheck_fn fn, void *ctx,
                              ct_tensor *const *inputs, int n,
                              const ct_gradcheck_opts *opts) {
  ct_gradcheck_result r = ct_gradcheck(fn, ctx, inputs, n, opts);
  printf("  %-40s checked %6lld  max rel err %.2e\n", what,
         (long long)r.checked, r.max_rel_err);
  CHECK(r.status == CT_OK, "%s: gradcheck could not run: %s", what,
        ct_last_error());
  CHECK(r.ok, "%s: input %d element %lld: analytic %.6g vs numeric %.6g", what,
        r.worst_input, (long long)r.worst_index, r.worst_analytic,
        r.worst_numeric);
  CHECK(r.checked > 0, "%s: nothing was checked", what);
  ct_arena_reset();
}

#endif
