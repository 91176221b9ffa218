// Finite-difference gradient checks of the recurrent ops
// (autograd/ops_rnn.h): the GRU and LSTM cells, and scans forward and
// reversed with uneven lengths (a row of length 0 and one of full length
// among them), with and without h0, c0 and b_hh, the final states included
// in the checked output; and nn.GRU / nn.LSTM layers (2 layers,
// bidirectional) with uneven lengths, through their inputs and initial
// states. Also: padding positions of gx change nothing and
// get zero gradient. And the additive attention of the RNN translator
// (autograd/ops_additive_attention.h), with a key padding mask: padded keys
// get weight 0, and a fully padded row a zero context; with the weights as
// an output of their own, their gradient included.
#include "autograd/ops.h"
#include "autograd/ops_additive_attention.h"
#include "autograd/ops_rnn.h"
#include "nn/rnn.h"
#include "tests/grad_util.h"

#include <string.h>

typedef struct scan_case {
  bool lstm, reverse, lengths, h0, bias;
  int64_t B, T, H;
} scan_case;

static const int32_t LENGTHS[] = {3, 0, 4, 1, 2};

// Inputs: gx, w_hh, [b_hh], [h0], [c0]. Output: y (B, T*H) beside h_n (and
// c_n), so every result is checked.
static ct_tensor *run_scan(ct_tensor *const *in, void *ctx) {
  const scan_case *c = ctx;
  int i = 2;
  ct_rnn_scan_args a = {.gx = in[0], .w_hh = in[1], .reverse = c->reverse};
  if (c->bias) a.b_hh = in[i++];
  if (c->h0) {
    a.h0 = in[i++];
    if (c->lstm) a.c0 = in[i++];
  }
  if (c->lengths) a.lengths = ct_tensor_from(CT_I32, LENGTHS, CT_SHAPE(c->B));
  ct_tensor *h_n = NULL, *c_n = NULL;
  ct_tensor *y = c->lstm ? ct_lstm_scan(&a, &h_n, &c_n) : ct_gru_scan(&a, &h_n);
  ct_tensor *parts[3] = {ct_reshape(y, CT_SHAPE(c->B, c->T * c->H)), h_n, c_n};
  return ct_concat(parts, c->lstm ? 3 : 2, 1);
}

static void check_scan(const char *what, scan_case c) {
  const int64_t G = c.lstm ? 4 : 3, B = c.B, T = c.T, H = c.H;
  ct_tensor *in[5];
  int n = 0;
  in[n++] = grad_input(CT_SHAPE(B, T, G * H));
  in[n++] = ct_requires_grad(
      ct_tensor_rand(&grad_test_rng, -0.6f, 0.6f, CT_SHAPE(G * H, H)));
  if (c.bias) in[n++] = grad_input(CT_SHAPE(G * H));
  if (c.h0) {
    in[n++] = grad_input(CT_SHAPE(B, H));
    if (c.lstm) in[n++] = grad_input(CT_SHAPE(B, H));
  }
  grad_check(what, run_scan, &c, in, n, NULL);
}

typedef struct cell_case {
  bool lstm;
} cell_case;

// Inputs: gx, h, [c], w_hh, b_hh. Output: h' (beside c' for the LSTM).
static ct_tensor *run_cell(ct_tensor *const *in, void *ctx) {
  const cell_case *c = ctx;
  if (!c->lstm) return ct_gru_cell(in[0], in[1], in[2], in[3]);
  ct_tensor *c_out = NULL;
  ct_tensor *h = ct_lstm_cell(in[0], in[1], in[2], in[3], in[4], &c_out);
  return ct_concat((ct_tensor *[]){h, c_out}, 2, 1);
}

static void check_cell(const char *what, bool lstm) {
  const int64_t B = 3, H = 6, G = lstm ? 4 : 3;
  cell_case c = {.lstm = lstm};
  ct_tensor *gx = grad_input(CT_SHAPE(B, G * H));
  ct_tensor *h = grad_input(CT_SHAPE(B, H));
  ct_tensor *w = ct_requires_grad(
      ct_tensor_rand(&grad_test_rng, -0.5f, 0.5f, CT_SHAPE(G * H, H)));
  ct_tensor *b = grad_input(CT_SHAPE(G * H));
  if (lstm) {
    ct_tensor *cc = grad_input(CT_SHAPE(B, H));
    grad_check(what, run_cell, &c, (ct_tensor *[]){gx, h, cc, w, b}, 5, NULL);
  } else {
    grad_check(what, run_cell, &c, (ct_tensor *[]){gx, h, w, b}, 4, NULL);
  }
}

// The padded positions of gx (t >= lengths[b]) may hold anything: the
// outputs are the same bits, and their gradient is exactly 0.
static void check_padding(bool lstm, bool reverse) {
  const int64_t B = 5, T = 4, H = 8, G = lstm ? 4 : 3;
  ct_tensor *gx = grad_input(CT_SHAPE(B, T, G * H));
  ct_tensor *w = ct_requires_grad(
      ct_tensor_rand(&grad_test_rng, -0.4f, 0.4f, CT_SHAPE(G * H, H)));
  ct_tensor *lengths = ct_tensor_from(CT_I32, LENGTHS, CT_SHAPE(B));
  ct_rnn_scan_args a = {
      .gx = gx, .w_hh = w, .lengths = lengths, .reverse = reverse};
  ct_tensor *h1 = NULL, *h2 = NULL, *c1 = NULL, *c2 = NULL;
  ct_tensor *y1 = lstm ? ct_lstm_scan(&a, &h1, &c1) : ct_gru_scan(&a, &h1);
  ct_tensor *noisy = ct_tensor_copy(gx);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = LENGTHS[b]; t < T; t++)
      for (int64_t j = 0; j < G * H; j++)
        ct_f32(noisy)[(b * T + t) * G * H + j] = 1e3f * (float)(j % 7 - 3);
  ct_requires_grad(noisy);
  a.gx = noisy;
  ct_tensor *y2 = lstm ? ct_lstm_scan(&a, &h2, &c2) : ct_gru_scan(&a, &h2);
  CHECK(y1 && y2 && !memcmp(ct_f32(y1), ct_f32(y2), y1->numel * 4) &&
            !memcmp(ct_f32(h1), ct_f32(h2), h1->numel * 4) &&
            (!lstm || !memcmp(ct_f32(c1), ct_f32(c2), c1->numel * 4)),
        "%s%s: padding changed a result", lstm ? "lstm" : "gru",
        reverse ? " reversed" : "");
  bool zero_y = true;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = LENGTHS[b]; t < T; t++)
      for (int64_t j = 0; j < H; j++)
        zero_y = zero_y && ct_f32(y2)[(b * T + t) * H + j] == 0.0f;
  CHECK(zero_y, "y is not 0 at padded positions");
  ct_tensor *loss = ct_add(ct_sum(ct_mul(y2, y2)), ct_sum(h2));
  CHECK(ct_backward(loss) == CT_OK, "backward: %s", ct_last_error());
  bool zero_g = true;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = LENGTHS[b]; t < T; t++)
      for (int64_t j = 0; j < G * H; j++)
        zero_g = zero_g && noisy->grad[(b * T + t) * G * H + j] == 0.0f;
  CHECK(zero_g, "padded positions of gx got a gradient");
  ct_arena_reset();
}

// nn/rnn.h layers: 2 bidirectional layers, lengths {3, 1, 4} of T = 4.
typedef struct layer_case {
  const ct_nn_rnn *m;
  bool lstm;
} layer_case;

static const int32_t LAYER_LENGTHS[] = {3, 1, 4};

// Inputs: x (B,T,I), h0 (L*D,B,H) [, c0]. Output: out beside h_n [, c_n].
static ct_tensor *run_layer(ct_tensor *const *in, void *ctx) {
  const layer_case *c = ctx;
  ct_tensor *lengths = ct_tensor_from(CT_I32, LAYER_LENGTHS, CT_SHAPE(3));
  ct_nn_ctx eval = ct_nn_eval_ctx();
  ct_tensor *h_n = NULL, *c_n = NULL;
  ct_tensor *out =
      c->lstm ? ct_nn_lstm_forward(c->m, &eval, in[0], lengths, in[1], in[2],
                                   &h_n, &c_n)
              : ct_nn_gru_forward(c->m, &eval, in[0], lengths, in[1], &h_n);
  if (!out) return NULL;
  ct_tensor *parts[3] = {ct_reshape(out, CT_SHAPE(-1)),
                         ct_reshape(h_n, CT_SHAPE(-1)),
                         c_n ? ct_reshape(c_n, CT_SHAPE(-1)) : NULL};
  return ct_concat(parts, c->lstm ? 3 : 2, 0);
}

static void check_layer(bool lstm) {
  const int64_t B = 3, T = 4, I = 3, H = 4, LD = 4;
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(8, 0);
  ct_nn_rnn_config cfg = ct_nn_rnn_defaults(I, H);
  cfg.num_layers = 2;
  cfg.bidirectional = true;
  cfg.batch_first = true;
  ct_nn_rnn m;
  ct_status st = lstm ? ct_nn_lstm_init(&m, &p, "rnn", &cfg, &rng)
                      : ct_nn_gru_init(&m, &p, "rnn", &cfg, &rng);
  CHECK(st == CT_OK, "init: %s", ct_last_error());
  layer_case c = {.m = &m, .lstm = lstm};
  ct_tensor *in[3] = {grad_input(CT_SHAPE(B, T, I)),
                      grad_input(CT_SHAPE(LD, B, H)),
                      grad_input(CT_SHAPE(LD, B, H))};
  grad_check(lstm ? "nn lstm, 2 bidirectional layers, lengths"
                  : "nn gru, 2 bidirectional layers, lengths",
             run_layer, &c, in, lstm ? 3 : 2, NULL);
  ct_nn_rnn_free(&m);
  ct_params_free(&p);
}

// (B=3, S=4): row 0 sees every key, row 1 its first two, row 2 none.
static const int32_t KEY_PAD[] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};

// Inputs: q, keys, v, values. Output: the context.
static ct_tensor *run_additive(ct_tensor *const *in, void *ctx) {
  (void)ctx;
  ct_tensor *mask = ct_tensor_from(CT_I32, KEY_PAD, CT_SHAPE(3, 4));
  return ct_additive_attention(in[0], in[1], in[2], in[3], mask, NULL);
}

// The same with the weights as a second output: their gradient flows back
// through the softmax (Show, Attend and Tell's regularization needs it).
static ct_tensor *run_additive_weights(ct_tensor *const *in, void *ctx) {
  (void)ctx;
  ct_tensor *mask = ct_tensor_from(CT_I32, KEY_PAD, CT_SHAPE(3, 4));
  ct_tensor *w = NULL;
  ct_tensor *c = ct_additive_attention(in[0], in[1], in[2], in[3], mask, &w);
  ct_tensor *parts[2] = {ct_reshape(c, CT_SHAPE(-1)),
                         ct_reshape(w, CT_SHAPE(-1))};
  return c ? ct_concat(parts, 2, 0) : NULL;
}

static void check_additive(void) {
  const int64_t B = 3, S = 4, A = 5, D = 6;
  ct_tensor *in[4] = {grad_input(CT_SHAPE(B, A)), grad_input(CT_SHAPE(B, S, A)),
                      grad_input(CT_SHAPE(A)), grad_input(CT_SHAPE(B, S, D))};
  // The weights: a softmax over the real keys, exactly 0 on padding.
  ct_tensor *w = NULL;
  ct_tensor *mask = ct_tensor_from(CT_I32, KEY_PAD, CT_SHAPE(3, 4));
  ct_tensor *c = ct_additive_attention(in[0], in[1], in[2], in[3], mask, &w);
  CHECK(c && w, "additive_attention: %s", ct_last_error());
  if (c && w) {
    const float *wf = ct_f32(w);
    CHECK(fabsf(wf[0] + wf[1] + wf[2] + wf[3] - 1.0f) < 1e-6f &&
              fabsf(wf[4] + wf[5] - 1.0f) < 1e-6f,
          "weights do not sum to 1");
    CHECK(wf[6] == 0.0f && wf[7] == 0.0f && wf[8] == 0.0f && wf[11] == 0.0f,
          "padded keys got weight");
    bool zero = true;
    for (int64_t d = 0; d < D; d++) zero = zero && ct_f32(c)[2 * D + d] == 0;
    CHECK(zero, "a fully padded row has a nonzero context");
  }
  grad_check("additive_attention, key padding", run_additive, NULL, in, 4,
             NULL);
  ct_tensor *again[4] = {grad_input(CT_SHAPE(B, A)),
                         grad_input(CT_SHAPE(B, S, A)), grad_input(CT_SHAPE(A)),
                         grad_input(CT_SHAPE(B, S, D))};
  grad_check("additive_attention, weights' gradient", run_additive_weights,
             NULL, again, 4, NULL);
}

int main(void) {
  check_additive();
  check_cell("gru_cell", false);
  check_cell("lstm_cell", true);
  for (int lstm = 0; lstm < 2; lstm++)
    for (int reverse = 0; reverse < 2; reverse++) {
      char what[64];
      const char *name = lstm ? "lstm_scan" : "gru_scan";
      const char *dir = reverse ? " reversed" : "";
      snprintf(what, sizeof what, "%s%s, lengths, h0, bias", name, dir);
      check_scan(what, (scan_case){.lstm = lstm,
                                   .reverse = reverse,
                                   .lengths = true,
                                   .h0 = true,
                                   .bias = true,
                                   .B = 5,
                                   .T = 4,
                                   .H = 3});
      snprintf(what, sizeof what, "%s%s, no h0, no bias", name, dir);
      check_scan(what,
                 (scan_case){
                     .lstm = lstm, .reverse = reverse, .B = 2, .T = 3, .H = 4});
      check_padding(lstm, reverse);
    }
  check_layer(false);
  check_layer(true);
  return test_summary("grad_rnn");
}
