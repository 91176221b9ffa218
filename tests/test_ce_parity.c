// Cross-entropy against PyTorch: ctrain's loss and d(loss)/d(logits) for the
// cases in tests/ref/ce_fixtures.h (made by tests/ref/gen_ce_fixtures.py from
// torch's F.cross_entropy in float64), to 1e-6 relative.
//
// A gradient element is compared relative to max(|ref|, 1e-6 * max|ref grad|)
// so that elements near zero are judged on the scale of the whole gradient.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "harness.h"
#include "ref/ce_fixtures.h"

#include <math.h>

static const double TOL = 1e-6;

static void check_case(const ce_fixture *f, double *worst_loss,
                       double *worst_grad) {
  ct_tensor *x = ct_tensor_from(CT_F32, f->logits, CT_SHAPE(f->n, f->k));
  ct_tensor *t = ct_tensor_from(CT_I32, f->targets, CT_SHAPE(f->n));
  ct_ce_opts o = ct_ce_defaults();
  o.ignore_index = f->ignore_index;
  o.label_smoothing = f->label_smoothing;
  if (f->weight) o.weight = ct_tensor_from(CT_F32, f->weight, CT_SHAPE(f->k));
  ct_tensor *loss = ct_cross_entropy(ct_requires_grad(x), t, &o);
  CHECK(loss != NULL, "%s: %s", f->name, ct_last_error());
  if (!loss) return;
  CHECK(ct_backward(loss) == CT_OK, "%s: %s", f->name, ct_last_error());

  double got = ct_f32(loss)[0];
  double loss_rel = fabs(got - f->loss) / fmax(fabs(f->loss), 1e-6);
  CHECK(loss_rel <= TOL, "%s: loss %.9g, torch %.9g (rel %.2e)", f->name, got,
        f->loss, loss_rel);

  int64_t numel = (int64_t)f->n * f->k;
  double gmax = 0.0;
  for (int64_t i = 0; i < numel; i++) gmax = fmax(gmax, fabs(f->grad[i]));
  double floor = fmax(1e-6 * gmax, 1e-30);
  double grad_rel = 0.0, grad_abs = 0.0;
  int64_t worst = 0;
  for (int64_t i = 0; i < numel; i++) {
    double d = fabs((double)x->grad[i] - f->grad[i]);
    double r = d / fmax(fabs(f->grad[i]), floor);
    grad_abs = fmax(grad_abs, d);
    if (r > grad_rel) {
      grad_rel = r;
      worst = i;
    }
  }
  CHECK(grad_rel <= TOL, "%s: grad[%lld] %.9g, torch %.9g (rel %.2e)", f->name,
        (long long)worst, (double)x->grad[worst], f->grad[worst], grad_rel);
  printf("  %-40s loss %.9g  rel %.2e   grad max abs %.2e rel %.2e\n", f->name,
         got, loss_rel, grad_abs, grad_rel);
  *worst_loss = fmax(*worst_loss, loss_rel);
  *worst_grad = fmax(*worst_grad, grad_rel);
}

int main(void) {
  double worst_loss = 0.0, worst_grad = 0.0;
  for (int i = 0; i < ce_fixture_count; i++) {
    check_case(&ce_fixtures[i], &worst_loss, &worst_grad);
    ct_arena_reset();
  }
  printf("ce parity: %d cases, max rel diff loss %.2e, grad %.2e (tol %.0e)\n",
         ce_fixture_count, worst_loss, worst_grad, TOL);
  ct_arena_release();
  return test_summary("ce_parity");
}
