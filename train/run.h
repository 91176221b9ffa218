// What the commands share: configs from files and overrides, the run folder,
// and checkpoints of a whole run (model, optimizer, data position, metrics),
// written and read back for exact resume, eval, translate and inspect.
#ifndef CT_TRAIN_RUN_H
#define CT_TRAIN_RUN_H

#include "optim/optim.h"
#include "optim/schedule.h"
#include "data/strings.h"  // ct_make_dirs
#include "train/task.h"

// The keys of [run], [optim], [schedule] and [train] that the training loop
// and the commands use (and [model] init_from), read once from a config by
// ct_run_settings_read. Strings point into the config.
typedef struct ct_run_settings {
  const char *name, *dir;  // [run]: the run folder is dir/name
  uint64_t seed;
  const char *init_from;  // [model]: "" = a random init
  bool init_from_strict;  // [model]: false skips the file's extra tensors
  ct_optim_config optim;  // [optim] optimizer and its hyperparameters
  double clip_norm;       // 0 = no clipping
  // [schedule] and [optim] lr; total_steps and d_model are left 0 for the
  // trainer, which knows them once the task is open.
  ct_schedule schedule;
  // [train]
  int64_t steps, epochs, accum;
  int64_t log_every, eval_every, eval_limit;  // eval_limit: eval_sentences
  int eval_beam, final_beam;
  int64_t checkpoint_every, keep_checkpoints;
  double max_minutes;
  int64_t threads;
  // The precision of the matrix products, for the session of the thread
  // that runs the model (ct_gemm_set_precision); a teacher's config does
  // not change it.
  ct_gemm_precision precision;
  // In bf16 precision, whether activations read only by products are kept
  // in bf16 (ct_gemm_set_bf16_activations; [train] bf16_activations).
  bool bf16_activations;
  // Data-parallel runs (train/data_parallel.h): ZeRO-1, and the size of
  // the gradient buckets exchanged during backward.
  bool shard_optimizer;
  double bucket_mb;
} ct_run_settings;

// Sets the calling thread's session to the run's precision and bf16
// activations (core/gemm.h): what a command does before the model runs.
void ct_run_apply_precision(const ct_run_settings *run);

// The training state a checkpoint holds beyond parameters and moments.
typedef struct ct_run_state {
  int64_t step;             // optimizer steps done
  int64_t epoch, position;  // the next training batch
  double best;              // best value of the task's best_metric (-inf: none)
  int64_t best_step;        // step of the best checkpoint (-1: none)
  double window_loss;       // loss summed since the last log line
  int64_t window_steps;     // steps in that sum
  double train_seconds;     // training time so far (informational)
  // A budgeted run's plan (train/budget.h), fixed before its first step and
  // kept by every resume: its total steps and warmup (0, 0: not planned).
  int64_t planned_steps, planned_warmup;
} ct_run_state;

// A model opened from a checkpoint, for eval/translate/inspect/export.
typedef struct ct_run_model {
  ct_config *cfg;
  ct_run_settings run;  // read from cfg
  ct_params params;
  ct_task task;
  ct_run_state state;
  ct_ckpt *ckpt;
} ct_run_model;

// Loads CONFIG, applies `--set` assignments, then the recipe defaults of the
// config's task for keys still at their schema default. NULL with an error.
ct_config *ct_run_config_load(const char *path, const char *const *sets,
                              int n_sets);
// A config from the text stored in a checkpoint.
ct_config *ct_run_config_from_ckpt(const ct_ckpt *ckpt);
// Reads the settings of a config (after ct_run_config_load), checking the
// ranges the loop relies on: CT_ERR_ARG naming the key.
ct_status ct_run_settings_read(const ct_config *cfg, ct_run_settings *out);
// "dir/name" of the run (malloc'd).
char *ct_run_dir(const ct_run_settings *run);

// Writes the checkpoint of the current state atomically.
ct_status ct_run_save(const char *path, const ct_config *cfg, ct_task *task,
                      const ct_params *p, const ct_optim *opt,
                      const ct_run_state *state, const char *metrics_path);
// Reads the training state (meta section), parameters and, when opt is not
// NULL, the optimizer moments and step.
ct_status ct_run_load(const ct_ckpt *ckpt, ct_params *p, ct_optim *opt,
                      ct_run_state *state);
// Restores metrics.jsonl as it was when the checkpoint was written (an
// empty file for ckpt NULL: a new run).
ct_status ct_run_restore_metrics(const ct_ckpt *ckpt, const char *path);

// Opens the model of a checkpoint: config, settings, task (need says which
// data), parameters and state.
ct_status ct_run_model_open(ct_run_model *m, const char *ckpt_path,
                            ct_task_need need);
void ct_run_model_close(ct_run_model *m);

#endif
