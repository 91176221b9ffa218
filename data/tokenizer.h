// A word/punctuation tokenizer for translation corpora, and its inverse.
//
// Tokenization rules (UTF-8 in, tokens out):
//   - Whitespace (ASCII, controls, NBSP and the Unicode spaces) separates
//     tokens and is dropped.
//   - Punctuation is a token of its own: ASCII punctuation and the common
//     Unicode marks (« » „ “ ” ‘ ’ ‚ ‹ › ¿ ¡ · – — … and U+2010..U+205E).
//     A run of '.' stays together ("..." is one token).
//   - Everything else (letters, digits, other symbols) forms words, with
//     three joiners kept inside a word:
//       apostrophes ' and ’ between two word characters: "don't", "l'homme"
//         are ONE token (so detokenization is exact; "dogs'" splits into
//         "dogs" "'");
//       hyphens '-' between two word characters: "t-shirt", "four-year-old";
//       '.', ',' and ':' between two digits: "3.5", "1,000", "10:30".
//   - With lowercase, letters are lowercased (ct_unicode_lower): ASCII,
//     Latin-1 Supplement (Ä→ä, Ö→ö, Ü→ü, É→é; ß stays ß), Latin Extended-A,
//     ẞ→ß, basic Greek and Cyrillic.
//   - An invalid UTF-8 byte becomes U+FFFD (text from data/text.h is already
//     validated).
//
// Detokenization joins tokens with single spaces, except:
//   - no space before closing punctuation , . ... ! ? : ; ) ] } % » › ” ’ …
//   - no space after opening punctuation ( [ { « ‹ „ “ ‘ ‚ ¿ ¡
//     (“ after an open „ is the German closing quote instead);
//   - straight quotes " and ' alternate: the first opens (no space after),
//     the next closes (no space before), and so on.
// So detokenize(tokenize(s)) == s for normally spaced text, and
// tokenize(detokenize(t)) == t except where joiners meet ("3" "." "5"
// detokenizes to "3.5", which tokenizes as one token).
//
// What this file does not do: subword units (BPE), casing restoration, or
// language-specific rules (contractions, abbreviations such as "U.S.").
#ifndef CT_DATA_TOKENIZER_H
#define CT_DATA_TOKENIZER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/strings.h"

// Appends the tokens of the NUL-terminated UTF-8 `text` to *out.
// CT_ERR_NOMEM when memory runs out.
ct_status ct_tokenize(const char *text, bool lowercase, ct_string_list *out);

// The lowercase of a code point (see the rules above); others unchanged.
int32_t ct_unicode_lower(int32_t cp);

// Joins `count` tokens into one malloc'd, NUL-terminated string (the caller
// frees it). NULL with CT_ERR_NOMEM when memory runs out.
char *ct_detokenize(const char *const *tokens, int64_t count);

#endif
