// Vocabularies: token <-> id maps built from a training split.
//
//   ct_vocab_counter c = {0};
//   for each training sentence: ct_vocab_counter_add_text(&c, line, true);
//   ct_vocab v;
//   ct_vocab_build(&v, &c, 2, 10000);        // min_freq 2, at most 10000 ids
//   ct_vocab_counter_free(&c);
//   int32_t id = ct_vocab_id(&v, "haus");     // CT_VOCAB_UNK when unknown
//
// Ids 0..3 are the specials <pad> <unk> <bos> <eos>; then the tokens that
// occur at least min_freq times, most frequent first, ties broken by bytewise
// (strcmp) order of the token, so the same counts always give the same ids.
// max_size counts the specials too (it is the embedding table's row count).
//
// A vocabulary serializes to a small text format (stored in checkpoints):
//   "ctrain-vocab 1\n" "<count>\n" then one token per line, ids 0..count-1,
//   with '\\' '\n' '\t' '\r' written as \\ \n \t \r.
//
// What this file does not do: subword vocabularies, or sharing one vocabulary
// between source and target (build one from both sides' tokens if wanted).
#ifndef CT_DATA_VOCAB_H
#define CT_DATA_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/strings.h"

enum {
  CT_VOCAB_PAD = 0,
  CT_VOCAB_UNK = 1,
  CT_VOCAB_BOS = 2,
  CT_VOCAB_EOS = 3,
  CT_VOCAB_SPECIALS = 4  // the number of special ids
};

// Token frequencies. Zero-initialize ({0}); free with ct_vocab_counter_free.
typedef struct ct_vocab_counter {
  ct_string_table tokens;
  int64_t *counts;  // counts[i]: occurrences of token i
  int64_t counts_cap;
} ct_vocab_counter;

ct_status ct_vocab_counter_add(ct_vocab_counter *c, const char *token);
// Adds every token of a tokenized sentence.
ct_status ct_vocab_counter_add_tokens(ct_vocab_counter *c,
                                      const ct_string_list *tokens);
// Tokenizes `text` (data/tokenizer.h) and adds its tokens.
ct_status ct_vocab_counter_add_text(ct_vocab_counter *c, const char *text,
                                    bool lowercase);
void ct_vocab_counter_free(ct_vocab_counter *c);

// id -> token (tokens.strings) and token -> id (the hash index).
typedef struct ct_vocab {
  ct_string_table tokens;
} ct_vocab;

// Builds *v (fresh) from the counts: tokens with count >= min_freq (min_freq
// <= 1 keeps all), at most max_size ids in all (0: no limit; otherwise at
// least CT_VOCAB_SPECIALS). Tokens spelled like a special keep its id.
ct_status ct_vocab_build(ct_vocab *v, const ct_vocab_counter *c,
                         int64_t min_freq, int64_t max_size);
void ct_vocab_free(ct_vocab *v);

static inline int64_t ct_vocab_size(const ct_vocab *v) {
  return ct_string_table_count(&v->tokens);
}
// The id of a token, CT_VOCAB_UNK when it is not in the vocabulary.
int32_t ct_vocab_id(const ct_vocab *v, const char *token);
// The token of an id; NULL with CT_ERR_INDEX recorded when out of range.
const char *ct_vocab_token(const ct_vocab *v, int32_t id);

// tokens -> ids (tokens->count of them), unknown tokens -> CT_VOCAB_UNK.
// *unknown (may be NULL) receives how many were unknown.
void ct_vocab_encode(const ct_vocab *v, const ct_string_list *tokens,
                     int32_t *ids, int64_t *unknown);
// ids -> tokens: stops at the first <eos>, skips <pad> and <bos>; tokens[]
// (room for n) receives pointers into the vocabulary, *count how many.
// CT_ERR_INDEX for an id outside [0, size).
ct_status ct_vocab_decode(const ct_vocab *v, const int32_t *ids, int64_t n,
                          const char **tokens, int64_t *count);

// Serializes into a malloc'd buffer (*buf, *size bytes; the caller frees it).
ct_status ct_vocab_save(const ct_vocab *v, char **buf, size_t *size);
// Reads a buffer written by ct_vocab_save into a fresh *v. CT_ERR_FORMAT,
// naming the line, when it is malformed (bad magic or version, count not
// matching the lines, a bad escape, a duplicate token, missing specials).
ct_status ct_vocab_load(ct_vocab *v, const char *buf, size_t size);

#endif
