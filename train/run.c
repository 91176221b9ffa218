// Configs, run folders and whole-run checkpoints (see run.h).
//
// Checkpoint sections written by ct_run_save:
//   meta            record: u32 version, str task, i64 step, epoch, position,
//                   optimizer step, best_step; f64 best, window_loss;
//                   i64 window_steps; f64 train_seconds; (version 2)
//                   i64 planned_steps, planned_warmup
//   config          the resolved config.ini text
//   vocab.src/.tgt  (translation) vocabularies
//   params          parameter values by name
//   optim.N         optimizer state slot N, laid out like params
//   metrics         metrics.jsonl as it was at this step
#include "train/run.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/gemm.h"
#include "train/checkpoint_params.h"
#include "train/fileio.h"
#include "train/schema.h"

// Version 1 (before budgeted schedules) has no plan; it is still read.
enum { META_VERSION = 2 };

ct_config *ct_run_config_load(const char *path, const char *const *sets,
                              int n_sets) {
  ct_config *cfg = ct_train_config_new();
  if (!cfg) return NULL;
  if (ct_config_load(cfg, path) != CT_OK) goto fail;
  for (int i = 0; i < n_sets; i++)
    if (ct_config_set(cfg, sets[i]) != CT_OK) goto fail;
  if (ct_task_apply_defaults(cfg) != CT_OK) goto fail;
  return cfg;
fail:
  ct_config_free(cfg);
  return NULL;
}

// Translation checkpoints written before [model] arch chose between
// translation models hold its schema default there (a classification
// arch): their model is the Transformer.
// The same for detection checkpoints written before deformable_detr: their
// model is DETR.
static ct_status upgrade_ckpt_config(ct_config *cfg) {
  static const ct_model_arch translation[] = {
      CT_TRANSLATION_ARCHS(CT_SCHEMA_VALUE)};
  static const ct_model_arch detection[] = {
      CT_DETECTION_ARCHS(CT_SCHEMA_VALUE)};
  const ct_task_kind task =
      CT_SCHEMA_ENUM(cfg, "run", "task", CT_RUN_TASKS, ct_task_kind);
  const bool tr = task == CT_TASK_TRANSLATION;
  if (!tr && task != CT_TASK_DETECTION) return CT_OK;
  const ct_model_arch *archs = tr ? translation : detection;
  const size_t n = tr ? sizeof translation / sizeof *translation
                      : sizeof detection / sizeof *detection;
  const ct_model_arch arch =
      CT_SCHEMA_ENUM(cfg, "model", "arch", CT_MODEL_ARCHS, ct_model_arch);
  for (size_t i = 0; i < n; i++)
    if (archs[i] == arch) return CT_OK;
  return ct_config_set(cfg, tr ? "model.arch=transformer" : "model.arch=detr");
}

ct_config *ct_run_config_from_ckpt(const ct_ckpt *ckpt) {
  const void *text;
  size_t len;
  if (ct_ckpt_section(ckpt, "config", &text, &len) != CT_OK) return NULL;
  char *copy = malloc(len + 1);
  ct_config *cfg = copy ? ct_train_config_new() : NULL;
  if (cfg) {
    memcpy(copy, text, len);
    copy[len] = '\0';
    char what[512];
    snprintf(what, sizeof what, "%s (config)", ct_ckpt_path(ckpt));
    if (ct_config_parse(cfg, copy, what) != CT_OK ||
        upgrade_ckpt_config(cfg) != CT_OK) {
      ct_config_free(cfg);
      cfg = NULL;
    }
  }
  free(copy);
  return cfg;
}

ct_status ct_run_settings_read(const ct_config *cfg, ct_run_settings *out) {
  // Integer keys are in their schema ranges already ([train] accum and
  // log_every at least 1: the loop divides by them).
  *out = (ct_run_settings){
      .name = ct_config_str(cfg, "run", "name"),
      .dir = ct_config_str(cfg, "run", "dir"),
      .seed = (uint64_t)ct_config_int(cfg, "run", "seed"),
      .init_from = ct_config_str(cfg, "model", "init_from"),
      .init_from_strict = ct_config_bool(cfg, "model", "init_from_strict"),
      .clip_norm = ct_config_float(cfg, "optim", "clip_norm"),
      .schedule =
          {
              .kind = CT_SCHEMA_ENUM(cfg, "schedule", "kind", CT_SCHEDULE_KINDS,
                                     ct_schedule_kind),
              .lr = ct_config_float(cfg, "optim", "lr"),
              .min_lr = ct_config_float(cfg, "schedule", "min_lr"),
              .warmup_steps = ct_config_int(cfg, "schedule", "warmup"),
              .step_size = ct_config_int(cfg, "schedule", "step_size"),
              .gamma = ct_config_float(cfg, "schedule", "gamma"),
          },
      .steps = ct_config_int(cfg, "train", "steps"),
      .epochs = ct_config_int(cfg, "train", "epochs"),
      .accum = ct_config_int(cfg, "train", "accum"),
      .log_every = ct_config_int(cfg, "train", "log_every"),
      .eval_every = ct_config_int(cfg, "train", "eval_every"),
      .eval_limit = ct_config_int(cfg, "train", "eval_sentences"),
      .eval_beam = (int)ct_config_int(cfg, "train", "eval_beam"),
      .final_beam = (int)ct_config_int(cfg, "train", "final_beam"),
      .checkpoint_every = ct_config_int(cfg, "train", "checkpoint_every"),
      .keep_checkpoints = ct_config_int(cfg, "train", "keep_checkpoints"),
      .max_minutes = ct_config_float(cfg, "train", "max_minutes"),
      .threads = ct_config_int(cfg, "train", "threads"),
      .precision = CT_SCHEMA_ENUM(cfg, "train", "precision", CT_PRECISIONS,
                                  ct_gemm_precision),
      .bf16_activations = ct_config_bool(cfg, "train", "bf16_activations"),
      .shard_optimizer = ct_config_bool(cfg, "train", "shard_optimizer"),
      .bucket_mb = ct_config_float(cfg, "train", "bucket_mb"),
  };
  if (!(out->bucket_mb >= 0.0 && out->bucket_mb <= 1e6))
    return ct_error(CT_ERR_ARG, "[train] bucket_mb = %g: must be in [0, 1e6]",
                    out->bucket_mb);
  ct_optim_kind kind =
      CT_SCHEMA_ENUM(cfg, "optim", "optimizer", CT_OPTIMIZERS, ct_optim_kind);
  ct_optim_config *o = &out->optim;
  *o = kind == CT_OPTIM_SGD    ? ct_sgd_defaults()
       : kind == CT_OPTIM_ADAM ? ct_adam_defaults()
                               : ct_adamw_defaults();
  o->weight_decay = ct_config_float(cfg, "optim", "weight_decay");
  if (kind == CT_OPTIM_SGD) {
    o->momentum = ct_config_float(cfg, "optim", "momentum");
  } else {
    o->beta1 = ct_config_float(cfg, "optim", "beta1");
    o->beta2 = ct_config_float(cfg, "optim", "beta2");
    o->eps = ct_config_float(cfg, "optim", "eps");
  }
  if (ct_optim_lr_mults_parse(o, ct_config_str(cfg, "optim", "lr_mult")) !=
      CT_OK)
    return ct_error(CT_ERR_ARG, "[optim] %s", ct_last_error());
  // Values that can only end a run in non-finite numbers or in the wrong
  // place are refused here, before any data is read.
  if (!*out->name || !*out->dir)
    return ct_error(CT_ERR_ARG,
                    "[run] %s is empty: the run folder is [run] dir/name "
                    "(defaults: runs/run)",
                    *out->name ? "dir" : "name");
  if (kind != CT_OPTIM_SGD && !(o->eps > 0.0))
    return ct_error(CT_ERR_ARG,
                    "[optim] eps = %g: must be positive (Adam divides by "
                    "sqrt(v) + eps, and v is 0 wherever a gradient is)",
                    o->eps);
  // A week at most: 60 · max_minutes seconds stays an exact count.
  if (!(out->max_minutes >= 0.0 && out->max_minutes <= 10080.0))
    return ct_error(CT_ERR_ARG,
                    "[train] max_minutes = %g: must be in [0, 10080] (0 = no "
                    "budget)",
                    out->max_minutes);
  if (out->clip_norm < 0.0)
    return ct_error(CT_ERR_ARG,
                    "[optim] clip_norm = %g: must not be negative (0 = no "
                    "clipping)",
                    out->clip_norm);
  return CT_OK;
}

char *ct_run_dir(const ct_run_settings *run) {
  size_t n = strlen(run->dir) + strlen(run->name) + 2;
  char *out = malloc(n);
  if (out) snprintf(out, n, "%s/%s", run->dir, run->name);
  return out;
}

// ---- saving -------------------------------------------------------------------

ct_status ct_run_save(const char *path, const ct_config *cfg, ct_task *task,
                      const ct_params *p, const ct_optim *opt,
                      const ct_run_state *state, const char *metrics_path) {
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  if (!w) return ct_error(CT_ERR_NOMEM, "checkpoint: out of memory");
  ct_rec meta;
  ct_rec_init(&meta);
  ct_rec_u32(&meta, META_VERSION);
  ct_rec_str(&meta, task->ops->name);
  ct_rec_i64(&meta, state->step);
  ct_rec_i64(&meta, state->epoch);
  ct_rec_i64(&meta, state->position);
  ct_rec_i64(&meta, opt ? opt->step : 0);
  ct_rec_i64(&meta, state->best_step);
  ct_rec_f64(&meta, state->best);
  ct_rec_f64(&meta, state->window_loss);
  ct_rec_i64(&meta, state->window_steps);
  ct_rec_f64(&meta, state->train_seconds);
  ct_rec_i64(&meta, state->planned_steps);
  ct_rec_i64(&meta, state->planned_warmup);
  ct_status st = ct_ckpt_writer_add_rec(w, "meta", &meta);
  ct_rec_free(&meta);
  char *text = st == CT_OK ? ct_config_to_string(cfg) : NULL;
  if (st == CT_OK && !text) st = ct_last_status();
  if (st == CT_OK) st = ct_ckpt_writer_add(w, "config", text, strlen(text));
  free(text);
  if (st == CT_OK) st = task->ops->save(task, w);
  if (st == CT_OK) st = ct_ckpt_put_params(w, "params", p);
  for (int s = 0; s < CT_PARAM_STATE_SLOTS && st == CT_OK && opt; s++) {
    if (!(ct_optim_state_slots(&opt->cfg) & (1u << s)) || !p->state[s])
      continue;
    char name[16];
    snprintf(name, sizeof name, "optim.%d", s);
    st = ct_ckpt_put_param_state(w, name, p, s);
  }
  if (st == CT_OK && metrics_path) {
    char *data = NULL;
    size_t len = 0;
    st = ct_file_read_all(metrics_path, CT_JSONL_MAX_BYTES, &data, &len);
    if (st == CT_OK) st = ct_ckpt_writer_add(w, "metrics", data, len);
    free(data);
  }
  if (st == CT_OK) st = ct_ckpt_write(w, path);
  ct_ckpt_writer_free(w);
  return st;
}

// ---- loading ------------------------------------------------------------------

// The run state of a checkpoint's meta section, range-checked: a value no
// run can have written (a negative step, a best step after the step, a
// non-finite loss sum) is an error naming it, never a state to go on from.
// `task`: the task the checkpoint's config names, which the meta must too.
static ct_status read_meta(const ct_ckpt *ckpt, const char *task,
                           ct_run_state *s, int64_t *opt_step) {
  ct_rec_reader r;
  ct_status st = ct_ckpt_section_reader(ckpt, "meta", &r);
  if (st != CT_OK) return st;
  uint32_t version = ct_rec_get_u32(&r);
  char *meta_task = ct_rec_get_str(&r);
  s->step = ct_rec_get_i64(&r);
  s->epoch = ct_rec_get_i64(&r);
  s->position = ct_rec_get_i64(&r);
  *opt_step = ct_rec_get_i64(&r);
  s->best_step = ct_rec_get_i64(&r);
  s->best = ct_rec_get_f64(&r);
  s->window_loss = ct_rec_get_f64(&r);
  s->window_steps = ct_rec_get_i64(&r);
  s->train_seconds = ct_rec_get_f64(&r);
  s->planned_steps = s->planned_warmup = 0;
  if (version >= 2) {
    s->planned_steps = ct_rec_get_i64(&r);
    s->planned_warmup = ct_rec_get_i64(&r);
  }
  const char *path = ct_ckpt_path(ckpt);
  const bool known = version >= 1 && version <= META_VERSION;
  st = ct_rec_reader_done(&r);
  if (!known && (st == CT_OK || version > META_VERSION))
    st = ct_error(CT_ERR_FORMAT,
                  "%s: run state version %u, this ctrain reads "
                  "1 to %d: use a matching ctrain",
                  path, version, META_VERSION);
  const char *bad = NULL;
  if (st != CT_OK)
    ;
  else if (strcmp(meta_task, task))
    bad = "task (not the config's)";
  else if (s->step < 0)
    bad = "step";
  else if (s->epoch < 0 || s->position < 0)
    bad = "data position";
  else if (*opt_step < 0 || *opt_step > s->step)
    bad = "optimizer step";
  else if (s->best_step < -1 || s->best_step > s->step)
    bad = "best step";
  else if (!(s->best < INFINITY) ||
           (s->best_step < 0) != (s->best == -INFINITY))
    bad = "best metric";
  else if (!isfinite(s->window_loss) || s->window_steps < 0 ||
           s->window_steps > s->step)
    bad = "loss window";
  else if (!(s->train_seconds >= 0.0 && s->train_seconds < INFINITY))
    bad = "training time";
  else if (s->planned_steps < 0 || s->planned_warmup < 0 ||
           (s->planned_steps > 0 && s->step > s->planned_steps) ||
           (s->planned_steps == 0 && s->planned_warmup != 0))
    bad = "planned total";
  if (bad)
    st = ct_error(CT_ERR_FORMAT,
                  "%s: the run state is damaged: impossible %s (task %.40s, "
                  "step %lld, optimizer step %lld, best step %lld)",
                  path, bad, meta_task, (long long)s->step,
                  (long long)*opt_step, (long long)s->best_step);
  free(meta_task);
  return st;
}

ct_status ct_run_load(const ct_ckpt *ckpt, ct_params *p, ct_optim *opt,
                      ct_run_state *state) {
  int64_t opt_step = 0;
  ct_config *cfg = ct_run_config_from_ckpt(ckpt);
  if (!cfg) return ct_last_status();
  ct_status st = read_meta(ckpt, ct_task_for(cfg)->name, state, &opt_step);
  ct_config_free(cfg);
  if (st == CT_OK) st = ct_ckpt_get_params(ckpt, "params", p, 0);
  // Every moment the optimizer keeps must be there: resuming Adam with
  // zeroed moments is a different run, done only when asked for (the
  // caller passes opt = NULL then).
  unsigned slots = opt ? ct_optim_state_slots(&opt->cfg) : 0;
  for (int s = 0; s < CT_PARAM_STATE_SLOTS && st == CT_OK; s++) {
    if (!(slots & (1u << s))) continue;
    char name[16];
    snprintf(name, sizeof name, "optim.%d", s);
    if (!ct_ckpt_has(ckpt, name))
      st =
          ct_error(CT_ERR_FORMAT,
                   "%s: no optimizer state '%s' for %s (a checkpoint of "
                   "another optimizer, or written without it): pass "
                   "--reset-optimizer to resume with fresh optimizer state",
                   ct_ckpt_path(ckpt), name, ct_optim_kind_name(opt->cfg.kind));
    else
      st = ct_ckpt_get_param_state(ckpt, name, p, s, 0);
  }
  if (st == CT_OK && opt) opt->step = opt_step;
  return st;
}

static ct_status write_bytes(FILE *f, const char *path, void *ctx) {
  const ct_ckpt_piece *piece = ctx;
  if (piece->len && fwrite(piece->data, 1, piece->len, f) != piece->len)
    return ct_error(CT_ERR_IO, "%s: write failed", path);
  return CT_OK;
}

ct_status ct_run_restore_metrics(const ct_ckpt *ckpt, const char *path) {
  ct_ckpt_piece piece = {0};
  if (ckpt && ct_ckpt_has(ckpt, "metrics") &&
      ct_ckpt_section(ckpt, "metrics", &piece.data, &piece.len) != CT_OK)
    return ct_last_status();
  return ct_file_write_atomic(path, write_bytes, &piece);
}

ct_status ct_run_model_open(ct_run_model *m, const char *ckpt_path,
                            ct_task_need need) {
  memset(m, 0, sizeof *m);
  ct_params_init(&m->params);
  ct_status st = ct_ckpt_read(ckpt_path, &m->ckpt);
  if (st != CT_OK) return st;
  m->cfg = ct_run_config_from_ckpt(m->ckpt);
  if (!m->cfg) return ct_last_status();
  st = ct_run_settings_read(m->cfg, &m->run);
  if (st != CT_OK) return st;
  m->task.ops = ct_task_for(m->cfg);
  st = m->task.ops->open(&m->task, m->cfg, &m->params, m->ckpt, need);
  if (st == CT_OK) st = ct_run_load(m->ckpt, &m->params, NULL, &m->state);
  return st;
}

void ct_run_model_close(ct_run_model *m) {
  if (m->task.ops && m->task.state) m->task.ops->close(&m->task);
  ct_params_free(&m->params);
  ct_config_free(m->cfg);
  ct_ckpt_free(m->ckpt);
  memset(m, 0, sizeof *m);
}

void ct_run_apply_precision(const ct_run_settings *run) {
  ct_gemm_set_precision(run->precision);
  ct_gemm_set_bf16_activations(run->bf16_activations);
}
