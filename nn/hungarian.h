// The Hungarian matcher: an exact linear sum assignment solver, and DETR's
// matching cost for one image built on it.
//
// Dimension letters: Q predicted boxes (queries), T target boxes, K object
// classes (K + 1 with DETR's "no object" class last).
//
// Not here: batching over images (call ct_nn_detr_match once per image: targets
// differ in number), maximization (negate the costs), the DETR set loss that
// uses the matches.
#ifndef CT_NN_HUNGARIAN_H
#define CT_NN_HUNGARIAN_H

#include "core/error.h"
#include "core/tensor.h"

// Minimum-cost assignment for a dense cost matrix `cost` (rows, cols),
// row-major: pairs (r, c), each row and each column used at most once,
// exactly min(rows, cols) pairs, minimizing the sum of their costs. The
// exact shortest-augmenting-path algorithm of Jonker and Volgenant in the
// rectangular form of Crouse ("On implementing 2D rectangular assignment
// algorithms", IEEE TAES 2016), as scipy's linear_sum_assignment implements
// it: O(n^2 m) for n = min(rows, cols), m = max(rows, cols). A tall matrix
// (rows > cols) is solved transposed.
//
// Outputs (each may be NULL): row_to_col (rows) and col_to_row (cols) hold the
// partner of each row / column, -1 for the unassigned; total is the sum of the
// chosen costs, added in row order in double.
//
// Ties are broken deterministically (the result depends only on the cost
// values), in scipy's order: the smaller side's items (rows, or the columns
// of a tall matrix) are inserted in index order; within one shortest-path
// search the larger side is scanned from the last index to the first, and an
// item is taken only when strictly closer than the best so far, except that
// a free one wins a tie against an assigned one. So a constant matrix gives
// the identity assignment (row i with column i).
//
// Errors: rows or cols negative, or cost NULL with rows * cols > 0
// (CT_ERR_ARG); a NaN or infinite cost (CT_ERR_NUMERIC, naming its row and
// column; nothing is assigned). rows or cols of 0 give an empty assignment
// (every entry -1, total 0). Scratch memory comes from the step arena and is
// given back before returning.
ct_status ct_nn_linear_assignment(const double *cost, int rows, int cols,
                                  int *row_to_col, int *col_to_row,
                                  double *total);

// The weights of DETR's matching cost; the paper's (and the reference
// code's defaults for the trained models) are class 1, L1 5, GIoU 2.
typedef struct ct_nn_detr_cost_weights {
  double class_w;
  double l1_w;
  double giou_w;
  // The focal class cost (Deformable DETR's matcher): probs are then
  // sigmoid probabilities (Q, K), no "no object" column; see below.
  bool focal;
  double focal_alpha, focal_gamma;  // 0.25, 2 in the reference
} ct_nn_detr_cost_weights;
ct_nn_detr_cost_weights ct_nn_detr_cost_defaults(void);

// DETR's HungarianMatcher (Carion et al. 2020, models/matcher.py) for one
// image: with p = probs (Q, K+1), already softmaxed, pred_boxes (Q, 4) and
// target_boxes (T, 4) normalized (cx, cy, w, h), labels i32 (T) in [0, K+1):
//   cost[q][t] = - class_w * p[q][label_t]
//                + l1_w    * sum_i |pred_boxes[q][i] - target_boxes[t][i]|
//                - giou_w  * GIoU(xyxy(pred_boxes[q]), xyxy(target_boxes[t]))
// (the L1 on cxcywh, the GIoU on corners, as the reference does), then the
// minimum-cost assignment of queries to targets. The reference drops the
// constant 1 of "1 - p" and so do we: it does not change the matching.
// With weights->focal (Deformable DETR, models/matcher.py), probs (Q, K) are
// sigmoid probabilities and the class term is class_w (pos - neg) with, for
// p = p[q][label_t], a = focal_alpha, g = focal_gamma,
//   pos = a (1 - p)^g (-log(p + 1e-8)),  neg = (1 - a) p^g (-log(1 - p + 1e-8)).
//
// Outputs (each may be NULL): target_to_query (T) the query matched to each
// target (every target is matched when T <= Q), query_to_target (Q) the
// target of each query or -1 (no object). weights NULL = defaults. Runs
// without recording (the matching is not differentiated).
//
// Errors, each naming the op: NULL inputs pass an earlier error through; a
// wrong dtype or shape (CT_ERR_SHAPE); a label outside [0, K+1)
// (CT_ERR_INDEX); a box with negative width or height (CT_ERR_ARG, naming the
// tensor and the row); a non-finite cost (CT_ERR_NUMERIC, naming the query
// and the target). T = 0 or Q = 0 give an empty matching.
ct_status ct_nn_detr_match(ct_tensor *probs, ct_tensor *pred_boxes,
                           ct_tensor *labels, ct_tensor *target_boxes,
                           const ct_nn_detr_cost_weights *weights,
                           int *target_to_query, int *query_to_target);

#endif
