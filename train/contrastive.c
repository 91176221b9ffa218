// The contrastive image-text task (see contrastive.h).
#include "train/contrastive.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autograd/tape.h"
#include "core/arena.h"
#include "core/rng.h"
#include "data/captions.h"
#include "data/cifar.h"
#include "data/detection.h"
#include "data/idx.h"
#include "data/png_folder.h"
#include "data/stride.h"
#include "data/toy_captions.h"
#include "nn/clip.h"
#include "train/caption_data.h"
#include "train/classification.h"
#include "train/dist.h"
#include "train/dist_gather.h"
#include "train/image_meta.h"
#include "train/plot.h"
#include "train/schema.h"

enum {
  RNG_INIT = 0x1423,
  RNG_ORDER = 0xDA7A46u,    // the epoch's image order, step = epoch
  RNG_CAPTION = 0xDA7A47u,  // the caption of an image, step = epoch
  EVAL_BATCH = 64,
  SPLITS = 3,  // train, val, test
  TOP_K = 3,   // recall@1, @5, @10
};

static const int recall_at[TOP_K] = {1, 5, 10};

// A converted item's first canvas is painted white (data/toy_captions.h's
// colour 5), the next ones in the palette's other colours, on the
// generator's mean background: its base gray is uniform in [0, 40) plus
// per-pixel noise in [0, 24).
enum { FIRST_COLOUR = 5, CANVAS_BACKGROUND = 31 };

const char *const ct_contrastive_default_templates[] = {
    "a {colour} {}", "there is a {colour} {}", "one object: a {colour} {}",
    "a {}, {colour}"};
const int ct_contrastive_default_template_count =
    (int)(sizeof ct_contrastive_default_templates /
          sizeof ct_contrastive_default_templates[0]);

typedef struct contrastive_config {
  ct_caption_data_config data;  // seed, source, toy_*, files, image size
  ct_tokenizer_kind tokenizer;
  bool lowercase;
  int64_t min_freq, max_vocab;
  ct_nn_clip_config model;  // vocab, channels, size, context from the data
  int64_t batch_size;
} contrastive_config;

typedef struct contrastive {
  contrastive_config cfg;
  ct_image_meta meta;  // classes: the training split's object names
  ct_text_tokenizer tok;
  ct_vocab vocab;
  int64_t context_length;  // T: the longest token row
  ct_nn_clip *model;
  ct_caption_dataset sets[SPLITS];
  bool have[SPLITS];
  ct_caption_ids ids[SPLITS];  // every caption's ids, per split
  // The training batches: cur is where the next call reads; order holds
  // the image permutation of order_epoch.
  ct_batch_cursor cur;
  int64_t order_epoch;
  int64_t *order;
} contrastive;

// ---- data -------------------------------------------------------------------

// Normalized images (B, C, H, W) from u8 (C, H, W) images src[b].
static ct_tensor *normalize_images(const ct_image_meta *m,
                                   const uint8_t *const *src, int64_t B) {
  const int64_t plane = (int64_t)m->H * m->W;
  ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(B, m->C, m->H, m->W));
  if (!x) return NULL;
  for (int64_t b = 0; b < B; b++)
    for (int c = 0; c < m->C; c++) {
      float *dst = ct_f32(x) + (b * m->C + c) * plane;
      const uint8_t *s = src[b] + c * plane;
      for (int64_t p = 0; p < plane; p++)
        dst[p] = ((float)s[p] / 255.0f - m->mean[c]) / m->std[c];
    }
  return x;
}

// Images idx[0..B) of ds, normalized.
static ct_tensor *image_batch(const ct_image_meta *m,
                              const ct_caption_dataset *ds, const int64_t *idx,
                              int64_t B) {
  const uint8_t **src = ct_arena_alloc((size_t)B * sizeof *src);
  if (!src) return NULL;
  for (int64_t b = 0; b < B; b++) src[b] = ct_caption_image(ds, idx[b]);
  return normalize_images(m, src, B);
}

// Token rows <bos> w1 .. wn <eos> (0-padded) of the B id sequences
// seq[b] (len[b] ids), each cut to T - 2 words: tokens (B, T') with T'
// the longest row, eot[b] the position of row b's <eos>.
static ct_tensor *token_rows(const int32_t *const *seq, const int64_t *len,
                             int64_t B, int64_t T, int64_t *eot) {
  int64_t Tb = 2;
  for (int64_t b = 0; b < B; b++) {
    int64_t n = len[b] < T - 2 ? len[b] : T - 2;
    if (n + 2 > Tb) Tb = n + 2;
  }
  ct_tensor *tok = ct_tensor_zeros(CT_I32, CT_SHAPE(B, Tb));
  if (!tok) return NULL;
  for (int64_t b = 0; b < B; b++) {
    int64_t n = len[b] < T - 2 ? len[b] : T - 2;
    int32_t *row = ct_i32(tok) + b * Tb;
    row[0] = CT_VOCAB_BOS;
    memcpy(row + 1, seq[b], (size_t)n * sizeof *row);
    row[n + 1] = CT_VOCAB_EOS;
    eot[b] = n + 1;
  }
  return tok;
}

// Captions cap[0..B) of `ids` as token rows.
static ct_tensor *caption_rows(const contrastive *cp, const ct_caption_ids *ids,
                               const int64_t *cap, int64_t B, int64_t *eot) {
  const int32_t **seq = ct_arena_alloc((size_t)B * sizeof *seq);
  int64_t *len = ct_arena_alloc((size_t)B * sizeof *len);
  if (!seq || !len) return NULL;
  for (int64_t b = 0; b < B; b++) {
    seq[b] = ids->ids + ids->start[cap[b]];
    len[b] = ids->start[cap[b] + 1] - ids->start[cap[b]];
  }
  return token_rows(seq, len, B, cp->context_length, eot);
}

// ---- checkpoint sections, open, close ---------------------------------------

// Section "clip.text": the context length ("context_length N\n"), which
// [model] context_length = 0 takes from the training data.
static ct_status contrastive_save(ct_task *t, ct_ckpt_writer *w) {
  contrastive *cp = t->state;
  char *buf, text[64];
  size_t size;
  ct_status st = ct_image_meta_save(&cp->meta, w);
  if (st == CT_OK) st = ct_vocab_save(&cp->vocab, &buf, &size);
  if (st != CT_OK) return st;
  st = ct_ckpt_writer_add(w, "vocab.captions", buf, size);
  free(buf);
  int n = snprintf(text, sizeof text, "context_length %lld\n",
                   (long long)cp->context_length);
  if (st == CT_OK) st = ct_ckpt_writer_add(w, "clip.text", text, (size_t)n);
  return st;
}

static ct_status load_context_length(contrastive *cp, const ct_ckpt *ckpt) {
  const void *data;
  size_t len;
  ct_status st = ct_ckpt_section(ckpt, "clip.text", &data, &len);
  if (st != CT_OK) return st;
  char text[64] = "";
  long long n = 0;
  memcpy(text, data, len < sizeof text - 1 ? len : sizeof text - 1);
  if (sscanf(text, "context_length %lld", &n) != 1 || n < 2 || n > 100000)
    return ct_error(CT_ERR_FORMAT,
                    "checkpoint: section clip.text is malformed (want "
                    "\"context_length N\")");
  cp->context_length = n;
  return CT_OK;
}

static void contrastive_close(ct_task *t) {
  contrastive *cp = t->state;
  if (!cp) return;
  if (cp->model) ct_nn_clip_free(cp->model);
  for (int s = 0; s < SPLITS; s++) {
    ct_caption_dataset_free(&cp->sets[s]);
    ct_caption_ids_free(&cp->ids[s]);
  }
  ct_text_tokenizer_free(&cp->tok);
  ct_vocab_free(&cp->vocab);
  ct_string_list_free(&cp->meta.class_names);
  free(cp->order);
  free(cp);
  t->state = NULL;
}

static ct_status read_config(const ct_config *cfg, contrastive_config *out) {
  static const char *const positive[][2] = {{"data", "batch_size"}};
  ct_status checked = ct_config_check_min(cfg, positive, 1, 1);
  if (checked != CT_OK) return checked;
  static const ct_model_arch archs[] = {CT_ARCH_VIT, CT_ARCH_RESNET};
  ct_model_arch arch;
  checked =
      ct_schema_task_arch(cfg, "contrastive", archs, 2, "vit|resnet", &arch);
  if (checked != CT_OK) return checked;
  static const char *const unit[][2] = {
      {"model", "dropout"}, {"model", "attn_dropout"}, {"model", "drop_path"}};
  for (int i = 0; i < 3; i++) {
    double v = ct_config_float(cfg, unit[i][0], unit[i][1]);
    if (!(v >= 0.0 && v < 1.0))
      return ct_error(CT_ERR_ARG, "[%s] %s = %g: must be in [0, 1)", unit[i][0],
                      unit[i][1], v);
  }
  int64_t ch = ct_config_int(cfg, "data", "channels");
  if (ch != 1 && ch != 3)
    return ct_error(CT_ERR_ARG, "[data] channels = %lld: must be 1 or 3",
                    (long long)ch);
  *out = (contrastive_config){
      .tokenizer = CT_SCHEMA_ENUM(cfg, "data", "tokenizer", CT_TOKENIZERS,
                                  ct_tokenizer_kind),
      .lowercase = ct_config_bool(cfg, "data", "lowercase"),
      .min_freq = ct_config_int(cfg, "data", "min_freq"),
      .max_vocab = ct_config_int(cfg, "data", "max_vocab"),
      .model =
          {
              .image_arch =
                  arch == CT_ARCH_VIT ? CT_NN_CLIP_VIT : CT_NN_CLIP_RESNET,
              .vit = ct_classification_vit_config(cfg),
              .resnet = ct_classification_resnet_config(cfg),
              .embed_dim = ct_config_int(cfg, "model", "embed_dim"),
              .context_length = ct_config_int(cfg, "model", "context_length"),
              .text_width = ct_config_int(cfg, "model", "text_width"),
              .text_layers = ct_config_int(cfg, "model", "text_layers"),
              .text_heads = ct_config_int(cfg, "model", "text_heads"),
              .text_mlp = ct_config_int(cfg, "model", "text_mlp"),
          },
      .batch_size = ct_config_int(cfg, "data", "batch_size"),
  };
  ct_status data = ct_caption_data_read_config(cfg, &out->data);
  if (data != CT_OK) return data;
  if (out->tokenizer == CT_TOKENIZER_BPE)
    return ct_error(CT_ERR_ARG,
                    "[data] tokenizer = bpe: contrastive tokenizes words or "
                    "characters (word|char)");
  if (out->data.source == CT_DATA_SOURCE_TOY &&
      (out->data.toy_image_size < 32 || out->data.toy_image_size > 512))
    return ct_error(CT_ERR_ARG,
                    "[data] toy_image_size = %d: generated captioned images "
                    "are 32..512 pixels",
                    out->data.toy_image_size);
  if (out->model.context_length == 1 || out->model.context_length == 2)
    return ct_error(CT_ERR_ARG,
                    "[model] context_length = %lld: a row holds <bos>, at "
                    "least one word and <eos> (3 or more; 0 = from the data)",
                    (long long)out->model.context_length);
  if (out->model.text_width % out->model.text_heads)
    return ct_error(CT_ERR_ARG,
                    "[model] text_width = %lld is not a multiple of "
                    "text_heads = %lld",
                    (long long)out->model.text_width,
                    (long long)out->model.text_heads);
  // The step-time measurement of a budget runs a different number of
  // passes on each rank, and each pass here is a collective.
  if (ct_dist_size() > 1 && ct_config_float(cfg, "train", "max_minutes") > 0)
    return ct_error(CT_ERR_ARG,
                    "[train] max_minutes: a time budget is not supported by "
                    "contrastive training under mpirun (the features are "
                    "gathered every pass); set train.steps or epochs");
  return CT_OK;
}

static ct_status contrastive_open(ct_task *t, const ct_config *cfg,
                                  ct_params *p, const ct_ckpt *ckpt,
                                  ct_task_need need) {
  contrastive_config c;
  ct_status st = read_config(cfg, &c);
  if (st != CT_OK) return st;
  contrastive *cp = calloc(1, sizeof *cp);
  if (!cp) return ct_error(CT_ERR_NOMEM, "contrastive: out of memory");
  t->state = cp;
  t->cursor = &cp->cur;
  cp->cfg = c;
  cp->order_epoch = -1;
  ct_text_tokenizer_init(&cp->tok, c.tokenizer, c.lowercase);
  if (need != CT_TASK_MODEL_ONLY)
    st = ct_caption_data_load(&c.data, need == CT_TASK_ALL_DATA ? 0 : 1,
                              cp->sets, cp->have);
  if (st == CT_OK && !ckpt && !cp->have[0])
    st = ct_error(CT_ERR_STATE, "contrastive: no training data");
  if (st == CT_OK) st = ct_caption_data_meta(&cp->meta, &cp->sets[0], ckpt);
  if (st == CT_OK)
    st = ct_caption_data_vocab(&cp->vocab, &cp->sets[0], &cp->tok, c.min_freq,
                               c.max_vocab, ckpt);
  for (int s = 0; s < SPLITS && st == CT_OK; s++) {
    const ct_caption_dataset *d = &cp->sets[s];
    if (!cp->have[s]) continue;
    if (d->C != cp->meta.C || d->H != cp->meta.H || d->W != cp->meta.W)
      return ct_error(CT_ERR_ARG,
                      "contrastive: the %s images are %dx%dx%d, the model "
                      "takes %dx%dx%d",
                      ct_caption_split_names[s], d->C, d->H, d->W, cp->meta.C,
                      cp->meta.H, cp->meta.W);
    st = ct_captions_encode(d, &cp->tok, &cp->vocab, &cp->ids[s]);
  }
  if (st != CT_OK) return st;
  if (ckpt)
    st = load_context_length(cp, ckpt);
  else
    cp->context_length = c.model.context_length
                             ? c.model.context_length
                             : cp->ids[0].max_len + 2;  // <bos>, <eos>
  if (st != CT_OK) return st;
  ct_nn_clip_config mc = c.model;
  mc.vit.image_h = mc.vit.image_w = cp->meta.H;
  mc.vit.image_w = cp->meta.W;
  mc.vit.in_channels = mc.resnet.in_channels = cp->meta.C;
  mc.vit.num_classes = mc.resnet.num_classes = 0;
  mc.vocab = ct_vocab_size(&cp->vocab);
  mc.context_length = cp->context_length;
  ct_rng init = ct_rng_make(c.data.seed, ct_rng_stream(RNG_INIT, 0));
  st = ct_nn_clip_init(&cp->model, p, "", &mc, &init);
  if (st != CT_OK || need != CT_TASK_ALL_DATA) return st;
  const int64_t n = cp->sets[0].N;
  cp->order = malloc((size_t)n * sizeof *cp->order);
  if (!cp->order) return ct_error(CT_ERR_NOMEM, "contrastive: out of memory");
  cp->cur.batches = n / c.batch_size;
  if (cp->cur.batches < 1)
    return ct_error(CT_ERR_ARG,
                    "[data] batch_size = %lld is larger than the %lld "
                    "training images",
                    (long long)c.batch_size, (long long)n);
  return CT_OK;
}

static int64_t contrastive_model_width(const ct_task *t) {
  const contrastive *cp = t->state;
  return cp->cfg.model.text_width;
}

// ---- training ---------------------------------------------------------------

static ct_tensor *contrastive_train_loss(ct_task *t, ct_nn_ctx *ctx,
                                         double *items) {
  contrastive *cp = t->state;
  const ct_caption_dataset *ds = &cp->sets[0];
  const int64_t B = cp->cfg.batch_size;
  int64_t epoch;
  const int64_t *images =
      ct_batch_cursor_next(&cp->cur, cp->order, &cp->order_epoch, ds->N, B,
                           cp->cfg.data.seed, RNG_ORDER, &epoch);
  const uint64_t stream = ct_rng_stream(RNG_CAPTION, (uint64_t)epoch);
  int64_t *cap = ct_arena_alloc((size_t)B * sizeof *cap);
  int64_t *eot = ct_arena_alloc((size_t)B * sizeof *eot);
  if (!cap || !eot) return NULL;
  for (int64_t b = 0; b < B; b++) {
    const int64_t i = images[b];
    cap[b] = ds->caption_start[i] +
             (int64_t)(ct_rng_u32_at(cp->cfg.data.seed, stream, (uint64_t)i) %
                       (uint64_t)ct_caption_count(ds, i));
  }
  *items = (double)B;
  ct_tensor *x = image_batch(&cp->meta, ds, images, B);
  ct_tensor *tok = x ? caption_rows(cp, &cp->ids[0], cap, B, eot) : NULL;
  ct_tensor *img = tok ? ct_nn_clip_encode_image(cp->model, ctx, x) : NULL;
  ct_tensor *txt =
      img ? ct_nn_clip_encode_text(cp->model, ctx, tok, eot) : NULL;
  if (!txt) return NULL;
  // Every rank's features, with their gradient (one process: img, txt).
  ct_tensor *img_all = ct_dist_gather_rows(img);
  ct_tensor *txt_all = img_all ? ct_dist_gather_rows(txt) : NULL;
  if (!txt_all) return NULL;
  return ct_nn_clip_loss(img, txt, img_all, txt_all,
                         (int64_t)ct_dist_rank() * B,
                         ct_nn_clip_logit_scale(cp->model));
}

static void contrastive_after_step(ct_task *t) {
  contrastive *cp = t->state;
  ct_nn_clip_clamp_scale(cp->model);
}

// ---- embedding many images and texts, over ranks ----------------------------

// Rows [0, n_img) of `feat` are image features, the next n_txt text ones;
// unit u of the first ceil(n_img / EVAL_BATCH) is an image batch, the
// others text batches. Images come from ds (or `canvases`, u8 images of
// the model's input), texts are token id rows.
typedef struct embed_units {
  const contrastive *cp;
  const uint8_t *const *images;  // n_img images (C, H, W) u8
  int64_t n_img, img_units;
  const int32_t *const *seq;  // n_txt id sequences
  const int64_t *len;
  int64_t n_txt;
  int64_t E;
  float *feat;  // (n_img + n_txt, E)
} embed_units;

static int64_t units_of(int64_t n) { return (n + EVAL_BATCH - 1) / EVAL_BATCH; }

static ct_status embed_unit(void *arg, int64_t unit, ct_byte_buffer *out) {
  embed_units *ev = arg;
  const contrastive *cp = ev->cp;
  ct_arena_mark mark = ct_arena_get_mark();
  const bool is_img = unit < ev->img_units;
  const int64_t start = (is_img ? unit : unit - ev->img_units) * EVAL_BATCH;
  const int64_t n = is_img ? ev->n_img : ev->n_txt;
  const int64_t B = n - start < EVAL_BATCH ? n - start : EVAL_BATCH;
  ct_tensor *f = NULL;
  if (is_img) {
    ct_tensor *x = normalize_images(&cp->meta, ev->images + start, B);
    f = x ? ct_nn_clip_encode_image(cp->model, NULL, x) : NULL;
  } else {
    int64_t *eot = ct_arena_alloc((size_t)B * sizeof *eot);
    ct_tensor *tok = eot ? token_rows(ev->seq + start, ev->len + start, B,
                                      cp->context_length, eot)
                         : NULL;
    f = tok ? ct_nn_clip_encode_text(cp->model, NULL, tok, eot) : NULL;
  }
  ct_status st = f ? CT_OK : ct_last_status();
  if (st == CT_OK)
    ct_byte_buffer_append(out, ct_f32(f), (size_t)f->numel * sizeof(float));
  ct_arena_rewind(mark);
  return st;
}

static ct_status embed_fold(void *arg, int64_t unit, const void *data,
                            size_t len) {
  embed_units *ev = arg;
  const bool is_img = unit < ev->img_units;
  const int64_t start = (is_img ? unit : unit - ev->img_units) * EVAL_BATCH;
  const int64_t n = is_img ? ev->n_img : ev->n_txt;
  const int64_t B = n - start < EVAL_BATCH ? n - start : EVAL_BATCH;
  if (len != (size_t)(B * ev->E) * sizeof(float))
    return ct_error(CT_ERR_STATE, "evaluate: a batch's features are cut short");
  const int64_t row = (is_img ? 0 : ev->n_img) + start;
  memcpy(ev->feat + row * ev->E, data, len);
  return CT_OK;
}

// Features of n_img images and n_txt texts (either may be 0) into
// feat (malloc'd, (n_img + n_txt) x E, L2-normalized rows).
static ct_status embed_all(embed_units *ev, float **feat) {
  ev->E = ct_nn_clip_cfg(ev->cp->model)->embed_dim;
  ev->img_units = units_of(ev->n_img);
  ev->feat =
      malloc((size_t)((ev->n_img + ev->n_txt) * ev->E + 1) * sizeof *ev->feat);
  if (!ev->feat) return ct_error(CT_ERR_NOMEM, "contrastive: out of memory");
  bool was = ct_grad_set_enabled(false);
  ct_status st = ct_dist_for_units(ev->img_units + units_of(ev->n_txt),
                                   embed_unit, embed_fold, ev);
  ct_grad_set_enabled(was);
  if (st != CT_OK) {
    free(ev->feat);
    ev->feat = NULL;
  }
  *feat = ev->feat;
  return st;
}

static float dot(const float *a, const float *b, int64_t E) {
  float s = 0.0f;
  for (int64_t e = 0; e < E; e++) s += a[e] * b[e];
  return s;
}

// ---- evaluation: retrieval recall -------------------------------------------

// Recall hits of one direction: hits[k] counts the queries whose rank is
// below recall_at[k]; heldout queries counted again in held[k].
typedef struct recall_counts {
  int64_t hits[TOP_K], held[TOP_K], queries, held_queries;
} recall_counts;

static void count_rank(recall_counts *rc, int64_t rank, bool heldout) {
  rc->queries++;
  rc->held_queries += heldout;
  for (int k = 0; k < TOP_K; k++) {
    rc->hits[k] += rank < recall_at[k];
    rc->held[k] += heldout && rank < recall_at[k];
  }
}

static ct_status contrastive_evaluate(ct_task *t, const char *split, int beam,
                                      int64_t limit, ct_eval_metrics *out,
                                      FILE *summary) {
  (void)beam;
  contrastive *cp = t->state;
  int s = !strcmp(split, "test") ? 2 : 1;
  if (!cp->have[s])
    return ct_error(CT_ERR_ARG,
                    "contrastive: no %s split (source = files: set [data] %s "
                    "and %s)",
                    split, ct_caption_file_keys[s][0],
                    ct_caption_file_keys[s][1]);
  const ct_caption_dataset *ds = &cp->sets[s];
  const ct_caption_ids *ids = &cp->ids[s];
  const int64_t n = limit > 0 && limit < ds->N ? limit : ds->N;
  const int64_t m = ds->caption_start[n];  // the captions of those images
  const uint8_t **images = malloc((size_t)n * sizeof *images);
  const int32_t **seq = malloc((size_t)m * sizeof *seq);
  int64_t *len = malloc((size_t)m * sizeof *len);
  int64_t *owner = malloc((size_t)m * sizeof *owner);
  float *feat = NULL;
  ct_status st = images && seq && len && owner
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "contrastive: out of memory");
  for (int64_t i = 0; i < n && st == CT_OK; i++) {
    images[i] = ct_caption_image(ds, i);
    for (int64_t j = ds->caption_start[i]; j < ds->caption_start[i + 1]; j++) {
      seq[j] = ids->ids + ids->start[j];
      len[j] = ids->start[j + 1] - ids->start[j];
      owner[j] = i;
    }
  }
  embed_units ev = {.cp = cp,
                    .images = images,
                    .n_img = n,
                    .seq = seq,
                    .len = len,
                    .n_txt = m};
  if (st == CT_OK) st = embed_all(&ev, &feat);
  recall_counts i2t = {0}, t2i = {0};
  const int64_t E = ev.E;
  float *score =
      st == CT_OK ? malloc((size_t)(n > m ? n : m) * sizeof *score) : NULL;
  if (st == CT_OK && !score)
    st = ct_error(CT_ERR_NOMEM, "contrastive: out of memory");
  const float *txt = feat ? feat + n * E : NULL;
  // image -> text: the best of the image's own captions against the others
  for (int64_t i = 0; i < n && st == CT_OK; i++) {
    float best = -INFINITY;
    for (int64_t j = 0; j < m; j++) {
      score[j] = dot(feat + i * E, txt + j * E, E);
      if (owner[j] == i && score[j] > best) best = score[j];
    }
    int64_t rank = 0;
    for (int64_t j = 0; j < m; j++) rank += owner[j] != i && score[j] > best;
    count_rank(&i2t, rank, ds->heldout[i]);
  }
  // text -> image
  for (int64_t j = 0; j < m && st == CT_OK; j++) {
    for (int64_t i = 0; i < n; i++)
      score[i] = dot(txt + j * E, feat + i * E, E);
    int64_t rank = 0;
    for (int64_t i = 0; i < n; i++) rank += score[i] > score[owner[j]];
    count_rank(&t2i, rank, ds->heldout[owner[j]]);
  }
  if (st == CT_OK) {
    static const char *const names[2][2][TOP_K] = {
        {{"r1_i2t", "r5_i2t", "r10_i2t"}, {"r1_t2i", "r5_t2i", "r10_t2i"}},
        {{"r1_i2t_heldout", "r5_i2t_heldout", "r10_i2t_heldout"},
         {"r1_t2i_heldout", "r5_t2i_heldout", "r10_t2i_heldout"}}};
    const recall_counts *dir[2] = {&i2t, &t2i};
    double r[2][2][TOP_K];
    for (int h = 0; h < 2; h++)
      for (int d = 0; d < 2; d++)
        for (int k = 0; k < TOP_K; k++) {
          int64_t q = h ? dir[d]->held_queries : dir[d]->queries;
          int64_t hit = h ? dir[d]->held[k] : dir[d]->hits[k];
          r[h][d][k] = q ? (double)hit / (double)q : 0.0;
          ct_eval_metrics_add(out, names[h][d][k], r[h][d][k]);
        }
    const double temperature =
        exp((double)ct_f32(ct_nn_clip_logit_scale(cp->model))[0]);
    ct_eval_metrics_add(out, "temperature", temperature);
    ct_eval_metrics_add_count(out, "images", n);
    ct_eval_metrics_add_count(out, "texts", m);
    ct_eval_metrics_add_count(out, "heldout_images", i2t.held_queries);
    if (summary) {
      fprintf(summary,
              "%s: %lld images, %lld captions; recall@1/5/10 image->text "
              "%.3f/%.3f/%.3f, text->image %.3f/%.3f/%.3f; temperature "
              "%.2f\n",
              split, (long long)n, (long long)m, r[0][0][0], r[0][0][1],
              r[0][0][2], r[0][1][0], r[0][1][1], r[0][1][2], temperature);
      fprintf(summary,
              "  held-out combinations (%lld images): image->text "
              "%.3f/%.3f/%.3f, text->image %.3f/%.3f/%.3f\n",
              (long long)i2t.held_queries, r[1][0][0], r[1][0][1], r[1][0][2],
              r[1][1][0], r[1][1][1], r[1][1][2]);
    }
  }
  free(score);
  free(feat);
  free(images);
  free(seq);
  free(len);
  free(owner);
  return st;
}

// ---- zero-shot --------------------------------------------------------------

// The palette colour of canvas view v (see plan_canvas): white first.
static int view_colour(int v) {
  return (FIRST_COLOUR + v) % CT_TOY_CAPTIONS_COLOURS;
}

static const char COLOUR_KEY[] = "{colour}";

// How many prompts template t makes of a label for images seen in V views:
// with "{colour}" at V = 1, one per palette colour; otherwise one (at
// V > 1 "{colour}" is the view's colour).
static int prompts_of(const char *t, int V) {
  return V == 1 && strstr(t, COLOUR_KEY) ? CT_TOY_CAPTIONS_COLOURS : 1;
}

// Prompt text: template t with its first "{}" replaced by the label (or
// the label appended after a space when there is none) and every
// "{colour}" by the colour's name.
static void fill_prompt(ct_byte_buffer *text, const char *t, const char *label,
                        const char *colour) {
  const size_t key_len = sizeof COLOUR_KEY - 1;
  bool placed = false;
  text->len = 0;
  while (*t) {
    if (!strncmp(t, COLOUR_KEY, key_len)) {
      ct_byte_buffer_printf(text, "%s", colour);
      t += key_len;
    } else if (!placed && t[0] == '{' && t[1] == '}') {
      ct_byte_buffer_printf(text, "%s", label);
      placed = true;
      t += 2;
    } else {
      ct_byte_buffer_append(text, t++, 1);
    }
  }
  if (!placed) ct_byte_buffer_printf(text, " %s", label);
  ct_byte_buffer_append(text, "", 1);
}

// The class embeddings (K, V, E) for images seen in V views (V > 1: view v
// painted in view_colour(v)): for each label and view, the normalized mean
// of the normalized text features of its prompts (CLIP's prompt
// ensembling), "{colour}" filled with the view's colour; with V = 1 a
// template with "{colour}" stands for one prompt per palette colour.
static ct_status class_embeddings(const contrastive *cp,
                                  const ct_zeroshot_prompts *p, int V,
                                  float **out) {
  const char *const *tpl =
      p->templates ? p->templates : ct_contrastive_default_templates;
  const int nt =
      p->templates ? p->n_templates : ct_contrastive_default_template_count;
  const int64_t K = p->n_labels, groups = K * V;
  int64_t per_group = 0;
  for (int j = 0; j < nt; j++) per_group += prompts_of(tpl[j], V);
  const int64_t n = groups * per_group;
  int32_t **seq = calloc((size_t)n, sizeof *seq);
  int64_t *len = calloc((size_t)n, sizeof *len);
  ct_string_list tokens = {0};
  ct_byte_buffer text = {0};
  ct_status st =
      seq && len ? CT_OK : ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
  for (int64_t g = 0, q = 0; g < groups && st == CT_OK; g++) {
    const char *label = p->labels[g / V];
    for (int j = 0; j < nt && st == CT_OK; j++) {
      const int prompts = prompts_of(tpl[j], V);
      for (int c = 0; c < prompts && st == CT_OK; c++, q++) {
        fill_prompt(
            &text, tpl[j], label,
            ct_toy_captions_colour_name(prompts > 1 ? c : view_colour(g % V)));
        if (text.failed) {
          st = ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
          break;
        }
        ct_string_list_clear(&tokens);
        st = ct_text_tokenizer_tokenize(&cp->tok, text.data, &tokens);
        if (st == CT_OK && tokens.count == 0)
          st = ct_error(CT_ERR_ARG, "zeroshot: the prompt '%s' has no words",
                        text.data);
        seq[q] =
            st == CT_OK ? malloc((size_t)tokens.count * sizeof **seq) : NULL;
        if (st == CT_OK && !seq[q])
          st = ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
        len[q] = tokens.count;
        for (int64_t k = 0; k < tokens.count && st == CT_OK; k++) {
          const char *w = ct_string_list_get(&tokens, k);
          seq[q][k] = ct_vocab_id(&cp->vocab, w);
          if (seq[q][k] == CT_VOCAB_UNK)
            st = ct_error(
                CT_ERR_ARG,
                "zeroshot: label '%s': the word '%s' of the prompt '%s' "
                "is not in the model's vocabulary of %lld words (the "
                "training captions' words; pass --labels and "
                "--template with those)",
                label, w, text.data,
                (long long)ct_vocab_size(&cp->vocab) - CT_VOCAB_SPECIALS);
        }
      }
    }
  }
  embed_units ev = {
      .cp = cp, .seq = (const int32_t *const *)seq, .len = len, .n_txt = n};
  float *feat = NULL;
  if (st == CT_OK) st = embed_all(&ev, &feat);
  float *cls =
      st == CT_OK ? calloc((size_t)(groups * ev.E), sizeof *cls) : NULL;
  if (st == CT_OK && !cls)
    st = ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
  for (int64_t g = 0; g < groups && st == CT_OK; g++) {
    float *c = cls + g * ev.E;
    for (int64_t q = 0; q < per_group; q++)
      for (int64_t e = 0; e < ev.E; e++)
        c[e] += feat[(g * per_group + q) * ev.E + e];
    float norm = sqrtf(dot(c, c, ev.E));
    for (int64_t e = 0; e < ev.E; e++) c[e] /= norm > 1e-12f ? norm : 1e-12f;
  }
  for (int64_t q = 0; seq && q < n; q++) free(seq[q]);
  free(seq);
  free(len);
  free(feat);
  ct_string_list_free(&tokens);
  ct_byte_buffer_free(&text);
  *out = cls;
  return st;
}

// How an image becomes the model's input. A model trained on generated
// canvases sees an image of another size than its input as one item: the
// item (gray, thresholded and rescaled as the generator draws Fashion-MNIST
// items, data/detection.h ct_toy_draw_item) is drawn at the middle of the
// generator's object sizes (cs·(3/5 + 1/8) pixels for cells of cs) in the
// middle of one grid cell, on the generator's mean background gray. A gray
// item has no colour the captions could name, so it is drawn once in each
// palette colour: view v in view_colour(v) (white first) and cell
// v mod grid², and compared with the prompts of that colour (see
// class_probs). Otherwise (an image of the input's size, or a model
// trained on files) the image is only converted and resized: one view.
typedef struct canvas_plan {
  int views;  // canvases per image: the palette's colours, or 1
  int grid, cell, item;
} canvas_plan;

static canvas_plan plan_canvas(const contrastive *cp, int h, int w) {
  const ct_image_meta *m = &cp->meta;
  canvas_plan p = {.views = 1};
  if (cp->cfg.data.source != CT_DATA_SOURCE_TOY || (h == m->H && w == m->W))
    return p;
  p.grid = cp->cfg.data.toy_grid;
  p.views = CT_TOY_CAPTIONS_COLOURS;
  p.cell = m->H / p.grid;
  p.item = p.cell * 3 / 5 + p.cell / 8;
  return p;
}

// View v of image `src` (C0, h, w) into dst (the model's C, H, W).
static void make_canvas(const contrastive *cp, const canvas_plan *p,
                        const uint8_t *src, int C0, int h, int w, int v,
                        uint8_t *dst, uint8_t *gray, uint8_t *cell) {
  const ct_image_meta *m = &cp->meta;
  const int64_t plane = (int64_t)m->H * m->W, in_plane = (int64_t)h * w;
  if (p->views == 1) {
    // Channel conversion, then a resize (interleaved in, planar out).
    uint8_t *hwc = gray;
    for (int64_t q = 0; q < in_plane; q++)
      for (int c = 0; c < m->C; c++) {
        int v3;
        if (C0 == m->C)
          v3 = src[c * in_plane + q];
        else if (m->C == 1)  // RGB -> gray (ITU-R 601 luma)
          v3 = (299 * src[q] + 587 * src[in_plane + q] +
                114 * src[2 * in_plane + q] + 500) /
               1000;
        else
          v3 = src[q];  // gray -> RGB
        hwc[q * m->C + c] = (uint8_t)v3;
      }
    ct_image_resize_bilinear(hwc, h, w, m->C, dst, m->H, m->W);
    return;
  }
  for (int64_t q = 0; q < in_plane; q++)
    gray[q] = C0 == 1 ? src[q]
                      : (uint8_t)((299 * src[q] + 587 * src[in_plane + q] +
                                   114 * src[2 * in_plane + q] + 500) /
                                  1000);
  ct_image_dataset one = {.N = 1, .C = 1, .H = h, .W = w, .pixels = gray};
  ct_toy_draw_item(cell, p->item, &one, 0);
  memset(dst, CANVAS_BACKGROUND, (size_t)(m->C * plane));
  uint8_t rgb[3];
  ct_toy_captions_colour_rgb(view_colour(v), rgb);
  const int at_cell = v % (p->grid * p->grid);
  const int x0 = at_cell % p->grid * p->cell + (p->cell - p->item) / 2;
  const int y0 = at_cell / p->grid * p->cell + (p->cell - p->item) / 2;
  for (int y = 0; y < p->item; y++)
    for (int x = 0; x < p->item; x++) {
      const int g = cell[y * p->item + x];
      if (!g) continue;
      const int64_t at = (int64_t)(y0 + y) * m->W + x0 + x;
      for (int c = 0; c < m->C; c++)
        dst[c * plane + at] = (uint8_t)(rgb[m->C == 3 ? c : 0] * g / 255);
    }
}

// Image features of n images (C0, h, w) u8, consecutive: (n, V, E), one
// normalized row per canvas view (V: plan_canvas's views); the first
// image's first canvas (the model's input) copied to `first` when not NULL.
static ct_status image_features(const contrastive *cp, const uint8_t *src,
                                int64_t n, int C0, int h, int w, float **out,
                                uint8_t *first) {
  const ct_image_meta *m = &cp->meta;
  const canvas_plan p = plan_canvas(cp, h, w);
  const int64_t pixels = (int64_t)m->C * m->H * m->W;
  const int64_t in_pixels = (int64_t)C0 * h * w, views = n * p.views;
  uint8_t *canvases = malloc((size_t)(views * pixels));
  uint8_t *gray = malloc((size_t)h * w * 3);
  uint8_t *cell = malloc((size_t)(p.item * p.item + 1));
  const uint8_t **images = malloc((size_t)views * sizeof *images);
  float *feat = NULL;
  ct_status st = canvases && gray && cell && images
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
  for (int64_t i = 0; i < n && st == CT_OK; i++)
    for (int v = 0; v < p.views; v++) {
      uint8_t *dst = canvases + (i * p.views + v) * pixels;
      make_canvas(cp, &p, src + i * in_pixels, C0, h, w, v, dst, gray, cell);
      images[i * p.views + v] = dst;
    }
  if (st == CT_OK && first && n > 0) memcpy(first, canvases, (size_t)pixels);
  embed_units ev = {.cp = cp, .images = images, .n_img = views};
  if (st == CT_OK) st = embed_all(&ev, &feat);
  free(canvases);
  free(gray);
  free(cell);
  free(images);
  *out = st == CT_OK ? feat : NULL;
  if (st != CT_OK) free(feat);
  return st;
}

// Softmax over the K classes of one image's V view features f (V, E)
// against the class embeddings cls (K, V, E): class k's logit is exp(s)
// times the mean over views of the cosine of view v with (k, v).
static void class_probs(const contrastive *cp, const float *f, const float *cls,
                        int64_t K, int V, int64_t E, double *prob) {
  const double scale =
      exp((double)ct_f32(ct_nn_clip_logit_scale(cp->model))[0]);
  double top = -INFINITY, sum = 0.0;
  for (int64_t k = 0; k < K; k++) {
    double cos = 0.0;
    for (int v = 0; v < V; v++)
      cos += (double)dot(f + v * E, cls + (k * V + v) * E, E);
    prob[k] = scale * cos / V;
    if (prob[k] > top) top = prob[k];
  }
  for (int64_t k = 0; k < K; k++) sum += prob[k] = exp(prob[k] - top);
  for (int64_t k = 0; k < K; k++) prob[k] /= sum;
}

// The class of rank r (0: the best) among K probabilities: ties by index.
static int64_t ranked(const double *prob, int64_t K, int64_t r, int64_t *tmp) {
  for (int64_t k = 0; k < K; k++) tmp[k] = k;
  for (int64_t a = 0; a <= r; a++)
    for (int64_t b = a + 1; b < K; b++)
      if (prob[tmp[b]] > prob[tmp[a]]) {
        int64_t x = tmp[a];
        tmp[a] = tmp[b];
        tmp[b] = x;
      }
  return tmp[r];
}

static ct_status check_prompts(const ct_zeroshot_prompts *p) {
  if (p->n_labels < 2)
    return ct_error(CT_ERR_ARG,
                    "zeroshot: %d label%s: give at least two classes "
                    "(--labels \"a,b,...\")",
                    p->n_labels, p->n_labels == 1 ? "" : "s");
  for (int k = 0; k < p->n_labels; k++)
    if (!p->labels[k][0])
      return ct_error(CT_ERR_ARG, "zeroshot: label %d is empty", k + 1);
  return CT_OK;
}

ct_status ct_contrastive_zeroshot(ct_task *t, const ct_zeroshot_prompts *p,
                                  const char *const *paths, int n, int top,
                                  const char *panels_png, FILE *out) {
  contrastive *cp = t->state;
  const ct_image_meta *m = &cp->meta;
  const int64_t K = p->n_labels, pixels = (int64_t)m->C * m->H * m->W;
  ct_status st = check_prompts(p);
  // --out: the first images' model inputs, captioned with their best class.
  const int panels =
      panels_png ? (n < CT_PLOT_MAX_PANELS ? n : CT_PLOT_MAX_PANELS) : 0;
  uint8_t *inputs = panels ? malloc((size_t)(panels * pixels)) : NULL;
  char(*captions)[64] =
      panels ? calloc((size_t)panels, sizeof *captions) : NULL;
  if (st == CT_OK && panels && (!inputs || !captions))
    st = ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
  // The class embeddings for one-view images (an image of the input's
  // size) and for the palette's views (any other: see plan_canvas), each
  // made when an image first needs it.
  float *cls_of[2] = {NULL, NULL};
  const int64_t E = ct_nn_clip_cfg(cp->model)->embed_dim;
  double *prob = malloc((size_t)K * sizeof *prob);
  int64_t *tmp = malloc((size_t)K * sizeof *tmp);
  if (st == CT_OK && (!prob || !tmp))
    st = ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
  if (top > K) top = (int)K;
  for (int i = 0; i < n && st == CT_OK; i++) {
    uint8_t *px = NULL;
    int h = 0, w = 0;
    // As decoded (interleaved); the canvas wants planar channels.
    st = ct_png_decode(paths[i], cp->meta.C, &px, &h, &w);
    uint8_t *planar = st == CT_OK ? malloc((size_t)cp->meta.C * h * w) : NULL;
    if (st == CT_OK && !planar)
      st = ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
    for (int64_t q = 0; planar && q < (int64_t)h * w; q++)
      for (int c = 0; c < cp->meta.C; c++)
        planar[(int64_t)c * h * w + q] = px[q * cp->meta.C + c];
    const int views = plan_canvas(cp, h, w).views;
    float **cls = &cls_of[views > 1];
    if (st == CT_OK && !*cls) st = class_embeddings(cp, p, views, cls);
    float *f = NULL;
    if (st == CT_OK)
      st = image_features(cp, planar, 1, cp->meta.C, h, w, &f,
                          i < panels ? inputs + i * pixels : NULL);
    if (st == CT_OK) {
      class_probs(cp, f, *cls, K, views, E, prob);
      fprintf(out, "%s:", paths[i]);
      for (int r = 0; r < top; r++) {
        int64_t k = ranked(prob, K, r, tmp);
        fprintf(out, "%s %s %.4f", r ? "," : "", p->labels[k], prob[k]);
      }
      fprintf(out, "\n");
      if (i < panels) {
        int64_t k = ranked(prob, K, 0, tmp);
        snprintf(captions[i], sizeof captions[i], "%s %.1f%%", p->labels[k],
                 100.0 * prob[k]);
      }
    }
    free(f);
    free(px);
    free(planar);
  }
  if (st == CT_OK && panels) {
    // Plain panels: a 1x1 map of zeros draws the image as it is.
    static const float zero = 0.0f;
    const uint8_t *imgs[CT_PLOT_MAX_PANELS];
    const float *maps[CT_PLOT_MAX_PANELS];
    const char *texts[CT_PLOT_MAX_PANELS];
    for (int i = 0; i < panels; i++) {
      imgs[i] = inputs + i * pixels;
      maps[i] = &zero;
      texts[i] = captions[i];
    }
    st = ct_plot_attention_png(panels_png, panels, imgs, m->C, m->H, m->W, maps,
                               1, 1, texts);
    if (st == CT_OK) fprintf(out, "drawn: %s\n", panels_png);
  }
  free(inputs);
  free(captions);
  free(cls_of[0]);
  free(cls_of[1]);
  free(prob);
  free(tmp);
  return st;
}

static bool has_file(const char *dir, const char *name) {
  char path[4096];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool contains_ci(const char *s, const char *word) {
  size_t n = strlen(word);
  for (; *s; s++) {
    size_t i = 0;
    while (i < n && s[i] && tolower((unsigned char)s[i]) == word[i]) i++;
    if (i == n) return true;
  }
  return false;
}

// The labelled set at `path` (see ct_contrastive_zeroshot_eval); *idx: an
// IDX set; *fixed: a format of a fixed 10 classes (IDX, CIFAR-10).
static ct_status load_labelled(const contrastive *cp, const char *path,
                               ct_image_dataset *d, bool *idx, bool *fixed) {
  struct stat sb;
  *idx = *fixed = false;
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return ct_error(CT_ERR_IO,
                    "eval --zeroshot: %s is not a folder (IDX files, CIFAR-10 "
                    "binary files or PNG class folders)",
                    path);
  if (has_file(path, "t10k-images-idx3-ubyte.gz") ||
      has_file(path, "t10k-images-idx3-ubyte")) {
    *idx = *fixed = true;
    ct_status st = ct_idx_load_dir(d, path, false, 10);
    if (st == CT_OK && contains_ci(path, "fashion"))
      st = ct_image_dataset_set_names(d, ct_fashion_mnist_class_names, 10);
    return st;
  }
  if (has_file(path, "test_batch.bin") || has_file(path, "test_batch.bin.gz")) {
    *fixed = true;
    return ct_cifar_load(d, path, CT_CIFAR10, false);
  }
  return ct_png_folder_load(d, path, cp->meta.C, 0, 0);
}

ct_status ct_contrastive_zeroshot_eval(ct_task *t, const char *path,
                                       const ct_zeroshot_prompts *given,
                                       ct_eval_metrics *out, FILE *summary) {
  contrastive *cp = t->state;
  ct_image_dataset d = {0};
  bool idx = false, fixed = false;
  ct_status st = load_labelled(cp, path, &d, &idx, &fixed);
  if (st != CT_OK) return st;
  // IDX and CIFAR-10 files hold 10 classes; a set that uses fewer has as
  // many as its largest label says.
  int K = d.K;
  if (fixed) {
    K = 1;
    for (int64_t i = 0; i < d.N; i++)
      if (d.labels[i] + 1 > K) K = d.labels[i] + 1;
  }
  ct_zeroshot_prompts p = *given;
  const char **names = NULL;
  if (!p.labels) {
    // Fashion-MNIST's labels in the generator's words for a model trained
    // on its items; otherwise the set's own names.
    names = malloc((size_t)K * sizeof *names);
    if (!names) st = ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
    bool items = idx && K == 10 && cp->cfg.data.source == CT_DATA_SOURCE_TOY &&
                 cp->cfg.data.toy_items == CT_TOY_ITEMS_FMNIST;
    for (int k = 0; names && k < K; k++)
      names[k] = items ? ct_toy_captions_kind_name(true, k)
                       : ct_string_list_get(&d.class_names, k);
    p.labels = names;
    p.n_labels = K;
  } else if (p.n_labels != K) {
    st = ct_error(CT_ERR_ARG,
                  "eval --zeroshot: %d labels given, %s has %d classes",
                  p.n_labels, path, K);
  }
  if (st == CT_OK) st = check_prompts(&p);
  const int64_t E = ct_nn_clip_cfg(cp->model)->embed_dim;
  float *cls = NULL, *f = NULL;
  const int views = plan_canvas(cp, d.H, d.W).views;
  if (st == CT_OK) st = class_embeddings(cp, &p, views, &cls);
  if (st == CT_OK)
    st = image_features(cp, d.pixels, d.N, d.C, d.H, d.W, &f, NULL);
  double *prob = malloc((size_t)K * sizeof *prob);
  int64_t *tmp = malloc((size_t)K * sizeof *tmp);
  int64_t *right = calloc((size_t)K, sizeof *right);
  int64_t *total = calloc((size_t)K, sizeof *total);
  if (st == CT_OK && (!prob || !tmp || !right || !total))
    st = ct_error(CT_ERR_NOMEM, "zeroshot: out of memory");
  int64_t correct = 0, top5 = 0;
  for (int64_t i = 0; i < d.N && st == CT_OK; i++) {
    class_probs(cp, f + i * views * E, cls, K, views, E, prob);
    const int32_t y = d.labels[i];
    int64_t rank = 0;
    for (int64_t k = 0; k < K; k++)
      rank += prob[k] > prob[y] || (prob[k] == prob[y] && k < y);
    correct += rank == 0;
    top5 += rank < 5;
    total[y]++;
    right[y] += rank == 0;
  }
  if (st == CT_OK) {
    const double n = d.N ? (double)d.N : 1.0;
    ct_eval_metrics_add(out, "accuracy", (double)correct / n);
    ct_eval_metrics_add(out, "top5", (double)top5 / n);
    ct_eval_metrics_add_count(out, "images", d.N);
    if (summary) {
      fprintf(summary,
              "zero-shot on %s: %lld images, %lld classes, accuracy %.2f%%, "
              "top-5 %.2f%% (%d view%s per image)\n",
              path, (long long)d.N, (long long)K, 100.0 * (double)correct / n,
              100.0 * (double)top5 / n, views, views == 1 ? "" : "s");
      for (int64_t k = 0; k < K; k++)
        fprintf(summary, "  %-12s %6.2f%% of %lld\n", p.labels[k],
                total[k] ? 100.0 * (double)right[k] / (double)total[k] : 0.0,
                (long long)total[k]);
    }
  }
  free(names);
  free(cls);
  free(f);
  free(prob);
  free(tmp);
  free(right);
  free(total);
  ct_image_dataset_free(&d);
  return st;
}

// The recipe of configs/clip_toy.ini (see the README).
static const char *const contrastive_defaults[][3] = {
    {"optim", "optimizer", "adamw"},  {"optim", "lr", "1e-3"},
    {"optim", "beta2", "0.98"},       {"optim", "eps", "1e-6"},
    {"optim", "weight_decay", "0.1"}, {"schedule", "kind", "cosine"},
    {"schedule", "warmup", "200"},    {"model", "patch", "8"},
    {"model", "dim", "128"},          {"model", "depth", "4"},
    {"model", "heads", "4"},          {"model", "mlp_dim", "512"},
    {"model", "dropout", "0"},        {"model", "drop_path", "0"},
    {"data", "toy_image_size", "48"}, {"data", "toy_train", "4000"},
    {"data", "toy_val", "200"},       {"data", "toy_test", "500"},
    {"data", "batch_size", "128"},    {NULL, NULL, NULL}};

const ct_task_ops ct_task_contrastive = {
    .name = "contrastive",
    .rate_unit = "img/s",
    .best_metric = "r1_i2t",
    .defaults = contrastive_defaults,
    .open = contrastive_open,
    .model_width = contrastive_model_width,
    .save = contrastive_save,
    .train_loss = contrastive_train_loss,
    .data_position = ct_task_cursor_position,
    .data_seek = ct_task_cursor_seek,
    .data_stride = ct_task_cursor_stride,
    .epoch_batches = ct_task_cursor_epoch_batches,
    .evaluate = contrastive_evaluate,
    .after_step = contrastive_after_step,
    .close = contrastive_close,
};
