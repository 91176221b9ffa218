// The image captioning task (see captioning.h).
#include "train/captioning.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/rng.h"
#include "data/captions.h"
#include "data/png_folder.h"
#include "data/stride.h"
#include "nn/captioner.h"
#include "train/bleu.h"
#include "train/caption_data.h"
#include "train/checkpoint_folder.h"
#include "train/decode.h"
#include "train/dist.h"
#include "train/image_meta.h"
#include "train/plot.h"
#include "train/run.h"
#include "train/schema.h"

enum {
  RNG_INIT = 0x1422,
  RNG_ORDER = 0xDA7A43u,  // the epoch's pair order, step = epoch
  EVAL_BATCH = 32,
  SPLITS = 3,  // train, val, test
};

// The keys this task reads, typed: read_config fills and checks them when
// the task is opened. Strings point into the config.
typedef struct captioning_config {
  ct_caption_data_config data;  // seed, source, toy_*, files, image size
  ct_tokenizer_kind tokenizer;
  bool lowercase;
  int64_t min_freq, max_vocab;
  ct_nn_captioner_config model;  // vocab and in_channels from the data
  const char *encoder_init;
  float attention_reg, label_smoothing, length_penalty;
  int64_t batch_size, max_decode_len;
} captioning_config;

typedef struct captioning {
  captioning_config cfg;
  ct_image_meta meta;  // classes: the training split's object names
  ct_text_tokenizer tok;
  ct_vocab vocab;
  ct_nn_captioner *model;
  ct_caption_dataset sets[SPLITS];
  bool have[SPLITS];
  // Training pairs: caption j of the training split (its ids) and its image.
  ct_caption_ids train_ids;
  int64_t *pair_image;
  // The training batches: cur is where the next call reads; order holds
  // the permutation of order_epoch.
  ct_batch_cursor cur;
  int64_t order_epoch;
  int64_t *order;
} captioning;

// ---- data ------------------------------------------------------------------

static ct_status load_data(captioning *cp, ct_task_need need) {
  return ct_caption_data_load(&cp->cfg.data, need == CT_TASK_ALL_DATA ? 0 : 1,
                              cp->sets, cp->have);
}

// Normalized images (B, C, H, W) of rows idx[0..B) of ds.
static ct_tensor *image_batch(const ct_image_meta *m,
                              const ct_caption_dataset *ds, const int64_t *idx,
                              int64_t B) {
  const int64_t plane = (int64_t)m->H * m->W;
  ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(B, m->C, m->H, m->W));
  if (!x) return NULL;
  for (int64_t b = 0; b < B; b++) {
    const uint8_t *src = ct_caption_image(ds, idx[b]);
    for (int c = 0; c < m->C; c++) {
      float *dst = ct_f32(x) + (b * m->C + c) * plane;
      for (int64_t p = 0; p < plane; p++)
        dst[p] = ((float)src[c * plane + p] / 255.0f - m->mean[c]) / m->std[c];
    }
  }
  return x;
}

// ---- checkpoint sections, open, close ----------------------------------------

static ct_status captioning_save(ct_task *t, ct_ckpt_writer *w) {
  captioning *cp = t->state;
  char *buf;
  size_t size;
  ct_status st = ct_image_meta_save(&cp->meta, w);
  if (st == CT_OK) st = ct_vocab_save(&cp->vocab, &buf, &size);
  if (st != CT_OK) return st;
  st = ct_ckpt_writer_add(w, "vocab.captions", buf, size);
  free(buf);
  return st;
}

static void captioning_close(ct_task *t) {
  captioning *cp = t->state;
  if (!cp) return;
  if (cp->model) ct_nn_captioner_free(cp->model);
  for (int s = 0; s < SPLITS; s++) ct_caption_dataset_free(&cp->sets[s]);
  ct_caption_ids_free(&cp->train_ids);
  ct_text_tokenizer_free(&cp->tok);
  ct_vocab_free(&cp->vocab);
  ct_string_list_free(&cp->meta.class_names);
  free(cp->pair_image);
  free(cp->order);
  free(cp);
  t->state = NULL;
}

// Reads the keys of this task into *out, with the checks whose messages
// name the key that the schema's integer ranges do not already make.
static ct_status read_config(const ct_config *cfg, captioning_config *out) {
  static const char *const positive[][2] = {{"data", "batch_size"}};
  ct_status checked = ct_config_check_min(cfg, positive, 1, 1);
  if (checked != CT_OK) return checked;
  const double dropout = ct_config_float(cfg, "model", "dropout");
  const double reg = ct_config_float(cfg, "train", "attention_reg");
  const double smoothing = ct_config_float(cfg, "train", "label_smoothing");
  *out = (captioning_config){
      .tokenizer = CT_SCHEMA_ENUM(cfg, "data", "tokenizer", CT_TOKENIZERS,
                                  ct_tokenizer_kind),
      .lowercase = ct_config_bool(cfg, "data", "lowercase"),
      .min_freq = ct_config_int(cfg, "data", "min_freq"),
      .max_vocab = ct_config_int(cfg, "data", "max_vocab"),
      .model =
          {
              .encoder =
                  {
                      .width = ct_config_int(cfg, "model", "width"),
                      .stages = (int)ct_config_int(cfg, "model", "stages"),
                      .blocks = (int)ct_config_int(cfg, "model", "blocks"),
                  },
              .embed_dim = ct_config_int(cfg, "model", "embed_dim"),
              .hidden = ct_config_int(cfg, "model", "hidden"),
              .attn_dim = ct_config_int(cfg, "model", "attn_dim"),
              .dropout = (float)dropout,
          },
      .encoder_init = ct_config_str(cfg, "model", "encoder_init"),
      .attention_reg = (float)reg,
      .label_smoothing = (float)smoothing,
      .length_penalty = (float)ct_config_float(cfg, "train", "length_penalty"),
      .batch_size = ct_config_int(cfg, "data", "batch_size"),
      .max_decode_len = ct_config_int(cfg, "train", "max_decode_len"),
  };
  ct_status data = ct_caption_data_read_config(cfg, &out->data);
  if (data != CT_OK) return data;
  if (out->tokenizer == CT_TOKENIZER_BPE)
    return ct_error(CT_ERR_ARG,
                    "[data] tokenizer = bpe: captioning tokenizes words or "
                    "characters (word|char)");
  if (out->data.source == CT_DATA_SOURCE_TOY &&
      (out->data.toy_image_size < 32 || out->data.toy_image_size > 512))
    return ct_error(CT_ERR_ARG,
                    "[data] toy_image_size = %d: generated captioning images "
                    "are 32..512 pixels",
                    out->data.toy_image_size);
  if (!(dropout >= 0.0 && dropout < 1.0))
    return ct_error(CT_ERR_ARG, "[model] dropout = %g: must be in [0, 1)",
                    dropout);
  if (!(reg >= 0.0) || !isfinite(reg))
    return ct_error(CT_ERR_ARG,
                    "[train] attention_reg = %g: must be finite and not "
                    "negative",
                    reg);
  if (!(smoothing >= 0.0 && smoothing < 1.0))
    return ct_error(CT_ERR_ARG,
                    "[train] label_smoothing = %g: must be in [0, 1)",
                    smoothing);
  return CT_OK;
}

// Copies a classification ResNet's weights (all but its fc) into the
// encoder of a new run: [model] encoder_init.
static ct_status init_encoder(const char *path, ct_params *p) {
  ct_ckpt_latest latest = {0};
  struct stat sb;
  const char *file = path;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    if (ct_ckpt_find_latest(path, &latest) != CT_OK || !latest.path) {
      ct_ckpt_latest_free(&latest);
      return ct_error(CT_ERR_IO,
                      "[model] encoder_init = %s: no valid checkpoint in this "
                      "run folder",
                      path);
    }
    file = latest.path;
  }
  ct_run_model src;
  ct_status st = ct_run_model_open(&src, file, CT_TASK_MODEL_ONLY);
  ct_ckpt_latest_free(&latest);
  if (st != CT_OK)
    return ct_error(st, "[model] encoder_init: %s", ct_last_error());
  if (src.task.ops != &ct_task_classification ||
      CT_SCHEMA_ENUM(src.cfg, "model", "arch", CT_MODEL_ARCHS, ct_model_arch) !=
          CT_ARCH_RESNET)
    st = ct_error(CT_ERR_ARG,
                  "[model] encoder_init = %s: a %s checkpoint, not a "
                  "classification resnet",
                  path, src.task.ops->name);
  // Every encoder tensor must come from the checkpoint, with its shape.
  for (int i = 0; i < p->n && st == CT_OK; i++) {
    const char *name = p->items[i].name;
    if (strncmp(name, "encoder.", 8)) continue;
    const ct_param *from = ct_params_find(&src.params, name + 8);
    const ct_tensor *to = p->items[i].tensor;
    if (!from || from->tensor->numel != to->numel) {
      st = ct_error(CT_ERR_ARG,
                    "[model] encoder_init = %s: %s %s (the ResNet's width, "
                    "stages and blocks must match [model])",
                    path, name + 8,
                    from ? "has another shape" : "is not in the checkpoint");
      break;
    }
    memcpy(ct_f32(to), ct_f32(from->tensor), (size_t)to->numel * sizeof(float));
  }
  ct_run_model_close(&src);
  if (st == CT_OK)
    fprintf(stderr, "ctrain: encoder initialized from %s\n", path);
  return st;
}

// The vocabulary of the training captions, or the checkpoint's.
static ct_status open_vocab(captioning *cp, const ct_ckpt *ckpt) {
  return ct_caption_data_vocab(&cp->vocab, &cp->sets[0], &cp->tok,
                               cp->cfg.min_freq, cp->cfg.max_vocab, ckpt);
}

// The image side of the checkpoint: size, normalization, object names.
static ct_status open_meta(captioning *cp, const ct_ckpt *ckpt) {
  return ct_caption_data_meta(&cp->meta, &cp->sets[0], ckpt);
}

// The training pairs and their batches.
static ct_status open_batches(captioning *cp) {
  const ct_caption_dataset *s = &cp->sets[0];
  ct_status st = ct_captions_encode(s, &cp->tok, &cp->vocab, &cp->train_ids);
  if (st != CT_OK) return st;
  int64_t n = cp->train_ids.n;
  cp->pair_image = malloc((size_t)(n ? n : 1) * sizeof *cp->pair_image);
  cp->order = malloc((size_t)(n ? n : 1) * sizeof *cp->order);
  if (!cp->pair_image || !cp->order)
    return ct_error(CT_ERR_NOMEM, "captioning: out of memory");
  for (int64_t i = 0; i < s->N; i++)
    for (int64_t j = s->caption_start[i]; j < s->caption_start[i + 1]; j++)
      cp->pair_image[j] = i;
  cp->cur.batches = n / cp->cfg.batch_size;
  if (cp->cur.batches < 1)
    return ct_error(CT_ERR_ARG,
                    "[data] batch_size = %lld is larger than the %lld "
                    "training captions",
                    (long long)cp->cfg.batch_size, (long long)n);
  return CT_OK;
}

static ct_status captioning_open(ct_task *t, const ct_config *cfg, ct_params *p,
                                 const ct_ckpt *ckpt, ct_task_need need) {
  captioning_config c;
  ct_status st = read_config(cfg, &c);
  if (st != CT_OK) return st;
  captioning *cp = calloc(1, sizeof *cp);
  if (!cp) return ct_error(CT_ERR_NOMEM, "captioning: out of memory");
  t->state = cp;
  t->cursor = &cp->cur;
  cp->cfg = c;
  cp->order_epoch = -1;
  ct_text_tokenizer_init(&cp->tok, c.tokenizer, c.lowercase);
  if (need != CT_TASK_MODEL_ONLY) st = load_data(cp, need);
  if (st == CT_OK && !ckpt && !cp->have[0])
    st = ct_error(CT_ERR_STATE, "captioning: no training data");
  if (st == CT_OK) st = open_meta(cp, ckpt);
  if (st == CT_OK) st = open_vocab(cp, ckpt);
  if (st != CT_OK) return st;
  for (int s = 0; s < SPLITS; s++) {
    const ct_caption_dataset *d = &cp->sets[s];
    if (cp->have[s] &&
        (d->C != cp->meta.C || d->H != cp->meta.H || d->W != cp->meta.W))
      return ct_error(CT_ERR_ARG,
                      "captioning: the %s images are %dx%dx%d, the model "
                      "takes %dx%dx%d",
                      ct_caption_split_names[s], d->C, d->H, d->W, cp->meta.C,
                      cp->meta.H, cp->meta.W);
  }
  ct_nn_captioner_config mc = c.model;
  mc.encoder.in_channels = cp->meta.C;
  mc.encoder.num_classes = 0;
  mc.vocab = ct_vocab_size(&cp->vocab);
  ct_rng init = ct_rng_make(c.data.seed, ct_rng_stream(RNG_INIT, 0));
  st = ct_nn_captioner_init(&cp->model, p, "", &mc, &init);
  if (st != CT_OK || need != CT_TASK_ALL_DATA) return st;
  if (!ckpt && *c.encoder_init) st = init_encoder(c.encoder_init, p);
  if (st == CT_OK) st = open_batches(cp);
  return st;
}

static int64_t captioning_model_width(const ct_task *t) {
  const captioning *cp = t->state;
  return cp->cfg.model.hidden;
}

// ---- training ------------------------------------------------------------------

static ct_tensor *captioning_train_loss(ct_task *t, ct_nn_ctx *ctx,
                                        double *items) {
  captioning *cp = t->state;
  const ct_caption_ids *ids = &cp->train_ids;
  const int64_t B = cp->cfg.batch_size;
  int64_t epoch;
  const int64_t *pairs =
      ct_batch_cursor_next(&cp->cur, cp->order, &cp->order_epoch, ids->n, B,
                           cp->cfg.data.seed, RNG_ORDER, &epoch);
  // T = the longest caption + 1: <bos> w1..wn in, w1..wn <eos> out.
  int64_t T = 0;
  for (int64_t b = 0; b < B; b++) {
    int64_t len = ids->start[pairs[b] + 1] - ids->start[pairs[b]];
    if (len + 1 > T) T = len + 1;
  }
  int64_t *images = ct_arena_alloc((size_t)B * sizeof *images);
  ct_tensor *in = ct_tensor_empty(CT_I32, CT_SHAPE(B, T));
  ct_tensor *out = ct_tensor_empty(CT_I32, CT_SHAPE(B * T));
  ct_tensor *mask = ct_tensor_empty(CT_I32, CT_SHAPE(B, T));
  if (!images || !in || !out || !mask) return NULL;
  memset(ct_i32(in), 0, (size_t)(B * T) * sizeof(int32_t));
  memset(ct_i32(out), 0, (size_t)(B * T) * sizeof(int32_t));
  for (int64_t b = 0; b < B; b++) {
    const int32_t *w = ids->ids + ids->start[pairs[b]];
    int64_t len = ids->start[pairs[b] + 1] - ids->start[pairs[b]];
    int32_t *x = ct_i32(in) + b * T, *y = ct_i32(out) + b * T;
    x[0] = CT_VOCAB_BOS;
    for (int64_t i = 0; i < len; i++) x[i + 1] = y[i] = w[i];
    y[len] = CT_VOCAB_EOS;
    images[b] = cp->pair_image[pairs[b]];
  }
  for (int64_t i = 0; i < B * T; i++) ct_i32(mask)[i] = ct_i32(out)[i] != 0;
  *items = (double)B;
  int64_t gh, gw;
  ct_tensor *x = image_batch(&cp->meta, &cp->sets[0], images, B);
  ct_tensor *ann =
      x ? ct_nn_captioner_encode(cp->model, ctx, x, &gh, &gw) : NULL;
  ct_tensor *alphas = NULL;
  bool reg = cp->cfg.attention_reg > 0.0f;
  ct_tensor *logits = ann ? ct_nn_captioner_forward(cp->model, ctx, ann, in,
                                                    reg ? &alphas : NULL)
                          : NULL;
  if (!logits) return NULL;
  const int64_t V = logits->shape[2];
  ct_ce_opts ce = ct_ce_defaults();
  ce.ignore_index = CT_VOCAB_PAD;
  ce.label_smoothing = cp->cfg.label_smoothing;
  ct_tensor *loss =
      ct_cross_entropy(ct_reshape(logits, CT_SHAPE(B * T, V)), out, &ce);
  if (!loss || !reg) return loss;
  ct_tensor *r =
      ct_nn_captioner_attention_reg(alphas, mask, cp->cfg.attention_reg);
  return r ? ct_add(loss, r) : NULL;
}

// ---- decoding and evaluation ---------------------------------------------------

static int64_t decode_len(const captioning *cp) {
  return cp->cfg.max_decode_len > 0 ? cp->cfg.max_decode_len : 50;
}

// Decodes B images (u8 rows of ds or raw pixels): out (B*max_len) ids and
// lens, alphas (B,max_len,L) when not NULL (room for L = *grid_h * *grid_w
// values per step: the caller asks ct_captioning_grid first).
static ct_status decode_images(captioning *cp, ct_tensor *x, int beam,
                               int32_t *out, int64_t *lens, float **alphas,
                               int64_t *grid_h, int64_t *grid_w) {
  ct_tensor *ann = ct_nn_captioner_encode(cp->model, NULL, x, grid_h, grid_w);
  if (!ann) return ct_last_status();
  ct_decode_opts o = {.beam = beam,
                      .length_penalty = cp->cfg.length_penalty,
                      .max_len = decode_len(cp)};
  const int64_t B = x->shape[0], L = *grid_h * *grid_w;
  if (alphas) {
    *alphas = ct_arena_alloc((size_t)(B * o.max_len * L) * sizeof(float));
    if (!*alphas) return ct_last_status();
  }
  return ct_decode_batch_captioner(cp->model, ann, &o, CT_VOCAB_BOS,
                                   CT_VOCAB_EOS, out, lens,
                                   alphas ? *alphas : NULL);
}

// Whether the attention peak of one step, over a grid_h x grid_w map of a
// W x H image, lies inside a box of object kind `name` of image i.
static bool peak_inside(const ct_caption_dataset *ds, int64_t i,
                        const float *alpha, int64_t grid_h, int64_t grid_w,
                        int32_t name) {
  int64_t best = 0;
  for (int64_t l = 1; l < grid_h * grid_w; l++)
    if (alpha[l] > alpha[best]) best = l;
  float px = ((float)(best % grid_w) + 0.5f) * (float)ds->W / (float)grid_w;
  float py = ((float)(best / grid_w) + 0.5f) * (float)ds->H / (float)grid_h;
  for (int64_t k = 0; k < ct_caption_object_count(ds, i); k++) {
    const ct_caption_object *o = &ct_caption_objects(ds, i)[k];
    if (o->name == name && px >= o->x && px < o->x + o->w && py >= o->y &&
        py < o->y + o->h)
      return true;
  }
  return false;
}

// The object kind of the split a word names, or -1.
static int32_t object_word(const ct_caption_dataset *ds, const char *word) {
  for (int64_t k = 0; k < ds->object_names.count; k++)
    if (ct_caption_word_names(word, ct_string_list_get(&ds->object_names, k)))
      return (int32_t)k;
  return -1;
}

// Evaluation, EVAL_BATCH images per unit of the split over ranks
// (train/dist.h): a unit's result is, per image, its grounding counts, the
// caption's length and ids; the fold keeps the captions as text.
typedef struct eval_units {
  captioning *cp;
  const ct_caption_dataset *ds;
  int beam;
  int64_t n;            // images evaluated
  char **hyps;          // n captions
  int64_t hits, words;  // grounding
} eval_units;

static ct_status eval_unit(void *arg, int64_t unit, ct_byte_buffer *out) {
  eval_units *ev = arg;
  captioning *cp = ev->cp;
  const int64_t start = unit * EVAL_BATCH;
  const int64_t B = ev->n - start < EVAL_BATCH ? ev->n - start : EVAL_BATCH;
  const int64_t ML = decode_len(cp);
  ct_arena_mark mark = ct_arena_get_mark();
  int64_t idx[EVAL_BATCH], lens[EVAL_BATCH], gh = 0, gw = 0;
  for (int64_t b = 0; b < B; b++) idx[b] = start + b;
  int32_t *ids = ct_arena_alloc((size_t)(B * ML) * sizeof *ids);
  float *alphas = NULL;
  ct_tensor *x = ids ? image_batch(&cp->meta, ev->ds, idx, B) : NULL;
  ct_status st =
      x ? decode_images(cp, x, ev->beam, ids, lens, &alphas, &gh, &gw)
        : ct_last_status();
  for (int64_t b = 0; b < B && st == CT_OK; b++) {
    int64_t g[3] = {0, 0, lens[b]};  // hits, object words, length
    for (int64_t s = 0; s < lens[b]; s++) {
      const char *w = ct_vocab_token(&cp->vocab, ids[b * ML + s]);
      int32_t kind = w ? object_word(ev->ds, w) : -1;
      if (kind < 0) continue;
      g[1]++;
      g[0] += peak_inside(ev->ds, idx[b], alphas + (b * ML + s) * gh * gw, gh,
                          gw, kind);
    }
    ct_byte_buffer_append(out, g, sizeof g);
    ct_byte_buffer_append(out, ids + b * ML, (size_t)lens[b] * sizeof *ids);
  }
  ct_arena_rewind(mark);
  return st;
}

// The caption of n ids as space-separated tokens (malloc'd).
static char *ids_text(const ct_vocab *v, const int32_t *ids, int64_t n) {
  ct_byte_buffer b = {0};
  for (int64_t i = 0; i < n; i++) {
    const char *w = ct_vocab_token(v, ids[i]);
    ct_byte_buffer_printf(&b, "%s%s", i ? " " : "", w ? w : "<unk>");
  }
  if (!ct_byte_buffer_reserve(&b, 0)) {
    ct_byte_buffer_free(&b);
    ct_error(CT_ERR_NOMEM, "captioning: out of memory");
    return NULL;
  }
  b.data[b.len] = '\0';
  return b.data;
}

static ct_status eval_fold(void *arg, int64_t unit, const void *data,
                           size_t len) {
  eval_units *ev = arg;
  const int64_t start = unit * EVAL_BATCH;
  const int64_t B = ev->n - start < EVAL_BATCH ? ev->n - start : EVAL_BATCH;
  const char *p = data, *end = p + len;
  for (int64_t b = 0; b < B; b++) {
    int64_t g[3];
    if ((size_t)(end - p) < sizeof g)
      return ct_error(CT_ERR_STATE, "evaluate: a batch's result is cut short");
    memcpy(g, p, sizeof g);
    p += sizeof g;
    if (g[2] < 0 || (size_t)(end - p) < (size_t)g[2] * sizeof(int32_t))
      return ct_error(CT_ERR_STATE, "evaluate: a batch's result is cut short");
    int32_t *ids = malloc((size_t)(g[2] ? g[2] : 1) * sizeof *ids);
    if (!ids) return ct_error(CT_ERR_NOMEM, "captioning: out of memory");
    memcpy(ids, p, (size_t)g[2] * sizeof *ids);
    p += (size_t)g[2] * sizeof *ids;
    ev->hyps[start + b] = ids_text(&ev->cp->vocab, ids, g[2]);
    free(ids);
    if (!ev->hyps[start + b]) return ct_last_status();
    ev->hits += g[0];
    ev->words += g[1];
  }
  return CT_OK;
}

// Corpus BLEU of the images where keep (NULL: all) is true, against all
// their references (tokenized as the model's captions are).
static ct_status score(const eval_units *ev, const bool *keep, ct_bleu *out) {
  const ct_caption_dataset *ds = ev->ds;
  const int64_t R = ct_caption_max_count(ds);
  int64_t n = 0;
  for (int64_t i = 0; i < ev->n; i++) n += !keep || keep[i];
  const char **hyps = calloc((size_t)(n ? n : 1), sizeof *hyps);
  char **refs = calloc((size_t)(n * R > 0 ? n * R : 1), sizeof *refs);
  ct_string_list tokens = {0};
  ct_status st =
      hyps && refs ? CT_OK : ct_error(CT_ERR_NOMEM, "bleu: out of memory");
  for (int64_t i = 0, j = 0; i < ev->n && st == CT_OK; i++) {
    if (keep && !keep[i]) continue;
    hyps[j] = ev->hyps[i];
    for (int64_t r = 0; r < ct_caption_count(ds, i) && st == CT_OK; r++) {
      ct_string_list_clear(&tokens);
      st = ct_text_tokenizer_tokenize(&ev->cp->tok, ct_caption_text(ds, i, r),
                                      &tokens);
      ct_byte_buffer b = {0};
      for (int64_t k = 0; st == CT_OK && k < tokens.count; k++)
        ct_byte_buffer_printf(&b, "%s%s", k ? " " : "",
                              ct_string_list_get(&tokens, k));
      refs[r * n + j] = b.data;
      if (st == CT_OK && b.failed)
        st = ct_error(CT_ERR_NOMEM, "bleu: out of memory");
    }
    j++;
  }
  if (st == CT_OK)
    st = ct_bleu_corpus(hyps, (const char *const *)refs, n, (int)R, out);
  for (int64_t k = 0; refs && k < n * R; k++) free(refs[k]);
  free(refs);
  free(hyps);
  ct_string_list_free(&tokens);
  return st;
}

static ct_status captioning_evaluate(ct_task *t, const char *split, int beam,
                                     int64_t limit, ct_eval_metrics *out,
                                     FILE *summary) {
  captioning *cp = t->state;
  int s = !strcmp(split, "test") ? 2 : 1;
  if (!cp->have[s])
    return ct_error(CT_ERR_ARG,
                    "captioning: no %s split (source = files: set [data] %s "
                    "and %s)",
                    split, ct_caption_file_keys[s][0],
                    ct_caption_file_keys[s][1]);
  eval_units ev = {.cp = cp, .ds = &cp->sets[s], .beam = beam < 1 ? 1 : beam};
  ev.n = limit > 0 && limit < ev.ds->N ? limit : ev.ds->N;
  ev.hyps = calloc((size_t)ev.n, sizeof *ev.hyps);
  bool *held = calloc((size_t)ev.n, sizeof *held);
  ct_status st = ev.hyps && held
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "captioning: out of memory");
  bool was = ct_grad_set_enabled(false);
  if (st == CT_OK)
    st = ct_dist_for_units((ev.n + EVAL_BATCH - 1) / EVAL_BATCH, eval_unit,
                           eval_fold, &ev);
  ct_grad_set_enabled(was);
  ct_bleu all = {0}, heldout = {0};
  int64_t n_held = 0;
  for (int64_t i = 0; i < ev.n && held; i++)
    n_held += held[i] = ev.ds->heldout[i];
  if (st == CT_OK) st = score(&ev, NULL, &all);
  if (st == CT_OK && n_held) st = score(&ev, held, &heldout);
  if (st == CT_OK) {
    double grounding =
        ev.words ? 100.0 * (double)ev.hits / (double)ev.words : 0.0;
    double b[4];
    static const char *const names[4] = {"bleu1", "bleu2", "bleu3", "bleu4"};
    for (int k = 0; k < 4; k++) {
      b[k] = ct_bleu_cumulative(&all, k + 1);
      ct_eval_metrics_add(out, names[k], b[k]);
    }
    double b4_held = ct_bleu_cumulative(&heldout, 4);
    ct_eval_metrics_add(out, "bleu4_heldout", b4_held);
    ct_eval_metrics_add(out, "grounding", grounding);
    ct_eval_metrics_add_count(out, "images", ev.n);
    ct_eval_metrics_add_count(out, "heldout_images", n_held);
    ct_eval_metrics_add_count(out, "object_words", ev.words);
    if (summary) {
      fprintf(summary,
              "%s: %lld images, BLEU-1..4 %.2f/%.2f/%.2f/%.2f, held-out "
              "combinations (%lld images) BLEU-4 %.2f, grounding %.1f%% of "
              "%lld object words\n",
              split, (long long)ev.n, b[0], b[1], b[2], b[3], (long long)n_held,
              b4_held, grounding, (long long)ev.words);
      for (int64_t i = 0; i < ev.n && i < 3; i++)
        fprintf(summary, "  %s  <- %s\n", ev.hyps[i],
                ct_caption_text(ev.ds, i, 0));
    }
  }
  for (int64_t i = 0; ev.hyps && i < ev.n; i++) free(ev.hyps[i]);
  free(ev.hyps);
  free(held);
  return st;
}

// ---- caption ----------------------------------------------------------------------

// The caption of n ids as text: the tokens detokenized (punctuation
// attached), as data/text_tokenizer.h normalizes a sentence (malloc'd).
static char *caption_text(const captioning *cp, const int32_t *ids, int64_t n) {
  const char **tokens = malloc((size_t)(n ? n : 1) * sizeof *tokens);
  if (!tokens) {
    ct_error(CT_ERR_NOMEM, "caption: out of memory");
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) {
    const char *w = ct_vocab_token(&cp->vocab, ids[i]);
    tokens[i] = w ? w : "<unk>";
  }
  char *text = ct_text_tokenizer_detokenize(&cp->tok, tokens, n);
  free(tokens);
  return text;
}

ct_status ct_captioning_caption(ct_task *t, const char *const *paths, int n,
                                int beam, const char *attention_png,
                                FILE *out) {
  captioning *cp = t->state;
  const ct_image_meta *m = &cp->meta;
  const int64_t pixels = (int64_t)m->C * m->H * m->W, ML = decode_len(cp);
  uint8_t *raw = malloc((size_t)pixels);
  int32_t *ids = malloc((size_t)ML * sizeof *ids);
  ct_status st =
      raw && ids ? CT_OK : ct_error(CT_ERR_NOMEM, "caption: out of memory");
  bool was = ct_grad_set_enabled(false);
  for (int i = 0; i < n && st == CT_OK; i++) {
    st = ct_png_read_image(paths[i], m->C, m->H, m->W, raw);
    if (st != CT_OK) break;
    ct_arena_mark mark = ct_arena_get_mark();
    ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(1, m->C, m->H, m->W));
    const int64_t plane = (int64_t)m->H * m->W;
    for (int64_t p = 0; x && p < pixels; p++)
      ct_f32(x)[p] =
          ((float)raw[p] / 255.0f - m->mean[p / plane]) / m->std[p / plane];
    int64_t len = 0, gh = 0, gw = 0;
    float *alphas = NULL;
    st = x ? decode_images(cp, x, beam < 1 ? 1 : beam, ids, &len, &alphas, &gh,
                           &gw)
           : ct_last_status();
    char *text = st == CT_OK ? caption_text(cp, ids, len) : NULL;
    if (st == CT_OK && !text) st = ct_last_status();
    if (st == CT_OK) fprintf(out, "%s: %s\n", paths[i], text);
    free(text);
    if (st == CT_OK && i == 0 && attention_png) {
      // One panel per word, and one for <eos> when it was emitted.
      int panels = (int)(len < ML ? len + 1 : len);
      if (panels > CT_PLOT_MAX_PANELS) panels = CT_PLOT_MAX_PANELS;
      if (panels < 1) panels = 1;
      const uint8_t **imgs = malloc((size_t)panels * sizeof *imgs);
      const float **maps = malloc((size_t)panels * sizeof *maps);
      const char **words = malloc((size_t)panels * sizeof *words);
      float *scaled = malloc((size_t)(panels * gh * gw) * sizeof *scaled);
      if (!imgs || !maps || !words || !scaled)
        st = ct_error(CT_ERR_NOMEM, "caption: out of memory");
      for (int k = 0; k < panels && st == CT_OK; k++) {
        // Each map scaled to its own peak, so weak steps still show.
        const float *a = alphas + (int64_t)k * gh * gw;
        float peak = 0.0f;
        for (int64_t l = 0; l < gh * gw; l++) peak = a[l] > peak ? a[l] : peak;
        for (int64_t l = 0; l < gh * gw; l++)
          scaled[k * gh * gw + l] = peak > 0.0f ? a[l] / peak : 0.0f;
        imgs[k] = raw;
        maps[k] = scaled + k * gh * gw;
        words[k] = k < len ? ct_vocab_token(&cp->vocab, ids[k]) : "<eos>";
      }
      if (st == CT_OK)
        st = ct_plot_attention_png(attention_png, panels, imgs, m->C, m->H,
                                   m->W, maps, (int)gh, (int)gw, words);
      if (st == CT_OK) fprintf(out, "attention drawn: %s\n", attention_png);
      free(imgs);
      free(maps);
      free(words);
      free(scaled);
    }
    ct_arena_rewind(mark);
  }
  ct_grad_set_enabled(was);
  free(raw);
  free(ids);
  return st;
}

// The recipe of configs/captions_toy.ini (see the README).
static const char *const captioning_defaults[][3] = {
    {"optim", "optimizer", "adam"},
    {"optim", "lr", "1e-3"},
    {"optim", "beta2", "0.999"},
    {"optim", "eps", "1e-8"},
    {"optim", "clip_norm", "5"},
    {"schedule", "kind", "cosine"},
    {"schedule", "warmup", "100"},
    {"model", "width", "16"},
    {"model", "stages", "4"},
    {"model", "blocks", "1"},
    {"model", "dropout", "0.2"},
    {"data", "toy_image_size", "48"},
    {"data", "toy_train", "4000"},
    {"data", "toy_val", "200"},
    {"data", "toy_test", "500"},
    {"data", "batch_size", "32"},
    {"train", "label_smoothing", "0"},
    {"train", "max_decode_len", "24"},
    {"train", "final_beam", "3"},
    {"train", "length_penalty", "0"},
    {NULL, NULL, NULL}};

const ct_task_ops ct_task_captioning = {
    .name = "captioning",
    .rate_unit = "img/s",
    .best_metric = "bleu4",
    .defaults = captioning_defaults,
    .open = captioning_open,
    .model_width = captioning_model_width,
    .save = captioning_save,
    .train_loss = captioning_train_loss,
    .data_position = ct_task_cursor_position,
    .data_seek = ct_task_cursor_seek,
    .data_stride = ct_task_cursor_stride,
    .epoch_batches = ct_task_cursor_epoch_batches,
    .evaluate = captioning_evaluate,
    .close = captioning_close,
};
