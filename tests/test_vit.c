// ViT and DeiT (nn/vit.h), attention rollout, soft-target cross-entropy and
// the distillation losses (nn/distill.h): timm's parameter names and shapes,
// finite-difference gradients through a whole tiny ViT and DeiT (patchify,
// tokens, position embedding, drop path in training mode), the losses
// against their formulas, and rollout on hand-made attention maps.
#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "grad_util.h"
#include "nn/distill.h"
#include "nn/vit.h"

enum { MAX_INPUTS = 128 };

static ct_nn_vit_config tiny(bool distilled) {
  return (ct_nn_vit_config){.image_h = 8,
                            .image_w = 4,
                            .in_channels = 2,
                            .patch = 2,
                            .dim = 8,
                            .depth = 2,
                            .heads = 2,
                            .mlp_dim = 12,
                            .num_classes = 3,
                            .distilled = distilled};
}

static void test_names(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_vit m;
  ct_rng r = ct_rng_make(1, 0);
  ct_nn_vit_config c = tiny(true);
  CHECK(ct_nn_vit_init(&m, &p, "", &c, &r) == CT_OK, "init: %s",
        ct_last_error());
  static const struct {
    const char *name;
    int ndim;
    int64_t shape[4];
  } want[] = {
      {"patch_embed.proj.weight", 4, {8, 2, 2, 2}},
      {"patch_embed.proj.bias", 1, {8}},
      {"cls_token", 3, {1, 1, 8}},
      {"dist_token", 3, {1, 1, 8}},
      {"pos_embed", 3, {1, 4 * 2 + 2, 8}},
      {"blocks.0.norm1.weight", 1, {8}},
      {"blocks.0.attn.qkv.weight", 2, {24, 8}},
      {"blocks.0.attn.qkv.bias", 1, {24}},
      {"blocks.0.attn.proj.weight", 2, {8, 8}},
      {"blocks.1.norm2.bias", 1, {8}},
      {"blocks.1.mlp.fc1.weight", 2, {12, 8}},
      {"blocks.1.mlp.fc2.weight", 2, {8, 12}},
      {"norm.weight", 1, {8}},
      {"head.weight", 2, {3, 8}},
      {"head_dist.bias", 1, {3}},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    ct_param *q = ct_params_find(&p, want[i].name);
    CHECK(q != NULL, "no parameter %s", want[i].name);
    if (!q) continue;
    bool same = q->tensor->ndim == want[i].ndim;
    for (int d = 0; same && d < want[i].ndim; d++)
      same = q->tensor->shape[d] == want[i].shape[d];
    CHECK(same, "%s has the wrong shape", want[i].name);
  }
  // 16 parameters per block (2 norms x 2, qkv 2, proj 2, fc1 2, fc2 2 = 12)
  // plus patch 2, tokens 2, pos 1, norm 2, two heads 4.
  CHECK(p.n == 2 * 12 + 2 + 2 + 1 + 2 + 4, "parameter count %d", p.n);
  CHECK(ct_params_find(&p, "cls_token")->flags & CT_PARAM_NO_DECAY,
        "cls_token must not decay");
  CHECK(ct_params_find(&p, "pos_embed")->flags & CT_PARAM_NO_DECAY,
        "pos_embed must not decay");
  CHECK(!(ct_params_find(&p, "blocks.0.attn.qkv.weight")->flags &
          CT_PARAM_NO_DECAY),
        "qkv weight decays");
  // Bad configs name the problem.
  ct_nn_vit bad;
  ct_params q;
  ct_params_init(&q);
  c.patch = 3;
  CHECK(ct_nn_vit_init(&bad, &q, "", &c, &r) == CT_ERR_ARG &&
            strstr(ct_last_error(), "patch"),
        "patch not dividing the image");
  ct_nn_vit_free(&bad);
  c = tiny(false);
  c.heads = 3;
  CHECK(ct_nn_vit_init(&bad, &q, "", &c, &r) == CT_ERR_ARG, "dim %% heads");
  ct_nn_vit_free(&bad);
  ct_params_free(&q);
  ct_nn_vit_free(&m);
  ct_params_free(&p);
}

typedef struct vit_case {
  ct_nn_vit m;
  bool training;
  bool dist;  // return the distillation head's logits
} vit_case;

static ct_tensor *vit_fn(ct_tensor *const *in, void *vc) {
  vit_case *c = vc;
  ct_nn_ctx ctx = c->training ? ct_nn_train_ctx(5, 2) : ct_nn_eval_ctx();
  ct_tensor *dist = NULL;
  ct_tensor *logits = ct_nn_vit_forward(&c->m, &ctx, in[0], &dist, NULL);
  return c->dist ? dist : logits;
}

static void check_vit(const char *what, bool distilled, bool training,
                      bool dist_head) {
  ct_params p;
  ct_params_init(&p);
  vit_case c = {.training = training, .dist = dist_head};
  ct_rng r = ct_rng_make(3, 0);
  ct_nn_vit_config cfg = tiny(distilled);
  cfg.drop_path = training ? 0.5f : 0.0f;
  cfg.dropout = training ? 0.2f : 0.0f;
  CHECK(ct_nn_vit_init(&c.m, &p, "", &cfg, &r) == CT_OK, "init: %s",
        ct_last_error());
  ct_rng pr = ct_rng_make(99, 1);
  for (size_t i = 0; i < p.count; i++)
    p.data[i] += 0.2f * (float)(ct_rng_next_double(&pr) - 0.5);
  ct_tensor *x =
      ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(3, 2, 8, 4));
  ct_tensor *in[MAX_INPUTS] = {x};
  int n = 1;
  for (int i = 0; i < p.n; i++) in[n++] = p.items[i].tensor;
  grad_check(what, vit_fn, &c, in, n, NULL);
  ct_nn_vit_free(&c.m);
  ct_params_free(&p);
}

static void test_forward(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_vit m;
  ct_rng r = ct_rng_make(4, 0);
  ct_nn_vit_config cfg = tiny(true);
  cfg.drop_path = 0.5f;
  CHECK(ct_nn_vit_init(&m, &p, "", &cfg, &r) == CT_OK, "init");
  ct_tensor *x =
      ct_tensor_randn(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(16, 2, 8, 4));
  bool was = ct_grad_set_enabled(false);
  ct_tensor *dist = NULL;
  ct_tensor *a = ct_nn_vit_forward(&m, NULL, x, &dist, NULL);
  CHECK(a && dist && a->ndim == 2 && a->shape[0] == 16 && a->shape[1] == 3,
        "logits (16, 3)");
  ct_tensor *pred = ct_nn_vit_predict(&m, x);
  float worst = 0.0f;
  for (int64_t i = 0; pred && i < pred->numel; i++)
    worst = fmaxf(worst, fabsf(ct_f32(pred)[i] -
                               0.5f * (ct_f32(a)[i] + ct_f32(dist)[i])));
  CHECK(pred && worst < 1e-6f, "DeiT prediction is the mean of its heads");
  // Drop path: per sample, the last block's branch is dropped or kept
  // (scaled by 2), so between two steps the samples whose draw agrees give
  // the same output and the others differ.
  ct_nn_ctx ctx = ct_nn_train_ctx(7, 1), ctx_b = ct_nn_train_ctx(7, 2);
  ct_tensor *t = ct_nn_vit_forward(&m, &ctx, x, NULL, NULL);
  ct_tensor *u = ct_nn_vit_forward(&m, &ctx_b, x, NULL, NULL);
  int changed = 0;
  for (int64_t b = 0; t && u && b < 16; b++)
    changed +=
        memcmp(ct_f32(t) + 3 * b, ct_f32(u) + 3 * b, 3 * sizeof(float)) != 0;
  CHECK(changed > 0 && changed < 16, "drop path: %d of 16 samples changed",
        changed);
  ct_nn_ctx ctx2 = ct_nn_train_ctx(7, 1);
  ct_tensor *t2 = ct_nn_vit_forward(&m, &ctx2, x, NULL, NULL);
  CHECK(t2 && !memcmp(ct_f32(t), ct_f32(t2), (size_t)t->numel * sizeof(float)),
        "the same (seed, step) gives the same masks");
  // The attention maps are row-stochastic (B, T, T).
  ct_tensor *att[2] = {0};
  ct_tensor *w = ct_nn_vit_forward(&m, NULL, x, NULL, att);
  CHECK(w && att[0] && att[1] && att[0]->shape[1] == m.tokens,
        "attention maps");
  double row = 0.0;
  for (int64_t j = 0; att[0] && j < m.tokens; j++) row += ct_f32(att[0])[j];
  CHECK(fabs(row - 1.0) < 1e-5, "attention rows sum to 1 (%g)", row);
  // Wrong image shape: an error naming the expected shape.
  ct_tensor *bad = ct_tensor_zeros(CT_F32, CT_SHAPE(1, 1, 8, 4));
  CHECK(!ct_nn_vit_forward(&m, NULL, bad, NULL, NULL) &&
            strstr(ct_last_error(), "(B, 2, 8, 4)"),
        "bad input shape: %s", ct_last_error());
  ct_grad_set_enabled(was);
  ct_arena_reset();
  ct_nn_vit_free(&m);
  ct_params_free(&p);
}

static void test_rollout(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_vit m;
  ct_rng r = ct_rng_make(4, 0);
  ct_nn_vit_config cfg = tiny(false);  // 8 patches, 9 tokens, depth 2
  CHECK(ct_nn_vit_init(&m, &p, "", &cfg, &r) == CT_OK, "init");
  const int64_t T = m.tokens;
  ct_tensor *att[2];
  for (int l = 0; l < 2; l++) {
    att[l] = ct_tensor_zeros(CT_F32, CT_SHAPE(1, T, T));
    // Layer 0 uniform; layer 1: the class token looks only at patch 3
    // (token 4), every other token at itself.
    for (int64_t i = 0; i < T; i++)
      for (int64_t j = 0; j < T; j++)
        ct_f32(att[l])[i * T + j] = l == 0 ? 1.0f / (float)T
                                    : (i == 0 ? (j == 4) : (i == j)) ? 1.0f
                                                                     : 0.0f;
  }
  float out[8];
  CHECK(ct_nn_vit_rollout(&m, att, out) == CT_OK, "rollout");
  // row0 of A1' = 0.5 e0 + 0.5 e4; times A0' (rows 0.5 e_i + 0.5 uniform)
  // gives u/2 + e0/4 + e4/4: patch 3 gets 1/(2T) + 1/4, the others 1/(2T).
  int argmax = 0;
  for (int i = 1; i < 8; i++)
    if (out[i] > out[argmax]) argmax = i;
  CHECK(argmax == 3 && fabsf(out[3] - 1.0f) < 1e-6f, "patch 3 is the peak");
  float want = (0.5f / (float)T) / (0.25f + 0.5f / (float)T);
  CHECK(fabsf(out[0] - want) < 1e-5f, "other patches %g, want %g", out[0],
        want);
  ct_tensor *wrong[2] = {att[0], ct_tensor_zeros(CT_F32, CT_SHAPE(1, 3, 3))};
  CHECK(ct_nn_vit_rollout(&m, wrong, out) == CT_ERR_SHAPE, "bad map shape");
  ct_arena_reset();
  ct_nn_vit_free(&m);
  ct_params_free(&p);
}

// ---- losses -------------------------------------------------------------------

static ct_tensor *soft_ce_fn(ct_tensor *const *in, void *c) {
  (void)c;
  return ct_nn_soft_cross_entropy(in[0], in[1]);
}

typedef struct distill_case {
  ct_nn_distill_opts o;
  ct_tensor *teacher, *labels;
} distill_case;

static ct_tensor *distill_fn(ct_tensor *const *in, void *vc) {
  distill_case *c = vc;
  return ct_nn_distill_loss(in[0], in[1], c->teacher, c->labels, NULL, &c->o);
}

enum { N = 5, K = 4 };

// Arena tensors die at each ct_arena_reset (grad_check resets): remade.
static ct_tensor *make_labels(void) {
  return ct_tensor_from(CT_I32, (int32_t[N]){0, 3, 1, 2, 3}, CT_SHAPE(N));
}

static void test_losses(void) {
  ct_tensor *z = grad_input(CT_SHAPE(N, K));
  ct_tensor *labels = make_labels();
  // One-hot targets: the soft CE is the ordinary CE.
  ct_tensor *onehot = ct_tensor_zeros(CT_F32, CT_SHAPE(N, K));
  for (int i = 0; i < N; i++) ct_f32(onehot)[i * K + ct_i32(labels)[i]] = 1.0f;
  ct_tensor *a = ct_nn_soft_cross_entropy(z, onehot);
  ct_tensor *b = ct_cross_entropy(z, labels, NULL);
  CHECK(a && b && fabsf(ct_f32(a)[0] - ct_f32(b)[0]) < 1e-6f,
        "soft CE of one-hot targets = CE (%g vs %g)", a ? ct_f32(a)[0] : 0.0,
        b ? ct_f32(b)[0] : 0.0);
  ct_arena_reset();
  // Gradients of the soft CE w.r.t. the logits.
  ct_tensor *soft[2] = {
      grad_input(CT_SHAPE(N, K)),
      ct_tensor_rand(&grad_test_rng, 0.0f, 1.0f, CT_SHAPE(N, K))};
  grad_check("soft cross-entropy", soft_ce_fn, NULL, soft, 2, NULL);

  // Hard distillation: (1-a) CE_smooth(z, y) + a CE(zd, argmax t).
  distill_case c = {.o = {.kind = CT_NN_DISTILL_HARD,
                          .alpha = 0.3f,
                          .label_smoothing = 0.1f}};
  labels = make_labels();
  ct_tensor *zc = grad_input(CT_SHAPE(N, K)), *zd = grad_input(CT_SHAPE(N, K));
  c.teacher = ct_tensor_randn(&grad_test_rng, 0.0f, 2.0f, CT_SHAPE(N, K));
  c.labels = labels;
  ct_tensor *loss = ct_nn_distill_loss(zc, zd, c.teacher, labels, NULL, &c.o);
  int32_t tl[N];
  for (int i = 0; i < N; i++) {
    int best = 0;
    for (int k = 1; k < K; k++)
      if (ct_f32(c.teacher)[i * K + k] > ct_f32(c.teacher)[i * K + best])
        best = k;
    tl[i] = best;
  }
  ct_ce_opts smooth = ct_ce_defaults();
  smooth.label_smoothing = 0.1f;
  double want =
      0.7 * ct_f32(ct_cross_entropy(zc, labels, &smooth))[0] +
      0.3 * ct_f32(ct_cross_entropy(zd, ct_tensor_from(CT_I32, tl, CT_SHAPE(N)),
                                    NULL))[0];
  CHECK(loss && fabs(ct_f32(loss)[0] - want) < 1e-5,
        "hard distillation %g vs %g", loss ? ct_f32(loss)[0] : 0.0, want);
  ct_tensor *hard[2] = {zc, zd};
  grad_check("hard distillation loss", distill_fn, &c, hard, 2, NULL);

  // Soft distillation: tau^2 * sum KL / numel, computed by hand in double.
  c.o = (ct_nn_distill_opts){
      .kind = CT_NN_DISTILL_SOFT, .alpha = 0.5f, .tau = 2.0f};
  zc = grad_input(CT_SHAPE(N, K));
  zd = grad_input(CT_SHAPE(N, K));
  c.labels = labels = make_labels();
  c.teacher = ct_tensor_randn(&grad_test_rng, 0.0f, 2.0f, CT_SHAPE(N, K));
  loss = ct_nn_distill_loss(zc, zd, c.teacher, labels, NULL, &c.o);
  double kl = 0.0;
  for (int i = 0; i < N; i++) {
    double pt[K], ps[K], st = 0.0, ss = 0.0;
    for (int k = 0; k < K; k++) {
      pt[k] = exp(ct_f32(c.teacher)[i * K + k] / 2.0);
      ps[k] = exp(ct_f32(zd)[i * K + k] / 2.0);
      st += pt[k];
      ss += ps[k];
    }
    for (int k = 0; k < K; k++)
      kl += pt[k] / st * (log(pt[k] / st) - log(ps[k] / ss));
  }
  want = 0.5 * ct_f32(ct_cross_entropy(zc, labels, NULL))[0] +
         0.5 * 4.0 * kl / (N * K);
  CHECK(loss && fabs(ct_f32(loss)[0] - want) < 1e-5,
        "soft distillation %g vs %g", loss ? ct_f32(loss)[0] : 0.0, want);
  // The per-image KL (kl_per_sample) is K times the reference's term.
  c.o.kl_per_sample = true;
  loss = ct_nn_distill_loss(zc, zd, c.teacher, labels, NULL, &c.o);
  want =
      0.5 * ct_f32(ct_cross_entropy(zc, labels, NULL))[0] + 0.5 * 4.0 * kl / N;
  CHECK(loss && fabs(ct_f32(loss)[0] - want) < 1e-5,
        "per-image soft distillation %g vs %g", loss ? ct_f32(loss)[0] : 0.0,
        want);
  c.o.kl_per_sample = false;
  ct_tensor *sd[2] = {zc, zd};
  grad_check("soft distillation loss", distill_fn, &c, sd, 2, NULL);
  c.o.kl_per_sample = true;
  sd[0] = grad_input(CT_SHAPE(N, K));
  sd[1] = grad_input(CT_SHAPE(N, K));
  c.labels = make_labels();
  c.teacher = ct_tensor_randn(&grad_test_rng, 0.0f, 2.0f, CT_SHAPE(N, K));
  grad_check("per-image soft distillation loss", distill_fn, &c, sd, 2, NULL);
  labels = make_labels();
  zc = grad_input(CT_SHAPE(N, K));
  CHECK(!ct_nn_distill_loss(zc, NULL, NULL, labels, NULL, &c.o),
        "distillation without the heads is an error");
  ct_arena_reset();
}

int main(void) {
  test_names();
  test_forward();
  test_rollout();
  check_vit("vit (eval)", false, false, false);
  check_vit("vit (training: dropout, drop path)", false, true, false);
  check_vit("deit class head", true, false, false);
  check_vit("deit distillation head", true, false, true);
  test_losses();
  return test_summary("vit");
}
