// The captioned-image data that the captioning and contrastive tasks both
// train on (data/captions.h): the [data] keys that choose it, loading the
// three splits (generated, data/toy_captions.h, or captions files with
// their PNGs), the vocabulary of the training captions and the image side
// of the checkpoint (size, normalization, object names).
//
// What this file does not do: batches, token rows, models.
#ifndef CT_TRAIN_CAPTION_DATA_H
#define CT_TRAIN_CAPTION_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "data/captions.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/image_meta.h"
#include "train/schema.h"

enum { CT_CAPTION_SPLITS = 3 };  // train, val, test

extern const char *const ct_caption_split_names[CT_CAPTION_SPLITS];
// The [data] keys of the captions files and their image folders, per split.
extern const char *const ct_caption_file_keys[CT_CAPTION_SPLITS][2];

typedef struct ct_caption_data_config {
  uint64_t seed;
  ct_data_source source;
  // source = toy
  ct_toy_items toy_items;
  const char *image_dir;  // toy_items = fmnist: the Fashion-MNIST files
  int toy_image_size, toy_grid, toy_max_objects;
  int64_t toy_n[CT_CAPTION_SPLITS];
  // source = files (strings point into the config)
  const char *files[CT_CAPTION_SPLITS], *file_images[CT_CAPTION_SPLITS];
  int channels, image_size;
} ct_caption_data_config;

// Reads those keys of cfg ([run] seed, [data] ...); CT_ERR_ARG naming the
// key for a toy_max_objects above 4 with source = toy.
ct_status ct_caption_data_read_config(const ct_config *cfg,
                                      ct_caption_data_config *out);

// Loads the splits from `first` on (0: all, 1: val and test) into sets,
// have[s] saying which are there (source = files: the test split is
// optional; val needs its keys, CT_ERR_ARG naming them).
ct_status ct_caption_data_load(const ct_caption_data_config *c, int first,
                               ct_caption_dataset sets[CT_CAPTION_SPLITS],
                               bool have[CT_CAPTION_SPLITS]);

// The vocabulary of the training captions' tokens, or (ckpt not NULL) the
// checkpoint's section "vocab.captions".
ct_status ct_caption_data_vocab(ct_vocab *v, const ct_caption_dataset *train,
                                const ct_text_tokenizer *tok, int64_t min_freq,
                                int64_t max_vocab, const ct_ckpt *ckpt);

// The image side: the training images' size, per-channel statistics and
// object names (at least one: "object"), or (ckpt not NULL) the
// checkpoint's sections "classes" and "image".
ct_status ct_caption_data_meta(ct_image_meta *m,
                               const ct_caption_dataset *train,
                               const ct_ckpt *ckpt);

#endif
