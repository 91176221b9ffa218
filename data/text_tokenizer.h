// The tokenizer of a text side: whole words, BPE subwords or characters,
// behind one small API (translation uses one per side; captioning and
// contrastive text towers use the same).
//
//   ct_text_tokenizer t;
//   ct_text_tokenizer_init(&t, CT_TOKENIZER_BPE, true);    // lowercase
//   const ct_string_list *corpora[] = {&train.src, &train.tgt};
//   ct_text_tokenizer_learn(&t, corpora, 2, 8000);        // joint merges
//   ct_string_list tokens = {0};
//   ct_text_tokenizer_tokenize(&t, "Zwei Hündinnen.", &tokens);
//   // e.g. "zwei</w>" "hünd" "innen</w>" ".</w>"; a ct_vocab maps them to ids
//   char *text = ct_text_tokenizer_detokenize(&t, pointers, n);
//   // "zwei hündinnen."
//   ct_text_tokenizer_free(&t);
//
// Kinds:
//   word  data/tokenizer.h: lowercasing, punctuation split, numbers whole.
//   bpe   the words of `word`, each split into BPE symbols (data/bpe.h): its
//         characters merged by a table learned from the training text
//         (ct_text_tokenizer_learn) or read from a merges.txt (`bpe` field,
//         ct_bpe_read_file). The last symbol of a word ends in "</w>".
//   char  the words of `word`, each split into its characters (UTF-8 code
//         points), the last one ending in "</w>": BPE without merges. For
//         small symbolic tasks ("1911-09-28" is 1 9 1 1 - 0 9 - 2 8</w>).
//
// Detokenizing bpe and char tokens joins the symbols of each word (a symbol
// ending in "</w>" ends its word; tokens after the last one form a last
// word), then runs data/tokenizer.h's detokenizer on the words. So all three
// kinds give back the same text for the same sentence:
//   detokenize(tokenize(s)) == ct_detokenize(ct_tokenize(s))
// (the word tokenizer's normalization: lowercasing, single spaces,
// punctuation attached), and BLEU on detokenized text compares across kinds.
// A token that does not end in "</w>" (<unk> included) continues its word.
//
// What this file does not do: vocabularies (data/vocab.h maps tokens to ids)
// or byte-level BPE.
#ifndef CT_DATA_TEXT_TOKENIZER_H
#define CT_DATA_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/bpe.h"
#include "data/strings.h"

typedef enum ct_tokenizer_kind {
  CT_TOKENIZER_WORD,
  CT_TOKENIZER_BPE,
  CT_TOKENIZER_CHAR
} ct_tokenizer_kind;

// "word", "bpe", "char".
const char *ct_tokenizer_kind_name(ct_tokenizer_kind kind);

typedef struct ct_text_tokenizer {
  ct_tokenizer_kind kind;
  bool lowercase;
  ct_bpe bpe;  // bpe: the merges (none until learned or loaded)
} ct_text_tokenizer;

void ct_text_tokenizer_init(ct_text_tokenizer *t, ct_tokenizer_kind kind,
                            bool lowercase);
// bpe: learns at most `merges` merges from the words of every line of the
// n lists (the training text; several lists for a joint table). Other kinds:
// nothing to learn.
ct_status ct_text_tokenizer_learn(ct_text_tokenizer *t,
                                  const ct_string_list *const *corpora, int n,
                                  int64_t merges);
// Appends the tokens of the NUL-terminated UTF-8 `text` to *out.
ct_status ct_text_tokenizer_tokenize(const ct_text_tokenizer *t,
                                     const char *text, ct_string_list *out);
// The text of `count` tokens, malloc'd (the caller frees it); NULL with
// CT_ERR_NOMEM recorded when memory runs out.
char *ct_text_tokenizer_detokenize(const ct_text_tokenizer *t,
                                   const char *const *tokens, int64_t count);
void ct_text_tokenizer_free(ct_text_tokenizer *t);

#endif
