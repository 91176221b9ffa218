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
// Stopping: SIGINT/SIGTERM finish the current step, write a checkpoint and
// exit 0 with the resume command. A second SIGINT exits at once; files are
// only ever replaced atomically, so nothing is damaged.
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
#include "train/checkpoint_folder.h"
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
  char last_ckpt[4096];
  int64_t last_ckpt_step;
  // Resumed from the run's final checkpoint: its final eval line (already
  // in metrics.jsonl), malloc'd; NULL otherwise.
  char *final_line;
} trainer;

static int fail(const char *what) {
  fprintf(stderr, "ctrain: error: %s%s%s\n", what ? what : "", what ? ": " : "",
          ct_last_error());
  return 1;
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

// Steps of the whole run: [train] steps, or [train] epochs of batches.
static int64_t count_steps(trainer *t) {
  if (t->run.epochs <= 0) return t->run.steps;
  int64_t batches = 0;
  for (int64_t e = 0; e < t->run.epochs; e++)
    batches += t->task.ops->epoch_batches(&t->task, e);
  return batches / t->run.accum;
}

static ct_status write_metrics(trainer *t, ct_json_obj *o) {
  return ct_jsonl_write(&t->metrics, o);
}

static ct_status save_checkpoint(trainer *t) {
  ct_status st =
      ct_ckpt_filename(t->path, sizeof t->path, t->run_dir, t->state.step);
  t->task.ops->data_position(&t->task, &t->state.epoch, &t->state.position);
  if (st == CT_OK)
    st = ct_run_save(t->path, t->cfg, &t->task, &t->params, &t->opt, &t->state,
                     t->metrics_path);
  if (st == CT_OK) {
    snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", t->path);
    t->last_ckpt_step = t->state.step;
    int keep = (int)t->run.keep_checkpoints;
    st = ct_ckpt_prune(t->run_dir, keep < 1 ? 1 : keep, t->state.best_step,
                       NULL);
  }
  return st;
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
  st = write_metrics(t, &line);
  ct_json_obj_free(&line);
  return st;
}

// One optimizer step at learning rate lr: accum micro-batches, clip,
// update. *loss is the mean micro-batch loss, *items what they counted.
static ct_status train_step(trainer *t, float lr, double *loss, double *items,
                            double *grad_norm) {
  const int64_t accum = t->run.accum;
  ct_nn_ctx ctx = ct_nn_train_ctx(t->run.seed, (uint64_t)t->state.step);
  ct_params_zero_grad(&t->params);
  *loss = 0.0;
  *items = 0.0;
  for (int64_t a = 0; a < accum; a++) {
    double n = 0.0;
    ct_tensor *l = t->task.ops->train_loss(&t->task, &ctx, &n);
    if (!l) return ct_last_status();
    double value = ct_f32(l)[0];
    ct_status st = ct_loss_check_finite(&t->params, value, t->state.step);
    if (st == CT_OK)
      st = ct_backward(accum > 1 ? ct_scale(l, 1.0f / (float)accum) : l);
    if (st != CT_OK) return st;
    *loss += value / (double)accum;
    *items += n;
  }
  *grad_norm = ct_clip_grad_norm(&t->params, t->run.clip_norm);
  if (!isfinite(*grad_norm))
    return ct_grads_check_finite(&t->params, t->state.step);
  ct_status st = ct_optim_step(&t->opt, &t->params, lr);
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
    fprintf(stderr, "ctrain: error: %s: [train] threads = %lld: at most 4096\n",
            args->config_path, (long long)cfg_threads);
    return 1;
  }
  int threads = args->threads ? args->threads : (int)cfg_threads;
  if (threads > 0)
    ct_set_threads(threads);
  else
    ct_threads_from_env();
  ct_gemm_set_precision(t->run.precision);
  t->run_dir = ct_run_dir(&t->run);
  if (!t->run_dir) return fail("out of memory");
  // The longest name the run writes besides checkpoints (which check theirs).
  if (ct_path_format(t->metrics_path, sizeof t->metrics_path,
                     "%s/metrics.jsonl", t->run_dir) != CT_OK)
    return fail("[run] dir and name");
  // An existing run folder is locked before its checkpoints are looked at;
  // a new one once it is made, below.
  struct stat sb;
  if (stat(t->run_dir, &sb) == 0 && S_ISDIR(sb.st_mode) &&
      ct_run_lock(t->run_dir, &t->lock) != CT_OK)
    return fail(NULL);

  // Which checkpoint, if any, to continue from.
  ct_ckpt *ckpt = NULL;
  if (args->resume && !strcmp(args->resume, "auto")) {
    ct_ckpt_latest latest;
    if (ct_ckpt_find_latest(t->run_dir, &latest) != CT_OK)
      return fail("--resume auto");
    for (int i = 0; i < latest.n_skipped; i++)
      fprintf(stderr, "ctrain: warning: skipping a damaged checkpoint: %s\n",
              latest.skipped[i]);
    if (latest.ckpt) {
      ckpt = latest.ckpt;
      latest.ckpt = NULL;
      fprintf(stderr, "ctrain: resuming from %s\n", latest.path);
    } else {
      fprintf(stderr, "ctrain: no checkpoint in %s: starting a new run\n",
              t->run_dir);
    }
    ct_ckpt_latest_free(&latest);
  } else if (args->resume) {
    if (ct_ckpt_read(args->resume, &ckpt) != CT_OK) return fail("--resume");
  } else if (holds_run(t->run_dir)) {
    fprintf(stderr,
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
      fprintf(stderr,
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
        ct_safetensors_load(t->run.init_from, &t->params, 0) != CT_OK)
      return fail("[model] init_from");
  }
  t->total_steps = count_steps(t);
  if (t->total_steps < 1) {
    fprintf(stderr,
            "ctrain: error: %s: nothing to train ([train] steps or "
            "epochs give %lld steps)\n",
            args->config_path, (long long)t->total_steps);
    return 1;
  }
  if (check_schedule(t) != CT_OK) return fail(args->config_path);

  if (ct_make_dirs(t->run_dir) != CT_OK) return fail(NULL);
  if (t->lock < 0) {
    if (ct_run_lock(t->run_dir, &t->lock) != CT_OK) return fail(NULL);
    // Another ctrain may have made the folder and trained in it since the
    // check above; a new run never writes over that.
    if (!ckpt && holds_run(t->run_dir)) {
      fprintf(stderr,
              "ctrain: error: %s was started by another ctrain meanwhile: "
              "continue it with --resume auto\n",
              t->run_dir);
      return 1;
    }
  }
  remove_stale_temporaries(t->run_dir);
  snprintf(t->path, sizeof t->path, "%s/config.ini", t->run_dir);
  if (ct_config_write(t->cfg, t->path) != CT_OK) return fail(NULL);
  // A checkpoint written after the final evaluation: metrics.jsonl already
  // ends with it, so the end of the run must not log it again.
  if (ckpt && t->state.step == t->total_steps)
    t->final_line = final_eval_line(ckpt, t->state.step);
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
  if (t->final_line)
    fprintf(stderr, "ctrain: the run is complete (step %lld)\n",
            (long long)t->state.step);
  else
    st = validate(t, pr, t->run.final_beam, 0, &final, &improved, stderr);
  if (st == CT_OK && (improved || t->last_ckpt_step != t->state.step))
    st = save_checkpoint(t);
  if (st != CT_OK) return fail("final evaluation");
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

int ct_train_run(const ct_train_args *args) {
  trainer t = {.args = args, .lock = -1};
  ct_ckpt *ckpt = NULL;
  int rc = open_run(&t, &ckpt);
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

  const int64_t log_every = t.run.log_every;
  const int64_t eval_every = t.run.eval_every;
  const int64_t ckpt_every = t.run.checkpoint_every;
  const double max_seconds = 60.0 * t.run.max_minutes;
  char products[64] = "";
  if (ct_gemm_get_precision() == CT_GEMM_BF16)
    snprintf(products, sizeof products, ", bf16 products (%s)",
             ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()));
  fprintf(stderr,
          "ctrain: %s, %zu parameters, %d threads%s, steps "
          "%lld..%lld, run folder %s\n",
          t.task.ops->name, ct_params_numel(&t.params), ct_get_threads(),
          products, (long long)t.state.step, (long long)t.total_steps,
          t.run_dir);
  ct_progress pr;
  ct_progress_init(&pr, stderr, t.state.step, t.total_steps,
                   t.task.ops->rate_unit);
  double started = ct_time_now(), seconds_before = t.state.train_seconds;
  ct_status st = CT_OK;
  bool timed_out = false;
  while (t.state.step < t.total_steps && !stop_requested) {
    double loss = 0.0, items = 0.0, gnorm = 0.0;
    float lr = ct_schedule_lr(&t.run.schedule, t.state.step);
    st = train_step(&t, lr, &loss, &items, &gnorm);
    if (st != CT_OK) break;
    t.state.step++;
    t.state.window_loss += loss;
    t.state.window_steps++;
    t.state.train_seconds = seconds_before + (ct_time_now() - started);
    ct_progress_update(&pr, t.state.step, loss, lr, items);
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
      st = write_metrics(&t, &o);
      ct_json_obj_free(&o);
      t.state.window_loss = 0.0;
      t.state.window_steps = 0;
      if (st != CT_OK) break;
    }
    bool is_last = t.state.step == t.total_steps;
    if (eval_every > 0 && t.state.step % eval_every == 0 && !is_last) {
      ct_eval_metrics metrics;
      bool improved;
      st = validate(&t, &pr, t.run.eval_beam, t.run.eval_limit, &metrics,
                    &improved, NULL);
      if (st != CT_OK) break;
    }
    if (max_seconds > 0 && t.state.train_seconds >= max_seconds) {
      timed_out = true;
      break;
    }
    if (ckpt_every > 0 && t.state.step % ckpt_every == 0 && !is_last) {
      st = save_checkpoint(&t);
      if (st != CT_OK) break;
    }
  }
  ct_progress_finish(&pr);
  if (st != CT_OK) {
    rc = fail(NULL);
    if (t.last_ckpt_step >= 0)
      fprintf(stderr, "ctrain: the last good checkpoint is %s (step %lld)\n",
              t.last_ckpt, (long long)t.last_ckpt_step);
  } else if (stop_requested) {
    if (save_checkpoint(&t) != CT_OK) {
      rc = fail("checkpoint");
    } else {
      // The same config and --set options find the same run folder.
      fprintf(stderr,
              "ctrain: stopped at step %lld; checkpoint %s\n"
              "ctrain: continue with: ctrain train ",
              (long long)t.state.step, t.last_ckpt);
      put_shell_word(stderr, args->config_path);
      for (int i = 0; i < args->n_sets; i++) {
        fputs(" --set ", stderr);
        put_shell_word(stderr, args->sets[i]);
      }
      fputs(" --resume auto\n", stderr);
    }
  } else {
    if (timed_out)
      fprintf(stderr, "ctrain: [train] max_minutes reached at step %lld\n",
              (long long)t.state.step);
    rc = finish_run(&t, &pr);
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  close_run(&t, NULL);
  ct_arena_release();
  return rc;
}
