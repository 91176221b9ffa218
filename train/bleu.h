// Corpus BLEU, computed as sacreBLEU's corpus_bleu does by default.
//
// That is: signature "case:mixed|eff:no|tok:13a|smooth:exp", 1..4-grams.
// Each segment is right-stripped and tokenized with the mteval-v13a rules;
// hypothesis n-gram counts are clipped by the maximum count over the
// segment's references and summed over the corpus; the reference length is
// the one closest to the hypothesis length (the shorter on a tie). Then
// (Papineni et al. 2002, with sacreBLEU's 'exp' smoothing, Chen & Cherry 2014
// method 3):
//   p_n  = 100 * correct_n / total_n, or, when correct_n = 0,
//          100 / (2^k * total_n) for the k-th such order
//   BP   = 1 if sys_len >= ref_len, else exp(1 - ref_len / sys_len) (0 if sys_len = 0)
//   BLEU = BP * exp(mean_n log p_n)
// and BLEU = 0 when no n-gram of any order matches. At corpus scale the
// smoothing almost never applies; it is kept so scores match sacreBLEU exactly.
//
// Not here: lowercasing, other tokenizers, chrF/TER, bootstrap intervals.
#ifndef CT_TRAIN_BLEU_H
#define CT_TRAIN_BLEU_H

#include "core/error.h"

#include <stddef.h>
#include <stdint.h>

enum { CT_BLEU_ORDER = 4 };

typedef struct ct_bleu {
  double score;                      // 0..100
  double precisions[CT_BLEU_ORDER];  // percent, after smoothing
  int64_t correct[CT_BLEU_ORDER];    // clipped matches per order
  int64_t total[CT_BLEU_ORDER];      // hypothesis n-grams per order
  double bp;                         // brevity penalty
  int64_t sys_len, ref_len;          // tokens, summed over the corpus
} ct_bleu;

// Scores `n` hypotheses against `n_refs` reference streams: refs[r * n + i]
// is the r-th reference of segment i. NULL or "" references are skipped
// (fewer references for that segment), but every segment needs at least one
// (sacreBLEU refuses an empty reference too). Strings are UTF-8.
ct_status ct_bleu_corpus(const char *const *hyps, const char *const *refs,
                         int64_t n, int n_refs, ct_bleu *out);

// Cumulative BLEU-n (n in 1..4) of a scored corpus, as captioning reports
// BLEU-1..4 (NLTK's corpus_bleu with uniform weights 1/n, no smoothing; the
// COCO caption evaluation's Bleu_n up to its 1e-9 guard):
//   BLEU-n = 100 * BP * exp((1/n) sum_{k<=n} log(correct_k / total_k))
// from the clipped counts and brevity penalty of ct_bleu_corpus (so with
// several references per segment: counts clipped by the maximum over them,
// the closest reference length). 0 when an order up to n has no match or
// no n-gram; ct_bleu_cumulative(b, 4) equals b->score whenever every order
// matches.
double ct_bleu_cumulative(const ct_bleu *b, int n);

// The 13a tokenization of one line (after the right-strip), tokens separated
// by single spaces. malloc'd; NULL on allocation failure.
char *ct_bleu_tokenize_13a(const char *line);

// sacreBLEU's verbose line: "BLEU = 34.12 60.0/40.0/30.0/20.0 (BP = 1.000
// ratio = 1.000 hyp_len = 10 ref_len = 10)". Returns buf.
char *ct_bleu_format(const ct_bleu *b, char *buf, size_t size);

#endif
