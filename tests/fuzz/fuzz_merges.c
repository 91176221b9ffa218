// Fuzz target: a BPE merges.txt ([data] bpe_merges_file, data/bpe.h), read
// from memory and as a file (plain or gzip). A table that loads must
// encode words, and its saved text must load again into the same merges.
#include "data/bpe.h"
#include "tests/fuzz/fuzz_util.h"

static void use(const ct_bpe *b) {
  static const char *const words[] = {"lower",
                                      "newest",
                                      "widest",
                                      "a",
                                      "stra\xc3\x9f"
                                      "e",
                                      ""};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
    ct_string_list out = {0};
    ct_bpe_encode_word(b, words[i], strlen(words[i]), &out);
    ct_string_list_free(&out);
  }
  char *buf;
  size_t size;
  if (ct_bpe_save(b, &buf, &size) != CT_OK) return;
  ct_bpe back;
  if (ct_bpe_load(&back, buf, size, "saved") != CT_OK) {
    fprintf(stderr, "saved merges do not load: %s\n", ct_last_error());
    abort();
  }
  if (ct_bpe_merge_count(&back) != ct_bpe_merge_count(b)) {
    fprintf(stderr, "saved merges load as %lld merges, not %lld\n",
            (long long)ct_bpe_merge_count(&back),
            (long long)ct_bpe_merge_count(b));
    abort();
  }
  for (int64_t r = 0; r < ct_bpe_merge_count(b); r++)
    if (strcmp(ct_bpe_left(b, r), ct_bpe_left(&back, r)) ||
        strcmp(ct_bpe_right(b, r), ct_bpe_right(&back, r))) {
      fprintf(stderr, "merge %lld changed in a save and load\n", (long long)r);
      abort();
    }
  ct_bpe_free(&back);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ct_bpe b;
  if (ct_bpe_load(&b, (const char *)data, size, "fuzz") == CT_OK) {
    use(&b);
    ct_bpe_free(&b);
  }
  const char *path = fuzz_write("merges.txt", data, size);
  if (ct_bpe_read_file(&b, path) == CT_OK) ct_bpe_free(&b);
  return 0;
}
