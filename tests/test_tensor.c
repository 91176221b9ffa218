// Tensor creation, views, copies and bad shapes.
#include "core/arena.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/harness.h"

#include <stdint.h>
#include <string.h>

int main(void) {
  ct_tensor *z = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3, 4));
  CHECK(z && z->ndim == 3 && z->numel == 24, "zeros shape");
  int nonzero = 0;
  for (int i = 0; i < 24; i++) nonzero += ct_f32(z)[i] != 0.0f;
  CHECK(nonzero == 0, "zeros has %d nonzero", nonzero);
  CHECK(((uintptr_t)z->data & 63) == 0, "data 64-byte aligned");

  ct_tensor *f = ct_tensor_full(CT_I32, 7, CT_SHAPE(5));
  CHECK(f && f->dtype == CT_I32 && ct_i32(f)[4] == 7, "full i32");

  ct_tensor *s = ct_tensor_zeros(CT_F32, 0, NULL);
  CHECK(s && s->ndim == 0 && s->numel == 1, "scalar has one element");

  const float src[6] = {1, 2, 3, 4, 5, 6};
  ct_tensor *a = ct_tensor_from(CT_F32, src, CT_SHAPE(2, 3));
  CHECK(a && ct_f32(a)[5] == 6.0f && a->data != src, "from copies");

  ct_tensor *r = ct_tensor_arange(CT_F32, 1.0, 0.5, 4);
  CHECK(r && r->numel == 4 && ct_f32(r)[3] == 2.5f, "arange");
  ct_tensor *ri = ct_tensor_arange(CT_I32, 0, 1, 3);
  CHECK(ri && ct_i32(ri)[2] == 2, "arange i32");

  // Views share data.
  ct_tensor *v = ct_tensor_view(a, CT_SHAPE(3, 2));
  CHECK(v && v->data == a->data && v->shape[0] == 3, "view shares data");
  ct_tensor *row = ct_tensor_slice0(a, 1, 1);
  CHECK(row && ct_f32(row)[0] == 4.0f && row->shape[0] == 1 && row->numel == 3,
        "slice0 row 1");
  ct_f32(row)[0] = 40.0f;
  CHECK(ct_f32(a)[3] == 40.0f, "slice0 is a view");
  ct_tensor *c = ct_tensor_copy(a);
  ct_f32(c)[0] = -1.0f;
  CHECK(ct_f32(a)[0] == 1.0f, "copy does not alias");

  // Random fills are reproducible from the generator state.
  ct_rng g1 = ct_rng_make(5, 0), g2 = ct_rng_make(5, 0);
  ct_tensor *n1 = ct_tensor_randn(&g1, 0.0f, 1.0f, CT_SHAPE(10));
  ct_tensor *n2 = ct_tensor_randn(&g2, 0.0f, 1.0f, CT_SHAPE(10));
  CHECK(memcmp(n1->data, n2->data, 40) == 0, "randn reproducible");
  ct_tensor *u = ct_tensor_rand(&g1, 2.0f, 3.0f, CT_SHAPE(100));
  float lo = 9, hi = -9;
  for (int i = 0; i < 100; i++) {
    lo = fminf(lo, ct_f32(u)[i]);
    hi = fmaxf(hi, ct_f32(u)[i]);
  }
  CHECK(lo >= 2.0f && hi < 3.0f, "rand range [%g, %g]", lo, hi);

  // Bad shapes: clear errors, no crash.
  ct_clear_error();
  CHECK(ct_tensor_zeros(CT_F32, CT_SHAPE(1, 2, 3, 4, 5, 6)) == NULL, "6 dims");
  CHECK(
      ct_last_status() == CT_ERR_SHAPE && strstr(ct_last_error(), "at most 5"),
      "6-dim message '%s'", ct_last_error());
  CHECK(ct_tensor_zeros(CT_F32, CT_SHAPE(2, -1)) == NULL, "negative dim");
  CHECK(strstr(ct_last_error(), "invalid shape [2, -1]"), "message '%s'",
        ct_last_error());
  CHECK(ct_tensor_view(a, CT_SHAPE(4, 2)) == NULL, "view of wrong size");
  CHECK(ct_last_status() == CT_ERR_SHAPE &&
            strstr(ct_last_error(), "cannot view [2, 3]"),
        "view message '%s'", ct_last_error());
  CHECK(ct_tensor_slice0(a, 1, 2) == NULL, "slice past the end");
  CHECK(ct_last_status() == CT_ERR_INDEX, "slice status %d", ct_last_status());
  CHECK(ct_tensor_slice0(s, 0, 1) == NULL, "slice of a scalar");
  CHECK(ct_tensor_view(NULL, CT_SHAPE(1)) == NULL, "NULL propagates");

  char buf[64];
  CHECK(strcmp(ct_shape_str(CT_SHAPE(2, 3), buf, sizeof buf), "[2, 3]") == 0,
        "shape_str '%s'", buf);
  FILE *devnull = fopen("/dev/null", "w");
  ct_tensor_print(a, "a", 4, devnull);
  ct_tensor_print(NULL, "null", 4, devnull);
  fclose(devnull);

  ct_arena_release();
  return test_summary("tensor");
}
