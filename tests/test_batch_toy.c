// The translation batcher (data/batch.h) and the toy corpora
// (data/toy_translation.h): every pair once per epoch, padding and shifted
// targets, determinism by (seed, epoch), exact resume with seek, length
// limits; toy corpora deterministic, held-out splits disjoint from train,
// the grammar's reordering and inflection (sample pairs are printed), the
// writer, and the whole text pipeline on a toy corpus.
#include "core/rng.h"
#include "data/batch.h"
#include "data/tokenizer.h"
#include "data/toy_translation.h"
#include "tests/harness.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---- batcher ----

// A corpus of n pairs with random lengths; pair i has ids derived from i so
// rows can be checked against it. Every 97th pair has an empty source.
static void make_corpus(ct_pair_corpus *c, int64_t n) {
  ct_rng r = ct_rng_make(5, 0);
  int32_t src[40], tgt[48];
  for (int64_t i = 0; i < n; i++) {
    int64_t s = i % 97 == 0 ? 0 : 1 + (int64_t)ct_rng_next_below(&r, 35);
    int64_t t = s + (int64_t)ct_rng_next_below(&r, 5);  // correlated, as
                                                        // in real corpora
    for (int64_t j = 0; j < s; j++) src[j] = 4 + (int32_t)((i * 7 + j) % 500);
    for (int64_t j = 0; j < t; j++) tgt[j] = 4 + (int32_t)((i * 11 + j) % 500);
    ct_pair_corpus_add(c, src, s, tgt, t);
  }
}

// Checks one batch against the corpus (ids, padding, shifted targets, sizes).
static void check_batch(const ct_batch *x, const ct_pair_corpus *c,
                        const ct_batch_options *o) {
  int64_t max_s = 0, max_t = 0, src_tokens = 0, tgt_tokens = 0;
  bool ok = true;
  for (int64_t r = 0; r < x->B; r++) {
    int64_t p = x->pair[r];
    const int32_t *src = c->ids + c->starts[2 * p];
    const int32_t *tgt = c->ids + c->starts[2 * p + 1];
    int64_t s = ct_pair_corpus_src_len(c, p), t = ct_pair_corpus_tgt_len(c, p);
    if (o->max_src_len && s > o->max_src_len) s = o->max_src_len;
    if (o->max_tgt_len && t > o->max_tgt_len) t = o->max_tgt_len;
    ok &= x->src_len[r] == s && x->tgt_len[r] == t + 1;
    for (int64_t j = 0; j < x->S; j++)
      ok &= x->src[r * x->S + j] == (j < s ? src[j] : CT_VOCAB_PAD);
    const int32_t *in = x->tgt_in + r * x->T, *out = x->tgt_out + r * x->T;
    ok &= in[0] == CT_VOCAB_BOS;
    for (int64_t j = 1; j < x->T; j++)
      ok &= in[j] == (j <= t ? tgt[j - 1] : CT_VOCAB_PAD);
    for (int64_t j = 0; j < x->T; j++)
      ok &= out[j] == (j < t ? tgt[j] : j == t ? CT_VOCAB_EOS : CT_VOCAB_PAD);
    if (s > max_s) max_s = s;
    if (t + 1 > max_t) max_t = t + 1;
    src_tokens += s;
    tgt_tokens += t + 1;
  }
  CHECK(ok, "batch (epoch %lld, position %lld): rows do not match the corpus",
        (long long)x->epoch, (long long)x->position);
  CHECK(x->S == max_s && x->T == max_t, "S %lld T %lld, want %lld %lld",
        (long long)x->S, (long long)x->T, (long long)max_s, (long long)max_t);
  CHECK(x->src_tokens == src_tokens && x->tgt_tokens == tgt_tokens,
        "token counts");
  if (o->batch_size) CHECK(x->B <= o->batch_size, "B %lld", (long long)x->B);
  int64_t width = x->S > x->T ? x->S : x->T;
  if (o->max_tokens)
    CHECK(x->B == 1 || x->B * width <= o->max_tokens, "B*width %lld > %lld",
          (long long)(x->B * width), (long long)o->max_tokens);
}

// A hash of a batch's contents, to compare batch sequences.
static uint64_t batch_hash(const ct_batch *x) {
  uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
  MIX(x->B);
  MIX(x->S);
  MIX(x->T);
  for (int64_t i = 0; i < x->B; i++) MIX(x->pair[i]);
  for (int64_t i = 0; i < x->B * x->S; i++) MIX(x->src[i]);
  for (int64_t i = 0; i < x->B * x->T; i++) MIX(x->tgt_out[i]);
#undef MIX
  return h;
}

// Runs one whole epoch: checks every batch and that each kept pair appears
// exactly once. Returns the padding fraction; hashes[] gets one per batch.
static double run_epoch(ct_batcher *b, int64_t epoch, uint64_t *hashes,
                        int64_t *count) {
  const ct_pair_corpus *c = b->corpus;
  int64_t n = ct_batcher_epoch_batches(b, epoch);
  CHECK(ct_batcher_seek(b, epoch, 0) == CT_OK, "seek: %s", ct_last_error());
  int *seen = calloc((size_t)c->count, sizeof *seen);
  int64_t real = 0, padded = 0;
  for (int64_t k = 0; k < n; k++) {
    const ct_batch *x;
    CHECK(ct_batcher_next(b, &x) == CT_OK, "next: %s", ct_last_error());
    CHECK(x->epoch == epoch && x->position == k, "batch %lld/%lld is %lld/%lld",
          (long long)epoch, (long long)k, (long long)x->epoch,
          (long long)x->position);
    check_batch(x, c, &b->opt);
    for (int64_t r = 0; r < x->B; r++) seen[x->pair[r]]++;
    real += x->src_tokens + x->tgt_tokens;
    padded += x->B * (x->S + x->T);
    if (hashes) hashes[k] = batch_hash(x);
  }
  int64_t once = 0, bad = 0;
  for (int64_t i = 0; i < b->kept_count; i++) once += seen[b->kept[i]] == 1;
  for (int64_t i = 0; i < c->count; i++) bad += seen[i] > 1;
  CHECK(once == b->kept_count && bad == 0,
        "epoch %lld: %lld of %lld kept pairs seen once, %lld more than once",
        (long long)epoch, (long long)once, (long long)b->kept_count,
        (long long)bad);
  free(seen);
  if (count) *count = n;
  return 1.0 - (double)real / (double)padded;
}

// Data-parallel reading: N ranks, rank r seeked to batch r * A and reading
// A of every N * A (ct_batcher_set_stride), together read the batches of
// one sequential reader, each exactly once, across epoch ends, and each
// rank's (epoch, position) after a step is the sequential one plus r * A.
static void test_stride(void) {
  ct_pair_corpus c = {0};
  make_corpus(&c, 700);
  ct_batch_options o = {
      .batch_size = 32, .shuffle = true, .pool_size = 128, .seed = 3};
  ct_batcher seq;
  ct_batcher_init(&seq, &c, &o);
  enum { STEPS = 40 };  // epochs of ~22 batches: three epoch ends
  uint64_t want[4 * STEPS];
  int64_t where[4 * STEPS + 1][2] = {{0, 0}};
  for (int g = 0; g < 4 * STEPS; g++) {
    const ct_batch *x;
    ct_batcher_next(&seq, &x);
    want[g] = batch_hash(x);
    where[g + 1][0] = seq.epoch;
    where[g + 1][1] = seq.position;
  }
  static const int64_t layouts[][2] = {{2, 1}, {4, 1}, {2, 2}, {3, 1}};
  for (size_t k = 0; k < sizeof layouts / sizeof *layouts; k++) {
    const int64_t N = layouts[k][0], A = layouts[k][1], K = N * A;
    const int64_t steps = 4 * STEPS / K;
    int bad = 0, bad_state = 0;
    for (int64_t r = 0; r < N; r++) {
      ct_batcher b;
      ct_batcher_init(&b, &c, &o);
      ct_batcher_set_stride(&b, A, (N - 1) * A);
      CHECK(ct_batcher_seek(&b, where[r * A][0], where[r * A][1]) == CT_OK,
            "seek: %s", ct_last_error());
      for (int64_t s = 0; s < steps; s++) {
        for (int64_t a = 0; a < A; a++) {
          const ct_batch *x;
          ct_batcher_next(&b, &x);
          bad += batch_hash(x) != want[s * K + r * A + a];
        }
        // After the step: where the sequential reader is r * A further on
        // (the lead, r = 0, checkpoints exactly the sequential state).
        const int64_t g = (s + 1) * K + r * A;
        bad_state += g <= 4 * STEPS &&
                     (b.epoch != where[g][0] || b.position != where[g][1]);
      }
      ct_batcher_free(&b);
    }
    CHECK(bad == 0 && bad_state == 0,
          "%lld ranks x %lld: %d batches differ from the sequential reader's, "
          "%d states",
          (long long)N, (long long)A, bad, bad_state);
  }
  ct_batcher_free(&seq);
  ct_pair_corpus_free(&c);
}

static void test_batcher(void) {
  ct_pair_corpus c = {0};
  make_corpus(&c, 2000);
  const int64_t empty = (2000 + 96) / 97;

  ct_batch_options o = {
      .batch_size = 32, .shuffle = true, .pool_size = 256, .seed = 7};
  ct_batcher b;
  CHECK(ct_batcher_init(&b, &c, &o) == CT_OK, "init: %s", ct_last_error());
  CHECK(b.kept_count == 2000 - empty && b.dropped == empty,
        "empty sources dropped: kept %lld", (long long)b.kept_count);
  uint64_t h0[200], h1[200], again[200];
  int64_t n0, n1;
  double pad_sorted = run_epoch(&b, 0, h0, &n0);
  run_epoch(&b, 1, h1, &n1);
  CHECK(n0 != n1 || memcmp(h0, h1, (size_t)n0 * 8) != 0,
        "epochs 0 and 1 give the same batches");

  // Same seed -> same batches; another seed -> others.
  ct_batcher b2;
  ct_batcher_init(&b2, &c, &o);
  int64_t n;
  run_epoch(&b2, 1, again, &n);
  CHECK(n == n1 && !memcmp(again, h1, (size_t)n * 8), "same seed differs");
  ct_batcher_free(&b2);
  ct_batch_options o2 = o;
  o2.seed = 8;
  ct_batcher_init(&b2, &c, &o2);
  run_epoch(&b2, 1, again, &n);
  CHECK(n != n1 || memcmp(again, h1, (size_t)n * 8) != 0, "seed ignored");
  ct_batcher_free(&b2);

  // Resume: seek to (1, 9) reproduces the rest of epoch 1, then epoch 2.
  ct_batcher_init(&b2, &c, &o);
  CHECK(ct_batcher_seek(&b2, 1, 9) == CT_OK, "seek: %s", ct_last_error());
  bool same = true;
  for (int64_t k = 9; k < n1; k++) {
    const ct_batch *x;
    ct_batcher_next(&b2, &x);
    same &= x->epoch == 1 && x->position == k && batch_hash(x) == h1[k];
  }
  CHECK(same, "seek(1, 9) does not reproduce epoch 1");
  const ct_batch *x;
  ct_batcher_next(&b2, &x);
  uint64_t first2 = batch_hash(x);
  CHECK(x->epoch == 2 && x->position == 0, "after epoch 1: %lld/%lld",
        (long long)x->epoch, (long long)x->position);
  CHECK(b2.epoch == 2 && b2.position == 1, "state (%lld, %lld)",
        (long long)b2.epoch, (long long)b2.position);
  ct_batcher_seek(&b, 2, 0);
  ct_batcher_next(&b, &x);
  CHECK(batch_hash(x) == first2, "epoch 2 after wrap-around differs");
  CHECK(ct_batcher_seek(&b2, 1, n1 + 1) == CT_ERR_ARG, "seek past the end");
  printf("seek past the end -> %s\n", ct_last_error());
  CHECK(ct_batcher_seek(&b2, 1, n1) == CT_OK, "seek to the end");
  ct_batcher_next(&b2, &x);
  CHECK(x->epoch == 2 && batch_hash(x) == first2, "end of epoch -> next");
  ct_batcher_free(&b2);
  ct_batcher_free(&b);

  // No length sorting: more padding.
  o2 = o;
  o2.pool_size = 0;
  ct_batcher_init(&b, &c, &o2);
  double pad_random = run_epoch(&b, 0, NULL, NULL);
  ct_batcher_free(&b);
  printf(
      "batch_size 32: %lld batches, padding %.1f%% sorted in pools of 256 "
      "vs %.1f%% unsorted\n",
      (long long)n0, 100 * pad_sorted, 100 * pad_random);
  CHECK(pad_sorted < 0.5 * pad_random, "pools do not reduce padding");

  // Token budget, with truncation.
  o2 = (ct_batch_options){.max_tokens = 300,
                          .max_src_len = 20,
                          .max_tgt_len = 15,
                          .truncate = true,
                          .shuffle = true,
                          .pool_size = 500,
                          .seed = 3};
  ct_batcher_init(&b, &c, &o2);
  CHECK(b.kept_count == 2000 - empty, "truncate keeps all");
  CHECK(ct_batch_count_kept(&c, &o2) == b.kept_count, "count_kept %lld",
        (long long)ct_batch_count_kept(&c, &o2));
  double pad = run_epoch(&b, 0, NULL, &n);
  printf("max_tokens 300, truncated to 20/15: %lld batches, padding %.1f%%\n",
         (long long)n, 100 * pad);
  ct_batcher_free(&b);
  // Dropping instead of truncating.
  o2.truncate = false;
  ct_batcher_init(&b, &c, &o2);
  int64_t fit = 0;
  for (int64_t i = 0; i < c.count; i++)
    fit += ct_pair_corpus_src_len(&c, i) > 0 &&
           ct_pair_corpus_src_len(&c, i) <= 20 &&
           ct_pair_corpus_tgt_len(&c, i) <= 15;
  CHECK(b.kept_count == fit, "drop: kept %lld, want %lld",
        (long long)b.kept_count, (long long)fit);
  CHECK(ct_batch_count_kept(&c, &o2) == fit, "drop: count_kept %lld",
        (long long)ct_batch_count_kept(&c, &o2));
  run_epoch(&b, 3, NULL, NULL);
  ct_batcher_free(&b);

  // Evaluation order: no shuffle, no sorting -> corpus order.
  o2 = (ct_batch_options){.batch_size = 50};
  ct_batcher_init(&b, &c, &o2);
  int64_t last = -1;
  same = true;
  n = ct_batcher_epoch_batches(&b, 0);
  for (int64_t k = 0; k < n; k++) {
    ct_batcher_next(&b, &x);
    for (int64_t r = 0; r < x->B; r++) {
      same &= x->pair[r] > last;
      last = x->pair[r];
    }
  }
  CHECK(same && last == 1999, "unshuffled batches are not in corpus order");
  ct_batcher_free(&b);

  // Bad options.
  o2 = (ct_batch_options){.shuffle = true};
  CHECK(ct_batcher_init(&b, &c, &o2) == CT_ERR_ARG, "no size limit accepted");
  printf("no size limit -> %s\n", ct_last_error());
  o2 = (ct_batch_options){.batch_size = 4, .max_src_len = 1};
  ct_pair_corpus tiny = {0};
  const int32_t ids[3] = {5, 6, 7};
  ct_pair_corpus_add(&tiny, ids, 3, ids, 2);
  CHECK(ct_batch_count_kept(&tiny, &o2) == 0, "count_kept of nothing left");
  CHECK(ct_batcher_init(&b, &tiny, &o2) == CT_ERR_ARG, "nothing left");
  printf("nothing left -> %s\n", ct_last_error());
  ct_pair_corpus_free(&tiny);
  ct_pair_corpus_free(&c);
}

// ---- toy corpora ----

static bool same_text(const ct_parallel_text *a, const ct_parallel_text *b) {
  if (a->src.count != b->src.count) return false;
  return a->src.chars_len == b->src.chars_len &&
         a->tgt.chars_len == b->tgt.chars_len &&
         !memcmp(a->src.chars, b->src.chars, (size_t)a->src.chars_len) &&
         !memcmp(a->tgt.chars, b->tgt.chars, (size_t)a->tgt.chars_len);
}

// Every val/test source is new: not in train and not repeated.
static void check_held_out(const ct_toy_corpus *c, const char *what) {
  ct_string_table seen = {0};
  const ct_parallel_text *splits[3] = {&c->train, &c->val, &c->test};
  int64_t dup = 0;
  for (int s = 0; s < 3; s++)
    for (int64_t i = 0; i < splits[s]->src.count; i++) {
      int added;
      const char *t = ct_string_list_get(&splits[s]->src, i);
      ct_string_table_add(&seen, t, strlen(t), &added);
      dup += !added;
    }
  CHECK(dup == 0, "%s: %lld sources repeated across/within splits", what,
        (long long)dup);
  ct_string_table_free(&seen);
}

static bool starts_with(const char *s, const char *p) {
  return !strncmp(s, p, strlen(p));
}
static bool ends_with(const char *s, const char *p) {
  size_t n = strlen(s), k = strlen(p);
  return n >= k && !strcmp(s + n - k, p);
}

// Over all pairs whose source contains `src_pat` (and, when `plain`, no
// subordinate clause), the target must contain `tgt_pat` (at the start or
// end by the flags). Adds the pairs matched / broken to the counters.
enum { ANYWHERE, AT_START, AT_END };
static void apply_rule(const ct_parallel_text *p, const char *src_pat,
                       int src_where, const char *tgt_pat, int tgt_where,
                       bool plain, int64_t *matched, int64_t *broken) {
  for (int64_t i = 0; i < p->src.count; i++) {
    const char *s = ct_string_list_get(&p->src, i);
    const char *t = ct_string_list_get(&p->tgt, i);
    if (plain &&
        (strstr(s, "because") || strstr(s, "while") || strstr(s, "although")))
      continue;
    bool hit = src_where == AT_START ? starts_with(s, src_pat)
                                     : strstr(s, src_pat) != NULL;
    if (!hit) continue;
    ++*matched;
    bool ok = tgt_where == AT_START ? starts_with(t, tgt_pat)
              : tgt_where == AT_END ? ends_with(t, tgt_pat)
                                    : strstr(t, tgt_pat) != NULL;
    if (!ok && (*broken)++ < 3)
      printf("  rule \"%s\" -> \"%s\" broken by: %s -> %s\n", src_pat, tgt_pat,
             s, t);
  }
}

static void report_rule(const char *src_pat, const char *tgt_pat,
                        int64_t matched, int64_t broken) {
  CHECK(matched > 0 && broken == 0,
        "rule \"%s\" -> \"%s\": %lld of %lld broken", src_pat, tgt_pat,
        (long long)broken, (long long)matched);
  printf("  %-28s -> %-20s holds in %lld pairs\n", src_pat, tgt_pat,
         (long long)matched);
}

static void check_rule(const ct_parallel_text *p, const char *src_pat,
                       int src_where, const char *tgt_pat, int tgt_where,
                       bool plain) {
  int64_t matched = 0, broken = 0;
  apply_rule(p, src_pat, src_where, tgt_pat, tgt_where, plain, &matched,
             &broken);
  report_rule(src_pat, tgt_pat, matched, broken);
}

// The same object after any form of several verbs: "<verb form> <obj>".
static void check_object_rule(const ct_parallel_text *p,
                              const char *const *forms, const char *obj,
                              const char *tgt_pat, const char *label) {
  int64_t matched = 0, broken = 0;
  char pat[128];
  for (int i = 0; forms[i]; i++) {
    snprintf(pat, sizeof pat, " %s %s", forms[i], obj);
    apply_rule(p, pat, ANYWHERE, tgt_pat, ANYWHERE, false, &matched, &broken);
  }
  report_rule(label, tgt_pat, matched, broken);
}

static void test_toy_sequences(void) {
  ct_toy_options o = {.task = CT_TOY_REVERSE,
                      .seed = 1,
                      .train_size = 500,
                      .val_size = 50,
                      .test_size = 50};
  ct_toy_corpus c, d;
  CHECK(ct_toy_translation_generate(&o, &c) == CT_OK, "reverse: %s",
        ct_last_error());
  check_held_out(&c, "reverse");
  bool reversed = true;
  for (int64_t i = 0; i < c.train.src.count; i++) {
    ct_string_list a = {0}, b = {0};
    ct_tokenize(ct_string_list_get(&c.train.src, i), false, &a);
    ct_tokenize(ct_string_list_get(&c.train.tgt, i), false, &b);
    reversed &= a.count == b.count && a.count >= 3 && a.count <= 12;
    for (int64_t j = 0; reversed && j < a.count; j++)
      reversed &= !strcmp(ct_string_list_get(&a, j),
                          ct_string_list_get(&b, a.count - 1 - j));
    ct_string_list_free(&a);
    ct_string_list_free(&b);
  }
  CHECK(reversed, "reverse targets are not the reversed sources");
  printf("reverse: %s -> %s\n", ct_string_list_get(&c.train.src, 0),
         ct_string_list_get(&c.train.tgt, 0));
  ct_toy_corpus_free(&c);

  o.task = CT_TOY_COPY;
  o.min_len = 2;
  o.max_len = 5;
  o.symbols = 10;
  ct_toy_translation_generate(&o, &c);
  ct_toy_translation_generate(&o, &d);
  CHECK(same_text(&c.train, &d.train) && same_text(&c.test, &d.test),
        "copy not deterministic");
  bool copied = true;
  for (int64_t i = 0; i < c.val.src.count; i++)
    copied &= !strcmp(ct_string_list_get(&c.val.src, i),
                      ct_string_list_get(&c.val.tgt, i));
  CHECK(copied, "copy targets differ from sources");
  check_held_out(&c, "copy");
  printf("copy: %s -> %s\n", ct_string_list_get(&c.val.src, 0),
         ct_string_list_get(&c.val.tgt, 0));
  ct_toy_corpus_free(&c);
  ct_toy_corpus_free(&d);

  o.symbols = 2;
  o.min_len = 1;
  o.max_len = 2;  // only 6 distinct sequences
  CHECK(ct_toy_translation_generate(&o, &c) == CT_ERR_ARG, "tiny space");
  printf("too small a space -> %s\n", ct_last_error());
  ct_toy_task task;
  CHECK(ct_toy_task_parse("grammar", &task) == CT_OK &&
            task == CT_TOY_GRAMMAR && ct_toy_task_parse("nope", &task),
        "task names");
}

static void test_toy_grammar(void) {
  ct_toy_options o = {.task = CT_TOY_GRAMMAR,
                      .seed = 42,
                      .train_size = 20000,
                      .val_size = 1000,
                      .test_size = 1000};
  ct_toy_corpus c, d;
  CHECK(ct_toy_translation_generate(&o, &c) == CT_OK, "grammar: %s",
        ct_last_error());
  ct_toy_translation_generate(&o, &d);
  CHECK(same_text(&c.train, &d.train) && same_text(&c.val, &d.val) &&
            same_text(&c.test, &d.test),
        "grammar not deterministic");
  ct_toy_corpus_free(&d);
  o.seed = 43;
  ct_toy_translation_generate(&o, &d);
  CHECK(!same_text(&c.train, &d.train), "seed ignored");
  ct_toy_corpus_free(&d);
  check_held_out(&c, "grammar");

  printf("grammar samples (train):\n");
  for (int64_t i = 0; i < 12; i++)
    printf("  %s\n  -> %s\n", ct_string_list_get(&c.train.src, i),
           ct_string_list_get(&c.train.tgt, i));
  printf("grammar rules over train+val+test:\n");
  ct_parallel_text all = {0};
  const ct_parallel_text *splits[3] = {&c.train, &c.val, &c.test};
  for (int s = 0; s < 3; s++)
    for (int64_t i = 0; i < splits[s]->src.count; i++)
      ct_parallel_text_push(&all, ct_string_list_get(&splits[s]->src, i),
                            ct_string_list_get(&splits[s]->tgt, i));
  // Case by role: nominative subject, accusative / dative object.
  check_rule(&all, "the dog ", AT_START, "der hund ", AT_START, false);
  static const char *const acc_verbs[] = {
      "sees", "saw",   "see",   "finds", "found", "find", "loves", "loved",
      "love", "hears", "heard", "hear",  "knows", "knew", "know",  NULL};
  static const char *const dat_verbs[] = {
      "helps",  "helped", "help",    "follows", "followed",
      "follow", "thanks", "thanked", "thank",   NULL};
  check_object_rule(&all, acc_verbs, "the dog ", "den hund ",
                    "see/find/love/... the dog");
  check_object_rule(&all, dat_verbs, "the dog ", "dem hund ",
                    "help/follow/thank the dog");
  check_object_rule(&all, acc_verbs, "a cat ", "eine katze ",
                    "see/find/love/... a cat");
  check_object_rule(&all, dat_verbs, "a cat ", "einer katze ",
                    "help/follow/thank a cat");
  check_rule(&all, "with the dogs", ANYWHERE, "mit den hunden", ANYWHERE,
             false);
  // Adjectives follow the noun, with endings by article, gender and case.
  check_rule(&all, "the big dog ", AT_START, "der hund große ", AT_START,
             false);
  check_rule(&all, "a big dog ", AT_START, "ein hund großer ", AT_START, false);
  check_object_rule(&all, acc_verbs, "a dog ", "einen hund ",
                    "see/find/love/... a dog");
  check_rule(&all, "many dogs ", AT_START, "viele hunde ", AT_START, false);
  check_object_rule(&all, dat_verbs, "many dogs ", "vielen hunden ",
                    "help/follow/thank many dogs");
  // Many-to-one: contractions and the one-word future.
  check_rule(&all, "in the garden ", ANYWHERE, "im garten ", ANYWHERE, false);
  check_rule(&all, "towards the cat ", ANYWHERE, "zur katze ", ANYWHERE, false);
  check_rule(&all, "the dog will see", AT_START, "der hund sehra ", AT_START,
             false);
  // Reordering: separable particles at the clause end, verb-final
  // subordinate clauses after a comma.
  check_rule(&all, " calls ", ANYWHERE, " an .", AT_END, true);
  check_rule(&all, " because the dog calls ", ANYWHERE, " anruft .", AT_END,
             false);
  check_rule(&all, " because ", ANYWHERE, " , weil ", ANYWHERE, false);

  int64_t src_tokens = 0, tgt_tokens = 0, max_len = 0, reordered = 0;
  for (int64_t i = 0; i < all.src.count; i++) {
    ct_string_list a = {0}, b = {0};
    ct_tokenize(ct_string_list_get(&all.src, i), false, &a);
    ct_tokenize(ct_string_list_get(&all.tgt, i), false, &b);
    src_tokens += a.count;
    tgt_tokens += b.count;
    if (a.count > max_len) max_len = a.count;
    if (b.count > max_len) max_len = b.count;
    // Sentences with a verb-final subordinate clause or a separated particle.
    const char *t = ct_string_list_get(&all.tgt, i);
    reordered += strstr(t, " , ") || ends_with(t, " an .") ||
                 ends_with(t, " ein .") || ends_with(t, " ab .") ||
                 ends_with(t, " auf .");
    ct_string_list_free(&a);
    ct_string_list_free(&b);
  }
  printf(
      "grammar: %lld pairs, mean length %.1f -> %.1f tokens, max %lld; "
      "%.0f%% with a subordinate clause or separated particle\n",
      (long long)all.src.count, (double)src_tokens / (double)all.src.count,
      (double)tgt_tokens / (double)all.src.count, (long long)max_len,
      100.0 * (double)reordered / (double)all.src.count);
  CHECK(max_len <= 30, "sentences too long: %lld", (long long)max_len);
  ct_parallel_text_free(&all);

  // The pipeline: vocabularies from train, encode, batch.
  ct_vocab_counter sc = {0}, tc = {0};
  for (int64_t i = 0; i < c.train.src.count; i++) {
    ct_vocab_counter_add_text(&sc, ct_string_list_get(&c.train.src, i), true);
    ct_vocab_counter_add_text(&tc, ct_string_list_get(&c.train.tgt, i), true);
  }
  ct_vocab sv, tv;
  ct_vocab_build(&sv, &sc, 1, 0);
  ct_vocab_build(&tv, &tc, 1, 0);
  ct_vocab_counter_free(&sc);
  ct_vocab_counter_free(&tc);
  ct_pair_corpus train = {0}, test = {0};
  int64_t unk_train, unk_test;
  ct_text_tokenizer words;
  ct_text_tokenizer_init(&words, CT_TOKENIZER_WORD, true);
  CHECK(ct_pair_corpus_encode(&train, &c.train, &words, &sv, &words, &tv,
                              &unk_train) == CT_OK &&
            ct_pair_corpus_encode(&test, &c.test, &words, &sv, &words, &tv,
                                  &unk_test) == CT_OK,
        "encode: %s", ct_last_error());
  CHECK(unk_train == 0, "%lld unknown train tokens", (long long)unk_train);
  printf(
      "pipeline: vocab %lld source / %lld target ids, %lld unknown test "
      "tokens\n",
      (long long)ct_vocab_size(&sv), (long long)ct_vocab_size(&tv),
      (long long)unk_test);
  ct_batch_options bo = {
      .max_tokens = 1024, .shuffle = true, .pool_size = 4096, .seed = 1};
  ct_batcher b;
  ct_batcher_init(&b, &train, &bo);
  int64_t nb;
  double pad = run_epoch(&b, 0, NULL, &nb);
  printf("pipeline: %lld batches of <= 1024 tokens, padding %.1f%%\n",
         (long long)nb, 100 * pad);
  const ct_batch *x;
  ct_batcher_seek(&b, 0, 0);
  ct_batcher_next(&b, &x);
  const char *toks[64];
  int64_t n;
  ct_vocab_decode(&tv, x->tgt_out, x->T, toks, &n);
  char *s = ct_detokenize(toks, n);
  printf(
      "pipeline: first batch B=%lld S=%lld T=%lld, row 0 target decodes "
      "to \"%s\"\n",
      (long long)x->B, (long long)x->S, (long long)x->T, s);
  CHECK(s != NULL, "detokenize: %s", ct_last_error());
  {
    // the decoded target has the tokens of the corpus sentence
    ct_string_list a = {0}, t2 = {0};
    ct_tokenize(s, true, &a);
    ct_tokenize(ct_string_list_get(&c.train.tgt, x->pair[0]), true, &t2);
    bool eq = a.count == t2.count;
    for (int64_t j = 0; eq && j < a.count; j++)
      eq = !strcmp(ct_string_list_get(&a, j), ct_string_list_get(&t2, j));
    CHECK(eq, "decoded target differs from the corpus");
    ct_string_list_free(&a);
    ct_string_list_free(&t2);
  }
  free(s);
  ct_batcher_free(&b);
  ct_pair_corpus_free(&train);
  ct_pair_corpus_free(&test);
  ct_vocab_free(&sv);
  ct_vocab_free(&tv);
  ct_toy_corpus_free(&c);
}

static void test_toy_writer(void) {
  char base[] = "/tmp/ct_test_toy_XXXXXX";
  if (!mkdtemp(base)) return;
  char dir[128], path[256], tgt[256];
  snprintf(dir, sizeof dir, "%s/nested/toy", base);
  ct_toy_options o = {.task = CT_TOY_GRAMMAR,
                      .seed = 9,
                      .train_size = 300,
                      .val_size = 30,
                      .test_size = 20};
  CHECK(ct_toy_translation_write(dir, &o, false) == CT_OK, "write: %s",
        ct_last_error());
  ct_toy_corpus c;
  ct_toy_translation_generate(&o, &c);
  static const char *const names[3] = {"train", "val", "test"};
  const ct_parallel_text *splits[3] = {&c.train, &c.val, &c.test};
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s.src", dir, names[i]);
    snprintf(tgt, sizeof tgt, "%s/%s.tgt", dir, names[i]);
    ct_parallel_text p;
    CHECK(ct_parallel_text_read_pair(path, tgt, 0, &p) == CT_OK, "read: %s",
          ct_last_error());
    CHECK(same_text(&p, splits[i]), "%s differs after writing", names[i]);
    ct_parallel_text_free(&p);
  }
  ct_toy_corpus_free(&c);
  CHECK(ct_toy_translation_write(dir, &o, false) == CT_ERR_IO &&
            strstr(ct_last_error(), "train.src already exists"),
        "overwrite refused: %s", ct_last_error());
  printf("writing again -> %s\n", ct_last_error());
  CHECK(ct_toy_translation_write(dir, &o, true) == CT_OK, "overwrite: %s",
        ct_last_error());
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s.src", dir, names[i]);
    remove(path);
    snprintf(path, sizeof path, "%s/%s.tgt", dir, names[i]);
    remove(path);
  }
  rmdir(dir);
  snprintf(path, sizeof path, "%s/nested", base);
  rmdir(path);
  rmdir(base);
}

int main(void) {
  test_batcher();
  test_stride();
  test_toy_sequences();
  test_toy_grammar();
  test_toy_writer();
  return test_summary("batch_toy");
}
