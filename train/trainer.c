// The training loop: steps of (micro-batches, backward, clip, optimizer),
// logging to metrics.jsonl, validation, checkpoints, and the end of a run.
//
// Exactness: everything a step depends on is either in a checkpoint
// (parameters, moments, optimizer step, data epoch/position, the loss window
// of the log) or a pure function of (seed, step) (dropout masks, shuffles),
// so a run resumed from any checkpoint continues bit for bit as the run
// that was never stopped. metrics.jsonl holds no timings for that reason;
// throughput is on the progress line only.
//
// Stopping: SIGINT/SIGTERM/SIGUSR1 finish the current step, write a
// checkpoint and exit 0 with the resume command. A second SIGINT exits at
// once; files are only ever replaced atomically, so nothing is damaged.
//
// Data-parallel (mpirun, train/data_parallel.h): every rank runs this loop
// in lockstep; rank 0 (the lead) alone writes files and the terminal. A
// failure, a stop signal or the time limit on any rank ends the loop on
// every rank at the same step (sync_ranks).
#include "train/trainer.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/gemm.h"
#include "core/gemm_bf16.h"
#include "core/threads.h"
#include "optim/grads.h"
#include "optim/schedule.h"
#include "train/budget.h"
#include "train/checkpoint_folder.h"
#include "train/data_parallel.h"
#include "train/dist.h"
#include "train/params_digest.h"
#include "train/plot.h"
#include "train/progress.h"
#include "train/run.h"
#include "train/run_lock.h"
#include "train/safetensors.h"
#include "train/schema.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
  if (stop_requested) _exit(128 + sig);  // second signal: leave now
  stop_requested = sig;
}

typedef struct trainer {
  const ct_train_args *args;
  ct_config *cfg;
  ct_run_settings run;  // cfg's keys of the loop, read once
  char *run_dir;
  int lock;         // the run folder's lock (train/run_lock.h), -1: none
  char path[4096];  // scratch for file names
  char metrics_path[4096];
  ct_params params;
  ct_task task;
  ct_optim opt;
  ct_run_state state;
  ct_jsonl metrics;
  bool metrics_open;
  int64_t total_steps;
  // A new run with [train] max_minutes: its total is planned (budget.h)
  // once every rank has opened it.
  bool plan_pending;
  char last_ckpt[4096];
  int64_t last_ckpt_step;
  // Resumed from the run's final checkpoint: its final eval line (already
  // in metrics.jsonl), malloc'd; NULL otherwise.
  char *final_line;
  ct_dp *dp;  // the step, on one process or N ranks
  bool lead;  // rank 0: writes the files and the terminal
  // An error that every rank has in the same words (from gathered
  // values): only the lead prints it.
  bool error_shared;
} trainer;

// Where errors go: stderr, or while a data-parallel run opens, a buffer
// (the lowest rank that failed prints it, rather than N copies).
static FILE *g_err;
static FILE *err_out(void) { return g_err ? g_err : stderr; }

// Prints the error; `own`: this rank's (named, when there are several),
// else one that every rank has in the same words.
static int report(const char *what, bool own) {
  char rank[32] = "";
  if (own && ct_dist_size() > 1)
    snprintf(rank, sizeof rank, "rank %d: ", ct_dist_rank());
  fprintf(err_out(), "ctrain: error: %s%s%s%s\n", rank, what ? what : "",
          what ? ": " : "", ct_last_error());
  return 1;
}

static int fail(const char *what) { return report(what, true); }

// A failure only this rank can have (a file the lead writes): with other
// ranks waiting for it, the job ends here.
static ct_status alone(ct_status st, const char *what) {
  if (st != CT_OK && ct_dist_size() > 1) {
    fail(what);
    ct_dist_abort(1);
  }
  return st;
}

// What a rank tells the others at the end of each step.
enum { RANK_FAILED = 1u, RANK_STOP = 2u, RANK_TIME_UP = 4u };

// Every rank's flags ORed together; *first_failed (may be NULL) is the
// lowest rank that failed (-1: none). A rank that did not fail gets the
// error "rank R failed" in *st.
static unsigned sync_ranks(trainer *t, unsigned mine, ct_status *st,
                           int *first_failed) {
  const int n = ct_dist_size();
  if (first_failed) *first_failed = mine & RANK_FAILED ? 0 : -1;
  if (n == 1) return mine;
  unsigned *all = malloc((size_t)n * sizeof *all), flags = 0;
  if (!all || ct_dist_allgather(&mine, sizeof mine, all) != CT_OK) {
    fprintf(stderr, "ctrain: error: rank %d: %s\n", ct_dist_rank(),
            all ? ct_last_error() : "out of memory");
    ct_dist_abort(1);
  }
  int failed = -1;
  for (int r = 0; r < n; r++) {
    flags |= all[r];
    if (failed < 0 && (all[r] & RANK_FAILED)) failed = r;
  }
  free(all);
  if (first_failed) *first_failed = failed;
  if (failed >= 0 && *st == CT_OK) {
    *st =
        ct_error(CT_ERR_STATE, "rank %d failed at step %lld (see its message)",
                 failed, (long long)t->state.step);
    t->error_shared = true;
  }
  return flags;
}

// The schedule of the settings, for total_steps, at the model's width.
static ct_status check_schedule(trainer *t) {
  ct_schedule *sched = &t->run.schedule;
  sched->total_steps = t->total_steps;
  sched->d_model = t->task.ops->model_width(&t->task);
  ct_status st = ct_schedule_check(sched);
  if (st != CT_OK) return ct_error(st, "[schedule] %s", ct_last_error());
  return CT_OK;
}

// Steps of the whole run: [train] steps, or [train] epochs of batches
// (N·A per step over N ranks).
static int64_t count_steps(trainer *t) {
  if (t->run.epochs <= 0) return t->run.steps;
  int64_t batches = 0;
  for (int64_t e = 0; e < t->run.epochs; e++)
    batches += t->task.ops->epoch_batches(&t->task, e);
  return batches / (t->run.accum * ct_dist_size());
}

// Tells the task the run's length in batches, once fixed (the augmentation
// strength of classification follows it).
static void set_horizon(trainer *t) {
  if (t->task.ops->set_horizon)
    t->task.ops->set_horizon(&t->task,
                             t->total_steps * t->run.accum * ct_dist_size(),
                             t->lead ? stderr : NULL);
}

// Makes `steps` (warmup `warmup`) the run's total, in the settings, the
// state its checkpoints keep, and the config that config.ini and the
// checkpoints hold: steps = N, epochs = 0, max_minutes = 0 (the plan is
// made; rerunning the config trains the same N steps without measuring).
static ct_status apply_plan(trainer *t, int64_t steps, int64_t warmup) {
  char sets[4][64];
  snprintf(sets[0], sizeof sets[0], "train.steps=%lld", (long long)steps);
  snprintf(sets[1], sizeof sets[1], "train.epochs=0");
  snprintf(sets[2], sizeof sets[2], "train.max_minutes=0");
  snprintf(sets[3], sizeof sets[3], "schedule.warmup=%lld", (long long)warmup);
  for (int i = 0; i < 4; i++)
    if (ct_config_set(t->cfg, sets[i]) != CT_OK) return ct_last_status();
  t->run.steps = t->total_steps = steps;
  t->run.epochs = 0;
  t->run.max_minutes = 0.0;
  t->run.schedule.warmup_steps = warmup;
  t->state.planned_steps = steps;
  t->state.planned_warmup = warmup;
  return check_schedule(t);
}

// Moves the training data n batches on (rank r of a data-parallel run
// starts r·A batches into each step).
static ct_status data_skip(ct_task *task, int64_t n) {
  int64_t epoch, position;
  task->ops->data_position(task, &epoch, &position);
  position += n;
  for (;;) {
    int64_t count = task->ops->epoch_batches(task, epoch);
    if (count < 1 || position <= count) break;
    position -= count;
    epoch++;
  }
  return task->ops->data_seek(task, epoch, position);
}

static ct_status write_metrics(trainer *t, ct_json_obj *o) {
  return t->lead ? ct_jsonl_write(&t->metrics, o) : CT_OK;
}

// Every rank calls it (ZeRO-1 gathers the moments on the lead); the lead
// writes. A failed write ends the job: the others cannot go on without it.
static ct_status save_checkpoint(trainer *t) {
  ct_status st =
      ct_ckpt_filename(t->path, sizeof t->path, t->run_dir, t->state.step);
  t->task.ops->data_position(&t->task, &t->state.epoch, &t->state.position);
  if (st == CT_OK) st = ct_dp_gather_optimizer_state(t->dp);
  if (st == CT_OK && t->lead)
    st = ct_run_save(t->path, t->cfg, &t->task, &t->params, &t->opt, &t->state,
                     t->metrics_path);
  ct_dp_release_optimizer_state(t->dp);
  if (st == CT_OK) {
    snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", t->path);
    t->last_ckpt_step = t->state.step;
    int keep = (int)t->run.keep_checkpoints;
    if (t->lead)
      st = ct_ckpt_prune(t->run_dir, keep < 1 ? 1 : keep, t->state.best_step,
                         NULL);
  }
  return alone(st, "checkpoint");
}

// Validation: one "eval" line in metrics.jsonl (the task's metrics in
// *metrics); tracks the best metric.
static ct_status validate(trainer *t, ct_progress *pr, int beam, int64_t limit,
                          ct_eval_metrics *metrics, bool *improved,
                          FILE *summary) {
  *metrics = (ct_eval_metrics){0};
  double value;
  ct_status st =
      t->task.ops->evaluate(&t->task, "val", beam, limit, metrics, summary);
  if (st == CT_OK)
    st = ct_eval_metrics_get(metrics, t->task.ops->best_metric, &value);
  if (st != CT_OK) return st;
  *improved = value > t->state.best;
  if (*improved) {
    t->state.best = value;
    t->state.best_step = t->state.step;
  }
  ct_json_obj line;
  ct_json_obj_init(&line);
  ct_json_obj_int(&line, "step", t->state.step);
  ct_json_obj_str(&line, "type", "eval");
  ct_json_obj_str(&line, "split", "val");
  ct_eval_metrics_to_json(metrics, &line);
  if (pr)
    ct_progress_log(pr, "eval step %lld: %s", (long long)t->state.step,
                    ct_json_obj_text(&line));
  st = alone(write_metrics(t, &line), "metrics");
  ct_json_obj_free(&line);
  return st;
}

// One optimizer step at learning rate lr: this rank's accum micro-batches
// (of the step's K = N·accum), the exchange, clip, update. *loss is the
// mean micro-batch loss, *items what they counted, over all K.
//
// Each micro-batch's gradient is computed on its own and the K are summed
// in a fixed tree (train/data_parallel.h), so a step has the same bits on
// one process and on N ranks; dropout is keyed by (step·K + m) for
// micro-batch m. With accum = 1 on one process this is the plain step.
static ct_status train_step(trainer *t, float lr, double *loss, double *items,
                            double *grad_norm) {
  const int64_t A = t->run.accum, K = ct_dp_micro_batches(t->dp);
  // Per micro-batch: loss, items, and whether it failed on its rank.
  enum { LOSS, ITEMS, FAILED, FIELDS };
  double *mine = calloc((size_t)(FIELDS * (A + K)), sizeof *mine);
  if (!mine) return ct_error(CT_ERR_NOMEM, "train step: out of memory");
  double *all = mine + FIELDS * A;
  // This rank's failure, kept for the end: the exchanges go on without its
  // gradients so that the ranks stay matched, then every rank stops.
  ct_status own = CT_OK;
  char own_error[1024] = "", nan_diagnosis[1024] = "";
  for (int64_t a = 0; a < A; a++) {
    const int64_t m = ct_dp_micro_batch(t->dp, a);
    ct_nn_ctx ctx =
        ct_nn_train_ctx(t->run.seed, (uint64_t)(t->state.step * K + m));
    ctx.bn_updates = ct_dp_bn_log(t->dp);
    ct_params_zero_grad(&t->params);
    double n = 0.0;
    ct_tensor *l =
        own == CT_OK ? t->task.ops->train_loss(&t->task, &ctx, &n) : NULL;
    ct_tensor *scaled = l && K > 1 ? ct_scale(l, 1.0f / (float)K) : l;
    if (!scaled && own == CT_OK) {
      own = ct_last_status();
      snprintf(own_error, sizeof own_error, "%s", ct_last_error());
    }
    mine[FIELDS * a + LOSS] = scaled ? ct_f32(l)[0] : 0.0;
    // A non-finite loss is diagnosed while its tape is alive: the
    // parameter or the first activation that went non-finite.
    if (scaled && !isfinite(ct_f32(l)[0]) && !nan_diagnosis[0] &&
        ct_loss_check_finite(&t->params, ct_f32(l)[0], t->state.step) != CT_OK)
      snprintf(nan_diagnosis, sizeof nan_diagnosis, "%s", ct_last_error());
    mine[FIELDS * a + ITEMS] = n;
    // Without a loss the micro-batch counts as a zero gradient.
    ct_status st = ct_dp_backward(t->dp, scaled, a);
    if (st != CT_OK && own == CT_OK) {
      own = st;
      snprintf(own_error, sizeof own_error, "%s", ct_last_error());
    }
    mine[FIELDS * a + FAILED] = own != CT_OK;
  }
  ct_status st = ct_dp_reduce_finish(t->dp);
  if (st != CT_OK && own == CT_OK) {
    own = st;
    snprintf(own_error, sizeof own_error, "%s", ct_last_error());
  }
  st = ct_dp_gather_micro(t->dp, mine, FIELDS, all);
  *loss = 0.0;
  *items = 0.0;
  for (int64_t m = 0; m < K && st == CT_OK; m++) {
    const double value = all[FIELDS * m + LOSS];
    if (all[FIELDS * m + FAILED]) {
      t->error_shared = own == CT_OK;
      st = own != CT_OK
               ? ct_error(own, "%s", own_error)
               : ct_error(CT_ERR_STATE,
                          "rank %lld failed at step %lld (see its "
                          "message)",
                          (long long)(m / A), (long long)t->state.step);
    } else if (!isfinite(value)) {
      // Said by the rank whose micro-batch it was (it saw the activations);
      // the parameters are the same on every rank.
      const bool mine_m = m / A == ct_dist_rank();
      t->error_shared = !mine_m;
      st = mine_m && nan_diagnosis[0]
               ? ct_error(CT_ERR_NUMERIC, "%s", nan_diagnosis)
               : ct_loss_check_finite(&t->params, value, t->state.step);
    }
    *loss += value / (double)K;
    *items += all[FIELDS * m + ITEMS];
  }
  free(mine);
  // From here on the ranks agree on every value; a rank that fails alone
  // (out of memory) ends the job, since the others wait for it.
  if (st == CT_OK) st = ct_dp_apply_bn_updates(t->dp);
  if (st == CT_OK) st = ct_dp_clip(t->dp, t->run.clip_norm, grad_norm);
  if (st == CT_OK && !isfinite(*grad_norm)) {
    t->error_shared = true;
    st = ct_dp_check_finite(t->dp, t->state.step);
    if (st == CT_OK) st = CT_ERR_NUMERIC;
  } else if (st == CT_OK) {
    st = ct_dp_optim_step(t->dp, &t->opt, lr);
    if (st == CT_OK && t->task.ops->after_step)
      t->task.ops->after_step(&t->task);
  }
  if (st != CT_OK && !t->error_shared && own == CT_OK && ct_dist_size() > 1) {
    fail(NULL);
    ct_dist_abort(1);
  }
  ct_arena_reset();
  return st;
}

// The last line of a checkpoint's metrics (malloc'd) if it is the eval line
// of `step`, else NULL.
static char *final_eval_line(const ct_ckpt *ckpt, int64_t step) {
  const void *data;
  size_t len;
  if (!ct_ckpt_has(ckpt, "metrics") ||
      ct_ckpt_section(ckpt, "metrics", &data, &len) != CT_OK)
    return NULL;
  const char *text = data;
  while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r')) len--;
  size_t start = len;
  while (start > 0 && text[start - 1] != '\n') start--;
  ct_json_record rec;
  char why[128];
  if (len == start || ct_json_parse_object(text + start, len - start, &rec, why,
                                           sizeof why) != CT_OK)
    return NULL;
  const char *type = ct_json_record_str(&rec, "type");
  double at = -1.0;
  bool is_final = type && !strcmp(type, "eval") &&
                  ct_json_record_num(&rec, "step", &at) && at == (double)step;
  ct_json_record_free(&rec);
  char *line = is_final ? malloc(len - start + 1) : NULL;
  if (line) {
    memcpy(line, text + start, len - start);
    line[len - start] = '\0';
  }
  return line;
}

// Adds the metrics of an eval line of metrics.jsonl to `out`, without the
// line's bookkeeping fields (step, type, split).
static void add_final_line_metrics(const char *line, ct_json_obj *out) {
  ct_json_record rec;
  char why[128];
  if (ct_json_parse_object(line, strlen(line), &rec, why, sizeof why) != CT_OK)
    return;
  for (int i = 0; i < rec.n; i++) {
    const ct_json_field *f = &rec.fields[i];
    if (!strcmp(f->key, "step") || !strcmp(f->key, "type") ||
        !strcmp(f->key, "split"))
      continue;
    if (f->kind == CT_JSON_STR)
      ct_json_obj_str(out, f->key, f->str);
    else
      ct_json_obj_num(out, f->key, f->num);
  }
  ct_json_record_free(&rec);
}

// Removes temporary files ("NAME.tmp.PID.N") that a run killed in the middle
// of an atomic write left in the run folder. Nothing else is touched.
static void remove_stale_temporaries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (!strstr(e->d_name, ".tmp.")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) == 0)
      fprintf(stderr, "ctrain: removed %s, left by an interrupted write\n",
              path);
  }
  closedir(d);
}

// Whether the run folder `dir` holds checkpoints (readable or not).
static bool holds_run(const char *dir) {
  ct_ckpt_latest latest;
  bool found = ct_ckpt_find_latest(dir, &latest) == CT_OK &&
               (latest.path || latest.n_skipped);
  ct_ckpt_latest_free(&latest);
  return found;
}

// The step (train/data_parallel.h) and, on N ranks, each rank's place in
// the data: rank r reads micro-batches rA .. rA + A - 1 of each step.
static ct_status open_data_parallel(trainer *t) {
  const int n = ct_dist_size();
  const int64_t A = t->run.accum;
  const double floats = t->run.bucket_mb * 1024.0 * 1024.0 / sizeof(float);
  ct_dp_options o = {.accum = A,
                     .shard_optimizer = t->run.shard_optimizer,
                     .bucket_floats = (size_t)floats};
  ct_status st = ct_dp_new(&t->dp, &t->params, &t->opt, &o);
  if (st != CT_OK || n == 1) return st;
  if (!t->task.ops->data_stride)
    return ct_error(CT_ERR_STATE,
                    "the %s task cannot be trained data-parallel (no "
                    "data_stride)",
                    t->task.ops->name);
  t->task.ops->data_stride(&t->task, A, (n - 1) * A);
  return data_skip(&t->task, ct_dist_rank() * A);
}

// Opens the run: config, resume checkpoint, task, parameters, optimizer,
// run folder, metrics file. Returns 0 or the exit status.
static int open_run(trainer *t, ct_ckpt **resume_ckpt) {
  const ct_train_args *args = t->args;
  t->cfg = ct_run_config_load(args->config_path, args->sets, args->n_sets);
  if (!t->cfg) return fail(NULL);
  if (ct_run_settings_read(t->cfg, &t->run) != CT_OK)
    return fail(args->config_path);
  int64_t cfg_threads = t->run.threads;
  if (!args->threads && cfg_threads > 4096) {
    fprintf(err_out(),
            "ctrain: error: %s: [train] threads = %lld: at most 4096\n",
            args->config_path, (long long)cfg_threads);
    return 1;
  }
  int threads = args->threads ? args->threads : (int)cfg_threads;
  if (threads > 0)
    ct_set_threads(threads);
  else  // ranks on one machine share its cores
    ct_threads_from_env_shared(ct_dist_node_size());
  ct_run_apply_precision(&t->run);
  t->run_dir = ct_run_dir(&t->run);
  if (!t->run_dir) return fail("out of memory");
  // The longest name the run writes besides checkpoints (which check theirs).
  if (ct_path_format(t->metrics_path, sizeof t->metrics_path,
                     "%s/metrics.jsonl", t->run_dir) != CT_OK)
    return fail("[run] dir and name");
  // An existing run folder is locked before its checkpoints are looked at;
  // a new one once it is made, below. The lead holds the lock for all the
  // ranks of an mpirun.
  struct stat sb;
  if (t->lead && stat(t->run_dir, &sb) == 0 && S_ISDIR(sb.st_mode) &&
      ct_run_lock(t->run_dir, &t->lock) != CT_OK)
    return fail(NULL);

  // Which checkpoint, if any, to continue from.
  ct_ckpt *ckpt = NULL;
  if (args->resume && !strcmp(args->resume, "auto")) {
    ct_ckpt_latest latest;
    if (ct_ckpt_find_latest(t->run_dir, &latest) != CT_OK)
      return fail("--resume auto");
    for (int i = 0; i < latest.n_skipped && t->lead; i++)
      fprintf(stderr, "ctrain: warning: skipping a damaged checkpoint: %s\n",
              latest.skipped[i]);
    if (latest.ckpt) {
      ckpt = latest.ckpt;
      latest.ckpt = NULL;
      if (t->lead) fprintf(stderr, "ctrain: resuming from %s\n", latest.path);
    } else if (t->lead) {
      fprintf(stderr, "ctrain: no checkpoint in %s: starting a new run\n",
              t->run_dir);
    }
    ct_ckpt_latest_free(&latest);
  } else if (args->resume) {
    if (ct_ckpt_read(args->resume, &ckpt) != CT_OK) return fail("--resume");
  } else if (holds_run(t->run_dir)) {
    fprintf(err_out(),
            "ctrain: error: %s already holds a run: continue it with "
            "--resume auto, or choose another [run] name (--set "
            "run.name=...)\n",
            t->run_dir);
    return 1;
  }
  *resume_ckpt = ckpt;
  if (ckpt) {
    ct_config *old = ct_run_config_from_ckpt(ckpt);
    if (!old) return fail(NULL);
    int d = ct_config_diff(old, t->cfg, ct_model_shape_keys,
                           ct_model_shape_key_count);
    ct_config_free(old);
    if (d != -1) {
      fprintf(err_out(),
              "ctrain: error: cannot resume %s with this config: %s "
              "(the model's shape must stay the same)\n",
              ct_ckpt_path(ckpt), ct_last_error());
      return 1;
    }
  }

  t->task.ops = ct_task_for(t->cfg);
  ct_params_init(&t->params);
  if (t->task.ops->open(&t->task, t->cfg, &t->params, ckpt, CT_TASK_ALL_DATA) !=
      CT_OK)
    return fail(NULL);
  if (ct_optim_init(&t->opt, &t->run.optim) != CT_OK) return fail("[optim]");
  if (ct_optim_lr_mults_check(&t->run.optim, &t->params) != CT_OK) {
    ct_error(CT_ERR_ARG, "[optim] %s", ct_last_error());
    return fail(args->config_path);
  }
  t->state = (ct_run_state){.best = -INFINITY, .best_step = -1};
  if (ckpt) {
    if (args->reset_optimizer)
      fprintf(stderr,
              "ctrain: --reset-optimizer: the optimizer starts afresh "
              "(moments zero, step 0)\n");
    if (ct_run_load(ckpt, &t->params, args->reset_optimizer ? NULL : &t->opt,
                    &t->state) != CT_OK ||
        t->task.ops->data_seek(&t->task, t->state.epoch, t->state.position) !=
            CT_OK)
      return fail(NULL);
    t->last_ckpt_step = t->state.step;
    snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", ct_ckpt_path(ckpt));
  } else {
    t->last_ckpt_step = -1;
    if (*t->run.init_from &&
        ct_safetensors_load_weights(
            t->run.init_from, &t->params, !t->run.init_from_strict,
            "set [model] init_from_strict = false to skip them",
            t->lead ? stderr : NULL) != CT_OK)
      return fail("[model] init_from");
  }
  t->total_steps = count_steps(t);
  if (t->total_steps < 1) {
    fprintf(err_out(),
            "ctrain: error: %s: nothing to train ([train] steps or "
            "epochs give %lld steps)\n",
            args->config_path, (long long)t->total_steps);
    return 1;
  }
  if (check_schedule(t) != CT_OK) return fail(args->config_path);
  if (ckpt && t->state.planned_steps > 0) {
    // A budgeted run keeps its plan, whatever this machine's speed.
    if (apply_plan(t, t->state.planned_steps, t->state.planned_warmup) != CT_OK)
      return fail(ct_ckpt_path(ckpt));
    if (t->lead)
      fprintf(stderr,
              "ctrain: the run keeps its planned total of %lld steps (warmup "
              "%lld) from the checkpoint\n",
              (long long)t->state.planned_steps,
              (long long)t->state.planned_warmup);
  } else if (!ckpt && t->run.max_minutes > 0.0) {
    t->plan_pending = true;
  } else if (ckpt && t->run.max_minutes > 0.0 && t->lead) {
    fprintf(stderr,
            "ctrain: note: %s holds no planned total (a run started without "
            "[train] max_minutes, or by an older ctrain): max_minutes = %g "
            "stops it, and its schedule stays over %lld steps\n",
            ct_ckpt_path(ckpt), t->run.max_minutes, (long long)t->total_steps);
  }
  if (!t->plan_pending) set_horizon(t);
  if (open_data_parallel(t) != CT_OK) return fail(NULL);
  // A checkpoint written after the final evaluation: metrics.jsonl already
  // ends with it, so the end of the run must not log it again.
  if (ckpt && t->state.step == t->total_steps)
    t->final_line = final_eval_line(ckpt, t->state.step);
  if (!t->lead) return 0;  // the lead owns the run folder

  if (ct_make_dirs(t->run_dir) != CT_OK) return fail(NULL);
  if (t->lock < 0) {
    if (ct_run_lock(t->run_dir, &t->lock) != CT_OK) return fail(NULL);
    // Another ctrain may have made the folder and trained in it since the
    // check above; a new run never writes over that.
    if (!ckpt && holds_run(t->run_dir)) {
      fprintf(err_out(),
              "ctrain: error: %s was started by another ctrain meanwhile: "
              "continue it with --resume auto\n",
              t->run_dir);
      return 1;
    }
  }
  remove_stale_temporaries(t->run_dir);
  // A planned run's config.ini is written once the plan is made.
  snprintf(t->path, sizeof t->path, "%s/config.ini", t->run_dir);
  if (!t->plan_pending && ct_config_write(t->cfg, t->path) != CT_OK)
    return fail(NULL);
  // metrics.jsonl: as it was at the checkpoint, or new.
  ct_status st = ct_run_restore_metrics(ckpt, t->metrics_path);
  if (st != CT_OK || ct_jsonl_open(&t->metrics, t->metrics_path) != CT_OK)
    return fail(NULL);
  t->metrics_open = true;
  return 0;
}

static void close_run(trainer *t, ct_ckpt *ckpt) {
  if (t->metrics_open) ct_jsonl_close(&t->metrics);
  ct_run_unlock(t->lock);
  ct_dp_free(t->dp);
  if (t->task.ops && t->task.state) t->task.ops->close(&t->task);
  ct_params_free(&t->params);
  ct_config_free(t->cfg);
  free(t->run_dir);
  free(t->final_line);
  ct_ckpt_free(ckpt);
}

// The end of a run: final validation (full split, final beam), plots, and
// the last stdout line.
static int finish_run(trainer *t, ct_progress *pr) {
  ct_eval_metrics final = {0};
  bool improved = false;
  ct_status st = CT_OK;
  if (t->final_line && t->lead)
    fprintf(stderr, "ctrain: the run is complete (step %lld)\n",
            (long long)t->state.step);
  else if (!t->final_line)
    st = validate(t, pr, t->run.final_beam, 0, &final, &improved,
                  t->lead ? stderr : NULL);
  if (st == CT_OK && (improved || t->last_ckpt_step != t->state.step))
    st = save_checkpoint(t);
  if (st != CT_OK)  // the rank that failed says why, and the lead
    return !ct_dist_failed_elsewhere() ? fail("final evaluation")
           : t->lead                   ? report("final evaluation", false)
                                       : 1;
  if (!t->lead) return 0;
  if (t->task.ops->figures &&
      t->task.ops->figures(&t->task, t->run_dir) != CT_OK)
    fprintf(stderr, "ctrain: warning: figures: %s\n", ct_last_error());
  char warning[512] = "";
  if (ct_plot_run_dir(t->run_dir, warning, sizeof warning) != CT_OK)
    fprintf(stderr, "ctrain: warning: plots: %s\n", ct_last_error());
  else if (warning[0])
    fprintf(stderr, "ctrain: warning: %s\n", warning);
  ct_json_obj out;
  ct_json_obj_init(&out);
  ct_json_obj_str(&out, "run_dir", t->run_dir);
  ct_json_obj_str(&out, "checkpoint", t->last_ckpt);
  ct_json_obj_int(&out, "step", t->state.step);
  // The final metrics: of this evaluation, or of the checkpoint's final
  // eval line without its bookkeeping fields.
  if (t->final_line)
    add_final_line_metrics(t->final_line, &out);
  else
    ct_eval_metrics_to_json(&final, &out);
  printf("%s\n", ct_json_obj_text(&out));
  ct_json_obj_free(&out);
  return 0;
}

// Writes s as one shell word (single-quoted when it needs to be).
static void put_shell_word(FILE *f, const char *s) {
  if (*s && !s[strspn(s,
                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789_-+=.,/:@%")]) {
    fputs(s, f);
    return;
  }
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'')
      fputs("'\\''", f);
    else
      fputc(*s, f);
  }
  fputc('\'', f);
}

// The first line of a run: what trains, where, and how it is spread.
static void print_banner(const trainer *t) {
  char products[64] = "", ranks[256] = "";
  if (ct_gemm_get_precision() == CT_GEMM_BF16)
    snprintf(products, sizeof products, ", bf16 products (%s)",
             ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()));
  const int n = ct_dist_size();
  const int64_t A = t->run.accum;
  if (n > 1) {
    ct_dp_stats s = ct_dp_get_stats(t->dp);
    snprintf(ranks, sizeof ranks,
             " per rank, %d ranks x accum %lld = %lld micro-batches per step"
             "%s, %.3g MB sent per step and rank in %d buckets, optimizer "
             "state %.3g MB per rank",
             n, (long long)A, (long long)(n * A),
             t->run.shard_optimizer ? " (ZeRO-1)" : "",
             s.floats_sent * sizeof(float) / 1e6, s.buckets,
             (double)s.state_floats * sizeof(float) / 1e6);
  }
  fprintf(stderr,
          "ctrain: %s, %zu parameters, %d threads%s%s, steps "
          "%lld..%lld, run folder %s\n",
          t->task.ops->name, ct_params_numel(&t->params), ct_get_threads(),
          ranks, products, (long long)t->state.step, (long long)t->total_steps,
          t->run_dir);
  if (n > 1 && (A & (A - 1)))
    fprintf(stderr,
            "ctrain: warning: accum %lld is not a power of two: the run is "
            "reproducible at %d ranks, but not the bits of one process with "
            "accum %lld (see README, data-parallel)\n",
            (long long)A, n, (long long)(n * A));
}

// Opens the run on every rank; with several, the lowest rank that failed
// says why, and all of them return its status. Then the ranks check that
// they start from the same weights and step.
static int open_all(trainer *t, ct_ckpt **ckpt) {
  if (ct_dist_size() == 1) return open_run(t, ckpt);
  char *captured = NULL;
  size_t len = 0;
  g_err = open_memstream(&captured, &len);
  int rc = open_run(t, ckpt);
  if (g_err) fclose(g_err);
  g_err = NULL;
  ct_status st = CT_OK;
  int first = -1;
  sync_ranks(t, rc ? RANK_FAILED : 0, &st, &first);
  if (rc && first == ct_dist_rank() && captured) fputs(captured, stderr);
  free(captured);
  if (first >= 0) return 1;
  // The same step and weights everywhere (a rank that read another
  // checkpoint, or other data files, would train something else).
  uint64_t mine[2] = {(uint64_t)t->state.step,
                      ct_params_digest(&t->params, NULL)};
  uint64_t *all = malloc(2 * (size_t)ct_dist_size() * sizeof *all);
  if (!all || ct_dist_allgather(mine, sizeof mine, all) != CT_OK) {
    fail("open");
    ct_dist_abort(1);
  }
  for (int r = 1; r < ct_dist_size() && rc == 0; r++)
    if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) {
      if (t->lead)
        fprintf(stderr,
                "ctrain: error: rank %d starts at step %llu with other "
                "weights than rank 0 (step %llu): do all ranks see the "
                "same run folder and data?\n",
                r, (unsigned long long)all[2 * r], (unsigned long long)all[0]);
      rc = 1;
    }
  free(all);
  return rc;
}

// The total of a new budgeted run: every rank times its own passes (the
// machine as loaded during training) and the ranks time the gradient
// exchange together; rank 0's plan is every rank's. Then the lead writes
// config.ini with it.
static int plan_budget(trainer *t) {
  const double budget = 60.0 * t->run.max_minutes;
  const int64_t configured = t->total_steps;
  ct_budget_timing tm;
  ct_status st =
      ct_budget_measure(&t->task, &t->params, t->run.seed, t->run.accum,
                        ct_dp_micro_batch(t->dp, 0), budget, &tm);
  const bool failed = st != CT_OK;
  sync_ranks(t, failed ? RANK_FAILED : 0u, &st, NULL);
  if (st != CT_OK)
    return !t->error_shared ? fail("measuring the step time")
           : t->lead        ? report("measuring the step time", false)
                            : 1;
  // A data-parallel step also waits for the gradient exchange.
  double exchange = 0.0;
  if (alone(ct_dp_time_exchange(t->dp, 3, &exchange), "timing the exchange") !=
      CT_OK)
    return 1;
  tm.step_seconds += exchange;
  ct_budget_plan plan =
      ct_budget_plan_make(&t->run.schedule, budget, &tm, configured);
  int64_t mine[2] = {plan.steps, plan.warmup};
  if (ct_dist_size() > 1) {
    int64_t *all = malloc(2 * (size_t)ct_dist_size() * sizeof *all);
    if (!all || ct_dist_allgather(mine, sizeof mine, all) != CT_OK) {
      fail("plan");
      ct_dist_abort(1);
    }
    mine[0] = all[0];
    mine[1] = all[1];
    free(all);
  }
  const int64_t warmup_before = t->run.schedule.warmup_steps;
  if (apply_plan(t, mine[0], mine[1]) != CT_OK)
    return t->lead ? report(t->args->config_path, false) : 1;
  if (!t->lead) {
    set_horizon(t);
    return 0;
  }
  char what[160];
  if (plan.fits < configured)
    snprintf(what, sizeof what, "%lld steps, what fits of the configured %lld",
             (long long)mine[0], (long long)configured);
  else
    snprintf(what, sizeof what, "the configured %lld steps (%lld would fit)",
             (long long)mine[0], (long long)plan.fits);
  fprintf(stderr,
          "ctrain: [train] max_minutes = %g: a step takes %.4g s (%lld timed "
          "after %d warm-up steps, %.2f s in all); planned %s, warmup %lld "
          "(configured %lld)\n",
          budget / 60.0, tm.step_seconds, (long long)tm.timed_steps,
          CT_BUDGET_WARMUP_STEPS, tm.spent_seconds, what, (long long)mine[1],
          (long long)warmup_before);
  snprintf(t->path, sizeof t->path, "%s/config.ini", t->run_dir);
  if (alone(ct_config_write(t->cfg, t->path), "config.ini") != CT_OK)
    return fail(NULL);
  fprintf(stderr,
          "ctrain: the plan is in %s (train.steps = %lld, max_minutes = 0) "
          "and in every checkpoint: a resumed run keeps it\n",
          t->path, (long long)mine[0]);
  set_horizon(t);  // after the plan's lines: its note follows them
  return 0;
}

int ct_train_run(const ct_train_args *args) {
  trainer t = {.args = args, .lock = -1, .lead = ct_dist_rank() == 0};
  ct_ckpt *ckpt = NULL;
  int rc = open_all(&t, &ckpt);
  if (!rc && t.plan_pending) rc = plan_budget(&t);
  if (rc) {
    close_run(&t, ckpt);
    return rc;
  }
  ct_ckpt_free(ckpt);
  ckpt = NULL;
  stop_requested = 0;
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);  // what Open MPI's mpirun passes on as is

  const int64_t log_every = t.run.log_every;
  const int64_t eval_every = t.run.eval_every;
  const int64_t ckpt_every = t.run.checkpoint_every;
  const double max_seconds = 60.0 * t.run.max_minutes;
  if (t.lead) print_banner(&t);
  if (ct_get_threads() > ct_threads_available() && ct_dist_size() > 1)
    fprintf(stderr,
            "ctrain: warning: rank %d may run on %d core(s) but uses %d "
            "threads: mpirun binds ranks to cores; run it with --bind-to "
            "none\n",
            ct_dist_rank(), ct_threads_available(), ct_get_threads());
  ct_progress pr;
  ct_progress_init(&pr, stderr, t.state.step, t.total_steps,
                   t.task.ops->rate_unit);
  ct_progress *lead_pr = t.lead ? &pr : NULL;
  double started = ct_time_now(), seconds_before = t.state.train_seconds;
  const int64_t first_step = t.state.step;
  double items_done = 0.0;  // over all ranks
  ct_status st = CT_OK;
  bool timed_out = false, stop = false;
  while (t.state.step < t.total_steps) {
    double loss = 0.0, items = 0.0, gnorm = 0.0;
    float lr = ct_schedule_lr(&t.run.schedule, t.state.step);
    st = train_step(&t, lr, &loss, &items, &gnorm);
    if (st != CT_OK) break;
    t.state.step++;
    t.state.window_loss += loss;
    t.state.window_steps++;
    t.state.train_seconds = seconds_before + (ct_time_now() - started);
    items_done += items;
    if (lead_pr) ct_progress_update(lead_pr, t.state.step, loss, lr, items);
    if (t.state.step % log_every == 0 || t.state.step == t.total_steps) {
      ct_json_obj o;
      ct_json_obj_init(&o);
      int64_t epoch, position;
      t.task.ops->data_position(&t.task, &epoch, &position);
      ct_json_obj_int(&o, "step", t.state.step);
      ct_json_obj_int(&o, "epoch", epoch);
      ct_json_obj_num(&o, "loss",
                      t.state.window_loss / (double)t.state.window_steps);
      ct_json_obj_num(&o, "lr", lr);
      ct_json_obj_num(&o, "grad_norm", gnorm);
      st = alone(write_metrics(&t, &o), "metrics");
      ct_json_obj_free(&o);
      t.state.window_loss = 0.0;
      t.state.window_steps = 0;
      if (st != CT_OK) break;
    }
    bool is_last = t.state.step == t.total_steps;
    if (eval_every > 0 && t.state.step % eval_every == 0 && !is_last) {
      ct_eval_metrics metrics;
      bool improved;
      st = validate(&t, lead_pr, t.run.eval_beam, t.run.eval_limit, &metrics,
                    &improved, NULL);
      if (st != CT_OK) {
        t.error_shared = ct_dist_failed_elsewhere();
        break;
      }
    }
    // Every rank stops at the same step: a signal or the time limit on one
    // counts for all.
    unsigned flags =
        sync_ranks(&t,
                   (stop_requested ? RANK_STOP : 0u) |
                       (max_seconds > 0 && t.state.train_seconds >= max_seconds
                            ? RANK_TIME_UP
                            : 0u),
                   &st, NULL);
    if (flags & RANK_STOP) {
      stop = true;
      break;
    }
    if (flags & RANK_TIME_UP) {
      timed_out = true;
      break;
    }
    if (ckpt_every > 0 && t.state.step % ckpt_every == 0 && !is_last) {
      st = save_checkpoint(&t);
      if (st != CT_OK) break;
    }
  }
  if (lead_pr) {
    ct_progress_finish(lead_pr);
    // The throughput of this session's training (validations included).
    const double took = ct_time_now() - started;
    const int64_t steps = t.state.step - first_step;
    if (steps > 0 && took > 0.0)
      fprintf(stderr,
              "ctrain: %lld steps in %.2f s: %.1f ms per step, %.0f %s\n",
              (long long)steps, took, 1e3 * took / (double)steps,
              items_done / took, t.task.ops->rate_unit);
  }
  if (st != CT_OK) {
    rc = !t.error_shared ? fail(NULL) : t.lead ? report(NULL, false) : 1;
    if (t.last_ckpt_step >= 0 && t.lead)
      fprintf(stderr, "ctrain: the last good checkpoint is %s (step %lld)\n",
              t.last_ckpt, (long long)t.last_ckpt_step);
  } else if (stop) {
    if (save_checkpoint(&t) != CT_OK) {
      rc = fail("checkpoint");
    } else if (t.lead) {
      // The same config and --set options find the same run folder.
      fprintf(stderr,
              "ctrain: stopped at step %lld; checkpoint %s\n"
              "ctrain: continue with: ",
              (long long)t.state.step, t.last_ckpt);
      if (ct_dist_size() > 1)  // any N works with N * accum the same
        fprintf(stderr, "mpirun -np %d --bind-to none ", ct_dist_size());
      fputs("ctrain train ", stderr);
      put_shell_word(stderr, args->config_path);
      for (int i = 0; i < args->n_sets; i++) {
        fputs(" --set ", stderr);
        put_shell_word(stderr, args->sets[i]);
      }
      fputs(" --resume auto\n", stderr);
    }
  } else {
    if (timed_out && t.lead)
      fprintf(stderr, "ctrain: [train] max_minutes reached at step %lld\n",
              (long long)t.state.step);
    rc = finish_run(&t, lead_pr);
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  close_run(&t, NULL);
  ct_arena_release();
  return rc;
}
