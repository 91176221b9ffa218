// Finite-difference gradient checks, forward values and bad-input errors for
// the box ops (autograd/ops_box.c): cxcywh <-> xyxy, GIoU of matched pairs,
// the pairwise GIoU matrix, and the row gather.
//
// GIoU is piecewise smooth: it has kinks where two edges it compares are
// equal and where the intersection side crosses 0. The boxes below keep
// every such pair of coordinates at least 0.05 apart, fifty finite-difference
// steps, so the central differences never straddle a kink.
#include "autograd/ops_box.h"
#include "autograd/ops.h"
#include "core/threads.h"
#include "tests/grad_util.h"

#include <string.h>

enum { OP_TO_XYXY, OP_TO_CXCYWH, OP_GIOU_PAIRS, OP_GIOU_CXCYWH, OP_GATHER };

static ct_tensor *run(ct_tensor *const *in, void *ctx) {
  switch (*(const int *)ctx) {
  case OP_TO_XYXY: return ct_box_cxcywh_to_xyxy(in[0]);
  case OP_TO_CXCYWH: return ct_box_xyxy_to_cxcywh(in[0]);
  case OP_GIOU_PAIRS: return ct_generalized_box_iou_pairs(in[0], in[1]);
  case OP_GIOU_CXCYWH:  // DETR's use: predictions and targets in cxcywh
    return ct_generalized_box_iou_pairs(ct_box_cxcywh_to_xyxy(in[0]),
                                        ct_box_cxcywh_to_xyxy(in[1]));
  case OP_GATHER: return ct_gather_rows(in[0], in[1]);
  }
  return NULL;
}

// GIoU's gradients are O(1) for boxes of side ~0.5; its third derivative
// (the central-difference error) stays below ~1e3 eps^2 for the boxes here.
static ct_gradcheck_opts box_opts(void) {
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.eps = 1e-3;
  o.atol = 2e-4;
  o.rtol = 1e-2;
  return o;
}

static void check(const char *what, int op, ct_tensor *const *in, int n) {
  ct_gradcheck_opts o = box_opts();
  grad_check(what, run, &op, in, n, &o);
}

static ct_tensor *boxes(const float *v, int64_t n, bool grad) {
  ct_tensor *t = ct_tensor_from(CT_F32, v, CT_SHAPE(n, 4));
  return grad ? ct_requires_grad(t) : t;
}

static void test_convert_grads(void) {
  check("cxcywh_to_xyxy (5, 4)", OP_TO_XYXY,
        (ct_tensor *[]){grad_input(CT_SHAPE(5, 4))}, 1);
  check("cxcywh_to_xyxy (2, 3, 4)", OP_TO_XYXY,
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 4))}, 1);
  check("xyxy_to_cxcywh (5, 4)", OP_TO_CXCYWH,
        (ct_tensor *[]){grad_input(CT_SHAPE(5, 4))}, 1);
  check("xyxy_to_cxcywh (4)", OP_TO_CXCYWH,
        (ct_tensor *[]){grad_input(CT_SHAPE(4))}, 1);
}

// Matched pairs (row n of a with row n of b), one of each configuration.
static const float pair_a[6 * 4] = {
    0.10f, 0.20f, 0.60f, 0.70f,  // overlapping corners
    0.00f, 0.00f, 0.20f, 0.30f,  // disjoint in x and y
    0.00f, 0.10f, 0.20f, 0.50f,  // disjoint in x, overlapping in y
    0.10f, 0.10f, 0.90f, 0.80f,  // a contains b
    0.30f, 0.25f, 0.50f, 0.60f,  // b contains a
    0.10f, 0.40f, 0.90f, 0.60f,  // a cross: each sticks out of the other
};
static const float pair_b[6 * 4] = {
    0.30f, 0.35f, 0.90f, 0.80f, 0.50f, 0.60f, 0.90f, 0.80f,
    0.40f, 0.20f, 0.70f, 0.60f, 0.30f, 0.25f, 0.50f, 0.60f,
    0.10f, 0.10f, 0.90f, 0.80f, 0.40f, 0.10f, 0.60f, 0.90f,
};

static void test_giou_grads(void) {
  const char *names[6] = {"overlapping",  "disjoint",     "disjoint in x",
                          "a contains b", "b contains a", "cross"};
  for (int i = 0; i < 6; i++) {
    char what[64];
    snprintf(what, sizeof what, "giou_pairs %s", names[i]);
    check(what, OP_GIOU_PAIRS,
          (ct_tensor *[]){boxes(pair_a + 4 * i, 1, true),
                          boxes(pair_b + 4 * i, 1, true)},
          2);
  }
  check("giou_pairs all six (6, 4)", OP_GIOU_PAIRS,
        (ct_tensor *[]){boxes(pair_a, 6, true), boxes(pair_b, 6, true)}, 2);
  // Only one side requires grad (a target box is a constant).
  check("giou_pairs a only", OP_GIOU_PAIRS,
        (ct_tensor *[]){boxes(pair_a, 6, true), boxes(pair_b, 6, false)}, 2);
  check("giou_pairs b only", OP_GIOU_PAIRS,
        (ct_tensor *[]){boxes(pair_a, 6, false), boxes(pair_b, 6, true)}, 2);
  // DETR's chain: cxcywh predictions and targets -> xyxy -> GIoU.
  const float pred[3 * 4] = {
      0.40f, 0.45f, 0.50f, 0.40f, 0.20f, 0.30f,
      0.20f, 0.30f, 0.55f, 0.50f, 0.30f, 0.60f,
  };
  const float tgt[3 * 4] = {
      0.55f, 0.60f, 0.40f, 0.60f, 0.70f, 0.75f,
      0.30f, 0.20f, 0.45f, 0.55f, 0.60f, 0.20f,
  };
  check("giou_pairs via cxcywh (3, 4)", OP_GIOU_CXCYWH,
        (ct_tensor *[]){boxes(pred, 3, true), boxes(tgt, 3, true)}, 2);
}

static void test_gather_grads(void) {
  const int32_t ids[7] = {4, 1, 4, 0, 4, 2, 1};  // row 3 unused, 4 thrice
  ct_tensor *idx = ct_tensor_from(CT_I32, ids, CT_SHAPE(7));
  check("gather_rows (5, 3) by 7 repeated", OP_GATHER,
        (ct_tensor *[]){grad_input(CT_SHAPE(5, 3)), idx}, 2);

  ct_tensor *x = ct_tensor_arange(CT_F32, 0.0, 1.0, 6);
  x = ct_tensor_view(x, CT_SHAPE(3, 2));
  const int32_t two[2] = {2, 0};
  ct_tensor *y = ct_gather_rows(x, ct_tensor_from(CT_I32, two, CT_SHAPE(2)));
  CHECK(y && y->shape[0] == 2 && y->shape[1] == 2 && ct_f32(y)[0] == 4.0f &&
            ct_f32(y)[1] == 5.0f && ct_f32(y)[2] == 0.0f &&
            ct_f32(y)[3] == 1.0f,
        "gather_rows values");
  ct_tensor *none = ct_gather_rows(x, ct_tensor_empty(CT_I32, CT_SHAPE(0)));
  CHECK(none && none->shape[0] == 0 && none->shape[1] == 2,
        "gather_rows with no indices: %s", ct_last_error());
  ct_arena_reset();
}

// ---- values ---------------------------------------------------------------------------

static double giou1(float ax0, float ay0, float ax1, float ay1, float bx0,
                    float by0, float bx1, float by1) {
  const float a[4] = {ax0, ay0, ax1, ay1}, b[4] = {bx0, by0, bx1, by1};
  ct_tensor *y =
      ct_generalized_box_iou_pairs(boxes(a, 1, false), boxes(b, 1, false));
  return y ? ct_f32(y)[0] : NAN;
}

static void test_giou_values(void) {
  double v;
  v = giou1(0.1f, 0.2f, 0.4f, 0.6f, 0.1f, 0.2f, 0.4f, 0.6f);
  printf("  identical boxes: %.9f\n", v);
  CHECK_CLOSE(v, 1.0, 1e-5, "identical boxes");
  // I = 0, U = 2e-4, C = 1: 0 - (1 - 2e-4) / 1.
  v = giou1(0.0f, 0.0f, 0.01f, 0.01f, 0.99f, 0.99f, 1.0f, 1.0f);
  printf("  small boxes far apart: %.9f\n", v);
  CHECK_CLOSE(v, -0.9998, 1e-6, "disjoint far apart");
  CHECK(v < -0.999, "disjoint far apart must be close to -1: %g", v);
  // I = 1, U = 4 + 4 - 1 = 7, C = 9: 1/7 - 2/9 = -5/63.
  v = giou1(0, 0, 2, 2, 1, 1, 3, 3);
  printf("  overlap (0,0,2,2) (1,1,3,3): %.9f, want %.9f\n", v, -5.0 / 63.0);
  CHECK_CLOSE(v, -5.0 / 63.0, 1e-6, "known overlap");
  // Nested: I = 1, U = C = 16: IoU 1/16 and no enclosure penalty.
  CHECK_CLOSE(giou1(0, 0, 4, 4, 1, 1, 2, 2), 1.0 / 16.0, 1e-6, "nested");
  // Touching edges: I = 0, U = C = 2.
  CHECK_CLOSE(giou1(0, 0, 1, 1, 1, 0, 2, 1), 0.0, 1e-6, "touching");
  // Two zero-area boxes at one point: eps keeps 0/0 away.
  v = giou1(0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f);
  CHECK(isfinite(v), "degenerate boxes must give a finite GIoU, got %g", v);
  v = giou1(0.2f, 0.2f, 0.2f, 0.6f, 0.5f, 0.5f, 0.5f, 0.9f);
  CHECK(isfinite(v) && v >= -1.0 && v <= 1.0,
        "two zero-width boxes: %g must be finite in [-1, 1]", v);

  // The pairwise matrix's diagonal is the pairs op, bit for bit, and
  // ct_box_giou gives the same before rounding to float.
  ct_tensor *a = boxes(pair_a, 6, false), *b = boxes(pair_b, 6, false);
  ct_tensor *m = ct_generalized_box_iou(a, b);
  ct_tensor *d = ct_generalized_box_iou_pairs(a, b);
  CHECK(m && d && m->ndim == 2 && m->shape[0] == 6 && m->shape[1] == 6,
        "pairwise GIoU shape: %s", ct_last_error());
  bool same = m && d;
  for (int i = 0; same && i < 6; i++) {
    same &= ct_f32(m)[i * 6 + i] == ct_f32(d)[i];
    same &= ct_f32(m)[i * 6 + (i + 1) % 6] ==
            (float)ct_box_giou(pair_a + 4 * i, pair_b + 4 * ((i + 1) % 6));
  }
  CHECK(same, "the pairwise matrix must agree with the pairs op");
  CHECK(m && !m->requires_grad, "the pairwise matrix is not differentiable");

  // Box conversions round-trip.
  const float cxcywh[4] = {0.5f, 0.25f, 0.5f, 0.25f};
  ct_tensor *xyxy = ct_box_cxcywh_to_xyxy(boxes(cxcywh, 1, false));
  ct_tensor *back = ct_box_xyxy_to_cxcywh(xyxy);
  const float want[4] = {0.25f, 0.125f, 0.75f, 0.375f};
  CHECK(xyxy && memcmp(ct_f32(xyxy), want, sizeof want) == 0,
        "cxcywh_to_xyxy values");
  CHECK(back && memcmp(ct_f32(back), cxcywh, sizeof cxcywh) == 0,
        "the round trip must give the box back");
  ct_arena_reset();
}

// Identical boxes sit on every kink at once: the gradient, split evenly at
// the ties, is the same for a and b by symmetry, and finite.
static void test_giou_identical_grad(void) {
  const float box[4] = {0.1f, 0.2f, 0.5f, 0.7f};
  ct_tensor *a = boxes(box, 1, true), *b = boxes(box, 1, true);
  ct_tensor *loss = ct_sum(ct_generalized_box_iou_pairs(a, b));
  CHECK(loss && ct_backward(loss) == CT_OK, "%s", ct_last_error());
  bool ok = a->grad && b->grad;
  for (int k = 0; ok && k < 4; k++)
    ok = a->grad[k] == b->grad[k] && isfinite(a->grad[k]);
  CHECK(ok, "identical boxes: a and b must get the same finite gradient");
  ct_arena_reset();
}

static void test_bad_input(void) {
  const float inverted[4] = {0.5f, 0.1f, 0.4f, 0.3f};  // x1 < x0
  ct_tensor *good = boxes(pair_a, 2, false);
  ct_tensor *bad = ct_tensor_from(
      CT_F32, (float[8]){0, 0, 1, 1, 0.5f, 0.1f, 0.4f, 0.3f}, CT_SHAPE(2, 4));
  CHECK(!ct_generalized_box_iou_pairs(good, bad) &&
            ct_last_status() == CT_ERR_ARG &&
            strstr(ct_last_error(), "generalized_box_iou_pairs") &&
            strstr(ct_last_error(), "box 1 of b"),
        "inverted box: %s", ct_last_error());
  printf("  inverted box: %s\n", ct_last_error());
  CHECK(!ct_generalized_box_iou(boxes(inverted, 1, false), good) &&
            ct_last_status() == CT_ERR_ARG,
        "pairwise, inverted box: %s", ct_last_error());
  CHECK(!ct_generalized_box_iou_pairs(good, boxes(pair_b, 3, false)) &&
            ct_last_status() == CT_ERR_SHAPE,
        "2 vs 3 boxes: %s", ct_last_error());
  printf("  2 vs 3 boxes: %s\n", ct_last_error());
  ct_tensor *three = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3));
  CHECK(!ct_box_cxcywh_to_xyxy(three) && ct_last_status() == CT_ERR_SHAPE &&
            strstr(ct_last_error(), "box_cxcywh_to_xyxy"),
        "last dim 3: %s", ct_last_error());
  CHECK(!ct_box_xyxy_to_cxcywh(ct_tensor_zeros(CT_I32, CT_SHAPE(2, 4))) &&
            ct_last_status() == CT_ERR_DTYPE,
        "i32 boxes: %s", ct_last_error());
  CHECK(!ct_generalized_box_iou_pairs(
            ct_tensor_zeros(CT_F32, CT_SHAPE(2, 2, 4)),
            ct_tensor_zeros(CT_F32, CT_SHAPE(2, 2, 4))) &&
            ct_last_status() == CT_ERR_SHAPE,
        "3-D boxes: %s", ct_last_error());

  const int32_t out_of_range[2] = {0, 2};
  CHECK(!ct_gather_rows(good,
                        ct_tensor_from(CT_I32, out_of_range, CT_SHAPE(2))) &&
            ct_last_status() == CT_ERR_INDEX &&
            strstr(ct_last_error(), "gather_rows: idx[1] = 2"),
        "index out of range: %s", ct_last_error());
  printf("  gather index: %s\n", ct_last_error());
  CHECK(!ct_gather_rows(good, ct_tensor_zeros(CT_F32, CT_SHAPE(2))) &&
            ct_last_status() == CT_ERR_DTYPE,
        "f32 indices: %s", ct_last_error());
  CHECK(!ct_gather_rows(good, ct_tensor_zeros(CT_I32, CT_SHAPE(1, 2))) &&
            ct_last_status() == CT_ERR_SHAPE,
        "2-D indices: %s", ct_last_error());

  // NULL passes the earlier error through.
  ct_error(CT_ERR_NOMEM, "earlier");
  CHECK(!ct_box_cxcywh_to_xyxy(NULL) && !ct_box_xyxy_to_cxcywh(NULL) &&
            !ct_generalized_box_iou_pairs(NULL, good) &&
            !ct_generalized_box_iou(good, NULL) &&
            !ct_gather_rows(NULL, NULL) && ct_last_status() == CT_ERR_NOMEM,
        "NULL inputs must keep the earlier error");
  ct_clear_error();
  ct_arena_reset();
}

int main(void) {
  ct_threads_from_env();
  test_convert_grads();
  test_giou_grads();
  test_gather_grads();
  test_giou_values();
  test_giou_identical_grad();
  test_bad_input();
  ct_arena_release();
  return test_summary("grad_box");
}
