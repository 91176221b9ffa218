// The Show, Attend and Tell captioner (see captioner.h): a ResNet encoder
// and an LSTM decoder with soft additive attention, a gate on the context
// and a deep output layer.
//
// Parameters, in registration order (E embed_dim, H hidden, A attn_dim, D
// the encoder's channels, V vocab):
//   encoder.*                          nn/resnet.h without fc
//   decoder.attention.encoder_att      Linear(D, A)         W_a a_i + b_a
//   decoder.attention.decoder_att      Linear(H, A)         W_h h + b_h
//   decoder.attention.full_att.weight  (1, A), v; no bias (a constant added
//                                      to every score changes no alpha)
//   decoder.embedding.weight           (V, E), no padding_idx
//   decoder.decode_step.{weight_ih (4H, E+D), weight_hh (4H, H), bias_ih,
//                        bias_hh (4H)} LSTMCell, gates i, f, g, o
//   decoder.init_h, decoder.init_c     Linear(D, H)
//   decoder.f_beta                     Linear(H, D)
//   decoder.L_h                        Linear(H, E), no bias
//   decoder.L_z                        Linear(D, E), no bias
//   decoder.L_o                        Linear(E, V)
// Init: PyTorch's module defaults (nn.Linear, nn.Embedding N(0, 1),
// nn.LSTMCell U(+-1/sqrt(H))), drawn in that order.
//
// Work: W_a a_i + b_a once per batch; in the teacher-forced pass the input
// half of the LSTM's input projection (emb(y) W_ih[:, :E]^T + b_ih) for all
// steps at once, and the deep output (L_h, L_z, L_o) over all steps after
// the loop; per step only the (B,.) products of h and z, the fused
// attention (autograd/ops_additive_attention.h) and the LSTM cell.
#include "nn/captioner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/ops_additive_attention.h"
#include "autograd/ops_rnn.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "nn/init.h"

struct ct_nn_captioner {
  ct_nn_captioner_config cfg;
  ct_nn_resnet encoder;
  int64_t D;                    // the annotation width
  ct_nn_linear encoder_att;     // (A, D)
  ct_nn_linear decoder_att;     // (A, H)
  ct_tensor *full_att;          // (1, A)
  ct_nn_embedding embedding;    // (V, E)
  ct_tensor *w_ih, *w_hh;       // (4H, E+D), (4H, H)
  ct_tensor *b_ih, *b_hh;       // (4H)
  ct_nn_linear init_h, init_c;  // (H, D)
  ct_nn_linear f_beta;          // (D, H)
  ct_nn_linear L_h, L_z, L_o;   // (E, H), (E, D), (V, E)
};

// Registers "decoder.decode_step.<leaf>" drawn U(-bound, bound).
static ct_tensor *cell_param(ct_params *p, const char *prefix, const char *leaf,
                             int ndim, const int64_t *shape, unsigned flags,
                             float bound, ct_rng *rng) {
  ct_tensor *t = ct_nn_param(p, prefix, leaf, ndim, shape, flags);
  if (t && ct_nn_init_uniform(t, rng, -bound, bound) != CT_OK) return NULL;
  return t;
}

static ct_status decoder_init(ct_nn_captioner *m, ct_params *p,
                              const char *prefix, ct_rng *rng) {
  const int64_t V = m->cfg.vocab, E = m->cfg.embed_dim, H = m->cfg.hidden,
                A = m->cfg.attn_dim, D = m->D;
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "decoder.attention.encoder_att");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->encoder_att, p, name, D, A, true, rng);
  if (st == CT_OK)
    st = ct_nn_name(name, prefix, "decoder.attention.decoder_att");
  if (st == CT_OK)
    st = ct_nn_linear_init(&m->decoder_att, p, name, H, A, true, rng);
  ct_nn_linear full = {0};
  if (st == CT_OK) st = ct_nn_name(name, prefix, "decoder.attention.full_att");
  if (st == CT_OK) st = ct_nn_linear_init(&full, p, name, A, 1, false, rng);
  m->full_att = full.weight;
  if (st == CT_OK) st = ct_nn_name(name, prefix, "decoder.embedding");
  if (st == CT_OK)
    st = ct_nn_embedding_init(&m->embedding, p, name, V, E, -1, rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "decoder.decode_step");
  if (st == CT_OK) {
    const float bound = (float)(1.0 / sqrt((double)H));
    m->w_ih =
        cell_param(p, name, "weight_ih", CT_SHAPE(4 * H, E + D), 0, bound, rng);
    m->w_hh = m->w_ih ? cell_param(p, name, "weight_hh", CT_SHAPE(4 * H, H), 0,
                                   bound, rng)
                      : NULL;
    m->b_ih = m->w_hh ? cell_param(p, name, "bias_ih", CT_SHAPE(4 * H),
                                   CT_PARAM_NO_DECAY, bound, rng)
                      : NULL;
    m->b_hh = m->b_ih ? cell_param(p, name, "bias_hh", CT_SHAPE(4 * H),
                                   CT_PARAM_NO_DECAY, bound, rng)
                      : NULL;
    if (!m->b_hh) st = ct_last_status();
  }
  struct {
    ct_nn_linear *l;
    const char *leaf;
    int64_t in, out;
    bool bias;
  } const lin[] = {{&m->init_h, "decoder.init_h", D, H, true},
                   {&m->init_c, "decoder.init_c", D, H, true},
                   {&m->f_beta, "decoder.f_beta", H, D, true},
                   {&m->L_h, "decoder.L_h", H, E, false},
                   {&m->L_z, "decoder.L_z", D, E, false},
                   {&m->L_o, "decoder.L_o", E, V, true}};
  for (size_t i = 0; i < sizeof lin / sizeof lin[0] && st == CT_OK; i++) {
    st = ct_nn_name(name, prefix, "%s", lin[i].leaf);
    if (st == CT_OK)
      st = ct_nn_linear_init(lin[i].l, p, name, lin[i].in, lin[i].out,
                             lin[i].bias, rng);
  }
  return st;
}

ct_status ct_nn_captioner_init(ct_nn_captioner **out, ct_params *p,
                               const char *prefix,
                               const ct_nn_captioner_config *cfg,
                               ct_rng *init_rng) {
  *out = NULL;
  if (cfg->vocab < 1 || cfg->embed_dim < 1 || cfg->hidden < 1 ||
      cfg->attn_dim < 1 || !(cfg->dropout >= 0.0f && cfg->dropout < 1.0f))
    return ct_error(CT_ERR_ARG,
                    "captioner: vocab %lld, embed_dim %lld, hidden %lld and "
                    "attn_dim %lld must be >= 1, dropout %g in [0, 1)",
                    (long long)cfg->vocab, (long long)cfg->embed_dim,
                    (long long)cfg->hidden, (long long)cfg->attn_dim,
                    (double)cfg->dropout);
  ct_nn_captioner *m = calloc(1, sizeof *m);
  if (!m) return ct_error(CT_ERR_NOMEM, "captioner: out of memory");
  m->cfg = *cfg;
  m->cfg.encoder.num_classes = 0;
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "encoder");
  if (st == CT_OK)
    st = ct_nn_resnet_init(&m->encoder, p, name, &m->cfg.encoder, init_rng);
  m->D = m->encoder.feature_channels;
  if (st == CT_OK) st = decoder_init(m, p, prefix, init_rng);
  if (st != CT_OK) {
    ct_nn_captioner_free(m);
    return st;
  }
  *out = m;
  return CT_OK;
}

void ct_nn_captioner_free(ct_nn_captioner *m) {
  if (!m) return;
  ct_nn_resnet_free(&m->encoder);
  free(m);
}

const ct_nn_captioner_config *ct_nn_captioner_cfg(const ct_nn_captioner *m) {
  return &m->cfg;
}

const ct_nn_resnet *ct_nn_captioner_encoder(const ct_nn_captioner *m) {
  return &m->encoder;
}

ct_tensor *ct_nn_captioner_encode(const ct_nn_captioner *m, ct_nn_ctx *ctx,
                                  ct_tensor *images, int64_t *grid_h,
                                  int64_t *grid_w) {
  *grid_h = *grid_w = 0;
  ct_tensor *f = ct_nn_resnet_features(&m->encoder, ctx, images);
  if (!f) return NULL;
  // (B,D,h,w) -> (B,h*w,D)
  const int64_t B = f->shape[0], D = f->shape[1];
  *grid_h = f->shape[2];
  *grid_w = f->shape[3];
  return ct_transpose(ct_reshape(f, CT_SHAPE(B, D, *grid_h * *grid_w)), 1, 2);
}

// ---- the decoder ------------------------------------------------------------

static bool check_annotations(const ct_nn_captioner *m, const ct_tensor *a) {
  if (a->dtype == CT_F32 && a->ndim == 3 && a->shape[0] >= 1 &&
      a->shape[1] >= 1 && a->shape[2] == m->D)
    return true;
  char s[64];
  ct_error(CT_ERR_SHAPE,
           "captioner: annotations must be f32 (B,L,D=%lld) with B, L >= 1, "
           "got %s %s",
           (long long)m->D, ct_dtype_name(a->dtype),
           ct_shape_str(a->ndim, a->shape, s, sizeof s));
  return false;
}

// What every step reads, computed once per batch of annotations a (B,L,D).
typedef struct decoder_memory {
  ct_tensor *keys;  // (B,L,A) W_a a + b_a
  ct_tensor *v;     // (A) full_att.weight
  ct_tensor *a;     // (B,L,D)
  ct_tensor *w_z;   // (4H, D) the context columns of weight_ih
} decoder_memory;

static decoder_memory memory_of(const ct_nn_captioner *m, ct_tensor *a) {
  return (decoder_memory){
      .keys = ct_nn_linear_forward(&m->encoder_att, a),
      .v = ct_reshape(m->full_att, CT_SHAPE(m->cfg.attn_dim)),
      .a = a,
      .w_z = ct_slice(m->w_ih, 1, m->cfg.embed_dim, m->D)};
}

// h_0, c_0 from the mean annotation of a (B,L,D).
static ct_tensor *initial_state(const ct_nn_captioner *m, ct_tensor *a,
                                ct_tensor **c0) {
  const int64_t B = a->shape[0], L = a->shape[1];
  // mean over L as (B,1,L) of 1/L times a: one batched product, no copy of a
  ct_tensor *avg = ct_tensor_full(CT_F32, 1.0 / (double)L, CT_SHAPE(B, 1, L));
  ct_tensor *mean =
      ct_reshape(ct_matmul(avg, a, false, false), CT_SHAPE(B, m->D));
  *c0 = ct_nn_linear_forward(&m->init_c, mean);
  return ct_nn_linear_forward(&m->init_h, mean);
}

// One step before the LSTM's input half: from h_{t-1} (B,H) the context
// *z (B,D) = beta * sum_i alpha_i a_i and its part of the gates, z
// W_ih[:, E:]^T (B,4H); *alpha (B,L) when alpha is not NULL.
static ct_tensor *attend(const ct_nn_captioner *m, const decoder_memory *mem,
                         ct_tensor *h, ct_tensor **z, ct_tensor **alpha) {
  ct_tensor *q = ct_nn_linear_forward(&m->decoder_att, h);
  ct_tensor *ctx =
      ct_additive_attention(q, mem->keys, mem->v, mem->a, NULL, alpha);
  ct_tensor *beta = ct_sigmoid(ct_nn_linear_forward(&m->f_beta, h));
  *z = ct_mul(beta, ctx);
  return ct_linear(*z, mem->w_z, NULL);
}

// Row t of x (B,T,C) as (B,C).
static ct_tensor *step_of(ct_tensor *x, int64_t t) {
  return ct_reshape(ct_slice(x, 1, t, 1), CT_SHAPE(x->shape[0], x->shape[2]));
}

// x (B,C) as (B,1,C).
static ct_tensor *as_step(ct_tensor *x) {
  return x ? ct_reshape(x, CT_SHAPE(x->shape[0], 1, x->shape[1])) : NULL;
}

ct_tensor *ct_nn_captioner_forward(const ct_nn_captioner *m, ct_nn_ctx *ctx,
                                   ct_tensor *annotations, ct_tensor *tokens_in,
                                   ct_tensor **alphas) {
  if (alphas) *alphas = NULL;
  if (!annotations || !tokens_in || !check_annotations(m, annotations))
    return NULL;
  const ct_tensor *y = tokens_in;
  if (y->dtype != CT_I32 || y->ndim != 2 || y->shape[1] < 1 ||
      y->shape[0] != annotations->shape[0]) {
    char s[64];
    ct_error(CT_ERR_SHAPE,
             "captioner: tokens_in must be i32 (B=%lld,T) with T >= 1, got "
             "%s %s",
             (long long)annotations->shape[0], ct_dtype_name(y->dtype),
             ct_shape_str(y->ndim, y->shape, s, sizeof s));
    return NULL;
  }
  const int64_t T = y->shape[1], E = m->cfg.embed_dim;
  decoder_memory mem = memory_of(m, annotations);
  ct_tensor *c = NULL;
  ct_tensor *h = initial_state(m, annotations, &c);
  ct_tensor *emb = ct_nn_embedding_forward(&m->embedding, tokens_in);
  // The embedding's part of every step's gates at once: (B,T,4H).
  ct_tensor *gx_emb = ct_linear(emb, ct_slice(m->w_ih, 1, 0, E), m->b_ih);
  ct_tensor **hs = ct_arena_alloc((size_t)(3 * T) * sizeof *hs);
  if (!mem.keys || !mem.w_z || !h || !gx_emb || !hs) return NULL;
  ct_tensor **zs = hs + T, **ws = hs + 2 * T;
  for (int64_t t = 0; t < T; t++) {
    ct_tensor *z = NULL, *w = NULL;
    ct_tensor *gz = attend(m, &mem, h, &z, alphas ? &w : NULL);
    ct_tensor *c_new = NULL;
    h = ct_lstm_cell(ct_add(step_of(gx_emb, t), gz), h, c, m->w_hh, m->b_hh,
                     &c_new);
    c = c_new;
    hs[t] = as_step(h);
    zs[t] = as_step(z);
    ws[t] = as_step(w);
    if (!hs[t] || !zs[t] || (alphas && !ws[t])) return NULL;
  }
  // The deep output layer (eq. 7) over all steps at once.
  ct_tensor *pre = ct_add(
      ct_add(emb, ct_nn_linear_forward(&m->L_h, ct_concat(hs, (int)T, 1))),
      ct_nn_linear_forward(&m->L_z, ct_concat(zs, (int)T, 1)));
  ct_tensor *logits =
      ct_nn_linear_forward(&m->L_o, ct_nn_dropout(ctx, pre, m->cfg.dropout));
  if (logits && alphas && !(*alphas = ct_concat(ws, (int)T, 1))) return NULL;
  return logits;
}

ct_tensor *ct_nn_captioner_attention_reg(ct_tensor *alphas, ct_tensor *mask,
                                         float lambda) {
  if (!alphas || !mask) return NULL;
  if (alphas->ndim != 3 || mask->dtype != CT_I32 || mask->ndim != 2 ||
      mask->shape[0] != alphas->shape[0] ||
      mask->shape[1] != alphas->shape[1]) {
    char sa[64], sm[64];
    ct_error(CT_ERR_SHAPE,
             "captioner attention_reg: need alphas (B,T,L) and an i32 mask "
             "(B,T), got alphas %s and mask %s %s",
             ct_shape_str(alphas->ndim, alphas->shape, sa, sizeof sa),
             ct_dtype_name(mask->dtype),
             ct_shape_str(mask->ndim, mask->shape, sm, sizeof sm));
    return NULL;
  }
  const int64_t B = alphas->shape[0], T = alphas->shape[1],
                L = alphas->shape[2];
  // s (B,1,L) = sum_t mask_bt alpha_bti, as a batched product
  ct_tensor *m = ct_tensor_empty(CT_F32, CT_SHAPE(B, 1, T));
  ct_tensor *ones = ct_tensor_full(CT_F32, 1.0, CT_SHAPE(B, 1, L));
  if (!m || !ones) return NULL;
  for (int64_t i = 0; i < B * T; i++)
    ct_f32(m)[i] = ct_i32(mask)[i] != 0 ? 1.0f : 0.0f;
  ct_tensor *s = ct_matmul(m, alphas, false, false);
  // lambda (1/B) sum_{b,i} (1 - s)^2 = lambda L mean_{b,i} (s - 1)^2
  return ct_scale(ct_mse(s, ones), lambda * (float)L);
}

// ---- cached decoding --------------------------------------------------------

ct_status ct_nn_captioner_cache_init(ct_nn_captioner_cache *c,
                                     const ct_nn_captioner *m,
                                     ct_tensor *annotations, int64_t repeat,
                                     int64_t max_len) {
  memset(c, 0, sizeof *c);
  if (!annotations) return ct_last_status();
  if (!check_annotations(m, annotations)) return ct_last_status();
  if (repeat < 1 || max_len < 1)
    return ct_error(CT_ERR_ARG,
                    "decode: repeat %lld and max_len %lld must be >= 1",
                    (long long)repeat, (long long)max_len);
  const int64_t B = annotations->shape[0], L = annotations->shape[1],
                N = B * repeat, H = m->cfg.hidden;
  bool was = ct_grad_set_enabled(false);
  ct_tensor *c0 = NULL;
  ct_tensor *h0 = initial_state(m, annotations, &c0);
  ct_tensor *keys = ct_nn_linear_forward(&m->encoder_att, annotations);
  *c = (ct_nn_captioner_cache){.N = N, .L = L, .max_len = max_len};
  c->keys = ct_nn_repeat_rows(keys, repeat);
  c->values = ct_nn_repeat_rows(annotations, repeat);
  c->h = ct_nn_repeat_rows(h0, repeat);
  c->c = ct_nn_repeat_rows(c0, repeat);
  c->w_emb = ct_slice(m->w_ih, 1, 0, m->cfg.embed_dim);
  c->w_z = ct_slice(m->w_ih, 1, m->cfg.embed_dim, m->D);
  ct_grad_set_enabled(was);
  const int64_t row = max_len * L > H ? max_len * L : H;
  c->alphas = ct_arena_calloc((size_t)(N * max_len * L) * sizeof(float));
  c->swap = ct_arena_alloc((size_t)(N * row) * sizeof(float));
  if (!c->keys || !c->values || !c->h || !c->c || !c->w_emb || !c->w_z ||
      !c->alphas || !c->swap)
    return ct_last_status() ? ct_last_status() : CT_ERR_NOMEM;
  return CT_OK;
}

ct_tensor *ct_nn_captioner_step(const ct_nn_captioner *m,
                                ct_nn_captioner_cache *c,
                                const int32_t *tokens) {
  if (c->len >= c->max_len) {
    ct_error(CT_ERR_STATE, "decode: the cache holds %lld steps, all used",
             (long long)c->max_len);
    return NULL;
  }
  const int64_t N = c->N, L = c->L;
  bool was = ct_grad_set_enabled(false);
  decoder_memory mem = {.keys = c->keys,
                        .v = ct_reshape(m->full_att, CT_SHAPE(m->cfg.attn_dim)),
                        .a = c->values,
                        .w_z = c->w_z};
  ct_tensor *emb = ct_nn_embedding_forward(
      &m->embedding, ct_tensor_from(CT_I32, tokens, CT_SHAPE(N)));
  ct_tensor *z = NULL, *w = NULL;
  ct_tensor *gz = attend(m, &mem, c->h, &z, &w);
  ct_tensor *gx = ct_add(ct_linear(emb, c->w_emb, m->b_ih), gz);
  ct_tensor *c_new = NULL;
  ct_tensor *h = ct_lstm_cell(gx, c->h, c->c, m->w_hh, m->b_hh, &c_new);
  ct_tensor *logits = NULL;
  if (h && c_new)
    logits = ct_nn_linear_forward(
        &m->L_o, ct_add(ct_add(emb, ct_nn_linear_forward(&m->L_h, h)),
                        ct_nn_linear_forward(&m->L_z, z)));
  ct_grad_set_enabled(was);
  if (!logits) return NULL;
  memcpy(ct_f32(c->h), ct_f32(h), ct_tensor_bytes(h));
  memcpy(ct_f32(c->c), ct_f32(c_new), ct_tensor_bytes(c_new));
  ct_nn_rows_append(c->alphas, c->max_len * L, c->len, ct_f32(w), N, L);
  c->len++;
  return logits;
}

void ct_nn_captioner_cache_reorder(ct_nn_captioner_cache *c,
                                   const int64_t *parent) {
  const int64_t H = c->h->shape[1];
  ct_nn_rows_reorder(ct_f32(c->h), c->swap, c->N, H, H, parent);
  ct_nn_rows_reorder(ct_f32(c->c), c->swap, c->N, H, H, parent);
  ct_nn_rows_reorder(c->alphas, c->swap, c->N, c->max_len * c->L, c->len * c->L,
                     parent);
}
