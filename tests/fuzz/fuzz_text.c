// Fuzz target: parallel text files, plain or gzip (data/text.h over
// data/file_stream.h), then the tokenizer and a vocabulary built from what
// was read, the pair encoding the translation task does, and a saved
// vocabulary read back. The input is one file, read as a line-aligned
// source and target (the same file), as a TSV file, and, cut in halves,
// as two files that must have as many lines.
#include "data/batch.h"
#include "data/text.h"
#include "data/tokenizer.h"
#include "data/vocab.h"
#include "tests/fuzz/fuzz_util.h"

static void use(const ct_parallel_text *p) {
  ct_vocab_counter counter = {0};
  for (int64_t i = 0; i < p->src.count; i++)
    ct_vocab_counter_add_text(&counter, ct_string_list_get(&p->src, i), true);
  ct_vocab v;
  if (ct_vocab_build(&v, &counter, 1, 0) == CT_OK) {
    ct_pair_corpus c = {0};
    int64_t unknown = 0;
    ct_pair_corpus_encode(&c, p, &v, &v, true, &unknown);
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
