// What a checkpoint says about its run, checked on load (train/run.h,
// train/image_meta.h): a meta section no run can have written (a negative
// step: progress.c once overflowed on INT64_MIN; a best step after the
// step; another task than the config's) is an error naming the value; a
// checkpoint without the optimizer's moments resumes only when asked (the
// caller passes no optimizer); an image section whose std is 0 (every
// image the same input, the same answer) or NaN is refused, and so are
// class names a terminal would act on.
#include "core/params.h"
#include "optim/optim.h"
#include "tests/harness.h"
#include "train/checkpoint.h"
#include "train/checkpoint_params.h"
#include "train/image_meta.h"
#include "train/run.h"
#include "train/schema.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct meta {
  const char *task;
  int64_t step, epoch, position, opt_step, best_step;
  double best, window_loss;
  int64_t window_steps;
  double seconds;
  uint32_t version;                       // 1: before budgeted schedules
  int64_t planned_steps, planned_warmup;  // version 2
} meta;

static meta good_meta(void) {
  return (meta){"translation", 20, 1, 3, 20, 10, 12.5, 3.0, 2, 4.0, 2, 0, 0};
}

// A checkpoint of a translation config with `m` as its run state, an empty
// parameter store and (with_optim) Adam's two moment sections.
static ct_ckpt *make_ckpt(const meta *m, bool with_optim) {
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  ct_rec r;
  ct_rec_init(&r);
  ct_rec_u32(&r, m->version);
  ct_rec_str(&r, m->task);
  ct_rec_i64(&r, m->step);
  ct_rec_i64(&r, m->epoch);
  ct_rec_i64(&r, m->position);
  ct_rec_i64(&r, m->opt_step);
  ct_rec_i64(&r, m->best_step);
  ct_rec_f64(&r, m->best);
  ct_rec_f64(&r, m->window_loss);
  ct_rec_i64(&r, m->window_steps);
  ct_rec_f64(&r, m->seconds);
  if (m->version >= 2) {
    ct_rec_i64(&r, m->planned_steps);
    ct_rec_i64(&r, m->planned_warmup);
  }
  ct_ckpt_writer_add_rec(w, "meta", &r);
  ct_rec_free(&r);
  ct_config *cfg = ct_train_config_new();
  char *text = ct_config_to_string(cfg);
  ct_ckpt_writer_add(w, "config", text, strlen(text));
  free(text);
  ct_config_free(cfg);
  ct_params p;
  ct_params_init(&p);
  ct_params_add(&p, "w", CT_SHAPE(2), 0);
  ct_ckpt_put_params(w, "params", &p);
  if (with_optim) {
    ct_params_state(&p, 0);
    ct_params_state(&p, 1);
    ct_ckpt_put_param_state(w, "optim.0", &p, 0);
    ct_ckpt_put_param_state(w, "optim.1", &p, 1);
  }
  ct_params_free(&p);
  unsigned char *bytes;
  size_t len;
  ct_ckpt *c = NULL;
  if (ct_ckpt_writer_serialize(w, &bytes, &len) == CT_OK) {
    ct_ckpt_parse(bytes, len, "run.ct", &c);
    free(bytes);
  }
  ct_ckpt_writer_free(w);
  return c;
}

// Loads the run state of a checkpoint of `m`; its status.
static ct_status load(const meta *m, bool with_optim, bool want_optim) {
  ct_ckpt *c = make_ckpt(m, with_optim);
  CHECK(c != NULL, "checkpoint: %s", ct_last_error());
  ct_params p;
  ct_params_init(&p);
  ct_params_add(&p, "w", CT_SHAPE(2), 0);
  ct_optim opt;
  ct_optim_config oc = ct_adam_defaults();
  ct_optim_init(&opt, &oc);
  ct_run_state s;
  ct_status st =
      c ? ct_run_load(c, &p, want_optim ? &opt : NULL, &s) : CT_ERR_FORMAT;
  if (st == CT_OK)
    CHECK(s.step == m->step && (!want_optim || opt.step == m->opt_step) &&
              s.planned_steps == m->planned_steps &&
              s.planned_warmup == m->planned_warmup,
          "loaded step %lld, optimizer step %lld, plan %lld/%lld",
          (long long)s.step, (long long)opt.step, (long long)s.planned_steps,
          (long long)s.planned_warmup);
  ct_params_free(&p);
  ct_ckpt_free(c);
  return st;
}

static void test_meta_ranges(void) {
  meta m = good_meta();
  CHECK(load(&m, true, true) == CT_OK, "a good checkpoint: %s",
        ct_last_error());
  struct {
    const char *what;
    meta m;
  } bad[] = {
      {"step", good_meta()},          {"step", good_meta()},
      {"data position", good_meta()}, {"optimizer step", good_meta()},
      {"best step", good_meta()},     {"best metric", good_meta()},
      {"loss window", good_meta()},   {"loss window", good_meta()},
      {"training time", good_meta()}, {"task", good_meta()},
      {"planned total", good_meta()}, {"planned total", good_meta()},
      {"planned total", good_meta()},
  };
  bad[0].m.step = INT64_MIN;
  bad[1].m.step = -1;
  bad[2].m.position = -5;
  bad[3].m.opt_step = 21;
  bad[4].m.best_step = 21;
  bad[5].m.best = NAN;
  bad[6].m.window_loss = INFINITY;
  bad[7].m.window_steps = -1;
  bad[8].m.seconds = NAN;
  bad[9].m.task = "detection";
  bad[10].m.planned_steps = 19;  // below the step
  bad[11].m.planned_steps = -1;
  bad[12].m.planned_warmup = 5;  // a warmup without a plan
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    ct_status st = load(&bad[k].m, true, true);
    CHECK(st == CT_ERR_FORMAT && strstr(ct_last_error(), "run.ct: ") &&
              strstr(ct_last_error(), "the run state is damaged: impossible") &&
              strstr(ct_last_error(), bad[k].what),
          "%s: %s", bad[k].what, ct_last_error());
  }
}

// A budgeted run's plan comes back; a checkpoint written before plans
// existed (version 1) loads without one; a later version is refused by name.
static void test_meta_versions(void) {
  meta m = good_meta();
  m.planned_steps = 20;
  m.planned_warmup = 3;
  CHECK(load(&m, true, true) == CT_OK, "a planned run: %s", ct_last_error());
  m = good_meta();
  m.version = 1;
  CHECK(load(&m, true, true) == CT_OK, "version 1: %s", ct_last_error());
  m.version = 3;
  CHECK(load(&m, true, true) == CT_ERR_FORMAT &&
            strstr(ct_last_error(),
                   "run state version 3, this ctrain "
                   "reads 1 to 2"),
        "version 3: %s", ct_last_error());
}

static void test_optimizer_sections(void) {
  meta m = good_meta();
  CHECK(load(&m, false, true) == CT_ERR_FORMAT &&
            strstr(ct_last_error(),
                   "run.ct: no optimizer state 'optim.0' "
                   "for adam") &&
            strstr(ct_last_error(), "--reset-optimizer"),
        "no moments: %s", ct_last_error());
  CHECK(load(&m, false, false) == CT_OK, "without the optimizer: %s",
        ct_last_error());
}

// An image section with the given std of channel 0 and class name 1.
static ct_status image_meta(float std, const char *name) {
  ct_image_meta m = {.C = 1, .H = 8, .W = 8, .K = 2};
  m.mean[0] = 0.5f;
  m.std[0] = std;
  ct_string_list_push(&m.class_names, "a", 1);
  ct_string_list_push(&m.class_names, name, strlen(name));
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  ct_image_meta_save(&m, w);
  ct_string_list_free(&m.class_names);
  unsigned char *bytes;
  size_t len;
  ct_ckpt *c = NULL;
  ct_ckpt_writer_serialize(w, &bytes, &len);
  ct_ckpt_writer_free(w);
  ct_ckpt_parse(bytes, len, "img.ct", &c);
  free(bytes);
  ct_image_meta back = {0};
  ct_status st = c ? ct_image_meta_load(&back, c) : CT_ERR_FORMAT;
  ct_string_list_free(&back.class_names);
  ct_ckpt_free(c);
  return st;
}

static void test_image_section(void) {
  CHECK(image_meta(0.25f, "b") == CT_OK, "good image section: %s",
        ct_last_error());
  const float stds[] = {0.0f, -1.0f, NAN, INFINITY};
  for (int k = 0; k < 4; k++)
    CHECK(image_meta(stds[k], "b") == CT_ERR_FORMAT &&
              strstr(ct_last_error(), "img.ct: the image section is damaged") &&
              strstr(ct_last_error(), "std must be positive and finite"),
          "std %g: %s", (double)stds[k], ct_last_error());
  CHECK(image_meta(0.25f, "red\x1b[31m") == CT_ERR_FORMAT &&
            strstr(ct_last_error(),
                   "img.ct: class name 'red...': control "
                   "character U+001B"),
        "escape sequence in a class name: %s", ct_last_error());
}

int main(void) {
  test_meta_ranges();
  test_meta_versions();
  test_optimizer_sections();
  test_image_section();
  return test_summary("run_state");
}
