// The captioned-image data of the captioning and contrastive tasks (see
// caption_data.h).
#include "train/caption_data.h"

#include <string.h>

#include "data/idx.h"
#include "data/toy_captions.h"

const char *const ct_caption_split_names[CT_CAPTION_SPLITS] = {"train", "val",
                                                               "test"};
const char *const ct_caption_file_keys[CT_CAPTION_SPLITS][2] = {
    {"captions_train", "captions_train_images"},
    {"captions_val", "captions_val_images"},
    {"captions_test", "captions_test_images"}};

ct_status ct_caption_data_read_config(const ct_config *cfg,
                                      ct_caption_data_config *out) {
  *out = (ct_caption_data_config){
      .seed = (uint64_t)ct_config_int(cfg, "run", "seed"),
      .source = CT_SCHEMA_ENUM(cfg, "data", "source", CT_DATA_SOURCES,
                               ct_data_source),
      .toy_items =
          CT_SCHEMA_ENUM(cfg, "data", "toy_items", CT_TOY_ITEMS, ct_toy_items),
      .image_dir = ct_config_str(cfg, "data", "image_dir"),
      .toy_image_size = (int)ct_config_int(cfg, "data", "toy_image_size"),
      .toy_grid = (int)ct_config_int(cfg, "data", "toy_grid"),
      .toy_max_objects = (int)ct_config_int(cfg, "data", "toy_max_objects"),
      .toy_n = {ct_config_int(cfg, "data", "toy_train"),
                ct_config_int(cfg, "data", "toy_val"),
                ct_config_int(cfg, "data", "toy_test")},
      .channels = (int)ct_config_int(cfg, "data", "channels"),
      .image_size = (int)ct_config_int(cfg, "data", "image_size"),
  };
  for (int s = 0; s < CT_CAPTION_SPLITS; s++) {
    out->files[s] = ct_config_str(cfg, "data", ct_caption_file_keys[s][0]);
    out->file_images[s] =
        ct_config_str(cfg, "data", ct_caption_file_keys[s][1]);
  }
  if (out->source == CT_DATA_SOURCE_TOY &&
      out->toy_max_objects > CT_TOY_CAPTIONS_MAX_OBJECTS)
    return ct_error(CT_ERR_ARG,
                    "[data] toy_max_objects = %d: a captioned canvas holds 1 "
                    "to %d objects (0 = %d)",
                    out->toy_max_objects, CT_TOY_CAPTIONS_MAX_OBJECTS,
                    CT_TOY_CAPTIONS_MAX_OBJECTS);
  return CT_OK;
}

ct_status ct_caption_data_load(const ct_caption_data_config *c, int first,
                               ct_caption_dataset sets[CT_CAPTION_SPLITS],
                               bool have[CT_CAPTION_SPLITS]) {
  ct_status st = CT_OK;
  if (c->source == CT_DATA_SOURCE_TOY) {
    bool fmnist = c->toy_items == CT_TOY_ITEMS_FMNIST;
    ct_image_dataset items[2] = {{0}, {0}};  // training and test items
    for (int k = 0; k < 2 && fmnist && st == CT_OK; k++)
      st = ct_idx_load_dir(&items[k], c->image_dir, k == 0, 10);
    for (int s = first; s < CT_CAPTION_SPLITS && st == CT_OK; s++) {
      ct_toy_captions_options o = {.size = c->toy_image_size,
                                   .grid = c->toy_grid,
                                   .seed = c->seed,
                                   .items = fmnist ? &items[s > 0] : NULL,
                                   .max_objects = c->toy_max_objects};
      st = ct_toy_captions_generate(&sets[s], c->toy_n[s], &o, s);
      have[s] = st == CT_OK;
    }
    ct_image_dataset_free(&items[0]);
    ct_image_dataset_free(&items[1]);
    return st;
  }
  for (int s = first; s < CT_CAPTION_SPLITS && st == CT_OK; s++) {
    if (!*c->files[s] || !*c->file_images[s]) {
      if (s == 2) continue;  // the test split is optional
      return ct_error(CT_ERR_ARG,
                      "[data] %s and %s must be set (source = files)",
                      ct_caption_file_keys[s][0], ct_caption_file_keys[s][1]);
    }
    st = ct_captions_load(&sets[s], c->files[s], c->file_images[s], c->channels,
                          c->image_size);
    have[s] = st == CT_OK;
  }
  return st;
}

ct_status ct_caption_data_vocab(ct_vocab *v, const ct_caption_dataset *train,
                                const ct_text_tokenizer *tok, int64_t min_freq,
                                int64_t max_vocab, const ct_ckpt *ckpt) {
  if (ckpt) {
    const void *data;
    size_t len;
    ct_status st = ct_ckpt_section(ckpt, "vocab.captions", &data, &len);
    return st == CT_OK ? ct_vocab_load(v, data, len) : st;
  }
  ct_vocab_counter counter = {0};
  ct_status st = ct_captions_count_tokens(train, tok, &counter);
  if (st == CT_OK) st = ct_vocab_build(v, &counter, min_freq, max_vocab);
  ct_vocab_counter_free(&counter);
  return st;
}

ct_status ct_caption_data_meta(ct_image_meta *m,
                               const ct_caption_dataset *train,
                               const ct_ckpt *ckpt) {
  if (ckpt) return ct_image_meta_load(m, ckpt);
  m->C = train->C;
  m->H = train->H;
  m->W = train->W;
  ct_status st = CT_OK;
  for (int64_t k = 0; k < train->object_names.count && st == CT_OK; k++) {
    const char *name = ct_string_list_get(&train->object_names, k);
    st = ct_string_list_push(&m->class_names, name, strlen(name));
  }
  // The classes section holds at least one name.
  if (st == CT_OK && !m->class_names.count)
    st = ct_string_list_push(&m->class_names, "object", 6);
  m->K = (int)m->class_names.count;
  ct_image_meta_stats(m, train->pixels, train->N, train->C,
                      (int64_t)train->H * train->W);
  return st;
}
