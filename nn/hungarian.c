// Linear sum assignment (shortest augmenting paths) and DETR's matching cost
// (see hungarian.h).
#include "nn/hungarian.h"

#include "autograd/ops_box.h"
#include "autograd/tape.h"
#include "core/arena.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

// ---- the solver -----------------------------------------------------------------
// Crouse 2016, Algorithm 1, on a wide matrix (n rows <= m cols). Rows are
// added one at a time; each addition finds, by Dijkstra over reduced costs
// c[i][j] - u[i] - v[j] >= 0, the shortest alternating path from the new row
// to a free column, updates the duals u, v so that reduced costs stay
// non-negative and those on the matching stay 0, and flips the path. After
// row k the matching of rows 0..k is optimal for them, so the final one is
// optimal. O(n^2 m).

typedef struct lsap_work {
  int n, m;         // rows, cols (n <= m)
  const double *c;  // (n, m)
  double *u, *v;    // (n), (m) dual variables
  double *dist;     // (m) shortest path length to each column
  int *path;        // (m) the row each column was reached from
  int *col4row, *row4col;
  bool *sr, *sc;   // rows / columns visited by the current search
  int *remaining;  // (m) columns not yet visited
} lsap_work;

// Shortest augmenting path from row `i`; returns its free end column, or -1
// when every remaining column is unreachable (only on overflow: the costs are
// finite). *min_val is the path's length.
static int augmenting_path(lsap_work *w, int i, double *min_val) {
  const int m = w->m;
  double lowest_so_far = 0.0;
  // Columns scanned from the last to the first (scipy's order): with all
  // costs equal, row k then takes column k.
  int n_rem = m;
  for (int it = 0; it < m; it++) w->remaining[it] = m - 1 - it;
  memset(w->sr, 0, (size_t)w->n * sizeof *w->sr);
  memset(w->sc, 0, (size_t)m * sizeof *w->sc);
  for (int j = 0; j < m; j++) w->dist[j] = INFINITY;

  int sink = -1;
  while (sink < 0) {
    int index = -1;
    double lowest = INFINITY;
    w->sr[i] = true;
    const double *ci = w->c + (size_t)i * m;
    for (int it = 0; it < n_rem; it++) {
      int j = w->remaining[it];
      double r = lowest_so_far + ci[j] - w->u[i] - w->v[j];
      if (r < w->dist[j]) {
        w->path[j] = i;
        w->dist[j] = r;
      }
      // On a tie prefer a free column: it ends the search (this matters for
      // integer costs, where ties are common).
      if (w->dist[j] < lowest || (w->dist[j] == lowest && w->row4col[j] < 0)) {
        lowest = w->dist[j];
        index = it;
      }
    }
    if (index < 0 || !isfinite(lowest)) return -1;
    lowest_so_far = lowest;
    int j = w->remaining[index];
    if (w->row4col[j] < 0)
      sink = j;
    else
      i = w->row4col[j];
    w->sc[j] = true;
    w->remaining[index] = w->remaining[--n_rem];
  }
  *min_val = lowest_so_far;
  return sink;
}

// Solves the wide problem c (n, m), n <= m; fills col4row (n) and row4col (m).
static ct_status lsap_wide(lsap_work *w) {
  for (int i = 0; i < w->n; i++) w->u[i] = 0.0, w->col4row[i] = -1;
  for (int j = 0; j < w->m; j++) w->v[j] = 0.0, w->row4col[j] = -1;
  for (int row = 0; row < w->n; row++) {
    double min_val = 0.0;
    int sink = augmenting_path(w, row, &min_val);
    if (sink < 0)
      return ct_error(CT_ERR_NUMERIC,
                      "linear_assignment: the dual variables "
                      "overflowed while adding row %d (costs too large in "
                      "magnitude?)",
                      row);
    // Dual update (Crouse eq. 13-14).
    w->u[row] += min_val;
    for (int i = 0; i < w->n; i++)
      if (w->sr[i] && i != row) w->u[i] += min_val - w->dist[w->col4row[i]];
    for (int j = 0; j < w->m; j++)
      if (w->sc[j]) w->v[j] -= min_val - w->dist[j];
    // Flip the alternating path back from the sink to the new row.
    for (int j = sink;;) {
      int i = w->path[j];
      w->row4col[j] = i;
      int prev = w->col4row[i];
      w->col4row[i] = j;
      j = prev;
      if (i == row) break;
    }
  }
  return CT_OK;
}

static void *scratch(size_t count, size_t size, bool *ok) {
  void *p = ct_arena_alloc((count ? count : 1) * size);
  if (!p) *ok = false;
  return p;
}

ct_status ct_nn_linear_assignment(const double *cost, int rows, int cols,
                                  int *row_to_col, int *col_to_row,
                                  double *total) {
  if (rows < 0 || cols < 0)
    return ct_error(CT_ERR_ARG,
                    "linear_assignment: rows %d and cols %d must "
                    "not be negative",
                    rows, cols);
  if (!cost && rows > 0 && cols > 0)
    return ct_error(CT_ERR_ARG,
                    "linear_assignment: cost is NULL for a "
                    "%d x %d problem",
                    rows, cols);
  if (row_to_col)
    for (int r = 0; r < rows; r++) row_to_col[r] = -1;
  if (col_to_row)
    for (int c = 0; c < cols; c++) col_to_row[c] = -1;
  if (total) *total = 0.0;
  if (rows == 0 || cols == 0) return CT_OK;
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      double x = cost[(size_t)r * cols + c];
      if (!isfinite(x))
        return ct_error(CT_ERR_NUMERIC,
                        "linear_assignment: cost[%d][%d] is "
                        "%g; costs must be finite",
                        r, c, x);
    }

  // A tall matrix is solved transposed, so that rows <= cols.
  const bool tall = rows > cols;
  ct_arena_mark mark = ct_arena_get_mark();
  bool ok = true;
  lsap_work w = {.n = tall ? cols : rows, .m = tall ? rows : cols, .c = cost};
  if (tall) {
    double *t = scratch((size_t)rows * cols, sizeof *t, &ok);
    if (t)
      for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
          t[(size_t)c * rows + r] = cost[(size_t)r * cols + c];
    w.c = t;
  }
  w.u = scratch((size_t)w.n, sizeof *w.u, &ok);
  w.v = scratch((size_t)w.m, sizeof *w.v, &ok);
  w.dist = scratch((size_t)w.m, sizeof *w.dist, &ok);
  w.path = scratch((size_t)w.m, sizeof *w.path, &ok);
  w.col4row = scratch((size_t)w.n, sizeof *w.col4row, &ok);
  w.row4col = scratch((size_t)w.m, sizeof *w.row4col, &ok);
  w.sr = scratch((size_t)w.n, sizeof *w.sr, &ok);
  w.sc = scratch((size_t)w.m, sizeof *w.sc, &ok);
  w.remaining = scratch((size_t)w.m, sizeof *w.remaining, &ok);
  ct_status st = ok ? lsap_wide(&w) : CT_ERR_NOMEM;

  if (st == CT_OK) {
    // Row r of the original is column r of the transposed problem.
    double sum = 0.0;
    for (int r = 0; r < rows; r++) {
      int c = tall ? w.row4col[r] : w.col4row[r];
      if (c < 0) continue;
      if (row_to_col) row_to_col[r] = c;
      if (col_to_row) col_to_row[c] = r;
      sum += cost[(size_t)r * cols + c];
    }
    if (total) *total = sum;
  }
  ct_arena_rewind(mark);
  return st;
}

// ---- DETR's matching cost -----------------------------------------------------------

ct_nn_detr_cost_weights ct_nn_detr_cost_defaults(void) {
  return (ct_nn_detr_cost_weights){.class_w = 1.0, .l1_w = 5.0, .giou_w = 2.0};
}

static bool check_2d(const ct_tensor *t, ct_dtype dtype, int64_t cols,
                     const char *what) {
  if (t->dtype == dtype && t->ndim == 2 && (cols < 0 || t->shape[1] == cols))
    return true;
  char want[32];
  if (cols < 0)
    snprintf(want, sizeof want, "(rows, cols)");
  else
    snprintf(want, sizeof want, "(rows, %lld)", (long long)cols);
  char got[96];
  ct_error(CT_ERR_SHAPE, "detr_match: %s must be %s %s, got %s %s", what,
           ct_dtype_name(dtype), want, ct_dtype_name(t->dtype),
           ct_shape_str(t->ndim, t->shape, got, sizeof got));
  return false;
}

// cxcywh boxes (n, 4) need w >= 0 and h >= 0.
static bool check_sizes(const ct_tensor *boxes, const char *what) {
  const float *d = ct_f32(boxes);
  for (int64_t i = 0; i < boxes->shape[0]; i++) {
    if (d[4 * i + 2] < 0.0f || d[4 * i + 3] < 0.0f) {
      ct_error(CT_ERR_ARG,
               "detr_match: %s row %lld has width %g, height %g; "
               "cxcywh boxes need both >= 0",
               what, (long long)i, (double)d[4 * i + 2], (double)d[4 * i + 3]);
      return false;
    }
  }
  return true;
}

static bool check_match_args(const ct_tensor *probs, const ct_tensor *pred,
                             const ct_tensor *labels, const ct_tensor *target) {
  if (!check_2d(probs, CT_F32, -1, "probs") ||
      !check_2d(pred, CT_F32, 4, "pred_boxes") ||
      !check_2d(target, CT_F32, 4, "target_boxes"))
    return false;
  char b1[96], b2[96];
  if (pred->shape[0] != probs->shape[0]) {
    ct_error(CT_ERR_SHAPE,
             "detr_match: probs %s and pred_boxes %s must have "
             "one row per query",
             ct_shape_str(probs->ndim, probs->shape, b1, sizeof b1),
             ct_shape_str(pred->ndim, pred->shape, b2, sizeof b2));
    return false;
  }
  if (labels->dtype != CT_I32 || labels->ndim != 1 ||
      labels->shape[0] != target->shape[0]) {
    ct_error(CT_ERR_SHAPE,
             "detr_match: labels must be i32 (T) for "
             "target_boxes %s, got %s %s",
             ct_shape_str(target->ndim, target->shape, b1, sizeof b1),
             ct_dtype_name(labels->dtype),
             ct_shape_str(labels->ndim, labels->shape, b2, sizeof b2));
    return false;
  }
  const int64_t classes = probs->shape[1];
  for (int64_t t = 0; t < labels->shape[0]; t++) {
    int32_t l = ct_i32(labels)[t];
    if (l < 0 || l >= classes) {
      ct_error(CT_ERR_INDEX,
               "detr_match: label %d of target %lld is outside "
               "the %lld classes of probs",
               (int)l, (long long)t, (long long)classes);
      return false;
    }
  }
  if (probs->shape[0] > INT32_MAX / 2 || target->shape[0] > INT32_MAX / 2) {
    ct_error(CT_ERR_ARG, "detr_match: too many queries or targets");
    return false;
  }
  return check_sizes(pred, "pred_boxes") && check_sizes(target, "target_boxes");
}

// cost (Q, T) as in hungarian.h, into arena memory.
static double *match_cost(ct_tensor *probs, ct_tensor *pred, ct_tensor *labels,
                          ct_tensor *target, const ct_nn_detr_cost_weights *w) {
  const int64_t Q = pred->shape[0], T = target->shape[0], K1 = probs->shape[1];
  ct_tensor *giou = ct_generalized_box_iou(ct_box_cxcywh_to_xyxy(pred),
                                           ct_box_cxcywh_to_xyxy(target));
  double *cost = ct_arena_alloc((size_t)(Q * T > 0 ? Q * T : 1) * sizeof *cost);
  if (!giou || !cost) return NULL;
  const float *p = ct_f32(probs), *pb = ct_f32(pred), *tb = ct_f32(target);
  const int32_t *lab = ct_i32(labels);
  for (int64_t q = 0; q < Q; q++)
    for (int64_t t = 0; t < T; t++) {
      double l1 = 0.0;
      for (int k = 0; k < 4; k++)
        l1 += fabs((double)pb[4 * q + k] - tb[4 * t + k]);
      const double prob = p[q * K1 + lab[t]];
      double cls = -prob;
      if (w->focal) {
        const double a = w->focal_alpha, g = w->focal_gamma;
        cls = a * pow(1.0 - prob, g) * -log(prob + 1e-8) -
              (1.0 - a) * pow(prob, g) * -log(1.0 - prob + 1e-8);
      }
      cost[q * T + t] =
          w->class_w * cls + w->l1_w * l1 - w->giou_w * ct_f32(giou)[q * T + t];
    }
  return cost;
}

ct_status ct_nn_detr_match(ct_tensor *probs, ct_tensor *pred_boxes,
                           ct_tensor *labels, ct_tensor *target_boxes,
                           const ct_nn_detr_cost_weights *weights,
                           int *target_to_query, int *query_to_target) {
  if (!probs || !pred_boxes || !labels || !target_boxes)
    return ct_last_status() != CT_OK
               ? ct_last_status()
               : ct_error(CT_ERR_ARG, "detr_match: an input is NULL");
  if (!check_match_args(probs, pred_boxes, labels, target_boxes))
    return ct_last_status();
  ct_nn_detr_cost_weights w = weights ? *weights : ct_nn_detr_cost_defaults();
  const int Q = (int)pred_boxes->shape[0], T = (int)target_boxes->shape[0];

  // The matching is not differentiated: nothing here goes on the tape.
  bool was = ct_grad_set_enabled(false);
  ct_arena_mark mark = ct_arena_get_mark();
  double *cost = match_cost(probs, pred_boxes, labels, target_boxes, &w);
  ct_status st = cost ? ct_nn_linear_assignment(cost, Q, T, query_to_target,
                                                target_to_query, NULL)
                      : ct_last_status();
  if (st == CT_ERR_NUMERIC && cost) {
    // Name the pair in the matcher's terms: rows are queries, cols targets.
    for (int64_t i = 0; i < (int64_t)Q * T; i++) {
      if (isfinite(cost[i])) continue;
      ct_error(CT_ERR_NUMERIC,
               "detr_match: the cost of query %lld and target "
               "%lld is %g (non-finite probabilities or boxes?)",
               (long long)(i / T), (long long)(i % T), cost[i]);
      break;
    }
  }
  ct_arena_rewind(mark);
  ct_grad_set_enabled(was);
  return st;
}
