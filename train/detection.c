// The object detection task (see detection.h).
#include "train/detection.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/rng.h"
#include "data/detection.h"
#include "data/idx.h"
#include "data/png_folder.h"
#include "data/stride.h"
#include "nn/deformable_detr.h"
#include "nn/detr.h"
#include "train/detection_eval.h"
#include "train/dist.h"
#include "train/image_meta.h"
#include "train/plot.h"
#include "train/schema.h"

enum {
  RNG_INIT = 0x1419,
  RNG_ORDER = 0xDA7A32u,  // the epoch's image order, step = epoch
  RNG_FLIP = 0xDA7A33u,   // per-image horizontal flip, step = epoch
  EVAL_BATCH = 32,
};

// The keys this task reads, typed: read_config fills and checks them when
// the task is opened. File names point into the config (used to open).
typedef struct detection_config {
  uint64_t seed;
  ct_data_source source;
  // source = toy
  ct_toy_items toy_items;
  const char *image_dir;  // toy_items = fmnist: the Fashion-MNIST files
  int toy_image_size, toy_classes;
  int64_t toy_train, toy_val;
  ct_toy_detection_sizes toy_sizes;  // 0: the generator's defaults
  // source = files: COCO annotations and image folders, train and val
  const char *coco[2], *coco_images[2];
  int channels, image_size;
  ct_model_arch arch;        // detr or deformable_detr
  ct_nn_detr_config model;   // in_channels, num_classes come from the data
  ct_nn_ddetr_config ddetr;  // the same for deformable_detr
  ct_nn_detr_loss_opts loss;
  int64_t batch_size;
  bool hflip;
} detection_config;

typedef struct detection {
  detection_config cfg;
  ct_image_meta meta;
  ct_nn_detr model;             // arch = detr
  ct_nn_deformable_detr ddetr;  // arch = deformable_detr
  bool model_ready;
  ct_detection_dataset train, val;
  bool have_train, have_val;
  // The training batches: cur is where the next call reads; order holds
  // the permutation of order_epoch.
  ct_batch_cursor cur;
  int64_t batch_size, order_epoch;
  int64_t *order;
} detection;

// ---- data ------------------------------------------------------------------

// [data] keys of the COCO files: annotations and images, train and val.
static const char *const coco_keys[2][2] = {{"coco_train", "coco_train_images"},
                                            {"coco_val", "coco_val_images"}};

static ct_status load_data(detection *d, ct_task_need need) {
  const detection_config *c = &d->cfg;
  ct_status st = CT_OK;
  if (c->source == CT_DATA_SOURCE_TOY) {
    ct_image_dataset items = {0};
    bool fmnist = c->toy_items == CT_TOY_ITEMS_FMNIST;
    if (fmnist) {
      st = ct_idx_load_dir(&items, c->image_dir, true, 10);
      if (st == CT_OK)
        st = ct_image_dataset_set_names(&items, ct_fashion_mnist_class_names,
                                        10);
    }
    if (st == CT_OK && need == CT_TASK_ALL_DATA) {
      st = ct_toy_detection_generate_sized(
          &d->train, c->toy_train, c->toy_image_size, c->toy_classes, c->seed,
          0, fmnist ? &items : NULL, &c->toy_sizes);
      d->have_train = st == CT_OK;
    }
    if (st == CT_OK) {
      st = ct_toy_detection_generate_sized(
          &d->val, c->toy_val, c->toy_image_size, c->toy_classes, c->seed, 1,
          fmnist ? &items : NULL, &c->toy_sizes);
      d->have_val = st == CT_OK;
    }
    ct_image_dataset_free(&items);
    if (st == CT_ERR_ARG) {  // the message names the values, not the keys
      char why[256];
      snprintf(why, sizeof why, "%s", ct_last_error());
      return ct_error(st,
                      "[data] toy_image_size, toy_classes, toy_min_object, "
                      "toy_max_object or toy_max_objects: %s",
                      why);
    }
    return st;
  }
  for (int s = need == CT_TASK_ALL_DATA ? 0 : 1; s < 2 && st == CT_OK; s++) {
    if (!*c->coco[s] || !*c->coco_images[s])
      return ct_error(CT_ERR_ARG,
                      "[data] %s and %s must be set (source = files)",
                      coco_keys[s][0], coco_keys[s][1]);
    st = ct_coco_load(s ? &d->val : &d->train, c->coco[s], c->coco_images[s],
                      c->channels, c->image_size);
    if (s)
      d->have_val = st == CT_OK;
    else
      d->have_train = st == CT_OK;
  }
  return st;
}

// Normalized images (B, C, H, W) of rows idx[0..B) of ds, flipped where
// flip[b]; the targets concatenated in labels/boxes, counts per image.
static ct_tensor *make_batch(const detection *d, const ct_detection_dataset *ds,
                             const int64_t *idx, const bool *flip, int64_t B,
                             int *counts, int32_t *labels, float *boxes) {
  const ct_image_meta *m = &d->meta;
  const int64_t plane = (int64_t)m->H * m->W;
  ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(B, m->C, m->H, m->W));
  if (!x) return NULL;
  int64_t t = 0;
  for (int64_t b = 0; b < B; b++) {
    const uint8_t *src = ct_detection_image(ds, idx[b]);
    for (int c = 0; c < m->C; c++) {
      float *dst = ct_f32(x) + (b * m->C + c) * plane;
      const uint8_t *p = src + c * plane;
      for (int y = 0; y < m->H; y++)
        for (int xx = 0; xx < m->W; xx++) {
          int sx = flip && flip[b] ? m->W - 1 - xx : xx;
          dst[y * m->W + xx] =
              ((float)p[y * m->W + sx] / 255.0f - m->mean[c]) / m->std[c];
        }
    }
    int64_t n = ct_detection_targets(ds, idx[b], labels + t, boxes + 4 * t);
    if (flip && flip[b])
      for (int64_t i = t; i < t + n; i++) boxes[4 * i] = 1.0f - boxes[4 * i];
    counts[b] = (int)n;
    t += n;
  }
  return x;
}

// ---- checkpoint sections, open, close ----------------------------------------

static ct_status detection_save(ct_task *t, ct_ckpt_writer *w) {
  detection *d = t->state;
  return ct_image_meta_save(&d->meta, w);
}

static void detection_close(ct_task *t) {
  detection *d = t->state;
  if (!d) return;
  if (d->model_ready && d->cfg.arch == CT_ARCH_DETR) ct_nn_detr_free(&d->model);
  if (d->model_ready && d->cfg.arch == CT_ARCH_DEFORMABLE_DETR)
    ct_nn_ddetr_free(&d->ddetr);
  ct_detection_dataset_free(&d->train);
  ct_detection_dataset_free(&d->val);
  ct_string_list_free(&d->meta.class_names);
  free(d->order);
  free(d);
  t->state = NULL;
}

// Reads the keys of this task into *out, with the checks whose messages
// name the key that the schema's integer ranges do not already make.
static ct_status read_config(const ct_config *cfg, detection_config *out) {
  // The schema's ranges hold every integer key; batch_size may be 0 for
  // translation (max_tokens alone), not here.
  static const char *const positive[][2] = {{"data", "batch_size"}};
  ct_status checked = ct_config_check_min(cfg, positive, 1, 1);
  if (checked != CT_OK) return checked;
  static const ct_model_arch archs[] = {CT_DETECTION_ARCHS(CT_SCHEMA_VALUE)};
  ct_model_arch arch;
  ct_status known = ct_schema_task_arch(
      cfg, "detection", archs, (int)(sizeof archs / sizeof archs[0]),
      CT_SCHEMA_CHOICES(CT_DETECTION_ARCHS), &arch);
  if (known != CT_OK) return known;
  static const char *const weights[] = {"cost_class", "cost_bbox", "cost_giou",
                                        "eos_coef", "focal_alpha"};
  double w[5];
  for (size_t i = 0; i < 5; i++) {
    w[i] = ct_config_float(cfg, "train", weights[i]);
    if (!(w[i] >= 0.0) || !isfinite(w[i]))
      return ct_error(CT_ERR_ARG, "[train] %s = %g: must not be negative",
                      weights[i], w[i]);
  }
  *out = (detection_config){
      .seed = (uint64_t)ct_config_int(cfg, "run", "seed"),
      .source = CT_SCHEMA_ENUM(cfg, "data", "source", CT_DATA_SOURCES,
                               ct_data_source),
      .toy_items =
          CT_SCHEMA_ENUM(cfg, "data", "toy_items", CT_TOY_ITEMS, ct_toy_items),
      .image_dir = ct_config_str(cfg, "data", "image_dir"),
      .toy_image_size = (int)ct_config_int(cfg, "data", "toy_image_size"),
      .toy_classes = (int)ct_config_int(cfg, "data", "toy_classes"),
      .toy_train = ct_config_int(cfg, "data", "toy_train"),
      .toy_sizes = {(int)ct_config_int(cfg, "data", "toy_min_object"),
                    (int)ct_config_int(cfg, "data", "toy_max_object"),
                    (int)ct_config_int(cfg, "data", "toy_max_objects")},
      .toy_val = ct_config_int(cfg, "data", "toy_val"),
      .channels = (int)ct_config_int(cfg, "data", "channels"),
      .image_size = (int)ct_config_int(cfg, "data", "image_size"),
      .model =
          {
              .backbone_width = ct_config_int(cfg, "model", "width"),
              .backbone_stages = (int)ct_config_int(cfg, "model", "stages"),
              .backbone_blocks = (int)ct_config_int(cfg, "model", "blocks"),
              .d_model = ct_config_int(cfg, "model", "d_model"),
              .nhead = ct_config_int(cfg, "model", "heads"),
              .enc_layers = (int)ct_config_int(cfg, "model", "encoder_layers"),
              .dec_layers = (int)ct_config_int(cfg, "model", "decoder_layers"),
              .dim_feedforward = ct_config_int(cfg, "model", "ff"),
              .dropout = (float)ct_config_float(cfg, "model", "dropout"),
              .num_queries = ct_config_int(cfg, "model", "queries"),
              .aux_loss = ct_config_bool(cfg, "model", "aux_loss"),
          },
      .arch = arch,
      .loss = arch == CT_ARCH_DEFORMABLE_DETR ? ct_nn_ddetr_loss_defaults()
                                              : ct_nn_detr_loss_defaults(),
      .batch_size = ct_config_int(cfg, "data", "batch_size"),
      .hflip = ct_config_bool(cfg, "data", "hflip"),
  };
  for (int s = 0; s < 2; s++) {
    out->coco[s] = ct_config_str(cfg, "data", coco_keys[s][0]);
    out->coco_images[s] = ct_config_str(cfg, "data", coco_keys[s][1]);
  }
  // The same weights match predictions to targets and weigh the loss.
  ct_nn_detr_loss_opts *l = &out->loss;
  l->match.class_w = l->ce_w = w[0];
  l->match.l1_w = l->bbox_w = w[1];
  l->match.giou_w = l->giou_w = w[2];
  l->eos_coef = w[3];
  if (w[4] > 1.0)
    return ct_error(CT_ERR_ARG,
                    "[train] focal_alpha = %g: must be in [0, 1] (the "
                    "weight of the positives in the focal loss)",
                    w[4]);
  l->match.focal_alpha = w[4];
  const ct_nn_detr_config *m = &out->model;
  out->ddetr = (ct_nn_ddetr_config){
      .backbone_width = m->backbone_width,
      .backbone_stages = m->backbone_stages,
      .backbone_blocks = m->backbone_blocks,
      .d_model = m->d_model,
      .nhead = m->nhead,
      .enc_layers = m->enc_layers,
      .dec_layers = m->dec_layers,
      .dim_feedforward = m->dim_feedforward,
      .dropout = m->dropout,
      .num_queries = m->num_queries,
      .n_levels = (int)ct_config_int(cfg, "model", "n_levels"),
      .n_points = (int)ct_config_int(cfg, "model", "n_points"),
      .aux_loss = m->aux_loss,
      .box_refine = ct_config_bool(cfg, "model", "box_refine")};
  if (arch == CT_ARCH_DEFORMABLE_DETR &&
      (out->ddetr.d_model % CT_NN_DDETR_GROUPS ||
       out->ddetr.d_model % out->ddetr.nhead))
    return ct_error(CT_ERR_ARG,
                    "[model] d_model = %lld: deformable_detr needs a multiple "
                    "of %d (GroupNorm's groups) and of heads = %lld",
                    (long long)out->ddetr.d_model, (int)CT_NN_DDETR_GROUPS,
                    (long long)out->ddetr.nhead);
  if (arch != CT_ARCH_DEFORMABLE_DETR &&
      (ct_config_bool(cfg, "model", "box_refine")))
    return ct_error(CT_ERR_ARG,
                    "[model] box_refine = true: only deformable_detr refines "
                    "boxes (arch = %s)",
                    ct_config_text(cfg, "model", "arch"));
  return CT_OK;
}

static ct_status detection_open(ct_task *t, const ct_config *cfg, ct_params *p,
                                const ct_ckpt *ckpt, ct_task_need need) {
  detection_config c;
  ct_status st = read_config(cfg, &c);
  if (st != CT_OK) return st;
  detection *d = calloc(1, sizeof *d);
  if (!d) return ct_error(CT_ERR_NOMEM, "detection: out of memory");
  t->state = d;
  t->cursor = &d->cur;
  d->cfg = c;
  d->order_epoch = -1;
  if (need != CT_TASK_MODEL_ONLY) st = load_data(d, need);
  if (st != CT_OK) return st;
  if (ckpt) {
    st = ct_image_meta_load(&d->meta, ckpt);
  } else {
    if (!d->have_train)
      return ct_error(CT_ERR_STATE, "detection: no training data");
    const ct_detection_dataset *s = &d->train;
    d->meta.C = s->C;
    d->meta.H = s->H;
    d->meta.W = s->W;
    d->meta.K = s->K;
    for (int k = 0; k < s->K && st == CT_OK; k++) {
      const char *name = ct_string_list_get(&s->class_names, k);
      st = ct_string_list_push(&d->meta.class_names, name, strlen(name));
    }
    ct_image_meta_stats(&d->meta, s->pixels, s->N, s->C, (int64_t)s->H * s->W);
  }
  if (st != CT_OK) return st;
  const ct_detection_dataset *sets[2] = {&d->train, &d->val};
  for (int i = 0; i < 2; i++)
    if (sets[i]->N && (sets[i]->C != d->meta.C || sets[i]->H != d->meta.H ||
                       sets[i]->W != d->meta.W || sets[i]->K > d->meta.K))
      return ct_error(CT_ERR_ARG,
                      "detection: the %s images are %dx%dx%d with %d "
                      "classes, the model takes %dx%dx%d with %d",
                      i ? "validation" : "training", sets[i]->C, sets[i]->H,
                      sets[i]->W, sets[i]->K, d->meta.C, d->meta.H, d->meta.W,
                      d->meta.K);
  ct_rng init = ct_rng_make(c.seed, ct_rng_stream(RNG_INIT, 0));
  if (c.arch == CT_ARCH_DEFORMABLE_DETR) {
    ct_nn_ddetr_config mc = c.ddetr;
    mc.in_channels = d->meta.C;
    mc.num_classes = d->meta.K;
    st = ct_nn_ddetr_init(&d->ddetr, p, "", &mc, &init);
  } else {
    ct_nn_detr_config mc = c.model;
    mc.in_channels = d->meta.C;
    mc.num_classes = d->meta.K;
    st = ct_nn_detr_init(&d->model, p, "", &mc, &init);
  }
  d->model_ready = true;
  if (st != CT_OK || need != CT_TASK_ALL_DATA) return st;
  d->cur.batches = d->train.N / c.batch_size;
  if (d->cur.batches < 1)
    return ct_error(CT_ERR_ARG,
                    "[data] batch_size = %lld is larger than the %lld "
                    "training images",
                    (long long)c.batch_size, (long long)d->train.N);
  d->order = malloc((size_t)d->train.N * sizeof *d->order);
  return d->order ? CT_OK : ct_error(CT_ERR_NOMEM, "detection: out of memory");
}

static int64_t detection_model_width(const ct_task *t) {
  const detection *d = t->state;
  return d->cfg.model.d_model;
}

// ---- training ------------------------------------------------------------------

// The model's forward pass, whichever the arch.
static ct_status model_forward(const detection *d, ct_nn_ctx *ctx,
                               ct_tensor *images, ct_nn_detr_out *out) {
  if (d->cfg.arch == CT_ARCH_DEFORMABLE_DETR)
    return ct_nn_ddetr_forward(&d->ddetr, ctx, images, out);
  return ct_nn_detr_forward(&d->model, ctx, images, out);
}

static int64_t num_queries(const detection *d) {
  return d->cfg.model.num_queries;
}

// Class scores of logits (B, N, K + 1) or, with the focal loss, (B, N, K):
// softmax probabilities or sigmoid scores.
static ct_tensor *class_scores(const detection *d, ct_tensor *logits) {
  return d->cfg.loss.match.focal ? ct_sigmoid(logits) : ct_softmax(logits);
}

static ct_tensor *detection_train_loss(ct_task *t, ct_nn_ctx *ctx,
                                       double *items) {
  detection *d = t->state;
  const int64_t B = d->cfg.batch_size;
  int64_t epoch;
  const int64_t *idx =
      ct_batch_cursor_next(&d->cur, d->order, &d->order_epoch, d->train.N, B,
                           d->cfg.seed, RNG_ORDER, &epoch);
  int64_t T = 0;
  for (int64_t b = 0; b < B; b++)
    T += ct_detection_box_count(&d->train, idx[b]);
  int *counts = ct_arena_alloc((size_t)B * sizeof *counts);
  int32_t *labels = ct_arena_alloc((size_t)(T ? T : 1) * sizeof *labels);
  float *boxes = ct_arena_alloc((size_t)(T ? T : 1) * 4 * sizeof *boxes);
  bool *flip = ct_arena_alloc((size_t)B * sizeof *flip);
  if (!counts || !labels || !boxes || !flip) {
    ct_error(CT_ERR_NOMEM, "detection: out of memory");
    return NULL;
  }
  uint64_t stream = ct_rng_stream(RNG_FLIP, (uint64_t)epoch);
  for (int64_t b = 0; b < B; b++)
    flip[b] = d->cfg.hflip &&
              ct_rng_uniform_at(d->cfg.seed, stream, (uint64_t)idx[b]) < 0.5f;
  ct_tensor *x = make_batch(d, &d->train, idx, flip, B, counts, labels, boxes);
  *items = (double)B;
  ct_nn_detr_out out;
  if (!x || model_forward(d, ctx, x, &out) != CT_OK) return NULL;
  ct_nn_detr_targets tg = {
      .batch = (int)B, .counts = counts, .labels = labels, .boxes = boxes};
  return ct_nn_detr_loss(&out, out.layers, &tg, &d->cfg.loss, NULL);
}

// ---- prediction and evaluation -------------------------------------------------

// Detections per image: DETR's one per query (its best object class under
// the softmax, "no object" left out); with the focal loss, as the
// Deformable DETR reference's PostProcess, the DETECTIONS_MAX (query, class)
// pairs of highest sigmoid score, so a query unsure between two classes
// reports both.
enum { DETECTIONS_MAX = 100 };

static int64_t num_detections(const detection *d) {
  const int64_t N = num_queries(d);
  if (!d->cfg.loss.match.focal) return N;
  const int64_t pairs = N * d->meta.K;
  return pairs < DETECTIONS_MAX ? pairs : DETECTIONS_MAX;
}

// The final layer's num_detections(d) detections of image b, boxes as pixel
// corners. `pairs` has room for N * K entries (focal loss only): the
// (query, class) pairs at position q * K + k, sorted by score.
static void predictions(const detection *d, const ct_tensor *probs,
                        const ct_tensor *boxes, int64_t b, ct_scored *pairs,
                        ct_map_box *out) {
  const int64_t N = probs->shape[1], K1 = probs->shape[2];
  const float *p = ct_f32(probs) + b * N * K1;
  const float *bx = ct_f32(boxes) + b * N * 4;
  if (!d->cfg.loss.match.focal) {
    for (int64_t q = 0; q < N; q++) {
      int best = 0;
      for (int k = 1; k < K1 - 1; k++)
        if (p[q * K1 + k] > p[q * K1 + best]) best = k;
      out[q].label = best;
      out[q].score = p[q * K1 + best];
      ct_detection_cxcywh_to_pixels(bx + q * 4, 1, d->meta.W, d->meta.H,
                                    out[q].box);
    }
    return;
  }
  for (int64_t i = 0; i < N * K1; i++)
    pairs[i] = (ct_scored){.score = p[i], .pos = i};
  qsort(pairs, (size_t)(N * K1), sizeof *pairs, ct_scored_cmp);
  const int64_t D = num_detections(d);
  for (int64_t i = 0; i < D; i++) {
    const int64_t q = pairs[i].pos / K1;
    out[i].label = (int32_t)(pairs[i].pos % K1);
    out[i].score = pairs[i].score;
    ct_detection_cxcywh_to_pixels(bx + q * 4, 1, d->meta.W, d->meta.H,
                                  out[i].box);
  }
}

// Evaluation, EVAL_BATCH images per unit of the split over ranks
// (train/dist.h): a unit's result is its final-layer loss times its boxes,
// its boxes, and every image's detections; the fold adds them to the loss
// and the mAP evaluation in image order.
typedef struct eval_units {
  detection *d;
  const ct_detection_dataset *ds;
  int64_t n;  // images evaluated
  ct_map_eval map;
  ct_map_box *gts, *dets;
  double loss_sum;
  int64_t boxes_total;
} eval_units;

static ct_status eval_unit(void *arg, int64_t unit, ct_byte_buffer *out) {
  eval_units *ev = arg;
  detection *d = ev->d;
  const int64_t start = unit * EVAL_BATCH;
  const int64_t B = ev->n - start < EVAL_BATCH ? ev->n - start : EVAL_BATCH;
  const int64_t N = num_queries(d), D = num_detections(d);
  ct_arena_mark mark = ct_arena_get_mark();
  int64_t idx[EVAL_BATCH], T = 0;
  for (int64_t b = 0; b < B; b++) {
    idx[b] = start + b;
    T += ct_detection_box_count(ev->ds, idx[b]);
  }
  int counts[EVAL_BATCH];
  int32_t *labels = ct_arena_alloc((size_t)(T ? T : 1) * sizeof *labels);
  float *boxes = ct_arena_alloc((size_t)(T ? T : 1) * 4 * sizeof *boxes);
  ct_map_box *dets = ct_arena_alloc((size_t)D * sizeof *dets);
  ct_scored *pairs =
      ct_arena_alloc((size_t)N * (size_t)d->meta.K * sizeof *pairs);
  ct_tensor *x =
      labels && boxes && dets && pairs
          ? make_batch(d, ev->ds, idx, NULL, B, counts, labels, boxes)
          : NULL;
  ct_nn_detr_out o;
  if (!x || model_forward(d, NULL, x, &o) != CT_OK) {
    ct_arena_rewind(mark);
    return ct_last_status();
  }
  ct_nn_detr_targets tg = {
      .batch = (int)B, .counts = counts, .labels = labels, .boxes = boxes};
  // The loss of the final layer, weighted by the batch's boxes.
  ct_nn_detr_loss_parts parts;
  ct_nn_detr_out last = {.layers = 1,
                         .logits = {o.logits[o.layers - 1]},
                         .boxes = {o.boxes[o.layers - 1]}};
  ct_tensor *l = ct_nn_detr_loss(&last, 1, &tg, &d->cfg.loss, &parts);
  ct_tensor *probs = class_scores(d, last.logits[0]);
  if (!l || !probs) {
    ct_arena_rewind(mark);
    return ct_last_status();
  }
  double loss = (double)ct_f32(l)[0] * parts.num_boxes;
  int64_t num_boxes = parts.num_boxes;
  ct_byte_buffer_append(out, &loss, sizeof loss);
  ct_byte_buffer_append(out, &num_boxes, sizeof num_boxes);
  for (int64_t b = 0; b < B; b++) {
    predictions(d, probs, last.boxes[0], b, pairs, dets);
    ct_byte_buffer_append(out, dets, (size_t)D * sizeof *dets);
  }
  ct_arena_rewind(mark);
  return CT_OK;
}

static ct_status eval_fold(void *arg, int64_t unit, const void *data,
                           size_t len) {
  eval_units *ev = arg;
  const int64_t start = unit * EVAL_BATCH;
  const int64_t B = ev->n - start < EVAL_BATCH ? ev->n - start : EVAL_BATCH;
  const int64_t D = num_detections(ev->d);
  const size_t head = sizeof(double) + sizeof(int64_t);
  if (len != head + (size_t)(B * D) * sizeof(ct_map_box))
    return ct_error(CT_ERR_STATE, "evaluate: a batch's result is cut short");
  double loss;
  int64_t num_boxes;
  memcpy(&loss, data, sizeof loss);
  memcpy(&num_boxes, (const char *)data + sizeof loss, sizeof num_boxes);
  ev->loss_sum += loss;
  ev->boxes_total += num_boxes;
  ct_status st = CT_OK;
  for (int64_t b = 0; b < B && st == CT_OK; b++) {
    int64_t image = start + b;
    memcpy(ev->dets,
           (const char *)data + head + (size_t)(b * D) * sizeof *ev->dets,
           (size_t)D * sizeof *ev->dets);
    int64_t ng = ct_detection_box_count(ev->ds, image);
    const ct_detection_box *g = ct_detection_boxes(ev->ds, image);
    for (int64_t i = 0; i < ng; i++) {
      ev->gts[i].label = g[i].label;
      ev->gts[i].score = 1.0f;
      ct_detection_box_xyxy(&g[i], ev->gts[i].box);
    }
    st = ct_map_eval_add_image(&ev->map, ev->dets, (int)D, ev->gts, (int)ng);
  }
  return st;
}

static ct_status detection_evaluate(ct_task *t, const char *split, int beam,
                                    int64_t limit, ct_eval_metrics *out,
                                    FILE *summary) {
  (void)beam;
  detection *d = t->state;
  if (!strcmp(split, "test"))
    return ct_error(CT_ERR_ARG,
                    "detection: there is no test split; evaluate "
                    "--split val (the toy validation set, or [data] coco_val)");
  if (!d->have_val)
    return ct_error(CT_ERR_ARG, "detection: no validation data");
  eval_units ev = {.d = d, .ds = &d->val};
  ev.n = limit > 0 && limit < ev.ds->N ? limit : ev.ds->N;
  ct_status st = ct_map_eval_init(&ev.map, d->meta.K);
  if (st != CT_OK) return st;
  ev.gts = malloc((size_t)(ct_detection_max_boxes(ev.ds) + 1) * sizeof *ev.gts);
  ev.dets = malloc((size_t)num_detections(d) * sizeof *ev.dets);
  if (!ev.gts || !ev.dets)
    st = ct_error(CT_ERR_NOMEM, "detection: out of memory");
  bool was = ct_grad_set_enabled(false);
  if (st == CT_OK)
    st = ct_dist_for_units((ev.n + EVAL_BATCH - 1) / EVAL_BATCH, eval_unit,
                           eval_fold, &ev);
  ct_grad_set_enabled(was);
  double map50 = 0.0, map = 0.0;
  // COCO's small / medium / large split, scaled to the image's area
  // (train/detection_eval.h); -1 where the split has no ground truth.
  static const char *const area_keys[CT_MAP_AREAS][2] = {
      {NULL, NULL},
      {"map50_small", "map_small"},
      {"map50_medium", "map_medium"},
      {"map50_large", "map_large"}};
  double area50[CT_MAP_AREAS], area_map[CT_MAP_AREAS];
  if (st == CT_OK) st = ct_map_compute(&ev.map, &map50, &map);
  for (int a = 1; a < CT_MAP_AREAS && st == CT_OK; a++) {
    double range[2];
    ct_map_area_range((ct_map_area)a, (double)d->meta.H * d->meta.W, range);
    st = ct_map_compute_area(&ev.map, range, &area50[a], &area_map[a]);
  }
  if (st == CT_OK) {
    double loss = ev.boxes_total ? ev.loss_sum / (double)ev.boxes_total : 0.0;
    ct_eval_metrics_add(out, "loss", loss);
    ct_eval_metrics_add(out, "map50", map50);
    ct_eval_metrics_add(out, "map", map);
    for (int a = 1; a < CT_MAP_AREAS; a++) {
      ct_eval_metrics_add(out, area_keys[a][0], area50[a]);
      ct_eval_metrics_add(out, area_keys[a][1], area_map[a]);
    }
    ct_eval_metrics_add_count(out, "images", ev.n);
    if (summary)
      fprintf(summary,
              "%s: %lld images, %lld boxes, loss %.4f, mAP@0.5 %.4f, "
              "mAP@[.5:.95] %.4f\n",
              split, (long long)ev.n, (long long)ev.boxes_total, loss, map50,
              map);
  }
  ct_map_eval_free(&ev.map);
  free(ev.gts);
  free(ev.dets);
  return st;
}

// ---- detect -----------------------------------------------------------------------

ct_status ct_detection_detect(ct_task *t, const char *const *paths, int n,
                              float threshold, const char *out_png, FILE *out) {
  detection *d = t->state;
  const ct_image_meta *m = &d->meta;
  const int64_t pixels = (int64_t)m->C * m->H * m->W, N = num_queries(d),
                D = num_detections(d);
  uint8_t *raw = malloc((size_t)pixels);
  ct_map_box *dets = malloc((size_t)D * sizeof *dets);
  ct_scored *pairs = malloc((size_t)N * (size_t)m->K * sizeof *pairs);
  float *draw_boxes = malloc((size_t)D * 4 * sizeof *draw_boxes);
  int *draw_labels = malloc((size_t)D * sizeof *draw_labels);
  char(*captions)[64] = malloc((size_t)D * sizeof *captions);
  const char **caption_ptr = malloc((size_t)D * sizeof *caption_ptr);
  ct_status st = raw && dets && pairs && draw_boxes && draw_labels &&
                         captions && caption_ptr
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "detect: out of memory");
  bool was = ct_grad_set_enabled(false);
  for (int i = 0; i < n && st == CT_OK; i++) {
    // The file's own size, to report boxes in its pixels.
    uint8_t *orig = NULL;
    int oh = 0, ow = 0;
    st = ct_png_decode(paths[i], m->C, &orig, &oh, &ow);
    free(orig);
    if (st == CT_OK) st = ct_png_read_image(paths[i], m->C, m->H, m->W, raw);
    if (st != CT_OK) break;
    ct_arena_mark mark = ct_arena_get_mark();
    ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(1, m->C, m->H, m->W));
    const int64_t plane = (int64_t)m->H * m->W;
    for (int64_t p = 0; x && p < pixels; p++)
      ct_f32(x)[p] =
          ((float)raw[p] / 255.0f - m->mean[p / plane]) / m->std[p / plane];
    ct_nn_detr_out o;
    ct_tensor *probs = NULL;
    if (x && model_forward(d, NULL, x, &o) == CT_OK)
      probs = class_scores(d, o.logits[o.layers - 1]);
    if (!probs) {
      st = ct_last_status();
      ct_arena_rewind(mark);
      break;
    }
    predictions(d, probs, o.boxes[o.layers - 1], 0, pairs, dets);
    int kept = 0;
    fprintf(out, "%s:", paths[i]);
    for (int64_t q = 0; q < D; q++) {
      if (dets[q].score < threshold) continue;
      const char *name = ct_string_list_get(&m->class_names, dets[q].label);
      float sx = (float)ow / (float)m->W, sy = (float)oh / (float)m->H;
      fprintf(out, "%s %s %.3f [%.1f %.1f %.1f %.1f]", kept ? "," : "", name,
              (double)dets[q].score, (double)(dets[q].box[0] * sx),
              (double)(dets[q].box[1] * sy), (double)(dets[q].box[2] * sx),
              (double)(dets[q].box[3] * sy));
      memcpy(draw_boxes + 4 * kept, dets[q].box, 4 * sizeof(float));
      draw_labels[kept] = dets[q].label;
      snprintf(captions[kept], sizeof captions[kept], "%s %.2f", name,
               (double)dets[q].score);
      caption_ptr[kept] = captions[kept];
      kept++;
    }
    fprintf(out, "%s\n", kept ? "" : " nothing above the threshold");
    ct_arena_rewind(mark);
    if (i == 0 && out_png) {
      st = ct_plot_boxes_png(out_png, raw, m->C, m->H, m->W, kept, draw_boxes,
                             draw_labels, caption_ptr);
      if (st == CT_OK) fprintf(out, "boxes drawn: %s\n", out_png);
    }
  }
  ct_grad_set_enabled(was);
  free(raw);
  free(dets);
  free(pairs);
  free(draw_boxes);
  free(draw_labels);
  free(captions);
  free(caption_ptr);
  return st;
}

// DETR's recipe, scaled to the small generated set (see the README).
static const char *const detection_defaults[][3] = {
    {"model", "arch", "detr"},        {"optim", "optimizer", "adamw"},
    {"optim", "lr", "2e-4"},          {"optim", "beta2", "0.999"},
    {"optim", "eps", "1e-8"},         {"optim", "weight_decay", "1e-4"},
    {"optim", "clip_norm", "0.1"},    {"schedule", "kind", "cosine"},
    {"schedule", "warmup", "200"},    {"model", "d_model", "128"},
    {"model", "heads", "4"},          {"model", "ff", "512"},
    {"model", "encoder_layers", "3"}, {"model", "decoder_layers", "3"},
    {"model", "width", "16"},         {"data", "toy_image_size", "64"},
    {"data", "toy_train", "4000"},    {"data", "toy_val", "200"},
    {"data", "batch_size", "32"},     {"data", "channels", "1"},
    {"train", "eval_every", "0"},     {NULL, NULL, NULL}};

// Deformable DETR's recipe where it differs (the reference's main.py: class
// cost and loss weight 2; lr_linear_proj_mult 0.1 for sampling_offsets and
// reference_points; its dropout 0.1 is left to the config). Not its
// lr_backbone 2e-5 = 0.1 lr: that is for an ImageNet-trained ResNet-50, and
// this backbone starts from scratch (with it, the toy config's mAP@0.5 at
// step 250 was 0.13 instead of 0.30: README, Deformable DETR).
static const char *const detection_arch_defaults[][4] = {
    {"deformable_detr", "train", "cost_class", "2"},
    {"deformable_detr", "optim", "lr_mult",
     "sampling_offsets:0.1,reference_points:0.1"},
    {NULL, NULL, NULL, NULL}};

const ct_task_ops ct_task_detection = {
    .name = "detection",
    .rate_unit = "img/s",
    .best_metric = "map",
    .defaults = detection_defaults,
    .arch_defaults = detection_arch_defaults,
    .open = detection_open,
    .model_width = detection_model_width,
    .save = detection_save,
    .train_loss = detection_train_loss,
    .data_position = ct_task_cursor_position,
    .data_seek = ct_task_cursor_seek,
    .data_stride = ct_task_cursor_stride,
    .epoch_batches = ct_task_cursor_epoch_batches,
    .evaluate = detection_evaluate,
    .close = detection_close,
};
