// Differentiable box ops for detection (DETR): box format conversions, the
// generalized IoU of matched pairs, and a row gather for picking the matched
// queries; plus the pairwise GIoU matrix, without gradient, for the matcher's
// cost (nn/hungarian.h).
//
// Boxes are the last dim of 4: (cx, cy, w, h) "cxcywh", or corners
// (x0, y0, x1, y1) "xyxy" with x0 <= x1 and y0 <= y1. Dimension letters: N
// and M boxes, D row length.
//
// Conventions are those of autograd/ops.h: NULL inputs pass an earlier error
// through, bad arguments return NULL with an error naming the op and the
// shapes, and no result depends on the thread count.
//
// Not here: box IoU without the "generalized" term, NMS, boxes in formats
// other than these two.
#ifndef CT_AUTOGRAD_OPS_BOX_H
#define CT_AUTOGRAD_OPS_BOX_H

#include "core/tensor.h"

// x (..., 4) cxcywh -> (..., 4) xyxy: (cx - w/2, cy - h/2, cx + w/2, cy + h/2).
ct_tensor *ct_box_cxcywh_to_xyxy(ct_tensor *x);
// x (..., 4) xyxy -> (..., 4) cxcywh: ((x0+x1)/2, (y0+y1)/2, x1-x0, y1-y0).
ct_tensor *ct_box_xyxy_to_cxcywh(ct_tensor *x);

// The small constant added to the union and the enclosing area before
// dividing by them, as torchvision's generalized_box_iou_loss does: it keeps
// the GIoU of degenerate (zero-area) boxes finite. For boxes of area A it
// moves the value by about CT_BOX_GIOU_EPS / A.
#define CT_BOX_GIOU_EPS 1e-7

// Generalized IoU (Rezatofighi et al. 2019) of boxes a and b in xyxy:
//   I = area(a & b), U = area(a) + area(b) - I, C = area of the smallest box
//   enclosing both,
//   GIoU = I / (U + eps) - (C - U) / (C + eps)     (eps = CT_BOX_GIOU_EPS)
// in [-1, 1]: 1 for identical boxes, toward -1 for small boxes far apart.
// Computed in double. Boxes with x1 < x0 or y1 < y0 give a meaningless value
// (the ops below reject them).
double ct_box_giou(const float a[4], const float b[4]);

// a (N, 4), b (N, 4) xyxy -> (N): GIoU(a[n], b[n]), the diagonal of DETR's
// generalized_box_iou(a, b), for the GIoU loss of matched pairs. Gradients
// flow to both a and b; where two coordinates compete in a min or max (equal
// edges) the gradient is split evenly between them, as PyTorch's
// maximum/minimum do. A box with x1 < x0 or y1 < y0 is an error (DETR asserts
// the same); NaN coordinates are not checked and give NaN.
ct_tensor *ct_generalized_box_iou_pairs(ct_tensor *a, ct_tensor *b);

// a (N, 4), b (M, 4) xyxy -> (N, M): GIoU of every pair, DETR's
// generalized_box_iou. Not differentiable (no tape node): for matching costs.
// Errors as ct_generalized_box_iou_pairs.
ct_tensor *ct_generalized_box_iou(ct_tensor *a, ct_tensor *b);

// x (N, D), idx i32 (M) -> (M, D): out[m] = x[idx[m]]. Indices may repeat;
// the backward scatter-adds (x.grad[idx[m]] += out.grad[m], in order of m).
// Indices outside [0, N) are an error.
ct_tensor *ct_gather_rows(ct_tensor *x, ct_tensor *idx);

#endif
