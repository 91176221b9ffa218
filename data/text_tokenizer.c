// Word, bpe and char tokenizers behind one API (see text_tokenizer.h).
#include "data/text_tokenizer.h"
#include "data/tokenizer.h"
#include "data/vocab.h"

#include <stdlib.h>
#include <string.h>

const char *ct_tokenizer_kind_name(ct_tokenizer_kind kind) {
  switch (kind) {
  case CT_TOKENIZER_WORD: return "word";
  case CT_TOKENIZER_BPE: return "bpe";
  case CT_TOKENIZER_CHAR: return "char";
  }
  return "?";
}

void ct_text_tokenizer_init(ct_text_tokenizer *t, ct_tokenizer_kind kind,
                            bool lowercase) {
  *t = (ct_text_tokenizer){.kind = kind, .lowercase = lowercase};
}

ct_status ct_text_tokenizer_learn(ct_text_tokenizer *t,
                                  const ct_string_list *const *corpora, int n,
                                  int64_t merges) {
  if (t->kind != CT_TOKENIZER_BPE) return CT_OK;
  ct_vocab_counter words = {0};
  ct_status st = CT_OK;
  for (int c = 0; c < n && !st; c++)
    for (int64_t i = 0; i < corpora[c]->count && !st; i++)
      st = ct_vocab_counter_add_text(&words, ct_string_list_get(corpora[c], i),
                                     t->lowercase);
  ct_bpe_free(&t->bpe);
  if (!st) st = ct_bpe_learn(&t->bpe, &words, merges);
  ct_vocab_counter_free(&words);
  return st;
}

ct_status ct_text_tokenizer_tokenize(const ct_text_tokenizer *t,
                                     const char *text, ct_string_list *out) {
  if (t->kind == CT_TOKENIZER_WORD) return ct_tokenize(text, t->lowercase, out);
  ct_string_list words = {0};
  ct_status st = ct_tokenize(text, t->lowercase, &words);
  for (int64_t i = 0; i < words.count && !st; i++)
    st = ct_bpe_encode_word(&t->bpe, ct_string_list_get(&words, i),
                            (size_t)ct_string_list_len(&words, i), out);
  ct_string_list_free(&words);
  return st;
}

// Ends the word being built at chars[*start, *n), if it has any bytes.
static void close_word(char *chars, size_t *n, size_t *start,
                       const char **words, int64_t *n_words) {
  if (*n == *start) return;
  chars[(*n)++] = '\0';
  words[(*n_words)++] = chars + *start;
  *start = *n;
}

char *ct_text_tokenizer_detokenize(const ct_text_tokenizer *t,
                                   const char *const *tokens, int64_t count) {
  if (t->kind == CT_TOKENIZER_WORD) return ct_detokenize(tokens, count);
  // The words, NUL-terminated one after another in `chars`.
  size_t size = 1;
  for (int64_t i = 0; i < count; i++) size += strlen(tokens[i]) + 1;
  char *chars = malloc(size);
  const char **words = malloc((size_t)(count ? count : 1) * sizeof *words);
  char *text = NULL;
  if (!chars || !words) {
    ct_error(CT_ERR_NOMEM, "detokenize: out of memory (%zu bytes)", size);
  } else {
    const size_t eow = strlen(CT_BPE_END_OF_WORD);
    size_t n = 0, start = 0;
    int64_t n_words = 0;
    for (int64_t i = 0; i < count; i++) {
      size_t len = strlen(tokens[i]);
      bool ends =
          len >= eow && !strcmp(tokens[i] + len - eow, CT_BPE_END_OF_WORD);
      memcpy(chars + n, tokens[i], ends ? len - eow : len);
      n += ends ? len - eow : len;
      if (ends) close_word(chars, &n, &start, words, &n_words);
    }
    close_word(chars, &n, &start, words, &n_words);
    text = ct_detokenize(words, n_words);
  }
  free(chars);
  free(words);
  return text;
}

void ct_text_tokenizer_free(ct_text_tokenizer *t) { ct_bpe_free(&t->bpe); }
