// The translation task: data, model, loss and evaluation behind the
// ct_task_ops table (train/task.h).
//
// Data: a toy corpus generated from the seed, or files (two line-aligned
// files per split, or one TSV). Each side has a tokenizer (word, bpe or char;
// data/text_tokenizer.h); BPE merges are learned from the training split (one
// joint table for both sides, or one per side) or read from a merges.txt.
// Vocabularies are built from the training split's tokens (min_freq,
// max_vocab). Merges and vocabularies are stored in checkpoints
// ("merges.src", "merges.tgt", "vocab.src", "vocab.tgt"), so eval and
// translate never need the training data.
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
#include "data/text_tokenizer.h"
#include "data/tokenizer.h"
#include "data/toy_translation.h"
#include "data/utf8.h"
#include "data/vocab.h"
#include "train/bleu.h"
#include "train/decode.h"
#include "train/dist.h"
#include "train/fileio.h"
#include "train/plot.h"
#include "train/progress.h"
#include "train/schema.h"
#include "train/translation_model.h"

enum { RNG_INIT = 0x1417 };

enum { TRAIN, VAL, TEST, SPLITS };
enum { SRC, TGT, SIDES };

static const char *const side_names[SIDES] = {"source", "target"};

// The keys this task reads, typed: read_config fills and checks them when
// the task is opened. File names point into the config (used to open).
typedef struct translation_config {
  uint64_t seed;
  ct_data_source source;
  ct_toy_options toy;     // source = toy
  ct_text_format format;  // source = files
  const char *src[SPLITS], *tgt[SPLITS], *tsv[SPLITS];
  bool lowercase;
  ct_tokenizer_kind tokenizer[SIDES];
  int64_t bpe_merges;
  bool bpe_joint;
  const char *bpe_merges_file;
  int64_t min_freq, max_vocab, max_len, batch_size, max_tokens;
  ct_translation_model_config model;  // the vocabulary sizes come from the data
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
  ct_text_tokenizer tokenizer[SIDES];
  ct_vocab src_vocab, tgt_vocab;
  ct_translation_model model;
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

// An evaluation split without a single pair is refused when the data is
// read, not after training at the first validation.
static ct_status check_not_empty(const translation_config *c, int split,
                                 const split_data *s) {
  if (!s->loaded || ct_parallel_text_count(&s->text) > 0) return CT_OK;
  const char *name = split == VAL ? "validation" : "test";
  if (c->source == CT_DATA_SOURCE_TOY)
    return ct_error(CT_ERR_ARG, "[data] toy_%s = 0: the %s split is empty",
                    split == VAL ? "val" : "test", name);
  return ct_error(
      CT_ERR_FORMAT, "%s: no sentences: the %s split is empty",
      c->format == CT_TEXT_FORMAT_TSV ? c->tsv[split] : c->src[split], name);
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
    return check_not_empty(c, VAL, &tr->val);
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
  if (st == CT_OK) st = check_not_empty(c, VAL, &tr->val);
  if (st == CT_OK) st = check_not_empty(c, TEST, &tr->test);
  return st;
}

// The checkpoint sections of each side's merges (bpe sides only).
static const char *const merges_sections[SIDES] = {"merges.src", "merges.tgt"};

static ct_status load_merges(ct_bpe *b, const ct_ckpt *ckpt,
                             const char *section) {
  const void *data;
  size_t len;
  ct_status st = ct_ckpt_section(ckpt, section, &data, &len);
  char name[512];
  snprintf(name, sizeof name, "%s section %s", ct_ckpt_path(ckpt), section);
  return st == CT_OK ? ct_bpe_load(b, data, len, name) : st;
}

// Learns the merges of side s (or of both, joint) from the training split.
static ct_status learn_merges(translation *tr, int s, bool joint) {
  if (!tr->train.loaded)
    return ct_error(CT_ERR_STATE,
                    "translation: no training data to learn BPE merges from");
  const ct_string_list *lines[SIDES] = {&tr->train.text.src,
                                        &tr->train.text.tgt};
  double start = ct_time_now();
  ct_text_tokenizer *t = &tr->tokenizer[s];
  ct_status st = ct_text_tokenizer_learn(t, joint ? lines : lines + s,
                                         joint ? 2 : 1, tr->cfg.bpe_merges);
  if (st == CT_OK)
    fprintf(stderr,
            "ctrain: bpe: %lld merges learned from the %s training text "
            "(%lld lines) in %.2f s\n",
            (long long)ct_bpe_merge_count(&t->bpe),
            joint ? "source and target" : side_names[s],
            (long long)(joint ? 2 : 1) * tr->train.text.src.count,
            ct_time_now() - start);
  return st;
}

// Each side's tokenizer; bpe merges from the checkpoint, else from [data]
// bpe_merges_file, else learned from the training split.
static ct_status open_tokenizers(translation *tr, const ct_ckpt *ckpt) {
  const translation_config *c = &tr->cfg;
  const bool joint = c->bpe_joint && c->tokenizer[SRC] == CT_TOKENIZER_BPE &&
                     c->tokenizer[TGT] == CT_TOKENIZER_BPE;
  ct_status st = CT_OK;
  for (int s = 0; s < SIDES && st == CT_OK; s++) {
    ct_text_tokenizer *t = &tr->tokenizer[s];
    ct_text_tokenizer_init(t, c->tokenizer[s], c->lowercase);
    if (t->kind != CT_TOKENIZER_BPE) continue;
    if (ckpt)
      st = load_merges(&t->bpe, ckpt, merges_sections[s]);
    else if (*c->bpe_merges_file)
      st = ct_bpe_read_file(&t->bpe, c->bpe_merges_file);
    else if (joint && s == TGT)
      st = ct_bpe_copy(&t->bpe, &tr->tokenizer[SRC].bpe);
    else
      st = learn_merges(tr, s, joint);
  }
  return st;
}

static ct_status build_vocab(ct_vocab *v, const ct_string_list *lines,
                             const ct_text_tokenizer *t, int64_t min_freq,
                             int64_t max_size) {
  ct_vocab_counter counter = {0};
  ct_string_list tokens = {0};
  ct_status st = CT_OK;
  for (int64_t i = 0; i < lines->count && st == CT_OK; i++) {
    ct_string_list_clear(&tokens);
    st = ct_text_tokenizer_tokenize(t, ct_string_list_get(lines, i), &tokens);
    if (st == CT_OK) st = ct_vocab_counter_add_tokens(&counter, &tokens);
  }
  if (st == CT_OK) st = ct_vocab_build(v, &counter, min_freq, max_size);
  ct_string_list_free(&tokens);
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
  return ct_pair_corpus_encode(&s->ids, &s->text, &tr->tokenizer[SRC],
                               &tr->src_vocab, &tr->tokenizer[TGT],
                               &tr->tgt_vocab, &unknown);
}

// Evaluation pairs with a side longer than [data] max_len tokens are cut to
// it, with a warning, before any training: the memory of decoding and of
// the teacher-forced loss grows with the square of a sentence's length
// (one 10 MB validation line once took 6 GB after training ended). The
// references for BLEU stay whole.
static ct_status limit_lengths(translation *tr, split_data *s,
                               const char *split) {
  const ct_pair_corpus *c = &s->ids;
  const int64_t max = tr->cfg.max_len;
  int64_t cut = 0;
  for (int64_t i = 0; i < c->count; i++)
    cut += ct_pair_corpus_src_len(c, i) > max ||
           ct_pair_corpus_tgt_len(c, i) > max;
  if (!cut) return CT_OK;
  ct_pair_corpus kept = {0};
  ct_status st = CT_OK;
  for (int64_t i = 0; i < c->count && st == CT_OK; i++) {
    int64_t ls = ct_pair_corpus_src_len(c, i),
            lt = ct_pair_corpus_tgt_len(c, i);
    st = ct_pair_corpus_add(&kept, c->ids + c->starts[2 * i],
                            ls < max ? ls : max, c->ids + c->starts[2 * i + 1],
                            lt < max ? lt : max);
  }
  if (st != CT_OK) {
    ct_pair_corpus_free(&kept);
    return st;
  }
  ct_pair_corpus_free(&s->ids);
  s->ids = kept;
  fprintf(stderr,
          "ctrain: warning: %lld of the %lld %s pairs have a side longer "
          "than [data] max_len = %lld tokens: evaluation cuts them to it\n",
          (long long)cut, (long long)c->count, split, (long long)max);
  return CT_OK;
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
  ct_translation_model_free(&tr->model);
  for (int side = 0; side < SIDES; side++)
    ct_text_tokenizer_free(&tr->tokenizer[side]);
  ct_vocab_free(&tr->src_vocab);
  ct_vocab_free(&tr->tgt_vocab);
  free(tr);
  t->state = NULL;
}

// Reads the keys of this task into *out, with the checks whose messages
// name the key that the schema's integer ranges do not already make.
static ct_status read_config(const ct_config *cfg, translation_config *out) {
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
      .bpe_merges = ct_config_int(cfg, "data", "bpe_merges"),
      .bpe_joint = ct_config_bool(cfg, "data", "bpe_joint"),
      .bpe_merges_file = ct_config_str(cfg, "data", "bpe_merges_file"),
      .min_freq = ct_config_int(cfg, "data", "min_freq"),
      .max_vocab = ct_config_int(cfg, "data", "max_vocab"),
      .max_len = ct_config_int(cfg, "data", "max_len"),
      .batch_size = ct_config_int(cfg, "data", "batch_size"),
      .max_tokens = ct_config_int(cfg, "data", "max_tokens"),
      .label_smoothing = (float)smoothing,
      .length_penalty = (float)ct_config_float(cfg, "train", "length_penalty"),
      .max_decode_len = ct_config_int(cfg, "train", "max_decode_len"),
  };
  // A side's key, unless "same", overrides [data] tokenizer.
  static const char *const side_keys[SIDES] = {"src_tokenizer",
                                               "tgt_tokenizer"};
  for (int s = 0; s < SIDES; s++) {
    int kind =
        CT_SCHEMA_ENUM(cfg, "data", side_keys[s], CT_SIDE_TOKENIZERS, int);
    out->tokenizer[s] = kind == CT_TOKENIZER_SAME
                            ? CT_SCHEMA_ENUM(cfg, "data", "tokenizer",
                                             CT_TOKENIZERS, ct_tokenizer_kind)
                            : (ct_tokenizer_kind)kind;
  }
  for (int s = 0; s < SPLITS; s++) {
    out->src[s] = ct_config_str(cfg, "data", file_keys[s][0]);
    out->tgt[s] = ct_config_str(cfg, "data", file_keys[s][1]);
    out->tsv[s] = ct_config_str(cfg, "data", file_keys[s][2]);
  }
  ct_status checked = ct_translation_model_read(cfg, &out->model);
  if (checked != CT_OK) return checked;
  if (!out->batch_size && !out->max_tokens)
    return ct_error(CT_ERR_ARG,
                    "[data] batch_size and max_tokens are both 0: "
                    "set one of them");
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
  if (st == CT_OK) st = open_tokenizers(tr, ckpt);
  if (st == CT_OK && ckpt) {
    st = load_vocab(&tr->src_vocab, ckpt, "vocab.src");
    if (st == CT_OK) st = load_vocab(&tr->tgt_vocab, ckpt, "vocab.tgt");
  } else if (st == CT_OK) {
    if (!tr->train.loaded)
      return ct_error(CT_ERR_STATE,
                      "translation: no training data to build "
                      "vocabularies from");
    st = build_vocab(&tr->src_vocab, &tr->train.text.src, &tr->tokenizer[SRC],
                     c.min_freq, c.max_vocab);
    if (st == CT_OK)
      st = build_vocab(&tr->tgt_vocab, &tr->train.text.tgt, &tr->tokenizer[TGT],
                       c.min_freq, c.max_vocab);
  }
  if (st == CT_OK) st = encode_split(tr, &tr->train);
  if (st == CT_OK) st = encode_split(tr, &tr->val);
  if (st == CT_OK) st = encode_split(tr, &tr->test);
  if (st == CT_OK) st = limit_lengths(tr, &tr->val, "validation");
  if (st == CT_OK) st = limit_lengths(tr, &tr->test, "test");
  if (st != CT_OK) return st;

  ct_rng init = ct_rng_make(c.seed, ct_rng_stream(RNG_INIT, 0));
  st = ct_translation_model_init(&tr->model, p, &c.model,
                                 ct_vocab_size(&tr->src_vocab),
                                 ct_vocab_size(&tr->tgt_vocab), &init);
  if (st != CT_OK || need != CT_TASK_ALL_DATA) return st;
  return open_batcher(tr);
}

static int64_t translation_model_width(const ct_task *t) {
  const translation *tr = t->state;
  return ct_translation_model_width(&tr->model);
}

static ct_status translation_save(ct_task *t, ct_ckpt_writer *w) {
  translation *tr = t->state;
  const ct_vocab *v[SIDES] = {&tr->src_vocab, &tr->tgt_vocab};
  const char *names[SIDES] = {"vocab.src", "vocab.tgt"};
  for (int i = 0; i < SIDES; i++) {
    char *buf;
    size_t size;
    ct_status st = ct_vocab_save(v[i], &buf, &size);
    if (st == CT_OK) st = ct_ckpt_writer_add(w, names[i], buf, size);
    free(buf);
    if (st != CT_OK) return st;
  }
  for (int i = 0; i < SIDES; i++) {
    if (tr->tokenizer[i].kind != CT_TOKENIZER_BPE) continue;
    char *buf;
    size_t size;
    ct_status st = ct_bpe_save(&tr->tokenizer[i].bpe, &buf, &size);
    if (st == CT_OK) st = ct_ckpt_writer_add(w, merges_sections[i], buf, size);
    free(buf);
    if (st != CT_OK) return st;
  }
  return CT_OK;
}

// Writes `size` bytes to dir/name atomically and names the file on `out`.
static ct_status write_text_file(const char *dir, const char *name,
                                 const char *text, size_t size,
                                 const char *what, FILE *out) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    return ct_error(CT_ERR_ARG, "export: the folder name is too long: %s", dir);
  ct_ckpt_piece piece = {text, size};
  ct_status st = ct_ckpt_write_atomic(path, &piece, 1);
  if (st == CT_OK) fprintf(out, "wrote %s (%s)\n", path, what);
  return st;
}

// dir/src.vocab.json and dir/tgt.vocab.json ({"token": id, ...}, the layout
// of Hugging Face tokenizers' vocab.json), and the merges of the bpe sides:
// dir/merges.txt when both sides share one table, else src.merges.txt /
// tgt.merges.txt.
static ct_status translation_export_vocab(ct_task *t, const char *dir,
                                          FILE *out) {
  translation *tr = t->state;
  static const char *const prefix[SIDES] = {"src", "tgt"};
  const ct_vocab *v[SIDES] = {&tr->src_vocab, &tr->tgt_vocab};
  ct_status st = ct_make_dirs(dir);
  char name[64], what[96];
  for (int s = 0; s < SIDES && st == CT_OK; s++) {
    ct_json_obj o;
    ct_json_obj_init(&o);
    for (int32_t id = 0; id < ct_vocab_size(v[s]); id++)
      ct_json_obj_int(&o, ct_vocab_token(v[s], id), id);
    const char *json = ct_json_obj_text(&o);
    snprintf(name, sizeof name, "%s.vocab.json", prefix[s]);
    snprintf(what, sizeof what, "%s vocabulary, %lld %s tokens", side_names[s],
             (long long)ct_vocab_size(v[s]),
             ct_tokenizer_kind_name(tr->tokenizer[s].kind));
    st = json ? write_text_file(dir, name, json, strlen(json), what, out)
              : ct_error(CT_ERR_NOMEM, "export: out of memory");
    ct_json_obj_free(&o);
  }
  char *merges[SIDES] = {NULL, NULL};
  size_t size[SIDES] = {0, 0};
  for (int s = 0; s < SIDES && st == CT_OK; s++)
    if (tr->tokenizer[s].kind == CT_TOKENIZER_BPE)
      st = ct_bpe_save(&tr->tokenizer[s].bpe, &merges[s], &size[s]);
  const bool shared = merges[SRC] && merges[TGT] && size[SRC] == size[TGT] &&
                      !memcmp(merges[SRC], merges[TGT], size[SRC]);
  for (int s = 0; s < SIDES && st == CT_OK; s++) {
    if (!merges[s] || (shared && s == TGT)) continue;
    snprintf(name, sizeof name, "%s%s", shared ? "" : prefix[s],
             shared ? "merges.txt" : ".merges.txt");
    snprintf(what, sizeof what, "%lld merges, %s",
             (long long)ct_bpe_merge_count(&tr->tokenizer[s].bpe),
             shared ? "source and target" : side_names[s]);
    st = write_text_file(dir, name, merges[s], size[s], what, out);
  }
  free(merges[SRC]);
  free(merges[TGT]);
  return st;
}

// ---- training -----------------------------------------------------------------

// Cross-entropy of a batch (mean over target tokens), padding ignored.
static ct_tensor *batch_loss(translation *tr, ct_nn_ctx *ctx, const ct_batch *b,
                             float smoothing) {
  ct_tensor *src = ct_tensor_from(CT_I32, b->src, CT_SHAPE(b->B, b->S));
  ct_tensor *tgt_in = ct_tensor_from(CT_I32, b->tgt_in, CT_SHAPE(b->B, b->T));
  ct_tensor *tgt_out =
      ct_tensor_from(CT_I32, b->tgt_out, CT_SHAPE(b->B * b->T));
  ct_tensor *logits = ct_translation_model_logits(&tr->model, ctx, src, tgt_in);
  ct_ce_opts ce = ct_ce_defaults();
  ce.ignore_index = CT_VOCAB_PAD;
  ce.label_smoothing = smoothing;
  const int64_t V = ct_translation_model_tgt_vocab(&tr->model);
  return ct_cross_entropy(ct_reshape(logits, CT_SHAPE(b->B * b->T, V)), tgt_out,
                          &ce);
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
    st = ct_translation_model_decode(&tr->model, src, B, S, &opts, out, lens,
                                     NULL);
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

// The detokenized target text of ids (malloc'd).
static char *ids_to_text(const translation *tr, const int32_t *ids, int64_t n) {
  const char **tokens = malloc((size_t)(n ? n : 1) * sizeof *tokens);
  int64_t count = 0;
  char *text = NULL;
  if (tokens &&
      ct_vocab_decode(&tr->tgt_vocab, ids, n, tokens, &count) == CT_OK)
    text = ct_text_tokenizer_detokenize(&tr->tokenizer[TGT], tokens, count);
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

// One line on each side's tokens over the first n pairs: the tokenizer, the
// vocabulary size, tokens per sentence and the share of <unk>.
static void print_token_summary(const translation *tr, const ct_pair_corpus *c,
                                int64_t n, FILE *out) {
  const ct_vocab *v[SIDES] = {&tr->src_vocab, &tr->tgt_vocab};
  fprintf(out, "tokens:");
  for (int side = 0; side < SIDES; side++) {
    int64_t tokens = 0, unknown = 0;
    for (int64_t i = 0; i < n; i++) {
      int64_t from = c->starts[2 * i + side], to = c->starts[2 * i + side + 1];
      tokens += to - from;
      for (int64_t k = from; k < to; k++) unknown += c->ids[k] == CT_VOCAB_UNK;
    }
    fprintf(out, "%s %s %s, vocabulary %lld, %.1f per sentence, %.2f%% <unk>",
            side ? ";" : "", side_names[side],
            ct_tokenizer_kind_name(tr->tokenizer[side].kind),
            (long long)ct_vocab_size(v[side]),
            n ? (double)tokens / (double)n : 0.0,
            tokens ? 100.0 * (double)unknown / (double)tokens : 0.0);
  }
  fprintf(out, "\n");
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
    hyp_text[i] = ids_to_text(tr, hyp[i] ? hyp[i] : (int32_t[]){0}, hyp_len[i]);
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
      print_token_summary(tr, c, n, summary);
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

// Tokenizes input line i (0-based, for messages) and adds its ids to c as
// a source (no target); *tokens, when not NULL, receives the tokens.
static ct_status add_source_line(translation *tr, const char *line, int64_t i,
                                 ct_pair_corpus *c, ct_string_list *tokens) {
  size_t len = strlen(line), bad = ct_utf8_find_invalid(line, len);
  if (bad < len)
    return ct_error(CT_ERR_FORMAT,
                    "translate: input line %lld: invalid UTF-8 "
                    "byte 0x%02x at column %zu",
                    (long long)(i + 1), (unsigned char)line[bad], bad + 1);
  ct_string_list own = {0};
  ct_string_list *tok = tokens ? tokens : &own;
  ct_status st = ct_text_tokenizer_tokenize(&tr->tokenizer[SRC], line, tok);
  int32_t *ids = malloc((size_t)(tok->count + 1) * sizeof *ids);
  if (st == CT_OK && !ids)
    st = ct_error(CT_ERR_NOMEM, "translate: out of memory");
  if (st == CT_OK) {
    int64_t unknown = 0;
    ct_vocab_encode(&tr->src_vocab, tok, ids, &unknown);
    int64_t n = tok->count;
    if (n == 0) ids[n++] = CT_VOCAB_UNK;  // decode something for ""
    if (n > tr->cfg.max_len) {            // as evaluation does (limit_lengths)
      fprintf(stderr,
              "ctrain: warning: input line %lld: %lld tokens, cut to "
              "[data] max_len = %lld\n",
              (long long)(i + 1), (long long)n, (long long)tr->cfg.max_len);
      n = tr->cfg.max_len;
    }
    st = ct_pair_corpus_add(c, ids, n, ids, 0);
  }
  free(ids);
  ct_string_list_free(&own);
  return st;
}

ct_status ct_translation_translate(ct_task *t, const char *const *lines,
                                   int64_t n, int beam, char **out) {
  translation *tr = t->state;
  ct_pair_corpus c = {0};
  ct_status st = CT_OK;
  for (int64_t i = 0; i < n && st == CT_OK; i++)
    st = add_source_line(tr, lines[i], i, &c, NULL);
  int64_t *rows = malloc((size_t)(n ? n : 1) * sizeof *rows);
  int32_t **hyp = calloc((size_t)(n ? n : 1), sizeof *hyp);
  int64_t *hyp_len = calloc((size_t)(n ? n : 1), sizeof *hyp_len);
  if (st == CT_OK && (!rows || !hyp || !hyp_len))
    st = ct_error(CT_ERR_NOMEM, "translate: out of memory");
  for (int64_t i = 0; i < n && st == CT_OK; i++) rows[i] = i;
  if (st == CT_OK) st = decode_rows(tr, &c, rows, n, beam, hyp, hyp_len);
  for (int64_t i = 0; i < n; i++) {
    out[i] = st == CT_OK ? ids_to_text(tr, hyp[i], hyp_len[i]) : NULL;
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

ct_status ct_translation_attention(ct_task *t, const char *line, int beam,
                                   const char *png_path, char **out) {
  translation *tr = t->state;
  *out = NULL;
  if (tr->cfg.model.arch != CT_ARCH_RNN)
    return ct_error(CT_ERR_ARG,
                    "translate --attention: the checkpoint's model is a "
                    "Transformer; alignments are drawn for [model] arch = rnn "
                    "(one attention, not several heads per layer)");
  ct_pair_corpus c = {0};
  ct_string_list src_tokens = {0};
  ct_status st = add_source_line(tr, line, 0, &c, &src_tokens);
  const int64_t S = st == CT_OK ? ct_pair_corpus_src_len(&c, 0) : 1;
  const int64_t T =
      tr->cfg.max_decode_len > 0 ? tr->cfg.max_decode_len : S + 50;
  int32_t *ids = malloc((size_t)T * sizeof *ids);
  float *align = malloc((size_t)(T * S) * sizeof *align);
  const char **rows = malloc((size_t)(T + 1) * sizeof *rows);
  const char **cols = malloc((size_t)S * sizeof *cols);
  if (st == CT_OK && (!ids || !align || !rows || !cols))
    st = ct_error(CT_ERR_NOMEM, "translate: out of memory");
  int64_t len = 0;
  const ct_decode_opts opts = {
      .beam = beam, .length_penalty = tr->cfg.length_penalty, .max_len = T};
  if (st == CT_OK)
    st = ct_translation_model_decode(&tr->model, c.ids, 1, S, &opts, ids, &len,
                                     align);
  if (st == CT_OK) {
    // Rows: the output tokens, and <eos> when the search emitted it.
    int64_t n_rows = 0;
    for (int64_t i = 0; i < len && st == CT_OK; i++)
      if (!(rows[n_rows++] = ct_vocab_token(&tr->tgt_vocab, ids[i])))
        st = ct_last_status();
    if (len < T) rows[n_rows++] = ct_vocab_token(&tr->tgt_vocab, CT_VOCAB_EOS);
    // Columns: the source as tokenized ("" stands for an empty line).
    for (int64_t j = 0; j < S; j++)
      cols[j] = src_tokens.count ? ct_string_list_get(&src_tokens, j) : "";
    if (st == CT_OK)
      st = ct_plot_alignment_png(png_path, (int)n_rows, rows, (int)S, cols,
                                 align, NULL);
  }
  if (st == CT_OK && !(*out = ids_to_text(tr, ids, len)))
    st = ct_error(CT_ERR_NOMEM, "translate: out of memory");
  free(ids);
  free(align);
  free(rows);
  free(cols);
  ct_string_list_free(&src_tokens);
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
      p[0]->tensor->shape[0] != p[1]->tensor->shape[0] ||
      p[0]->tensor->numel == 0 || p[1]->tensor->numel == 0)
    return ct_error(CT_ERR_ARG,
                    "forward: the inputs need 'src' (B, S) and "
                    "'tgt_in' (B, T) token ids, B, S and T at least 1");
  ct_tensor *ids[2];
  const int64_t vocab[2] = {ct_vocab_size(&tr->src_vocab),
                            ct_vocab_size(&tr->tgt_vocab)};
  for (int k = 0; k < 2; k++) {
    const ct_tensor *f = p[k]->tensor;
    ids[k] = ct_tensor_empty(CT_I32, f->ndim, f->shape);
    if (!ids[k]) return ct_last_status();
    for (int64_t i = 0; i < f->numel; i++) {
      float v = ct_f32(f)[i];  // whole and in the vocabulary, checked as a
                               // float (a cast of 1e30 is undefined)
      if (!(v >= 0.0f && v < (float)vocab[k] && v == floorf(v)))
        return ct_error(CT_ERR_INDEX,
                        "forward: '%s' element %lld is %g, not a token id "
                        "of the vocabulary (0..%lld)",
                        k ? "tgt_in" : "src", (long long)i, (double)v,
                        (long long)vocab[k] - 1);
      ct_i32(ids[k])[i] = (int32_t)v;
    }
  }
  bool was = ct_grad_set_enabled(false);
  ct_tensor *logits =
      ct_translation_model_logits(&tr->model, NULL, ids[0], ids[1]);
  ct_grad_set_enabled(was);
  if (!logits) return ct_last_status();
  ct_tensor *dst = ct_params_add(out, "logits", logits->ndim, logits->shape,
                                 CT_PARAM_FROZEN);
  if (!dst) return ct_last_status();
  memcpy(ct_f32(dst), ct_f32(logits), (size_t)logits->numel * sizeof(float));
  return CT_OK;
}

// The recipe defaults of translation, where a config leaves the key at its
// schema default.
static const char *const translation_defaults[][3] = {
    {"model", "arch", "transformer"}, {NULL, NULL, NULL}};

const ct_task_ops ct_task_translation = {
    .name = "translation",
    .rate_unit = "tok/s",
    .best_metric = "bleu",
    .defaults = translation_defaults,
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
    .export_vocab = translation_export_vocab,
    .close = translation_close,
};
