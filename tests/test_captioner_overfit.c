// The captioner (nn/captioner.h) learns: a tiny model trained with Adam on
// four fixed images, each with its own caption (cross-entropy over the real
// tokens plus the doubly stochastic regularization, as the captioning task
// trains), drives its loss near zero, and greedy and beam decoding
// (train/decode.h) of every image, its encoder on running statistics, then
// give back exactly its caption. And a training step's loss, gradients and
// batch-norm statistics are the same bits at 1, 2 and 3 threads, at sizes
// where the kernels split their work.
#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/threads.h"
#include "data/vocab.h"
#include "nn/captioner.h"
#include "optim/grads.h"
#include "optim/optim.h"
#include "tests/harness.h"
#include "train/decode.h"

enum { B = 4, T = 6, V = 12, MAX_LEN = 8 };

// Captions of different lengths sharing words; <eos> (3) closes each.
static const int32_t CAPTIONS[B][T] = {{4, 5, 6, 3, 0, 0},
                                       {7, 5, 8, 9, 3, 0},
                                       {10, 11, 3, 0, 0, 0},
                                       {4, 9, 9, 6, 11, 3}};

// One training step (forward, backward) of a model sized so that the
// attention, convolutions and gemms run on several threads: the loss, then
// every gradient and parameter (running statistics included) into out.
static float step_bits(int threads, float *out, size_t *n) {
  ct_set_threads(threads);
  ct_params p;
  ct_params_init(&p);
  const ct_nn_captioner_config cfg = {
      .encoder = {.in_channels = 3, .width = 8, .stages = 2, .blocks = 1},
      .vocab = 30,
      .embed_dim = 16,
      .hidden = 32,
      .attn_dim = 32,
      .dropout = 0.3f};
  enum { NB = 8, NT = 5, SIDE = 16 };  // L = 64 annotations
  ct_rng rng = ct_rng_make(4, 0), data = ct_rng_make(5, 0);
  ct_nn_captioner *m = NULL;
  CHECK(ct_nn_captioner_init(&m, &p, "", &cfg, &rng) == CT_OK, "init: %s",
        ct_last_error());
  float loss_value = NAN;
  if (!m) return loss_value;
  int32_t tokens[NB * NT], mask[NB * NT];
  for (int i = 0; i < NB * NT; i++) {
    tokens[i] =
        i % NT == 0 ? CT_VOCAB_BOS : 4 + (int32_t)ct_rng_next_below(&data, 26);
    if (i % NB == 3 && i % NT >= 3) tokens[i] = 0;
    mask[i] = tokens[i] != 0;
  }
  ct_nn_ctx ctx = ct_nn_train_ctx(9, 2);
  int64_t gh = 0, gw = 0;
  ct_tensor *a = ct_nn_captioner_encode(
      m, &ctx, ct_tensor_randn(&data, 0.0f, 1.0f, CT_SHAPE(NB, 3, SIDE, SIDE)),
      &gh, &gw);
  ct_tensor *alphas = NULL;
  ct_tensor *logits = ct_nn_captioner_forward(
      m, &ctx, a, ct_tensor_from(CT_I32, tokens, CT_SHAPE(NB, NT)), &alphas);
  ct_tensor *loss =
      ct_add(ct_mean(logits),
             ct_nn_captioner_attention_reg(
                 alphas, ct_tensor_from(CT_I32, mask, CT_SHAPE(NB, NT)), 1.0f));
  CHECK(loss && ct_backward(loss) == CT_OK, "step: %s", ct_last_error());
  if (loss) loss_value = ct_f32(loss)[0];
  *n = p.count;
  memcpy(out, p.grad, p.count * sizeof(float));
  memcpy(out + p.count, p.data, p.count * sizeof(float));
  ct_arena_reset();
  ct_nn_captioner_free(m);
  ct_params_free(&p);
  return loss_value;
}

static void check_thread_bits(void) {
  static float want[1 << 20], got[1 << 20];
  size_t n = 0, n2 = 0;
  const int threads = ct_get_threads();
  const float loss = step_bits(1, want, &n);
  CHECK(n > 0 && 2 * n <= sizeof want / sizeof want[0] && isfinite(loss),
        "step: %zu floats, loss %g", n, loss);
  printf("captioner: a step's loss %.6f; %zu gradients and parameters\n", loss,
         n);
  for (int t = 2; t <= 3; t++) {
    const float l = step_bits(t, got, &n2);
    CHECK(n2 == n && l == loss && !memcmp(want, got, 2 * n * sizeof(float)),
          "a training step at %d threads differs from 1 thread's (loss %.9g "
          "vs %.9g)",
          t, l, loss);
  }
  ct_set_threads(threads);
}

int main(void) {
  check_thread_bits();
  ct_params p;
  ct_params_init(&p);
  const ct_nn_captioner_config cfg = {
      .encoder = {.in_channels = 3, .width = 4, .stages = 2, .blocks = 1},
      .vocab = V,
      .embed_dim = 16,
      .hidden = 32,
      .attn_dim = 16,
      .dropout = 0.0f};
  ct_rng rng = ct_rng_make(1, 0);
  ct_nn_captioner *m = NULL;
  CHECK(ct_nn_captioner_init(&m, &p, "", &cfg, &rng) == CT_OK, "init: %s",
        ct_last_error());
  ct_optim opt;
  ct_optim_config oc = ct_adam_defaults();
  CHECK(ct_optim_init(&opt, &oc) == CT_OK, "optim: %s", ct_last_error());
  if (!m) return test_summary("captioner_overfit");

  float images[B * 3 * 8 * 8];
  ct_rng data = ct_rng_make(2, 0);
  ct_rng_fill_normal(&data, images, B * 3 * 8 * 8, 0.0f, 1.0f);
  int32_t tokens_in[B * T], targets[B * T], mask[B * T];
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      // <bos> then the words; padding from <eos> on (nothing follows it)
      const int32_t prev = t == 0 ? CT_VOCAB_BOS : CAPTIONS[b][t - 1];
      tokens_in[b * T + t] = prev == CT_VOCAB_EOS ? 0 : prev;
      targets[b * T + t] = CAPTIONS[b][t];
      mask[b * T + t] = CAPTIONS[b][t] != 0;
    }

  float first = NAN, last = NAN;
  for (int step = 0; step < 200; step++) {
    ct_nn_ctx ctx = ct_nn_train_ctx(3, (uint64_t)step);
    ct_params_zero_grad(&p);
    int64_t gh = 0, gw = 0;
    ct_tensor *a = ct_nn_captioner_encode(
        m, &ctx, ct_tensor_from(CT_F32, images, CT_SHAPE(B, 3, 8, 8)), &gh,
        &gw);
    ct_tensor *alphas = NULL;
    ct_tensor *logits = ct_nn_captioner_forward(
        m, &ctx, a, ct_tensor_from(CT_I32, tokens_in, CT_SHAPE(B, T)), &alphas);
    ct_ce_opts ce = ct_ce_defaults();
    ce.ignore_index = 0;
    ct_tensor *ce_loss =
        ct_cross_entropy(ct_reshape(logits, CT_SHAPE(B * T, V)),
                         ct_tensor_from(CT_I32, targets, CT_SHAPE(B * T)), &ce);
    ct_tensor *loss =
        ct_add(ce_loss,
               ct_nn_captioner_attention_reg(
                   alphas, ct_tensor_from(CT_I32, mask, CT_SHAPE(B, T)), 1.0f));
    ct_status st = loss ? ct_backward(loss) : ct_last_status();
    CHECK(st == CT_OK, "step %d: %s", step, ct_last_error());
    if (st != CT_OK) break;
    if (step == 0) first = ct_f32(ce_loss)[0];
    last = ct_f32(ce_loss)[0];
    ct_clip_grad_norm(&p, 1.0);
    CHECK(ct_optim_step(&opt, &p, 1e-2f) == CT_OK, "adam: %s", ct_last_error());
    ct_arena_reset();
  }
  printf("captioner: cross-entropy %.4f -> %.4f in 200 steps\n", first, last);
  CHECK(last < 0.05f * first && last < 0.05f,
        "the captioner did not fit four captions: %.4f -> %.4f", first, last);

  // Decoding from the eval-mode encoder gives every caption back.
  bool was = ct_grad_set_enabled(false);
  int64_t gh = 0, gw = 0;
  ct_tensor *a = ct_nn_captioner_encode(
      m, NULL, ct_tensor_from(CT_F32, images, CT_SHAPE(B, 3, 8, 8)), &gh, &gw);
  for (int beam = 1; beam <= 3; beam += 2) {
    int32_t out[B * MAX_LEN];
    int64_t lens[B];
    ct_decode_opts o = {
        .beam = beam, .length_penalty = 0.0f, .max_len = MAX_LEN};
    CHECK(ct_decode_batch_captioner(m, a, &o, CT_VOCAB_BOS, CT_VOCAB_EOS, out,
                                    lens, NULL) == CT_OK,
          "decode: %s", ct_last_error());
    for (int b = 0; b < B; b++) {
      int64_t n = 0;
      while (CAPTIONS[b][n] != CT_VOCAB_EOS) n++;
      CHECK(lens[b] == n &&
                !memcmp(out + b * MAX_LEN, CAPTIONS[b], (size_t)n * 4),
            "beam %d, image %d: decoded %lld tokens, caption %lld", beam, b,
            (long long)lens[b], (long long)n);
    }
  }
  ct_grad_set_enabled(was);
  ct_arena_reset();
  ct_nn_captioner_free(m);
  ct_params_free(&p);
  ct_arena_release();
  return test_summary("captioner_overfit");
}
