// The attention GRU translator and its cached decoder (see rnn_seq2seq.h).
#include "nn/rnn_seq2seq.h"

#include <string.h>

#include "autograd/ops.h"
#include "autograd/ops_rnn.h"
#include "autograd/tape.h"
#include "core/arena.h"

ct_status ct_nn_rnn_seq2seq_init(ct_nn_rnn_seq2seq *m, ct_params *p,
                                 const ct_nn_rnn_seq2seq_config *cfg,
                                 ct_rng *init_rng) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  const int64_t E = cfg->emb_dim, He = cfg->enc_hidden, Hd = cfg->dec_hidden;
  if (cfg->src_vocab < 1 || cfg->tgt_vocab < 1 || E < 1 || He < 1 || Hd < 1)
    return ct_error(CT_ERR_ARG,
                    "rnn_seq2seq: vocabularies (%lld, %lld), emb_dim %lld, "
                    "enc_hidden %lld and dec_hidden %lld must be positive",
                    (long long)cfg->src_vocab, (long long)cfg->tgt_vocab,
                    (long long)E, (long long)He, (long long)Hd);
  ct_nn_rnn_config enc = ct_nn_rnn_defaults(E, He);
  enc.batch_first = true;
  enc.bidirectional = true;
  ct_nn_rnn_config dec = ct_nn_rnn_defaults(E + 2 * He, Hd);
  dec.batch_first = true;
  ct_status st = ct_nn_embedding_init(&m->enc_embedding, p, "encoder.embedding",
                                      cfg->src_vocab, E, 0, init_rng);
  if (st == CT_OK)
    st = ct_nn_gru_init(&m->enc_rnn, p, "encoder.rnn", &enc, init_rng);
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->enc_fc, p, "encoder.fc", 2 * He, Hd, true,
                           init_rng);
  if (st == CT_OK)
    st = ct_nn_additive_attention_init(&m->attention, p, "decoder.attention",
                                       Hd, 2 * He, Hd, init_rng);
  if (st == CT_OK)
    st = ct_nn_embedding_init(&m->dec_embedding, p, "decoder.embedding",
                              cfg->tgt_vocab, E, 0, init_rng);
  if (st == CT_OK)
    st = ct_nn_gru_init(&m->dec_rnn, p, "decoder.rnn", &dec, init_rng);
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->fc_out, p, "decoder.fc_out", Hd + 2 * He + E,
                           cfg->tgt_vocab, true, init_rng);
  return st;
}

void ct_nn_rnn_seq2seq_free(ct_nn_rnn_seq2seq *m) {
  ct_nn_rnn_free(&m->enc_rnn);
  ct_nn_rnn_free(&m->dec_rnn);
}

static bool check_ids(const char *what, const ct_tensor *ids) {
  if (ids->dtype == CT_I32 && ids->ndim == 2 && ids->shape[0] >= 1 &&
      ids->shape[1] >= 1)
    return true;
  char s[64];
  ct_error(CT_ERR_SHAPE,
           "rnn_seq2seq: %s must be i32 (B,T) with B, T >= 1, got %s %s", what,
           ct_dtype_name(ids->dtype),
           ct_shape_str(ids->ndim, ids->shape, s, sizeof s));
  return false;
}

// src (B,S) -> the encoder outputs (B,S,2He); *s0 (B,Hd) the decoder's
// first state; *mask (B,S) i32, 1 at padding.
static ct_tensor *encode(const ct_nn_rnn_seq2seq *m, ct_nn_ctx *ctx,
                         ct_tensor *src, ct_tensor **s0, ct_tensor **mask) {
  *s0 = *mask = NULL;
  if (!src || !check_ids("src", src)) return NULL;
  const int64_t B = src->shape[0], S = src->shape[1];
  ct_tensor *lengths = ct_tensor_empty(CT_I32, CT_SHAPE(B));
  *mask = ct_tensor_empty(CT_I32, CT_SHAPE(B, S));
  if (!lengths || !*mask) return NULL;
  for (int64_t b = 0; b < B; b++) {
    int32_t n = 0;
    for (int64_t j = 0; j < S; j++) {
      const bool pad = ct_i32(src)[b * S + j] == 0;
      ct_i32(*mask)[b * S + j] = pad;
      n += !pad;
    }
    ct_i32(lengths)[b] = n;
  }
  ct_tensor *e = ct_nn_dropout(
      ctx, ct_nn_embedding_forward(&m->enc_embedding, src), m->cfg.dropout);
  ct_tensor *h_n = NULL;
  ct_tensor *out = ct_nn_gru_forward(&m->enc_rnn, ctx, e, lengths, NULL, &h_n);
  // h_n (2,B,He) -> [h_fwd; h_bwd] per row (B,2He)
  ct_tensor *both =
      ct_reshape(ct_transpose(h_n, 0, 1), CT_SHAPE(B, 2 * m->cfg.enc_hidden));
  *s0 = ct_tanh(ct_nn_linear_forward(&m->enc_fc, both));
  return *s0 ? out : NULL;
}

// One decoder step: e (B,E) the input embedding, s (B,Hd) the previous
// state -> the new state; *feat (B, Hd+2He+E) what fc_out reads; *weights
// (B,S) the attention weights when weights is not NULL.
static ct_tensor *decoder_step(const ct_nn_rnn_seq2seq *m,
                               const ct_nn_additive_memory *mem, ct_tensor *e,
                               ct_tensor *s, ct_tensor **feat,
                               ct_tensor **weights) {
  ct_tensor *c = ct_nn_additive_attention_forward(mem, s, weights);
  const ct_nn_rnn_cell *cell = &m->dec_rnn.cells[0];
  ct_tensor *x = ct_concat((ct_tensor *[]){e, c}, 2, 1);
  ct_tensor *s_new = ct_gru_cell(ct_linear(x, cell->w_ih, cell->b_ih), s,
                                 cell->w_hh, cell->b_hh);
  *feat = ct_concat((ct_tensor *[]){s_new, c, e}, 3, 1);
  return *feat ? s_new : NULL;
}

// Row t of x (B,T,E) as (B,E).
static ct_tensor *step_of(ct_tensor *x, int64_t t) {
  return ct_reshape(ct_slice(x, 1, t, 1), CT_SHAPE(x->shape[0], x->shape[2]));
}

// The argmax of each row of fc_out(feat), recording off: the token a
// step without teacher forcing feeds to the next.
static ct_tensor *predicted(const ct_nn_rnn_seq2seq *m, ct_tensor *feat) {
  bool was = ct_grad_set_enabled(false);
  ct_tensor *logits = ct_nn_linear_forward(&m->fc_out, feat);
  ct_grad_set_enabled(was);
  return ct_argmax_last(logits);
}

ct_tensor *ct_nn_rnn_seq2seq_forward(const ct_nn_rnn_seq2seq *m, ct_nn_ctx *ctx,
                                     ct_tensor *src, ct_tensor *tgt_in,
                                     float teacher_forcing, ct_tensor **align) {
  if (align) *align = NULL;
  if (!src || !tgt_in || !check_ids("tgt_in", tgt_in)) return NULL;
  if (tgt_in->shape[0] != src->shape[0]) {
    ct_error(CT_ERR_SHAPE, "rnn_seq2seq: src has %lld rows, tgt_in %lld",
             (long long)src->shape[0], (long long)tgt_in->shape[0]);
    return NULL;
  }
  ct_tensor *s = NULL, *mask = NULL;
  ct_tensor *enc = encode(m, ctx, src, &s, &mask);
  ct_nn_additive_memory mem;
  if (!enc || ct_nn_additive_attention_prepare(&m->attention, enc, enc, mask,
                                               &mem) != CT_OK)
    return NULL;
  const int64_t B = tgt_in->shape[0], T = tgt_in->shape[1], S = src->shape[1];
  const float p = m->cfg.dropout;
  ct_tensor *forced =
      ct_nn_dropout(ctx, ct_nn_embedding_forward(&m->dec_embedding, tgt_in), p);
  ct_tensor **feats = ct_arena_alloc((size_t)T * sizeof *feats);
  if (align) *align = ct_tensor_empty(CT_F32, CT_SHAPE(B, T, S));
  if (!forced || !feats || (align && !*align)) return NULL;
  const bool coins = ctx && ctx->training && teacher_forcing < 1.0f;
  const uint64_t stream =
      coins ? ct_rng_stream(CT_NN_RNG_TEACHER_FORCING, ctx->step) : 0;
  ct_tensor *e = step_of(forced, 0);
  for (int64_t t = 0; t < T; t++) {
    ct_tensor *feat = NULL, *w = NULL;
    s = decoder_step(m, &mem, e, s, &feat, align ? &w : NULL);
    if (!s) return NULL;
    if (align)
      for (int64_t b = 0; b < B; b++)
        memcpy(ct_f32(*align) + (b * T + t) * S, ct_f32(w) + b * S,
               (size_t)S * sizeof(float));
    feats[t] = ct_reshape(feat, CT_SHAPE(B, 1, feat->shape[1]));
    if (t + 1 == T) break;
    if (!coins || ct_rng_uniform_at(ctx->seed, stream, (uint64_t)(t + 1)) <
                      teacher_forcing)
      e = step_of(forced, t + 1);
    else
      e = ct_nn_dropout(
          ctx, ct_nn_embedding_forward(&m->dec_embedding, predicted(m, feat)),
          p);
  }
  return ct_nn_linear_forward(&m->fc_out, ct_concat(feats, (int)T, 1));
}

// ---- cached decoding ---------------------------------------------------------

ct_status ct_nn_rnn_seq2seq_cache_init(ct_nn_rnn_seq2seq_cache *c,
                                       const ct_nn_rnn_seq2seq *m,
                                       const int32_t *src, int64_t B, int64_t S,
                                       int64_t repeat, int64_t max_len) {
  memset(c, 0, sizeof *c);
  if (repeat < 1 || max_len < 1 || B < 1 || S < 1)
    return ct_error(CT_ERR_ARG,
                    "decode: batch %lld, source length %lld, repeat %lld "
                    "and max_len %lld must be >= 1",
                    (long long)B, (long long)S, (long long)repeat,
                    (long long)max_len);
  const int64_t N = B * repeat, Hd = m->cfg.dec_hidden;
  bool was = ct_grad_set_enabled(false);
  ct_tensor *s0 = NULL, *mask = NULL;
  ct_tensor *enc =
      encode(m, NULL, ct_tensor_from(CT_I32, src, CT_SHAPE(B, S)), &s0, &mask);
  ct_nn_additive_memory mem;
  ct_status st = enc ? ct_nn_additive_attention_prepare(&m->attention, enc, enc,
                                                        mask, &mem)
                     : ct_last_status();
  ct_grad_set_enabled(was);
  if (st != CT_OK) return st;
  *c = (ct_nn_rnn_seq2seq_cache){.N = N, .S = S, .max_len = max_len};
  c->mem = mem;
  c->mem.keys = ct_nn_repeat_rows(mem.keys, repeat);
  c->mem.values = ct_nn_repeat_rows(mem.values, repeat);
  c->mem.mask = ct_nn_repeat_rows(mem.mask, repeat);
  c->h = ct_nn_repeat_rows(s0, repeat);
  const int64_t row = max_len * S > Hd ? max_len * S : Hd;
  c->align = ct_arena_calloc((size_t)(N * max_len * S) * sizeof(float));
  c->swap = ct_arena_alloc((size_t)(N * row) * sizeof(float));
  if (!c->mem.keys || !c->mem.values || !c->mem.mask || !c->h || !c->align ||
      !c->swap)
    return ct_last_status() ? ct_last_status() : CT_ERR_NOMEM;
  return CT_OK;
}

ct_tensor *ct_nn_rnn_seq2seq_step(const ct_nn_rnn_seq2seq *m,
                                  ct_nn_rnn_seq2seq_cache *c,
                                  const int32_t *tokens) {
  if (c->len >= c->max_len) {
    ct_error(CT_ERR_STATE, "decode: the cache holds %lld steps, all used",
             (long long)c->max_len);
    return NULL;
  }
  const int64_t N = c->N, S = c->S;
  bool was = ct_grad_set_enabled(false);
  ct_tensor *e = ct_nn_embedding_forward(
      &m->dec_embedding, ct_tensor_from(CT_I32, tokens, CT_SHAPE(N)));
  ct_tensor *feat = NULL, *w = NULL;
  ct_tensor *s = decoder_step(m, &c->mem, e, c->h, &feat, &w);
  ct_tensor *logits = s ? ct_nn_linear_forward(&m->fc_out, feat) : NULL;
  ct_grad_set_enabled(was);
  if (!logits) return NULL;
  memcpy(ct_f32(c->h), ct_f32(s), ct_tensor_bytes(s));
  ct_nn_rows_append(c->align, c->max_len * S, c->len, ct_f32(w), N, S);
  c->len++;
  return logits;
}

void ct_nn_rnn_seq2seq_cache_reorder(ct_nn_rnn_seq2seq_cache *c,
                                     const int64_t *parent) {
  const int64_t Hd = c->h->shape[1];
  ct_nn_rows_reorder(ct_f32(c->h), c->swap, c->N, Hd, Hd, parent);
  ct_nn_rows_reorder(c->align, c->swap, c->N, c->max_len * c->S, c->len * c->S,
                     parent);
}
