// bench_bpe: learning BPE merges (data/bpe.h) from Multi30k's training
// split and tokenizing it, against the word tokenizer's pass over the same
// text in the same run.
//
//   bench_bpe [MULTI30K_DIR] [--merges N] [--repeats N]
//
// MULTI30K_DIR defaults to ../shared/data/multi30k beside the source tree.
// Lines (medians of the repeats; the reading of the gzip files is not
// timed):
//   bpe_learn corpus=multi30k pairs=29000 merges=8000 threads=T words=..
//     distinct_words=.. count_ms=.. learn_ms=.. total_ms=.. learn_per_count=..
//   bpe_tokenize corpus=multi30k lines=58000 kind=word|bpe|char ms=..
//     tokens=.. ratio_to_word=..
// count_ms: the word tokenizer counting the words of both sides (what
// learning starts from); learn_ms: the merges from those counts; total_ms:
// both, which is what a run spends before training (the budget:
// under 5 s on 2 threads). Learning runs on one thread whatever T is (the
// merges are the same at any thread count; the line at T = 1 and T = 2
// shows it costs the same).
#include "bench/bench_util.h"
#include "core/threads.h"
#include "data/bpe.h"
#include "data/text.h"
#include "data/text_tokenizer.h"
#include "data/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CT_SOURCE_ROOT
#define CT_SOURCE_ROOT "."
#endif

static int die(const char *what) {
  fprintf(stderr, "bench_bpe: %s: %s\n", what, ct_last_error());
  return 1;
}

static ct_status count_words(const ct_parallel_text *p, ct_vocab_counter *c) {
  const ct_string_list *sides[2] = {&p->src, &p->tgt};
  ct_status st = CT_OK;
  for (int s = 0; s < 2 && !st; s++)
    for (int64_t i = 0; i < sides[s]->count && !st; i++)
      st = ct_vocab_counter_add_text(c, ct_string_list_get(sides[s], i), true);
  return st;
}

// Tokenizes both sides; the token count in *tokens.
static ct_status tokenize_all(const ct_text_tokenizer *t,
                              const ct_parallel_text *p, int64_t *tokens) {
  const ct_string_list *sides[2] = {&p->src, &p->tgt};
  ct_string_list out = {0};
  ct_status st = CT_OK;
  *tokens = 0;
  for (int s = 0; s < 2 && !st; s++)
    for (int64_t i = 0; i < sides[s]->count && !st; i++) {
      ct_string_list_clear(&out);
      st = ct_text_tokenizer_tokenize(t, ct_string_list_get(sides[s], i), &out);
      *tokens += out.count;
    }
  ct_string_list_free(&out);
  return st;
}

int main(int argc, char **argv) {
  const char *dir = CT_SOURCE_ROOT "/../shared/data/multi30k";
  int64_t merges = 8000;
  int repeats = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--merges") && i + 1 < argc)
      merges = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = atoi(argv[++i]);
    else
      dir = argv[i];
  }
  if (repeats < 1 || repeats > 100) repeats = 5;
  char de[1024], en[1024];
  snprintf(de, sizeof de, "%s/train.de.gz", dir);
  snprintf(en, sizeof en, "%s/train.en.gz", dir);
  ct_parallel_text p;
  if (ct_parallel_text_read_pair(de, en, 0, &p) != CT_OK)
    return die("reading Multi30k");

  double count_ms[100], learn_ms[100], total_ms[100];
  int64_t words = 0, distinct = 0, learned = 0;
  char *first = NULL;
  size_t first_size = 0;
  for (int threads = 1; threads <= 2; threads++) {
    ct_set_threads(threads);
    for (int r = 0; r < repeats; r++) {
      ct_vocab_counter c = {0};
      double t0 = bench_now_s();
      if (count_words(&p, &c) != CT_OK) return die("counting");
      double t1 = bench_now_s();
      ct_bpe b;
      if (ct_bpe_learn(&b, &c, merges) != CT_OK) return die("learning");
      double t2 = bench_now_s();
      count_ms[r] = 1e3 * (t1 - t0);
      learn_ms[r] = 1e3 * (t2 - t1);
      total_ms[r] = 1e3 * (t2 - t0);
      distinct = ct_string_table_count(&c.tokens);
      words = 0;
      for (int64_t i = 0; i < distinct; i++) words += c.counts[i];
      learned = ct_bpe_merge_count(&b);
      char *buf;
      size_t size;
      if (ct_bpe_save(&b, &buf, &size) != CT_OK) return die("saving");
      if (!first) {
        first = buf;
        first_size = size;
      } else {
        if (size != first_size || memcmp(buf, first, size)) {
          fprintf(stderr, "bench_bpe: the merges differ between runs\n");
          return 1;
        }
        free(buf);
      }
      ct_bpe_free(&b);
      ct_vocab_counter_free(&c);
    }
    double cm = bench_median(count_ms, repeats);
    double lm = bench_median(learn_ms, repeats);
    double tm = bench_median(total_ms, repeats);
    printf(
        "bpe_learn corpus=multi30k pairs=%lld merges=%lld threads=%d "
        "words=%lld distinct_words=%lld count_ms=%.1f learn_ms=%.1f "
        "total_ms=%.1f learn_per_count=%.2f\n",
        (long long)p.src.count, (long long)learned, threads, (long long)words,
        (long long)distinct, cm, lm, tm, lm / cm);
  }

  ct_text_tokenizer t[3];
  static const ct_tokenizer_kind kinds[3] = {
      CT_TOKENIZER_WORD, CT_TOKENIZER_BPE, CT_TOKENIZER_CHAR};
  for (int k = 0; k < 3; k++) ct_text_tokenizer_init(&t[k], kinds[k], true);
  if (ct_bpe_load(&t[1].bpe, first, first_size, "merges") != CT_OK)
    return die("loading the merges");
  double word_ms = 0.0;
  for (int k = 0; k < 3; k++) {
    double ms[100];
    int64_t tokens = 0;
    for (int r = 0; r < repeats; r++) {
      double t0 = bench_now_s();
      if (tokenize_all(&t[k], &p, &tokens) != CT_OK) return die("tokenizing");
      ms[r] = 1e3 * (bench_now_s() - t0);
    }
    double m = bench_median(ms, repeats);
    if (k == 0) word_ms = m;
    printf(
        "bpe_tokenize corpus=multi30k lines=%lld kind=%s ms=%.1f tokens=%lld "
        "ratio_to_word=%.2f\n",
        (long long)(2 * p.src.count), ct_tokenizer_kind_name(kinds[k]), m,
        (long long)tokens, m / word_ms);
    ct_text_tokenizer_free(&t[k]);
  }
  free(first);
  ct_parallel_text_free(&p);
  return 0;
}
