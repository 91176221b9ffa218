// The model of the translation task, chosen by [model] arch: the
// Transformer (nn/seq2seq.h, the default) or the attention GRU
// (nn/rnn_seq2seq.h). One interface for the task (train/translation.c):
// its keys, init, teacher-forced logits, and beam search.
//
// Keys: arch = transformer reads d_model, heads, ff, encoder_layers,
// decoder_layers, activation, norm_first, tie_output; arch = rnn reads
// emb_dim, enc_hidden, dec_hidden and [train] teacher_forcing; both read
// dropout. A key of the other arch set to anything but its default is
// refused with a message naming it, so a config never silently carries
// settings that do nothing.
#ifndef CT_TRAIN_TRANSLATION_MODEL_H
#define CT_TRAIN_TRANSLATION_MODEL_H

#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"
#include "train/decode.h"
#include "train/schema.h"

typedef struct ct_translation_model_config {
  ct_model_arch arch;                // CT_ARCH_TRANSFORMER or CT_ARCH_RNN
  ct_nn_seq2seq_config transformer;  // vocabularies set at init
  ct_nn_rnn_seq2seq_config rnn;      // vocabularies set at init
  float teacher_forcing;             // rnn, in [0, 1]
} ct_translation_model_config;

typedef struct ct_translation_model {
  ct_translation_model_config cfg;
  ct_nn_seq2seq transformer;
  ct_nn_rnn_seq2seq rnn;
  bool ready;
} ct_translation_model;

// Reads and checks the model keys of cfg (messages name the key).
ct_status ct_translation_model_read(const ct_config *cfg,
                                    ct_translation_model_config *out);

// Registers the parameters for these vocabulary sizes, drawn from init.
ct_status ct_translation_model_init(ct_translation_model *m, ct_params *p,
                                    const ct_translation_model_config *cfg,
                                    int64_t src_vocab, int64_t tgt_vocab,
                                    ct_rng *init);
void ct_translation_model_free(ct_translation_model *m);

// The width the inverse_sqrt schedule scales by: d_model, or the RNN's
// dec_hidden.
int64_t ct_translation_model_width(const ct_translation_model *m);
int64_t ct_translation_model_tgt_vocab(const ct_translation_model *m);

// src (B,S), tgt_in (B,T) -> logits (B,T,V); teacher-forced except in an
// RNN training pass (ctx training) with teacher_forcing < 1.
ct_tensor *ct_translation_model_logits(const ct_translation_model *m,
                                       ct_nn_ctx *ctx, ct_tensor *src,
                                       ct_tensor *tgt_in);

// Beam search (train/decode.h); align as ct_decode_batch_rnn's, and only
// for the RNN (NULL for the Transformer).
ct_status ct_translation_model_decode(const ct_translation_model *m,
                                      const int32_t *src, int64_t B, int64_t S,
                                      const ct_decode_opts *opts, int32_t *out,
                                      int64_t *lens, float *align);

#endif
