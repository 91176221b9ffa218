// PyTorch parity of CLIP (nn/clip.h) against its twin bench/ref/clip_model.py
// on fixed weights (tests/ref/clip_fixtures.h, from gen_clip_fixtures.py),
// with the ViT and with the ResNet image tower (training-mode BatchNorm):
// image and text features, the logits exp(s) I T^T, the contrastive loss and
// its local_loss form, and the gradients of the loss w.r.t. every parameter
// and (ResNet tower) the images (logit_scale included). Metric max |ctrain - torch| /
// max |torch| per tensor, tolerance 1e-5. The fixture's names are loaded by
// name: the store must register exactly open_clip's state_dict names.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/threads.h"
#include "harness.h"
#include "nn/clip.h"
#include "parity_util.h"
#include "ref/clip_fixtures.h"

#include <math.h>
#include <string.h>

static const double TOL = 1e-5;

static void compare(const char *name, const float *got, const double *want,
                    int64_t n) {
  double e = parity_rel_err(got, want, n);
  printf("  %-50s rel err %.2e\n", name, e);
  CHECK(e <= TOL, "clip: %s rel err %.2e > %.0e", name, e, TOL);
}

static void compare_scalar(const char *name, float got, double want) {
  const double e = fabs(got - want) / fabs(want);
  printf("  %-50s rel err %.2e\n", name, e);
  CHECK(e <= TOL, "clip: %s %.9g, torch %.9g", name, (double)got, want);
}

static void check_case(const clip_fixture *f) {
  printf("%s image tower\n", f->name);
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(3, 0);
  const ct_nn_clip_config cfg = {
      .image_arch = f->resnet ? CT_NN_CLIP_RESNET : CT_NN_CLIP_VIT,
      .vit = {.image_h = f->S,
              .image_w = f->S,
              .in_channels = f->C,
              .patch = f->patch,
              .dim = f->vit_dim,
              .depth = f->vit_depth,
              .heads = f->vit_heads,
              .mlp_dim = f->vit_mlp},
      .resnet = {.in_channels = f->C,
                 .width = f->width,
                 .stages = f->stages,
                 .blocks = f->blocks},
      .embed_dim = f->E,
      .vocab = f->V,
      .context_length = f->T,
      .text_width = f->W,
      .text_layers = f->layers,
      .text_heads = f->heads,
      .text_mlp = f->mlp};
  ct_nn_clip *m = NULL;
  ct_status st = ct_nn_clip_init(&m, &p, "", &cfg, &rng);
  CHECK(st == CT_OK, "init: %s", ct_last_error());
  bool ok = st == CT_OK && parity_count(&p, "clip", f->n_params);
  for (int i = 0; ok && i < f->n_params; i++) {
    const clip_fixture_param *fp = &f->params[i];
    ok = parity_load(&p, "clip", fp->name, fp->numel, fp->value);
  }
  if (!ok) goto done;
  ct_tensor *images = ct_requires_grad(
      ct_tensor_from(CT_F32, f->images, CT_SHAPE(f->B, f->C, f->S, f->S)));
  ct_tensor *tokens = ct_tensor_from(CT_I32, f->tokens, CT_SHAPE(f->B, f->Tp));
  int64_t eot[16];
  for (int b = 0; b < f->B; b++) eot[b] = f->eot[b];
  ct_nn_ctx ctx = ct_nn_train_ctx(4, 0);
  ct_tensor *fi = ct_nn_clip_encode_image(m, &ctx, images);
  ct_tensor *ft = ct_nn_clip_encode_text(m, &ctx, tokens, eot);
  ct_tensor *s = ct_nn_clip_logit_scale(m);
  ct_tensor *loss = ct_nn_clip_loss(fi, ft, fi, ft, 0, s);
  ct_tensor *logits = NULL, *local = NULL;
  {
    const bool was = ct_grad_set_enabled(false);
    logits = ct_mul(ct_matmul(fi, ft, false, true), ct_exp(s));
    local = ct_nn_clip_loss(ct_slice(fi, 0, 2, f->B - 2),
                            ct_slice(ft, 0, 2, f->B - 2), fi, ft, 2, s);
    ct_grad_set_enabled(was);
  }
  st = loss && logits && local ? ct_backward(loss) : ct_last_status();
  CHECK(st == CT_OK, "forward/backward: %s", ct_last_error());
  if (st != CT_OK) goto done;
  compare("image features", ct_f32(fi), f->img_features, fi->numel);
  compare("text features", ct_f32(ft), f->txt_features, ft->numel);
  compare("logits", ct_f32(logits), f->logits, logits->numel);
  compare_scalar("loss", ct_f32(loss)[0], f->loss);
  compare_scalar("local loss (rows 2.., offset 2)", ct_f32(local)[0],
                 f->loss_local);
  // The ViT's patch embedding gives its input no gradient (nn/vit.h).
  if (f->resnet) {
    CHECK(images->grad != NULL, "the ResNet tower gave the images no grad");
    if (images->grad)
      compare("grad images", images->grad, f->grad_images, images->numel);
  }
  for (int i = 0; i < f->n_params; i++) {
    const clip_fixture_param *fp = &f->params[i];
    if (!fp->grad) continue;  // running statistics
    const ct_tensor *t = ct_params_find(&p, fp->name)->tensor;
    CHECK(t->grad != NULL, "%s has no gradient", fp->name);
    if (!t->grad) continue;
    char what[160];
    snprintf(what, sizeof what, "grad %s", fp->name);
    compare(what, t->grad, fp->grad, t->numel);
  }
done:
  ct_arena_reset();
  ct_nn_clip_free(m);
  ct_params_free(&p);
}

int main(void) {
  ct_threads_from_env();
  for (int i = 0; i < clip_fixture_count; i++) check_case(&clip_fixtures[i]);
  ct_arena_release();
  return test_summary("clip_parity");
}
