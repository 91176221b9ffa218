// The window ops for Swin (autograd/ops_window.c): index arithmetic against
// small cases worked by hand (torch.roll, timm's window_partition,
// PatchMerging, relative_position_index and the shifted-window mask),
// finite-difference gradient checks of each differentiable op, and the
// errors for bad shapes.
#include "autograd/ops.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_window.h"
#include "core/threads.h"
#include "tests/grad_util.h"

#include <stdlib.h>
#include <string.h>

// A (shape) tensor holding 0, 1, 2, ... (exact in float).
static ct_tensor *iota(int ndim, const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(CT_F32, ndim, shape);
  if (!t) return NULL;
  for (int64_t i = 0; i < t->numel; i++) ct_f32(t)[i] = (float)i;
  return t;
}

static void check_values(const char *what, const ct_tensor *got,
                         const float *want, int64_t n) {
  CHECK(got != NULL, "%s: %s", what, ct_last_error());
  if (!got) return;
  CHECK(got->numel == n, "%s: %lld elements, want %lld", what,
        (long long)got->numel, (long long)n);
  if (got->numel != n) return;
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (ct_f32(got)[i] != want[i]) bad = i;
  CHECK(bad < 0, "%s: element %lld is %g, want %g", what, (long long)bad,
        bad < 0 ? 0.0 : (double)ct_f32(got)[bad], bad < 0 ? 0.0 : want[bad]);
}

// ---- forward index arithmetic ------------------------------------------------

static void test_roll_values(void) {
  // x = [[0,1,2],[3,4,5],[6,7,8]]; torch.roll(x, (1, -1), (0, 1)).
  ct_tensor *x = iota(CT_SHAPE(1, 3, 3, 1));
  static const float want[9] = {7, 8, 6, 1, 2, 0, 4, 5, 3};
  check_values("roll (1, -1)", ct_roll2d(x, 1, -1), want, 9);
  // Shifts past the size wrap: (4, 2) on 3x3 is (1, -1).
  check_values("roll (4, 2)", ct_roll2d(x, 4, 2), want, 9);
  // Channels move together: (1, 1, 2, 2), roll (0, 1).
  ct_tensor *y = ct_roll2d(iota(CT_SHAPE(1, 1, 2, 2)), 0, 1);
  static const float want_c[4] = {2, 3, 0, 1};
  check_values("roll with channels", y, want_c, 4);
  ct_arena_reset();
}

static void test_partition_values(void) {
  // 4x4 map 0..15, window 2.
  ct_tensor *x = iota(CT_SHAPE(1, 4, 4, 1));
  static const float plain[16] = {0, 1, 4,  5,  2,  3,  6,  7,
                                  8, 9, 12, 13, 10, 11, 14, 15};
  ct_tensor *p = ct_window_partition(x, 2, 0);
  check_values("partition, no shift", p, plain, 16);
  CHECK(p && p->ndim == 3 && p->shape[0] == 4 && p->shape[1] == 4 &&
            p->shape[2] == 1,
        "partition shape %s", p ? "wrong" : ct_last_error());
  // Shift 1: the map rolled by (-1, -1) is
  // [[5,6,7,4],[9,10,11,8],[13,14,15,12],[1,2,3,0]].
  static const float shifted[16] = {5,  6,  9, 10, 7,  4,  11, 8,
                                    13, 14, 1, 2,  15, 12, 3,  0};
  check_values("partition, shift 1", ct_window_partition(x, 2, 1), shifted, 16);
  // Two images: the second image's windows follow all of the first's.
  ct_tensor *x2 = iota(CT_SHAPE(2, 2, 2, 1));
  static const float two[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  check_values("partition, batch-major", ct_window_partition(x2, 2, 0), two, 8);
  // Reverse undoes partition, for each shift and a non-square map.
  for (int64_t s = 0; s < 3; s++) {
    ct_tensor *m = iota(CT_SHAPE(2, 6, 9, 2));
    ct_tensor *back =
        ct_window_reverse(ct_window_partition(m, 3, s), 3, 6, 9, s);
    check_values("reverse(partition(x))", back, ct_f32(m), m->numel);
    CHECK(back && back->ndim == 4 && back->shape[1] == 6 && back->shape[2] == 9,
          "reverse shape");
  }
  // Windows as wide as the map, unshifted: a view of the map, both ways.
  ct_tensor *rows = iota(CT_SHAPE(2, 6, 3, 2));
  ct_tensor *pv = ct_window_partition(rows, 3, 0);
  CHECK(pv && pv->data == rows->data && pv->shape[0] == 4 && pv->shape[1] == 9,
        "partition of 3-wide windows is not a view: %s", ct_last_error());
  ct_tensor *rv = pv ? ct_window_reverse(pv, 3, 6, 3, 0) : NULL;
  CHECK(rv && rv->data == rows->data && rv->ndim == 4 && rv->shape[1] == 6,
        "reverse of 3-wide windows is not a view");
  // The shifted partition is the roll then the plain partition.
  ct_tensor *m = iota(CT_SHAPE(1, 6, 6, 3));
  ct_tensor *a = ct_window_partition(m, 3, 1);
  ct_tensor *b = ct_window_partition(ct_roll2d(m, -1, -1), 3, 0);
  check_values("partition(shift) = partition(roll)", a, ct_f32(b), b->numel);
  ct_arena_reset();
}

static void test_patch_merge_values(void) {
  // x[0,0] = (0,1), x[0,1] = (2,3), x[1,0] = (4,5), x[1,1] = (6,7):
  // timm concatenates x[0::2,0::2], x[1::2,0::2], x[0::2,1::2], x[1::2,1::2].
  ct_tensor *y = ct_patch_merge(iota(CT_SHAPE(1, 2, 2, 2)));
  static const float want[8] = {0, 1, 4, 5, 2, 3, 6, 7};
  check_values("patch merge 2x2", y, want, 8);
  CHECK(y && y->ndim == 4 && y->shape[1] == 1 && y->shape[2] == 1 &&
            y->shape[3] == 8,
        "patch merge shape");
  // 2x4 map, one channel: output (1, 1, 2, 4).
  static const float wide[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  check_values("patch merge 2x4", ct_patch_merge(iota(CT_SHAPE(1, 2, 4, 1))),
               wide, 8);
  ct_arena_reset();
}

static void test_bias_index(void) {
  // timm's relative_position_index for window 2.
  static const int64_t want[16] = {4, 3, 1, 0, 5, 4, 2, 1,
                                   7, 6, 4, 3, 8, 7, 5, 4};
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      CHECK(ct_relative_position_index(2, i, j) == want[i * 4 + j],
            "index(2, %d, %d) = %lld, want %lld", i, j,
            (long long)ct_relative_position_index(2, i, j),
            (long long)want[i * 4 + j]);
  // Window 3: the token itself is the centre row, 2*5 + 2 = 12; query (0,0)
  // against key (2,2) is (0-2+2)*5 + (0-2+2) = 0; (2,2) against (0,0) is
  // 4*5 + 4 = 24, the last row; (0,2) against (1,0): (-1+2)*5 + (2+2) = 9.
  CHECK(ct_relative_position_index(3, 4, 4) == 12, "centre");
  CHECK(ct_relative_position_index(3, 0, 8) == 0, "first row");
  CHECK(ct_relative_position_index(3, 8, 0) == 24, "last row");
  CHECK(ct_relative_position_index(3, 2, 3) == 9, "(0,2) vs (1,0)");

  // The gather: table[r, h] = 10 r + h -> out[h, i, j] = 10 index + h.
  ct_tensor *t = ct_tensor_empty(CT_F32, CT_SHAPE(9, 2));
  for (int r = 0; r < 9; r++)
    for (int h = 0; h < 2; h++) ct_f32(t)[r * 2 + h] = (float)(10 * r + h);
  float wb[2 * 16];
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < 16; k++) wb[h * 16 + k] = (float)(10 * want[k] + h);
  ct_tensor *b = ct_relative_position_bias(t, 2);
  check_values("bias gather", b, wb, 32);
  CHECK(b && b->ndim == 3 && b->shape[0] == 2 && b->shape[1] == 4 &&
            b->shape[2] == 4,
        "bias shape");
  ct_arena_reset();
}

static void test_shift_mask(void) {
  // 4x4 map, window 2, shift 1: each axis is cut at 2 and 3, so rolled
  // coordinates 0-1, 2, 3 are pieces 0, 1, 2. Region labels per window
  // (tokens row-major): (0,0) all 0; (0,1) 1,2,1,2; (1,0) 3,3,6,6; (1,1)
  // 4,5,7,8.
  static const int labels[4][4] = {
      {0, 0, 0, 0}, {1, 2, 1, 2}, {3, 3, 6, 6}, {4, 5, 7, 8}};
  float want[4 * 16];
  for (int w = 0; w < 4; w++)
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++)
        want[w * 16 + i * 4 + j] =
            labels[w][i] == labels[w][j] ? 0.0f : -100.0f;
  ct_tensor *m = ct_swin_shift_mask(4, 4, 2, 1);
  check_values("shift mask 4x4 window 2", m, want, 64);
  CHECK(m && m->ndim == 3 && m->shape[0] == 4, "mask shape");

  // 6x3 map, window 3, shift 1: windows (0,0) and (1,0). Columns 0-2 of
  // the single window column are pieces 0 (none: 3-3 = 0), 1, 1, 2 -> x
  // pieces 1, 1, 2. Rows 0-2: piece 0; rows 3, 4: piece 1; row 5: piece 2.
  ct_tensor *m2 = ct_swin_shift_mask(6, 3, 3, 1);
  CHECK(m2 && m2->shape[0] == 2, "mask 6x3: %s", ct_last_error());
  if (m2) {
    int lab[2][9];
    for (int w = 0; w < 2; w++)
      for (int t = 0; t < 9; t++) {
        int y = w * 3 + t / 3, x = t % 3;
        int py = y < 3 ? 0 : (y < 5 ? 1 : 2), px = x < 2 ? 1 : 2;
        lab[w][t] = 3 * py + px;
      }
    int bad = 0;
    for (int w = 0; w < 2; w++)
      for (int i = 0; i < 9; i++)
        for (int j = 0; j < 9; j++)
          bad += ct_f32(m2)[(w * 9 + i) * 9 + j] !=
                 (lab[w][i] == lab[w][j] ? 0.0f : -100.0f);
    CHECK(bad == 0, "mask 6x3: %d entries differ", bad);
  }
  ct_arena_reset();
}

// ---- gradient checks -----------------------------------------------------------

enum {
  OP_ROLL,
  OP_PARTITION,
  OP_REVERSE,
  OP_ROUND_TRIP,
  OP_ROLL_ACCUM,
  OP_MERGE,
  OP_BIAS,
  OP_BIAS_ACCUM,
  OP_WINDOW_ATTENTION
};
typedef struct win_case {
  int op;
  int64_t a, b;  // roll shifts; or window and shift
  int64_t H, W;  // reverse, attention: the map
  int64_t NH;    // attention: heads (of 2 channels each)
} win_case;

// Swin's window attention without the linear layers: x (B,H,W,3*NH*2) is
// the qkv map, rolled and cut into windows, attended with the bias from the
// table ((2ws-1)^2, NH) and the shifted-window mask, and put back.
static ct_tensor *window_attention(const win_case *c, ct_tensor *x,
                                   ct_tensor *table) {
  const int64_t ws = c->a, s = c->b, N = ws * ws, Dh = 2;
  ct_tensor *win = ct_window_partition(x, ws, s);
  ct_tensor *qkv = ct_reshape(win, CT_SHAPE(-1, N, 3, c->NH, Dh));
  ct_attention_opts o = ct_attention_defaults();
  o.bias = ct_relative_position_bias(table, ws);
  o.window_mask = s ? ct_swin_shift_mask(c->H, c->W, ws, s) : NULL;
  ct_tensor *y = ct_attention_qkv(qkv, &o);
  return ct_window_reverse(ct_reshape(y, CT_SHAPE(-1, N, c->NH * Dh)), ws, c->H,
                           c->W, s);
}

static ct_tensor *run(ct_tensor *const *in, void *ctx) {
  const win_case *c = ctx;
  switch (c->op) {
  case OP_ROLL: return ct_roll2d(in[0], c->a, c->b);
  case OP_PARTITION: return ct_window_partition(in[0], c->a, c->b);
  case OP_REVERSE: return ct_window_reverse(in[0], c->a, c->H, c->W, c->b);
  case OP_ROUND_TRIP:  // the reverse assigns into a fresh gradient
    return ct_window_reverse(
        ct_mul(ct_window_partition(in[0], c->a, c->b), in[1]), c->a, c->H, c->W,
        c->b);
  case OP_ROLL_ACCUM:  // x's gradient is added to, not assigned
    return ct_add(ct_mul(ct_roll2d(in[0], c->a, c->b), in[0]),
                  ct_roll2d(in[0], -c->b, c->a));
  case OP_MERGE: return ct_patch_merge(in[0]);
  case OP_BIAS: return ct_relative_position_bias(in[0], c->a);
  case OP_BIAS_ACCUM:  // the table twice, and squared: not just a sum
    return ct_mul(ct_relative_position_bias(in[0], c->a),
                  ct_relative_position_bias(in[0], c->a));
  case OP_WINDOW_ATTENTION: return window_attention(c, in[0], in[1]);
  }
  return NULL;
}

static void check(const char *what, win_case c, ct_tensor *const *in, int n) {
  grad_check(what, run, &c, in, n, NULL);
}

static void test_grads(void) {
  check("roll (1, -2) of (2, 3, 4, 5)",
        (win_case){.op = OP_ROLL, .a = 1, .b = -2},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 4, 5))}, 1);
  check("roll (7, 5) of (1, 3, 4, 2)",
        (win_case){.op = OP_ROLL, .a = 7, .b = 5},
        (ct_tensor *[]){grad_input(CT_SHAPE(1, 3, 4, 2))}, 1);
  check("roll used twice", (win_case){.op = OP_ROLL_ACCUM, .a = 1, .b = 2},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 3, 2))}, 1);
  check("partition ws 2 of (2, 4, 6, 3)",
        (win_case){.op = OP_PARTITION, .a = 2, .b = 0},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 4, 6, 3))}, 1);
  check("partition ws 3 shift 1 of (1, 6, 3, 2)",
        (win_case){.op = OP_PARTITION, .a = 3, .b = 1},
        (ct_tensor *[]){grad_input(CT_SHAPE(1, 6, 3, 2))}, 1);
  check("partition (view) ws 3 of (2, 6, 3, 2)",
        (win_case){.op = OP_PARTITION, .a = 3, .b = 0},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 6, 3, 2))}, 1);
  check("partition * w -> reverse (views), one window",
        (win_case){.op = OP_ROUND_TRIP, .a = 3, .b = 0, .H = 3, .W = 3},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 3, 2)),
                        grad_input(CT_SHAPE(2, 9, 2))},
        2);
  check("reverse ws 2 shift 1 to (2, 4, 4, 3)",
        (win_case){.op = OP_REVERSE, .a = 2, .b = 1, .H = 4, .W = 4},
        (ct_tensor *[]){grad_input(CT_SHAPE(8, 4, 3))}, 1);
  check("partition * w -> reverse, shift 2",
        (win_case){.op = OP_ROUND_TRIP, .a = 3, .b = 2, .H = 3, .W = 6},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 3, 6, 2)),
                        grad_input(CT_SHAPE(4, 9, 2))},
        2);
  check("patch merge of (2, 4, 2, 3)", (win_case){.op = OP_MERGE},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 4, 2, 3))}, 1);
  check("bias gather ws 2, 3 heads", (win_case){.op = OP_BIAS, .a = 2},
        (ct_tensor *[]){grad_input(CT_SHAPE(9, 3))}, 1);
  check("bias gather ws 3, 2 heads", (win_case){.op = OP_BIAS, .a = 3},
        (ct_tensor *[]){grad_input(CT_SHAPE(25, 2))}, 1);
  check("bias gather squared ws 3", (win_case){.op = OP_BIAS_ACCUM, .a = 3},
        (ct_tensor *[]){grad_input(CT_SHAPE(25, 2))}, 1);
  // The table's gradient through the fused attention, plain and shifted.
  for (int64_t s = 0; s < 2; s++)
    check(
        s ? "window attention, shifted" : "window attention, plain",
        (win_case){
            .op = OP_WINDOW_ATTENTION, .a = 2, .b = s, .H = 4, .W = 4, .NH = 2},
        (ct_tensor *[]){grad_input(CT_SHAPE(2, 4, 4, 12)),
                        grad_input(CT_SHAPE(9, 2))},
        2);
}

// The bias gather's gradient of a ones seed counts how often each table row
// is used: (ws - |dy|) (ws - |dx|) pairs for offset (dy, dx).
static void test_bias_grad_counts(void) {
  const int64_t ws = 3, R = 2 * ws - 1;
  ct_tensor *t = ct_requires_grad(ct_tensor_zeros(CT_F32, CT_SHAPE(R * R, 1)));
  ct_tensor *y = ct_relative_position_bias(t, ws);
  CHECK(y && ct_backward(ct_sum(y)) == CT_OK, "%s", ct_last_error());
  if (y) {
    int bad = 0;
    for (int64_t r = 0; r < R * R; r++) {
      int64_t dy = r / R - (ws - 1), dx = r % R - (ws - 1);
      float want = (float)((ws - llabs(dy)) * (ws - llabs(dx)));
      bad += t->grad[r] != want;
    }
    CHECK(bad == 0, "bias table gradient counts: %d rows differ", bad);
  }
  ct_arena_reset();
}

static void test_bad_input(void) {
  ct_tensor *x = iota(CT_SHAPE(1, 4, 6, 2));
  CHECK(!ct_window_partition(x, 4, 0) && strstr(ct_last_error(), "window"),
        "window 4 does not divide 6: %s", ct_last_error());
  CHECK(!ct_window_partition(x, 2, 2), "shift 2 with window 2");
  CHECK(!ct_window_partition(x, 0, 0), "window 0");
  CHECK(!ct_window_partition(iota(CT_SHAPE(4, 6, 2)), 2, 0), "a 3-D map: %s",
        ct_last_error());
  CHECK(!ct_window_reverse(iota(CT_SHAPE(5, 4, 2)), 2, 4, 4, 0),
        "5 windows for a map of 4 per image");
  CHECK(!ct_window_reverse(iota(CT_SHAPE(4, 9, 2)), 2, 4, 4, 0),
        "9 tokens for window 2");
  CHECK(!ct_patch_merge(iota(CT_SHAPE(1, 3, 4, 2))) &&
            strstr(ct_last_error(), "even"),
        "odd height: %s", ct_last_error());
  CHECK(!ct_relative_position_bias(iota(CT_SHAPE(8, 2)), 2) &&
            strstr(ct_last_error(), "(9, NH)"),
        "8 table rows for window 2: %s", ct_last_error());
  CHECK(!ct_swin_shift_mask(4, 4, 2, 0), "a mask for shift 0");
  CHECK(!ct_swin_shift_mask(4, 6, 4, 1), "window 4 of a 4x6 map");
  CHECK(!ct_roll2d(NULL, 1, 1), "NULL passes through");
  ct_arena_reset();
}

int main(void) {
  ct_threads_from_env();
  test_roll_values();
  test_partition_values();
  test_patch_merge_values();
  test_bias_index();
  test_shift_mask();
  test_grads();
  test_bias_grad_counts();
  test_bad_input();
  ct_arena_release();
  return test_summary("window");
}
