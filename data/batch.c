// Encoded sentence pairs and the length-bucketing, resumable batcher (see
// batch.h).
#include "data/batch.h"
#include "core/rng.h"
#include "data/text_tokenizer.h"

#include <stdlib.h>
#include <string.h>

ct_status ct_pair_corpus_add(ct_pair_corpus *c, const int32_t *src,
                             int64_t src_len, const int32_t *tgt,
                             int64_t tgt_len) {
  if (src_len < 0 || tgt_len < 0 || src_len > INT32_MAX || tgt_len > INT32_MAX)
    return ct_error(CT_ERR_ARG, "pair corpus: bad lengths %lld, %lld",
                    (long long)src_len, (long long)tgt_len);
  ct_status st = ct_grow_array((void **)&c->ids, &c->ids_cap,
                               c->ids_len + src_len + tgt_len, sizeof *c->ids,
                               "pair corpus");
  if (!st)
    st = ct_grow_array((void **)&c->starts, &c->starts_cap, 2 * c->count + 3,
                       sizeof *c->starts, "pair corpus");
  if (st) return st;
  if (src_len) memcpy(c->ids + c->ids_len, src, (size_t)src_len * sizeof *src);
  c->ids_len += src_len;
  if (tgt_len) memcpy(c->ids + c->ids_len, tgt, (size_t)tgt_len * sizeof *tgt);
  c->starts[2 * c->count] = c->ids_len - src_len;
  c->starts[2 * c->count + 1] = c->ids_len;
  c->ids_len += tgt_len;
  c->starts[2 * c->count + 2] = c->ids_len;
  c->count++;
  return CT_OK;
}

// Tokenizes and encodes one side of a sentence into *ids (grown as needed).
static ct_status encode_side(const char *text, const ct_text_tokenizer *t,
                             const ct_vocab *v, ct_string_list *tokens,
                             int32_t **ids, int64_t *cap, int64_t *unknown) {
  ct_string_list_clear(tokens);
  ct_status st = ct_text_tokenizer_tokenize(t, text, tokens);
  if (!st)
    st = ct_grow_array((void **)ids, cap, tokens->count + 1, sizeof **ids,
                       "pair corpus");
  if (st) return st;
  int64_t unk;
  ct_vocab_encode(v, tokens, *ids, &unk);
  *unknown += unk;
  return CT_OK;
}

ct_status ct_pair_corpus_encode(ct_pair_corpus *c, const ct_parallel_text *text,
                                const ct_text_tokenizer *src_tokenizer,
                                const ct_vocab *src_vocab,
                                const ct_text_tokenizer *tgt_tokenizer,
                                const ct_vocab *tgt_vocab, int64_t *unknown) {
  ct_string_list src_tokens = {0}, tgt_tokens = {0};
  int32_t *src_ids = NULL, *tgt_ids = NULL;
  int64_t src_cap = 0, tgt_cap = 0, unk = 0;
  ct_status st = CT_OK;
  for (int64_t i = 0; !st && i < ct_parallel_text_count(text); i++) {
    st = encode_side(ct_string_list_get(&text->src, i), src_tokenizer,
                     src_vocab, &src_tokens, &src_ids, &src_cap, &unk);
    if (!st)
      st = encode_side(ct_string_list_get(&text->tgt, i), tgt_tokenizer,
                       tgt_vocab, &tgt_tokens, &tgt_ids, &tgt_cap, &unk);
    if (!st)
      st = ct_pair_corpus_add(c, src_ids, src_tokens.count, tgt_ids,
                              tgt_tokens.count);
  }
  ct_string_list_free(&src_tokens);
  ct_string_list_free(&tgt_tokens);
  free(src_ids);
  free(tgt_ids);
  if (unknown) *unknown = unk;
  return st;
}

void ct_pair_corpus_free(ct_pair_corpus *c) {
  free(c->ids);
  free(c->starts);
  *c = (ct_pair_corpus){0};
}

// A kept pair while sorting a pool: its lengths, and its place in the pool
// (the last key, so the sort is deterministic whatever qsort does with ties).
struct ct_batch_sort_item {
  int32_t src_len, tgt_len;
  int64_t slot;  // index into kept[]
  int64_t rank;  // position in the pool before sorting
};

static int sort_item_cmp(const void *pa, const void *pb) {
  const struct ct_batch_sort_item *a = pa, *b = pb;
  if (a->src_len != b->src_len) return a->src_len < b->src_len ? -1 : 1;
  if (a->tgt_len != b->tgt_len) return a->tgt_len < b->tgt_len ? -1 : 1;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

static void *alloc_array(int64_t n, size_t size, ct_status *st) {
  if (*st) return NULL;
  void *p = malloc((size_t)(n > 0 ? n : 1) * size);
  if (!p)
    *st = ct_error(CT_ERR_NOMEM, "batcher: out of memory (%lld items)",
                   (long long)n);
  return p;
}

static ct_status check_options(const ct_batch_options *o) {
  if (o->batch_size < 0 || o->max_tokens < 0 || o->max_src_len < 0 ||
      o->max_tgt_len < 0 || o->pool_size < 0)
    return ct_error(CT_ERR_ARG,
                    "batcher: batch_size, max_tokens, max_src_len, "
                    "max_tgt_len and pool_size must be >= 0");
  if (!o->batch_size && !o->max_tokens)
    return ct_error(CT_ERR_ARG,
                    "batcher: set batch_size (pairs per batch) or max_tokens "
                    "(padded tokens per batch), or both");
  return CT_OK;
}

// The length limits on pair i of c: false when it is left out, else true
// with its lengths after truncation in *s, *t.
static bool pair_kept(const ct_pair_corpus *c, int64_t i,
                      const ct_batch_options *o, int64_t *s, int64_t *t) {
  *s = ct_pair_corpus_src_len(c, i);
  *t = ct_pair_corpus_tgt_len(c, i);
  bool too_long = (o->max_src_len && *s > o->max_src_len) ||
                  (o->max_tgt_len && *t > o->max_tgt_len);
  if (*s == 0 || (too_long && !o->truncate)) return false;
  if (o->max_src_len && *s > o->max_src_len) *s = o->max_src_len;
  if (o->max_tgt_len && *t > o->max_tgt_len) *t = o->max_tgt_len;
  return true;
}

int64_t ct_batch_count_kept(const ct_pair_corpus *corpus,
                            const ct_batch_options *opt) {
  int64_t kept = 0, s, t;
  for (int64_t i = 0; i < corpus->count; i++)
    kept += pair_kept(corpus, i, opt, &s, &t);
  return kept;
}

// Applies the length limits: the kept pairs and their effective lengths.
static ct_status filter_pairs(ct_batcher *b) {
  const ct_pair_corpus *c = b->corpus;
  const ct_batch_options *o = &b->opt;
  for (int64_t i = 0; i < c->count; i++) {
    int64_t s, t;
    if (!pair_kept(c, i, o, &s, &t)) {
      b->dropped++;
      continue;
    }
    b->kept[b->kept_count] = i;
    b->kept_src_len[b->kept_count] = (int32_t)s;
    b->kept_tgt_len[b->kept_count] = (int32_t)t;
    b->kept_count++;
  }
  if (!b->kept_count)
    return ct_error(CT_ERR_ARG,
                    "batcher: no sentence pair left out of %lld (all empty "
                    "or over the length limits %lld/%lld)",
                    (long long)c->count, (long long)o->max_src_len,
                    (long long)o->max_tgt_len);
  return CT_OK;
}

// Builds the plan of `epoch`: order[], batch_start[], batch_perm[].
static void plan_epoch(ct_batcher *b, int64_t epoch) {
  const ct_batch_options *o = &b->opt;
  const int64_t n = b->kept_count;
  if (o->shuffle) {
    ct_rng r = ct_rng_make(o->seed,
                           ct_rng_stream(CT_DATA_RNG_SHUFFLE, (uint64_t)epoch));
    ct_rng_permutation(&r, b->order, n);
  } else {
    for (int64_t i = 0; i < n; i++) b->order[i] = i;
  }
  const int64_t pool = o->pool_size ? o->pool_size : n;
  if (o->pool_size) {
    for (int64_t p0 = 0; p0 < n; p0 += pool) {
      int64_t m = n - p0 < pool ? n - p0 : pool;
      for (int64_t k = 0; k < m; k++) {
        int64_t slot = b->order[p0 + k];
        b->scratch[k] = (struct ct_batch_sort_item){
            b->kept_src_len[slot], b->kept_tgt_len[slot], slot, k};
      }
      qsort(b->scratch, (size_t)m, sizeof *b->scratch, sort_item_cmp);
      for (int64_t k = 0; k < m; k++) b->order[p0 + k] = b->scratch[k].slot;
    }
  }
  // Greedy packing; T counts the <bos>/<eos> position.
  int64_t rows = 0, max_s = 0, max_t = 0;
  b->batch_count = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t slot = b->order[i];
    int64_t s = b->kept_src_len[slot], t = b->kept_tgt_len[slot] + 1;
    int64_t ns = s > max_s ? s : max_s, nt = t > max_t ? t : max_t;
    int64_t width = ns > nt ? ns : nt;
    bool full = (o->batch_size && rows + 1 > o->batch_size) ||
                (o->max_tokens && (rows + 1) * width > o->max_tokens);
    if (rows == 0 || full || i % pool == 0) {
      b->batch_start[b->batch_count++] = i;
      rows = 0;
      ns = s;
      nt = t;
    }
    rows++;
    max_s = ns;
    max_t = nt;
  }
  b->batch_start[b->batch_count] = n;
  if (o->shuffle) {
    ct_rng r = ct_rng_make(
        o->seed, ct_rng_stream(CT_DATA_RNG_BATCH_ORDER, (uint64_t)epoch));
    ct_rng_permutation(&r, b->batch_perm, b->batch_count);
  } else {
    for (int64_t i = 0; i < b->batch_count; i++) b->batch_perm[i] = i;
  }
  b->plan_epoch = epoch;
}

ct_status ct_batcher_init(ct_batcher *b, const ct_pair_corpus *corpus,
                          const ct_batch_options *opt) {
  *b = (ct_batcher){.corpus = corpus, .opt = *opt, .plan_epoch = -1};
  ct_status st = check_options(opt);
  if (st) return st;
  const int64_t n = corpus->count;
  b->kept = alloc_array(n, sizeof *b->kept, &st);
  b->kept_src_len = alloc_array(n, sizeof *b->kept_src_len, &st);
  b->kept_tgt_len = alloc_array(n, sizeof *b->kept_tgt_len, &st);
  b->order = alloc_array(n, sizeof *b->order, &st);
  b->batch_start = alloc_array(n + 1, sizeof *b->batch_start, &st);
  b->batch_perm = alloc_array(n, sizeof *b->batch_perm, &st);
  b->scratch = alloc_array(n, sizeof *b->scratch, &st);
  if (!st) st = filter_pairs(b);
  if (st) {
    ct_batcher_free(b);
    return st;
  }
  plan_epoch(b, 0);
  return CT_OK;
}

int64_t ct_batcher_epoch_batches(ct_batcher *b, int64_t epoch) {
  if (epoch < 0) {
    ct_error(CT_ERR_ARG, "batcher: epoch %lld < 0", (long long)epoch);
    return -1;
  }
  if (b->plan_epoch != epoch) plan_epoch(b, epoch);
  return b->batch_count;
}

ct_status ct_batcher_seek(ct_batcher *b, int64_t epoch, int64_t position) {
  int64_t count = ct_batcher_epoch_batches(b, epoch);
  if (count < 0) return ct_last_status();
  if (position < 0 || position > count)
    return ct_error(CT_ERR_ARG,
                    "batcher: position %lld is outside epoch %lld, which has "
                    "%lld batches (was the corpus or the batch options "
                    "changed since the checkpoint?)",
                    (long long)position, (long long)epoch, (long long)count);
  b->epoch = epoch;
  b->position = position;
  b->stride.taken = 0;
  return CT_OK;
}

void ct_batcher_set_stride(ct_batcher *b, int64_t take, int64_t skip) {
  b->stride = (ct_batch_stride){.take = take, .skip = skip};
}

static int64_t epoch_batches(void *b, int64_t epoch) {
  return ct_batcher_epoch_batches(b, epoch);
}

// Makes room for a batch of `rows` rows and `elems` elements per array
// (the three id arrays share batch_cap, the three per-row arrays rows_cap).
static ct_status reserve_batch(ct_batcher *b, int64_t rows, int64_t elems) {
  ct_batch *x = &b->batch;
  void **ids[] = {(void **)&x->src, (void **)&x->tgt_in, (void **)&x->tgt_out};
  void **per_row[] = {(void **)&x->src_len, (void **)&x->tgt_len};
  int64_t ids_cap = b->batch_cap, rows_cap = b->rows_cap, cap;
  for (int i = 0; i < 3; i++) {
    cap = b->batch_cap;
    if (ct_grow_array(ids[i], &cap, elems, sizeof(int32_t), "batcher"))
      return CT_ERR_NOMEM;
    ids_cap = cap;
  }
  for (int i = 0; i < 2; i++) {
    cap = b->rows_cap;
    if (ct_grow_array(per_row[i], &cap, rows, sizeof(int32_t), "batcher"))
      return CT_ERR_NOMEM;
  }
  cap = b->rows_cap;
  if (ct_grow_array((void **)&x->pair, &cap, rows, sizeof(int64_t), "batcher"))
    return CT_ERR_NOMEM;
  rows_cap = cap;
  b->batch_cap = ids_cap;
  b->rows_cap = rows_cap;
  return CT_OK;
}

ct_status ct_batcher_next(ct_batcher *b, const ct_batch **out) {
  *out = NULL;
  if (ct_batcher_epoch_batches(b, b->epoch) < 0) return ct_last_status();
  if (b->position >= b->batch_count) {
    b->epoch++;
    b->position = 0;
    plan_epoch(b, b->epoch);
  }
  const int64_t k = b->batch_perm[b->position];
  const int64_t first = b->batch_start[k], rows = b->batch_start[k + 1] - first;
  int64_t S = 0, T = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t slot = b->order[first + r];
    if (b->kept_src_len[slot] > S) S = b->kept_src_len[slot];
    if (b->kept_tgt_len[slot] + 1 > T) T = b->kept_tgt_len[slot] + 1;
  }
  int64_t elems = rows * (S > T ? S : T);
  ct_status st = reserve_batch(b, rows, elems);
  if (st) return st;
  ct_batch *x = &b->batch;
  x->B = rows;
  x->S = S;
  x->T = T;
  x->epoch = b->epoch;
  x->position = b->position;
  x->src_tokens = x->tgt_tokens = 0;
  memset(x->src, 0, (size_t)(rows * S) * sizeof *x->src);  // CT_VOCAB_PAD
  memset(x->tgt_in, 0, (size_t)(rows * T) * sizeof *x->tgt_in);
  memset(x->tgt_out, 0, (size_t)(rows * T) * sizeof *x->tgt_out);
  const ct_pair_corpus *c = b->corpus;
  for (int64_t r = 0; r < rows; r++) {
    int64_t slot = b->order[first + r], pair = b->kept[slot];
    int32_t s = b->kept_src_len[slot], t = b->kept_tgt_len[slot];
    const int32_t *src = c->ids + c->starts[2 * pair];
    const int32_t *tgt = c->ids + c->starts[2 * pair + 1];
    memcpy(x->src + r * S, src, (size_t)s * sizeof *src);
    int32_t *in = x->tgt_in + r * T, *o = x->tgt_out + r * T;
    in[0] = CT_VOCAB_BOS;
    memcpy(in + 1, tgt, (size_t)t * sizeof *tgt);
    memcpy(o, tgt, (size_t)t * sizeof *tgt);
    o[t] = CT_VOCAB_EOS;
    x->src_len[r] = s;
    x->tgt_len[r] = t + 1;
    x->pair[r] = pair;
    x->src_tokens += s;
    x->tgt_tokens += t + 1;
  }
  ct_batch_stride_advance(&b->stride, &b->epoch, &b->position, epoch_batches, b,
                          false);
  *out = x;
  return CT_OK;
}

void ct_batcher_free(ct_batcher *b) {
  free(b->kept);
  free(b->kept_src_len);
  free(b->kept_tgt_len);
  free(b->order);
  free(b->batch_start);
  free(b->batch_perm);
  free(b->scratch);
  free(b->batch.src);
  free(b->batch.tgt_in);
  free(b->batch.tgt_out);
  free(b->batch.src_len);
  free(b->batch.tgt_len);
  free(b->batch.pair);
  *b = (ct_batcher){0};
}
