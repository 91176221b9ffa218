// COCO-style detection mAP (see detection_eval.h), following pycocotools'
// COCOeval.evaluateImg (matching) and COCOeval.accumulate (precision
// envelope, 101-point interpolation) step by step.
#include "train/detection_eval.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "data/detection.h"
#include "data/strings.h"

// numpy.linspace(start, stop, num): i * ((stop - start) / (num - 1)) + start,
// the last one exactly stop.
static double linspace(double start, double stop, int num, int i) {
  if (i == num - 1) return stop;
  return (double)i * ((stop - start) / (double)(num - 1)) + start;
}

double ct_map_iou_threshold(int t) {
  return linspace(0.5, 0.95, CT_MAP_IOU_THRESHOLDS, t);
}

ct_status ct_map_eval_init(ct_map_eval *ev, int num_classes) {
  *ev = (ct_map_eval){0};
  if (num_classes < 1)
    return ct_error(CT_ERR_ARG, "map eval: %d classes: need at least 1",
                    num_classes);
  ev->K = num_classes;
  return CT_OK;
}

void ct_map_eval_free(ct_map_eval *ev) {
  free(ev->dets);
  free(ev->gts);
  *ev = (ct_map_eval){0};
}

static ct_status check_boxes(const ct_map_eval *ev, const ct_map_box *b,
                             int64_t n, bool scored, const char *what) {
  for (int64_t i = 0; i < n; i++) {
    const float *x = b[i].box;
    if (b[i].label < 0 || b[i].label >= ev->K)
      return ct_error(CT_ERR_INDEX,
                      "map eval: image %lld: %s[%lld] has label "
                      "%d, outside [0, %d)",
                      (long long)ev->images, what, (long long)i, b[i].label,
                      ev->K);
    if ((scored && !isfinite(b[i].score)) || !isfinite(x[0]) ||
        !isfinite(x[1]) || !isfinite(x[2]) || !isfinite(x[3]) || x[2] < x[0] ||
        x[3] < x[1])
      return ct_error(CT_ERR_ARG,
                      "map eval: image %lld: %s[%lld]: score %g, "
                      "box (%g, %g, %g, %g): need finite values and x0 <= x1, "
                      "y0 <= y1",
                      (long long)ev->images, what, (long long)i,
                      (double)b[i].score, (double)x[0], (double)x[1],
                      (double)x[2], (double)x[3]);
  }
  return CT_OK;
}

// Appends n boxes of the current image to *list.
static ct_status append(const ct_map_eval *ev, ct_map_entry **list,
                        int64_t *count, int64_t *cap, const ct_map_box *src,
                        int64_t n) {
  if (ct_grow_array((void **)list, cap, *count + n, sizeof **list,
                    "map eval boxes"))
    return CT_ERR_NOMEM;
  for (int64_t i = 0; i < n; i++)
    (*list)[*count + i] = (ct_map_entry){src[i], ev->images};
  *count += n;
  return CT_OK;
}

ct_status ct_map_eval_add_image(ct_map_eval *ev, const ct_map_box *dets,
                                int64_t n_dets, const ct_map_box *gts,
                                int64_t n_gts) {
  if (ev->K < 1)
    return ct_error(CT_ERR_STATE,
                    "map eval: not initialized (call "
                    "ct_map_eval_init)");
  if (n_dets < 0 || n_gts < 0 || (n_dets && !dets) || (n_gts && !gts))
    return ct_error(CT_ERR_ARG,
                    "map eval: bad counts %lld detections, %lld "
                    "ground-truth boxes",
                    (long long)n_dets, (long long)n_gts);
  ct_status st = check_boxes(ev, dets, n_dets, true, "detection");
  if (!st) st = check_boxes(ev, gts, n_gts, false, "ground truth");
  int64_t n_before = ev->n_dets;
  if (!st) st = append(ev, &ev->dets, &ev->n_dets, &ev->dets_cap, dets, n_dets);
  if (!st) st = append(ev, &ev->gts, &ev->n_gts, &ev->gts_cap, gts, n_gts);
  if (st) {
    ev->n_dets = n_before;  // nothing added
    return st;
  }
  ev->images++;
  return CT_OK;
}

int ct_scored_cmp(const void *a, const void *b) {
  const ct_scored *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return (x->pos > y->pos) - (x->pos < y->pos);
}

// What a kept detection is at one threshold (COCOeval's dtm and dtIg).
enum { FALSE_POSITIVE = 0, TRUE_POSITIVE = 1, IGNORED = 2 };

static double box_area(const float *b) {
  return ((double)b[2] - b[0]) * ((double)b[3] - b[1]);
}

// COCOeval's area test: outside [lo, hi] (both ends inside).
static bool outside(const double range[2], const float *box) {
  double a = box_area(box);
  return a < range[0] || a > range[1];
}

// One class over all images: AP at each threshold into ap[t]. Scratch:
// `kept` and `order` hold n_dets entries, `tp` CT_MAP_IOU_THRESHOLDS rows
// of n_dets.
typedef struct class_scratch {
  int64_t *kept;     // the detections kept, image by image, sorted in each
  ct_scored *order;  // the kept ones ranked over all images
  uint8_t *tp;       // (T, kept): FALSE_POSITIVE, TRUE_POSITIVE or IGNORED
  int64_t *gt;       // the class's ground-truth boxes, image by image, in
                     // each those inside the area range first (stable)
  uint8_t *gt_ig;    // (n_gts) by ground-truth index: outside the area range
  double range[2];
  double *iou;     // one image's (dets, gts) IoUs
  uint8_t *taken;  // one image's gts taken
  int64_t iou_cap, taken_cap;
} class_scratch;

// Matches one image's kept detections kept[0..nd) to its ground truth
// gt[0..ng) at every threshold (COCOeval.evaluateImg): a detection matched
// to an ignored box (outside the area range), or unmatched and itself
// outside the range, is IGNORED; one matched to a box in range stops
// looking at the ignored boxes, which come last.
static ct_status match_image(const ct_map_eval *ev, class_scratch *s,
                             const int64_t *kept, int64_t nd, const int64_t *gt,
                             int64_t ng, uint8_t *tp, int64_t stride) {
  if (ct_grow_array((void **)&s->iou, &s->iou_cap, nd * ng, sizeof *s->iou,
                    "map eval IoUs") ||
      ct_grow_array((void **)&s->taken, &s->taken_cap, ng, 1, "map eval"))
    return CT_ERR_NOMEM;
  for (int64_t i = 0; i < nd; i++)
    for (int64_t g = 0; g < ng; g++)
      s->iou[i * ng + g] =
          ct_detection_iou(ev->dets[kept[i]].b.box, ev->gts[gt[g]].b.box);
  for (int t = 0; t < CT_MAP_IOU_THRESHOLDS; t++) {
    if (ng) memset(s->taken, 0, (size_t)ng);  // NULL until an image has gts
    for (int64_t i = 0; i < nd; i++) {
      double best = fmin(ct_map_iou_threshold(t), 1 - 1e-10);
      int64_t m = -1;
      for (int64_t g = 0; g < ng; g++) {
        if (s->taken[g]) continue;
        if (m >= 0 && !s->gt_ig[gt[m]] && s->gt_ig[gt[g]]) break;
        if (s->iou[i * ng + g] < best) continue;
        best = s->iou[i * ng + g];
        m = g;
      }
      uint8_t what = FALSE_POSITIVE;
      if (m >= 0) {
        s->taken[m] = 1;
        what = s->gt_ig[gt[m]] ? IGNORED : TRUE_POSITIVE;
      } else if (outside(s->range, ev->dets[kept[i]].b.box)) {
        what = IGNORED;
      }
      tp[t * stride + i] = what;
    }
  }
  return CT_OK;
}

// AP of one class at each threshold (COCOeval.accumulate); ap[t] = -1 when
// the class has no ground truth.
static ct_status class_ap(const ct_map_eval *ev, int k, class_scratch *s,
                          double *ap) {
  // The class's boxes image by image, those in range first in each; G
  // counts those in range (COCOeval's npig).
  int64_t all = 0, G = 0, nk = 0;
  for (int64_t g = 0; g < ev->n_gts;) {
    int64_t img = ev->gts[g].image, end = g;
    while (end < ev->n_gts && ev->gts[end].image == img) end++;
    for (int pass = 0; pass < 2; pass++)
      for (int64_t j = g; j < end; j++)
        if (ev->gts[j].b.label == k && s->gt_ig[j] == pass) {
          s->gt[all++] = j;
          G += !pass;
        }
    g = end;
  }
  if (!G) {
    for (int t = 0; t < CT_MAP_IOU_THRESHOLDS; t++) ap[t] = -1;
    return CT_OK;
  }
  // Per image: the class's detections by score, the first 100 kept.
  int64_t d = 0;
  while (d < ev->n_dets) {
    int64_t img = ev->dets[d].image, first = nk;
    for (; d < ev->n_dets && ev->dets[d].image == img; d++)
      if (ev->dets[d].b.label == k)
        s->order[nk++] = (ct_scored){ev->dets[d].b.score, d};
    qsort(s->order + first, (size_t)(nk - first), sizeof *s->order,
          ct_scored_cmp);
    if (nk - first > CT_MAP_MAX_DETS) nk = first + CT_MAP_MAX_DETS;
    for (int64_t i = first; i < nk; i++) s->kept[i] = s->order[i].pos;
  }
  // Matching, image by image (gts and dets are both in image order).
  int64_t gi = 0;
  for (int64_t i = 0; i < nk;) {
    int64_t img = ev->dets[s->kept[i]].image, end = i;
    while (end < nk && ev->dets[s->kept[end]].image == img) end++;
    while (gi < all && ev->gts[s->gt[gi]].image < img) gi++;
    int64_t ng = 0;
    while (gi + ng < all && ev->gts[s->gt[gi + ng]].image == img) ng++;
    ct_status st =
        match_image(ev, s, s->kept + i, end - i, s->gt + gi, ng, s->tp + i, nk);
    if (st) return st;
    i = end;
  }
  // All kept detections ranked by score (ties: the order above).
  for (int64_t i = 0; i < nk; i++)
    s->order[i] = (ct_scored){ev->dets[s->kept[i]].b.score, i};
  qsort(s->order, (size_t)nk, sizeof *s->order, ct_scored_cmp);
  double *rc = malloc((size_t)(nk ? nk : 1) * sizeof *rc);
  double *pr = malloc((size_t)(nk ? nk : 1) * sizeof *pr);
  if (!rc || !pr) {
    free(rc);
    free(pr);
    return ct_error(CT_ERR_NOMEM, "map eval: out of memory");
  }
  for (int t = 0; t < CT_MAP_IOU_THRESHOLDS; t++) {
    double tps = 0, fps = 0;
    // Ignored detections keep their place and add to neither count.
    for (int64_t i = 0; i < nk; i++) {
      uint8_t what = s->tp[t * nk + s->order[i].pos];
      tps += what == TRUE_POSITIVE;
      fps += what == FALSE_POSITIVE;
      rc[i] = tps / (double)G;
      pr[i] = tps / (fps + tps + 2.220446049250313e-16);  // np.spacing(1)
    }
    for (int64_t i = nk - 1; i > 0; i--)  // the envelope
      if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
    // q[r] = pr at numpy.searchsorted(rc, threshold r, side="left"), 0 past
    // the end; rc is non-decreasing, so one forward scan.
    double sum = 0;
    int64_t at = 0;
    for (int r = 0; r < CT_MAP_RECALL_POINTS; r++) {
      double thr = linspace(0.0, 1.0, CT_MAP_RECALL_POINTS, r);
      while (at < nk && rc[at] < thr) at++;
      if (at < nk) sum += pr[at];
    }
    ap[t] = sum / CT_MAP_RECALL_POINTS;
  }
  free(rc);
  free(pr);
  return CT_OK;
}

// ct_map_compute_detail over one area range.
static ct_status compute_detail(const ct_map_eval *ev, const double range[2],
                                double *ap, double *class_ap_out) {
  if (ev->K < 1)
    return ct_error(CT_ERR_STATE,
                    "map eval: not initialized (call "
                    "ct_map_eval_init)");
  int64_t nd = ev->n_dets ? ev->n_dets : 1, ng = ev->n_gts ? ev->n_gts : 1;
  class_scratch s = {0};
  s.kept = malloc((size_t)nd * sizeof *s.kept);
  s.order = malloc((size_t)nd * sizeof *s.order);
  s.tp = malloc((size_t)nd * CT_MAP_IOU_THRESHOLDS);
  s.gt = malloc((size_t)ng * sizeof *s.gt);
  s.gt_ig = malloc((size_t)ng);
  s.range[0] = range[0];
  s.range[1] = range[1];
  for (int64_t g = 0; s.gt_ig && g < ev->n_gts; g++)
    s.gt_ig[g] = outside(range, ev->gts[g].b.box);
  double sums[CT_MAP_IOU_THRESHOLDS] = {0};
  int classes = 0;
  ct_status st = CT_OK;
  if (!s.kept || !s.order || !s.tp || !s.gt || !s.gt_ig)
    st = ct_error(CT_ERR_NOMEM, "map eval: out of memory");
  for (int k = 0; k < ev->K && !st; k++) {
    double apk[CT_MAP_IOU_THRESHOLDS], mean = 0;
    if ((st = class_ap(ev, k, &s, apk))) break;
    if (apk[0] >= 0) {
      classes++;
      for (int t = 0; t < CT_MAP_IOU_THRESHOLDS; t++) {
        sums[t] += apk[t];
        mean += apk[t];
      }
      mean /= CT_MAP_IOU_THRESHOLDS;
    } else {
      mean = -1;
    }
    if (class_ap_out) class_ap_out[k] = mean;
  }
  free(s.kept);
  free(s.order);
  free(s.tp);
  free(s.gt);
  free(s.gt_ig);
  free(s.iou);
  free(s.taken);
  if (st) return st;
  for (int t = 0; ap && t < CT_MAP_IOU_THRESHOLDS; t++)
    ap[t] = classes ? sums[t] / classes : -1;
  return CT_OK;
}

// COCO's area ranges (COCOeval Params.areaRng), in square pixels.
static const double coco_area[CT_MAP_AREAS][2] = {
    {0, 1e10}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, 1e10}};

void ct_map_area_range(ct_map_area area, double image_area, double range[2]) {
  const double scale = image_area > 0 ? image_area / CT_MAP_COCO_IMAGE_AREA : 1;
  range[0] = coco_area[area][0] * scale;
  range[1] = area == CT_MAP_AREA_ALL || area == CT_MAP_AREA_LARGE
                 ? coco_area[area][1]
                 : coco_area[area][1] * scale;
}

ct_status ct_map_compute_detail(const ct_map_eval *ev, double *ap,
                                double *class_ap_out) {
  return compute_detail(ev, coco_area[CT_MAP_AREA_ALL], ap, class_ap_out);
}

ct_status ct_map_compute(const ct_map_eval *ev, double *map50, double *map) {
  return ct_map_compute_area(ev, coco_area[CT_MAP_AREA_ALL], map50, map);
}

ct_status ct_map_compute_area(const ct_map_eval *ev, const double range[2],
                              double *map50, double *map) {
  double ap[CT_MAP_IOU_THRESHOLDS];
  ct_status st = compute_detail(ev, range, ap, NULL);
  if (st) return st;
  double mean = 0;
  for (int t = 0; t < CT_MAP_IOU_THRESHOLDS; t++) mean += ap[t];
  if (map50) *map50 = ap[0];
  if (map) *map = ap[0] < 0 ? -1 : mean / CT_MAP_IOU_THRESHOLDS;
  return CT_OK;
}
