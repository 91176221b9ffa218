// Object detection data in memory (for DETR): images of one size, each with
// a list of labelled boxes; a generated set, the COCO annotation format
// (reading and writing), and the per-image targets a model trains on.
//
//   ct_detection_dataset train = {0}, val = {0};
//   ct_toy_detection_generate(&train, 2000, 64, 4, seed, 0, NULL);
//   ct_toy_detection_generate(&val, 200, 64, 4, seed, 1, NULL);
//   ct_toy_detection_write("data/toydet", &train, &val, false);  // COCO files
//   ...
//   ct_coco_load(&train, "data/toydet/train.json", "data/toydet/train", 1, 64);
//   int64_t T = ct_detection_box_count(&train, i);
//   ct_detection_targets(&train, i, labels /* T */, boxes /* T*4 cxcywh */);
//   ct_detection_dataset_free(&train);
//
// Boxes are in pixels of the stored (resized) image, as COCO's
// [x, y, width, height]: (x, y) the top-left corner, the box covering
// [x, x + w) x [y, y + h); a box around pixel columns 3..5 is x = 3, w = 3.
// Training targets are DETR's: (cx, cy, w, h) divided by the image width and
// height, so in [0, 1].
//
// COCO files (https://cocodataset.org/#format-data), only what detection
// needs: {"images": [{"id", "file_name", "width", "height"}],
// "annotations": [{"image_id", "category_id", "bbox": [x, y, w, h]}],
// "categories": [{"id", "name"}]}; other keys (segmentation, area, iscrowd,
// info, licenses, ...) are ignored, so crowd annotations count as ordinary
// boxes. Category ids map to contiguous labels 0..K-1 in increasing id
// order. The images are PNG (data/png_folder.h decodes and resizes them).
//
// What this file does not do: augmentation of images with their boxes,
// batching, masks or keypoints, image formats other than PNG.
#ifndef CT_DATA_DETECTION_H
#define CT_DATA_DETECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/image.h"
#include "data/strings.h"

// The core/rng.h purpose of the generated set (the image side's are
// 0xDA7A11..0xDA7A21).
enum { CT_DETECTION_RNG_TOY = 0xDA7A31u };

enum {
  CT_TOY_DETECTION_MAX_OBJECTS = 6,   // objects per generated image: 0..6
  CT_TOY_DETECTION_SHAPES = 6,        // shape classes without Fashion-MNIST
  CT_TOY_DETECTION_MIN_OBJECT = 8,    // smallest object side, pixels
  CT_TOY_DETECTION_SMALLEST = 4,      // the least min_object allowed
  CT_TOY_DETECTION_MOST_OBJECTS = 64  // the most max_objects allowed
};

typedef struct ct_detection_box {
  int32_t label;     // in [0, K)
  float x, y, w, h;  // pixels: top-left corner, width, height (w, h > 0)
} ct_detection_box;

// Zero-initialize ({0}); the generator and the loader fill it.
typedef struct ct_detection_dataset {
  int64_t N;                   // images
  int C, H, W;                 // channels (1 or 3), size
  int K;                       // classes
  uint8_t *pixels;             // (N, C, H, W)
  int64_t *box_start;          // (N + 1): image i's boxes are
                               // boxes[box_start[i] .. box_start[i + 1])
  ct_detection_box *boxes;     // box_start[N] boxes, image by image
  ct_string_list class_names;  // K names (their index is the label)
} ct_detection_dataset;

void ct_detection_dataset_free(ct_detection_dataset *d);

static inline uint8_t *ct_detection_image(const ct_detection_dataset *d,
                                          int64_t i) {
  return d->pixels + i * (int64_t)d->C * d->H * d->W;
}
static inline int64_t ct_detection_box_count(const ct_detection_dataset *d,
                                             int64_t i) {
  return d->box_start[i + 1] - d->box_start[i];
}
static inline const ct_detection_box *ct_detection_boxes(
    const ct_detection_dataset *d, int64_t i) {
  return d->boxes + d->box_start[i];
}
// The most boxes any image has (for sizing per-batch target buffers).
int64_t ct_detection_max_boxes(const ct_detection_dataset *d);

// Image i's targets: labels (T) and boxes (T, 4) normalized (cx, cy, w, h) =
// ((x + w/2) / W, (y + h/2) / H, w / W, h / H), for T =
// ct_detection_box_count(d, i), which it returns. Either output may be NULL.
int64_t ct_detection_targets(const ct_detection_dataset *d, int64_t i,
                             int32_t *labels, float *boxes);

// Box format changes for evaluation (train/detection_eval.h takes corners):
// a stored box to pixel corners (x0, y0, x1, y1) = (x, y, x + w, y + h); and
// n normalized (cx, cy, w, h) boxes, as a model predicts them, to pixel
// corners of a W x H image.
void ct_detection_box_xyxy(const ct_detection_box *b, float xyxy[4]);
void ct_detection_cxcywh_to_pixels(const float *cxcywh, int64_t n, int W, int H,
                                   float *xyxy);
// Intersection over union of two corner boxes, in double, as COCO computes
// it (areas without COCO's legacy +1); 0 when the union is empty.
double ct_detection_iou(const float a[4], const float b[4]);

// ---- the generated set -------------------------------------------------------

// Fills *d with n gray size x size images (size in 16..1024), each holding
// 0..6 objects (the count uniform) at random positions and sides of
// 8..size/2 pixels, bright on a dark noisy background. Objects may overlap,
// but the intersection of two boxes stays below half the smaller one's
// area, so their IoU is below 0.5 and no object hides under another (a draw
// that would break this is retried, at most 16 times, then left out); a
// later object is painted over an earlier one. Each box is the tight box of
// the object's pixels.
//   fmnist NULL: `classes` (1..6) shapes: 0 "square", 1 "disk",
//     2 "triangle", 3 "plus", 4 "ring", 5 "bar" (horizontal or vertical).
//   fmnist given (gray, e.g. ct_idx_load_dir's Fashion-MNIST): the objects
//     are its items with label < classes (1..fmnist->K), scaled to the
//     object size, labelled and named as there.
// Deterministic from (seed, split) (split 0 train, 1 val, 2 test picks an
// independent Philox stream), the same on every machine; the first m images
// do not depend on n.
ct_status ct_toy_detection_generate(ct_detection_dataset *d, int64_t n,
                                    int size, int classes, uint64_t seed,
                                    int split, const ct_image_dataset *fmnist);

// The generator's object sizes and counts, for sets of many small objects;
// a field left 0 keeps the default above, and all 0 (or sizes NULL) gives
// ct_toy_detection_generate's set bit for bit.
typedef struct ct_toy_detection_sizes {
  int min_object;   // smallest object side, pixels (default 8; >= 4)
  int max_object;   // largest (default size / 2; <= size)
  int max_objects;  // objects per image are uniform in 0..this (default 6;
                    // <= 64)
} ct_toy_detection_sizes;

// ct_toy_detection_generate with other sizes: sides uniform in
// min_object..max_object, 0..max_objects objects per image (fewer where
// placement fails). CT_ERR_ARG naming the values for min > max, min < 4,
// max > size or max_objects outside [1, 64].
ct_status ct_toy_detection_generate_sized(ct_detection_dataset *d, int64_t n,
                                          int size, int classes, uint64_t seed,
                                          int split,
                                          const ct_image_dataset *fmnist,
                                          const ct_toy_detection_sizes *sizes);

// The generated sets' objects (data/toy_captions.h paints them too), as
// intensities in an s x s cell, 0 off the object:
//   shape k (see above) with value v; a bar's orientation is drawn from r.
//   item j of the gray set `items` scaled to the cell, its ink (pixels
//   >= 16) lifted to 96..255.
// ct_toy_cell_box: the tight box of the cell's nonzero pixels, placed at
// (x0, y0); false when the cell is empty (b->label is left alone).
void ct_toy_draw_shape(uint8_t *cell, int s, int k, ct_rng *r, uint8_t v);
void ct_toy_draw_item(uint8_t *cell, int s, const ct_image_dataset *items,
                      int64_t j);
bool ct_toy_cell_box(const uint8_t *cell, int s, int x0, int y0,
                     ct_detection_box *b);

// ---- COCO files ----------------------------------------------------------------

// Reads the COCO annotation file json_path and its PNG images
// image_dir/file_name into *d with `channels` (1 or 3) channels, every image
// resized to size x size and its boxes scaled with it (size 0: keep the
// declared sizes, which must then all be equal). A box may reach 1 pixel
// past the image's declared border (rounding in other tools); it is then
// clipped to the image. Errors name the file and, where the JSON is at
// fault, line:column and the entry ("annotations[3]"):
//   CT_ERR_IO      the JSON or a PNG cannot be opened or read
//   CT_ERR_FORMAT  malformed JSON; a missing key or a value of the wrong
//                  type; duplicate image or category ids; no categories; a
//                  PNG that is not one, is corrupt, or whose size is not the
//                  declared width x height
//   CT_ERR_INDEX   an annotation's unknown image_id or category_id
//   CT_ERR_ARG     a box with w or h <= 0, or outside its image; bad
//                  channels or size
// *d is left empty after an error.
ct_status ct_coco_load(ct_detection_dataset *d, const char *json_path,
                       const char *image_dir, int channels, int size);

// Writes two sets as COCO: DIR/train/NNNNNN.png and DIR/train.json, the same
// for val (image ids 1..N, category ids 1..K, annotation ids 1.. in order).
// The folder is created; existing files are not overwritten unless
// `overwrite` (CT_ERR_IO naming the first one).
ct_status ct_toy_detection_write(const char *dir,
                                 const ct_detection_dataset *train,
                                 const ct_detection_dataset *val,
                                 bool overwrite);

#endif
