// The worked example at the top of ctrain.h, as a test: it must compile
// against the umbrella header and actually fit the line.
#include "ctrain.h"
#include "tests/harness.h"

int main(void) {
  ct_params p;
  ct_params_init(&p);
  ct_tensor *w = ct_params_add(&p, "fc.weight", CT_SHAPE(1, 1), 0);
  ct_tensor *b = ct_params_add(&p, "fc.bias", CT_SHAPE(1), CT_PARAM_NO_DECAY);
  const float xs[4] = {0, 1, 2, 3}, ys[4] = {1, 3, 5, 7};
  float last = 0.0f;
  for (int step = 0; step < 200; step++) {
    ct_tensor *x = ct_tensor_from(CT_F32, xs, CT_SHAPE(4, 1));
    ct_tensor *y = ct_tensor_from(CT_F32, ys, CT_SHAPE(4, 1));
    ct_tensor *loss = ct_mse(ct_linear(x, w, b), y);
    CHECK(loss != NULL, "step %d: %s", step, ct_last_error());
    if (!loss) break;
    last = ct_f32(loss)[0];
    ct_params_zero_grad(&p);
    ct_backward(loss);
    for (size_t i = 0; i < p.count; i++) p.data[i] -= 0.05f * p.grad[i];
    ct_arena_reset();
  }
  printf("w %.4f b %.4f final loss %.2e\n", ct_f32(w)[0], ct_f32(b)[0], last);
  CHECK(fabsf(ct_f32(w)[0] - 2.0f) < 0.01f, "w = %g", ct_f32(w)[0]);
  CHECK(fabsf(ct_f32(b)[0] - 1.0f) < 0.02f, "b = %g", ct_f32(b)[0]);
  ct_params_free(&p);
  ct_arena_release();
  return test_summary("example");
}
