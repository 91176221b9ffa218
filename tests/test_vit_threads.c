// A ViT training step's loss and gradients are bit-identical at 1 and 2
// threads, without dropout (the residual adds and the GELU folded into the
// linears, ct_linear_fused) and with dropout and drop path (the separate
// ops). Sizes pass the ops' thresholds for running on several threads.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/threads.h"
#include "nn/vit.h"
#include "tests/harness.h"

#include <stdlib.h>
#include <string.h>

enum { B = 16, K = 10 };

// Loss of one training forward and backward; gradients in p->grad.
static float step(const ct_nn_vit *m, ct_params *p, const float *images,
                  const int32_t *labels) {
  const ct_nn_vit_config *c = &m->cfg;
  ct_params_zero_grad(p);
  ct_nn_ctx ctx = ct_nn_train_ctx(7, 3);
  ct_tensor *x = ct_tensor_from(
      CT_F32, images, CT_SHAPE(B, c->in_channels, c->image_h, c->image_w));
  ct_tensor *y = ct_tensor_from(CT_I32, labels, CT_SHAPE(B));
  ct_ce_opts ce = ct_ce_defaults();
  ct_tensor *loss =
      ct_cross_entropy(ct_nn_vit_forward(m, &ctx, x, NULL, NULL), y, &ce);
  CHECK(loss && ct_backward(loss) == CT_OK, "step: %s", ct_last_error());
  float v = loss ? ct_f32(loss)[0] : 0.0f;
  ct_arena_reset();
  return v;
}

static void check_threads(const char *what, float dropout, float drop_path) {
  ct_nn_vit_config c = {.image_h = 16,
                        .image_w = 16,
                        .in_channels = 3,
                        .patch = 4,
                        .dim = 64,
                        .depth = 2,
                        .heads = 4,
                        .mlp_dim = 256,
                        .num_classes = K,
                        .dropout = dropout,
                        .attn_dropout = dropout,
                        .drop_path = drop_path};
  ct_params p;
  ct_params_init(&p);
  ct_nn_vit m;
  ct_rng init = ct_rng_make(5, 0), data = ct_rng_make(6, 0);
  CHECK(ct_nn_vit_init(&m, &p, "", &c, &init) == CT_OK, "init: %s",
        ct_last_error());
  const int64_t pixels = B * 3 * 16 * 16;
  float *images = malloc((size_t)pixels * sizeof *images);
  int32_t labels[B];
  ct_rng_fill_normal(&data, images, pixels, 0.0f, 1.0f);
  for (int b = 0; b < B; b++) labels[b] = (int32_t)ct_rng_next_below(&data, K);

  ct_set_threads(1);
  float loss1 = step(&m, &p, images, labels);
  float *grad1 = malloc(p.count * sizeof *grad1);
  memcpy(grad1, p.grad, p.count * sizeof *grad1);
  ct_set_threads(2);
  float loss2 = step(&m, &p, images, labels);
  size_t differ = 0;
  for (size_t i = 0; i < p.count; i++)
    differ += memcmp(&grad1[i], &p.grad[i], sizeof(float)) != 0;
  printf("%s: loss %.9g / %.9g at 1 / 2 threads; %zu of %zu grads differ\n",
         what, loss1, loss2, differ, p.count);
  CHECK(memcmp(&loss1, &loss2, sizeof loss1) == 0, "%s: loss differs", what);
  CHECK(differ == 0, "%s: %zu gradient values differ", what, differ);
  free(grad1);
  free(images);
  ct_nn_vit_free(&m);
  ct_params_free(&p);
}

int main(void) {
  check_threads("no dropout (fused)", 0.0f, 0.0f);
  check_threads("dropout and drop path", 0.1f, 0.1f);
  ct_arena_release();
  return test_summary("vit_threads");
}
