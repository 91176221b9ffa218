// The translation task: data, model, loss and evaluation behind the
// ct_task_ops table (train/task.h).
//
// Data: a toy corpus generated from the seed, or files (two line-aligned
// files per split, or one TSV). Vocabularies are built from the training
// split (min_freq, max_vocab) and stored in checkpoints ("vocab.src",
// "vocab.tgt"), so eval and translate never need the training data.
// Evaluation: teacher-forced loss, then decoding (beam search) of every
// sentence for corpus BLEU (sacreBLEU 13a against the raw references,
// lowercased when the data is) and exact match (token sequences equal).
#include "train/translation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "data/batch.h"
#include "data/text.h"
#include "data/tokenizer.h"
#include "data/toy_translation.h"
#include "data/utf8.h"
#include "data/vocab.h"
#include "nn/seq2seq.h"
#include "train/bleu.h"
#include "train/decode.h"
#include "train/dist.h"
#include "train/schema.h"

enum { RNG_INIT = 0x1417 };

enum { TRAIN, VAL, TEST, SPLITS };

// The keys this task reads, typed: read_config fills and checks them when
// the task is opened. File names point into the config (used to open).
typedef struct translation_config {
  uint64_t seed;
  ct_data_source source;
  ct_toy_options toy;     // source = toy
  ct_text_format format;  // source = files
  const char *src[SPLITS], *tgt[SPLITS], *tsv[SPLITS];
  bool lowercase;
  int64_t min_freq, max_vocab, max_len, batch_size, max_tokens;
  ct_nn_seq2seq_config model;  // the vocabulary sizes come from the data
  float label_smoothing, length_penalty;
  int64_t max_decode_len;  // 0 = source length + 50
} translation_config;

typedef struct split_data {
  ct_parallel_text text;
  ct_pair_corpus ids;
  bool loaded;
} split_data;

typedef struct translation {
  translation_config cfg;
  ct_vocab src_vocab, tgt_vocab;
  ct_nn_seq2seq model;
  bool model_ready;
  split_data train, val, test;
  ct_batcher batcher;
  bool batcher_ready;
} translation;

// ---- data -------------------------------------------------------------------

// [data] keys naming each split's files: pair (source, target), tsv.
static const char *const file_keys[SPLITS][3] = {
    {"train_src", "train_tgt", "train_tsv"},
    {"val_src", "val_tgt", "val_tsv"},
    {"test_src", "test_tgt", "test_tsv"}};

static ct_status read_split(const translation_config *c, int split,
                            ct_parallel_text *out) {
  const char *const *keys = file_keys[split];
  if (c->format == CT_TEXT_FORMAT_TSV) {
    if (!*c->tsv[split])
      return ct_error(CT_ERR_ARG, "[data] %s is not set (format = tsv)",
                      keys[2]);
    return ct_parallel_text_read_tsv(c->tsv[split], 0, out);
  }
  if (!*c->src[split] || !*c->tgt[split])
    return ct_error(CT_ERR_ARG,
                    "[data] %s and %s must be set (source = files, "
                    "format = pair)",
                    keys[0], keys[1]);
  return ct_parallel_text_read_pair(c->src[split], c->tgt[split], 0, out);
}

static ct_status load_text(translation *tr, ct_task_need need) {
  const translation_config *c = &tr->cfg;
  ct_status st = CT_OK;
  if (c->source == CT_DATA_SOURCE_TOY) {
    ct_toy_corpus corpus = {0};
    st = ct_toy_translation_generate(&c->toy, &corpus);
    if (st != CT_OK) return st;
    tr->train.text = corpus.train;
    tr->val.text = corpus.val;
    tr->test.text = corpus.test;
    tr->train.loaded = tr->val.loaded = tr->test.loaded = true;
    return CT_OK;
  }
  if (need == CT_TASK_ALL_DATA) {
    st = read_split(c, TRAIN, &tr->train.text);
    tr->train.loaded = st == CT_OK;
  }
  if (st == CT_OK) {
    st = read_split(c, VAL, &tr->val.text);
    tr->val.loaded = st == CT_OK;
  }
  // The test split is optional for training, needed only to evaluate it.
  const char *test_file =
      c->format == CT_TEXT_FORMAT_TSV ? c->tsv[TEST] : c->src[TEST];
  if (st == CT_OK && need == CT_TASK_EVAL_DATA && *test_file) {
    st = read_split(c, TEST, &tr->test.text);
    tr->test.loaded = st == CT_OK;
  }
  return st;
}

static ct_status build_vocab(ct_vocab *v, const ct_string_list *lines,
                             bool lowercase, int64_t min_freq,
                             int64_t max_size) {
  ct_vocab_counter counter = {0};
  ct_status st = CT_OK;
  for (int64_t i = 0; i < lines->count && st == CT_OK; i++)
    st = ct_vocab_counter_add_text(&counter, ct_string_list_get(lines, i),
                                   lowercase);
  if (st == CT_OK) st = ct_vocab_build(v, &counter, min_freq, max_size);
  ct_vocab_counter_free(&counter);
  return st;
}

static ct_status load_vocab(ct_vocab *v, const ct_ckpt *ckpt,
                            const char *section) {
  const void *data;
  size_t len;
  ct_status st = ct_ckpt_section(ckpt, section, &data, &len);
  return st == CT_OK ? ct_vocab_load(v, data, len) : st;
}

static ct_status encode_split(translation *tr, split_data *s) {
  if (!s->loaded) return CT_OK;
  int64_t unknown = 0;
  return ct_pair_corpus_encode(&s->ids, &s->text, &tr->src_vocab,
                               &tr->tgt_vocab, tr->cfg.lowercase, &unknown);
}

// ---- open / save / close ------------------------------------------------------

static void translation_close(ct_task *t) {
  translation *tr = t->state;
  if (!tr) return;
  if (tr->batcher_ready) ct_batcher_free(&tr->batcher);
  split_data *splits[3] = {&tr->train, &tr->val, &tr->test};
  for (int i = 0; i < 3; i++) {
    ct_parallel_text_free(&splits[i]->text);
    ct_pair_corpus_free(&splits[i]->ids);
  }
  if (tr->model_ready) ct_nn_seq2seq_free(&tr->model);
  ct_vocab_free(&tr->src_vocab);
  ct_vocab_free(&tr->tgt_vocab);
  free(tr);
  t->state = NULL;
}

// Reads the keys of this task into *out, with range checks whose
// messages name the key.
static ct_status read_config(const ct_config *cfg, translation_config *out) {
  static const char *const positive[][2] = {{"model", "d_model"},
                                            {"model", "heads"},
                                            {"model", "ff"},
                                            {"model", "encoder_layers"},
                                            {"model", "decoder_layers"},
                                            {"data", "max_len"},
                                            {"data", "min_freq"},
                                            {"train", "final_beam"},
                                            {"train", "eval_beam"}};
  ct_status checked = ct_config_check_min(
      cfg, positive, sizeof positive / sizeof positive[0], 1);
  if (checked != CT_OK) return checked;
  static const char *const non_negative[][2] = {{"data", "batch_size"},
                                                {"data", "max_tokens"},
                                                {"data", "max_vocab"},
                                                {"train", "max_decode_len"}};
  checked = ct_config_check_min(
      cfg, non_negative, sizeof non_negative / sizeof non_negative[0], 0);
  if (checked != CT_OK) return checked;
  const uint64_t seed = (uint64_t)ct_config_int(cfg, "run", "seed");
  const double dropout = ct_config_float(cfg, "model", "dropout");
  const double smoothing = ct_config_float(cfg, "train", "label_smoothing");
  *out = (translation_config){
      .seed = seed,
      .source = CT_SCHEMA_ENUM(cfg, "data", "source", CT_DATA_SOURCES,
                               ct_data_source),
      .toy = {.task = CT_SCHEMA_ENUM(cfg, "data", "toy_task", CT_TOY_TASKS,
                                     ct_toy_task),
              .seed = seed,
              .train_size = ct_config_int(cfg, "data", "toy_train"),
              .val_size = ct_config_int(cfg, "data", "toy_val"),
              .test_size = ct_config_int(cfg, "data", "toy_test"),
              .min_len = (int)ct_config_int(cfg, "data", "toy_min_len"),
              .max_len = (int)ct_config_int(cfg, "data", "toy_max_len"),
              .symbols = (int)ct_config_int(cfg, "data", "toy_symbols")},
      .format = CT_SCHEMA_ENUM(cfg, "data", "format", CT_TEXT_FORMATS,
                               ct_text_format),
      .lowercase = ct_config_bool(cfg, "data", "lowercase"),
      .min_freq = ct_config_int(cfg, "data", "min_freq"),
      .max_vocab = ct_config_int(cfg, "data", "max_vocab"),
      .max_len = ct_config_int(cfg, "data", "max_len"),
      .batch_size = ct_config_int(cfg, "data", "batch_size"),
      .max_tokens = ct_config_int(cfg, "data", "max_tokens"),
      .model =
          {
              .d_model = ct_config_int(cfg, "model", "d_model"),
              .nhead = ct_config_int(cfg, "model", "heads"),
              .dim_feedforward = ct_config_int(cfg, "model", "ff"),
              .encoder_layers =
                  (int)ct_config_int(cfg, "model", "encoder_layers"),
              .decoder_layers =
                  (int)ct_config_int(cfg, "model", "decoder_layers"),
              .dropout = (float)dropout,
              .activation = CT_SCHEMA_ENUM(cfg, "model", "activation",
                                           CT_ACTIVATIONS, ct_nn_activation),
              .norm_first = ct_config_bool(cfg, "model", "norm_first"),
              .tie_output = ct_config_bool(cfg, "model", "tie_output"),
          },
      .label_smoothing = (float)smoothing,
      .length_penalty = (float)ct_config_float(cfg, "train", "length_penalty"),
      .max_decode_len = ct_config_int(cfg, "train", "max_decode_len"),
  };
  for (int s = 0; s < SPLITS; s++) {
    out->src[s] = ct_config_str(cfg, "data", file_keys[s][0]);
    out->tgt[s] = ct_config_str(cfg, "data", file_keys[s][1]);
    out->tsv[s] = ct_config_str(cfg, "data", file_keys[s][2]);
  }
  if (!out->batch_size && !out->max_tokens)
    return ct_error(CT_ERR_ARG,
                    "[data] batch_size and max_tokens are both 0: "
                    "set one of them");
  if (out->model.d_model % out->model.nhead)
    return ct_error(CT_ERR_ARG,
                    "[model] d_model = %lld is not a multiple of "
                    "heads = %lld",
                    (long long)out->model.d_model, (long long)out->model.nhead);
  if (dropout < 0.0 || dropout >= 1.0)
    return ct_error(CT_ERR_ARG, "[model] dropout = %g: must be in [0, 1)",
                    dropout);
  if (smoothing < 0.0 || smoothing >= 1.0)
    return ct_error(CT_ERR_ARG,
                    "[train] label_smoothing = %g: must be in "
                    "[0, 1)",
                    smoothing);
  return CT_OK;
}

// The training batches, over the pairs within [data] max_len.
static ct_status open_batcher(translation *tr) {
  const translation_config *c = &tr->cfg;
  ct_batch_options bo = {
      .batch_size = c->batch_size,
      .max_tokens = c->max_tokens,
      .max_src_len = c->max_len,
      .max_tgt_len = c->max_len,
      .truncate = false,
      .shuffle = true,
      // Sort by length within pools of 100 batches: little padding, and
      // still a different mix of lengths in every batch each epoch.
      .pool_size = 100 * (c->batch_size ? c->batch_size : 64),
      .seed = c->seed,
  };
  if (ct_batch_count_kept(&tr->train.ids, &bo) == 0)
    return ct_error(CT_ERR_ARG,
                    "translation: no training pair is within "
                    "[data] max_len = %lld tokens",
                    (long long)c->max_len);
  ct_status st = ct_batcher_init(&tr->batcher, &tr->train.ids, &bo);
  tr->batcher_ready = st == CT_OK;
  return st;
}

static ct_status translation_open(ct_task *t, const ct_config *cfg,
                                  ct_params *p, const ct_ckpt *ckpt,
                                  ct_task_need need) {
  translation_config c;
  ct_status st = read_config(cfg, &c);
  if (st != CT_OK) return st;
  translation *tr = calloc(1, sizeof *tr);
  if (!tr) return ct_error(CT_ERR_NOMEM, "translation: out of memory");
  t->state = tr;
  tr->cfg = c;
  if (need != CT_TASK_MODEL_ONLY) st = load_text(tr, need);
  if (st == CT_OK && ckpt) {
    st = load_vocab(&tr->src_vocab, ckpt, "vocab.src");
    if (st == CT_OK) st = load_vocab(&tr->tgt_vocab, ckpt, "vocab.tgt");
  } else if (st == CT_OK) {
    if (!tr->train.loaded)
      return ct_error(CT_ERR_STATE,
                      "translation: no training data to build "
                      "vocabularies from");
    st = build_vocab(&tr->src_vocab, &tr->train.text.src, c.lowercase,
                     c.min_freq, c.max_vocab);
    if (st == CT_OK)
      st = build_vocab(&tr->tgt_vocab, &tr->train.text.tgt, c.lowercase,
                       c.min_freq, c.max_vocab);
  }
  if (st == CT_OK) st = encode_split(tr, &tr->train);
  if (st == CT_OK) st = encode_split(tr, &tr->val);
  if (st == CT_OK) st = encode_split(tr, &tr->test);
  if (st != CT_OK) return st;

  ct_nn_seq2seq_config mc = c.model;
  mc.src_vocab = ct_vocab_size(&tr->src_vocab);
  mc.tgt_vocab = ct_vocab_size(&tr->tgt_vocab);
  ct_rng init = ct_rng_make(c.seed, ct_rng_stream(RNG_INIT, 0));
  st = ct_nn_seq2seq_init(&tr->model, p, &mc, &init);
  tr->model_ready = true;
  if (st != CT_OK || need != CT_TASK_ALL_DATA) return st;
  return open_batcher(tr);
}

static int64_t translation_model_width(const ct_task *t) {
  const translation *tr = t->state;
  return tr->cfg.model.d_model;
}

static ct_status translation_save(ct_task *t, ct_ckpt_writer *w) {
  translation *tr = t->state;
  const ct_vocab *v[2] = {&tr->src_vocab, &tr->tgt_vocab};
  const char *names[2] = {"vocab.src", "vocab.tgt"};
  for (int i = 0; i < 2; i++) {
    char *buf;
    size_t size;
    ct_status st = ct_vocab_save(v[i], &buf, &size);
    if (st == CT_OK) st = ct_ckpt_writer_add(w, names[i], buf, size);
    free(buf);
    if (st != CT_OK) return st;
  }
  return CT_OK;
}

// ---- training -----------------------------------------------------------------

// Cross-entropy of a batch (mean over target tokens), padding ignored.
static ct_tensor *batch_loss(translation *tr, ct_nn_ctx *ctx, const ct_batch *b,
                             float smoothing) {
  ct_tensor *src = ct_tensor_from(CT_I32, b->src, CT_SHAPE(b->B, b->S));
  ct_tensor *tgt_in = ct_tensor_from(CT_I32, b->tgt_in, CT_SHAPE(b->B, b->T));
  ct_tensor *tgt_out =
      ct_tensor_from(CT_I32, b->tgt_out, CT_SHAPE(b->B * b->T));
  ct_tensor *logits = ct_nn_seq2seq_forward(&tr->model, ctx, src, tgt_in);
  ct_ce_opts ce = ct_ce_defaults();
  ce.ignore_index = CT_VOCAB_PAD;
  ce.label_smoothing = smoothing;
  return ct_cross_entropy(
      ct_reshape(logits, CT_SHAPE(b->B * b->T, tr->model.cfg.tgt_vocab)),
      tgt_out, &ce);
}

static ct_tensor *translation_train_loss(ct_task *t, ct_nn_ctx *ctx,
                                         double *items) {
  translation *tr = t->state;
  const ct_batch *b;
  if (ct_batcher_next(&tr->batcher, &b) != CT_OK) return NULL;
  *items = (double)b->tgt_tokens;
  return batch_loss(tr, ctx, b, tr->cfg.label_smoothing);
}

static void translation_data_position(const ct_task *t, int64_t *epoch,
                                      int64_t *position) {
  const translation *tr = t->state;
  *epoch = tr->batcher.epoch;
  *position = tr->batcher.position;
}

static ct_status translation_data_seek(ct_task *t, int64_t epoch,
                                       int64_t position) {
  translation *tr = t->state;
  return ct_batcher_seek(&tr->batcher, epoch, position);
}

static void translation_data_stride(ct_task *t, int64_t take, int64_t skip) {
  translation *tr = t->state;
  ct_batcher_set_stride(&tr->batcher, take, skip);
}

static int64_t translation_epoch_batches(ct_task *t, int64_t epoch) {
  translation *tr = t->state;
  return ct_batcher_epoch_batches(&tr->batcher, epoch);
}

// ---- decoding and evaluation -------------------------------------------------

// A malloc'd lowercase copy of a UTF-8 string (as the tokenizer lowercases).
static char *lowercase_utf8(const char *s) {
  size_t len = strlen(s), pos = 0, n = 0;
  char *out = malloc(4 * len + 1);
  if (!out) return NULL;
  while (pos < len) {
    int32_t cp = ct_utf8_decode(s, len, &pos);
    n += (size_t)ct_utf8_encode(ct_unicode_lower(cp), out + n);
  }
  out[n] = '\0';
  return out;
}

enum { DECODE_SENTENCES = 64 };  // sentences decoded together

// The longest output of decoding these rows: [train] max_decode_len, or
// the longest source + 50.
static int64_t decode_limit(const translation *tr, const ct_pair_corpus *corpus,
                            const int64_t *rows, int64_t n) {
  if (tr->cfg.max_decode_len > 0) return tr->cfg.max_decode_len;
  int64_t max_s = 1;
  for (int64_t i = 0; i < n; i++) {
    int64_t s = ct_pair_corpus_src_len(corpus, rows[i]);
    if (s > max_s) max_s = s;
  }
  return max_s + 50;
}

// Decodes rows[0 .. B) (B <= DECODE_SENTENCES, indices into corpus) as one
// batch with outputs of at most T tokens; hyp[i] receives the generated ids
// of row i (malloc'd), hyp_len[i] their count.
static ct_status decode_batch_rows(translation *tr,
                                   const ct_pair_corpus *corpus,
                                   const int64_t *rows, int64_t B, int beam,
                                   int64_t T, int32_t **hyp, int64_t *hyp_len) {
  int64_t S = 1;
  for (int64_t i = 0; i < B; i++) {
    int64_t s = ct_pair_corpus_src_len(corpus, rows[i]);
    if (s > S) S = s;
  }
  int32_t *src = calloc((size_t)(B * S), sizeof *src);
  int32_t *out = malloc((size_t)(B * T) * sizeof *out);
  int64_t *lens = malloc((size_t)B * sizeof *lens);
  ct_status st = src && out && lens
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "decode: out of memory");
  for (int64_t i = 0; i < B && st == CT_OK; i++) {
    int64_t r = rows[i];
    memcpy(src + i * S, corpus->ids + corpus->starts[2 * r],
           (size_t)ct_pair_corpus_src_len(corpus, r) * sizeof *src);
  }
  ct_decode_opts opts = {
      .beam = beam, .length_penalty = tr->cfg.length_penalty, .max_len = T};
  if (st == CT_OK)
    st = ct_decode_batch(&tr->model, src, B, S, &opts, out, lens);
  for (int64_t i = 0; i < B && st == CT_OK; i++) {
    hyp[i] = malloc((size_t)(lens[i] ? lens[i] : 1) * sizeof **hyp);
    if (!hyp[i]) {
      st = ct_error(CT_ERR_NOMEM, "decode: out of memory");
      break;
    }
    memcpy(hyp[i], out + i * T, (size_t)lens[i] * sizeof *out);
    hyp_len[i] = lens[i];
  }
  free(src);
  free(out);
  free(lens);
  return st;
}

// Decodes the rows of `rows` (indices into corpus) in batches of similar
// source length; hyp[i] receives the generated ids of row i (malloc'd),
// hyp_len[i] their count.
static ct_status decode_rows(translation *tr, const ct_pair_corpus *corpus,
                             const int64_t *rows, int64_t n, int beam,
                             int32_t **hyp, int64_t *hyp_len) {
  const int64_t T = decode_limit(tr, corpus, rows, n);
  ct_status st = CT_OK;
  for (int64_t start = 0; start < n && st == CT_OK; start += DECODE_SENTENCES) {
    int64_t B = n - start < DECODE_SENTENCES ? n - start : DECODE_SENTENCES;
    st = decode_batch_rows(tr, corpus, rows + start, B, beam, T, hyp + start,
                           hyp_len + start);
  }
  return st;
}

// Sorts row indices by source length (stable), so decoding batches pad
// little.
static const ct_pair_corpus *sort_corpus;
static int by_src_len(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  int64_t lx = ct_pair_corpus_src_len(sort_corpus, x);
  int64_t ly = ct_pair_corpus_src_len(sort_corpus, y);
  if (lx != ly) return lx < ly ? -1 : 1;
  return (x > y) - (x < y);
}

// The detokenized text of ids (malloc'd).
static char *ids_to_text(const ct_vocab *v, const int32_t *ids, int64_t n) {
  const char **tokens = malloc((size_t)(n ? n : 1) * sizeof *tokens);
  int64_t count = 0;
  char *text = NULL;
  if (tokens && ct_vocab_decode(v, ids, n, tokens, &count) == CT_OK)
    text = ct_detokenize(tokens, count);
  free(tokens);
  return text;
}

// Teacher-forced loss over the first `limit` rows, a batch per unit of
// the evaluation split (train/dist.h): per batch the summed loss and its
// target tokens, added in batch order.
typedef struct loss_units {
  translation *tr;
  ct_batcher batcher;
  double sum, tokens;
} loss_units;

static ct_status loss_unit(void *arg, int64_t unit, ct_byte_buffer *out) {
  loss_units *lu = arg;
  const ct_batch *batch;
  ct_status st = ct_batcher_seek(&lu->batcher, 0, unit);
  if (st == CT_OK) st = ct_batcher_next(&lu->batcher, &batch);
  if (st != CT_OK) return st;
  ct_arena_mark mark = ct_arena_get_mark();
  ct_tensor *l = batch_loss(lu->tr, NULL, batch, 0.0f);
  if (!l) st = ct_last_status();
  double v[2] = {l ? (double)ct_f32(l)[0] * (double)batch->tgt_tokens : 0.0,
                 (double)batch->tgt_tokens};
  ct_arena_rewind(mark);
  ct_byte_buffer_append(out, v, sizeof v);
  return st;
}

static ct_status loss_fold(void *arg, int64_t unit, const void *data,
                           size_t len) {
  (void)unit, (void)len;
  loss_units *lu = arg;
  double v[2];
  memcpy(v, data, sizeof v);
  lu->sum += v[0];
  lu->tokens += v[1];
  return CT_OK;
}

static ct_status teacher_forced_loss(translation *tr, const ct_pair_corpus *c,
                                     int64_t limit, double *loss) {
  ct_batch_options bo = {.batch_size = 64, .shuffle = false, .pool_size = 0};
  loss_units lu = {.tr = tr};
  ct_pair_corpus sub = {0};
  ct_status st = CT_OK;
  const ct_pair_corpus *use = c;
  if (limit > 0 && limit < c->count) {
    for (int64_t i = 0; i < limit && st == CT_OK; i++)
      st = ct_pair_corpus_add(
          &sub, c->ids + c->starts[2 * i], ct_pair_corpus_src_len(c, i),
          c->ids + c->starts[2 * i + 1], ct_pair_corpus_tgt_len(c, i));
    use = &sub;
  }
  if (st == CT_OK) st = ct_batcher_init(&lu.batcher, use, &bo);
  if (st != CT_OK) {
    ct_pair_corpus_free(&sub);
    return st;
  }
  bool was = ct_grad_set_enabled(false);
  st = ct_dist_for_units(ct_batcher_epoch_batches(&lu.batcher, 0), loss_unit,
                         loss_fold, &lu);
  ct_grad_set_enabled(was);
  ct_batcher_free(&lu.batcher);
  ct_pair_corpus_free(&sub);
  *loss = lu.tokens > 0 ? lu.sum / lu.tokens : 0.0;
  return st;
}

// Decoding for evaluation, DECODE_SENTENCES sorted rows per unit: each
// unit's outputs as (length, ids) per sentence, put back in row order.
typedef struct decode_units {
  translation *tr;
  const ct_pair_corpus *corpus;
  const int64_t *rows;  // sorted by source length
  int64_t n, T;
  int beam;
  int32_t **hyp;  // per row of the corpus
  int64_t *hyp_len;
} decode_units;

static ct_status decode_unit(void *arg, int64_t unit, ct_byte_buffer *out) {
  decode_units *du = arg;
  const int64_t start = unit * DECODE_SENTENCES;
  const int64_t B =
      du->n - start < DECODE_SENTENCES ? du->n - start : DECODE_SENTENCES;
  int32_t *hyp[DECODE_SENTENCES] = {NULL};
  int64_t len[DECODE_SENTENCES];
  ct_status st = decode_batch_rows(du->tr, du->corpus, du->rows + start, B,
                                   du->beam, du->T, hyp, len);
  for (int64_t i = 0; i < B; i++) {
    if (st == CT_OK) {
      ct_byte_buffer_append(out, &len[i], sizeof len[i]);
      ct_byte_buffer_append(out, hyp[i], (size_t)len[i] * sizeof *hyp[i]);
    }
    free(hyp[i]);
  }
  return st;
}

static ct_status decode_fold(void *arg, int64_t unit, const void *data,
                             size_t len) {
  decode_units *du = arg;
  const char *at = data, *end = at + len;
  for (int64_t i = unit * DECODE_SENTENCES;
       i < du->n && i < (unit + 1) * DECODE_SENTENCES; i++) {
    int64_t n;
    if (end - at < (ptrdiff_t)sizeof n)
      return ct_error(CT_ERR_STATE, "evaluate: a decoding result is cut short");
    memcpy(&n, at, sizeof n);
    at += sizeof n;
    int64_t row = du->rows[i];
    du->hyp[row] = malloc((size_t)(n ? n : 1) * sizeof **du->hyp);
    if (!du->hyp[row]) return ct_error(CT_ERR_NOMEM, "evaluate: out of memory");
    memcpy(du->hyp[row], at, (size_t)n * sizeof **du->hyp);
    du->hyp_len[row] = n;
    at += n * (int64_t)sizeof **du->hyp;
  }
  return CT_OK;
}

static ct_status translation_evaluate(ct_task *t, const char *split, int beam,
                                      int64_t limit, ct_eval_metrics *out,
                                      FILE *summary) {
  translation *tr = t->state;
  split_data *s = !strcmp(split, "test") ? &tr->test : &tr->val;
  if (!s->loaded)
    return ct_error(CT_ERR_ARG,
                    "translation: the %s split has no data (set "
                    "[data] %s_src and %s_tgt)",
                    split, split, split);
  const ct_pair_corpus *c = &s->ids;
  int64_t n = limit > 0 && limit < c->count ? limit : c->count;
  double loss = 0.0;
  ct_status st = teacher_forced_loss(tr, c, n, &loss);
  if (st != CT_OK) return st;

  int64_t *rows = malloc((size_t)(n ? n : 1) * sizeof *rows);
  int32_t **hyp = calloc((size_t)(n ? n : 1), sizeof *hyp);
  int64_t *hyp_len = calloc((size_t)(n ? n : 1), sizeof *hyp_len);
  char **hyp_text = calloc((size_t)(n ? n : 1), sizeof *hyp_text);
  char **ref_text = calloc((size_t)(n ? n : 1), sizeof *ref_text);
  if (!rows || !hyp || !hyp_len || !hyp_text || !ref_text)
    st = ct_error(CT_ERR_NOMEM, "evaluate: out of memory");
  for (int64_t i = 0; i < n && st == CT_OK; i++) rows[i] = i;
  if (st == CT_OK) {
    // Decode in length order (the units split over ranks), results back in
    // corpus order.
    sort_corpus = c;
    qsort(rows, (size_t)n, sizeof *rows, by_src_len);
    decode_units du = {.tr = tr,
                       .corpus = c,
                       .rows = rows,
                       .n = n,
                       .T = decode_limit(tr, c, rows, n),
                       .beam = beam,
                       .hyp = hyp,
                       .hyp_len = hyp_len};
    st = ct_dist_for_units((n + DECODE_SENTENCES - 1) / DECODE_SENTENCES,
                           decode_unit, decode_fold, &du);
  }
  int64_t exact = 0;
  for (int64_t i = 0; i < n && st == CT_OK; i++) {
    hyp_text[i] = ids_to_text(&tr->tgt_vocab, hyp[i] ? hyp[i] : (int32_t[]){0},
                              hyp_len[i]);
    const char *ref = ct_string_list_get(&s->text.tgt, i);
    ref_text[i] = tr->cfg.lowercase ? lowercase_utf8(ref) : strdup(ref);
    if (!hyp_text[i] || !ref_text[i]) {
      st = ct_error(CT_ERR_NOMEM, "evaluate: out of memory");
      break;
    }
    // Exact match: the generated ids are the reference's ids.
    const int32_t *ref_ids = c->ids + c->starts[2 * i + 1];
    int64_t ref_len = ct_pair_corpus_tgt_len(c, i);
    exact += hyp_len[i] == ref_len &&
             (ref_len == 0 ||
              !memcmp(hyp[i], ref_ids, (size_t)ref_len * sizeof *ref_ids));
  }
  ct_bleu bleu = {0};
  if (st == CT_OK)
    st = ct_bleu_corpus((const char *const *)hyp_text,
                        (const char *const *)ref_text, n, 1, &bleu);
  if (st == CT_OK) {
    double em = n ? (double)exact / (double)n : 0.0;
    ct_eval_metrics_add(out, "loss", loss);
    ct_eval_metrics_add(out, "ppl", exp(loss));
    ct_eval_metrics_add(out, "bleu", bleu.score);
    ct_eval_metrics_add(out, "exact_match", em);
    ct_eval_metrics_add_count(out, "sentences", n);
    if (summary) {
      char line[256];
      fprintf(summary,
              "%s: %lld sentences, loss %.4f, ppl %.2f, exact match "
              "%.2f%%, beam %d\n%s\n",
              split, (long long)n, loss, exp(loss), 100.0 * em, beam,
              ct_bleu_format(&bleu, line, sizeof line));
      for (int64_t i = 0; i < n && i < 3; i++)
        fprintf(summary, "  src: %s\n  ref: %s\n  out: %s\n",
                ct_string_list_get(&s->text.src, i), ref_text[i], hyp_text[i]);
    }
  }
  for (int64_t i = 0; i < n; i++) {
    if (hyp) free(hyp[i]);
    if (hyp_text) free(hyp_text[i]);
    if (ref_text) free(ref_text[i]);
  }
  free(rows);
  free(hyp);
  free(hyp_len);
  free(hyp_text);
  free(ref_text);
  return st;
}

ct_status ct_translation_translate(ct_task *t, const char *const *lines,
                                   int64_t n, int beam, char **out) {
  translation *tr = t->state;
  ct_pair_corpus c = {0};
  ct_status st = CT_OK;
  for (int64_t i = 0; i < n && st == CT_OK; i++) {
    size_t len = strlen(lines[i]), bad = ct_utf8_find_invalid(lines[i], len);
    if (bad < len) {
      st = ct_error(CT_ERR_FORMAT,
                    "translate: input line %lld: invalid UTF-8 "
                    "byte 0x%02x at column %zu",
                    (long long)(i + 1), (unsigned char)lines[i][bad], bad + 1);
      break;
    }
    ct_string_list tokens = {0};
    st = ct_tokenize(lines[i], tr->cfg.lowercase, &tokens);
    int32_t *ids = malloc((size_t)(tokens.count + 1) * sizeof *ids);
    if (st == CT_OK && !ids)
      st = ct_error(CT_ERR_NOMEM, "translate: out of memory");
    if (st == CT_OK) {
      int64_t unknown = 0;
      ct_vocab_encode(&tr->src_vocab, &tokens, ids, &unknown);
      int64_t len = tokens.count;
      if (len == 0) ids[len++] = CT_VOCAB_UNK;  // decode something for ""
      st = ct_pair_corpus_add(&c, ids, len, ids, 0);
    }
    free(ids);
    ct_string_list_free(&tokens);
  }
  int64_t *rows = malloc((size_t)(n ? n : 1) * sizeof *rows);
  int32_t **hyp = calloc((size_t)(n ? n : 1), sizeof *hyp);
  int64_t *hyp_len = calloc((size_t)(n ? n : 1), sizeof *hyp_len);
  if (st == CT_OK && (!rows || !hyp || !hyp_len))
    st = ct_error(CT_ERR_NOMEM, "translate: out of memory");
  for (int64_t i = 0; i < n && st == CT_OK; i++) rows[i] = i;
  if (st == CT_OK) st = decode_rows(tr, &c, rows, n, beam, hyp, hyp_len);
  for (int64_t i = 0; i < n; i++) {
    out[i] =
        st == CT_OK ? ids_to_text(&tr->tgt_vocab, hyp[i], hyp_len[i]) : NULL;
    if (st == CT_OK && !out[i])
      st = ct_error(CT_ERR_NOMEM, "translate: out of memory");
    if (hyp) free(hyp[i]);
  }
  free(rows);
  free(hyp);
  free(hyp_len);
  ct_pair_corpus_free(&c);
  return st;
}

// in: "src" (B, S) and "tgt_in" (B, T) token ids (as floats, padding 0).
// out: "logits" (B, T, V), teacher-forced, eval mode.
static ct_status translation_forward(ct_task *t, const ct_params *in,
                                     ct_params *out) {
  translation *tr = t->state;
  const ct_param *p[2] = {ct_params_find(in, "src"),
                          ct_params_find(in, "tgt_in")};
  if (!p[0] || !p[1] || p[0]->tensor->ndim != 2 || p[1]->tensor->ndim != 2 ||
      p[0]->tensor->shape[0] != p[1]->tensor->shape[0])
    return ct_error(CT_ERR_ARG,
                    "forward: the inputs need 'src' (B, S) and "
                    "'tgt_in' (B, T) token ids");
  ct_tensor *ids[2];
  for (int k = 0; k < 2; k++) {
    const ct_tensor *f = p[k]->tensor;
    ids[k] = ct_tensor_empty(CT_I32, f->ndim, f->shape);
    if (!ids[k]) return ct_last_status();
    for (int64_t i = 0; i < f->numel; i++)
      ct_i32(ids[k])[i] = (int32_t)ct_f32(f)[i];
  }
  bool was = ct_grad_set_enabled(false);
  ct_tensor *logits = ct_nn_seq2seq_forward(&tr->model, NULL, ids[0], ids[1]);
  ct_grad_set_enabled(was);
  if (!logits) return ct_last_status();
  ct_tensor *dst = ct_params_add(out, "logits", logits->ndim, logits->shape,
                                 CT_PARAM_FROZEN);
  if (!dst) return ct_last_status();
  memcpy(ct_f32(dst), ct_f32(logits), (size_t)logits->numel * sizeof(float));
  return CT_OK;
}

const ct_task_ops ct_task_translation = {
    .name = "translation",
    .rate_unit = "tok/s",
    .best_metric = "bleu",
    .open = translation_open,
    .model_width = translation_model_width,
    .save = translation_save,
    .train_loss = translation_train_loss,
    .data_position = translation_data_position,
    .data_seek = translation_data_seek,
    .data_stride = translation_data_stride,
    .epoch_batches = translation_epoch_batches,
    .evaluate = translation_evaluate,
    .forward = translation_forward,
    .close = translation_close,
};
