// Beam search (beam 1 = greedy) on a cached decoder: the Transformer's, the
// RNN translator's or the captioner's.
#include "train/decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/arena.h"
#include "core/vmath.h"
#include "data/vocab.h"

typedef struct candidate {
  double score;
  int64_t parent;  // row
  int32_t token;
} candidate;

// Better first; ties by parent row then token, so the order is total.
static int candidate_cmp(const void *a, const void *b) {
  const candidate *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  if (x->parent != y->parent) return x->parent < y->parent ? -1 : 1;
  return (x->token > y->token) - (x->token < y->token);
}

// log_softmax of one row of logits, in double (its log-sum-exp as the
// cross-entropy takes it, core/vmath.h).
static void log_softmax_row(const float *logits, int64_t V, double *out) {
  const double lse = ct_vmath_logsumexp_f64(logits, V);
  for (int64_t v = 0; v < V; v++) out[v] = logits[v] - lse;
}

// The `beam` best (token, logp) of one row, by partial selection.
static void top_tokens(const double *logp, int64_t V, int beam, double *best,
                       int32_t *ids) {
  for (int k = 0; k < beam; k++) {
    best[k] = -INFINITY;
    ids[k] = CT_VOCAB_EOS;
  }
  for (int64_t v = 0; v < V; v++) {
    if (v == CT_VOCAB_PAD || v == CT_VOCAB_BOS) continue;
    if (logp[v] <= best[beam - 1]) continue;
    int k = beam - 1;
    while (k > 0 && logp[v] > best[k - 1]) {
      best[k] = best[k - 1];
      ids[k] = ids[k - 1];
      k--;
    }
    best[k] = logp[v];
    ids[k] = (int32_t)v;
  }
}

static double length_penalty(int64_t len, float alpha) {
  return alpha == 0.0f ? 1.0 : pow((5.0 + (double)len) / 6.0, alpha);
}

ct_status ct_decode_search(const ct_decoder *d, int64_t B,
                           const ct_decode_opts *opts, int32_t *out,
                           int64_t *lens, int64_t *rows) {
  const int beam = opts->beam;
  const int64_t T = opts->max_len, V = d->vocab, N = B * beam;
  ct_status st = CT_OK;
  bool was = ct_grad_set_enabled(false);
  double *score = malloc((size_t)N * sizeof *score);
  bool *done = malloc((size_t)N * sizeof *done);
  int32_t *tok = malloc((size_t)N * sizeof *tok);
  int32_t *hist = calloc((size_t)(N * T), sizeof *hist);
  int32_t *hist_next = calloc((size_t)(N * T), sizeof *hist_next);
  int64_t *hlen = calloc((size_t)N, sizeof *hlen),
          *hlen_next = calloc((size_t)N, sizeof *hlen_next);
  int64_t *parent = malloc((size_t)N * sizeof *parent);
  double *logp = malloc((size_t)V * sizeof *logp);
  double *best = malloc((size_t)beam * sizeof *best);
  int32_t *best_ids = malloc((size_t)beam * sizeof *best_ids);
  candidate *cand = malloc((size_t)beam * beam * sizeof *cand);
  bool *done_next = malloc((size_t)N * sizeof *done_next);
  if (!score || !done || !tok || !hist || !hist_next || !hlen || !hlen_next ||
      !parent || !logp || !best || !best_ids || !cand || !done_next) {
    st = ct_error(CT_ERR_NOMEM, "decode: out of memory");
    goto cleanup;
  }
  for (int64_t n = 0; n < N; n++) {
    // Only the first row of each sentence starts alive, so the first step
    // does not pick the same token `beam` times.
    score[n] = n % beam == 0 ? 0.0 : -INFINITY;
    done[n] = false;
    tok[n] = CT_VOCAB_BOS;
  }
  for (int64_t t = 0; t < T; t++) {
    bool all_done = true;
    for (int64_t n = 0; n < N; n++) all_done = all_done && done[n];
    if (all_done) break;
    ct_arena_mark step_mark = ct_arena_get_mark();
    ct_tensor *logits = d->step(d->state, tok);
    if (!logits) {
      st = ct_last_status();
      goto cleanup;
    }
    for (int64_t b = 0; b < B; b++) {
      int nc = 0;
      for (int k = 0; k < beam; k++) {
        int64_t n = b * beam + k;
        if (score[n] == -INFINITY) continue;
        if (done[n]) {
          cand[nc++] = (candidate){score[n], n, CT_VOCAB_PAD};
          continue;
        }
        log_softmax_row(ct_f32(logits) + n * V, V, logp);
        top_tokens(logp, V, beam, best, best_ids);
        for (int j = 0; j < beam; j++)
          cand[nc++] = (candidate){score[n] + best[j], n, best_ids[j]};
      }
      qsort(cand, (size_t)nc, sizeof *cand, candidate_cmp);
      for (int k = 0; k < beam; k++) {
        int64_t n = b * beam + k;
        if (k < nc) {
          const candidate *c = &cand[k];
          parent[n] = c->parent;
          score[n] = c->score;
          done_next[n] = done[c->parent] || c->token == CT_VOCAB_EOS;
          tok[n] = c->token;
          memcpy(hist_next + n * T, hist + c->parent * T,
                 (size_t)hlen[c->parent] * sizeof *hist);
          hlen_next[n] = hlen[c->parent];
          if (!done[c->parent]) hist_next[n * T + hlen_next[n]++] = c->token;
        } else {  // fewer live candidates than beams: a dead row
          parent[n] = b * beam;
          score[n] = -INFINITY;
          done_next[n] = true;
          tok[n] = CT_VOCAB_PAD;
          hlen_next[n] = 0;
        }
      }
    }
    ct_arena_rewind(step_mark);
    d->reorder(d->state, parent);
    int32_t *th = hist;
    hist = hist_next;
    hist_next = th;
    int64_t *tl = hlen;
    hlen = hlen_next;
    hlen_next = tl;
    bool *td = done;
    done = done_next;
    done_next = td;
  }
  // Pick each sentence's best row by length-normalised score; strip <eos>.
  for (int64_t b = 0; b < B; b++) {
    int64_t pick = b * beam;
    double pick_score = -INFINITY;
    for (int k = 0; k < beam; k++) {
      int64_t n = b * beam + k;
      if (score[n] == -INFINITY) continue;
      double s = score[n] / length_penalty(hlen[n], opts->length_penalty);
      if (s > pick_score) {
        pick_score = s;
        pick = n;
      }
    }
    int64_t len = hlen[pick];
    if (len > 0 && hist[pick * T + len - 1] == CT_VOCAB_EOS) len--;
    memcpy(out + b * T, hist + pick * T, (size_t)len * sizeof *out);
    lens[b] = len;
    if (rows) rows[b] = pick;
  }
cleanup:
  free(score);
  free(done);
  free(tok);
  free(hist);
  free(hist_next);
  free(hlen);
  free(hlen_next);
  free(parent);
  free(logp);
  free(best);
  free(best_ids);
  free(cand);
  free(done_next);
  ct_grad_set_enabled(was);
  return st;
}

static ct_status check_opts(const ct_decode_opts *opts, int64_t B, int64_t S) {
  if (opts->beam >= 1 && opts->max_len >= 1 && B >= 1 && S >= 1) return CT_OK;
  return ct_error(CT_ERR_ARG,
                  "decode: beam %d, max_len %lld, batch %lld "
                  "and source length %lld must be >= 1",
                  opts->beam, (long long)opts->max_len, (long long)B,
                  (long long)S);
}

static ct_tensor *transformer_step(void *state, const int32_t *tokens) {
  void **s = state;
  return ct_nn_seq2seq_step(s[0], s[1], tokens);
}

static void transformer_reorder(void *state, const int64_t *parent) {
  void **s = state;
  ct_nn_seq2seq_cache_reorder(s[1], parent);
}

ct_status ct_decode_batch(const ct_nn_seq2seq *m, const int32_t *src, int64_t B,
                          int64_t S, const ct_decode_opts *opts, int32_t *out,
                          int64_t *lens) {
  ct_status st = check_opts(opts, B, S);
  if (st != CT_OK) return st;
  bool was = ct_grad_set_enabled(false);
  ct_arena_mark start = ct_arena_get_mark();
  ct_nn_seq2seq_cache cache;
  ct_tensor *pad = NULL;
  ct_tensor *memory = ct_nn_seq2seq_encode(
      m, NULL, ct_tensor_from(CT_I32, src, CT_SHAPE(B, S)), &pad);
  st = ct_nn_seq2seq_cache_init(&cache, m, memory, pad, opts->beam,
                                opts->max_len);
  ct_arena_rewind(start);
  if (st == CT_OK) {
    void *state[2] = {(void *)m, &cache};
    const ct_decoder d = {.vocab = m->cfg.tgt_vocab,
                          .state = state,
                          .step = transformer_step,
                          .reorder = transformer_reorder};
    st = ct_decode_search(&d, B, opts, out, lens, NULL);
    ct_nn_seq2seq_cache_free(&cache);
  }
  ct_arena_rewind(start);
  ct_grad_set_enabled(was);
  return st;
}

static ct_tensor *rnn_step(void *state, const int32_t *tokens) {
  void **s = state;
  return ct_nn_rnn_seq2seq_step(s[0], s[1], tokens);
}

static void rnn_reorder(void *state, const int64_t *parent) {
  void **s = state;
  ct_nn_rnn_seq2seq_cache_reorder(s[1], parent);
}

ct_status ct_decode_batch_rnn(const ct_nn_rnn_seq2seq *m, const int32_t *src,
                              int64_t B, int64_t S, const ct_decode_opts *opts,
                              int32_t *out, int64_t *lens, float *align) {
  ct_status st = check_opts(opts, B, S);
  if (st != CT_OK) return st;
  int64_t *rows = align ? malloc((size_t)B * sizeof *rows) : NULL;
  if (align && !rows) return ct_error(CT_ERR_NOMEM, "decode: out of memory");
  bool was = ct_grad_set_enabled(false);
  ct_arena_mark start = ct_arena_get_mark();
  ct_nn_rnn_seq2seq_cache cache;
  st = ct_nn_rnn_seq2seq_cache_init(&cache, m, src, B, S, opts->beam,
                                    opts->max_len);
  if (st == CT_OK) {
    void *state[2] = {(void *)m, &cache};
    const ct_decoder d = {.vocab = m->cfg.tgt_vocab,
                          .state = state,
                          .step = rnn_step,
                          .reorder = rnn_reorder};
    st = ct_decode_search(&d, B, opts, out, lens, rows);
  }
  // The attention of each sentence's chosen row: output token i over the
  // source positions.
  const int64_t T = opts->max_len;
  for (int64_t b = 0; st == CT_OK && align && b < B; b++)
    memcpy(align + b * T * S, cache.align + rows[b] * T * S,
           (size_t)(T * S) * sizeof(float));
  free(rows);
  ct_arena_rewind(start);
  ct_grad_set_enabled(was);
  return st;
}

static ct_tensor *captioner_step(void *state, const int32_t *tokens) {
  void **s = state;
  return ct_nn_captioner_step(s[0], s[1], tokens);
}

static void captioner_reorder(void *state, const int64_t *parent) {
  void **s = state;
  ct_nn_captioner_cache_reorder(s[1], parent);
}

ct_status ct_decode_batch_captioner(const ct_nn_captioner *m,
                                    ct_tensor *annotations,
                                    const ct_decode_opts *opts, int32_t bos,
                                    int32_t eos, int32_t *out, int64_t *lens,
                                    float *alphas) {
  if (!annotations) return ct_last_status();
  if (annotations->ndim != 3)
    return ct_error(CT_ERR_SHAPE, "decode: annotations must be (B,L,D)");
  const int64_t B = annotations->shape[0], L = annotations->shape[1];
  ct_status st = check_opts(opts, B, L);
  if (st != CT_OK) return st;
  if (bos != CT_VOCAB_BOS || eos != CT_VOCAB_EOS)
    return ct_error(CT_ERR_ARG,
                    "decode: <bos> %d and <eos> %d must be the vocabulary's "
                    "(%d and %d, data/vocab.h)",
                    bos, eos, CT_VOCAB_BOS, CT_VOCAB_EOS);
  int64_t *rows = alphas ? malloc((size_t)B * sizeof *rows) : NULL;
  if (alphas && !rows) return ct_error(CT_ERR_NOMEM, "decode: out of memory");
  bool was = ct_grad_set_enabled(false);
  ct_arena_mark start = ct_arena_get_mark();
  ct_nn_captioner_cache cache;
  st = ct_nn_captioner_cache_init(&cache, m, annotations, opts->beam,
                                  opts->max_len);
  if (st == CT_OK) {
    void *state[2] = {(void *)m, &cache};
    const ct_decoder d = {.vocab = ct_nn_captioner_cfg(m)->vocab,
                          .state = state,
                          .step = captioner_step,
                          .reorder = captioner_reorder};
    st = ct_decode_search(&d, B, opts, out, lens, rows);
  }
  // The attention of each image's chosen row: emitted token i over the
  // annotations; the steps after its <eos> are zeroed.
  const int64_t T = opts->max_len;
  for (int64_t b = 0; st == CT_OK && alphas && b < B; b++) {
    const int64_t used = lens[b] < T ? lens[b] + 1 : T;
    memcpy(alphas + b * T * L, cache.alphas + rows[b] * T * L,
           (size_t)(used * L) * sizeof(float));
    memset(alphas + (b * T + used) * L, 0,
           (size_t)((T - used) * L) * sizeof(float));
  }
  free(rows);
  ct_arena_rewind(start);
  ct_grad_set_enabled(was);
  return st;
}
