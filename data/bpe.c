// Byte-pair encoding (see bpe.h): the pair map, learning with incremental
// pair counts, encoding words, and the merges.txt text.
#include "data/bpe.h"
#include "data/text.h"
#include "data/utf8.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char end_of_word[] = CT_BPE_END_OF_WORD;
enum { EOW_LEN = sizeof end_of_word - 1 };
static const char merges_header[] = "#version: 0.2\n";

// ---- the pair map -----------------------------------------------------------

static uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

// splitmix64's finalizer: spreads both halves of the key over the slots.
static uint64_t pair_hash(uint64_t k) {
  k ^= k >> 30;
  k *= 0xBF58476D1CE4E5B9ull;
  k ^= k >> 27;
  k *= 0x94D049BB133111EBull;
  return k ^ (k >> 31);
}

static int32_t map_get(const ct_bpe_pair_map *m, uint64_t key) {
  if (!m->slots) return -1;
  const uint64_t mask = (uint64_t)m->slots - 1;
  for (uint64_t i = pair_hash(key) & mask;; i = (i + 1) & mask) {
    if (m->values[i] < 0) return -1;
    if (m->keys[i] == key) return m->values[i];
  }
}

static void map_insert(ct_bpe_pair_map *m, uint64_t key, int32_t value) {
  const uint64_t mask = (uint64_t)m->slots - 1;
  uint64_t i = pair_hash(key) & mask;
  while (m->values[i] >= 0) i = (i + 1) & mask;
  m->keys[i] = key;
  m->values[i] = value;
  m->used++;
}

// Adds key -> value (the key must be absent); the table stays at most half
// full.
static ct_status map_put(ct_bpe_pair_map *m, uint64_t key, int32_t value) {
  if (2 * (m->used + 1) > m->slots) {
    ct_bpe_pair_map bigger = {.slots = m->slots ? 2 * m->slots : 64};
    bigger.keys = malloc((size_t)bigger.slots * sizeof *bigger.keys);
    bigger.values = malloc((size_t)bigger.slots * sizeof *bigger.values);
    if (!bigger.keys || !bigger.values) {
      free(bigger.keys);
      free(bigger.values);
      return ct_error(CT_ERR_NOMEM, "bpe: out of memory (%lld pair slots)",
                      (long long)bigger.slots);
    }
    memset(bigger.values, 0xFF, (size_t)bigger.slots * sizeof *bigger.values);
    for (int64_t i = 0; i < m->slots; i++)
      if (m->values[i] >= 0) map_insert(&bigger, m->keys[i], m->values[i]);
    free(m->keys);
    free(m->values);
    *m = bigger;
  }
  map_insert(m, key, value);
  return CT_OK;
}

static void map_free(ct_bpe_pair_map *m) {
  free(m->keys);
  free(m->values);
  *m = (ct_bpe_pair_map){0};
}

// ---- the table ----------------------------------------------------------------

static const char *symbol_text(const ct_bpe *b, int32_t id) {
  return ct_string_list_get(&b->symbols.strings, id);
}

const char *ct_bpe_left(const ct_bpe *b, int64_t r) {
  return symbol_text(b, b->merges[r].left);
}

const char *ct_bpe_right(const ct_bpe *b, int64_t r) {
  return symbol_text(b, b->merges[r].right);
}

static ct_status add_symbol(ct_bpe *b, const char *s, size_t len, int32_t *id) {
  int64_t i = ct_string_table_add(&b->symbols, s, len, NULL);
  if (i < 0) return ct_last_status();
  *id = (int32_t)i;
  return CT_OK;
}

// The byte just past the character at word[pos] (an invalid byte counts as
// one character, as the tokenizer never makes one).
static size_t char_end(const char *word, size_t len, size_t pos) {
  ct_utf8_decode(word, len, &pos);
  return pos;
}

// The id of the character word[start, end), with "</w>" when it ends the
// word; -1 when the table has no such symbol.
static int32_t char_symbol(const ct_bpe *b, const char *word, size_t start,
                           size_t end, bool last) {
  char s[4 + EOW_LEN];
  size_t n = end - start;
  memcpy(s, word + start, n);
  if (last) memcpy(s + n, end_of_word, EOW_LEN);
  int64_t id = ct_string_table_find(&b->symbols, s, n + (last ? EOW_LEN : 0));
  return (int32_t)id;
}

// Appends merge (left, right); the merged symbol's text is left's followed
// by right's.
static ct_status push_merge(ct_bpe *b, int32_t left, int32_t right) {
  const char *l = symbol_text(b, left), *r = symbol_text(b, right);
  size_t ll = strlen(l), rl = strlen(r);
  char *text = malloc(ll + rl);
  if (!text) return ct_error(CT_ERR_NOMEM, "bpe: out of memory");
  memcpy(text, l, ll);  // l and r move when the table grows: copy first
  memcpy(text + ll, r, rl);
  int32_t merged = -1;
  ct_status st = add_symbol(b, text, ll + rl, &merged);
  free(text);
  if (!st)
    st = ct_grow_array((void **)&b->merges, &b->cap, b->count + 1,
                       sizeof *b->merges, "bpe merges");
  if (!st) st = map_put(&b->ranks, pair_key(left, right), (int32_t)b->count);
  if (st) return st;
  b->merges[b->count++] = (ct_bpe_merge){left, right, merged};
  return CT_OK;
}

void ct_bpe_free(ct_bpe *b) {
  ct_string_table_free(&b->symbols);
  free(b->merges);
  map_free(&b->ranks);
  *b = (ct_bpe){0};
}

// ---- learning -------------------------------------------------------------------

// An adjacent symbol pair while learning: its count over the words (each
// weighted by the word's count) and the words that held it when it formed
// (a list with possible stale entries: merging re-checks each word).
typedef struct pair_stat {
  int32_t left, right;
  int64_t count;
  int32_t *words;
  int64_t n_words, cap_words;
  int32_t last_word;  // the word appended last (no repeats in a row)
  int64_t touched;    // the merge number that last queued it for the heap
  bool done;          // merged: never chosen again
} pair_stat;

typedef struct heap_entry {
  int64_t count;  // the pair's count when pushed (stale if it changed)
  int32_t pair;
} heap_entry;

typedef struct learner {
  ct_bpe *b;
  // The distinct words: word w is syms[start[w] .. start[w] + len[w]).
  int32_t *syms;
  int64_t *start, *freq, *stamp;  // stamp: the last merge that visited it
  int32_t *len;
  int64_t n_words;
  uint8_t *mark, *fresh;  // per-word scratch, longest word's length
  pair_stat *pairs;
  int64_t n_pairs, cap_pairs;
  ct_bpe_pair_map index;  // (left, right) -> pair
  heap_entry *heap;       // a max-heap under `before`
  int64_t heap_n, heap_cap;
  int32_t *touched;  // pairs whose count rose during this merge
  int64_t n_touched, cap_touched;
} learner;

// Whether entry x is chosen before y: higher count, then the bytewise
// smaller left symbol, then the smaller right symbol.
static bool before(const learner *L, heap_entry x, heap_entry y) {
  if (x.count != y.count) return x.count > y.count;
  const pair_stat *p = &L->pairs[x.pair], *q = &L->pairs[y.pair];
  int c = strcmp(symbol_text(L->b, p->left), symbol_text(L->b, q->left));
  if (c) return c < 0;
  return strcmp(symbol_text(L->b, p->right), symbol_text(L->b, q->right)) < 0;
}

static ct_status heap_push(learner *L, heap_entry e) {
  ct_status st = ct_grow_array((void **)&L->heap, &L->heap_cap, L->heap_n + 1,
                               sizeof *L->heap, "bpe heap");
  if (st) return st;
  int64_t i = L->heap_n++;
  while (i > 0 && before(L, e, L->heap[(i - 1) / 2])) {
    L->heap[i] = L->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  L->heap[i] = e;
  return CT_OK;
}

static heap_entry heap_pop(learner *L) {
  heap_entry top = L->heap[0], last = L->heap[--L->heap_n];
  int64_t i = 0;
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= L->heap_n) break;
    if (c + 1 < L->heap_n && before(L, L->heap[c + 1], L->heap[c])) c++;
    if (!before(L, L->heap[c], last)) break;
    L->heap[i] = L->heap[c];
    i = c;
  }
  if (L->heap_n) L->heap[i] = last;
  return top;
}

static ct_status pair_index(learner *L, int32_t left, int32_t right,
                            int32_t *out) {
  uint64_t key = pair_key(left, right);
  int32_t i = map_get(&L->index, key);
  if (i >= 0) {
    *out = i;
    return CT_OK;
  }
  if (L->n_pairs >= INT32_MAX)
    return ct_error(CT_ERR_NOMEM, "bpe: more than 2^31 symbol pairs");
  ct_status st = ct_grow_array((void **)&L->pairs, &L->cap_pairs,
                               L->n_pairs + 1, sizeof *L->pairs, "bpe pairs");
  if (!st) st = map_put(&L->index, key, (int32_t)L->n_pairs);
  if (st) return st;
  L->pairs[L->n_pairs] =
      (pair_stat){.left = left, .right = right, .last_word = -1, .touched = -1};
  *out = (int32_t)L->n_pairs++;
  return CT_OK;
}

// Adds f occurrences of (left, right) held by word w during merge `merge`.
static ct_status pair_add(learner *L, int32_t left, int32_t right, int64_t w,
                          int64_t f, int64_t merge) {
  int32_t i;
  ct_status st = pair_index(L, left, right, &i);
  if (st) return st;
  pair_stat *p = &L->pairs[i];
  p->count += f;
  if (!p->done && p->last_word != w) {
    st = ct_grow_array((void **)&p->words, &p->cap_words, p->n_words + 1,
                       sizeof *p->words, "bpe pair words");
    if (st) return st;
    p->words[p->n_words++] = (int32_t)w;
    p->last_word = (int32_t)w;
  }
  if (p->touched != merge) {
    p->touched = merge;
    st = ct_grow_array((void **)&L->touched, &L->cap_touched, L->n_touched + 1,
                       sizeof *L->touched, "bpe pairs");
    if (st) return st;
    L->touched[L->n_touched++] = i;
  }
  return CT_OK;
}

// Queues the pairs whose counts rose (the others' heap entries are stale
// but high, and fixed when popped).
static ct_status push_touched(learner *L) {
  ct_status st = CT_OK;
  for (int64_t k = 0; k < L->n_touched && !st; k++) {
    const pair_stat *p = &L->pairs[L->touched[k]];
    if (!p->done && p->count > 0)
      st = heap_push(L, (heap_entry){p->count, L->touched[k]});
  }
  L->n_touched = 0;
  return st;
}

// The pair to merge next, or -1 when none is left.
static int32_t pop_best(learner *L, ct_status *st) {
  while (L->heap_n > 0 && !*st) {
    heap_entry e = heap_pop(L);
    const pair_stat *p = &L->pairs[e.pair];
    if (p->done || p->count <= 0) continue;
    if (e.count == p->count) return e.pair;
    *st = heap_push(L, (heap_entry){p->count, e.pair});
  }
  return -1;
}

// Merges every (a, b) of word w (left to right, no overlap) into m: the
// pairs touching a merged position lose the word's count, the pairs touching
// a new m gain it.
static ct_status merge_word(learner *L, int64_t w, int32_t a, int32_t b,
                            int32_t m, int64_t merge) {
  int32_t *s = L->syms + L->start[w];
  const int32_t n = L->len[w];
  const int64_t f = L->freq[w];
  uint8_t *mark = L->mark, *fresh = L->fresh;  // mark: 1 left, 2 right
  bool any = false;
  memset(mark, 0, (size_t)n);
  for (int32_t i = 0; i + 1 < n;) {
    if (s[i] == a && s[i + 1] == b) {
      mark[i] = 1;
      mark[i + 1] = 2;
      any = true;
      i += 2;
    } else {
      i++;
    }
  }
  if (!any) return CT_OK;  // a stale entry of the pair's word list
  for (int32_t i = 0; i + 1 < n; i++)
    if (mark[i] || mark[i + 1]) {
      int32_t p = map_get(&L->index, pair_key(s[i], s[i + 1]));
      L->pairs[p].count -= f;
    }
  int32_t k = 0;
  for (int32_t i = 0; i < n; k++) {
    fresh[k] = mark[i] == 1;
    s[k] = fresh[k] ? m : s[i];
    i += fresh[k] ? 2 : 1;
  }
  L->len[w] = k;
  ct_status st = CT_OK;
  for (int32_t i = 0; i + 1 < k && !st; i++)
    if (fresh[i] || fresh[i + 1]) st = pair_add(L, s[i], s[i + 1], w, f, merge);
  return st;
}

// Splits every word into characters (the last with "</w>") and counts the
// pairs.
static ct_status learner_init(learner *L, const ct_vocab_counter *words) {
  const ct_string_list *texts = &words->tokens.strings;
  L->n_words = texts->count;
  int64_t n_syms = texts->chars_len, longest = 1;
  L->syms = malloc((size_t)(n_syms ? n_syms : 1) * sizeof *L->syms);
  L->start = malloc((size_t)(L->n_words + 1) * sizeof *L->start);
  L->freq = malloc((size_t)(L->n_words + 1) * sizeof *L->freq);
  L->stamp = calloc((size_t)(L->n_words + 1), sizeof *L->stamp);
  L->len = malloc((size_t)(L->n_words + 1) * sizeof *L->len);
  if (!L->syms || !L->start || !L->freq || !L->stamp || !L->len)
    return ct_error(CT_ERR_NOMEM, "bpe: out of memory for %lld words",
                    (long long)L->n_words);
  ct_status st = CT_OK;
  int64_t at = 0;
  for (int64_t w = 0; w < L->n_words && !st; w++) {
    const char *text = ct_string_list_get(texts, w);
    const size_t len = (size_t)ct_string_list_len(texts, w);
    if (len > INT32_MAX)
      return ct_error(CT_ERR_ARG, "bpe: a word of %zu bytes", len);
    L->start[w] = at;
    L->freq[w] = words->counts[w];
    for (size_t pos = 0; pos < len && !st;) {
      size_t end = char_end(text, len, pos);
      char s[4 + EOW_LEN];
      memcpy(s, text + pos, end - pos);
      size_t n = end - pos;
      if (end == len) {
        memcpy(s + n, end_of_word, EOW_LEN);
        n += EOW_LEN;
      }
      st = add_symbol(L->b, s, n, &L->syms[at++]);
      pos = end;
    }
    L->len[w] = (int32_t)(at - L->start[w]);
    if (L->len[w] > longest) longest = L->len[w];
    const int32_t *s = L->syms + L->start[w];
    for (int32_t i = 0; i + 1 < L->len[w] && !st; i++)
      st = pair_add(L, s[i], s[i + 1], w, L->freq[w], 0);
  }
  L->mark = malloc((size_t)longest);
  L->fresh = malloc((size_t)longest);
  if (!st && (!L->mark || !L->fresh))
    st = ct_error(CT_ERR_NOMEM, "bpe: out of memory");
  return st ? st : push_touched(L);
}

static void learner_free(learner *L) {
  free(L->syms);
  free(L->start);
  free(L->freq);
  free(L->stamp);
  free(L->len);
  free(L->mark);
  free(L->fresh);
  for (int64_t i = 0; i < L->n_pairs; i++) free(L->pairs[i].words);
  free(L->pairs);
  map_free(&L->index);
  free(L->heap);
  free(L->touched);
}

ct_status ct_bpe_learn(ct_bpe *b, const ct_vocab_counter *words,
                       int64_t merges) {
  *b = (ct_bpe){0};
  if (merges < 0)
    return ct_error(CT_ERR_ARG, "bpe: %lld merges (must be >= 0)",
                    (long long)merges);
  learner L = {.b = b};
  ct_status st = learner_init(&L, words);
  for (int64_t merge = 1; !st && b->count < merges; merge++) {
    int32_t best = pop_best(&L, &st);
    if (st || best < 0 || L.pairs[best].count < 2) break;
    L.pairs[best].done = true;
    const int32_t a = L.pairs[best].left, c = L.pairs[best].right;
    st = push_merge(b, a, c);
    if (st) break;
    const int32_t m = b->merges[b->count - 1].merged;
    // The list does not grow meanwhile: new pairs hold m, never (a, c).
    const int32_t *list = L.pairs[best].words;
    const int64_t n = L.pairs[best].n_words;
    for (int64_t k = 0; k < n && !st; k++) {
      int32_t w = list[k];
      if (L.stamp[w] == merge) continue;
      L.stamp[w] = merge;
      st = merge_word(&L, w, a, c, m, merge);
    }
    free(L.pairs[best].words);
    L.pairs[best].words = NULL;
    L.pairs[best].n_words = L.pairs[best].cap_words = 0;
    if (!st) st = push_touched(&L);
  }
  learner_free(&L);
  if (st) ct_bpe_free(b);
  return st;
}

// ---- encoding -------------------------------------------------------------------

ct_status ct_bpe_encode_word(const ct_bpe *b, const char *word, size_t len,
                             ct_string_list *out) {
  enum { LOCAL = 64 };
  int32_t ids_local[LOCAL];
  size_t starts_local[LOCAL + 1];
  int32_t *ids = ids_local;
  size_t *starts = starts_local;
  int64_t n = 0;
  for (size_t pos = 0; pos < len; pos = char_end(word, len, pos)) n++;
  if (n == 0) return CT_OK;
  if (n > LOCAL) {
    ids = malloc((size_t)n * sizeof *ids);
    starts = malloc((size_t)(n + 1) * sizeof *starts);
    if (!ids || !starts) {
      free(ids);
      free(starts);
      return ct_error(CT_ERR_NOMEM, "bpe: out of memory (a %zu-byte word)",
                      len);
    }
  }
  // Symbol k is word[starts[k], starts[k + 1]) (+ "</w>" for the last);
  // ids[k] its id, -1 for a character no merge knows.
  n = 0;
  for (size_t pos = 0; pos < len; pos = char_end(word, len, pos))
    starts[n++] = pos;
  starts[n] = len;
  for (int64_t k = 0; k < n; k++)
    ids[k] = char_symbol(b, word, starts[k], starts[k + 1], k == n - 1);
  for (;;) {
    int32_t best = -1;
    for (int64_t k = 0; k + 1 < n; k++) {
      if (ids[k] < 0 || ids[k + 1] < 0) continue;
      int32_t r = map_get(&b->ranks, pair_key(ids[k], ids[k + 1]));
      if (r >= 0 && (best < 0 || r < best)) best = r;
    }
    if (best < 0) break;
    const ct_bpe_merge mg = b->merges[best];
    int64_t j = 0;
    for (int64_t k = 0; k < n; j++) {
      starts[j] = starts[k];
      if (k + 1 < n && ids[k] == mg.left && ids[k + 1] == mg.right) {
        ids[j] = mg.merged;
        k += 2;
      } else {
        ids[j] = ids[k++];
      }
    }
    starts[j] = len;
    n = j;
  }
  ct_status st = CT_OK;
  for (int64_t k = 0; k + 1 < n && !st; k++)
    st = ct_string_list_push(out, word + starts[k], starts[k + 1] - starts[k]);
  // The last symbol with the marker: pushed, then extended in place.
  if (!st) {
    size_t last = len - starts[n - 1];
    char *tail = malloc(last + EOW_LEN);
    if (!tail) st = ct_error(CT_ERR_NOMEM, "bpe: out of memory");
    if (!st) {
      memcpy(tail, word + starts[n - 1], last);
      memcpy(tail + last, end_of_word, EOW_LEN);
      st = ct_string_list_push(out, tail, last + EOW_LEN);
    }
    free(tail);
  }
  if (ids != ids_local) {
    free(ids);
    free(starts);
  }
  return st;
}

// ---- merges.txt -------------------------------------------------------------------

ct_status ct_bpe_save(const ct_bpe *b, char **buf, size_t *size) {
  size_t cap = sizeof merges_header;
  for (int64_t r = 0; r < b->count; r++)
    cap += strlen(ct_bpe_left(b, r)) + strlen(ct_bpe_right(b, r)) + 2;
  char *out = malloc(cap);
  if (!out)
    return ct_error(CT_ERR_NOMEM, "bpe: out of memory saving %lld merges",
                    (long long)b->count);
  size_t k = sizeof merges_header - 1;
  memcpy(out, merges_header, k);
  for (int64_t r = 0; r < b->count; r++) {
    const char *l = ct_bpe_left(b, r), *rt = ct_bpe_right(b, r);
    size_t ll = strlen(l), rl = strlen(rt);
    memcpy(out + k, l, ll);
    out[k + ll] = ' ';
    memcpy(out + k + ll + 1, rt, rl);
    out[k + ll + 1 + rl] = '\n';
    k += ll + rl + 2;
  }
  *buf = out;
  *size = k;
  return CT_OK;
}

// Whether s[0, len) is one character, optionally followed by "</w>" (when
// `marker_ok`).
static bool one_character(const char *s, size_t len, bool marker_ok) {
  size_t pos = 0;
  if (len == 0 || ct_utf8_decode(s, len, &pos) < 0) return false;
  return pos == len || (marker_ok && len - pos == EOW_LEN &&
                        !memcmp(s + pos, end_of_word, EOW_LEN));
}

static bool ends_word(const char *s, size_t len) {
  return len >= EOW_LEN && !memcmp(s + len - EOW_LEN, end_of_word, EOW_LEN);
}

// The id of one side of a merge line: a known symbol, or a new character.
static ct_status merge_side(ct_bpe *b, const char *s, size_t len, bool right,
                            const char *name, int64_t line, int32_t *id) {
  int64_t known = ct_string_table_find(&b->symbols, s, len);
  if (known >= 0) {
    *id = (int32_t)known;
    return CT_OK;
  }
  if (!one_character(s, len, right))
    return ct_error(CT_ERR_FORMAT,
                    "%s:%lld: \"%.*s\" is neither one character nor the "
                    "result of an earlier merge",
                    name, (long long)line, (int)(len < 60 ? len : 60), s);
  return add_symbol(b, s, len, id);
}

// Reads the merges of `lines` (line i is line i + 1 of `name`).
static ct_status parse_lines(ct_bpe *b, const ct_string_list *lines,
                             const char *name) {
  int64_t last = lines->count, header = 0;
  while (last > 0 && ct_string_list_len(lines, last - 1) == 0) last--;
  if (last > 0 && !strncmp(ct_string_list_get(lines, 0), "#version", 8))
    header = 1;
  ct_status st = CT_OK;
  for (int64_t i = header; i < last && !st; i++) {
    const char *s = ct_string_list_get(lines, i);
    const size_t len = (size_t)ct_string_list_len(lines, i);
    const int64_t line = i + 1;
    const char *space = memchr(s, ' ', len);
    bool two = space && space > s && space < s + len - 1 &&
               !memchr(space + 1, ' ', (size_t)(s + len - space - 1));
    for (size_t k = 0; k < len && two; k++)
      two = (unsigned char)s[k] >= 0x20 && s[k] != 0x7F;
    if (!two)
      return ct_error(CT_ERR_FORMAT,
                      "%s:%lld: \"%.*s\": expected two symbols separated by "
                      "one space (a merge)",
                      name, (long long)line, (int)(len < 60 ? len : 60), s);
    const size_t ll = (size_t)(space - s), rl = len - ll - 1;
    if (ends_word(s, ll))
      return ct_error(
          CT_ERR_FORMAT,
          "%s:%lld: the left symbol \"%.*s\" ends a word (\"</w>\"),"
          " so nothing can follow it",
          name, (long long)line, (int)(ll < 60 ? ll : 60), s);
    int32_t l, r;
    st = merge_side(b, s, ll, false, name, line, &l);
    if (!st) st = merge_side(b, space + 1, rl, true, name, line, &r);
    if (st) return st;
    int32_t earlier = map_get(&b->ranks, pair_key(l, r));
    if (earlier >= 0)
      return ct_error(CT_ERR_FORMAT, "%s:%lld: repeats the merge of line %lld",
                      name, (long long)line, (long long)(earlier + 1 + header));
    st = push_merge(b, l, r);
  }
  return st;
}

ct_status ct_bpe_load(ct_bpe *b, const char *buf, size_t size,
                      const char *name) {
  *b = (ct_bpe){0};
  ct_string_list lines = {0};
  ct_status st = CT_OK;
  for (size_t pos = 0; pos < size && !st;) {
    const char *nl = memchr(buf + pos, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - buf - pos) : size - pos;
    const char *s = buf + pos;
    pos += len + 1;
    if (len && s[len - 1] == '\r') len--;
    const char *nul = memchr(s, '\0', len);
    size_t bad = nul ? (size_t)(nul - s) : ct_utf8_find_invalid(s, len);
    if (bad < len)
      st = ct_error(CT_ERR_FORMAT, "%s:%lld: invalid byte 0x%02x at column %zu",
                    name, (long long)lines.count + 1, (unsigned char)s[bad],
                    bad + 1);
    else
      st = ct_string_list_push(&lines, s, len);
  }
  if (!st) st = parse_lines(b, &lines, name);
  ct_string_list_free(&lines);
  if (st) ct_bpe_free(b);
  return st;
}

ct_status ct_bpe_read_file(ct_bpe *b, const char *path) {
  *b = (ct_bpe){0};
  ct_string_list lines = {0};
  ct_status st = ct_text_read_lines(path, 0, &lines);
  if (!st) st = parse_lines(b, &lines, path);
  ct_string_list_free(&lines);
  if (st) ct_bpe_free(b);
  return st;
}

ct_status ct_bpe_copy(ct_bpe *dst, const ct_bpe *src) {
  char *buf;
  size_t size;
  ct_status st = ct_bpe_save(src, &buf, &size);
  if (st) {
    *dst = (ct_bpe){0};
    return st;
  }
  st = ct_bpe_load(dst, buf, size, "bpe copy");
  free(buf);
  return st;
}
