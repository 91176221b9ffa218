// The linear sum assignment solver and DETR's matcher (nn/hungarian.c).
//
// The solver is compared with brute force (every injective map of the
// smaller side into the larger) on many small random matrices, square and
// rectangular both ways, with integer costs full of ties and with float
// costs; a 200 x 300 case must be fast and no worse than greedy. The matcher
// is checked on a hand-built image where the right matching is obvious.
#include "autograd/ops_box.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/rng.h"
#include "nn/hungarian.h"
#include "tests/harness.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SMALL_MAX = 6 };

static ct_rng rng = {.seed = 8, .stream = 31, .offset = 0};

// ---- brute force --------------------------------------------------------------------

typedef struct brute {
  const double *cost;
  int rows, cols;
  bool tall;  // assign columns to rows instead
  bool used[SMALL_MAX];
  double best;
} brute;

// cost of assigning the k-th item of the smaller side to j of the larger.
static double brute_cost(const brute *b, int k, int j) {
  return b->tall ? b->cost[j * b->cols + k] : b->cost[k * b->cols + j];
}

static void brute_search(brute *b, int k, double sum) {
  int small = b->tall ? b->cols : b->rows, large = b->tall ? b->rows : b->cols;
  if (k == small) {
    if (sum < b->best) b->best = sum;
    return;
  }
  for (int j = 0; j < large; j++) {
    if (b->used[j]) continue;
    b->used[j] = true;
    brute_search(b, k + 1, sum + brute_cost(b, k, j));
    b->used[j] = false;
  }
}

// The optimal total, summing each map in the order of the smaller side.
static double brute_best(const double *cost, int rows, int cols) {
  brute b = {.cost = cost,
             .rows = rows,
             .cols = cols,
             .tall = rows > cols,
             .best = INFINITY};
  brute_search(&b, 0, 0.0);
  return b.best;
}

// A valid matching of min(rows, cols) pairs whose two views agree and whose
// cost is `total`. Returns false (with checks recorded) otherwise.
static bool check_matching(const char *what, const double *cost, int rows,
                           int cols, const int *r2c, const int *c2r,
                           double total) {
  int pairs = 0;
  bool ok = true;
  double sum = 0.0;
  for (int r = 0; r < rows; r++) {
    int c = r2c[r];
    if (c < 0) continue;
    pairs++;
    ok &= c < cols && c2r[c] == r;
    if (c < cols) sum += cost[r * cols + c];
  }
  for (int c = 0; c < cols; c++)
    ok &= c2r[c] == -1 || (c2r[c] >= 0 && c2r[c] < rows && r2c[c2r[c]] == c);
  int want = rows < cols ? rows : cols;
  CHECK(ok && pairs == want, "%s: not a matching of %d pairs (%d pairs)", what,
        want, pairs);
  CHECK(fabs(sum - total) <= 1e-9 * fmax(1.0, fabs(sum)),
        "%s: total %.17g but the pairs sum to %.17g", what, total, sum);
  return ok && pairs == want;
}

static void random_costs(double *cost, int n, bool integer, bool negative) {
  for (int i = 0; i < n; i++) {
    if (integer)
      cost[i] = (double)ct_rng_next_below(&rng, 4);  // many ties
    else
      cost[i] = ct_rng_next_double(&rng);
    if (negative) cost[i] = 2.0 * cost[i] - 3.0;
  }
}

static void test_brute_force(void) {
  double cost[SMALL_MAX * SMALL_MAX];
  int r2c[SMALL_MAX], c2r[SMALL_MAX];
  int cases = 0, wrong = 0;
  double worst = 0.0;
  for (int rows = 1; rows <= SMALL_MAX; rows++)
    for (int cols = 1; cols <= SMALL_MAX; cols++)
      for (int trial = 0; trial < 24; trial++) {
        bool integer = trial % 2 == 0, negative = trial % 3 == 0;
        random_costs(cost, rows * cols, integer, negative);
        double total = NAN;
        char what[64];
        snprintf(what, sizeof what, "%dx%d %s trial %d", rows, cols,
                 integer ? "integer" : "float", trial);
        ct_status st =
            ct_nn_linear_assignment(cost, rows, cols, r2c, c2r, &total);
        CHECK(st == CT_OK, "%s: %s", what, ct_last_error());
        if (st != CT_OK) continue;
        check_matching(what, cost, rows, cols, r2c, c2r, total);
        double best = brute_best(cost, rows, cols);
        double err = fabs(total - best);
        worst = fmax(worst, err);
        cases++;
        if (err > 1e-12 * fmax(1.0, fabs(best))) {
          wrong++;
          CHECK(false, "%s: total %.17g, brute force %.17g", what, total, best);
        }
      }
  printf(
      "  brute force: %d cases, %d not optimal, max |total - optimum| "
      "%.2e\n",
      cases, wrong, worst);
}

// Ties: a constant matrix gives the identity (documented order), and a
// repeated call gives the same answer.
static void test_ties(void) {
  double cost[4 * 6];
  int r2c[6], c2r[6];
  for (int i = 0; i < 4 * 6; i++) cost[i] = 7.0;
  CHECK(ct_nn_linear_assignment(cost, 4, 6, r2c, c2r, NULL) == CT_OK, "%s",
        ct_last_error());
  for (int r = 0; r < 4; r++)
    CHECK(r2c[r] == r, "wide: row %d -> %d", r, r2c[r]);
  CHECK(c2r[4] == -1 && c2r[5] == -1, "wide: columns 4, 5 must be free");
  CHECK(ct_nn_linear_assignment(cost, 6, 4, r2c, c2r, NULL) == CT_OK, "%s",
        ct_last_error());
  for (int c = 0; c < 4; c++)
    CHECK(c2r[c] == c, "tall: col %d -> %d", c, c2r[c]);
  CHECK(r2c[4] == -1 && r2c[5] == -1, "tall: rows 4, 5 must be free");

  double m[5 * 5];
  random_costs(m, 25, true, false);
  int a[5], b[5];
  ct_nn_linear_assignment(m, 5, 5, a, NULL, NULL);
  ct_nn_linear_assignment(m, 5, 5, b, NULL, NULL);
  CHECK(memcmp(a, b, sizeof a) == 0, "a repeated call changed the answer");
}

static void test_bad_and_empty(void) {
  double cost[6] = {1, 2, 3, 4, 5, 6};
  int r2c[3] = {9, 9, 9}, c2r[3] = {9, 9, 9};
  double total = 5.0;
  // 0 rows or 0 cols: nothing assigned.
  CHECK(ct_nn_linear_assignment(NULL, 0, 3, r2c, c2r, &total) == CT_OK, "%s",
        ct_last_error());
  CHECK(c2r[0] == -1 && c2r[1] == -1 && c2r[2] == -1 && total == 0.0,
        "0 rows: columns must be -1 and total 0");
  CHECK(ct_nn_linear_assignment(cost, 3, 0, r2c, NULL, &total) == CT_OK, "%s",
        ct_last_error());
  CHECK(r2c[0] == -1 && r2c[1] == -1 && r2c[2] == -1, "0 cols: rows -1");
  CHECK(ct_nn_linear_assignment(cost, -1, 3, NULL, NULL, NULL) == CT_ERR_ARG,
        "negative rows");
  CHECK(ct_nn_linear_assignment(NULL, 2, 3, NULL, NULL, NULL) == CT_ERR_ARG,
        "NULL cost");

  const double bad[3] = {NAN, INFINITY, -INFINITY};
  for (int k = 0; k < 3; k++) {
    cost[5] = bad[k];  // row 1, col 2 of a 2 x 3 matrix
    ct_status st = ct_nn_linear_assignment(cost, 2, 3, r2c, c2r, &total);
    CHECK(st == CT_ERR_NUMERIC, "%g: status %d", bad[k], (int)st);
    CHECK(strstr(ct_last_error(), "cost[1][2]") != NULL,
          "%g: the message should name the entry: %s", bad[k], ct_last_error());
    CHECK(r2c[0] == -1 && r2c[1] == -1, "%g: nothing must be assigned", bad[k]);
    // Transposed (tall) too: the entry is then row 2, col 1.
    double t[6] = {1, 4, 2, 5, 3, bad[k]};
    CHECK(
        ct_nn_linear_assignment(t, 3, 2, NULL, NULL, NULL) == CT_ERR_NUMERIC &&
            strstr(ct_last_error(), "cost[2][1]") != NULL,
        "tall %g: %s", bad[k], ct_last_error());
  }
  cost[5] = NAN;
  ct_nn_linear_assignment(cost, 2, 3, NULL, NULL, NULL);
  printf("  NaN cost: %s\n", ct_last_error());
}

// Row by row, the cheapest free column.
static double greedy_total(const double *cost, int rows, int cols) {
  bool *used = calloc((size_t)cols, 1);
  double sum = 0.0;
  for (int r = 0; r < rows; r++) {
    int best = -1;
    for (int c = 0; c < cols; c++)
      if (!used[c] && (best < 0 || cost[r * cols + c] < cost[r * cols + best]))
        best = c;
    if (best < 0) break;
    used[best] = true;
    sum += cost[r * cols + best];
  }
  free(used);
  return sum;
}

static void test_large(void) {
  enum { R = 200, C = 300 };
  double *cost = malloc(sizeof(double) * R * C);
  double *tr = malloc(sizeof(double) * R * C);
  int *r2c = malloc(sizeof(int) * C), *c2r = malloc(sizeof(int) * C);
  random_costs(cost, R * C, false, false);
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) tr[c * R + r] = cost[r * C + c];

  size_t used_before = ct_arena_used_bytes();
  double total = NAN, total_t = NAN;
  clock_t t0 = clock();
  CHECK(ct_nn_linear_assignment(cost, R, C, r2c, c2r, &total) == CT_OK, "%s",
        ct_last_error());
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  check_matching("200x300", cost, R, C, r2c, c2r, total);
  CHECK(ct_nn_linear_assignment(tr, C, R, c2r, r2c, &total_t) == CT_OK, "%s",
        ct_last_error());
  check_matching("300x200", tr, C, R, c2r, r2c, total_t);
  double greedy = greedy_total(cost, R, C);
  printf("  200x300: total %.6f, transposed %.6f, greedy %.6f, %.3f s\n", total,
         total_t, greedy, secs);
  CHECK(total <= greedy, "optimal %.9g above greedy %.9g", total, greedy);
  CHECK(fabs(total - total_t) <= 1e-9,
        "transposing changed the optimum: "
        "%.17g vs %.17g",
        total, total_t);
  CHECK(secs < 2.0, "200x300 took %.3f s", secs);
  CHECK(ct_arena_used_bytes() == used_before,
        "the solver must give its scratch memory back");
  free(cost);
  free(tr);
  free(r2c);
  free(c2r);
}

// ---- DETR's matcher -------------------------------------------------------------------

static ct_tensor *f32(const float *v, int64_t rows, int64_t cols) {
  return ct_tensor_from(CT_F32, v, CT_SHAPE(rows, cols));
}

static void test_detr_match(void) {
  // K = 2 classes plus "no object"; Q = 4 queries, T = 2 targets.
  const float probs[4 * 3] = {
      0.10f, 0.80f, 0.10f,  // q0: class 1, near target 1
      0.05f, 0.05f, 0.90f,  // q1: no object
      0.85f, 0.05f, 0.10f,  // q2: class 0, near target 0
      0.30f, 0.30f, 0.40f,  // q3: unsure, far from both
  };
  const float pred[4 * 4] = {
      0.74f, 0.76f, 0.31f, 0.29f, 0.50f, 0.50f, 0.10f, 0.10f,
      0.26f, 0.24f, 0.20f, 0.21f, 0.10f, 0.90f, 0.05f, 0.05f,
  };
  const float tgt[2 * 4] = {
      0.25f, 0.25f, 0.20f, 0.20f, 0.75f, 0.75f, 0.30f, 0.30f,
  };
  const int32_t lab[2] = {0, 1};
  ct_tensor *p = f32(probs, 4, 3), *pb = f32(pred, 4, 4), *tb = f32(tgt, 2, 4);
  ct_tensor *l = ct_tensor_from(CT_I32, lab, CT_SHAPE(2));
  int t2q[2] = {-9, -9}, q2t[4] = {-9, -9, -9, -9};
  ct_status st = ct_nn_detr_match(p, pb, l, tb, NULL, t2q, q2t);
  CHECK(st == CT_OK, "detr_match: %s", ct_last_error());
  CHECK(t2q[0] == 2 && t2q[1] == 0, "targets -> queries %d %d, want 2 0",
        t2q[0], t2q[1]);
  CHECK(q2t[0] == 1 && q2t[1] == -1 && q2t[2] == 0 && q2t[3] == -1,
        "queries -> targets %d %d %d %d, want 1 -1 0 -1", q2t[0], q2t[1],
        q2t[2], q2t[3]);

  // Class cost alone: the most confident query per class wins, wherever its
  // box is. q3 leads class 1 after q0 is made unsure.
  float probs2[4 * 3];
  memcpy(probs2, probs, sizeof probs2);
  probs2[1] = 0.2f;
  ct_nn_detr_cost_weights cls_only = {
      .class_w = 1.0, .l1_w = 0.0, .giou_w = 0.0};
  st = ct_nn_detr_match(f32(probs2, 4, 3), pb, l, tb, &cls_only, t2q, NULL);
  CHECK(st == CT_OK && t2q[0] == 2 && t2q[1] == 3,
        "class-only matching: %d %d, want 2 3 (%s)", t2q[0], t2q[1],
        ct_last_error());

  // Recording stays off inside, the arena is given back, the caller's
  // recording state is kept.
  ct_requires_grad(pb);
  size_t used = ct_arena_used_bytes();
  int tape = ct_tape_size();
  ct_nn_detr_match(p, pb, l, tb, NULL, t2q, q2t);
  CHECK(ct_tape_size() == tape && ct_arena_used_bytes() == used &&
            ct_grad_enabled(),
        "detr_match must not record, must give back the arena, and must "
        "restore recording");

  // No targets: every query is "no object".
  ct_tensor *tb0 = ct_tensor_empty(CT_F32, CT_SHAPE(0, 4));
  ct_tensor *l0 = ct_tensor_empty(CT_I32, CT_SHAPE(0));
  CHECK(ct_nn_detr_match(p, pb, l0, tb0, NULL, NULL, q2t) == CT_OK &&
            q2t[0] == -1 && q2t[3] == -1,
        "no targets: %s", ct_last_error());

  // Bad input.
  const int32_t bad_lab[2] = {0, 3};
  CHECK(ct_nn_detr_match(p, pb, ct_tensor_from(CT_I32, bad_lab, CT_SHAPE(2)),
                         tb, NULL, t2q, q2t) == CT_ERR_INDEX,
        "label 3 of 3 classes: %s", ct_last_error());
  printf("  bad label: %s\n", ct_last_error());
  float neg[2 * 4];
  memcpy(neg, tgt, sizeof neg);
  neg[6] = -0.1f;
  CHECK(ct_nn_detr_match(p, pb, l, f32(neg, 2, 4), NULL, t2q, q2t) ==
                CT_ERR_ARG &&
            strstr(ct_last_error(), "target_boxes row 1") != NULL,
        "negative width: %s", ct_last_error());
  float nan_probs[4 * 3];
  memcpy(nan_probs, probs, sizeof nan_probs);
  nan_probs[2 * 3 + 1] = NAN;  // query 2, class 1 = target 1's label
  CHECK(ct_nn_detr_match(f32(nan_probs, 4, 3), pb, l, tb, NULL, t2q, q2t) ==
                CT_ERR_NUMERIC &&
            strstr(ct_last_error(), "query 2 and target 1") != NULL,
        "NaN probability: %s", ct_last_error());
  printf("  NaN probability: %s\n", ct_last_error());
  CHECK(ct_nn_detr_match(p, f32(pred, 2, 4), l, tb, NULL, t2q, q2t) ==
            CT_ERR_SHAPE,
        "4 probs rows, 2 boxes: %s", ct_last_error());
  CHECK(ct_nn_detr_match(p, ct_tensor_empty(CT_F32, CT_SHAPE(4, 3)), l, tb,
                         NULL, t2q, q2t) == CT_ERR_SHAPE,
        "boxes (4, 3): %s", ct_last_error());
  ct_error(CT_ERR_INDEX, "an earlier error");
  CHECK(ct_nn_detr_match(NULL, pb, l, tb, NULL, t2q, q2t) == CT_ERR_INDEX,
        "a NULL input must pass the earlier error through");
  ct_clear_error();
  ct_arena_reset();
}

// The focal class cost (Deformable DETR's matcher) on sigmoid probabilities
// (Q, K): the matcher's choice is the cheapest of all assignments, with the
// cost written out here; and on some draws it differs from the plain
// -p cost's choice, so the flag is honoured.
static void test_detr_match_focal(void) {
  enum { Q = 5, T = 3, K = 3 };
  ct_rng r = {.seed = 7, .stream = 3};
  const ct_nn_detr_cost_weights focal = {.class_w = 2.0,
                                         .l1_w = 5.0,
                                         .giou_w = 2.0,
                                         .focal = true,
                                         .focal_alpha = 0.25,
                                         .focal_gamma = 2.0},
                                plain = {
                                    .class_w = 2.0, .l1_w = 5.0, .giou_w = 2.0};
  int differ = 0;
  for (int trial = 0; trial < 40; trial++) {
    float probs[Q * K], pred[Q * 4], tgt[T * 4];
    int32_t lab[T];
    for (int i = 0; i < Q * K; i++)
      probs[i] = (float)(0.01 + 0.98 * ct_rng_next_double(&r));
    for (int i = 0; i < Q + T; i++) {
      float *b = i < Q ? pred + 4 * i : tgt + 4 * (i - Q);
      b[0] = (float)(0.2 + 0.6 * ct_rng_next_double(&r));
      b[1] = (float)(0.2 + 0.6 * ct_rng_next_double(&r));
      b[2] = (float)(0.1 + 0.3 * ct_rng_next_double(&r));
      b[3] = (float)(0.1 + 0.3 * ct_rng_next_double(&r));
    }
    for (int t = 0; t < T; t++) lab[t] = (int32_t)ct_rng_next_below(&r, K);
    ct_tensor *pb = f32(pred, Q, 4), *tb = f32(tgt, T, 4);
    ct_tensor *giou = ct_generalized_box_iou(ct_box_cxcywh_to_xyxy(pb),
                                             ct_box_cxcywh_to_xyxy(tb));
    double cost[Q][T];
    for (int q = 0; q < Q; q++)
      for (int t = 0; t < T; t++) {
        double p = probs[q * K + lab[t]], l1 = 0;
        for (int k = 0; k < 4; k++)
          l1 += fabs((double)pred[4 * q + k] - tgt[4 * t + k]);
        double pos = 0.25 * (1 - p) * (1 - p) * -log(p + 1e-8);
        double neg = 0.75 * p * p * -log(1 - p + 1e-8);
        cost[q][t] = 2 * (pos - neg) + 5 * l1 - 2 * ct_f32(giou)[q * T + t];
      }
    double best = INFINITY;
    int best_q[T] = {0};
    for (int a = 0; a < Q; a++)
      for (int b = 0; b < Q; b++)
        for (int c = 0; c < Q; c++) {
          if (a == b || b == c || a == c) continue;
          double total = cost[a][0] + cost[b][1] + cost[c][2];
          if (total < best) {
            best = total;
            best_q[0] = a, best_q[1] = b, best_q[2] = c;
          }
        }
    ct_tensor *p = f32(probs, Q, K),
              *l = ct_tensor_from(CT_I32, lab, CT_SHAPE(T));
    int t2q[T], t2q_plain[T];
    CHECK(ct_nn_detr_match(p, pb, l, tb, &focal, t2q, NULL) == CT_OK &&
              ct_nn_detr_match(p, pb, l, tb, &plain, t2q_plain, NULL) == CT_OK,
          "focal match: %s", ct_last_error());
    CHECK(t2q[0] == best_q[0] && t2q[1] == best_q[1] && t2q[2] == best_q[2],
          "trial %d: focal matching %d %d %d, cheapest %d %d %d", trial, t2q[0],
          t2q[1], t2q[2], best_q[0], best_q[1], best_q[2]);
    differ += memcmp(t2q, t2q_plain, sizeof t2q) != 0;
    ct_arena_reset();
  }
  printf("  focal vs plain class cost: %d of 40 matchings differ\n", differ);
  CHECK(differ > 0, "the focal cost never changed a matching");
}

int main(void) {
  test_brute_force();
  test_ties();
  test_bad_and_empty();
  test_large();
  test_detr_match();
  test_detr_match_focal();
  ct_arena_release();
  return test_summary("hungarian");
}
