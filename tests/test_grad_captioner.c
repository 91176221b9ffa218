// Finite-difference gradient checks of the Show, Attend and Tell captioner
// (nn/captioner.h): the teacher-forced decoder from annotations, through the
// annotations and every decoder parameter, its logits, the attention
// weights (their own gradient path) and the doubly stochastic
// regularization all in the checked output, with dropout in training mode
// (keyed masks) and a padded caption; the regularization alone on random
// weights with a mask; and the whole model from images (the ResNet encoder,
// batch norm on running statistics) through every parameter; bad shapes
// refused with messages. Tiny sizes: B=2, T=4, V=7, E=4, H=3, A=4.
#include <string.h>

#include "autograd/ops.h"
#include "grad_util.h"
#include "nn/captioner.h"

enum { B = 2, T = 4, V = 7, MAX_INPUTS = 128 };

// Row 0 a full caption, row 1 two real steps then padding.
static const int32_t TOKENS[B * T] = {2, 5, 6, 4, 2, 4, 0, 0};
static const int32_t MASK[B * T] = {1, 1, 1, 1, 1, 1, 0, 0};

typedef struct inputs {
  ct_tensor *t[MAX_INPUTS];
  int n;
} inputs;

// data followed by the parameters whose names start with `prefix`.
static inputs with_params(const ct_params *p, const char *prefix, int n_data,
                          ct_tensor *const *data) {
  inputs in = {.n = 0};
  for (int i = 0; i < n_data; i++) in.t[in.n++] = data[i];
  for (int i = 0; i < p->n && in.n < MAX_INPUTS; i++)
    if (strncmp(p->items[i].name, prefix, strlen(prefix)) == 0)
      in.t[in.n++] = p->items[i].tensor;
  CHECK(in.n < MAX_INPUTS, "too many parameters for one check");
  return in;
}

// Makes biases non-trivial.
static void perturb(ct_params *p) {
  ct_rng r = ct_rng_make(99, 1);
  for (size_t i = 0; i < p->count; i++)
    p->data[i] += 0.1f * (float)(ct_rng_next_double(&r) - 0.5);
}

static ct_nn_captioner *make_model(ct_params *p, int64_t width, int stages) {
  ct_rng rng = ct_rng_make(5, 0);
  const ct_nn_captioner_config cfg = {.encoder = {.in_channels = 3,
                                                  .width = width,
                                                  .stages = stages,
                                                  .blocks = 1},
                                      .vocab = V,
                                      .embed_dim = 4,
                                      .hidden = 3,
                                      .attn_dim = 4,
                                      .dropout = 0.3f};
  ct_nn_captioner *m = NULL;
  CHECK(ct_nn_captioner_init(&m, p, "", &cfg, &rng) == CT_OK, "init: %s",
        ct_last_error());
  if (m) perturb(p);
  return m;
}

// logits, alphas and the regularization as one vector.
static ct_tensor *decoder_outputs(const ct_nn_captioner *m,
                                  ct_tensor *annotations) {
  ct_nn_ctx ctx = ct_nn_train_ctx(17, 3);
  ct_tensor *tokens = ct_tensor_from(CT_I32, TOKENS, CT_SHAPE(B, T));
  ct_tensor *mask = ct_tensor_from(CT_I32, MASK, CT_SHAPE(B, T));
  ct_tensor *alphas = NULL;
  ct_tensor *logits =
      ct_nn_captioner_forward(m, &ctx, annotations, tokens, &alphas);
  ct_tensor *reg = ct_nn_captioner_attention_reg(alphas, mask, 0.7f);
  if (!logits || !reg) return NULL;
  ct_tensor *parts[3] = {ct_reshape(logits, CT_SHAPE(-1)),
                         ct_reshape(alphas, CT_SHAPE(-1)),
                         ct_reshape(ct_scale(reg, 3.0f), CT_SHAPE(1))};
  return ct_concat(parts, 3, 0);
}

static ct_tensor *run_decoder(ct_tensor *const *in, void *ctx) {
  return decoder_outputs(ctx, in[0]);
}

static void check_decoder(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_captioner *m = make_model(&p, 3, 1);  // D = 3
  if (m) {
    ct_tensor *a = grad_input(CT_SHAPE(B, 3, 3));  // L = 3
    inputs in = with_params(&p, "decoder.", 1, &a);
    CHECK(in.n == 1 + 20, "expected 20 decoder parameters, got %d", in.n - 1);
    grad_check("captioner decoder, dropout, padding", run_decoder, m, in.t,
               in.n, NULL);
  }
  ct_nn_captioner_free(m);
  ct_params_free(&p);
}

// The regularization alone: alphas (B,T,L) -> lambda/B sum (1 - sum_t)^2.
static ct_tensor *run_reg(ct_tensor *const *in, void *ctx) {
  (void)ctx;
  return ct_nn_captioner_attention_reg(
      in[0], ct_tensor_from(CT_I32, MASK, CT_SHAPE(B, T)), 1.5f);
}

static void check_reg(void) {
  ct_tensor *alphas = ct_requires_grad(
      ct_tensor_rand(&grad_test_rng, 0.0f, 0.5f, CT_SHAPE(B, T, 5)));
  // The value against a direct sum.
  ct_tensor *r = run_reg(&alphas, NULL);
  CHECK(r != NULL, "attention_reg: %s", ct_last_error());
  if (r) {
    double want = 0.0;
    for (int64_t b = 0; b < B; b++)
      for (int64_t i = 0; i < 5; i++) {
        double s = 0.0;
        for (int64_t t = 0; t < T; t++)
          if (MASK[b * T + t]) s += ct_f32(alphas)[(b * T + t) * 5 + i];
        want += (1.0 - s) * (1.0 - s);
      }
    want *= 1.5 / B;
    CHECK(fabs(ct_f32(r)[0] - want) <= 1e-5 * fabs(want),
          "attention_reg %.7g, want %.7g", ct_f32(r)[0], want);
  }
  grad_check("captioner attention_reg, mask", run_reg, NULL, &alphas, 1, NULL);
}

// The whole model from images: encoder + decoder. The encoder's batch norm
// runs on its running statistics: in training mode on 8 values per channel
// its outputs sit on the ReLUs' kinks more often than finite differences
// tolerate (the training-mode op has its own check in test_grad_conv).
static ct_tensor *run_model(ct_tensor *const *in, void *ctx) {
  const ct_nn_captioner *m = ctx;
  ct_nn_ctx eval = ct_nn_eval_ctx();
  int64_t gh = 0, gw = 0;
  ct_tensor *a = ct_nn_captioner_encode(m, &eval, in[0], &gh, &gw);
  return decoder_outputs(m, a);
}

static void check_model(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_captioner *m = make_model(&p, 2, 2);  // D = 4, 4x4 -> L = 4
  if (m) {
    ct_tensor *x = grad_input(CT_SHAPE(B, 3, 4, 4));
    int64_t gh = 0, gw = 0;
    ct_tensor *a = ct_nn_captioner_encode(m, NULL, x, &gh, &gw);
    CHECK(a && a->shape[1] == 4 && a->shape[2] == 4 && gh == 2 && gw == 2,
          "annotations (2,4,4) on a 2x2 grid, got %s",
          a ? "another shape" : ct_last_error());
    inputs in = with_params(&p, "", 1, &x);
    grad_check("captioner from images, every parameter", run_model, m, in.t,
               in.n, NULL);
  }
  ct_nn_captioner_free(m);
  ct_params_free(&p);
}

// Bad shapes and dtypes: NULL with a message naming what is wrong.
static void check_errors(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_captioner *m = make_model(&p, 3, 1);  // D = 3
  if (m) {
    ct_tensor *tokens = ct_tensor_from(CT_I32, TOKENS, CT_SHAPE(B, T));
    ct_tensor *a = ct_tensor_zeros(CT_F32, CT_SHAPE(B, 3, 3));
    CHECK(!ct_nn_captioner_forward(m, NULL,
                                   ct_tensor_zeros(CT_F32, CT_SHAPE(B, 3, 4)),
                                   tokens, NULL) &&
              strstr(ct_last_error(), "annotations"),
          "annotations of the wrong width accepted: %s", ct_last_error());
    CHECK(!ct_nn_captioner_forward(
              m, NULL, a, ct_tensor_zeros(CT_F32, CT_SHAPE(B, T)), NULL) &&
              strstr(ct_last_error(), "tokens_in"),
          "f32 tokens accepted: %s", ct_last_error());
    CHECK(!ct_nn_captioner_forward(
              m, NULL, a, ct_tensor_from(CT_I32, TOKENS, CT_SHAPE(1, T)), NULL),
          "tokens of another batch accepted");
    CHECK(!ct_nn_captioner_attention_reg(
              ct_tensor_zeros(CT_F32, CT_SHAPE(B, T, 3)),
              ct_tensor_from(CT_I32, MASK, CT_SHAPE(B, T - 1)), 1.0f) &&
              strstr(ct_last_error(), "mask"),
          "a mask of another length accepted: %s", ct_last_error());
    const ct_nn_captioner_config bad = {
        .encoder = {.in_channels = 3, .width = 2, .stages = 1, .blocks = 1},
        .vocab = V,
        .embed_dim = 4,
        .hidden = 0,
        .attn_dim = 4};
    ct_nn_captioner *none = NULL;
    ct_rng rng = ct_rng_make(5, 0);
    CHECK(ct_nn_captioner_init(&none, &p, "x", &bad, &rng) == CT_ERR_ARG &&
              !none && strstr(ct_last_error(), "hidden"),
          "hidden 0 accepted: %s", ct_last_error());
  }
  ct_arena_reset();
  ct_nn_captioner_free(m);
  ct_params_free(&p);
}

int main(void) {
  check_errors();
  check_reg();
  check_decoder();
  check_model();
  return test_summary("grad_captioner");
}
