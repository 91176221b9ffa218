// Greedy and beam search over a translator, the Transformer (nn/seq2seq.h)
// or the attention GRU (nn/rnn_seq2seq.h), or the captioner
// (nn/captioner.h), with the decoder's state cached
// so each step costs one position.
//
// Beam search keeps `beam` rows per sentence. Each step extends every live
// row by every token, keeps the best `beam` extensions per sentence by
// summed log-probability, and reorders the cache to follow them. A row that
// emitted <eos> stays finished (it only carries its score). At the end the
// best row of each sentence is chosen by score / lp(len), the GNMT length
// penalty lp = ((5 + len) / 6)^alpha (Wu et al. 2016), len counting <eos>.
// beam = 1 is greedy decoding.
#ifndef CT_TRAIN_DECODE_H
#define CT_TRAIN_DECODE_H

#include "nn/captioner.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"

typedef struct ct_decode_opts {
  int beam;              // >= 1
  float length_penalty;  // alpha; 0 = plain sum of log-probabilities
  int64_t max_len;       // tokens generated at most (<eos> included)
} ct_decode_opts;

// What the search needs from a model whose decoder holds N = B * beam rows
// (sentence b's are rows b*beam ...): one step of every row, tokens (N) ->
// logits (N, vocab) in the arena, and reordering, row i continuing from
// old row parent[i].
typedef struct ct_decoder {
  int64_t vocab;
  void *state;
  ct_tensor *(*step)(void *state, const int32_t *tokens);
  void (*reorder)(void *state, const int64_t *parent);
} ct_decoder;

// The search itself (recording off, arena memory of each step given back):
// out[b*max_len ..] the ids of sentence b (without <bos>, up to and
// excluding <eos>), lens[b] their count; rows[b], when rows is not NULL,
// the decoder row the result was read from (its state at the end).
ct_status ct_decode_search(const ct_decoder *d, int64_t B,
                           const ct_decode_opts *opts, int32_t *out,
                           int64_t *lens, int64_t *rows);

// src (B,S) i32 (0 = padding) -> out and lens as ct_decode_search; out has
// B*max_len entries. Recording is off inside; arena memory is given back.
ct_status ct_decode_batch(const ct_nn_seq2seq *m, const int32_t *src, int64_t B,
                          int64_t S, const ct_decode_opts *opts, int32_t *out,
                          int64_t *lens);
// The same for the RNN translator; align (B,max_len,S), when not NULL,
// receives for each output token (row i of sentence b, <eos> included) its
// attention weights over the source positions.
ct_status ct_decode_batch_rnn(const ct_nn_rnn_seq2seq *m, const int32_t *src,
                              int64_t B, int64_t S, const ct_decode_opts *opts,
                              int32_t *out, int64_t *lens, float *align);
// The same for the captioner over annotations (B,L,D)
// (ct_nn_captioner_encode's), starting from <bos> and stopping at <eos>
// (the ids of data/vocab.h; bos and eos must be those, the search's own);
// out (B*max_len) and lens as ct_decode_search; alphas (B,max_len,L), when
// not NULL, receives for each emitted token (<eos> included; zeros past
// it) the attention weights of the step that emitted it.
ct_status ct_decode_batch_captioner(const ct_nn_captioner *m,
                                    ct_tensor *annotations,
                                    const ct_decode_opts *opts, int32_t bos,
                                    int32_t eos, int32_t *out, int64_t *lens,
                                    float *alphas);

#endif
