// The encoder-decoder translator and its cached incremental decoder.
#include "nn/seq2seq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/attention_kernel.h"
#include "nn/init.h"
#include "nn/mlp.h"
#include "nn/position.h"

// N(0, d^-0.5) with the padding row (id 0) zero.
static ct_status init_embedding(ct_nn_embedding *e, ct_params *p,
                                const char *name, int64_t V, int64_t E,
                                ct_rng *rng) {
  ct_status st = ct_nn_embedding_init(e, p, name, V, E, 0, rng);
  if (st == CT_OK)
    st =
        ct_nn_init_normal(e->weight, rng, 0.0f, (float)(1.0 / sqrt((double)E)));
  if (st == CT_OK) memset(ct_f32(e->weight), 0, (size_t)E * sizeof(float));
  return st;
}

ct_status ct_nn_seq2seq_init(ct_nn_seq2seq *m, ct_params *p,
                             const ct_nn_seq2seq_config *cfg,
                             ct_rng *init_rng) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  if (cfg->src_vocab < 1 || cfg->tgt_vocab < 1 || cfg->d_model < 1)
    return ct_error(CT_ERR_ARG,
                    "seq2seq: vocabularies (%lld, %lld) and "
                    "d_model (%lld) must be positive",
                    (long long)cfg->src_vocab, (long long)cfg->tgt_vocab,
                    (long long)cfg->d_model);
  const int64_t E = cfg->d_model;
  ct_status st =
      init_embedding(&m->src_emb, p, "src_emb", cfg->src_vocab, E, init_rng);
  if (st == CT_OK)
    st = init_embedding(&m->tgt_emb, p, "tgt_emb", cfg->tgt_vocab, E, init_rng);
  if (st != CT_OK) return st;
  ct_nn_transformer_config tc = ct_nn_transformer_defaults(E, cfg->nhead);
  tc.dim_feedforward = cfg->dim_feedforward;
  tc.dropout = cfg->dropout;
  tc.activation = cfg->activation;
  tc.norm_first = cfg->norm_first;
  st = ct_nn_transformer_init(&m->transformer, p, "transformer", &tc,
                              cfg->encoder_layers, cfg->decoder_layers,
                              init_rng);
  if (st != CT_OK) return st;
  if (cfg->tie_output) {
    m->generator_weight = m->tgt_emb.weight;
  } else {
    m->generator_weight =
        ct_nn_param(p, "generator", "weight", CT_SHAPE(cfg->tgt_vocab, E), 0);
    if (!m->generator_weight) return ct_last_status();
    st = ct_nn_init_xavier_uniform(m->generator_weight, init_rng, 1.0f);
    if (st != CT_OK) return st;
  }
  m->generator_bias = ct_nn_param(p, "generator", "bias",
                                  CT_SHAPE(cfg->tgt_vocab), CT_PARAM_NO_DECAY);
  return m->generator_bias ? CT_OK : ct_last_status();
}

void ct_nn_seq2seq_free(ct_nn_seq2seq *m) {
  ct_nn_transformer_free(&m->transformer);
}

// ids (B,T) -> dropout(emb(ids) * sqrt(E) + PE) (B,T,E)
static ct_tensor *embed(const ct_nn_seq2seq *m, const ct_nn_embedding *e,
                        ct_nn_ctx *ctx, ct_tensor *ids) {
  ct_tensor *x = ct_scale(ct_nn_embedding_forward(e, ids),
                          (float)sqrt((double)m->cfg.d_model));
  return ct_nn_dropout(ctx, ct_nn_sinusoidal_add(x), m->cfg.dropout);
}

// ids (B,T) -> i32 (B,T), 1 where ids is padding (0).
static ct_tensor *padding_mask(ct_tensor *ids) {
  ct_tensor *pad = ct_tensor_empty(CT_I32, ids->ndim, ids->shape);
  if (!pad) return NULL;
  for (int64_t i = 0; i < ids->numel; i++) ct_i32(pad)[i] = ct_i32(ids)[i] == 0;
  return pad;
}

static bool check_ids(const char *what, const ct_tensor *ids) {
  if (ids->dtype == CT_I32 && ids->ndim == 2) return true;
  char s[64];
  ct_error(CT_ERR_SHAPE, "seq2seq: %s must be i32 (B,T), got %s %s", what,
           ct_dtype_name(ids->dtype),
           ct_shape_str(ids->ndim, ids->shape, s, sizeof s));
  return false;
}

ct_tensor *ct_nn_seq2seq_encode(const ct_nn_seq2seq *m, ct_nn_ctx *ctx,
                                ct_tensor *src, ct_tensor **src_pad) {
  if (!src || !check_ids("src", src)) return NULL;
  *src_pad = padding_mask(src);
  if (!*src_pad) return NULL;
  const ct_nn_attn_masks masks = {.key_padding_mask = *src_pad};
  return ct_nn_encoder_forward(&m->transformer.encoder, ctx,
                               embed(m, &m->src_emb, ctx, src), &masks);
}

ct_tensor *ct_nn_seq2seq_forward(const ct_nn_seq2seq *m, ct_nn_ctx *ctx,
                                 ct_tensor *src, ct_tensor *tgt_in) {
  if (!src || !tgt_in || !check_ids("tgt_in", tgt_in)) return NULL;
  ct_tensor *src_pad = NULL;
  ct_tensor *memory = ct_nn_seq2seq_encode(m, ctx, src, &src_pad);
  if (!memory) return NULL;
  if (tgt_in->shape[0] != src->shape[0]) {
    ct_error(CT_ERR_SHAPE, "seq2seq: src has %lld rows, tgt_in %lld",
             (long long)src->shape[0], (long long)tgt_in->shape[0]);
    return NULL;
  }
  // Padding sits after the last real target token, so the causal mask
  // already hides it from every real query: no target key mask needed.
  const ct_nn_attn_masks tgt_masks = {.causal = true};
  const ct_nn_attn_masks mem_masks = {.key_padding_mask = src_pad};
  ct_tensor *h = ct_nn_decoder_forward(&m->transformer.decoder, ctx,
                                       embed(m, &m->tgt_emb, ctx, tgt_in),
                                       memory, &tgt_masks, &mem_masks);
  return ct_linear(h, m->generator_weight, m->generator_bias);
}

// ---- incremental decoding -----------------------------------------------------

void ct_nn_seq2seq_cache_free(ct_nn_seq2seq_cache *c) {
  free(c->self_k);
  free(c->self_v);
  free(c->mem_k);
  free(c->mem_v);
  free(c->src_pad);
  free(c->positions);
  free(c->swap);
  memset(c, 0, sizeof *c);
}

static float *alloc_floats(int64_t n) {
  return malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

ct_status ct_nn_seq2seq_cache_init(ct_nn_seq2seq_cache *c,
                                   const ct_nn_seq2seq *m, ct_tensor *memory,
                                   ct_tensor *src_pad, int64_t repeat,
                                   int64_t max_len) {
  memset(c, 0, sizeof *c);
  if (!memory || !src_pad) return ct_last_status();
  const int64_t B = memory->shape[0], S = memory->shape[1];
  const int64_t E = m->cfg.d_model, L = m->cfg.decoder_layers;
  const int64_t N = B * repeat;
  if (repeat < 1 || max_len < 1)
    return ct_error(CT_ERR_ARG,
                    "decode: repeat %lld and max_len %lld must be "
                    ">= 1",
                    (long long)repeat, (long long)max_len);
  *c = (ct_nn_seq2seq_cache){
      .N = N, .S = S, .E = E, .max_len = max_len, .layers = (int)L};
  c->self_k = alloc_floats(L * N * max_len * E);
  c->self_v = alloc_floats(L * N * max_len * E);
  c->mem_k = alloc_floats(L * N * S * E);
  c->mem_v = alloc_floats(L * N * S * E);
  c->src_pad = malloc((size_t)(N * S > 0 ? N * S : 1));
  c->positions = alloc_floats(max_len * E);
  c->swap = alloc_floats(N * max_len * E);
  if (!c->self_k || !c->self_v || !c->mem_k || !c->mem_v || !c->src_pad ||
      !c->positions || !c->swap) {
    ct_nn_seq2seq_cache_free(c);
    return ct_error(CT_ERR_NOMEM,
                    "decode: out of memory for the key/value "
                    "cache (%lld rows x %lld positions)",
                    (long long)N, (long long)max_len);
  }
  bool was = ct_grad_set_enabled(false);
  ct_status st = CT_OK;
  ct_tensor *pe = ct_nn_sinusoidal_table(max_len, E);
  if (pe)
    memcpy(c->positions, pe->data, (size_t)(max_len * E) * sizeof(float));
  else
    st = ct_last_status();
  for (int64_t n = 0; n < N; n++)
    for (int64_t s = 0; s < S; s++)
      c->src_pad[n * S + s] = ct_i32(src_pad)[(n / repeat) * S + s] != 0;
  // Cross-attention keys and values depend only on the source: project
  // them once per layer (rows E..2E and 2E..3E of in_proj).
  for (int64_t l = 0; l < L && st == CT_OK; l++) {
    const ct_nn_mha *a = &m->transformer.decoder.layers[l].multihead_attn;
    for (int part = 1; part <= 2 && st == CT_OK; part++) {
      ct_tensor *w = ct_tensor_slice0(a->in_proj_weight, part * E, E);
      ct_tensor *b = a->in_proj_bias
                         ? ct_tensor_slice0(a->in_proj_bias, part * E, E)
                         : NULL;
      ct_tensor *kv = ct_linear(memory, w, b);  // (B,S,E)
      if (!kv) {
        st = ct_last_status();
        break;
      }
      float *dst = (part == 1 ? c->mem_k : c->mem_v) + l * N * S * E;
      for (int64_t n = 0; n < N; n++)
        memcpy(dst + n * S * E, ct_f32(kv) + (n / repeat) * S * E,
               (size_t)(S * E) * sizeof(float));
    }
  }
  ct_grad_set_enabled(was);
  if (st != CT_OK) ct_nn_seq2seq_cache_free(c);
  return st;
}

// Attention of one new query per row over Tk cached keys:
// q (N,1,NH,Dh) read through ql, k/v through kl -> (N,1,E)
static ct_tensor *attend_cached(const ct_nn_seq2seq_cache *c, int64_t NH,
                                int64_t Dh, const float *q, ct_attn_layout ql,
                                const float *k, const float *v,
                                ct_attn_layout kl, int64_t Tk,
                                const uint8_t *key_mask) {
  ct_attn_params p = ct_attn_params_make(c->N, 1, Tk, NH, Dh);
  p.q = ql;
  p.k = kl;
  p.v = kl;
  p.out = ct_attn_layout_bthd(1, NH, Dh);
  p.key_mask = key_mask;
  ct_tensor *out = ct_tensor_empty(CT_F32, CT_SHAPE(c->N, 1, NH * Dh));
  float *lse = ct_arena_alloc((size_t)(c->N * NH) * sizeof(float));
  if (!out || !lse) return NULL;
  if (ct_attention_forward(&p, q, k, v, ct_f32(out), lse) != CT_OK) return NULL;
  return out;
}

// x + y (pre-norm) or norm(x + y) (post-norm): a sublayer's residual.
static ct_tensor *residual(const ct_nn_decoder_layer *l,
                           const ct_nn_layernorm *norm, ct_tensor *x,
                           ct_tensor *y) {
  ct_tensor *sum = ct_add(x, y);
  return l->cfg.norm_first ? sum : ct_nn_layernorm_forward(norm, sum);
}

static ct_tensor *sublayer_in(const ct_nn_decoder_layer *l,
                              const ct_nn_layernorm *norm, ct_tensor *x) {
  return l->cfg.norm_first ? ct_nn_layernorm_forward(norm, x) : x;
}

ct_tensor *ct_nn_seq2seq_step(const ct_nn_seq2seq *m, ct_nn_seq2seq_cache *c,
                              const int32_t *tokens) {
  if (c->len >= c->max_len) {
    ct_error(CT_ERR_STATE, "decode: the cache holds %lld positions, all used",
             (long long)c->max_len);
    return NULL;
  }
  const int64_t N = c->N, E = m->cfg.d_model, NH = m->cfg.nhead, Dh = E / NH;
  const int64_t t = c->len, T = c->max_len, S = c->S;
  bool was = ct_grad_set_enabled(false);
  ct_tensor *ids = ct_tensor_from(CT_I32, tokens, CT_SHAPE(N, 1));
  ct_tensor *x = ct_scale(ct_nn_embedding_forward(&m->tgt_emb, ids),
                          (float)sqrt((double)E));
  x = ct_add(x, ct_tensor_from(CT_F32, c->positions + t * E, CT_SHAPE(E)));
  const ct_nn_decoder *dec = &m->transformer.decoder;
  for (int l = 0; l < c->layers && x; l++) {
    const ct_nn_decoder_layer *ly = &dec->layers[l];
    // Self-attention over this and all earlier positions.
    ct_tensor *qkv =
        ct_linear(sublayer_in(ly, &ly->norm1, x), ly->self_attn.in_proj_weight,
                  ly->self_attn.in_proj_bias);  // (N,1,3E)
    if (!qkv) {
      x = NULL;
      break;
    }
    float *K = c->self_k + l * N * T * E, *V = c->self_v + l * N * T * E;
    for (int64_t n = 0; n < N; n++) {
      memcpy(K + (n * T + t) * E, ct_f32(qkv) + n * 3 * E + E,
             (size_t)E * sizeof(float));
      memcpy(V + (n * T + t) * E, ct_f32(qkv) + n * 3 * E + 2 * E,
             (size_t)E * sizeof(float));
    }
    const ct_attn_layout cached = {.batch = T * E, .row = E, .head = Dh};
    ct_tensor *a =
        attend_cached(c, NH, Dh, ct_f32(qkv), ct_attn_layout_qkv(1, NH, Dh), K,
                      V, cached, t + 1, NULL);
    x = residual(ly, &ly->norm1, x,
                 ct_nn_linear_forward(&ly->self_attn.out_proj, a));
    // Cross-attention over the projected source.
    const ct_nn_mha *ca = &ly->multihead_attn;
    ct_tensor *q = ct_linear(
        sublayer_in(ly, &ly->norm2, x),
        ct_tensor_slice0(ca->in_proj_weight, 0, E),
        ca->in_proj_bias ? ct_tensor_slice0(ca->in_proj_bias, 0, E) : NULL);
    if (!q) {
      x = NULL;
      break;
    }
    const ct_attn_layout mem = {.batch = S * E, .row = E, .head = Dh};
    a = attend_cached(c, NH, Dh, ct_f32(q), ct_attn_layout_bthd(1, NH, Dh),
                      c->mem_k + l * N * S * E, c->mem_v + l * N * S * E, mem,
                      S, c->src_pad);
    x = residual(ly, &ly->norm2, x, ct_nn_linear_forward(&ca->out_proj, a));
    // Feed-forward.
    ct_tensor *y =
        ct_nn_feedforward(NULL, &ly->linear1, &ly->linear2, ly->cfg.activation,
                          0.0f, sublayer_in(ly, &ly->norm3, x));
    x = residual(ly, &ly->norm3, x, y);
  }
  if (x && dec->has_norm) x = ct_nn_layernorm_forward(&dec->norm, x);
  ct_tensor *logits =
      ct_reshape(ct_linear(x, m->generator_weight, m->generator_bias),
                 CT_SHAPE(N, m->cfg.tgt_vocab));
  ct_grad_set_enabled(was);
  if (logits) c->len++;
  return logits;
}

void ct_nn_seq2seq_cache_reorder(ct_nn_seq2seq_cache *c,
                                 const int64_t *parent) {
  const int64_t N = c->N, T = c->max_len, E = c->E;
  const size_t used = (size_t)(c->len * E) * sizeof(float);
  float *const bufs[2] = {c->self_k, c->self_v};
  for (int l = 0; l < c->layers; l++) {
    for (int b = 0; b < 2; b++) {
      float *base = bufs[b] + l * N * T * E;
      for (int64_t n = 0; n < N; n++)
        memcpy(c->swap + n * T * E, base + parent[n] * T * E, used);
      for (int64_t n = 0; n < N; n++)
        memcpy(base + n * T * E, c->swap + n * T * E, used);
    }
  }
}
