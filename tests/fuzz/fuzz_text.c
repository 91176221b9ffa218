// Fuzz target: parallel text files, plain or gzip (data/text.h over
// data/file_stream.h), then each tokenizer (word, char, and BPE with a few
// merges learned from what was read), a vocabulary built from the tokens,
// the pair encoding the translation task does, a detokenization of every
// line, and a saved vocabulary read back. The input is one file, read as a line-aligned
// source and target (the same file), as a TSV file, and, cut in halves,
// as two files that must have as many lines.
#include "data/batch.h"
#include "data/text.h"
#include "data/text_tokenizer.h"
#include "data/tokenizer.h"
#include "data/vocab.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/token_util.h"

static void use_tokenizer(const ct_parallel_text *p,
                          const ct_text_tokenizer *tok) {
  ct_vocab_counter counter = {0};
  for (int64_t i = 0; i < p->src.count; i++) {
    ct_string_list tokens = {0};
    if (ct_text_tokenizer_tokenize(tok, ct_string_list_get(&p->src, i),
                                   &tokens) == CT_OK) {
      for (int64_t j = 0; j < tokens.count; j++)
        ct_vocab_counter_add(&counter, ct_string_list_get(&tokens, j));
      const char **items = token_ptrs(&tokens);
      if (items) free(ct_text_tokenizer_detokenize(tok, items, tokens.count));
      free(items);
    }
    ct_string_list_free(&tokens);
  }
  ct_vocab v;
  if (ct_vocab_build(&v, &counter, 1, 0) == CT_OK) {
    ct_pair_corpus c = {0};
    int64_t unknown = 0;
    ct_pair_corpus_encode(&c, p, tok, &v, tok, &v, &unknown);
    char *buf;
    size_t size;
    if (ct_vocab_save(&v, &buf, &size) == CT_OK) {
      ct_vocab back;
      if (ct_vocab_load(&back, buf, size) != CT_OK) {
        fprintf(stderr, "a saved vocabulary does not load: %s\n",
                ct_last_error());
        abort();
      }
      ct_vocab_free(&back);
      free(buf);
    }
    ct_pair_corpus_free(&c);
    ct_vocab_free(&v);
  }
  ct_vocab_counter_free(&counter);
}

static void use(const ct_parallel_text *p) {
  static const ct_tokenizer_kind kinds[] = {
      CT_TOKENIZER_WORD, CT_TOKENIZER_CHAR, CT_TOKENIZER_BPE};
  for (int k = 0; k < 3; k++) {
    ct_text_tokenizer tok;
    ct_text_tokenizer_init(&tok, kinds[k], k != 1);
    const ct_string_list *corpora[] = {&p->src};
    if (ct_text_tokenizer_learn(&tok, corpora, 1, 20) == CT_OK)
      use_tokenizer(p, &tok);
    ct_text_tokenizer_free(&tok);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write("corpus.txt", data, size);
  ct_parallel_text p;
  if (ct_parallel_text_read_pair(path, path, 0, &p) == CT_OK) {
    use(&p);
    ct_parallel_text_free(&p);
  }
  if (ct_parallel_text_read_tsv(path, 0, &p) == CT_OK) {
    use(&p);
    ct_parallel_text_free(&p);
  }
  const char *a = fuzz_write("a.txt", data, size / 2);
  const char *b = fuzz_write("b.txt", data + size / 2, size - size / 2);
  if (ct_parallel_text_read_pair(a, b, 3, &p) == CT_OK)
    ct_parallel_text_free(&p);
  return 0;
}
