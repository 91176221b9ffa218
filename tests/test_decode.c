// The cached incremental decoder must compute what the full model computes:
// feeding a target prefix one token at a time through the step function
// gives, at every position, the logits of the teacher-forced forward pass on
// the whole prefix, for post-norm and pre-norm Transformers and the
// attention GRU, with padded sources and beams (cache rows repeated and
// reordered). Beam search with beam 1 equals greedy argmax decoding done by
// hand with the full model. The RNN's alignments are distributions over the
// real source tokens. The captioner (nn/captioner.h) the same way over its
// annotations, its decoded attention weights those of the teacher-forced
// pass on the decoded caption, and its results the same bits at 1, 2 and 3
// threads.
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/threads.h"
#include "data/vocab.h"
#include "nn/captioner.h"
#include "nn/rnn_seq2seq.h"
#include "nn/seq2seq.h"
#include "tests/harness.h"
#include "train/decode.h"

#include <math.h>
#include <string.h>

enum { B = 3, S = 6, T = 7, V = 23 };

// What the checks need from a translator, the Transformer or the RNN.
typedef struct translator {
  const char *name;
  void *model;
  // src (B,S), tgt (B,T) -> teacher-forced logits (B,T,V)
  ct_tensor *(*full)(void *m, ct_tensor *src, ct_tensor *tgt);
  // A cache of `repeat` rows per sentence, step, reorder, free.
  ct_status (*cache_init)(void *m, void *cache, const int32_t *src,
                          int64_t repeat);
  ct_tensor *(*step)(void *m, void *cache, const int32_t *tokens);
  void (*reorder)(void *cache, const int64_t *parent);
  void (*cache_free)(void *cache);
  ct_status (*decode)(void *m, const int32_t *src, const ct_decode_opts *o,
                      int32_t *out, int64_t *lens);
} translator;

// Source rows padded to different lengths.
static const int32_t SRC[B * S] = {5, 6, 7, 8,  9, 10, 4, 11, 12,
                                   0, 0, 0, 13, 0, 0,  0, 0,  0};

static void check_decoding(const translator *tr, void *cache) {
  int32_t tgt[B * T];
  for (int i = 0; i < B * T; i++) tgt[i] = 4 + (i * 7) % (V - 4);
  for (int b = 0; b < B; b++) tgt[b * T] = CT_VOCAB_BOS;
  bool was = ct_grad_set_enabled(false);
  ct_tensor *full =
      tr->full(tr->model, ct_tensor_from(CT_I32, SRC, CT_SHAPE(B, S)),
               ct_tensor_from(CT_I32, tgt, CT_SHAPE(B, T)));
  CHECK(full != NULL, "%s: forward: %s", tr->name, ct_last_error());

  // Two beams per sentence, each row fed the same prefix; reorder with a
  // swap of the two beams halfway, which must change nothing.
  CHECK(tr->cache_init(tr->model, cache, SRC, 2) == CT_OK, "%s: cache: %s",
        tr->name, ct_last_error());
  double worst = 0.0;
  for (int t = 0; t < T; t++) {
    int32_t tok[2 * B];
    for (int n = 0; n < 2 * B; n++) tok[n] = tgt[(n / 2) * T + t];
    ct_tensor *logits = tr->step(tr->model, cache, tok);
    CHECK(logits != NULL, "%s: step %d: %s", tr->name, t, ct_last_error());
    if (!logits) break;
    for (int n = 0; n < 2 * B; n++)
      for (int v = 0; v < V; v++) {
        double d = fabs(ct_f32(logits)[n * V + v] -
                        ct_f32(full)[((n / 2) * T + t) * V + v]);
        if (d > worst) worst = d;
      }
    if (t == T / 2) {
      int64_t parent[2 * B];
      for (int n = 0; n < 2 * B; n++) parent[n] = n ^ 1;
      tr->reorder(cache, parent);
    }
  }
  printf("%s: cached vs full logits max |diff| %.3g\n", tr->name, worst);
  CHECK(worst < 1e-4, "%s: cached decoding differs from the full model by %g",
        tr->name, worst);
  tr->cache_free(cache);

  // Greedy by hand with the full model vs beam search with beam 1.
  int32_t greedy[B * T];
  int64_t greedy_len[B];
  for (int b = 0; b < B; b++) {
    int32_t prefix[T + 1] = {CT_VOCAB_BOS};
    int64_t len = 0;
    while (len < T) {
      ct_arena_mark mk = ct_arena_get_mark();
      ct_tensor *lg = tr->full(
          tr->model, ct_tensor_from(CT_I32, SRC + b * S, CT_SHAPE(1, S)),
          ct_tensor_from(CT_I32, prefix, CT_SHAPE(1, len + 1)));
      const float *row = ct_f32(lg) + len * V;
      int32_t best = CT_VOCAB_EOS;
      for (int v = 0; v < V; v++)
        if (v != CT_VOCAB_PAD && v != CT_VOCAB_BOS && row[v] > row[best])
          best = v;
      ct_arena_rewind(mk);
      if (best == CT_VOCAB_EOS) break;
      greedy[b * T + len] = best;
      prefix[++len] = best;
    }
    greedy_len[b] = len;
  }
  int32_t out[B * T];
  int64_t lens[B];
  ct_decode_opts o = {.beam = 1, .length_penalty = 0.6f, .max_len = T};
  CHECK(tr->decode(tr->model, SRC, &o, out, lens) == CT_OK, "%s: decode: %s",
        tr->name, ct_last_error());
  for (int b = 0; b < B; b++) {
    bool same = lens[b] == greedy_len[b] &&
                !memcmp(out + b * T, greedy + b * T, (size_t)lens[b] * 4);
    CHECK(same,
          "%s: sentence %d: beam-1 search differs from greedy (len %lld vs "
          "%lld)",
          tr->name, b, (long long)lens[b], (long long)greedy_len[b]);
  }
  // A wider beam never scores worse than greedy under the model: check it
  // runs and returns lengths in range.
  o.beam = 4;
  CHECK(tr->decode(tr->model, SRC, &o, out, lens) == CT_OK, "%s: beam 4: %s",
        tr->name, ct_last_error());
  for (int b = 0; b < B; b++)
    CHECK(lens[b] >= 0 && lens[b] <= T, "len %lld", (long long)lens[b]);
  ct_grad_set_enabled(was);
}

// ---- the Transformer ---------------------------------------------------------

static ct_tensor *transformer_full(void *m, ct_tensor *src, ct_tensor *tgt) {
  return ct_nn_seq2seq_forward(m, NULL, src, tgt);
}

static ct_status transformer_cache_init(void *m, void *cache,
                                        const int32_t *src, int64_t repeat) {
  ct_tensor *pad = NULL;
  ct_tensor *mem = ct_nn_seq2seq_encode(
      m, NULL, ct_tensor_from(CT_I32, src, CT_SHAPE(B, S)), &pad);
  return ct_nn_seq2seq_cache_init(cache, m, mem, pad, repeat, T);
}

static ct_tensor *transformer_step(void *m, void *cache, const int32_t *tok) {
  return ct_nn_seq2seq_step(m, cache, tok);
}

static void transformer_reorder(void *cache, const int64_t *parent) {
  ct_nn_seq2seq_cache_reorder(cache, parent);
}

static void transformer_cache_free(void *cache) {
  ct_nn_seq2seq_cache_free(cache);
}

static ct_status transformer_decode(void *m, const int32_t *src,
                                    const ct_decode_opts *o, int32_t *out,
                                    int64_t *lens) {
  return ct_decode_batch(m, src, B, S, o, out, lens);
}

static void check_transformer(bool norm_first) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_seq2seq m;
  ct_nn_seq2seq_config cfg = {.src_vocab = 19,
                              .tgt_vocab = V,
                              .d_model = 16,
                              .nhead = 4,
                              .dim_feedforward = 24,
                              .encoder_layers = 2,
                              .decoder_layers = 2,
                              .dropout = 0.1f,
                              .activation = CT_NN_RELU,
                              .norm_first = norm_first,
                              .tie_output = !norm_first};
  ct_rng rng = ct_rng_make(3, 4);
  CHECK(ct_nn_seq2seq_init(&m, &p, &cfg, &rng) == CT_OK, "init: %s",
        ct_last_error());
  const translator tr = {
      norm_first ? "transformer, norm_first" : "transformer, post-norm",
      &m,
      transformer_full,
      transformer_cache_init,
      transformer_step,
      transformer_reorder,
      transformer_cache_free,
      transformer_decode};
  ct_nn_seq2seq_cache c;
  check_decoding(&tr, &c);
  ct_nn_seq2seq_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

// ---- the attention GRU ------------------------------------------------------------

static ct_tensor *rnn_full(void *m, ct_tensor *src, ct_tensor *tgt) {
  return ct_nn_rnn_seq2seq_forward(m, NULL, src, tgt, 1.0f, NULL);
}

static ct_status rnn_cache_init(void *m, void *cache, const int32_t *src,
                                int64_t repeat) {
  return ct_nn_rnn_seq2seq_cache_init(cache, m, src, B, S, repeat, T);
}

static ct_tensor *rnn_step(void *m, void *cache, const int32_t *tok) {
  return ct_nn_rnn_seq2seq_step(m, cache, tok);
}

static void rnn_reorder(void *cache, const int64_t *parent) {
  ct_nn_rnn_seq2seq_cache_reorder(cache, parent);
}

static void rnn_cache_free(void *cache) { (void)cache; }  // arena memory

static ct_status rnn_decode(void *m, const int32_t *src,
                            const ct_decode_opts *o, int32_t *out,
                            int64_t *lens) {
  return ct_decode_batch_rnn(m, src, B, S, o, out, lens, NULL);
}

static void check_rnn(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_rnn_seq2seq m;
  ct_nn_rnn_seq2seq_config cfg = {.src_vocab = 19,
                                  .tgt_vocab = V,
                                  .emb_dim = 8,
                                  .enc_hidden = 10,
                                  .dec_hidden = 12,
                                  .dropout = 0.2f};
  ct_rng rng = ct_rng_make(5, 4);
  CHECK(ct_nn_rnn_seq2seq_init(&m, &p, &cfg, &rng) == CT_OK, "init: %s",
        ct_last_error());
  const translator tr = {"rnn",    &m,          rnn_full,       rnn_cache_init,
                         rnn_step, rnn_reorder, rnn_cache_free, rnn_decode};
  ct_nn_rnn_seq2seq_cache c;
  check_decoding(&tr, &c);
  // The alignment of every output token: a distribution over the real
  // source tokens, 0 on padding.
  int32_t out[B * T];
  int64_t lens[B];
  float align[B * T * S];
  ct_decode_opts o = {.beam = 3, .length_penalty = 0.6f, .max_len = T};
  CHECK(ct_decode_batch_rnn(&m, SRC, B, S, &o, out, lens, align) == CT_OK,
        "decode with alignment: %s", ct_last_error());
  const int src_len[B] = {6, 3, 1};
  double worst = 0.0;
  bool padding_zero = true;
  for (int b = 0; b < B; b++)
    for (int64_t i = 0; i <= lens[b] && i < T; i++) {
      double sum = 0.0;
      for (int j = 0; j < S; j++) {
        const float w = align[(b * T + i) * S + j];
        sum += w;
        if (j >= src_len[b]) padding_zero = padding_zero && w == 0.0f;
      }
      worst = fmax(worst, fabs(sum - 1.0));
    }
  CHECK(worst < 1e-5 && padding_zero,
        "alignment rows sum to 1 within %g, padding weight 0: %d", worst,
        padding_zero);
  ct_nn_rnn_seq2seq_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

// ---- the captioner -----------------------------------------------------------

// Beam search over the captioner's annotations a (B,L,D).
static ct_status caption(const ct_nn_captioner *m, ct_tensor *a, int beam,
                         int32_t *out, int64_t *lens, float *alphas) {
  ct_decode_opts o = {.beam = beam, .length_penalty = 0.6f, .max_len = T};
  return ct_decode_batch_captioner(m, a, &o, CT_VOCAB_BOS, CT_VOCAB_EOS, out,
                                   lens, alphas);
}

// Cached steps (2 rows per image, swapped halfway) against the
// teacher-forced pass.
static void check_captioner_cache(const ct_nn_captioner *m, ct_tensor *a) {
  const int64_t L = a->shape[1];
  int32_t tgt[B * T];
  for (int i = 0; i < B * T; i++) tgt[i] = 4 + (i * 5) % (V - 4);
  for (int b = 0; b < B; b++) tgt[b * T] = CT_VOCAB_BOS;
  ct_tensor *alphas = NULL;
  ct_tensor *full = ct_nn_captioner_forward(
      m, NULL, a, ct_tensor_from(CT_I32, tgt, CT_SHAPE(B, T)), &alphas);
  ct_nn_captioner_cache c;
  CHECK(full && ct_nn_captioner_cache_init(&c, m, a, 2, T) == CT_OK,
        "captioner cache: %s", ct_last_error());
  if (!full) return;
  double worst = 0.0;
  for (int t = 0; t < T; t++) {
    int32_t tok[2 * B];
    for (int n = 0; n < 2 * B; n++) tok[n] = tgt[(n / 2) * T + t];
    ct_tensor *logits = ct_nn_captioner_step(m, &c, tok);
    CHECK(logits != NULL, "captioner step %d: %s", t, ct_last_error());
    if (!logits) return;
    for (int n = 0; n < 2 * B; n++)
      for (int v = 0; v < V; v++)
        worst = fmax(worst, fabs(ct_f32(logits)[n * V + v] -
                                 ct_f32(full)[((n / 2) * T + t) * V + v]));
    if (t == T / 2) {
      int64_t parent[2 * B];
      for (int n = 0; n < 2 * B; n++) parent[n] = n ^ 1;
      ct_nn_captioner_cache_reorder(&c, parent);
    }
  }
  for (int n = 0; n < 2 * B; n++)
    for (int64_t i = 0; i < T * L; i++)
      worst = fmax(worst, fabs(c.alphas[n * T * L + i] -
                               ct_f32(alphas)[(n / 2) * T * L + i]));
  printf("captioner: cached vs full logits and alphas max |diff| %.3g\n",
         worst);
  CHECK(worst < 1e-4, "captioner: cached decoding differs by %g", worst);
}

static void check_captioner(void) {
  ct_params p;
  ct_params_init(&p);
  const ct_nn_captioner_config cfg = {
      .encoder = {.in_channels = 3, .width = 4, .stages = 2, .blocks = 1},
      .vocab = V,
      .embed_dim = 8,
      .hidden = 12,
      .attn_dim = 10,
      .dropout = 0.2f};
  ct_rng rng = ct_rng_make(5, 6);
  ct_nn_captioner *m = NULL;
  CHECK(ct_nn_captioner_init(&m, &p, "", &cfg, &rng) == CT_OK, "init: %s",
        ct_last_error());
  if (!m) return;
  // <eos> made less likely, so that captions run several steps (lengths 3,
  // 7, 3 at beam 4: both ends of a caption are exercised).
  ct_f32(ct_params_find(&p, "decoder.L_o.bias")->tensor)[CT_VOCAB_EOS] = -0.2f;
  bool was = ct_grad_set_enabled(false);
  ct_rng data = ct_rng_make(6, 0);
  int64_t gh = 0, gw = 0;
  ct_tensor *a = ct_nn_captioner_encode(
      m, NULL, ct_tensor_randn(&data, 0.0f, 1.0f, CT_SHAPE(B, 3, 8, 8)), &gh,
      &gw);
  CHECK(a && gh == 4 && gw == 4, "encode: %s", ct_last_error());
  if (!a) goto done;
  const int64_t L = a->shape[1];
  check_captioner_cache(m, a);

  // Greedy by hand with the full model vs beam 1; the decoded attention
  // weights are the teacher-forced pass's on the decoded caption.
  int32_t out[B * T], out2[B * T];
  int64_t lens[B], lens2[B];
  float alphas[B * T * 16], alphas2[B * T * 16];
  CHECK(L == 16 && caption(m, a, 1, out, lens, alphas) == CT_OK,
        "captioner beam 1: %s", ct_last_error());
  double worst = 0.0;
  for (int b = 0; b < B; b++) {
    int32_t prefix[T + 1] = {CT_VOCAB_BOS};
    int64_t len = 0;
    ct_tensor *ab = ct_tensor_slice0(a, b, 1);
    ct_tensor *w = NULL;
    while (len < T) {
      ct_arena_mark mk = ct_arena_get_mark();
      ct_tensor *lg = ct_nn_captioner_forward(
          m, NULL, ab, ct_tensor_from(CT_I32, prefix, CT_SHAPE(1, len + 1)),
          &w);
      const float *row = ct_f32(lg) + len * V;
      int32_t best = CT_VOCAB_EOS;
      for (int v = 0; v < V; v++)
        if (v != CT_VOCAB_PAD && v != CT_VOCAB_BOS && row[v] > row[best])
          best = v;
      for (int64_t i = 0; i < L; i++)
        worst = fmax(worst, fabs(ct_f32(w)[len * L + i] -
                                 alphas[(b * T + len) * L + i]));
      ct_arena_rewind(mk);
      if (best == CT_VOCAB_EOS) break;
      prefix[++len] = best;
    }
    CHECK(len == lens[b] && !memcmp(out + b * T, prefix + 1, (size_t)len * 4),
          "captioner image %d: beam-1 search differs from greedy (len %lld "
          "vs %lld)",
          b, (long long)lens[b], (long long)len);
  }
  CHECK(worst < 1e-5,
        "captioner: decoded alphas differ from the full "
        "model's by %g",
        worst);

  // Beam 4: well-formed captions; the alphas of each emitted token (<eos>
  // included) a distribution, zeros after.
  CHECK(caption(m, a, 4, out, lens, alphas) == CT_OK, "captioner beam 4: %s",
        ct_last_error());
  printf("captioner: beam 4 lengths %lld %lld %lld (max %d)\n",
         (long long)lens[0], (long long)lens[1], (long long)lens[2], T);
  for (int b = 0; b < B; b++) {
    CHECK(lens[b] >= 0 && lens[b] <= T, "len %lld", (long long)lens[b]);
    for (int64_t i = 0; i < lens[b]; i++)
      CHECK(out[b * T + i] > CT_VOCAB_EOS && out[b * T + i] < V,
            "image %d token %lld is %d", b, (long long)i, out[b * T + i]);
    for (int64_t i = 0; i < T; i++) {
      double sum = 0.0;
      for (int64_t j = 0; j < L; j++) sum += alphas[(b * T + i) * L + j];
      const bool emitted = i <= lens[b] && i < T;
      CHECK(emitted ? fabs(sum - 1.0) < 1e-5 : sum == 0.0,
            "image %d step %lld: alphas sum to %g", b, (long long)i, sum);
    }
  }
  // The same bits at any thread count (out past each length is not written).
  const int threads = ct_get_threads();
  for (int b = 0; b < B; b++)
    for (int64_t i = lens[b]; i < T; i++) out[b * T + i] = -1;
  for (int n = 1; n <= 3; n++) {
    ct_set_threads(n);
    for (int i = 0; i < B * T; i++) out2[i] = -1;
    CHECK(caption(m, a, 4, out2, lens2, alphas2) == CT_OK, "beam 4: %s",
          ct_last_error());
    CHECK(!memcmp(out, out2, sizeof out) && !memcmp(lens, lens2, sizeof lens) &&
              !memcmp(alphas, alphas2, sizeof alphas),
          "captioner: beam 4 at %d threads differs", n);
  }
  ct_set_threads(threads);
  // Bad arguments: an error, not a crash.
  CHECK(ct_decode_batch_captioner(
            m, a, &(ct_decode_opts){.beam = 0, .max_len = T}, CT_VOCAB_BOS,
            CT_VOCAB_EOS, out, lens, NULL) == CT_ERR_ARG,
        "beam 0 accepted");
done:
  ct_grad_set_enabled(was);
  ct_nn_captioner_free(m);
  ct_params_free(&p);
  ct_arena_reset();
}

int main(void) {
  check_transformer(false);
  check_transformer(true);
  check_rnn();
  check_captioner();
  ct_arena_release();
  return test_summary("decode");
}
