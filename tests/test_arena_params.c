// The two allocators: the step arena and the parameter store.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/params.h"
#include "tests/harness.h"

#include <stdint.h>
#include <string.h>

static void test_arena(void) {
  ct_arena_reset();
  size_t base = ct_arena_used_bytes();
  CHECK(base == 0, "used after reset %zu", base);
  char *p = ct_arena_alloc(10), *q = ct_arena_alloc(100);
  CHECK(p && q && ((uintptr_t)p & 63) == 0 && ((uintptr_t)q & 63) == 0,
        "aligned allocations");
  CHECK(q >= p + 10, "no overlap");
  CHECK(ct_arena_used_bytes() == 64 + 128, "used %zu", ct_arena_used_bytes());

  // More than one block's worth in one step, then a reset merges the blocks.
  for (int i = 0; i < 5; i++) CHECK(ct_arena_alloc((size_t)10 << 20), "big");
  size_t used = ct_arena_used_bytes();
  CHECK(used >= (size_t)50 << 20, "used %zu", used);
  CHECK(ct_arena_peak_bytes() >= used, "peak %zu >= used",
        ct_arena_peak_bytes());
  ct_arena_reset();
  CHECK(ct_arena_used_bytes() == 0, "reset frees");
  CHECK(ct_arena_peak_bytes() >= used, "peak kept after reset");

  // Mark and rewind give memory back.
  ct_arena_alloc(1000);
  ct_arena_mark m = ct_arena_get_mark();
  size_t at = ct_arena_used_bytes();
  ct_arena_alloc((size_t)40 << 20);
  ct_arena_alloc(5000);
  ct_arena_rewind(m);
  CHECK(ct_arena_used_bytes() == at, "rewind: used %zu, want %zu",
        ct_arena_used_bytes(), at);
  // A mark taken before a reset gives nothing back after it.
  ct_arena_reset();
  ct_arena_alloc(3000);
  at = ct_arena_used_bytes();
  ct_arena_rewind(m);
  CHECK(ct_arena_used_bytes() == at, "stale mark: used %zu, want %zu",
        ct_arena_used_bytes(), at);
  ct_arena_reset();
}

// The tape lives in the arena: a reset empties it, with no stale nodes
// left to walk.
static void test_reset_empties_tape(void) {
  ct_tensor *x = ct_requires_grad(ct_tensor_full(CT_F32, 2.0, CT_SHAPE(3)));
  ct_tensor *y = ct_sum(ct_mul(x, x));
  CHECK(y && ct_tape_size() == 2, "two nodes recorded, got %d", ct_tape_size());
  ct_arena_reset();
  CHECK(ct_tape_size() == 0, "reset empties the tape, %d left", ct_tape_size());
  ct_tensor *z = ct_requires_grad(ct_tensor_full(CT_F32, 3.0, CT_SHAPE(2)));
  ct_tensor *l = ct_sum(ct_mul(z, z));
  CHECK(ct_backward(l) == CT_OK && ct_tape_size() == 0, "backward after reset");
  CHECK(z->grad && z->grad[0] == 6.0f && z->grad[1] == 6.0f, "dz = 2z");
  ct_arena_reset();
}

static void test_params(void) {
  ct_params p;
  ct_params_init(&p);
  ct_tensor *w = ct_params_add(&p, "fc.weight", CT_SHAPE(3, 5), 0);
  ct_tensor *b = ct_params_add(&p, "fc.bias", CT_SHAPE(3), CT_PARAM_NO_DECAY);
  CHECK(w && b, "add");
  CHECK(w->persistent && w->requires_grad && strcmp(w->name, "fc.weight") == 0,
        "param tensor fields");
  ct_param *pb = ct_params_find(&p, "fc.bias");
  CHECK(pb && pb->offset % 16 == 0 && pb->offset >= 15, "bias offset %zu",
        pb ? pb->offset : 0);
  CHECK(pb && (pb->flags & CT_PARAM_NO_DECAY), "flags kept");
  CHECK(ct_params_find(&p, "nope") == NULL, "find missing");
  CHECK(ct_params_numel(&p) == 18, "numel %zu", ct_params_numel(&p));
  CHECK(b->data == p.data + pb->offset && b->grad == p.grad + pb->offset,
        "tensors point into the buffers");

  // Duplicate names and bad shapes are errors.
  CHECK(ct_params_add(&p, "fc.bias", CT_SHAPE(3), 0) == NULL, "duplicate");
  CHECK(strstr(ct_last_error(), "already registered"), "'%s'", ct_last_error());
  CHECK(ct_params_add(&p, "bad", CT_SHAPE(-3), 0) == NULL, "negative dim");
  CHECK(ct_params_add(&p, "", CT_SHAPE(3), 0) == NULL, "empty name");

  // Growing the store moves the buffers; earlier tensors follow.
  ct_f32(w)[0] = 1.5f;
  float *state = ct_params_state(&p, 0);
  CHECK(state != NULL, "state slot 0");
  ct_tensor *big = ct_params_add(&p, "emb.weight", CT_SHAPE(1000, 64), 0);
  CHECK(big, "add big");
  CHECK(w->data == p.data && ct_f32(w)[0] == 1.5f, "rebased after growth");
  ct_param *pbig = ct_params_find(&p, "emb.weight");
  CHECK(p.state[0] && p.count >= pbig->offset + 64000, "state grew too");
  CHECK(p.state[0][pbig->offset + 63999] == 0.0f, "new state is zero");
  CHECK(ct_params_state(&p, 9) == NULL && ct_last_status() == CT_ERR_ARG,
        "bad state slot");
  CHECK(ct_params_bytes(&p) == 3 * p.capacity * sizeof(float), "bytes %zu",
        ct_params_bytes(&p));

  // A frozen parameter does not require grad.
  ct_tensor *t = ct_params_add(&p, "teacher.w", CT_SHAPE(2), CT_PARAM_FROZEN);
  CHECK(t && !t->requires_grad, "frozen");

  // Gradients accumulate into the persistent buffer across backward passes,
  // and zero_grad clears them.
  ct_f32(b)[0] = 2.0f;
  for (int pass = 0; pass < 2; pass++) {
    ct_tensor *x = ct_tensor_full(CT_F32, 1.0, CT_SHAPE(4, 3));
    ct_tensor *loss = ct_sum(ct_add(x, b));
    CHECK(ct_backward(loss) == CT_OK, "backward: %s", ct_last_error());
  }
  CHECK(b->grad[0] == 8.0f, "accumulated grad %g, want 8", b->grad[0]);
  ct_params_zero_grad(&p);
  CHECK(b->grad[0] == 0.0f, "zero_grad");
  ct_arena_reset();
  CHECK(ct_tape_size() == 0, "reset empties the tape");
  ct_params_free(&p);
}

static void test_tape(void) {
  ct_tensor *x = ct_requires_grad(ct_tensor_full(CT_F32, 2.0, CT_SHAPE(3)));
  ct_tensor *y = ct_mul(x, x);
  CHECK(ct_tape_size() == 1 && y->requires_grad, "recorded");
  // Not a scalar.
  CHECK(ct_backward(y) == CT_ERR_SHAPE, "non-scalar loss");
  // No-grad scope records nothing.
  bool was = ct_grad_set_enabled(false);
  ct_tensor *z = ct_mul(x, x);
  ct_grad_set_enabled(was);
  CHECK(!z->requires_grad && ct_tape_size() == 1, "no-grad scope");
  CHECK(ct_backward(ct_sum(z)) == CT_ERR_STATE, "backward without a graph");
  CHECK(strstr(ct_last_error(), "does not require grad"), "'%s'",
        ct_last_error());
  // Backward consumes the tape.
  CHECK(ct_backward(ct_sum(y)) == CT_OK, "backward");
  CHECK(x->grad[0] == 4.0f, "d/dx sum(x*x) = 2x = %g", x->grad[0]);
  CHECK(ct_tape_size() == 0, "tape consumed");
  ct_tensor *ids = ct_tensor_zeros(CT_I32, CT_SHAPE(2));
  CHECK(ct_requires_grad(ids) == NULL && ct_last_status() == CT_ERR_DTYPE,
        "i32 cannot require grad");
  ct_arena_reset();
}

int main(void) {
  test_arena();
  test_params();
  test_tape();
  test_reset_empties_tape();
  ct_arena_release();
  return test_summary("arena_params");
}
