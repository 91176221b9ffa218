// The attention GRU translator ("Neural Machine Translation by Jointly
// Learning to Align and Translate", Bahdanau, Cho & Bengio 2015) as the
// well-known PyTorch tutorial builds it (bentrevett/pytorch-seq2seq,
// notebooks 3-4), with its parameter names; bench/ref/rnn_model.py is the
// PyTorch twin.
//
//   src (B,S) i32, tgt_in (B,T) i32 -> logits (B,T,V)
//
// Encoder: e = dropout(embedding(src)); a bidirectional GRU over the
// sequences' own lengths (packed semantics: padding never changes a
// result); the decoder's initial state s_0 = tanh(fc([h_fwd; h_bwd])) from
// the two final states. Decoder step t, from the state s_{t-1} and the
// input token y_t (tgt_in[:, t] when teacher-forced):
//   a_t = softmax_j(v . tanh(W_q s_{t-1} + W_k h_j + b)), padding masked
//   c_t = sum_j a_tj h_j                       (h_j = [h_fwd_j; h_bwd_j])
//   s_t = GRU([dropout(emb(y_t)); c_t], s_{t-1})
//   logits_t = fc_out([s_t; c_t; dropout(emb(y_t))])
// fc_out runs once over all steps after the loop.
//
// Parameter names (E emb_dim, He enc_hidden, Hd dec_hidden, which is also
// the attention width):
//   encoder.embedding.weight (Vs,E), encoder.rnn.{weight,bias}_{ih,hh}_l0
//   and ..._l0_reverse (GRU E -> He), encoder.fc.{weight,bias} (Hd, 2He),
//   decoder.attention.attn.{weight,bias} (Hd, Hd+2He),
//   decoder.attention.v.weight (1,Hd), decoder.embedding.weight (Vt,E),
//   decoder.rnn.{weight,bias}_{ih,hh}_l0 (GRU E+2He -> Hd),
//   decoder.fc_out.{weight,bias} (Vt, Hd+2He+E).
// Init is PyTorch's per module: embeddings N(0,1) with the padding row (id
// 0) zero, GRUs U(+-1/sqrt(H)), Linear layers nn.Linear's rule.
//
// Token id 0 is padding and trails the real tokens of a row; a source's
// length is its count of non-padding ids.
//
// Also here: the cached decoder for beam search (train/decode.c), which
// keeps each row's state and the attention weights of every step (the
// alignment matrix of `ctrain translate --attention`).
#ifndef CT_NN_RNN_SEQ2SEQ_H
#define CT_NN_RNN_SEQ2SEQ_H

#include "nn/additive_attention.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"

typedef struct ct_nn_rnn_seq2seq_config {
  int64_t src_vocab, tgt_vocab;
  int64_t emb_dim;     // E, both embeddings
  int64_t enc_hidden;  // He, per direction
  int64_t dec_hidden;  // Hd, also the attention width
  float dropout;       // on the embeddings, as the tutorial
} ct_nn_rnn_seq2seq_config;

typedef struct ct_nn_rnn_seq2seq {
  ct_nn_rnn_seq2seq_config cfg;
  ct_nn_embedding enc_embedding;       // encoder.embedding
  ct_nn_gru enc_rnn;                   // encoder.rnn
  ct_nn_linear enc_fc;                 // encoder.fc
  ct_nn_additive_attention attention;  // decoder.attention
  ct_nn_embedding dec_embedding;       // decoder.embedding
  ct_nn_gru dec_rnn;                   // decoder.rnn
  ct_nn_linear fc_out;                 // decoder.fc_out
} ct_nn_rnn_seq2seq;

// The rng purpose of the teacher-forcing coins: the coin of step t of the
// pass at optimizer step s is uniform word t of stream (purpose, s) under
// the ctx's seed, so the decisions are a pure function of (seed, step).
enum { CT_NN_RNG_TEACHER_FORCING = 0x7EAC11u };

ct_status ct_nn_rnn_seq2seq_init(ct_nn_rnn_seq2seq *m, ct_params *p,
                                 const ct_nn_rnn_seq2seq_config *cfg,
                                 ct_rng *init_rng);
void ct_nn_rnn_seq2seq_free(ct_nn_rnn_seq2seq *m);

// src (B,S), tgt_in (B,T) -> logits (B,T,V). teacher_forcing in [0, 1]:
// in a training pass (ctx training) step t >= 1 is fed tgt_in[:, t] when
// its coin is below teacher_forcing, else the argmax of step t-1's logits
// (one decision per step for the whole batch, as the tutorial); outside
// training every step is teacher-forced. *align (B,T,S), when align is not
// NULL, receives the attention weights of every step.
ct_tensor *ct_nn_rnn_seq2seq_forward(const ct_nn_rnn_seq2seq *m, ct_nn_ctx *ctx,
                                     ct_tensor *src, ct_tensor *tgt_in,
                                     float teacher_forcing, ct_tensor **align);

// ---- cached decoding (recording off) -----------------------------------

// Per row (N = sentences x beams): the decoder state and what attention
// reads, plus the attention weights of every step so far. Lives in the
// step arena: valid until the arena is rewound past its init.
typedef struct ct_nn_rnn_seq2seq_cache {
  int64_t N, S, max_len, len;  // rows, source length, steps held, done
  ct_nn_additive_memory mem;   // keys, values, mask of the N rows
  ct_tensor *h;                // (N,Hd) the current states
  float *align;                // (N,max_len,S)
  float *swap;                 // reorder scratch
} ct_nn_rnn_seq2seq_cache;

// Encodes src (B,S) and gives each sentence `repeat` consecutive rows.
ct_status ct_nn_rnn_seq2seq_cache_init(ct_nn_rnn_seq2seq_cache *c,
                                       const ct_nn_rnn_seq2seq *m,
                                       const int32_t *src, int64_t B, int64_t S,
                                       int64_t repeat, int64_t max_len);
// One step: tokens (N) -> logits (N,V) in the arena; the rows' states and
// attention weights move on.
ct_tensor *ct_nn_rnn_seq2seq_step(const ct_nn_rnn_seq2seq *m,
                                  ct_nn_rnn_seq2seq_cache *c,
                                  const int32_t *tokens);
// Row i becomes old row parent[i] (beam search).
void ct_nn_rnn_seq2seq_cache_reorder(ct_nn_rnn_seq2seq_cache *c,
                                     const int64_t *parent);

#endif
