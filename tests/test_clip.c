// CLIP (nn/clip.h) as a module: open_clip's parameter names, shapes and
// weight-decay flags for both image towers, the init (logit_scale ln(1/0.07),
// the stds of open_clip's init_parameters), unit-norm outputs, the causal
// text tower (tokens after the end-of-text change nothing), clamping of the
// temperature, AdamW never decaying logit_scale, and bad input.
#include <math.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/threads.h"
#include "nn/clip.h"
#include "optim/optim.h"
#include "tests/harness.h"

static ct_nn_clip_config tiny(ct_nn_clip_image_arch arch) {
  return (ct_nn_clip_config){
      .image_arch = arch,
      .vit = {.image_h = 8,
              .image_w = 8,
              .in_channels = 3,
              .patch = 4,
              .dim = 8,
              .depth = 1,
              .heads = 2,
              .mlp_dim = 16,
              .num_classes = 10},  // ignored: CLIP builds no head
      .resnet = {.in_channels = 3,
                 .num_classes = 10,
                 .width = 4,
                 .stages = 2,
                 .blocks = 1},
      .embed_dim = 6,
      .vocab = 11,
      .context_length = 7,
      .text_width = 8,
      .text_layers = 2,
      .text_heads = 2,
      .text_mlp = 32};
}

static double std_of(const ct_tensor *t) {
  double s = 0.0, ss = 0.0;
  for (int64_t i = 0; i < t->numel; i++) {
    s += ct_f32(t)[i];
    ss += (double)ct_f32(t)[i] * ct_f32(t)[i];
  }
  const double m = s / (double)t->numel;
  return sqrt(ss / (double)t->numel - m * m);
}

static const ct_param *find(const ct_params *p, const char *name) {
  const ct_param *cp = ct_params_find(p, name);
  CHECK(cp != NULL, "no parameter '%s'", name);
  return cp;
}

static void test_names_and_init(ct_nn_clip_image_arch arch) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(1, 0);
  ct_nn_clip_config c = tiny(arch);
  c.text_width = 64;  // enough values for the std checks
  c.text_heads = 4;
  c.text_mlp = 256;
  c.vocab = 500;
  ct_nn_clip *m = NULL;
  CHECK(ct_nn_clip_init(&m, &p, "", &c, &rng) == CT_OK, "init: %s",
        ct_last_error());
  if (!m) return;
  static const struct {
    const char *name;
    int ndim;
    int64_t shape[2];
    bool decay;
  } want[] = {
      {"logit_scale", 0, {0}, false},
      {"positional_embedding", 2, {7, 64}, false},
      {"text_projection", 2, {64, 6}, true},
      {"token_embedding.weight", 2, {500, 64}, false},
      {"transformer.resblocks.0.ln_1.weight", 1, {64}, false},
      {"transformer.resblocks.0.ln_1.bias", 1, {64}, false},
      {"transformer.resblocks.1.attn.in_proj_weight", 2, {192, 64}, true},
      {"transformer.resblocks.1.attn.in_proj_bias", 1, {192}, false},
      {"transformer.resblocks.1.attn.out_proj.weight", 2, {64, 64}, true},
      {"transformer.resblocks.1.attn.out_proj.bias", 1, {64}, false},
      {"transformer.resblocks.0.ln_2.weight", 1, {64}, false},
      {"transformer.resblocks.0.mlp.c_fc.weight", 2, {256, 64}, true},
      {"transformer.resblocks.0.mlp.c_fc.bias", 1, {256}, false},
      {"transformer.resblocks.1.mlp.c_proj.weight", 2, {64, 256}, true},
      {"transformer.resblocks.1.mlp.c_proj.bias", 1, {64}, false},
      {"ln_final.weight", 1, {64}, false},
      {"ln_final.bias", 1, {64}, false},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const ct_param *cp = find(&p, want[i].name);
    if (!cp) continue;
    const ct_tensor *t = cp->tensor;
    bool same = t->ndim == want[i].ndim;
    for (int d = 0; same && d < t->ndim; d++)
      same = t->shape[d] == want[i].shape[d];
    CHECK(same, "%s: wrong shape", want[i].name);
    CHECK(!(cp->flags & CT_PARAM_NO_DECAY) == want[i].decay,
          "%s: decay flag %s", want[i].name, want[i].decay ? "off" : "on");
  }
  const bool vit = arch == CT_NN_CLIP_VIT;
  const ct_param *proj = find(&p, "visual.proj");
  CHECK(proj && proj->tensor->shape[0] == (vit ? 8 : 8) &&
            proj->tensor->shape[1] == 6 && !(proj->flags & CT_PARAM_NO_DECAY),
        "visual.proj (width, E), decayed");
  find(&p, vit ? "visual.blocks.0.attn.qkv.weight"
               : "visual.layer2.0.conv1.weight");
  CHECK(!ct_params_find(&p, vit ? "visual.head.weight" : "visual.fc.weight"),
        "the image tower's classifier is not registered");
  int text = 0;
  for (int i = 0; i < p.n; i++)
    text += strncmp(p.items[i].name, "visual.", 7) != 0;
  CHECK(text == 4 + 2 * 12 + 2, "%d non-visual parameters, want 30", text);

  // Init: open_clip's init_parameters (W = 64, 2 layers).
  CHECK(fabsf(ct_f32(ct_nn_clip_logit_scale(m))[0] - logf(1 / 0.07f)) < 1e-6f,
        "logit_scale %g, want ln(1/0.07)",
        ct_f32(ct_nn_clip_logit_scale(m))[0]);
  const struct {
    const char *name;
    double std;
  } stds[] = {
      {"token_embedding.weight", 0.02},
      {"positional_embedding", 0.01},
      {"text_projection", 0.125},
      {"transformer.resblocks.0.attn.in_proj_weight", 0.125},
      {"transformer.resblocks.0.attn.out_proj.weight", 0.0625},
      {"transformer.resblocks.0.mlp.c_fc.weight", 0.08838834764831845},
      {"transformer.resblocks.0.mlp.c_proj.weight", 0.0625},
  };
  for (size_t i = 0; i < sizeof stds / sizeof stds[0]; i++) {
    const ct_param *cp = find(&p, stds[i].name);
    const double s = cp ? std_of(cp->tensor) : NAN;
    CHECK(fabs(s / stds[i].std - 1.0) < 0.15, "%s: std %.4g, want %.4g",
          stds[i].name, s, stds[i].std);
  }
  const ct_param *bias = find(&p, "transformer.resblocks.0.attn.in_proj_bias");
  CHECK(bias && std_of(bias->tensor) == 0.0 && ct_f32(bias->tensor)[0] == 0.0f,
        "attention biases start at 0");
  ct_nn_clip_free(m);
  ct_params_free(&p);
}

static void test_forward(ct_nn_clip_image_arch arch) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(2, 0), data = ct_rng_make(3, 0);
  const ct_nn_clip_config c = tiny(arch);
  ct_nn_clip *m = NULL;
  CHECK(ct_nn_clip_init(&m, &p, "", &c, &rng) == CT_OK, "init: %s",
        ct_last_error());
  if (!m) return;
  const int64_t B = 3, T = 6;
  ct_nn_ctx ctx = ct_nn_eval_ctx();
  ct_tensor *images = ct_tensor_randn(&data, 0.0f, 1.0f, CT_SHAPE(B, 3, 8, 8));
  ct_tensor *fi = ct_nn_clip_encode_image(m, &ctx, images);
  CHECK(fi && fi->ndim == 2 && fi->shape[0] == B && fi->shape[1] == 6,
        "image features (B, E): %s", fi ? "wrong shape" : ct_last_error());
  // tokens: row 0 fills T' (eot at 5), rows 1, 2 padded after eot
  int32_t tok[3 * 6] = {1, 5, 6, 7, 8, 2, 1, 9, 2, 0, 0, 0, 1, 3, 3, 2, 0, 0};
  const int64_t eot[3] = {5, 2, 3};
  ct_tensor *tokens = ct_tensor_from(CT_I32, tok, CT_SHAPE(B, T));
  ct_tensor *ft = ct_nn_clip_encode_text(m, &ctx, tokens, eot);
  CHECK(ft && ft->shape[0] == B && ft->shape[1] == 6, "text features: %s",
        ft ? "wrong shape" : ct_last_error());
  if (!fi || !ft) goto done;
  for (int64_t b = 0; b < B; b++) {
    double ni = 0.0, nt = 0.0;
    for (int64_t e = 0; e < 6; e++) {
      ni += (double)ct_f32(fi)[b * 6 + e] * ct_f32(fi)[b * 6 + e];
      nt += (double)ct_f32(ft)[b * 6 + e] * ct_f32(ft)[b * 6 + e];
    }
    CHECK(fabs(ni - 1.0) < 1e-5 && fabs(nt - 1.0) < 1e-5,
          "row %lld norms %g %g, want 1", (long long)b, ni, nt);
  }
  // Causal: other tokens after each eot, and a shorter T', change nothing.
  int32_t tok2[3 * 6];
  memcpy(tok2, tok, sizeof tok);
  tok2[1 * 6 + 4] = 7;
  tok2[2 * 6 + 5] = 10;
  ct_tensor *ft2 = ct_nn_clip_encode_text(
      m, &ctx, ct_tensor_from(CT_I32, tok2, CT_SHAPE(B, T)), eot);
  int32_t tok3[2 * 4] = {1, 9, 2, 0, 1, 3, 3, 2};
  ct_tensor *ft3 = ct_nn_clip_encode_text(
      m, &ctx, ct_tensor_from(CT_I32, tok3, CT_SHAPE(2, 4)), eot + 1);
  CHECK(ft2 && !memcmp(ct_f32(ft2), ct_f32(ft), 18 * sizeof(float)),
        "tokens after eot changed the text features");
  CHECK(ft3 && !memcmp(ct_f32(ft3), ct_f32(ft) + 6, 12 * sizeof(float)),
        "a shorter token row changed the text features");
  // A different eot picks another row.
  const int64_t eot4[3] = {4, 2, 3};
  ct_tensor *ft4 = ct_nn_clip_encode_text(m, &ctx, tokens, eot4);
  CHECK(ft4 && memcmp(ct_f32(ft4), ct_f32(ft), 6 * sizeof(float)) &&
            !memcmp(ct_f32(ft4) + 6, ct_f32(ft) + 6, 12 * sizeof(float)),
        "eot selects the pooled position");

  // Bad input.
  const int64_t bad[3] = {5, 6, 3};
  CHECK(!ct_nn_clip_encode_text(m, &ctx, tokens, bad) &&
            strstr(ct_last_error(), "eot[1] = 6"),
        "eot past T': %s", ct_last_error());
  CHECK(!ct_nn_clip_encode_text(m, &ctx,
                                ct_tensor_zeros(CT_I32, CT_SHAPE(1, 8)), eot) &&
            strstr(ct_last_error(), "context_length 7"),
        "T' > context_length: %s", ct_last_error());
  CHECK(!ct_nn_clip_encode_image(m, &ctx,
                                 ct_tensor_zeros(CT_F32, CT_SHAPE(1, 1, 8, 8))),
        "images with the wrong channels are refused");
done:
  ct_arena_reset();
  ct_nn_clip_free(m);
  ct_params_free(&p);
}

// clamp_scale holds s in [0, ln 100]; AdamW with weight decay never touches
// logit_scale (NO_DECAY) while it shrinks a decayed matrix.
static void test_scale_and_decay(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(4, 0);
  const ct_nn_clip_config c = tiny(CT_NN_CLIP_VIT);
  ct_nn_clip *m = NULL;
  CHECK(ct_nn_clip_init(&m, &p, "", &c, &rng) == CT_OK, "init: %s",
        ct_last_error());
  if (!m) return;
  float *s = ct_f32(ct_nn_clip_logit_scale(m));
  const ct_param *sp = ct_params_find(&p, "logit_scale");
  CHECK(sp && (sp->flags & CT_PARAM_NO_DECAY), "logit_scale is NO_DECAY");
  *s = 5.0f;
  ct_nn_clip_clamp_scale(m);
  CHECK(*s == logf(100.0f), "clamp above: %g, want ln 100", *s);
  *s = -0.25f;
  ct_nn_clip_clamp_scale(m);
  CHECK(*s == 0.0f, "clamp below: %g", *s);
  *s = 2.0f;
  ct_nn_clip_clamp_scale(m);
  CHECK(*s == 2.0f, "inside the range s stays: %g", *s);

  ct_optim opt;
  ct_optim_config oc = ct_adamw_defaults();
  oc.weight_decay = 0.5;
  CHECK(ct_optim_init(&opt, &oc) == CT_OK, "optim: %s", ct_last_error());
  ct_params_zero_grad(&p);  // zero gradients: only decay can move a value
  const ct_param *tp = ct_params_find(&p, "text_projection");
  const float before = ct_f32(tp->tensor)[0];
  CHECK(ct_optim_step(&opt, &p, 0.1f) == CT_OK, "step: %s", ct_last_error());
  CHECK(*s == 2.0f, "AdamW decayed logit_scale: %g", *s);
  CHECK(ct_f32(tp->tensor)[0] == before * (1.0f - 0.1f * 0.5f),
        "text_projection is decayed (%g -> %g)", before, ct_f32(tp->tensor)[0]);
  ct_nn_clip_free(m);
  ct_params_free(&p);
}

// Loss and every gradient of a training step, in floats, into out (the loss
// then the grad buffer); sizes pass the kernels' thresholds for threads.
static void step_bits(int threads, float *out, size_t n) {
  ct_set_threads(threads);
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(6, 0), data = ct_rng_make(7, 0);
  ct_nn_clip_config c = tiny(CT_NN_CLIP_VIT);
  c.vit.image_h = c.vit.image_w = 16;
  c.vit.dim = 64;
  c.vit.heads = 4;
  c.vit.mlp_dim = 128;
  c.text_width = 64;
  c.text_heads = 4;
  c.text_mlp = 256;
  c.context_length = 16;
  c.embed_dim = 32;
  ct_nn_clip *m = NULL;
  CHECK(ct_nn_clip_init(&m, &p, "", &c, &rng) == CT_OK, "init: %s",
        ct_last_error());
  if (!m) return;
  enum { B = 48, T = 16 };
  ct_tensor *tokens = ct_tensor_zeros(CT_I32, CT_SHAPE(B, T));
  int64_t eot[B];
  for (int b = 0; b < B; b++) {
    eot[b] = T - 1 - b % 6;
    for (int t = 0; t <= eot[b]; t++)
      ct_i32(tokens)[b * T + t] =
          t == eot[b] ? 10 : 1 + (int32_t)ct_rng_next_below(&data, 9);
  }
  ct_tensor *images =
      ct_tensor_randn(&data, 0.0f, 1.0f, CT_SHAPE(B, 3, 16, 16));
  ct_nn_ctx ctx = ct_nn_train_ctx(8, 0);
  ct_tensor *img = ct_nn_clip_encode_image(m, &ctx, images);
  ct_tensor *txt = ct_nn_clip_encode_text(m, &ctx, tokens, eot);
  ct_tensor *loss =
      ct_nn_clip_loss(img, txt, img, txt, 0, ct_nn_clip_logit_scale(m));
  CHECK(loss && ct_backward(loss) == CT_OK, "step: %s", ct_last_error());
  size_t used = 1;
  if (loss) out[0] = ct_f32(loss)[0];
  for (int i = 0; loss && i < p.n; i++) {
    const ct_tensor *t = p.items[i].tensor;
    CHECK(used + (size_t)t->numel <= n, "room for %zu floats", n);
    if (used + (size_t)t->numel > n || !t->grad) break;
    memcpy(out + used, t->grad, (size_t)t->numel * sizeof(float));
    used += (size_t)t->numel;
  }
  ct_arena_reset();
  ct_nn_clip_free(m);
  ct_params_free(&p);
}

// The same bits at 1, 2 and 3 threads (DESIGN.md's determinism rule).
static void test_threads(void) {
  enum { N = 1 << 20 };
  static float a[N], b[N];
  const int was = ct_get_threads();
  step_bits(1, a, N);
  for (int t = 2; t <= 3; t++) {
    memset(b, 0, sizeof b);
    step_bits(t, b, N);
    CHECK(!memcmp(a, b, sizeof a), "loss or gradients differ at %d threads", t);
  }
  printf("  loss %.9g, the same bits at 1, 2 and 3 threads\n", (double)a[0]);
  ct_set_threads(was);
}

static void test_bad_config(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(5, 0);
  ct_nn_clip_config c = tiny(CT_NN_CLIP_VIT);
  c.text_heads = 3;
  ct_nn_clip *m = NULL;
  CHECK(ct_nn_clip_init(&m, &p, "", &c, &rng) == CT_ERR_ARG && !m &&
            strstr(ct_last_error(), "text_heads 3"),
        "text_width not a multiple of text_heads: %s", ct_last_error());
  c = tiny(CT_NN_CLIP_VIT);
  c.embed_dim = 0;
  CHECK(ct_nn_clip_init(&m, &p, "", &c, &rng) == CT_ERR_ARG && !m,
        "embed_dim 0: %s", ct_last_error());
  c = tiny(CT_NN_CLIP_VIT);
  c.vit.patch = 3;
  CHECK(ct_nn_clip_init(&m, &p, "", &c, &rng) != CT_OK && !m &&
            strstr(ct_last_error(), "patch 3"),
        "a bad ViT config: %s", ct_last_error());
  ct_params_free(&p);
}

int main(void) {
  ct_threads_from_env();
  test_names_and_init(CT_NN_CLIP_VIT);
  test_names_and_init(CT_NN_CLIP_RESNET);
  test_forward(CT_NN_CLIP_VIT);
  test_forward(CT_NN_CLIP_RESNET);
  test_scale_and_decay();
  test_threads();
  test_bad_config();
  ct_arena_release();
  return test_summary("clip");
}
