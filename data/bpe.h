// Byte-pair encoding (Sennrich, Haddow & Birch 2016, "Neural Machine
// Translation of Rare Words with Subword Units", section 3.2): subword units
// learned from the word counts of a corpus, applied to words, and stored as
// a merges.txt file.
//
//   ct_vocab_counter words = {0};          // data/vocab.h: word -> count
//   for each training line: ct_vocab_counter_add_text(&words, line, true);
//   ct_bpe b;
//   ct_bpe_learn(&b, &words, 8000);        // at most 8000 merges
//   ct_string_list pieces = {0};
//   ct_bpe_encode_word(&b, "lowest", 6, &pieces);   // "low" "est</w>"
//   ct_bpe_free(&b);
//
// Words are what the word tokenizer (data/tokenizer.h) makes of the text; a
// word never holds whitespace. A word starts as its characters (UTF-8 code
// points), the last one carrying the end-of-word marker "</w>": "low" is
// l o w</w> (the convention of subword-nmt's merges version 0.2 and of
// CLIP's tokenizer). So a symbol ending in "</w>" ends a word, and joining
// the symbols up to it gives the word back.
//
// Learning: count every adjacent symbol pair over the distinct words, each
// weighted by the word's count; merge the most frequent pair into one symbol
// everywhere (left to right, without overlap: a a a -> aa a); repeat.
//   - Ties: of the pairs with the highest count, the one whose left symbol,
//     then right symbol, comes first in bytewise (strcmp) order. The result
//     depends on nothing else (not on the word order, the hash layout or the
//     thread count: learning is sequential).
//   - A pair is merged at most once: a merged pair that forms again later
//     (its symbols made anew by other merges) is not chosen again, so the
//     table has no duplicate lines.
//   - It stops after `merges` merges, or earlier when no pair occurs twice
//     (subword-nmt's default --min-frequency 2).
//   Incremental (the paper's Algorithm 1 recounts everything per merge): the
//   pair counts live in a hash table with a max-heap on top (stale entries
//   are skipped when popped), and each pair keeps the list of words holding
//   it, so a merge only revisits those words and updates the counts of the
//   pairs next to the merged positions.
//
// Applying the merges to a word (encoding): start from its characters and
// repeatedly merge the adjacent pair with the lowest rank (the earliest
// merge), all its occurrences at once, until no adjacent pair is a merge
// (subword-nmt's apply_bpe, CLIP's bpe()). Characters that no merge knows
// stay single symbols.
//
// merges.txt: UTF-8 text, one merge per line, the two symbols separated by
// one space ("e s", "es t</w>"), earliest merge first; an optional first line
// starting with "#version" (written as "#version: 0.2"). A file is refused,
// naming the line, when a line is not two non-empty symbols separated by one
// space, a left symbol ends in "</w>", a symbol is neither one character
// (optionally + "</w>") nor the result of an earlier merge, or a merge
// repeats an earlier one; also for invalid UTF-8 or NUL bytes. Trailing
// empty lines and "\r\n" line ends are accepted.
//
// What this file does not do: pre-tokenization (data/tokenizer.h), the
// switch between word, bpe and char tokenizers (data/text_tokenizer.h), or
// byte-level BPE (GPT-2's byte-to-unicode alphabet).
#ifndef CT_DATA_BPE_H
#define CT_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/strings.h"
#include "data/vocab.h"

#define CT_BPE_END_OF_WORD "</w>"

// A map from a pair of symbol ids to an int32 (open addressing over the key
// left << 32 | right). Zero-initialize ({0}).
typedef struct ct_bpe_pair_map {
  uint64_t *keys;
  int32_t *values;  // -1: empty slot
  int64_t slots;    // a power of two (0 before the first put)
  int64_t used;
} ct_bpe_pair_map;

// Merge r: the symbols `left` and `right` (ids) become `merged`.
typedef struct ct_bpe_merge {
  int32_t left, right, merged;
} ct_bpe_merge;

// A merge table. Zero-initialize ({0}) or fill with ct_bpe_learn/load.
typedef struct ct_bpe {
  ct_string_table symbols;  // symbol text -> id: characters, merge results
  ct_bpe_merge *merges;     // in rank order, earliest first
  int64_t count, cap;
  ct_bpe_pair_map ranks;  // (left, right) -> rank
} ct_bpe;

// Learns at most `merges` merges (>= 0) from the words of `words` and their
// counts into a fresh *b.
ct_status ct_bpe_learn(ct_bpe *b, const ct_vocab_counter *words,
                       int64_t merges);

static inline int64_t ct_bpe_merge_count(const ct_bpe *b) { return b->count; }
// The texts of merge r's left and right symbols (0 <= r < count).
const char *ct_bpe_left(const ct_bpe *b, int64_t r);
const char *ct_bpe_right(const ct_bpe *b, int64_t r);

// Appends the symbols of one word (`len` bytes of UTF-8) to *out; the last
// ends in "</w>". An empty word appends nothing.
ct_status ct_bpe_encode_word(const ct_bpe *b, const char *word, size_t len,
                             ct_string_list *out);

// The merges as merges.txt text in a malloc'd buffer (*buf, *size bytes; the
// caller frees it).
ct_status ct_bpe_save(const ct_bpe *b, char **buf, size_t *size);
// Reads merges.txt text into a fresh *b. Errors (CT_ERR_FORMAT) read
// "<name>:<line>: <problem>".
ct_status ct_bpe_load(ct_bpe *b, const char *buf, size_t size,
                      const char *name);
// Reads a merges.txt file (plain or gzip) into a fresh *b; errors name the
// path and line.
ct_status ct_bpe_read_file(ct_bpe *b, const char *path);
// A copy of *src in a fresh *dst.
ct_status ct_bpe_copy(ct_bpe *dst, const ct_bpe *src);
void ct_bpe_free(ct_bpe *b);

#endif
