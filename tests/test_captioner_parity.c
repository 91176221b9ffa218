// PyTorch parity of the Show, Attend and Tell captioner (nn/captioner.h)
// against its twin bench/ref/caption_model.py on fixed weights
// (tests/ref/captioner_fixtures.h, from gen_captioner_fixtures.py): a small
// ResNet encoder in training mode, the teacher-forced decoder on a full and
// a padded caption. Compared: the annotations, logits, attention weights,
// the doubly stochastic regularization, the gradients of the images and of
// every parameter of L = sum(logits*r) + sum(alphas*r_alpha) + reg, and
// the running statistics the step leaves; metric max |ctrain - torch| /
// max |torch| per tensor, tolerance 1e-5. The store registers PyTorch's
// state_dict names in its order.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "harness.h"
#include "nn/captioner.h"
#include "parity_util.h"
#include "ref/captioner_fixtures.h"

#include <math.h>
#include <string.h>

static const double TOL = 1e-5;

static void compare(const char *name, const float *got, const double *want,
                    int64_t n) {
  double e = parity_rel_err(got, want, n);
  printf("  %-46s rel err %.2e\n", name, e);
  CHECK(e <= TOL, "captioner: %s rel err %.2e > %.0e", name, e, TOL);
}

static void check_case(const captioner_fixture *f) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(3, 0);
  const ct_nn_captioner_config cfg = {.encoder = {.in_channels = f->C,
                                                  .width = f->width,
                                                  .stages = f->stages,
                                                  .blocks = f->blocks},
                                      .vocab = f->V,
                                      .embed_dim = f->E,
                                      .hidden = f->H,
                                      .attn_dim = f->A,
                                      .dropout = 0.0f};
  ct_nn_captioner *m = NULL;
  ct_status st = ct_nn_captioner_init(&m, &p, "", &cfg, &rng);
  CHECK(st == CT_OK, "init: %s", ct_last_error());
  bool ok = st == CT_OK && parity_count(&p, "captioner", f->n_params);
  for (int i = 0; ok && i < f->n_params; i++) {
    const captioner_fixture_param *fp = &f->params[i];
    ok = parity_load(&p, "captioner", fp->name, fp->numel, fp->value);
    CHECK(ok && !strcmp(p.items[i].name, fp->name),
          "parameter %d is '%s', torch's '%s'", i, p.items[i].name, fp->name);
  }
  if (!ok) goto done;
  ct_tensor *images = ct_requires_grad(
      ct_tensor_from(CT_F32, f->images, CT_SHAPE(f->B, f->C, f->S, f->S)));
  ct_tensor *tokens =
      ct_tensor_from(CT_I32, f->tokens_in, CT_SHAPE(f->B, f->T));
  ct_tensor *mask = ct_tensor_from(CT_I32, f->mask, CT_SHAPE(f->B, f->T));
  ct_nn_ctx ctx = ct_nn_train_ctx(4, 0);
  int64_t gh = 0, gw = 0;
  ct_tensor *a = ct_nn_captioner_encode(m, &ctx, images, &gh, &gw);
  CHECK(a && gh * gw == f->L && a->shape[2] == f->D, "annotations: %s",
        a ? "wrong shape" : ct_last_error());
  ct_tensor *alphas = NULL;
  ct_tensor *logits = ct_nn_captioner_forward(m, &ctx, a, tokens, &alphas);
  ct_tensor *reg = ct_nn_captioner_attention_reg(alphas, mask, f->lambda);
  ct_tensor *loss = ct_add(ct_add(parity_contract(logits, f->r),
                                  parity_contract(alphas, f->r_alpha)),
                           reg);
  st = loss ? ct_backward(loss) : ct_last_status();
  CHECK(st == CT_OK, "forward/backward: %s", ct_last_error());
  if (st != CT_OK) goto done;
  compare("annotations", ct_f32(a), f->annotations, a->numel);
  compare("logits", ct_f32(logits), f->logits, logits->numel);
  compare("alphas", ct_f32(alphas), f->alphas, alphas->numel);
  const double reg_err = fabs(ct_f32(reg)[0] - f->reg) / fabs(f->reg);
  printf("  %-46s rel err %.2e\n", "attention_reg", reg_err);
  CHECK(reg_err <= TOL, "attention_reg %.9g, torch %.9g", ct_f32(reg)[0],
        f->reg);
  compare("grad images", images->grad, f->grad_images, images->numel);
  for (int i = 0; i < f->n_params; i++) {
    const captioner_fixture_param *fp = &f->params[i];
    const ct_tensor *t = ct_params_find(&p, fp->name)->tensor;
    char what[160];
    snprintf(what, sizeof what, "%s %s", fp->grad ? "grad" : "after", fp->name);
    compare(what, fp->grad ? t->grad : ct_f32(t),
            fp->grad ? fp->grad : fp->after, t->numel);
  }
done:
  ct_arena_reset();
  ct_nn_captioner_free(m);
  ct_params_free(&p);
}

int main(void) {
  check_case(&captioner_fixture_case);
  return test_summary("captioner_parity");
}
