// Image captioning with visual attention ("Show, Attend and Tell", Xu et al.
// 2015), soft attention variant, laid out as the well-known PyTorch
// reimplementation (sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning) with
// its parameter names; tests/ref/ holds the PyTorch twin.
//
//   images (B,C,H,W) -> annotations a (B,L,D): the last feature map of the
//   classification task's ResNet (encoder.*, nn/resnet.h, its fc unused),
//   flattened row-major over its h x w positions (L = h*w, D = channels).
//
// Decoder, from the mean annotation a_mean = mean_i a_i:
//   h_0 = init_h(a_mean), c_0 = init_c(a_mean)
// step t (input token y_t: <bos> then the caption's words when
// teacher-forced):
//   alpha_t = softmax_i(v . tanh(W_a a_i + W_h h_{t-1} + b))   (additive)
//   z_t = beta_t * sum_i alpha_ti a_i,  beta_t = sigmoid(f_beta(h_{t-1}))
//   h_t, c_t = LSTMCell([emb(y_t); z_t], (h_{t-1}, c_{t-1}))
//   logits_t = L_o(dropout(emb(y_t) + L_h h_t + L_z z_t))
// the deep output layer of the paper's eq. 7 (L_h: H->E, L_z: D->E, L_o:
// E->V); the .c file lists the parameter names.
//
// The doubly stochastic regularization of the attention is
//   lambda * mean_b sum_i (1 - sum_{t real} alpha_bti)^2
// over each caption's real steps (padding excluded); see
// ct_nn_captioner_attention_reg.
//
// Token ids: 0 is padding and trails the real tokens of a row; <bos> and
// <eos> are the vocabulary's (data/vocab.h).
#ifndef CT_NN_CAPTIONER_H
#define CT_NN_CAPTIONER_H

#include "nn/additive_attention.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/resnet.h"
#include "nn/rnn.h"

typedef struct ct_nn_captioner_config {
  ct_nn_resnet_config encoder;  // num_classes is ignored (no fc is used)
  int64_t vocab;                // V, the output vocabulary with specials
  int64_t embed_dim;            // E, word embedding width
  int64_t hidden;               // H, LSTM state width
  int64_t attn_dim;             // A, additive attention width
  float dropout;                // before the output layer, in [0, 1)
} ct_nn_captioner_config;

typedef struct ct_nn_captioner ct_nn_captioner;

// Registers the parameters under `prefix` ("" for the names "encoder.*",
// "decoder.*") in p, drawn from init_rng. *out is malloc'd; free with
// ct_nn_captioner_free.
ct_status ct_nn_captioner_init(ct_nn_captioner **out, ct_params *p,
                               const char *prefix,
                               const ct_nn_captioner_config *cfg,
                               ct_rng *init_rng);
void ct_nn_captioner_free(ct_nn_captioner *m);
const ct_nn_captioner_config *ct_nn_captioner_cfg(const ct_nn_captioner *m);
// The encoder, so a classification checkpoint's ResNet can initialize it.
const ct_nn_resnet *ct_nn_captioner_encoder(const ct_nn_captioner *m);

// images (B,C,H,W) -> annotations (B,L,D); *grid_h, *grid_w (not NULL) the
// feature map's size (L = grid_h * grid_w).
ct_tensor *ct_nn_captioner_encode(const ct_nn_captioner *m, ct_nn_ctx *ctx,
                                  ct_tensor *images, int64_t *grid_h,
                                  int64_t *grid_w);

// Teacher-forced pass: annotations (B,L,D), tokens_in (B,T) i32 (<bos> w1
// .. w_{n}, padded with 0) -> logits (B,T,V); *alphas (B,T,L), the
// attention weights of every step, recorded on the tape (gradients flow
// through them) when alphas is not NULL.
ct_tensor *ct_nn_captioner_forward(const ct_nn_captioner *m, ct_nn_ctx *ctx,
                                   ct_tensor *annotations, ct_tensor *tokens_in,
                                   ct_tensor **alphas);

// lambda * (1/B) sum_b sum_i (1 - sum_t mask_bt alpha_bti)^2 as a scalar
// on the tape; mask (B,T) i32 nonzero at the real steps (the steps whose
// target is a real token, <eos> included).
ct_tensor *ct_nn_captioner_attention_reg(ct_tensor *alphas, ct_tensor *mask,
                                         float lambda);

// ---- cached decoding (recording off) -----------------------------------
// Decoding (greedy and beam search) is ct_decode_batch_captioner in
// train/decode.h, on this cache.

// Per row (N = images x beams): the decoder state and what attention reads,
// plus the attention weights of every step so far. Lives in the step arena:
// valid until the arena is rewound past its init.
typedef struct ct_nn_captioner_cache {
  int64_t N, L, max_len, len;  // rows, annotations, steps held, done
  ct_tensor *keys;             // (N,L,A) encoder_att(a), once per image
  ct_tensor *values;           // (N,L,D) the annotations
  ct_tensor *h, *c;            // (N,H) the current state
  ct_tensor *w_emb, *w_z;      // weight_ih's embedding and context columns
  float *alphas;               // (N,max_len,L)
  float *swap;                 // reorder scratch
} ct_nn_captioner_cache;

// annotations (B,L,D) (ct_nn_captioner_encode's); each image gets `repeat`
// consecutive rows.
ct_status ct_nn_captioner_cache_init(ct_nn_captioner_cache *c,
                                     const ct_nn_captioner *m,
                                     ct_tensor *annotations, int64_t repeat,
                                     int64_t max_len);
// One step: tokens (N) -> logits (N,V) in the arena; the rows' states and
// attention weights move on.
ct_tensor *ct_nn_captioner_step(const ct_nn_captioner *m,
                                ct_nn_captioner_cache *c,
                                const int32_t *tokens);
// Row i becomes old row parent[i] (beam search).
void ct_nn_captioner_cache_reorder(ct_nn_captioner_cache *c,
                                   const int64_t *parent);

#endif
