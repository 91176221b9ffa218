// What an image model's checkpoint must hold besides its parameters, shared
// by the classification and detection tasks: the class names (section
// "classes") and the input's channels, size and per-channel normalization
// (section "image"), so that eval, classify and detect need no data files.
#ifndef CT_TRAIN_IMAGE_META_H
#define CT_TRAIN_IMAGE_META_H

#include "data/image.h"
#include "data/strings.h"
#include "train/checkpoint.h"

typedef struct ct_image_meta {
  int C, H, W, K;
  float mean[CT_IMAGE_MAX_CHANNELS], std[CT_IMAGE_MAX_CHANNELS];
  ct_string_list class_names;  // K names
} ct_image_meta;

// Adds the "classes" and "image" sections.
ct_status ct_image_meta_save(const ct_image_meta *m, ct_ckpt_writer *w);
// Reads them into *m (class_names appended to an empty list); CT_ERR_FORMAT
// naming the checkpoint when malformed.
ct_status ct_image_meta_load(ct_image_meta *m, const ct_ckpt *ckpt);
// Per-channel statistics of u8 pixels (N, C, plane) for the normalization:
// mean and std of pixel / 255 (std floored at 1e-6 -> 1).
void ct_image_meta_stats(ct_image_meta *m, const uint8_t *pixels, int64_t n,
                         int C, int64_t plane);

#endif
