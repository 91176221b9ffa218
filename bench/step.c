// bench_step: milliseconds per training step (forward + backward + gradient
// clipping + Adam/AdamW) of whole models, next to the same model in PyTorch
// (bench/ref/) measured in the same run.
//
//   bench_step [--threads N] [--steps N] [--config NAME]
//              [--precision fp32|bf16|both] [--no-torch]
//
// One line per config and precision (both by default, fp32 first):
//   step config=mt_toy_b64 precision=fp32 threads=2 ctrain_ms=.. torch_ms=..
//     ratio=.. ctrain_peak_mb=.. torch_peak_mb=.. params_mb=..
// ratio = ctrain_ms / torch_ms (targets: <= 0.5 in fp32; in bf16, <= 0.8
// against PyTorch's bf16 autocast). In bf16 ctrain's matrix products round
// their inputs to bf16 ([train] precision = bf16, core/gemm.h) and the twin
// runs its forward pass under torch.autocast (bench/ref/step_timer.py). ctrain_ms is the median
// over two rounds of --steps timed steps, one before and one after the
// PyTorch twin runs, so slow drift of a shared machine hits both sides.
// ctrain_peak_mb is the step arena's high-water mark (activations, tape,
// temporaries); torch_peak_mb the twin's counterpart, the high-water mark of
// live CPU tensor memory during one step above what is live when it starts
// (parameters, grads, Adam moments, the batch), read from the PyTorch
// profiler's allocation events (bench/ref/step_timer.py). params_mb is the
// parameter store (values, grads, Adam moments). Without --no-torch,
// PyTorch runs when /usr/bin/python3 can import torch; otherwise torch_ms,
// torch_peak_mb and ratio print as "na". The twin inherits the environment:
// on a shared machine run both with OMP_WAIT_POLICY=passive (libgomp's
// default spinning makes either side collapse when the threads outnumber
// the free cores).
//
// Configs are rows of the table at the end of this file: a name, the
// PyTorch twin's script, a workload (build the model and a fixed batch,
// compute the loss of one step, free) and the optimizer with its learning
// rate. Not here: data loading, evaluation, learning-rate schedules.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "core/threads.h"
#include "nn/cvt.h"
#include "nn/distill.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"
#include "nn/swin.h"
#include "nn/vit.h"
#include "optim/grads.h"
#include "optim/optim.h"
#include "bench/bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CT_SOURCE_ROOT
#define CT_SOURCE_ROOT "."
#endif

static const char *const PYTHON = "/usr/bin/python3";

// ---- workloads -------------------------------------------------------------

// A model plus one fixed batch: build registers the parameters in p, loss
// runs one training forward pass and returns the scalar loss.
typedef struct workload {
  ct_status (*build)(void **state, ct_params *p, const void *cfg);
  ct_tensor *(*loss)(void *state, ct_nn_ctx *ctx);
  void (*free)(void *state);
} workload;

typedef struct bench_config {
  const char *name;
  const char *torch_script;  // relative to the source root
  const workload *work;
  const void *cfg;  // the workload's own config struct
  ct_optim_config (*optimizer)(void);
  float lr;
} bench_config;

// ---- translation (nn/seq2seq, nn/rnn_seq2seq) ------------------------------

typedef struct mt_config {
  bool rnn;                    // the attention GRU, else the Transformer
  ct_nn_seq2seq_config model;  // Transformer
  ct_nn_rnn_seq2seq_config rnn_model;
  float teacher_forcing;  // rnn
  int64_t B, S, T;        // batch, source length, target length
  float label_smoothing;
} mt_config;

typedef struct mt_state {
  const mt_config *cfg;
  ct_nn_seq2seq model;
  ct_nn_rnn_seq2seq rnn;
  int32_t *src;               // (B,S)
  int32_t *tgt;               // (B,T+1): tgt_in is [:, :T], tgt_out [:, 1:]
  int32_t *tgt_in, *tgt_out;  // (B,T) each
} mt_state;

// Random tokens in [4, V) (ids 0-3 are the specials), with the last few
// positions of every fourth row set to padding (0): a little padding, as a
// length-bucketed batch has. bench/ref/mt_step.py uses the same rule.
static void padded_batch(ct_rng *r, int32_t *x, int64_t B, int64_t L,
                         int64_t V) {
  for (int64_t i = 0; i < B * L; i++)
    x[i] = 4 + (int32_t)ct_rng_next_below(r, (uint64_t)(V - 4));
  for (int64_t b = 0; b < B; b += 4)
    for (int64_t t = L - 1 - (b / 4) % 4; t < L; t++) x[b * L + t] = 0;
}

static void mt_free(void *state) {
  mt_state *s = state;
  if (!s) return;
  if (s->cfg->rnn)
    ct_nn_rnn_seq2seq_free(&s->rnn);
  else
    ct_nn_seq2seq_free(&s->model);
  free(s->src);
  free(s->tgt);
  free(s->tgt_in);
  free(s->tgt_out);
  free(s);
}

static ct_status mt_build(void **state, ct_params *p, const void *cfg) {
  const mt_config *c = cfg;
  mt_state *s = calloc(1, sizeof *s);
  if (!s) return ct_error(CT_ERR_NOMEM, "bench: out of memory");
  *state = s;
  s->cfg = c;
  const int64_t B = c->B, S = c->S, T = c->T;
  s->src = malloc((size_t)(B * S) * sizeof(int32_t));
  s->tgt = malloc((size_t)(B * (T + 1)) * sizeof(int32_t));
  s->tgt_in = malloc((size_t)(B * T) * sizeof(int32_t));
  s->tgt_out = malloc((size_t)(B * T) * sizeof(int32_t));
  if (!s->src || !s->tgt || !s->tgt_in || !s->tgt_out)
    return ct_error(CT_ERR_NOMEM, "bench: out of memory");
  ct_rng init = ct_rng_make(0, 0), data = ct_rng_make(1, 0);
  ct_status st = c->rnn
                     ? ct_nn_rnn_seq2seq_init(&s->rnn, p, &c->rnn_model, &init)
                     : ct_nn_seq2seq_init(&s->model, p, &c->model, &init);
  if (st != CT_OK) return st;
  const int64_t Vs = c->rnn ? c->rnn_model.src_vocab : c->model.src_vocab;
  const int64_t Vt = c->rnn ? c->rnn_model.tgt_vocab : c->model.tgt_vocab;
  padded_batch(&data, s->src, B, S, Vs);
  padded_batch(&data, s->tgt, B, T + 1, Vt);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) {
      s->tgt_in[b * T + t] = s->tgt[b * (T + 1) + t];
      s->tgt_out[b * T + t] = s->tgt[b * (T + 1) + t + 1];
    }
  return CT_OK;
}

static ct_tensor *mt_loss(void *state, ct_nn_ctx *ctx) {
  mt_state *s = state;
  const mt_config *c = s->cfg;
  const int64_t B = c->B, S = c->S, T = c->T;
  ct_tensor *src = ct_tensor_from(CT_I32, s->src, CT_SHAPE(B, S));
  ct_tensor *tgt_in = ct_tensor_from(CT_I32, s->tgt_in, CT_SHAPE(B, T));
  ct_tensor *tgt_out = ct_tensor_from(CT_I32, s->tgt_out, CT_SHAPE(B * T));
  if (!src || !tgt_in || !tgt_out) return NULL;
  ct_tensor *logits = c->rnn
                          ? ct_nn_rnn_seq2seq_forward(&s->rnn, ctx, src, tgt_in,
                                                      c->teacher_forcing, NULL)
                          : ct_nn_seq2seq_forward(&s->model, ctx, src, tgt_in);
  ct_ce_opts ce = ct_ce_defaults();
  ce.ignore_index = 0;
  ce.label_smoothing = c->label_smoothing;
  const int64_t V = c->rnn ? c->rnn_model.tgt_vocab : c->model.tgt_vocab;
  return ct_cross_entropy(ct_reshape(logits, CT_SHAPE(B * T, V)), tgt_out, &ce);
}

static const workload mt_workload = {mt_build, mt_loss, mt_free};

static const mt_config mt_toy_b64 = {.model = {.src_vocab = 1000,
                                               .tgt_vocab = 1000,
                                               .d_model = 256,
                                               .nhead = 4,
                                               .dim_feedforward = 1024,
                                               .encoder_layers = 3,
                                               .decoder_layers = 3,
                                               .dropout = 0.1f,
                                               .activation = CT_NN_RELU,
                                               .norm_first = false,
                                               .tie_output = true},
                                     .B = 64,
                                     .S = 24,
                                     .T = 25,
                                     .label_smoothing = 0.1f};

// The attention GRU of the PyTorch tutorial's sizes (embeddings 256,
// bidirectional encoder GRU 512, decoder GRU 512) on mt_toy_b64's vocabulary
// and batch; teacher forcing 1 so that both sides run the same steps (a
// non-forced step adds a no-grad output layer on both).
static const mt_config rnn_mt_b64 = {.rnn = true,
                                     .rnn_model = {.src_vocab = 1000,
                                                   .tgt_vocab = 1000,
                                                   .emb_dim = 256,
                                                   .enc_hidden = 512,
                                                   .dec_hidden = 512,
                                                   .dropout = 0.5f},
                                     .teacher_forcing = 1.0f,
                                     .B = 64,
                                     .S = 24,
                                     .T = 25,
                                     .label_smoothing = 0.1f};

// The translation recipe's optimizer: Adam, betas (0.9, 0.98), eps 1e-9.
static ct_optim_config mt_optimizer(void) {
  ct_optim_config oc = ct_adam_defaults();
  oc.beta2 = 0.98;
  oc.eps = 1e-9;
  return oc;
}

// ---- image classification (nn/vit, nn/distill) ---------------------------

// ViT, or DeiT when model.distilled: the DeiT recipe's hard distillation,
// 0.5 CE(z_cls, y) (label smoothing) + 0.5 CE(z_dist, teacher's argmax).
// The teacher is not run: its predictions are a fixed random labelling of
// the batch (one-hot logits), so the teacher's own cost is not measured.
typedef struct vit_config {
  ct_nn_vit_config model;
  int64_t B;
  float label_smoothing;
} vit_config;

typedef struct vit_state {
  const vit_config *cfg;
  ct_nn_vit model;
  float *images;    // (B,C,H,W)
  int32_t *labels;  // (B)
  float *teacher;   // (B,K) one-hot logits of random labels; distilled only
} vit_state;

static void vit_free(void *state) {
  vit_state *s = state;
  if (!s) return;
  ct_nn_vit_free(&s->model);
  free(s->images);
  free(s->labels);
  free(s->teacher);
  free(s);
}

// A batch of standard normal images and labels uniform over the K classes,
// from `data` in that order; bench/ref/vit_step.py, swin_step.py and
// cvt_step.py draw by
// the same rule.
static void image_batch(ct_rng *data, float *images, int64_t pixels,
                        int32_t *labels, int64_t B, int64_t K) {
  ct_rng_fill_normal(data, images, pixels, 0.0f, 1.0f);
  for (int64_t b = 0; b < B; b++)
    labels[b] = (int32_t)ct_rng_next_below(data, (uint64_t)K);
}

// Images and labels by image_batch, then teacher labels uniform over the K
// classes.
static ct_status vit_build(void **state, ct_params *p, const void *cfg) {
  const vit_config *c = cfg;
  const ct_nn_vit_config *m = &c->model;
  vit_state *s = calloc(1, sizeof *s);
  if (!s) return ct_error(CT_ERR_NOMEM, "bench: out of memory");
  *state = s;
  s->cfg = c;
  const int64_t B = c->B, K = m->num_classes;
  const int64_t pixels = B * m->in_channels * m->image_h * m->image_w;
  s->images = malloc((size_t)pixels * sizeof(float));
  s->labels = malloc((size_t)B * sizeof(int32_t));
  s->teacher = calloc((size_t)(B * K), sizeof(float));
  if (!s->images || !s->labels || !s->teacher)
    return ct_error(CT_ERR_NOMEM, "bench: out of memory");
  ct_rng init = ct_rng_make(0, 0), data = ct_rng_make(1, 0);
  ct_status st = ct_nn_vit_init(&s->model, p, "", m, &init);
  if (st != CT_OK) return st;
  image_batch(&data, s->images, pixels, s->labels, B, K);
  for (int64_t b = 0; b < B; b++)
    s->teacher[b * K + (int64_t)ct_rng_next_below(&data, (uint64_t)K)] = 1.0f;
  return CT_OK;
}

static ct_tensor *vit_loss(void *state, ct_nn_ctx *ctx) {
  vit_state *s = state;
  const vit_config *c = s->cfg;
  const ct_nn_vit_config *m = &c->model;
  const int64_t B = c->B, K = m->num_classes;
  ct_tensor *x = ct_tensor_from(
      CT_F32, s->images, CT_SHAPE(B, m->in_channels, m->image_h, m->image_w));
  ct_tensor *y = ct_tensor_from(CT_I32, s->labels, CT_SHAPE(B));
  if (!x || !y) return NULL;
  ct_tensor *z_dist = NULL;
  ct_tensor *z_cls =
      ct_nn_vit_forward(&s->model, ctx, x, m->distilled ? &z_dist : NULL, NULL);
  ct_nn_distill_opts d = {.kind = CT_NN_DISTILL_NONE,
                          .alpha = 0.5f,
                          .label_smoothing = c->label_smoothing};
  ct_tensor *teacher = NULL;
  if (m->distilled) {
    d.kind = CT_NN_DISTILL_HARD;
    teacher = ct_tensor_from(CT_F32, s->teacher, CT_SHAPE(B, K));
    if (!teacher) return NULL;
  }
  return ct_nn_distill_loss(z_cls, z_dist, teacher, y, NULL, &d);
}

static const workload vit_workload = {vit_build, vit_loss, vit_free};

// The DeiT recipe's optimizer: AdamW, weight decay 0.05 (not on biases,
// norms, tokens and position embeddings: CT_PARAM_NO_DECAY).
static ct_optim_config vit_optimizer(void) {
  ct_optim_config oc = ct_adamw_defaults();
  oc.weight_decay = 0.05;
  return oc;
}

// Dropout and drop path are 0, so both sides compute the same thing.
static const vit_config vit_fmnist_b128 = {.model = {.image_h = 28,
                                                     .image_w = 28,
                                                     .in_channels = 1,
                                                     .patch = 4,
                                                     .dim = 128,
                                                     .depth = 6,
                                                     .heads = 4,
                                                     .mlp_dim = 512,
                                                     .num_classes = 10,
                                                     .distilled = false},
                                           .B = 128,
                                           .label_smoothing = 0.1f};

static const vit_config vit_cifar_b64 = {.model = {.image_h = 32,
                                                   .image_w = 32,
                                                   .in_channels = 3,
                                                   .patch = 4,
                                                   .dim = 192,
                                                   .depth = 6,
                                                   .heads = 3,
                                                   .mlp_dim = 768,
                                                   .num_classes = 10,
                                                   .distilled = false},
                                         .B = 64,
                                         .label_smoothing = 0.1f};

static const vit_config deit_cifar_b64 = {.model = {.image_h = 32,
                                                    .image_w = 32,
                                                    .in_channels = 3,
                                                    .patch = 4,
                                                    .dim = 192,
                                                    .depth = 6,
                                                    .heads = 3,
                                                    .mlp_dim = 768,
                                                    .num_classes = 10,
                                                    .distilled = true},
                                          .B = 64,
                                          .label_smoothing = 0.1f};

// ---- Swin (nn/swin) ------------------------------------------------------------
// Cross-entropy with label smoothing on a fixed batch (image_batch), AdamW
// as the ViT's (no decay on the bias tables either).

typedef struct swin_config {
  ct_nn_swin_config model;
  int64_t B;
  float label_smoothing;
} swin_config;

typedef struct swin_state {
  const swin_config *cfg;
  ct_nn_swin model;
  float *images;    // (B,C,H,W)
  int32_t *labels;  // (B)
} swin_state;

static void swin_free(void *state) {
  swin_state *s = state;
  if (!s) return;
  ct_nn_swin_free(&s->model);
  free(s->images);
  free(s->labels);
  free(s);
}

static ct_status swin_build(void **state, ct_params *p, const void *cfg) {
  const swin_config *c = cfg;
  const ct_nn_swin_config *m = &c->model;
  swin_state *s = calloc(1, sizeof *s);
  if (!s) return ct_error(CT_ERR_NOMEM, "bench: out of memory");
  *state = s;
  s->cfg = c;
  const int64_t pixels = c->B * m->in_channels * m->image_h * m->image_w;
  s->images = malloc((size_t)pixels * sizeof(float));
  s->labels = malloc((size_t)c->B * sizeof(int32_t));
  if (!s->images || !s->labels)
    return ct_error(CT_ERR_NOMEM, "bench: out of memory");
  ct_rng init = ct_rng_make(0, 0), data = ct_rng_make(1, 0);
  ct_status st = ct_nn_swin_init(&s->model, p, "", m, &init);
  if (st != CT_OK) return st;
  image_batch(&data, s->images, pixels, s->labels, c->B, m->num_classes);
  return CT_OK;
}

static ct_tensor *swin_loss(void *state, ct_nn_ctx *ctx) {
  swin_state *s = state;
  const swin_config *c = s->cfg;
  const ct_nn_swin_config *m = &c->model;
  ct_tensor *x =
      ct_tensor_from(CT_F32, s->images,
                     CT_SHAPE(c->B, m->in_channels, m->image_h, m->image_w));
  ct_tensor *y = ct_tensor_from(CT_I32, s->labels, CT_SHAPE(c->B));
  if (!x || !y) return NULL;
  ct_ce_opts o = ct_ce_defaults();
  o.label_smoothing = c->label_smoothing;
  return ct_cross_entropy(ct_nn_swin_forward(&s->model, ctx, x), y, &o);
}

static const workload swin_workload = {swin_build, swin_loss, swin_free};

// A small Swin for 32x32 images (provisional, for issue 24's comparison
// with the PyTorch twin): patch 2 gives a 16x16 map; stages of width 64,
// 128, 256 on maps 16, 8, 4 (the last is one window); window 4. Dropout
// and drop path 0.
static const swin_config swin_cifar_b64 = {.model = {.image_h = 32,
                                                     .image_w = 32,
                                                     .in_channels = 3,
                                                     .patch = 2,
                                                     .embed_dim = 64,
                                                     .stages = 3,
                                                     .depths = {2, 2, 2},
                                                     .heads = {2, 4, 8},
                                                     .window = 4,
                                                     .mlp_ratio = 4.0f,
                                                     .num_classes = 10},
                                           .B = 64,
                                           .label_smoothing = 0.1f};

// ---- CvT (nn/cvt) --------------------------------------------------------------
// As Swin's: cross-entropy with label smoothing on a fixed batch
// (image_batch), AdamW as the ViT's. BatchNorm trains (batch statistics,
// running statistics updated) on both sides.

typedef struct cvt_config {
  ct_nn_cvt_config model;
  int64_t B;
  float label_smoothing;
} cvt_config;

typedef struct cvt_state {
  const cvt_config *cfg;
  ct_nn_cvt model;
  float *images;    // (B,C,H,W)
  int32_t *labels;  // (B)
} cvt_state;

static void cvt_free(void *state) {
  cvt_state *s = state;
  if (!s) return;
  ct_nn_cvt_free(&s->model);
  free(s->images);
  free(s->labels);
  free(s);
}

static ct_status cvt_build(void **state, ct_params *p, const void *cfg) {
  const cvt_config *c = cfg;
  const ct_nn_cvt_config *m = &c->model;
  cvt_state *s = calloc(1, sizeof *s);
  if (!s) return ct_error(CT_ERR_NOMEM, "bench: out of memory");
  *state = s;
  s->cfg = c;
  const int64_t pixels = c->B * m->in_channels * m->image_h * m->image_w;
  s->images = malloc((size_t)pixels * sizeof(float));
  s->labels = malloc((size_t)c->B * sizeof(int32_t));
  if (!s->images || !s->labels)
    return ct_error(CT_ERR_NOMEM, "bench: out of memory");
  ct_rng init = ct_rng_make(0, 0), data = ct_rng_make(1, 0);
  ct_status st = ct_nn_cvt_init(&s->model, p, "", m, &init);
  if (st != CT_OK) return st;
  image_batch(&data, s->images, pixels, s->labels, c->B, m->num_classes);
  return CT_OK;
}

static ct_tensor *cvt_loss(void *state, ct_nn_ctx *ctx) {
  cvt_state *s = state;
  const cvt_config *c = s->cfg;
  const ct_nn_cvt_config *m = &c->model;
  ct_tensor *x =
      ct_tensor_from(CT_F32, s->images,
                     CT_SHAPE(c->B, m->in_channels, m->image_h, m->image_w));
  ct_tensor *y = ct_tensor_from(CT_I32, s->labels, CT_SHAPE(c->B));
  if (!x || !y) return NULL;
  ct_ce_opts o = ct_ce_defaults();
  o.label_smoothing = c->label_smoothing;
  return ct_cross_entropy(ct_nn_cvt_forward(&s->model, ctx, x), y, &o);
}

static const workload cvt_workload = {cvt_build, cvt_loss, cvt_free};

// configs/cvt_cifar10.ini's model: 3x3 stride-2 token embeddings (maps 16,
// 8, 4), widths 64/128/256, depths 1/2/4, heads 1/2/4, dw_bn projections (k
// and v at stride 2), the class token in the last stage, QuickGELU, the
// reference's scale. Dropout and drop path 0.
static const cvt_config cvt_cifar_b64 = {
    .model = {.image_h = 32,
              .image_w = 32,
              .in_channels = 3,
              .stages = 3,
              .embed_kernel = {3, 3, 3},
              .embed_stride = {2, 2, 2},
              .embed_padding = {1, 1, 1},
              .dims = {64, 128, 256},
              .depths = {1, 2, 4},
              .heads = {1, 2, 4},
              .mlp_ratio = 4.0f,
              .cls_token = true,
              .projection = CT_NN_CVT_DW_BN,
              .stride_q = 1,
              .stride_kv = 2,
              .qkv_bias = true,
              .act = CT_NN_QUICK_GELU,
              .scale = CT_NN_CVT_SCALE_DIM,
              .num_classes = 10},
    .B = 64,
    .label_smoothing = 0.1f};

// The same with the exact GELU (cvt_activation = gelu): PyTorch 1.13 on
// the CPU spends about half of the QuickGELU twin's step in that
// activation's elementwise ops, which flatters the ratio above. As
// cvt_cifar_b64, configs/cvt_cifar10.ini's model: 3x3 stride-2 token embeddings (maps 16,
// 8, 4), widths 64/128/256, depths 1/2/4, heads 1/2/4, dw_bn projections (k
// and v at stride 2), the class token in the last stage, QuickGELU, the
// reference's scale. Dropout and drop path 0.
static const cvt_config cvt_gelu_cifar_b64 = {
    .model = {.image_h = 32,
              .image_w = 32,
              .in_channels = 3,
              .stages = 3,
              .embed_kernel = {3, 3, 3},
              .embed_stride = {2, 2, 2},
              .embed_padding = {1, 1, 1},
              .dims = {64, 128, 256},
              .depths = {1, 2, 4},
              .heads = {1, 2, 4},
              .mlp_ratio = 4.0f,
              .cls_token = true,
              .projection = CT_NN_CVT_DW_BN,
              .stride_q = 1,
              .stride_kv = 2,
              .qkv_bias = true,
              .act = CT_NN_GELU,
              .scale = CT_NN_CVT_SCALE_DIM,
              .num_classes = 10},
    .B = 64,
    .label_smoothing = 0.1f};

// ---- the table ----------------------------------------------------------------

static const bench_config configs[] = {
    {"mt_toy_b64", "bench/ref/mt_step.py", &mt_workload, &mt_toy_b64,
     mt_optimizer, 1e-4f},
    {"rnn_mt_b64", "bench/ref/rnn_step.py", &mt_workload, &rnn_mt_b64,
     mt_optimizer, 1e-4f},
    {"vit_fmnist_b128", "bench/ref/vit_step.py", &vit_workload,
     &vit_fmnist_b128, vit_optimizer, 5e-4f},
    {"vit_cifar_b64", "bench/ref/vit_step.py", &vit_workload, &vit_cifar_b64,
     vit_optimizer, 5e-4f},
    {"deit_cifar_b64", "bench/ref/vit_step.py", &vit_workload, &deit_cifar_b64,
     vit_optimizer, 5e-4f},
    {"swin_cifar_b64", "bench/ref/swin_step.py", &swin_workload,
     &swin_cifar_b64, vit_optimizer, 5e-4f},
    {"cvt_cifar_b64", "bench/ref/cvt_step.py", &cvt_workload, &cvt_cifar_b64,
     vit_optimizer, 5e-4f},
    {"cvt_gelu_cifar_b64", "bench/ref/cvt_step.py", &cvt_workload,
     &cvt_gelu_cifar_b64, vit_optimizer, 5e-4f},
};
enum { N_CONFIGS = sizeof configs / sizeof configs[0] };

// ---- timing ----------------------------------------------------------------------

typedef struct trainee {
  const bench_config *bc;
  void *state;
  ct_params params;
  ct_optim opt;
  int64_t step;
} trainee;

// One optimizer step as train/trainer.c takes it; returns its milliseconds,
// or a negative number on error.
static double timed_step(trainee *tr) {
  double t0 = bench_now_s();
  ct_nn_ctx ctx = ct_nn_train_ctx(1, (uint64_t)tr->step);
  ct_params_zero_grad(&tr->params);
  ct_tensor *loss = tr->bc->work->loss(tr->state, &ctx);
  if (!loss || ct_backward(loss) != CT_OK) return -1.0;
  if (!isfinite(ct_f32(loss)[0])) {
    ct_error(CT_ERR_NUMERIC, "non-finite loss at step %lld",
             (long long)tr->step);
    return -1.0;
  }
  ct_clip_grad_norm(&tr->params, 1.0);
  ct_status st = ct_optim_step(&tr->opt, &tr->params, tr->bc->lr);
  ct_arena_reset();
  tr->step++;
  return st == CT_OK ? 1e3 * (bench_now_s() - t0) : -1.0;
}

// Times n steps into ms[0..n); false on error.
static bool time_steps(trainee *tr, double *ms, int n) {
  for (int i = 0; i < n; i++) {
    ms[i] = timed_step(tr);
    if (ms[i] < 0.0) return false;
  }
  return true;
}

static bool torch_available(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", PYTHON);
  return system(cmd) == 0;
}

// Runs the PyTorch twin; its ms_per_step, or a negative number. *peak_mb
// receives its peak_mb, or a negative number when it printed none.
static double torch_ms(const bench_config *bc, const char *precision,
                       int threads, int steps, double *peak_mb) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s '%s/%s' --config %s --precision %s --threads %d --steps %d "
           "2>&1",
           PYTHON, CT_SOURCE_ROOT, bc->torch_script, bc->name, precision,
           threads, steps);
  FILE *f = popen(cmd, "r");
  if (!f) return -1.0;
  char line[1024];
  double ms = -1.0;
  *peak_mb = -1.0;
  while (fgets(line, sizeof line, f)) {
    const char *at = strstr(line, "ms_per_step=");
    const char *peak = strstr(line, "peak_mb=");
    if (at && strncmp(line, "torch ", 6) == 0) {
      ms = atof(at + 12);
      if (peak && peak[8] != 'n') *peak_mb = atof(peak + 8);
    } else {
      fprintf(stderr, "bench_step: torch: %s", line);
    }
  }
  pclose(f);
  return ms;
}

static int run_config(const bench_config *bc, const char *precision,
                      int threads, int steps, bool with_torch) {
  ct_gemm_set_precision(strcmp(precision, "bf16") ? CT_GEMM_FP32
                                                  : CT_GEMM_BF16);
  trainee tr = {.bc = bc};
  ct_params_init(&tr.params);
  ct_optim_config oc = bc->optimizer();
  double *ms = malloc((size_t)(2 * steps) * sizeof *ms);
  bool ok = ms && bc->work->build(&tr.state, &tr.params, bc->cfg) == CT_OK &&
            ct_optim_init(&tr.opt, &oc) == CT_OK;
  double warmup[3];
  ok = ok && time_steps(&tr, warmup, 3);
  ok = ok && time_steps(&tr, ms, steps);
  double tpeak = -1.0;
  double tms =
      with_torch ? torch_ms(bc, precision, threads, steps, &tpeak) : -1.0;
  ok = ok && time_steps(&tr, ms + steps, steps);
  if (ok) {
    double cms = bench_median(ms, 2 * steps);
    char torch_s[32] = "na", ratio_s[32] = "na", tpeak_s[32] = "na";
    if (tms > 0.0) {
      snprintf(torch_s, sizeof torch_s, "%.1f", tms);
      snprintf(ratio_s, sizeof ratio_s, "%.3f", cms / tms);
    }
    if (tpeak >= 0.0) snprintf(tpeak_s, sizeof tpeak_s, "%.1f", tpeak);
    printf(
        "step config=%s precision=%s threads=%d ctrain_ms=%.1f "
        "torch_ms=%s ratio=%s ctrain_peak_mb=%.1f torch_peak_mb=%s "
        "params_mb=%.1f\n",
        bc->name, precision, threads, cms, torch_s, ratio_s,
        (double)ct_arena_peak_bytes() / (1 << 20), tpeak_s,
        (double)ct_params_bytes(&tr.params) / (1 << 20));
    fflush(stdout);
  } else {
    fprintf(stderr, "bench_step: %s: %s\n", bc->name,
            ms ? ct_last_error() : "out of memory");
  }
  if (tr.state) bc->work->free(tr.state);
  ct_params_free(&tr.params);
  ct_arena_release();
  free(ms);
  return ok ? 0 : 1;
}

static int usage(void) {
  fprintf(stderr,
          "usage: bench_step [--threads N] [--steps N] "
          "[--config NAME] [--precision fp32|bf16|both] "
          "[--no-torch]\nconfigs:");
  for (int i = 0; i < N_CONFIGS; i++) fprintf(stderr, " %s", configs[i].name);
  fprintf(stderr, "\n");
  return 2;
}

int main(int argc, char **argv) {
  int threads = 2, steps = 10;
  const char *only = NULL, *precision = "both";
  bool with_torch = true;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc)
      precision = argv[++i];
    else if (strcmp(argv[i], "--no-torch") == 0)
      with_torch = false;
    else
      return usage();
  }
  if (threads < 1 || steps < 1) return usage();
  static const char *const precisions[] = {"fp32", "bf16"};
  bool want[2] = {true, true};
  if (strcmp(precision, "both") != 0) {
    if (strcmp(precision, "fp32") != 0 && strcmp(precision, "bf16") != 0)
      return usage();
    want[0] = strcmp(precision, "fp32") == 0;
    want[1] = !want[0];
  }
  bool found = !only;
  for (int i = 0; i < N_CONFIGS; i++)
    found = found || strcmp(configs[i].name, only) == 0;
  if (!found) {
    fprintf(stderr, "bench_step: unknown config '%s'\n", only);
    return usage();
  }
  ct_set_threads(threads);
  if (with_torch && !torch_available()) {
    fprintf(stderr, "bench_step: %s cannot import torch; timing ctrain only\n",
            PYTHON);
    with_torch = false;
  }
  // Each config runs in a process of its own: the arena's peak is a
  // high-water mark over the whole process, so one config's peak would
  // otherwise hide a smaller one after it. The parent runs no OpenMP region
  // before forking, which keeps libgomp usable in the children.
  int failed = 0;
  for (int i = 0; i < N_CONFIGS; i++) {
    if (only && strcmp(configs[i].name, only) != 0) continue;
    for (int p = 0; p < 2; p++) {
      if (!want[p]) continue;
      fflush(NULL);
      pid_t pid = fork();
      if (pid == 0)
        _exit(
            run_config(&configs[i], precisions[p], threads, steps, with_torch));
      int status = 0;
      if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
          WEXITSTATUS(status) != 0) {
        if (pid < 0) fprintf(stderr, "bench_step: fork failed\n");
        failed = 1;
      }
    }
  }
  return failed;
}
