// A chain of ops forward and backward at 1 and at 2 threads must give
// bit-identical outputs and gradients (DESIGN.md, determinism).
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/threads.h"
#include "tests/harness.h"

#include <stdlib.h>
#include <string.h>

enum { B = 4, T = 33, D = 96, V = 211, FF = 160 };

typedef struct model {
  ct_params p;
  ct_tensor *emb, *w1, *b1, *w2, *b2, *ln_w, *ln_b, *out_w;
} model;

static void model_init(model *m) {
  ct_params_init(&m->p);
  m->emb = ct_params_add(&m->p, "emb.weight", CT_SHAPE(V, D), 0);
  m->w1 = ct_params_add(&m->p, "fc1.weight", CT_SHAPE(FF, D), 0);
  m->b1 = ct_params_add(&m->p, "fc1.bias", CT_SHAPE(FF), 0);
  m->w2 = ct_params_add(&m->p, "fc2.weight", CT_SHAPE(D, FF), 0);
  m->b2 = ct_params_add(&m->p, "fc2.bias", CT_SHAPE(D), 0);
  m->ln_w = ct_params_add(&m->p, "norm.weight", CT_SHAPE(D), 0);
  m->ln_b = ct_params_add(&m->p, "norm.bias", CT_SHAPE(D), 0);
  m->out_w = ct_params_add(&m->p, "head.weight", CT_SHAPE(V, D), 0);
  ct_rng r = ct_rng_make(7, 1);
  ct_rng_fill_normal(&r, m->p.data, (int64_t)m->p.count, 0.0f, 0.2f);
}

// Loss of a small attention-free language-model-like chain; returns the
// loss value and leaves the gradients in m->p.grad.
static float step(model *m, float **acts, size_t *act_bytes) {
  ct_rng r = ct_rng_make(11, 2);
  int32_t ids[B * T], tgt[B * T];
  for (int i = 0; i < B * T; i++) {
    ids[i] = (int32_t)ct_rng_next_below(&r, V);
    tgt[i] = i % 13 == 0 ? -100 : (int32_t)ct_rng_next_below(&r, V);
  }
  ct_tensor *x =
      ct_embedding(m->emb, ct_tensor_from(CT_I32, ids, CT_SHAPE(B, T)), -1);
  ct_tensor *h = ct_gelu(ct_linear(x, m->w1, m->b1), CT_GELU_ERF);
  h = ct_dropout(h, 0.1f, 5, 9);
  h = ct_add(x, ct_linear(h, m->w2, m->b2));
  h = ct_layernorm(h, m->ln_w, m->ln_b, 1e-5f);
  // Token mixing: (B,T,D) x (B,D,T) scores, softmax, mix back.
  ct_tensor *scores = ct_scale(ct_matmul(h, h, false, true), 0.1f);
  ct_tensor *mixed = ct_matmul(ct_softmax(scores), h, false, false);
  ct_tensor *logits = ct_linear(ct_add(h, ct_tanh(mixed)), m->out_w, NULL);
  ct_ce_opts ce = ct_ce_defaults();
  ce.label_smoothing = 0.1f;
  ct_tensor *loss = ct_add(
      ct_cross_entropy(ct_reshape(logits, CT_SHAPE(B * T, V)),
                       ct_tensor_from(CT_I32, tgt, CT_SHAPE(B * T)), &ce),
      ct_scale(ct_mean(ct_sum_last(ct_mul(h, h), false)), 1e-3f));
  CHECK(loss != NULL, "forward failed: %s", ct_last_error());
  if (!loss) return 0.0f;
  ct_params_zero_grad(&m->p);
  CHECK(ct_backward(loss) == CT_OK, "backward: %s", ct_last_error());
  *act_bytes = ct_tensor_bytes(logits);
  *acts = malloc(*act_bytes);
  memcpy(*acts, logits->data, *act_bytes);
  float value = ct_f32(loss)[0];
  ct_arena_reset();
  return value;
}

int main(void) {
  model m;
  model_init(&m);
  float *acts1, *acts2;
  size_t bytes1, bytes2;

  ct_set_threads(1);
  float loss1 = step(&m, &acts1, &bytes1);
  float *grad1 = malloc(m.p.count * sizeof(float));
  memcpy(grad1, m.p.grad, m.p.count * sizeof(float));

  ct_set_threads(2);
  float loss2 = step(&m, &acts2, &bytes2);

  CHECK(memcmp(&loss1, &loss2, sizeof loss1) == 0, "loss %.9g vs %.9g", loss1,
        loss2);
  CHECK(bytes1 == bytes2 && memcmp(acts1, acts2, bytes1) == 0,
        "logits differ between 1 and 2 threads");
  size_t differ = 0;
  for (size_t i = 0; i < m.p.count; i++)
    differ += memcmp(&grad1[i], &m.p.grad[i], sizeof(float)) != 0;
  CHECK(differ == 0, "%zu of %zu gradient values differ", differ, m.p.count);
  double gnorm = 0;
  for (size_t i = 0; i < m.p.count; i++) gnorm += (double)grad1[i] * grad1[i];
  CHECK(gnorm > 0, "gradients are all zero");
  printf("loss %.9g at 1 and 2 threads; %zu grads compared, %zu differ\n",
         loss1, m.p.count, differ);
  free(acts1);
  free(acts2);
  free(grad1);
  ct_params_free(&m.p);
  ct_arena_release();
  return test_summary("determinism");
}
