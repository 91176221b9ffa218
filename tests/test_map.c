// COCO-style mAP (train/detection_eval.h) on hand-computed cases: perfect
// detections give 1; a false positive ranked above a true one, a duplicate,
// ranking across images give the known 101-point values; a class without
// ground truth is left out; IoU 0.6 / 0.62 boxes count at 0.5 but not 0.75;
// the 100-detection cap; the thresholds as numpy computes them; bad input.
// The values below follow pycocotools' accumulate(): precision envelope,
// then the precision at the first detection reaching each recall 0:.01:1.
#include "data/detection.h"
#include "train/detection_eval.h"
#include "tests/harness.h"

#include <string.h>

static ct_map_box box(int label, float score, float x0, float y0, float x1,
                      float y1) {
  return (ct_map_box){label, score, {x0, y0, x1, y1}};
}

// mAP@0.5 and mAP@[.5:.95] of one image's detections and ground truth.
static void map_of(int K, const ct_map_box *dets, int nd, const ct_map_box *gts,
                   int ng, double *map50, double *map, double *ap) {
  ct_map_eval ev;
  ct_map_eval_init(&ev, K);
  CHECK(!ct_map_eval_add_image(&ev, dets, nd, gts, ng), "%s", ct_last_error());
  CHECK(!ct_map_compute(&ev, map50, map), "%s", ct_last_error());
  if (ap) CHECK(!ct_map_compute_detail(&ev, ap, NULL), "%s", ct_last_error());
  ct_map_eval_free(&ev);
}

// (51 recall points at precision 1, 50 at 2/3) / 101.
static const double AP_TP_FP_TP = (51.0 + 50.0 * 2.0 / 3.0) / 101.0;

static void test_thresholds(void) {
  // numpy.linspace(.5, .95, 10): i * 0.049999999999999996 + 0.5.
  CHECK(ct_map_iou_threshold(0) == 0.5, "t0");
  CHECK(ct_map_iou_threshold(5) == 5 * (0.44999999999999996 / 9) + 0.5, "t5");
  CHECK_CLOSE(ct_map_iou_threshold(5), 0.75, 1e-15, "t5 ~ 0.75");
  CHECK(ct_map_iou_threshold(9) == 0.95, "t9");
}

static void test_perfect(void) {
  ct_map_eval ev;
  CHECK(!ct_map_eval_init(&ev, 3), "init");
  for (int img = 0; img < 4; img++) {
    ct_map_box g[3] = {box(img % 3, 0, 1, 1, 10, 12),
                       box((img + 1) % 3, 0, 20, 5, 40, 30),
                       box(0, 0, 3, 30, 9, 38)};
    ct_map_box d[3];
    for (int i = 0; i < 3; i++) {
      d[i] = g[2 - i];
      d[i].score = 0.5f + 0.1f * (float)i;
    }
    CHECK(!ct_map_eval_add_image(&ev, d, 3, g, img == 3 ? 2 : 3), "%s",
          ct_last_error());
  }
  double m50, m;
  // Image 3 has one detection without ground truth (class 0 at (3, 30));
  // its score, 0.5, is the lowest given and ties rank in image order, so it
  // comes after every true one: AP stays 1.
  CHECK(!ct_map_compute(&ev, &m50, &m), "%s", ct_last_error());
  CHECK_CLOSE(m50, 1.0, 1e-12, "perfect + one last FP: mAP50");
  CHECK_CLOSE(m, 1.0, 1e-12, "perfect + one last FP: mAP");
  ct_map_eval_free(&ev);
  ct_map_box g = box(1, 0, 0, 0, 5, 5), d = box(1, 0.9f, 0, 0, 5, 5);
  map_of(2, &d, 1, &g, 1, &m50, &m, NULL);
  // Precision is TP / (TP + FP + eps) as in pycocotools: 1 - 2e-16.
  CHECK(fabs(m50 - 1.0) < 1e-12 && fabs(m - 1.0) < 1e-12,
        "single perfect: %g %g", m50, m);
}

static void test_ranking(void) {
  double m50, m, ap[CT_MAP_IOU_THRESHOLDS];
  ct_map_box g1 = box(0, 0, 0, 0, 10, 10);
  // A false positive ranked above the true one: precision (0, 1/2),
  // envelope (1/2, 1/2), so AP = 1/2 at every recall point.
  ct_map_box fp_tp[2] = {box(0, 0.9f, 50, 50, 60, 60),
                         box(0, 0.8f, 0, 0, 10, 10)};
  map_of(1, fp_tp, 2, &g1, 1, &m50, &m, NULL);
  CHECK_CLOSE(m50, 0.5, 1e-12, "FP above TP");
  CHECK_CLOSE(m, 0.5, 1e-12, "FP above TP, all thresholds");
  // Below it: AP 1 (the envelope keeps precision 1 up to recall 1).
  fp_tp[0].score = 0.7f;
  map_of(1, fp_tp, 2, &g1, 1, &m50, &m, NULL);
  CHECK_CLOSE(m50, 1.0, 1e-12, "FP below TP");

  // TP, FP, TP over two objects: recall (1/2, 1/2, 1), precision
  // (1, 1/2, 2/3) -> envelope (1, 2/3, 2/3): 51 points at 1, 50 at 2/3.
  ct_map_box g2[2] = {box(0, 0, 0, 0, 10, 10), box(0, 0, 20, 20, 30, 30)};
  ct_map_box tft[3] = {box(0, 0.9f, 0, 0, 10, 10), box(0, 0.8f, 40, 0, 50, 9),
                       box(0, 0.7f, 20, 20, 30, 30)};
  map_of(1, tft, 3, g2, 2, &m50, &m, NULL);
  CHECK_CLOSE(m50, AP_TP_FP_TP, 1e-12, "TP FP TP");
  printf("AP of TP, FP, TP over 2 objects: %.9f (want %.9f)\n", m50,
         AP_TP_FP_TP);

  // A duplicate of a found object is a false positive: the same numbers.
  ct_map_box dup[3] = {box(0, 0.9f, 0, 0, 10, 10), box(0, 0.8f, 0, 0, 10, 10),
                       box(0, 0.7f, 20, 20, 30, 30)};
  map_of(1, dup, 3, g2, 2, &m50, &m, NULL);
  CHECK_CLOSE(m50, AP_TP_FP_TP, 1e-12, "duplicate counted as FP");
  CHECK_CLOSE(m, AP_TP_FP_TP, 1e-12, "duplicate, all thresholds");

  // Ranking across images: image 0 a TP (0.9); image 1 an FP (0.95) and a
  // TP (0.5). Order FP, TP, TP: precision (0, 1/2, 2/3) -> all 2/3.
  ct_map_eval ev;
  ct_map_eval_init(&ev, 1);
  ct_map_box d0 = box(0, 0.9f, 0, 0, 10, 10);
  ct_map_box d1[2] = {box(0, 0.5f, 0, 0, 10, 10),
                      box(0, 0.95f, 30, 30, 40, 40)};
  CHECK(!ct_map_eval_add_image(&ev, &d0, 1, &g1, 1), "%s", ct_last_error());
  CHECK(!ct_map_eval_add_image(&ev, d1, 2, &g1, 1), "%s", ct_last_error());
  CHECK(!ct_map_compute(&ev, &m50, &m), "%s", ct_last_error());
  CHECK_CLOSE(m50, 2.0 / 3.0, 1e-12, "across images");
  ct_map_eval_free(&ev);

  // A class without ground truth is left out, its detections too.
  ct_map_box mixed[3] = {box(0, 0.9f, 0, 0, 10, 10), box(0, 0.8f, 40, 0, 50, 9),
                         box(2, 0.95f, 20, 20, 30, 30)};
  ct_map_box gmixed[3] = {g2[0], g2[1], box(1, 0, 60, 60, 70, 70)};
  gmixed[1].label = 0;
  double class_ap[3];
  ct_map_eval_init(&ev, 3);
  CHECK(!ct_map_eval_add_image(&ev, mixed, 3, gmixed, 3), "%s",
        ct_last_error());
  CHECK(!ct_map_compute_detail(&ev, ap, class_ap), "%s", ct_last_error());
  CHECK(!ct_map_compute(&ev, &m50, &m), "%s", ct_last_error());
  ct_map_eval_free(&ev);
  // Class 0: TP then FP over 2 objects: 51 points at precision 1, rest 0.
  CHECK_CLOSE(class_ap[0], 51.0 / 101.0, 1e-12, "class 0 AP");
  CHECK_CLOSE(class_ap[1], 0.0, 1e-12, "class 1 (missed) AP");
  CHECK(class_ap[2] == -1, "class 2 (no ground truth) not -1: %g", class_ap[2]);
  CHECK_CLOSE(m50, (51.0 / 101.0 + 0.0) / 2, 1e-12, "mean over 2 classes");
  // No ground truth at all: COCO's -1.
  map_of(2, mixed, 2, NULL, 0, &m50, &m, NULL);
  CHECK(m50 == -1 && m == -1, "no ground truth: %g %g", m50, m);
}

static void test_iou_thresholds(void) {
  double m50, m, ap[CT_MAP_IOU_THRESHOLDS];
  // IoU 0.6 (60 / 100): a match at 0.5, not at 0.75.
  ct_map_box g = box(0, 0, 0, 0, 10, 10), d = box(0, 0.9f, 0, 0, 10, 6);
  map_of(1, &d, 1, &g, 1, &m50, &m, ap);
  CHECK(fabs(ap[0] - 1) < 1e-12 && fabs(ap[1] - 1) < 1e-12 && ap[5] == 0.0,
        "IoU 0.6: AP@.5 %g AP@.55 %g AP@.75 %g", ap[0], ap[1], ap[5]);
  // IoU 0.62: a match at 0.50, 0.55, 0.60 only -> mAP 3/10.
  d = box(0, 0.9f, 0, 0, 10, 6.2f);
  map_of(1, &d, 1, &g, 1, &m50, &m, ap);
  CHECK(fabs(m50 - 1) < 1e-12 && fabs(ap[2] - 1) < 1e-12 && ap[3] == 0.0 &&
            ap[5] == 0.0,
        "IoU 0.62: %g %g %g", ap[0], ap[2], ap[3]);
  CHECK_CLOSE(m, 0.3, 1e-12, "IoU 0.62: mAP@[.5:.95]");
  // A detection takes the best-overlapping free object: the second
  // detection still finds the other object.
  ct_map_box g2[2] = {box(0, 0, 0, 0, 10, 10), box(0, 0, 2, 0, 12, 10)};
  ct_map_box d2[2] = {box(0, 0.9f, 2, 0, 12, 10), box(0, 0.8f, 0, 0, 10, 10)};
  map_of(1, d2, 2, g2, 2, &m50, &m, NULL);
  CHECK_CLOSE(m, 1.0, 1e-12, "best free match, all thresholds");
}

static void test_max_dets(void) {
  // 100 better-scored false positives push the true one out of the cap.
  ct_map_box d[101], g = box(0, 0, 0, 0, 10, 10);
  for (int i = 0; i < 100; i++) d[i] = box(0, 0.9f, 50, 50, 60, 60);
  d[100] = box(0, 0.5f, 0, 0, 10, 10);
  double m50, m;
  map_of(1, d, 101, &g, 1, &m50, &m, NULL);
  CHECK(m50 == 0.0, "TP past 100 detections: %g", m50);
  d[100].score = 0.95f;  // now first: kept, AP 1
  map_of(1, d, 101, &g, 1, &m50, &m, NULL);
  CHECK_CLOSE(m50, 1.0, 1e-12, "TP first of 101");
}

// The dataset's boxes through the helpers: perfect predictions in
// normalized (cx, cy, w, h) form, converted back to pixels, score mAP 1.
static void test_with_dataset(void) {
  ct_detection_dataset d;
  CHECK(!ct_toy_detection_generate(&d, 20, 64, 4, 11, 1, NULL), "%s",
        ct_last_error());
  ct_map_eval ev;
  ct_map_eval_init(&ev, d.K);
  for (int64_t i = 0; i < d.N; i++) {
    int32_t labels[CT_TOY_DETECTION_MAX_OBJECTS];
    float cxcywh[4 * CT_TOY_DETECTION_MAX_OBJECTS],
        xyxy[4 * CT_TOY_DETECTION_MAX_OBJECTS];
    int64_t T = ct_detection_targets(&d, i, labels, cxcywh);
    ct_detection_cxcywh_to_pixels(cxcywh, T, d.W, d.H, xyxy);
    ct_map_box det[CT_TOY_DETECTION_MAX_OBJECTS],
        gt[CT_TOY_DETECTION_MAX_OBJECTS];
    for (int64_t t = 0; t < T; t++) {
      det[t] = (ct_map_box){labels[t], 0.5f, {0}};
      memcpy(det[t].box, xyxy + 4 * t, sizeof det[t].box);
      gt[t] = (ct_map_box){ct_detection_boxes(&d, i)[t].label, 0, {0}};
      ct_detection_box_xyxy(&ct_detection_boxes(&d, i)[t], gt[t].box);
    }
    CHECK(!ct_map_eval_add_image(&ev, det, T, gt, T), "%s", ct_last_error());
  }
  double m50, m;
  CHECK(!ct_map_compute(&ev, &m50, &m), "%s", ct_last_error());
  CHECK_CLOSE(m, 1.0, 1e-12, "dataset boxes as predictions");
  ct_map_eval_free(&ev);
  ct_detection_dataset_free(&d);
}

static void test_errors(void) {
  ct_map_eval ev;
  CHECK(ct_map_eval_init(&ev, 0) == CT_ERR_ARG, "0 classes");
  ct_map_eval_init(&ev, 2);
  ct_map_box bad_label = box(2, 0.5f, 0, 0, 1, 1);
  CHECK(ct_map_eval_add_image(&ev, &bad_label, 1, NULL, 0) == CT_ERR_INDEX &&
            strstr(ct_last_error(), "detection[0] has label 2"),
        "label out of range: %s", ct_last_error());
  ct_map_box flipped = box(0, 0, 5, 0, 1, 1);
  CHECK(ct_map_eval_add_image(&ev, NULL, 0, &flipped, 1) == CT_ERR_ARG &&
            strstr(ct_last_error(), "ground truth[0]"),
        "flipped box: %s", ct_last_error());
  ct_map_box nan_score = box(0, NAN, 0, 0, 1, 1);
  CHECK(ct_map_eval_add_image(&ev, &nan_score, 1, NULL, 0) == CT_ERR_ARG,
        "NaN score");
  CHECK(ev.images == 0 && ev.n_dets == 0 && ev.n_gts == 0,
        "a refused image was added");
  ct_map_eval_free(&ev);
}

// The first image's detections of a class meet no ground truth of it
// (what every early DETR validation looks like): no false match, and no
// memset of the never-grown scratch (UBSan: memset(NULL, 0, 0)).
static void test_image_without_ground_truth(void) {
  ct_map_eval ev;
  ct_map_eval_init(&ev, 2);
  ct_map_box d0 = box(0, 0.9f, 0, 0, 5, 5), g1 = box(0, 0, 0, 0, 5, 5),
             d1 = box(0, 0.8f, 0, 0, 5, 5);
  CHECK(!ct_map_eval_add_image(&ev, &d0, 1, NULL, 0), "%s", ct_last_error());
  CHECK(!ct_map_eval_add_image(&ev, &d1, 1, &g1, 1), "%s", ct_last_error());
  double map50 = -2, map = -2;
  CHECK(!ct_map_compute(&ev, &map50, &map), "%s", ct_last_error());
  // A false positive ranked above the true one: precision 1/2 at recall 1.
  CHECK_CLOSE(map50, 0.5, 1e-12, "map50, a false positive first");
  ct_map_eval_free(&ev);
}

// Area ranges as COCOeval's areaRng: ground truth outside the range is
// ignored, and so are detections matching it or unmatched outside it.
static void test_area_ranges(void) {
  double r[2];
  ct_map_area_range(CT_MAP_AREA_SMALL, 0, r);
  CHECK(r[0] == 0 && r[1] == 1024, "small absolute %g..%g", r[0], r[1]);
  ct_map_area_range(CT_MAP_AREA_LARGE, 640 * 480, r);
  CHECK(r[0] == 9216 && r[1] == 1e10, "large at 640x480 %g..%g", r[0], r[1]);
  ct_map_area_range(CT_MAP_AREA_MEDIUM, 64 * 64, r);
  CHECK_CLOSE(r[0], 1024.0 * 4096 / 307200, 1e-12, "medium 64x64 lo");
  CHECK_CLOSE(r[1], 9216.0 * 4096 / 307200, 1e-12, "medium 64x64 hi");
  // A small (area 100) and a large (22500) object, both found; a small and
  // a large false positive. Scores: small FP .95, small TP .9, large TP .8,
  // large FP .7.
  ct_map_box g[2] = {box(0, 0, 0, 0, 10, 10), box(0, 0, 100, 100, 250, 250)};
  ct_map_box d[4] = {
      box(0, 0.9f, 0, 0, 10, 10), box(0, 0.8f, 100, 100, 250, 250),
      box(0, 0.95f, 300, 300, 310, 310), box(0, 0.7f, 400, 0, 520, 120)};
  ct_map_eval ev;
  ct_map_eval_init(&ev, 1);
  CHECK(!ct_map_eval_add_image(&ev, d, 4, g, 2), "%s", ct_last_error());
  double want[CT_MAP_AREAS] = {
      2.0 / 3.0,  // all: FP TP TP FP, precision envelope 2/3
      0.5,        // small: FP TP (the large pair ignored)
      -1,         // medium: no ground truth
      1.0};       // large: (small ones ignored) TP FP
  for (int a = 0; a < CT_MAP_AREAS; a++) {
    double m50, m;
    ct_map_area_range((ct_map_area)a, 0, r);
    CHECK(!ct_map_compute_area(&ev, r, &m50, &m), "%s", ct_last_error());
    CHECK(fabs(m50 - want[a]) < 1e-12 && fabs(m - want[a]) < 1e-12,
          "area %d: mAP50 %g, mAP %g, want %g", a, m50, m, want[a]);
  }
  double m50, m;
  CHECK(!ct_map_compute(&ev, &m50, &m), "%s", ct_last_error());
  CHECK_CLOSE(m50, 2.0 / 3.0, 1e-12, "all range = ct_map_compute");
  ct_map_eval_free(&ev);
  // A detection overlapping a box in range (IoU 0.88) and an ignored one
  // (IoU 0.94): it stays with the box in range (COCOeval's break), a true
  // positive, in both the small and the medium range.
  ct_map_box g2[2] = {box(0, 0, 0, 0, 30, 30), box(0, 0, 0, 0, 33, 33)};
  ct_map_box d2 = box(0, 0.9f, 0, 0, 32, 32);
  ct_map_eval_init(&ev, 1);
  CHECK(!ct_map_eval_add_image(&ev, &d2, 1, g2, 2), "%s", ct_last_error());
  for (int a = CT_MAP_AREA_SMALL; a <= CT_MAP_AREA_MEDIUM; a++) {
    ct_map_area_range((ct_map_area)a, 0, r);
    CHECK(!ct_map_compute_area(&ev, r, &m50, &m), "%s", ct_last_error());
    CHECK(fabs(m50 - 1.0) < 1e-12, "area %d: the match in range: %g", a, m50);
  }
  ct_map_eval_free(&ev);
}

int main(void) {
  test_thresholds();
  test_image_without_ground_truth();
  test_perfect();
  test_ranking();
  test_iou_thresholds();
  test_max_dets();
  test_with_dataset();
  test_errors();
  test_area_ranges();
  return test_summary("map");
}
