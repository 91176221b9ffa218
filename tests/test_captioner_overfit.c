// The captioner (nn/captioner.h) learns: a tiny model trained with Adam on
// four fixed images, each with its own caption (cross-entropy over the real
// tokens plus the doubly stochastic regularization, as the captioning task
// trains), drives its loss near zero, and greedy and beam decoding
// (train/decode.h) of every image, its encoder on running statistics, then
// give back exactly its caption.
#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
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

int main(void) {
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
