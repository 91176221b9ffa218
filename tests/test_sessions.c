// Sessions (core/session.h): two threads, each in its own session, train
// two different models at once and get for each exactly the bits it gets
// alone; and a thread that evaluates with recording off (and in another
// precision) does not disturb one that trains.
//
// Model A is a small ViT with dropout, fp32, trained with Adam: fused
// attention (its own OpenMP workers multiply), the tape, the gradient pool.
// Model B is a small ResNet in bf16 products: convolutions, batch norm,
// the session's precision. Before sessions, both shared one arena (a reset
// in one thread freed the other's activations), one tape and one recording
// switch, and a bf16 setting in one thread changed the other's products.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/gemm.h"
#include "core/session.h"
#include "nn/resnet.h"
#include "nn/vit.h"
#include "optim/optim.h"
#include "tests/harness.h"

enum { BATCH = 8, K = 5, SIDE = 16, STEPS = 6, EVALS = 12 };

typedef struct model {
  bool is_vit;
  ct_nn_vit vit;
  ct_nn_resnet resnet;
  ct_params p;
  ct_gemm_precision precision;
  float images[BATCH * 3 * SIDE * SIDE];
  int32_t labels[BATCH];
} model;

static void model_init(model *m, bool is_vit) {
  memset(m, 0, sizeof *m);
  m->is_vit = is_vit;
  m->precision = is_vit ? CT_GEMM_FP32 : CT_GEMM_BF16;
  ct_params_init(&m->p);
  ct_rng init = ct_rng_make(is_vit ? 11 : 12, 0);
  ct_status st;
  if (is_vit) {
    ct_nn_vit_config c = {.image_h = SIDE,
                          .image_w = SIDE,
                          .in_channels = 3,
                          .patch = 4,
                          .dim = 32,
                          .depth = 2,
                          .heads = 2,
                          .mlp_dim = 64,
                          .num_classes = K,
                          .dropout = 0.1f,
                          .attn_dropout = 0.1f,
                          .drop_path = 0.1f};
    st = ct_nn_vit_init(&m->vit, &m->p, "", &c, &init);
  } else {
    ct_nn_resnet_config c = {.in_channels = 3,
                             .num_classes = K,
                             .width = 8,
                             .stages = 2,
                             .blocks = 1};
    st = ct_nn_resnet_init(&m->resnet, &m->p, "", &c, &init);
  }
  CHECK(st == CT_OK, "init: %s", ct_last_error());
  ct_rng data = ct_rng_make(is_vit ? 21 : 22, 0);
  ct_rng_fill_normal(&data, m->images, BATCH * 3 * SIDE * SIDE, 0.0f, 1.0f);
  for (int b = 0; b < BATCH; b++)
    m->labels[b] = (int32_t)ct_rng_next_below(&data, K);
}

static void model_free(model *m) {
  if (m->is_vit)
    ct_nn_vit_free(&m->vit);
  else
    ct_nn_resnet_free(&m->resnet);
  ct_params_free(&m->p);
}

static ct_tensor *logits(const model *m, ct_nn_ctx *ctx) {
  ct_tensor *x =
      ct_tensor_from(CT_F32, m->images, CT_SHAPE(BATCH, 3, SIDE, SIDE));
  return m->is_vit ? ct_nn_vit_forward(&m->vit, ctx, x, NULL, NULL)
                   : ct_nn_resnet_forward(&m->resnet, ctx, x);
}

// STEPS steps of Adam in the calling thread's session; false on an error.
static bool train(model *m) {
  ct_gemm_set_precision(m->precision);
  ct_optim opt;
  ct_optim_config oc = ct_adam_defaults();
  if (ct_optim_init(&opt, &oc) != CT_OK) return false;
  for (int step = 0; step < STEPS; step++) {
    ct_nn_ctx ctx = ct_nn_train_ctx(3, (uint64_t)step);
    ct_params_zero_grad(&m->p);
    ct_tensor *y = ct_tensor_from(CT_I32, m->labels, CT_SHAPE(BATCH));
    ct_ce_opts ce = ct_ce_defaults();
    ct_tensor *loss = ct_cross_entropy(logits(m, &ctx), y, &ce);
    if (!loss || ct_backward(loss) != CT_OK ||
        ct_optim_step(&opt, &m->p, 1e-3f) != CT_OK)
      return false;
    ct_arena_reset();
  }
  return true;
}

// Eval-mode logits with recording off, copied out (BATCH * K floats).
static bool evaluate(model *m, float *out) {
  ct_gemm_set_precision(m->precision);
  bool was = ct_grad_set_enabled(false);
  ct_nn_ctx ctx = ct_nn_eval_ctx();
  ct_tensor *y = logits(m, &ctx);
  if (y) memcpy(out, y->data, sizeof(float) * BATCH * K);
  ct_arena_reset();
  ct_grad_set_enabled(was);
  return y != NULL;
}

// ---- threads -------------------------------------------------------------

typedef struct job {
  model *m;
  bool evaluate;  // EVALS evaluations instead of a training
  float *out;     // evaluations: EVALS * BATCH * K floats
  bool ok;
  char error[256];
} job;

static void *run_job(void *arg) {
  job *j = arg;
  ct_session *s = ct_session_new();
  j->ok = s != NULL;
  if (s) {
    ct_session_bind(s);
    for (int e = 0; j->evaluate && j->ok && e < EVALS; e++)
      j->ok = evaluate(j->m, j->out + e * BATCH * K);
    if (!j->evaluate) j->ok = train(j->m);
    ct_session_bind(NULL);
    ct_session_free(s);
  }
  if (!j->ok) snprintf(j->error, sizeof j->error, "%s", ct_last_error());
  return NULL;
}

static void run_together(job *a, job *b) {
  pthread_t ta, tb;
  CHECK(pthread_create(&ta, NULL, run_job, a) == 0, "thread a");
  CHECK(pthread_create(&tb, NULL, run_job, b) == 0, "thread b");
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  CHECK(a->ok, "thread a: %s", a->error);
  CHECK(b->ok, "thread b: %s", b->error);
}

static size_t differ(const float *x, const float *y, size_t n) {
  size_t d = 0;
  for (size_t i = 0; i < n; i++) d += memcmp(&x[i], &y[i], sizeof *x) != 0;
  return d;
}

// Trains a model alone (in the main thread's default session) and returns
// a copy of its trained parameters.
static float *train_alone(bool is_vit) {
  model *m = malloc(sizeof *m);
  model_init(m, is_vit);
  CHECK(train(m), "alone: %s", ct_last_error());
  ct_gemm_set_precision(CT_GEMM_FP32);
  float *w = malloc(m->p.count * sizeof *w);
  memcpy(w, m->p.data, m->p.count * sizeof *w);
  model_free(m);
  free(m);
  return w;
}

static void test_two_trainings(const float *vit_alone,
                               const float *resnet_alone) {
  model *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  model_init(a, true);
  model_init(b, false);
  job ja = {.m = a}, jb = {.m = b};
  run_together(&ja, &jb);
  size_t da = differ(a->p.data, vit_alone, a->p.count);
  size_t db = differ(b->p.data, resnet_alone, b->p.count);
  printf(
      "two trainings at once: ViT %zu of %zu, ResNet (bf16) %zu of %zu "
      "parameters differ from the runs alone\n",
      da, a->p.count, db, b->p.count);
  CHECK(da == 0 && db == 0, "trainings in two sessions differ from alone");
  model_free(a);
  model_free(b);
  free(a);
  free(b);
}

static void test_eval_beside_training(const float *vit_alone) {
  // The evaluated model's logits alone, for reference.
  model *e = malloc(sizeof *e);
  model_init(e, false);
  float ref[BATCH * K];
  CHECK(evaluate(e, ref), "eval alone: %s", ct_last_error());
  ct_gemm_set_precision(CT_GEMM_FP32);

  model *t = malloc(sizeof *t);
  model_init(t, true);
  float *outs = malloc(sizeof(float) * EVALS * BATCH * K);
  job jt = {.m = t}, je = {.m = e, .evaluate = true, .out = outs};
  run_together(&jt, &je);
  size_t dt = differ(t->p.data, vit_alone, t->p.count), de = 0;
  for (int i = 0; i < EVALS; i++)
    de += differ(outs + i * BATCH * K, ref, BATCH * K);
  printf(
      "training beside %d evaluations (recording off, bf16): %zu "
      "parameters and %zu logits differ\n",
      EVALS, dt, de);
  CHECK(dt == 0, "the training differs when another thread evaluates");
  CHECK(de == 0, "the evaluations differ when another thread trains");
  free(outs);
  model_free(t);
  model_free(e);
  free(t);
  free(e);
}

// Settings stay with their session: a forced path, the precision and the
// recording switch set in one session are not seen from another.
static void test_settings_are_per_session(void) {
  ct_session *s = ct_session_new();
  CHECK(s != NULL, "new session");
  ct_gemm_set_precision(CT_GEMM_BF16);
  ct_gemm_force_path(CT_GEMM_SCALAR);
  ct_grad_set_enabled(false);
  ct_session *was = ct_session_bind(s);
  CHECK(was == NULL, "the default session was bound");
  CHECK(ct_session_current() == s, "bound");
  CHECK(ct_gemm_get_precision() == CT_GEMM_FP32, "a new session is fp32");
  CHECK(ct_grad_enabled(), "a new session records");
  void *p = ct_arena_alloc(1000);
  CHECK(p && ct_arena_used_bytes() == 1024, "the new session's arena");
  ct_session_bind(NULL);
  CHECK(ct_gemm_get_precision() == CT_GEMM_BF16, "default keeps bf16");
  CHECK(!ct_grad_enabled(), "default keeps recording off");
  CHECK(ct_gemm_active_path() == CT_GEMM_SCALAR, "default keeps its path");
  ct_session_free(s);
  ct_gemm_set_precision(CT_GEMM_FP32);
  ct_gemm_force_path(CT_GEMM_AUTO);
  ct_grad_set_enabled(true);
}

int main(void) {
  test_settings_are_per_session();
  float *vit_alone = train_alone(true);
  float *resnet_alone = train_alone(false);
  test_two_trainings(vit_alone, resnet_alone);
  test_eval_beside_training(vit_alone);
  free(vit_alone);
  free(resnet_alone);
  ct_arena_release();
  return test_summary("sessions");
}
