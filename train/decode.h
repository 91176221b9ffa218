// Greedy and beam search over the seq2seq translator (nn/seq2seq.h), with
// the decoder's keys and values cached so each step costs one position.
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

#include "nn/seq2seq.h"

typedef struct ct_decode_opts {
  int beam;              // >= 1
  float length_penalty;  // alpha; 0 = plain sum of log-probabilities
  int64_t max_len;       // tokens generated at most (<eos> included)
} ct_decode_opts;

// src (B,S) i32 (0 = padding) -> out[b*max_len .. ] the generated ids of
// sentence b (without <bos>, up to and excluding <eos>), lens[b] their
// count. out has B*max_len entries. Recording is off inside; arena memory
// used per step is given back.
ct_status ct_decode_batch(const ct_nn_seq2seq *m, const int32_t *src, int64_t B,
                          int64_t S, const ct_decode_opts *opts, int32_t *out,
                          int64_t *lens);

#endif
