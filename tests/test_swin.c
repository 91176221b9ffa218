// Swin (nn/swin.c) against the PyTorch twin of
// tests/ref/gen_swin_fixtures.py, written after timm: two stages (a plain
// and a shifted block; patch merging, then two blocks on a map no larger
// than the window), outputs and the gradients of the input and of every
// parameter within 1e-5 relative; the classifier around them (patch
// embedding, norm, pooling, head.fc), logits and parameter gradients. The
// parameters are registered in timm's order under timm's names. Also: the
// same bits at 1 and 2 threads, weight-decay flags, and config errors.
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/threads.h"
#include "nn/swin.h"
#include "tests/parity_util.h"
#include "tests/ref/swin_fixtures.h"

#include <stdlib.h>

enum { MAX_BLOCKS = 4 };

typedef struct twin {
  ct_nn_swin_block stage0[MAX_BLOCKS], stage1[MAX_BLOCKS];
  ct_nn_patch_merging downsample;
  int depth0, depth1;
} twin;

static ct_status block(ct_nn_swin_block *b, ct_params *p, const char *stage,
                       int i, int64_t dim, int64_t heads, int64_t side,
                       const swin_fixture *f, ct_rng *rng) {
  char prefix[CT_NN_NAME_MAX];
  snprintf(prefix, sizeof prefix, "%s.blocks.%d", stage, i);
  ct_nn_swin_block_config c = {.dim = dim,
                               .heads = heads,
                               .H = side,
                               .W = side,
                               .window = f->window,
                               .shifted = i % 2 == 1,
                               .mlp_dim = f->mlp_ratio * dim};
  return ct_nn_swin_block_init(b, p, prefix, &c, rng);
}

static ct_status build(twin *m, ct_params *p, const swin_fixture *f) {
  ct_rng rng = ct_rng_make(1, 0);
  m->depth0 = f->depth0;
  m->depth1 = f->depth1;
  ct_status st = CT_OK;
  for (int i = 0; i < f->depth0 && st == CT_OK; i++)
    st = block(&m->stage0[i], p, "layers.0", i, f->C, f->heads0, f->H, f, &rng);
  if (st == CT_OK)
    st = ct_nn_patch_merging_init(&m->downsample, p, "layers.1.downsample",
                                  f->C, 2 * f->C, &rng);
  for (int i = 0; i < f->depth1 && st == CT_OK; i++)
    st = block(&m->stage1[i], p, "layers.1", i, 2 * f->C, f->heads1, f->H / 2,
               f, &rng);
  return st;
}

static ct_tensor *forward(const twin *m, ct_tensor *x) {
  ct_nn_ctx ctx = ct_nn_train_ctx(5, 0);  // no dropout: the same as eval
  for (int i = 0; i < m->depth0; i++)
    x = ct_nn_swin_block_forward(&m->stage0[i], &ctx, x);
  x = ct_nn_patch_merging_forward(&m->downsample, x);
  for (int i = 0; i < m->depth1; i++)
    x = ct_nn_swin_block_forward(&m->stage1[i], &ctx, x);
  return x;
}

// Builds the twin with the fixture's parameters, runs forward and backward
// at the current thread count. Returns the output (arena) or NULL.
static ct_tensor *run(ct_params *p, twin *m, ct_tensor **x_out) {
  const swin_fixture *f = &swin_fixture_pair;
  ct_params_init(p);
  ct_status st = build(m, p, f);
  CHECK(st == CT_OK, "init: %s", ct_last_error());
  if (st != CT_OK || !parity_count(p, "swin", f->n_params)) return NULL;
  for (int i = 0; i < f->n_params; i++)
    if (!parity_load(p, "swin", f->params[i].name, f->params[i].numel,
                     f->params[i].value))
      return NULL;
  ct_tensor *x = ct_requires_grad(
      ct_tensor_from(CT_F32, f->x, CT_SHAPE(f->B, f->H, f->W, f->C)));
  ct_tensor *out = forward(m, x);
  ct_tensor *loss = parity_contract(out, f->r);
  CHECK(loss != NULL, "forward: %s", ct_last_error());
  if (!loss) return NULL;
  ct_params_zero_grad(p);
  st = ct_backward(loss);
  CHECK(st == CT_OK, "backward: %s", ct_last_error());
  *x_out = x;
  return st == CT_OK ? out : NULL;
}

// The store holds the fixture's names in the fixture's (timm's) order.
static void check_order(const ct_params *p, const swin_fixture_param *fp, int n,
                        const char *what) {
  int bad = -1;
  for (int i = 0; i < n && i < p->n && bad < 0; i++)
    if (strcmp(p->items[i].name, fp[i].name)) bad = i;
  CHECK(bad < 0, "%s: parameter %d is '%s', timm registers '%s'", what, bad,
        bad < 0 ? "" : p->items[bad].name, bad < 0 ? "" : fp[bad].name);
}

// Worst relative error of the parameter gradients against the fixture's,
// each checked at 1e-5.
static double check_param_grads(const ct_params *p,
                                const swin_fixture_param *fp, int n,
                                const char **worst_name) {
  double worst = 0.0;
  *worst_name = "";
  for (int i = 0; i < n; i++) {
    const ct_tensor *t = ct_params_find(p, fp[i].name)->tensor;
    double e = parity_rel_err(t->grad, fp[i].grad, t->numel);
    CHECK(e <= 1e-5, "%s grad: rel err %.2e", fp[i].name, e);
    if (e >= worst) {
      worst = e;
      *worst_name = fp[i].name;
    }
  }
  return worst;
}

static void test_parity(void) {
  const swin_fixture *f = &swin_fixture_pair;
  ct_params p;
  twin m;
  ct_tensor *x = NULL;
  ct_tensor *out = run(&p, &m, &x);
  if (out) {
    CHECK(out->ndim == 4 && out->shape[1] == f->H / 2 &&
              out->shape[3] == 2 * f->C,
          "output shape");
    double e_out = parity_rel_err(ct_f32(out), f->out, out->numel);
    double e_x = parity_rel_err(x->grad, f->grad_x, x->numel);
    CHECK(e_out <= 1e-5, "output: rel err %.2e", e_out);
    CHECK(e_x <= 1e-5, "input grad: rel err %.2e", e_x);
    check_order(&p, f->params, f->n_params, "pair");
    const char *worst_name;
    double worst = check_param_grads(&p, f->params, f->n_params, &worst_name);
    printf("  swin pair + merging: out %.1e  grad x %.1e  param %.1e (%s)\n",
           e_out, e_x, worst, worst_name);
  }
  // The shift as used: layers.0.blocks.1 shifts by 2; layers.1 sees a 4x4
  // map, no larger than the window 4: one window, no shift.
  CHECK(m.stage0[0].shift == 0 && m.stage0[1].shift == f->window / 2,
        "stage 0 shifts %lld, %lld", (long long)m.stage0[0].shift,
        (long long)m.stage0[1].shift);
  CHECK(m.stage1[1].shift == 0 && m.stage1[1].window == f->H / 2,
        "stage 1: window %lld shift %lld", (long long)m.stage1[1].window,
        (long long)m.stage1[1].shift);
  ct_params_free(&p);
  ct_arena_reset();
}

static void test_model_parity(void) {
  const swin_model_fixture *f = &swin_fixture_model;
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(1, 0);
  ct_nn_swin m;
  ct_nn_swin_config c = {.image_h = f->image,
                         .image_w = f->image,
                         .in_channels = f->in_channels,
                         .patch = f->patch,
                         .embed_dim = f->C,
                         .stages = 2,
                         .depths = {f->depth0, f->depth1},
                         .heads = {f->heads0, f->heads1},
                         .window = f->window,
                         .mlp_ratio = (float)f->mlp_ratio,
                         .num_classes = f->classes};
  ct_status st = ct_nn_swin_init(&m, &p, "", &c, &rng);
  CHECK(st == CT_OK, "model init: %s", ct_last_error());
  bool ok = st == CT_OK && parity_count(&p, "model", f->n_params);
  for (int i = 0; ok && i < f->n_params; i++)
    ok = parity_load(&p, "model", f->params[i].name, f->params[i].numel,
                     f->params[i].value);
  if (ok) {
    check_order(&p, f->params, f->n_params, "model");
    ct_tensor *x = ct_tensor_from(
        CT_F32, f->x, CT_SHAPE(f->B, f->in_channels, f->image, f->image));
    ct_nn_ctx ctx = ct_nn_train_ctx(5, 0);
    ct_tensor *logits = ct_nn_swin_forward(&m, &ctx, x);
    ct_tensor *loss = parity_contract(logits, f->r);
    CHECK(loss && ct_backward(loss) == CT_OK, "model: %s", ct_last_error());
    if (loss) {
      double e = parity_rel_err(ct_f32(logits), f->out, logits->numel);
      CHECK(e <= 1e-5, "logits: rel err %.2e", e);
      const char *worst_name;
      double worst = check_param_grads(&p, f->params, f->n_params, &worst_name);
      printf("  swin classifier: logits %.1e  param %.1e (%s)\n", e, worst,
             worst_name);
    }
  }
  ct_nn_swin_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

// Output and every gradient bit-identical at 1 and 2 threads.
static void test_threads(void) {
  const int saved = ct_get_threads();
  float *base[2] = {NULL, NULL};
  int64_t n[2] = {0, 0};
  bool same = true;
  for (int t = 1; t <= 2; t++) {
    ct_set_threads(t);
    ct_params p;
    twin m;
    ct_tensor *x = NULL;
    ct_tensor *out = run(&p, &m, &x);
    if (out) {
      // out, then x's gradient and the parameter gradients
      const int64_t total =
          out->numel + x->numel + (int64_t)ct_params_numel(&p);
      float *buf = malloc((size_t)total * sizeof(float));
      int64_t k = 0;
      for (int64_t i = 0; i < out->numel; i++) buf[k++] = ct_f32(out)[i];
      for (int64_t i = 0; i < x->numel; i++) buf[k++] = x->grad[i];
      for (int i = 0; i < p.n; i++)
        for (int64_t j = 0; j < p.items[i].tensor->numel; j++)
          buf[k++] = p.items[i].tensor->grad[j];
      base[t - 1] = buf;
      n[t - 1] = k;
    }
    ct_params_free(&p);
    ct_arena_reset();
  }
  same = base[0] && base[1] && n[0] == n[1] &&
         !memcmp(base[0], base[1], (size_t)n[0] * sizeof(float));
  CHECK(same, "1 and 2 threads give different bits");
  free(base[0]);
  free(base[1]);
  ct_set_threads(saved);
}

static void test_flags_and_errors(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(2, 0);
  ct_nn_swin_block b;
  ct_nn_swin_block_config c = {.dim = 8,
                               .heads = 2,
                               .H = 8,
                               .W = 8,
                               .window = 4,
                               .shifted = true,
                               .mlp_dim = 16};
  CHECK(ct_nn_swin_block_init(&b, &p, "blk", &c, &rng) == CT_OK, "init: %s",
        ct_last_error());
  const ct_param *t =
      ct_params_find(&p, "blk.attn.relative_position_bias_table");
  const ct_param *w = ct_params_find(&p, "blk.attn.qkv.weight");
  CHECK(t && (t->flags & CT_PARAM_NO_DECAY), "bias table decays");
  CHECK(w && !(w->flags & CT_PARAM_NO_DECAY), "qkv weight does not decay");
  // trunc_normal(std .02), cut at +-2 (timm): within 5 std.
  if (t) parity_check_range(t->tensor, -0.1, 0.1);

  ct_nn_swin_block nb;
  ct_nn_swin_block_config bad = c;
  bad.heads = 3;
  CHECK(ct_nn_swin_block_init(&nb, &p, "b1", &bad, &rng) == CT_ERR_ARG,
        "dim 8 with 3 heads");
  bad = c;
  bad.W = 12;
  bad.window = 5;
  CHECK(ct_nn_swin_block_init(&nb, &p, "b2", &bad, &rng) == CT_ERR_ARG &&
            strstr(ct_last_error(), "pad"),
        "window 5 of 8x12: %s", ct_last_error());
  bad = c;
  bad.H = 4;
  bad.W = 2;
  bad.window = 7;
  CHECK(ct_nn_swin_block_init(&nb, &p, "b3", &bad, &rng) == CT_ERR_ARG,
        "a 4x2 map within window 7");
  bad = c;
  bad.drop_path = 1.0f;
  CHECK(ct_nn_swin_block_init(&nb, &p, "b4", &bad, &rng) == CT_ERR_ARG,
        "drop path 1");
  // A map of the wrong size.
  CHECK(ct_nn_swin_block_forward(
            &b, NULL, ct_tensor_zeros(CT_F32, CT_SHAPE(1, 4, 8, 8))) == NULL,
        "4x8 map into an 8x8 block");
  ct_params_free(&p);
  ct_arena_reset();
}

// Classifier configs that cannot work are refused, naming the problem.
static void test_model_errors(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(3, 0);
  const ct_nn_swin_config good = {.image_h = 16,
                                  .image_w = 16,
                                  .in_channels = 1,
                                  .patch = 2,
                                  .embed_dim = 8,
                                  .stages = 2,
                                  .depths = {2, 2},
                                  .heads = {2, 4},
                                  .window = 4,
                                  .mlp_ratio = 2.0f,
                                  .num_classes = 3};
  struct {
    const char *what, *needle;
    ct_nn_swin_config c;
  } cases[6];
  for (int i = 0; i < 6; i++) cases[i].c = good;
  cases[0].what = "patch 3 of 16", cases[0].needle = "patch";
  cases[0].c.patch = 3;
  cases[1].what = "a 7x7 map halved", cases[1].needle = "halved";
  cases[1].c.image_h = cases[1].c.image_w = 14;
  cases[2].what = "0 stages", cases[2].needle = "stages";
  cases[2].c.stages = 0;
  cases[3].what = "5 stages", cases[3].needle = "stages";
  cases[3].c.stages = 5;
  cases[4].what = "stage 1 without heads", cases[4].needle = "stage 1";
  cases[4].c.heads[1] = 0;
  cases[5].what = "window 3 of an 8x8 map", cases[5].needle = "window 3";
  cases[5].c.window = 3;
  for (int i = 0; i < 6; i++) {
    ct_nn_swin m;
    ct_status st = ct_nn_swin_init(&m, &p, "bad", &cases[i].c, &rng);
    CHECK(st == CT_ERR_ARG && strstr(ct_last_error(), cases[i].needle),
          "%s: status %d, %s", cases[i].what, (int)st, ct_last_error());
    ct_nn_swin_free(&m);
    ct_params_free(&p);
    ct_params_init(&p);
  }
  // Training with drop path: a pure function of (seed, step).
  ct_nn_swin m;
  ct_nn_swin_config c = good;
  c.drop_path = 0.5f;
  c.dropout = 0.1f;
  c.attn_dropout = 0.1f;
  CHECK(ct_nn_swin_init(&m, &p, "", &c, &rng) == CT_OK, "%s", ct_last_error());
  ct_tensor *x = ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(4, 1, 16, 16));
  float out[3][12];
  for (int k = 0; k < 3; k++) {
    ct_nn_ctx ctx = ct_nn_train_ctx(9, k == 2 ? 2 : 1);
    ct_tensor *y = ct_nn_swin_forward(&m, &ctx, x);
    CHECK(y && y->numel == 12, "training forward: %s", ct_last_error());
    if (y && y->numel == 12) memcpy(out[k], ct_f32(y), sizeof out[k]);
  }
  CHECK(!memcmp(out[0], out[1], sizeof out[0]), "same step, different bits");
  CHECK(memcmp(out[0], out[2], sizeof out[0]), "another step, same bits");
  ct_nn_swin_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

// Drop path over windows: the rows (windows) of one image are kept or
// dropped together, as timm drops a whole sample's branch.
static void test_drop_path_groups(void) {
  const int64_t images = 16, per = 4;
  ct_tensor *x = ct_tensor_zeros(CT_F32, CT_SHAPE(images * per, 2, 3));
  ct_tensor *branch = ct_tensor_zeros(CT_F32, CT_SHAPE(images * per, 2, 3));
  for (int64_t i = 0; i < branch->numel; i++) ct_f32(branch)[i] = 1.0f;
  ct_nn_ctx ctx = ct_nn_train_ctx(11, 3);
  ct_tensor *y = ct_nn_drop_path_add(&ctx, x, branch, 0.5f, per);
  CHECK(y != NULL, "%s", ct_last_error());
  int kept = 0, mixed = 0;
  for (int64_t b = 0; y && b < images; b++) {
    const float first = ct_f32(y)[b * per * 6];
    for (int64_t i = 0; i < per * 6; i++)
      mixed += ct_f32(y)[b * per * 6 + i] != first;
    CHECK(first == 0.0f || first == 2.0f, "image %lld: %g", (long long)b,
          (double)first);
    kept += first == 2.0f;
  }
  CHECK(mixed == 0, "%d values differ within an image's windows", mixed);
  CHECK(kept > 0 && kept < images, "%d of %lld images kept at p = 0.5", kept,
        (long long)images);
  ct_arena_reset();
}

int main(void) {
  ct_threads_from_env();
  test_parity();
  test_model_parity();
  test_threads();
  test_flags_and_errors();
  test_model_errors();
  test_drop_path_groups();
  ct_arena_release();
  return test_summary("swin");
}
