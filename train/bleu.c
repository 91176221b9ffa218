// Corpus BLEU with the 13a tokenizer, matching sacreBLEU's corpus_bleu.
//
// The tokenizer replays sacreBLEU's regular expressions as byte loops. Each
// rule is one left-to-right pass with non-overlapping matches, like re.sub.
// Working on UTF-8 bytes gives the same tokens as Python working on code
// points: the rules only test ASCII bytes, and [^0-9] accepts any byte of a
// multi-byte character. Whitespace is Python's str.split() set, including
// the Unicode spaces.
#include "train/bleu.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- tokenization ----

// Byte length of the whitespace character at s (Python's str.isspace), or 0.
static size_t space_len(const unsigned char *s) {
  unsigned char c = s[0];
  if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f))
    return 1;
  if (c == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
  if (c == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3;  // U+1680
  if (c == 0xE2 && s[1] == 0x80 &&
      (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 ||
       s[2] == 0xAF))  // U+2000-200A, 2028, 2029, 202F
    return s[2] >= 0x80 ? 3 : 0;
  if (c == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3;  // U+3000
  return 0;
}

// Python's str.replace(from, to) in place; `to` is never longer than `from`.
static void replace_all(char *s, const char *from, const char *to) {
  size_t lf = strlen(from), lt = strlen(to);
  char *w = s;
  for (const char *r = s; *r;) {
    if (!strncmp(r, from, lf)) {
      memcpy(w, to, lt);
      w += lt;
      r += lf;
    } else {
      *w++ = *r++;
    }
  }
  *w = '\0';
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_period_comma(char c) { return c == '.' || c == ','; }

// Rule 1: ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '
static bool is_symbol(char ch) {
  unsigned char c = (unsigned char)ch;
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') ||
         (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// One re.sub pass of the two-character rules 2..4 from `in` to `out`.
// Rule 2: ([^0-9])([\.,]) -> '\1 \2 '   Rule 3: ([\.,])([^0-9]) -> ' \1 \2'
// Rule 4: ([0-9])(-)      -> '\1 \2 '
static size_t pair_pass(int rule, const char *in, char *out) {
  size_t w = 0;
  for (size_t i = 0; in[i];) {
    char a = in[i], b = in[i + 1];
    bool hit = b && ((rule == 2 && !is_digit(a) && is_period_comma(b)) ||
                     (rule == 3 && is_period_comma(a) && !is_digit(b)) ||
                     (rule == 4 && is_digit(a) && b == '-'));
    if (!hit) {
      out[w++] = in[i++];
      continue;
    }
    if (rule == 3) out[w++] = ' ';
    out[w++] = a;
    out[w++] = ' ';
    out[w++] = b;
    if (rule != 3) out[w++] = ' ';
    i += 2;
  }
  out[w] = '\0';
  return w;
}

char *ct_bleu_tokenize_13a(const char *line) {
  size_t n = strlen(line);
  // The working buffer: " " line " " grows at most 3x in rule 1 and 2x in
  // each pair rule; two buffers ping-pong.
  size_t cap = 3 * (n + 2) * 8 + 1;
  char *a = malloc(cap), *b = malloc(cap);
  if (!a || !b) {
    free(a);
    free(b);
    return NULL;
  }
  // sacreBLEU's _preprocess_segment: line.rstrip()
  size_t end = 0;
  for (size_t i = 0; i < n;) {
    size_t sl = space_len((const unsigned char *)line + i);
    if (sl) {
      i += sl;
    } else {
      i++;
      while (i < n && ((unsigned char)line[i] & 0xC0) == 0x80) i++;
      end = i;
    }
  }
  memcpy(a, line, end);
  a[end] = '\0';
  // The language-independent part of mteval-v13a, in its order.
  replace_all(a, "<skipped>", "");
  replace_all(a, "-\n", "");
  replace_all(a, "\n", " ");
  replace_all(a, "&quot;", "\"");
  replace_all(a, "&amp;", "&");
  replace_all(a, "&lt;", "<");
  replace_all(a, "&gt;", ">");
  // " {} ".format(line), then rule 1.
  size_t w = 0;
  b[w++] = ' ';
  for (const char *p = a; *p; p++) {
    if (is_symbol(*p)) {
      b[w++] = ' ';
      b[w++] = *p;
      b[w++] = ' ';
    } else {
      b[w++] = *p;
    }
  }
  b[w++] = ' ';
  b[w] = '\0';
  pair_pass(2, b, a);
  pair_pass(3, a, b);
  pair_pass(4, b, a);
  // ' '.join(line.strip().split())
  w = 0;
  for (size_t i = 0; a[i];) {
    size_t sl = space_len((const unsigned char *)a + i);
    if (sl) {
      i += sl;
      continue;
    }
    if (w) b[w++] = ' ';
    while (a[i] && !space_len((const unsigned char *)a + i)) b[w++] = a[i++];
  }
  b[w] = '\0';
  free(a);
  return b;
}

// ---- n-gram statistics ----

typedef struct token {
  const char *s;
  int len;
} token;

typedef struct ngram {
  const token *t;  // first token
  int n;
} ngram;

static int token_cmp(const token *a, const token *b) {
  int m = a->len < b->len ? a->len : b->len;
  int r = memcmp(a->s, b->s, (size_t)m);
  return r ? r : a->len - b->len;
}

static int ngram_cmp(const void *pa, const void *pb) {
  const ngram *a = pa, *b = pb;
  for (int k = 0; k < a->n; k++) {
    int r = token_cmp(&a->t[k], &b->t[k]);
    if (r) return r;
  }
  return 0;
}

// Splits a tokenized line (single spaces) into tokens; returns the count or
// -1 on allocation failure.
static int64_t split_tokens(const char *s, token **out) {
  int64_t n = *s ? 1 : 0;
  for (const char *p = s; *p; p++) n += *p == ' ';
  *out = malloc((size_t)(n ? n : 1) * sizeof **out);
  if (!*out) return -1;
  int64_t k = 0;
  for (const char *p = s; *p;) {
    const char *e = strchr(p, ' ');
    if (!e) e = p + strlen(p);
    (*out)[k++] = (token){p, (int)(e - p)};
    p = *e ? e + 1 : e;
  }
  return n;
}

// The sorted n-grams of order `order` of a token list; count is max(0, T-order+1).
static ngram *sorted_ngrams(const token *t, int64_t nt, int order,
                            int64_t *count) {
  int64_t c = nt - order + 1;
  if (c < 0) c = 0;
  ngram *g = malloc((size_t)(c ? c : 1) * sizeof *g);
  if (!g) return NULL;
  for (int64_t i = 0; i < c; i++) g[i] = (ngram){t + i, order};
  qsort(g, (size_t)c, sizeof *g, ngram_cmp);
  *count = c;
  return g;
}

// How often `key` occurs in the sorted array g[0..n).
static int64_t ngram_count(const ngram *g, int64_t n, const ngram *key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (ngram_cmp(&g[mid], key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  int64_t k = lo;
  while (k < n && ngram_cmp(&g[k], key) == 0) k++;
  return k - lo;
}

typedef struct segment {
  char *text[1 + 64];  // tokenized hypothesis, then references
  token *tok[1 + 64];
  int64_t ntok[1 + 64];
  int count;  // 1 + references
} segment;

static void segment_free(segment *s) {
  for (int i = 0; i < s->count; i++) {
    free(s->text[i]);
    free(s->tok[i]);
  }
  s->count = 0;
}

static bool segment_add(segment *s, const char *line) {
  int i = s->count++;
  s->tok[i] = NULL;
  s->text[i] = ct_bleu_tokenize_13a(line);
  if (!s->text[i]) return false;
  s->ntok[i] = split_tokens(s->text[i], &s->tok[i]);
  return s->ntok[i] >= 0;
}

// Adds one segment's matches and totals (sacreBLEU
// _compute_segment_statistics) to `out`.
static ct_status segment_stats(const segment *s, ct_bleu *out) {
  int64_t hyp_len = s->ntok[0];
  int64_t closest = -1, closest_diff = -1;
  for (int r = 1; r < s->count; r++) {
    int64_t len = s->ntok[r], diff = llabs(hyp_len - len);
    if (closest_diff < 0 || diff < closest_diff ||
        (diff == closest_diff && len < closest)) {
      closest_diff = diff;
      closest = len;
    }
  }
  out->sys_len += hyp_len;
  out->ref_len += closest;
  for (int order = 1; order <= CT_BLEU_ORDER; order++) {
    int64_t nh, nr[64];
    ngram *h = sorted_ngrams(s->tok[0], s->ntok[0], order, &nh);
    ngram *ref[64] = {0};
    bool ok = h != NULL;
    for (int r = 1; ok && r < s->count; r++) {
      ref[r - 1] = sorted_ngrams(s->tok[r], s->ntok[r], order, &nr[r - 1]);
      ok = ref[r - 1] != NULL;
    }
    for (int64_t i = 0; ok && i < nh;) {
      int64_t j = i + 1;
      while (j < nh && ngram_cmp(&h[i], &h[j]) == 0) j++;
      int64_t c = j - i, best = 0;
      for (int r = 0; r < s->count - 1; r++) {
        int64_t rc = ngram_count(ref[r], nr[r], &h[i]);
        if (rc > best) best = rc;
      }
      out->total[order - 1] += c;
      out->correct[order - 1] += c < best ? c : best;
      i = j;
    }
    free(h);
    for (int r = 0; r < s->count - 1; r++) free(ref[r]);
    if (!ok) return ct_error(CT_ERR_NOMEM, "bleu: out of memory");
  }
  return CT_OK;
}

// sacreBLEU's compute_bleu with smooth_method='exp', effective_order=False.
static void bleu_finish(ct_bleu *b) {
  if (b->sys_len < b->ref_len)
    b->bp = b->sys_len > 0 ? exp(1.0 - (double)b->ref_len / (double)b->sys_len)
                           : 0.0;
  else
    b->bp = 1.0;
  bool any = false;
  for (int k = 0; k < CT_BLEU_ORDER; k++) any |= b->correct[k] != 0;
  if (!any) {
    b->score = 0.0;
    return;
  }
  double smooth = 1.0;
  for (int k = 0; k < CT_BLEU_ORDER; k++) {
    if (b->total[k] == 0) break;
    if (b->correct[k] == 0) {
      smooth *= 2;
      b->precisions[k] = 100.0 / (smooth * (double)b->total[k]);
    } else {
      b->precisions[k] = 100.0 * (double)b->correct[k] / (double)b->total[k];
    }
  }
  // sacreBLEU's my_log: log(0) is taken as -9999999999.
  double sum = 0.0;
  for (int k = 0; k < CT_BLEU_ORDER; k++)
    sum += b->precisions[k] != 0.0 ? log(b->precisions[k]) : -9999999999.0;
  b->score = b->bp * exp(sum / CT_BLEU_ORDER);
}

ct_status ct_bleu_corpus(const char *const *hyps, const char *const *refs,
                         int64_t n, int n_refs, ct_bleu *out) {
  if (!out) return ct_error(CT_ERR_ARG, "bleu: NULL result");
  memset(out, 0, sizeof *out);
  if (n < 0 || n_refs < 1 || n_refs > 64 || (n > 0 && (!hyps || !refs)))
    return ct_error(CT_ERR_ARG,
                    "bleu: need hypotheses and 1..64 reference streams "
                    "(got n = %lld, n_refs = %d)",
                    (long long)n, n_refs);
  for (int64_t i = 0; i < n; i++) {
    if (!hyps[i])
      return ct_error(CT_ERR_ARG, "bleu: hypothesis %lld is NULL",
                      (long long)i);
    segment s = {.count = 0};
    bool ok = segment_add(&s, hyps[i]);
    for (int r = 0; ok && r < n_refs; r++) {
      const char *ref = refs[(int64_t)r * n + i];
      if (ref && ref[0]) ok = segment_add(&s, ref);
    }
    ct_status st = CT_OK;
    if (!ok)
      st = ct_error(CT_ERR_NOMEM, "bleu: out of memory");
    else if (s.count == 1)
      st = ct_error(CT_ERR_ARG,
                    "bleu: segment %lld has no reference (empty line)",
                    (long long)i);
    else
      st = segment_stats(&s, out);
    segment_free(&s);
    if (st != CT_OK) return st;
  }
  bleu_finish(out);
  return CT_OK;
}

double ct_bleu_cumulative(const ct_bleu *b, int n) {
  if (n < 1 || n > CT_BLEU_ORDER) return 0.0;
  double sum = 0.0;
  for (int k = 0; k < n; k++) {
    if (b->correct[k] == 0 || b->total[k] == 0) return 0.0;
    sum += log((double)b->correct[k] / (double)b->total[k]);
  }
  return 100.0 * b->bp * exp(sum / n);
}

char *ct_bleu_format(const ct_bleu *b, char *buf, size_t size) {
  double ratio = b->ref_len ? (double)b->sys_len / (double)b->ref_len : 0.0;
  snprintf(
      buf, size,
      "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld "
      "ref_len = %lld)",
      b->score, b->precisions[0], b->precisions[1], b->precisions[2],
      b->precisions[3], b->bp, ratio, (long long)b->sys_len,
      (long long)b->ref_len);
  return buf;
}
