// Detection mAP as the COCO evaluation computes it (pycocotools COCOeval,
// iouType "bbox", area range "all", maxDets 100), for DETR's validation.
//
//   ct_map_eval ev;
//   ct_map_eval_init(&ev, K);
//   for each image:
//     ct_map_eval_add_image(&ev, dets, n_dets, gts, n_gts);  // xyxy pixels
//   double map50, map;
//   ct_map_compute(&ev, &map50, &map);   // AP@0.5, AP@[.5:.95]
//   ct_map_eval_free(&ev);
//
// Per class k and IoU threshold t (0.50, 0.55, ..., 0.95, computed as
// numpy.linspace does):
//   1. In each image, k's detections sorted by score, highest first (ties
//      keep the order given), the first 100 kept. Each in turn takes the
//      ground-truth box of class k with the highest IoU >= t among those not
//      yet taken in that image (a later box wins an IoU tie, as in COCOeval);
//      none: a false positive. So a duplicate of a found object is a false
//      positive.
//   2. All images' kept detections of k sorted by score (ties: image order,
//      then the order within the image); cumulative TP and FP give recall
//      TP / G (G: k's ground-truth boxes) and precision TP / (TP + FP + eps).
//   3. The precision envelope (each precision raised to the best at any
//      higher recall), read at the 101 recall thresholds 0, 0.01, ..., 1 (the
//      first detection whose recall reaches the threshold; 0 past the last);
//      AP is their mean.
// Classes without ground truth are left out (their detections are not
// counted anywhere), as COCO does. mAP@0.5 is the mean AP over classes at
// t = 0.5; mAP@[.5:.95] the mean over classes and the ten thresholds.
// Values agree with pycocotools up to rounding in the last place.
//
// Area ranges (COCO's AP_S, AP_M, AP_L): with a range [lo, hi] of box
// areas (w h, both ends inside), ground-truth boxes outside it are ignored
// (not counted in G; a detection matching one is neither a true nor a false
// positive), and so are unmatched detections outside it, as COCOeval does
// (areaRng). COCO's ranges are absolute: small <= 32^2, medium 32^2..96^2,
// large >= 96^2 square pixels, for images of about 640 x 480;
// ct_map_area_range scales them with the image's area (a 64 x 64 image:
// small <= 13.7 px^2, about 3.7 px square, large >= 122.9 px^2, about 11.1
// px square), so that a class of object covers the same share of the image
// as in COCO.
//
// Not here: crowd boxes, other maxDets, recall figures, NMS (DETR needs
// none).
#ifndef CT_TRAIN_DETECTION_EVAL_H
#define CT_TRAIN_DETECTION_EVAL_H

#include <stdint.h>

#include "core/error.h"

enum {
  CT_MAP_IOU_THRESHOLDS = 10,  // 0.50:0.05:0.95
  CT_MAP_RECALL_POINTS = 101,  // 0:0.01:1
  CT_MAP_MAX_DETS = 100        // per image and class
};

// One box: label in [0, K), score (detections only; ignored for ground
// truth), corners (x0, y0, x1, y1) with x0 <= x1, y0 <= y1, in any unit as
// long as detections and ground truth share it (e.g. the image's pixels:
// data/detection.h converts both).
typedef struct ct_map_box {
  int32_t label;
  float score;
  float box[4];
} ct_map_box;

// A score with its position, for sorting by score, highest first, ties by
// the lower position (which makes qsort stable, as numpy's mergesort is):
// qsort(a, n, sizeof *a, ct_scored_cmp).
typedef struct ct_scored {
  float score;
  int64_t pos;
} ct_scored;
int ct_scored_cmp(const void *a, const void *b);

// A box with the index of its image (in the order added).
typedef struct ct_map_entry {
  ct_map_box b;
  int64_t image;
} ct_map_entry;

// Accumulates images: ct_map_eval_init, then add; the fields are private.
typedef struct ct_map_eval {
  int K;
  int64_t images;
  ct_map_entry *dets, *gts;  // all images', in the order added
  int64_t n_dets, n_gts, dets_cap, gts_cap;
} ct_map_eval;

// The area ranges (see above), and the image area COCO's are meant for.
typedef enum ct_map_area {
  CT_MAP_AREA_ALL,
  CT_MAP_AREA_SMALL,
  CT_MAP_AREA_MEDIUM,
  CT_MAP_AREA_LARGE,
  CT_MAP_AREAS
} ct_map_area;
#define CT_MAP_COCO_IMAGE_AREA (640.0 * 480.0)

// range = COCO's [lo, hi] for `area` times image_area /
// CT_MAP_COCO_IMAGE_AREA (the upper ends of "all" and "large", 1e10, stay);
// image_area <= 0: COCO's absolute ranges.
void ct_map_area_range(ct_map_area area, double image_area, double range[2]);

// The IoU thresholds, as numpy.linspace(.5, .95, 10) computes them.
double ct_map_iou_threshold(int t);

ct_status ct_map_eval_init(ct_map_eval *ev, int num_classes);
// Adds one image's detections and ground truth (either count may be 0).
// CT_ERR_INDEX for a label outside [0, K), CT_ERR_ARG for a non-finite
// score or coordinate or a box with x1 < x0 or y1 < y0 (naming the entry);
// nothing is added then.
ct_status ct_map_eval_add_image(ct_map_eval *ev, const ct_map_box *dets,
                                int64_t n_dets, const ct_map_box *gts,
                                int64_t n_gts);
// map50: mAP at IoU 0.5; map: mAP@[.5:.95] (either may be NULL). Both are
// -1 (COCO's "no value") when no class has ground truth.
ct_status ct_map_compute(const ct_map_eval *ev, double *map50, double *map);
// The same over the area range `range` (from ct_map_area_range): -1 when no
// class has ground truth inside it.
ct_status ct_map_compute_area(const ct_map_eval *ev, const double range[2],
                              double *map50, double *map);
// The details: ap[t] the mean AP over classes at threshold t
// (CT_MAP_IOU_THRESHOLDS entries, -1 without ground truth), class_ap[k]
// class k's AP averaged over the thresholds (K entries, -1 for a class
// without ground truth). Either may be NULL.
ct_status ct_map_compute_detail(const ct_map_eval *ev, double *ap,
                                double *class_ap);
void ct_map_eval_free(ct_map_eval *ev);

#endif
