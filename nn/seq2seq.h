// The encoder-decoder Transformer translator ("Attention is all you need",
// Vaswani et al. 2017): token embeddings scaled by sqrt(d_model) plus
// sinusoidal positions, an nn.Transformer core (both stacks with final
// norms) and a generator projecting to the target vocabulary, optionally
// tied to the target embedding (Press & Wolf 2017).
//
//   src (B,S) i32, tgt_in (B,T) i32 -> logits (B,T,V)
//
// Parameter names: src_emb.weight, tgt_emb.weight, transformer.encoder.*,
// transformer.decoder.*, generator.weight (absent when tied),
// generator.bias. Token id 0 is padding (data/vocab.h's <pad>).
//
// Also here: incremental decoding with cached keys and values, so each new
// token costs one decoder step rather than a re-run over the prefix. The
// search itself (greedy, beam) lives in train/decode.c.
#ifndef CT_NN_SEQ2SEQ_H
#define CT_NN_SEQ2SEQ_H

#include "nn/embedding.h"
#include "nn/transformer.h"

typedef struct ct_nn_seq2seq_config {
  int64_t src_vocab, tgt_vocab;
  int64_t d_model, nhead, dim_feedforward;
  int encoder_layers, decoder_layers;
  float dropout;
  ct_nn_activation activation;
  bool norm_first;
  bool tie_output;  // generator.weight = tgt_emb.weight
} ct_nn_seq2seq_config;

typedef struct ct_nn_seq2seq {
  ct_nn_seq2seq_config cfg;
  ct_nn_embedding src_emb, tgt_emb;
  ct_nn_transformer transformer;
  ct_tensor *generator_weight;  // (V, E): tgt_emb.weight when tied
  ct_tensor *generator_bias;    // (V)
} ct_nn_seq2seq;

// Embeddings are drawn N(0, d_model^-0.5) (so the sqrt(d_model) scale gives
// unit variance) with the padding row zero; matrices of the core are xavier
// as nn.Transformer's; the generator is xavier, its bias zero.
ct_status ct_nn_seq2seq_init(ct_nn_seq2seq *m, ct_params *p,
                             const ct_nn_seq2seq_config *cfg, ct_rng *init_rng);
void ct_nn_seq2seq_free(ct_nn_seq2seq *m);

// src (B,S), tgt_in (B,T) -> logits (B,T,V). Source padding is masked in
// the encoder and the cross-attention; the decoder is causal.
ct_tensor *ct_nn_seq2seq_forward(const ct_nn_seq2seq *m, ct_nn_ctx *ctx,
                                 ct_tensor *src, ct_tensor *tgt_in);

// src (B,S) -> memory (B,S,E); *src_pad (B,S) i32, 1 at padding.
ct_tensor *ct_nn_seq2seq_encode(const ct_nn_seq2seq *m, ct_nn_ctx *ctx,
                                ct_tensor *src, ct_tensor **src_pad);

// ---- incremental decoding (recording off) ---------------------------------

typedef struct ct_nn_seq2seq_cache {
  int64_t N;        // decoder rows (sentences x beams)
  int64_t S;        // source length
  int64_t E;        // d_model
  int64_t max_len;  // target positions the cache holds
  int64_t len;      // positions filled so far
  int layers;
  float *self_k, *self_v;  // [layer][N][max_len][E]
  float *mem_k, *mem_v;    // [layer][N][S][E]
  uint8_t *src_pad;        // (N,S) 1 = padding
  float *positions;        // (max_len, E) sinusoidal table
  float *swap;             // reorder scratch, N*max_len*E floats
} ct_nn_seq2seq_cache;

// memory (B,S,E) from ct_nn_seq2seq_encode and its src_pad; each sentence gets
// `repeat` consecutive rows (beams), so N = B * repeat. The cache is
// malloc'd (it outlives arena resets).
ct_status ct_nn_seq2seq_cache_init(ct_nn_seq2seq_cache *c,
                                   const ct_nn_seq2seq *m, ct_tensor *memory,
                                   ct_tensor *src_pad, int64_t repeat,
                                   int64_t max_len);
void ct_nn_seq2seq_cache_free(ct_nn_seq2seq_cache *c);

// One decoder step: tokens (N) at position c->len -> logits (N,V) in the
// arena; appends this position's keys and values to the cache.
ct_tensor *ct_nn_seq2seq_step(const ct_nn_seq2seq *m, ct_nn_seq2seq_cache *c,
                              const int32_t *tokens);

// Row i of the cache becomes old row parent[i] (beam search reordering).
void ct_nn_seq2seq_cache_reorder(ct_nn_seq2seq_cache *c, const int64_t *parent);

#endif
