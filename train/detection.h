// The object detection task (DETR) behind the ct_task_ops table
// (train/task.h), and the `ctrain detect` command's work.
//
// Data: a generated set of canvases with 0-6 objects (source = toy; shapes,
// or Fashion-MNIST items with toy_items = fmnist) or COCO annotation files
// with PNG images (source = files: coco_train + coco_train_images, and
// coco_val + coco_val_images). Images are normalized per channel with the
// training images' statistics; training batches are a seeded permutation
// per epoch, optionally flipped horizontally (boxes with them), keyed by
// (seed, epoch, image), so a resumed run sees the same batches.
//
// Model and loss: nn/detr.h (ResNet backbone, transformer, object queries,
// Hungarian-matched CE + L1 + GIoU over every decoder layer).
//
// Evaluation: the set loss and COCO-style mAP@0.5 ("map50") and
// mAP@[.5:.95] ("map") over every query's best non-background class and
// its probability.
#ifndef CT_TRAIN_DETECTION_H
#define CT_TRAIN_DETECTION_H

#include <stdio.h>

#include "train/task.h"

extern const ct_task_ops ct_task_detection;

// Detects objects in PNG files (converted and resized to the model's
// input): prints each detection scoring at least `threshold` (class, score,
// pixel box x0 y0 x1 y1 of the file's own size); with out_png, draws them
// on the first image.
ct_status ct_detection_detect(ct_task *t, const char *const *paths, int n,
                              float threshold, const char *out_png, FILE *out);

#endif
