// A task is what the training program trains: its data, its model and its
// evaluation. The loop (train/trainer.c), checkpoints and the commands are
// shared; a task fills in this table: translation (train/translation.c),
// image classification (train/classification.c), object detection
// (train/detection.c), image captioning (train/captioning.c) and
// contrastive image-text training (train/contrastive.c).
#ifndef CT_TRAIN_TASK_H
#define CT_TRAIN_TASK_H

#include <stdio.h>

#include "core/params.h"
#include "data/stride.h"
#include "nn/module.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/jsonl.h"
#include "train/schema.h"

// The metrics of one evaluation, in the order they are logged: measured
// values, and counts (written as integers).
// Room for retrieval tasks (recall at several k, both directions, per split).
enum { CT_EVAL_MAX_METRICS = 32 };

typedef struct ct_eval_metric {
  const char *name;  // static text
  double value;
  bool count;
} ct_eval_metric;

typedef struct ct_eval_metrics {
  ct_eval_metric items[CT_EVAL_MAX_METRICS];
  int n;
} ct_eval_metrics;

// Appends a metric (at most CT_EVAL_MAX_METRICS: more is a bug of the
// task, recorded as a CT_ERR_STATE error and dropped).
void ct_eval_metrics_add(ct_eval_metrics *m, const char *name, double value);
void ct_eval_metrics_add_count(ct_eval_metrics *m, const char *name,
                               int64_t count);
// The value of metric `name`; CT_ERR_STATE when the evaluation has none.
ct_status ct_eval_metrics_get(const ct_eval_metrics *m, const char *name,
                              double *value);
// Adds every metric to a JSON object, in order.
void ct_eval_metrics_to_json(const ct_eval_metrics *m, ct_json_obj *o);

// What a task must load when opened.
typedef enum ct_task_need {
  CT_TASK_MODEL_ONLY,  // translate/classify: the model and its vocabularies
  CT_TASK_EVAL_DATA,   // eval: plus the validation and test splits
  CT_TASK_ALL_DATA,    // train: plus the training split and its batches
} ct_task_need;

typedef struct ct_task ct_task;

typedef struct ct_task_ops {
  const char *name;
  // The metric that picks the best checkpoint (higher is better).
  const char *best_metric;
  // What train_loss counts, per second, for the progress line ("tok/s").
  const char *rate_unit;
  // The task's recipe: {section, key, value} rows, ended by a NULL row, that
  // replace schema defaults a config leaves alone (ct_config_set_default).
  // NULL: none.
  const char *const (*defaults)[3];
  // Recipe rows of one [model] arch, applied after `defaults` (which may
  // set the arch): {arch, section, key, value}, ended by a NULL row. NULL:
  // none.
  const char *const (*arch_defaults)[4];
  // Reads and checks the task's keys of `cfg` (once, into its own typed
  // config), builds the data and registers the model's parameters in `p`
  // (drawn from the seed). With `ckpt`, vocabularies and the like come
  // from it (the caller then loads the parameters). Messages name files,
  // lines and keys.
  ct_status (*open)(ct_task *t, const ct_config *cfg, ct_params *p,
                    const ct_ckpt *ckpt, ct_task_need need);
  // The model's width, the d_model of the inverse_sqrt schedule (d_model
  // of a Transformer or DETR, a ViT's dim).
  int64_t (*model_width)(const ct_task *t);
  // Adds the task's own checkpoint sections (vocabularies).
  ct_status (*save)(ct_task *t, ct_ckpt_writer *w);
  // The loss of the next training micro-batch, recorded on the tape;
  // *items is what it counts (target tokens, images) for throughput.
  ct_tensor *(*train_loss)(ct_task *t, ct_nn_ctx *ctx, double *items);
  // Where the training data stands (the batch the next call returns), and
  // moving there, for exact resume.
  void (*data_position)(const ct_task *t, int64_t *epoch, int64_t *position);
  ct_status (*data_seek)(ct_task *t, int64_t epoch, int64_t position);
  // Data-parallel reading: from now on, after every `take` training batches
  // read, the next `skip` are passed over without being built (data/
  // stride.h); data_seek starts a new group. A rank of N with train.accum
  // A reads A batches of every step's N·A (take A, skip (N - 1) A).
  void (*data_stride)(ct_task *t, int64_t take, int64_t skip);
  int64_t (*epoch_batches)(ct_task *t, int64_t epoch);
  // Optional (NULL: the task's batches do not depend on it): the run's
  // length in training batches (steps · accum · ranks), once it is fixed
  // (after a budget's plan); schedules of the data follow it
  // (classification: the augmentation strength). A line saying what it
  // does goes to `note` when not NULL.
  void (*set_horizon)(ct_task *t, int64_t total_batches, FILE *note);
  // Evaluates on "val" or "test" (beam: decoding width where that applies;
  // limit: first N examples, 0 = all). Adds metrics to `out` (loss, and
  // per task: bleu and exact_match, accuracy, ...; best_metric among
  // them) and prints a human summary to `summary` when not NULL.
  ct_status (*evaluate)(ct_task *t, const char *split, int beam, int64_t limit,
                        ct_eval_metrics *out, FILE *summary);
  // Optional: the model's raw outputs in eval mode for inputs read from a
  // file (`ctrain forward`, interop checks against PyTorch): reads named
  // tensors of `in`, registers and fills the outputs in `out` ("logits").
  ct_status (*forward)(ct_task *t, const ct_params *in, ct_params *out);
  // Optional (NULL: none): writes the task's figures of the last evaluation
  // into the run folder `dir` (classification: the confusion matrix).
  ct_status (*figures)(ct_task *t, const char *dir);
  // Optional (NULL: the task has no text): writes the tokenizers'
  // vocabularies and merges into the folder `dir` (created if needed), one
  // line per file written on `out` (`ctrain export --vocab`).
  ct_status (*export_vocab)(ct_task *t, const char *dir, FILE *out);
  // Optional (NULL: nothing): called on every rank after each optimizer
  // step, with the parameters updated (contrastive: clamps the temperature).
  void (*after_step)(ct_task *t);
  void (*close)(ct_task *t);
} ct_task_ops;

struct ct_task {
  const ct_task_ops *ops;
  void *state;
  // Set by tasks whose loader is a ct_batch_cursor (data/stride.h), for the
  // ct_task_cursor_* ops below; NULL otherwise.
  ct_batch_cursor *cursor;
};

// data_position, data_seek, data_stride and epoch_batches of a task whose
// t->cursor is its loader's (fixed-length epochs).
void ct_task_cursor_position(const ct_task *t, int64_t *epoch,
                             int64_t *position);
ct_status ct_task_cursor_seek(ct_task *t, int64_t epoch, int64_t position);
void ct_task_cursor_stride(ct_task *t, int64_t take, int64_t skip);
int64_t ct_task_cursor_epoch_batches(ct_task *t, int64_t epoch);

extern const ct_task_ops ct_task_translation;
extern const ct_task_ops ct_task_classification;
extern const ct_task_ops ct_task_detection;
extern const ct_task_ops ct_task_captioning;
extern const ct_task_ops ct_task_contrastive;

// The ops of the task a config names ([run] task).
const ct_task_ops *ct_task_for(const ct_config *cfg);
// Applies the recipe defaults of the config's task (see `defaults`).
ct_status ct_task_apply_defaults(ct_config *cfg);

#endif
