// Byte-pair encoding (data/bpe.h) and the word, bpe and char tokenizers
// (data/text_tokenizer.h):
//   - the merges of the paper's example corpus equal the ones computed by
//     hand (below), and the word order of the counts does not matter;
//   - the merges of a generated corpus with many ties equal those of the
//     plain reference tests/ref/bpe_ref.py (recounting every pair per merge;
//     fixtures tests/ref/bpe_corpus.txt and bpe_corpus.merges.txt, argv[1]
//     is tests/ref);
//   - encoding words, merges.txt save/load, malformed merges files refused
//     naming the line, and thousands of mutated files read without a crash;
//   - encode -> decode is the identity (after the word tokenizer's
//     normalization) on every training sentence of the toy corpora and of
//     Multi30k (argv[2], skipped when absent), where the merges are also
//     learned at 1 and 2 threads (the same) and timed.
#include "core/error.h"
#include "core/rng.h"
#include "core/threads.h"
#include "data/bpe.h"
#include "data/text.h"
#include "data/text_tokenizer.h"
#include "data/tokenizer.h"
#include "data/toy_translation.h"
#include "data/vocab.h"
#include "tests/harness.h"
#include "tests/token_util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check_word(const ct_bpe *b, const char *word, const char *want) {
  ct_string_list out = {0};
  CHECK(ct_bpe_encode_word(b, word, strlen(word), &out) == CT_OK, "encode %s",
        word);
  char got[512];
  joined(&out, got, sizeof got);
  CHECK(!strcmp(got, want), "encode \"%s\": got %s, want %s", word, got, want);
  ct_string_list_free(&out);
}

// The merges of b as "left right" lines joined by ", ".
static void merge_list(const ct_bpe *b, char *out, size_t size) {
  size_t n = 0;
  out[0] = '\0';
  for (int64_t r = 0; r < ct_bpe_merge_count(b) && n < size; r++)
    n += (size_t)snprintf(out + n, size - n, "%s%s %s", r ? ", " : "",
                          ct_bpe_left(b, r), ct_bpe_right(b, r));
}

// Sennrich et al. 2016, section 3.2: low 5, lower 2, newest 6, widest 3.
// By hand (pair counts weighted by the word counts; ties to the bytewise
// smaller left, then right symbol):
//    1. e s        9 (newest 6 + widest 3; ties s t</w> 9: "e" < "s")
//    2. es t</w>   9
//    3. l o        7 (low 5 + lower 2)
//    4. e w        6 (ties n e, w est</w> 6: "e" < "n" < "w")
//    5. ew est</w> 6 (ties n ew 6)
//    6. n ewest</w> 6
//    7. lo w</w>   5
//    8. d est</w>  3 (ties i d, w i 3)
//    9. i dest</w> 3 (ties w i 3)
//   10. w idest</w> 3
//   11. e r</w>    2 (ties lo w, w e 2)
//   12. lo w       2 (ties w er</w> 2)
//   13. low er</w> 2
// after which every word is one symbol: no pair is left.
static const char hand_merges[] =
    "e s, es t</w>, l o, e w, ew est</w>, n ewest</w>, lo w</w>, d est</w>, "
    "i dest</w>, w idest</w>, e r</w>, lo w, low er</w>";

static void counter_add(ct_vocab_counter *c, const char *word, int times) {
  for (int i = 0; i < times; i++) ct_vocab_counter_add(c, word);
}

static void test_hand_example(void) {
  ct_vocab_counter c = {0}, reversed = {0};
  counter_add(&c, "low", 5);
  counter_add(&c, "lower", 2);
  counter_add(&c, "newest", 6);
  counter_add(&c, "widest", 3);
  counter_add(&reversed, "widest", 3);
  counter_add(&reversed, "newest", 6);
  counter_add(&reversed, "lower", 2);
  counter_add(&reversed, "low", 5);
  ct_bpe b, r, four;
  CHECK(ct_bpe_learn(&b, &c, 100) == CT_OK, "learn: %s", ct_last_error());
  CHECK(ct_bpe_learn(&r, &reversed, 100) == CT_OK, "learn: %s",
        ct_last_error());
  CHECK(ct_bpe_learn(&four, &c, 4) == CT_OK, "learn 4: %s", ct_last_error());
  char got[1024], again[1024];
  merge_list(&b, got, sizeof got);
  printf("hand example: %s\n", got);
  CHECK(!strcmp(got, hand_merges), "hand example:\n  got  %s\n  want %s", got,
        hand_merges);
  merge_list(&r, again, sizeof again);
  CHECK(!strcmp(got, again), "another word order: %s", again);
  merge_list(&four, got, sizeof got);
  CHECK(!strcmp(got, "e s, es t</w>, l o, e w"), "4 merges: %s", got);

  check_word(&b, "lowest", "low|est</w>");
  check_word(&b, "newer", "n|ew|er</w>");
  check_word(&b, "widest", "widest</w>");
  check_word(&b, "lower", "lower</w>");
  check_word(&b, "x", "x</w>");
  check_word(&b, "zlowz", "z|low|z</w>");
  check_word(&b, "über", "ü|b|er</w>");
  check_word(&four, "newest", "n|ew|est</w>");
  ct_string_list none = {0};
  CHECK(ct_bpe_encode_word(&b, "", 0, &none) == CT_OK && none.count == 0,
        "an empty word gives no symbols");
  ct_bpe_free(&b);
  ct_bpe_free(&r);
  ct_bpe_free(&four);

  // Overlapping pairs merge left to right; learning stops when no pair
  // occurs twice: "aaaa" is a a a a</w>, (a, a) counted twice, then
  // aa a a</w> has no repeated pair.
  ct_vocab_counter_free(&c);
  counter_add(&c, "aaaa", 1);
  CHECK(ct_bpe_learn(&b, &c, 10) == CT_OK && ct_bpe_merge_count(&b) == 1,
        "aaaa: %lld merges, want 1", (long long)ct_bpe_merge_count(&b));
  check_word(&b, "aaaa", "aa|a|a</w>");
  check_word(&b, "aaaaa", "aa|aa|a</w>");
  ct_bpe_free(&b);
  CHECK(ct_bpe_learn(&b, &c, 0) == CT_OK && ct_bpe_merge_count(&b) == 0,
        "0 merges");
  check_word(&b, "aaaa", "a|a|a|a</w>");
  ct_bpe_free(&b);
  CHECK(ct_bpe_learn(&b, &c, -1) == CT_ERR_ARG, "negative merge count");
  ct_vocab_counter_free(&c);
  ct_vocab_counter_free(&reversed);
}

// The generated corpus of tests/ref/bpe_ref.py against its merges.
static void test_reference_fixture(const char *ref_dir) {
  char corpus_path[1024], merges_path[1024];
  snprintf(corpus_path, sizeof corpus_path, "%s/bpe_corpus.txt", ref_dir);
  snprintf(merges_path, sizeof merges_path, "%s/bpe_corpus.merges.txt",
           ref_dir);
  ct_string_list lines = {0}, want = {0};
  CHECK(ct_text_read_lines(corpus_path, 0, &lines) == CT_OK &&
            ct_text_read_lines(merges_path, 0, &want) == CT_OK,
        "fixtures: %s", ct_last_error());
  ct_text_tokenizer t;
  ct_text_tokenizer_init(&t, CT_TOKENIZER_BPE, true);
  const ct_string_list *corpora[] = {&lines};
  double start = now();
  CHECK(ct_text_tokenizer_learn(&t, corpora, 1, 1000000) == CT_OK, "learn: %s",
        ct_last_error());
  double seconds = now() - start;
  char *buf = NULL;
  size_t size = 0;
  CHECK(ct_bpe_save(&t.bpe, &buf, &size) == CT_OK, "save");
  // Line by line: the first difference, and how many lines differ.
  int64_t got_lines = 0, differ = 0, first = -1;
  for (size_t pos = 0; buf && pos < size; got_lines++) {
    const char *nl = memchr(buf + pos, '\n', size - pos);
    size_t len = (size_t)(nl - buf) - pos;
    bool same = got_lines < want.count &&
                ct_string_list_len(&want, got_lines) == (int64_t)len &&
                !memcmp(ct_string_list_get(&want, got_lines), buf + pos, len);
    if (!same && !differ++) first = got_lines;
    pos += len + 1;
  }
  differ += got_lines < want.count ? want.count - got_lines : 0;
  printf(
      "reference corpus: %lld lines, %lld merges in %.3f s; the reference "
      "has %lld; %lld lines differ\n",
      (long long)lines.count, (long long)ct_bpe_merge_count(&t.bpe), seconds,
      (long long)want.count - 1, (long long)differ);
  CHECK(differ == 0 && got_lines == want.count,
        "merges differ from bpe_ref.py's from line %lld (\"%s\")",
        (long long)first + 1,
        first >= 0 && first < want.count ? ct_string_list_get(&want, first)
                                         : "(none)");
  CHECK(want.count > 1000, "the fixture has %lld lines", (long long)want.count);

  // Reading it back gives the same table.
  ct_bpe loaded;
  CHECK(ct_bpe_read_file(&loaded, merges_path) == CT_OK, "read %s: %s",
        merges_path, ct_last_error());
  char *again = NULL;
  size_t again_size = 0;
  CHECK(ct_bpe_save(&loaded, &again, &again_size) == CT_OK &&
            again_size == size && !memcmp(again, buf, size),
        "save(read(file)) differs from the learned table");
  // ... which encodes every word of the corpus the same way.
  ct_string_list a = {0}, b = {0};
  int64_t mismatches = 0;
  for (int64_t i = 0; i < lines.count; i++) {
    ct_string_list_clear(&a);
    ct_string_list_clear(&b);
    ct_text_tokenizer loaded_t = {
        .kind = CT_TOKENIZER_BPE, .lowercase = true, .bpe = loaded};
    ct_text_tokenizer_tokenize(&t, ct_string_list_get(&lines, i), &a);
    ct_text_tokenizer_tokenize(&loaded_t, ct_string_list_get(&lines, i), &b);
    mismatches += a.count != b.count ||
                  memcmp(a.chars, b.chars, (size_t)a.chars_len) != 0;
  }
  CHECK(mismatches == 0, "%lld lines encode differently with the loaded table",
        (long long)mismatches);
  ct_string_list_free(&a);
  ct_string_list_free(&b);
  ct_bpe_free(&loaded);
  free(again);
  free(buf);
  ct_text_tokenizer_free(&t);
  ct_string_list_free(&lines);
  ct_string_list_free(&want);
}

static void check_refused(const char *text, size_t size, const char *needle,
                          const char *what) {
  ct_bpe b;
  ct_status st = ct_bpe_load(&b, text, size, "m.txt");
  CHECK(st == CT_ERR_FORMAT, "%s: status %s", what, ct_status_name(st));
  CHECK(strstr(ct_last_error(), needle) != NULL, "%s: \"%s\" lacks \"%s\"",
        what, ct_last_error(), needle);
  CHECK(ct_bpe_merge_count(&b) == 0 && b.merges == NULL,
        "%s: table not emptied", what);
  printf("  %-26s -> %s\n", what, ct_last_error());
}
#define REFUSED(lit, needle, what) \
  check_refused(lit, sizeof(lit) - 1, needle, what)

static void check_accepted(const char *text, int64_t merges, const char *what) {
  ct_bpe b;
  ct_status st = ct_bpe_load(&b, text, strlen(text), "m.txt");
  CHECK(st == CT_OK && ct_bpe_merge_count(&b) == merges,
        "%s: status %s, %lld merges (%s)", what, ct_status_name(st),
        (long long)ct_bpe_merge_count(&b), ct_last_error());
  ct_bpe_free(&b);
}

static void test_merges_file_errors(void) {
  printf("malformed merges files:\n");
  REFUSED("#version: 0.2\na b\nab\n", "m.txt:3: \"ab\": expected two symbols",
          "one symbol");
  REFUSED("a  b\n", "m.txt:1: \"a  b\": expected two symbols", "two spaces");
  REFUSED(" a b\n", "m.txt:1:", "leading space");
  REFUSED("a b \n", "m.txt:1:", "trailing space");
  REFUSED("a b\na\tb\n", "m.txt:2:", "a tab");
  REFUSED("a b\n\nc d\n", "m.txt:2: \"\": expected two symbols",
          "an empty line inside");
  REFUSED("a b c\n", "m.txt:1:", "three symbols");
  REFUSED("x</w> y\n", "m.txt:1: the left symbol \"x</w>\" ends a word",
          "left ends a word");
  REFUSED("ab c\n", "m.txt:1: \"ab\" is neither one character nor the result",
          "unknown left");
  REFUSED("a b\nc ab</w>\n",
          "m.txt:2: \"ab</w>\" is neither one character nor the result",
          "unknown right");
  REFUSED("a </w>\n", "m.txt:1: \"</w>\" is neither", "a bare marker");
  REFUSED("a b\nc d\na b\n", "m.txt:3: repeats the merge of line 1",
          "a repeated merge");
  REFUSED("#version: 0.2\na b\nx y\na b\n",
          "m.txt:4: repeats the merge of line 2", "repeated, with header");
  REFUSED("a b\n\xff c\n", "m.txt:2: invalid byte 0xff at column 1",
          "invalid UTF-8");
  REFUSED("a b\nc\0 d\n", "m.txt:2: invalid byte 0x00 at column 2",
          "a NUL byte");
  check_accepted("#version: 0.2\n", 0, "a header only");
  check_accepted("", 0, "an empty file");
  check_accepted("a b\n\n\n", 1, "trailing empty lines");
  check_accepted("a b\r\nab c</w>\r\n", 2, "CRLF line ends");
  check_accepted("a b\nab c</w>", 2, "no final newline");
  check_accepted("\xc3\xa4 \xc3\x9f</w>\n# #\n", 2, "UTF-8, a '#' merge");

  // Files: the path and line in the message.
  char dir[] = "/tmp/ct_test_bpe_XXXXXX", path[256];
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(path, sizeof path, "%s/bad.merges.txt", dir);
  FILE *f = fopen(path, "w");
  fputs("#version: 0.2\nt h\nth e</w>\nthe x\n", f);
  fclose(f);
  ct_bpe b;
  CHECK(ct_bpe_read_file(&b, path) == CT_ERR_FORMAT &&
            strstr(ct_last_error(), "bad.merges.txt:4: \"the\" is neither"),
        "file error: %s", ct_last_error());
  printf("  %-26s -> %s\n", "a file", ct_last_error());
  char missing[300];
  snprintf(missing, sizeof missing, "%s/missing.txt", dir);
  CHECK(ct_bpe_read_file(&b, missing) != CT_OK &&
            strstr(ct_last_error(), "missing.txt"),
        "missing file: %s", ct_last_error());
  unlink(path);
  rmdir(dir);
}

// Mutations of a valid merges file: every read is OK or CT_ERR_FORMAT
// naming "fuzz:<line>:", never anything else; accepted tables save and load
// back unchanged. Meant to run under ASan/UBSan too.
static void test_fuzz(void) {
  ct_vocab_counter c = {0};
  static const char *const words[] = {"low",  "lower", "newest", "widest",
                                      "über", "ä",     "straße", "ab-c"};
  for (int i = 0; i < 8; i++) counter_add(&c, words[i], 3 + i);
  ct_bpe b;
  char *base;
  size_t base_size;
  ct_bpe_learn(&b, &c, 100);
  ct_bpe_save(&b, &base, &base_size);
  ct_bpe_free(&b);
  ct_vocab_counter_free(&c);
  ct_rng rng = ct_rng_make(27, 1);
  char *buf = malloc(2 * base_size + 16);
  int tries = 0, accepted = 0, wrong = 0;
  for (int k = 0; k < 4000; k++) {
    memcpy(buf, base, base_size);
    size_t size = base_size;
    int edits = 1 + (int)ct_rng_next_below(&rng, 3);
    for (int e = 0; e < edits && size > 0; e++) {
      size_t at = (size_t)ct_rng_next_below(&rng, size);
      static const char bytes[] = {' ', '\n', '\t', '\0', '<',    '/',
                                   'w', '>',  '#',  'e',  '\xc3', '\xff'};
      switch (ct_rng_next_below(&rng, 4)) {
      case 0: buf[at] = bytes[ct_rng_next_below(&rng, sizeof bytes)]; break;
      case 1: buf[at] = (char)ct_rng_next_u32(&rng); break;
      case 2:  // delete a byte
        memmove(buf + at, buf + at + 1, size - at - 1);
        size--;
        break;
      default: size = at; break;  // truncate
      }
    }
    tries++;
    ct_status st = ct_bpe_load(&b, buf, size, "fuzz");
    if (st == CT_OK) {
      accepted++;
      char *saved, *again;
      size_t n1, n2;
      ct_bpe c2;
      bool ok = ct_bpe_save(&b, &saved, &n1) == CT_OK &&
                ct_bpe_load(&c2, saved, n1, "saved") == CT_OK &&
                ct_bpe_save(&c2, &again, &n2) == CT_OK && n1 == n2 &&
                !memcmp(saved, again, n1);
      wrong += !ok;
      free(saved);
      free(again);
      ct_bpe_free(&c2);
      ct_bpe_free(&b);
    } else {
      wrong += st != CT_ERR_FORMAT || strncmp(ct_last_error(), "fuzz:", 5) ||
               b.merges != NULL;
    }
  }
  printf("fuzz: %d mutated merges files, %d accepted, %d wrong\n", tries,
         accepted, wrong);
  CHECK(wrong == 0, "%d mutated files handled wrongly", wrong);
  free(buf);
  free(base);
}

static void check_tokens(const ct_text_tokenizer *t, const char *text,
                         const char *want_tokens, const char *want_text) {
  ct_string_list tokens = {0};
  CHECK(ct_text_tokenizer_tokenize(t, text, &tokens) == CT_OK, "tokenize");
  char got[1024];
  joined(&tokens, got, sizeof got);
  CHECK(!strcmp(got, want_tokens), "%s \"%s\": got %s, want %s",
        ct_tokenizer_kind_name(t->kind), text, got, want_tokens);
  const char **ptrs = token_ptrs(&tokens);
  char *back = ct_text_tokenizer_detokenize(t, ptrs, tokens.count);
  CHECK(back && !strcmp(back, want_text), "detokenize: \"%s\", want \"%s\"",
        back, want_text);
  free(back);
  free(ptrs);
  ct_string_list_free(&tokens);
}

static void check_detokenize(const ct_text_tokenizer *t,
                             const char *const *tokens, int64_t n,
                             const char *want) {
  char *s = ct_text_tokenizer_detokenize(t, tokens, n);
  CHECK(s && !strcmp(s, want), "detokenize: \"%s\", want \"%s\"", s, want);
  free(s);
}

static void test_tokenizer_kinds(void) {
  ct_text_tokenizer w, ch, bpe;
  ct_text_tokenizer_init(&w, CT_TOKENIZER_WORD, true);
  ct_text_tokenizer_init(&ch, CT_TOKENIZER_CHAR, true);
  ct_text_tokenizer_init(&bpe, CT_TOKENIZER_BPE, true);
  check_tokens(&w, "On 1911-09-28, 682554 Hunde.",
               "on|1911-09-28|,|682554|hunde|.",
               "on 1911-09-28, 682554 hunde.");
  check_tokens(&ch, "1911-09-28", "1|9|1|1|-|0|9|-|2|8</w>", "1911-09-28");
  check_tokens(&ch, "Zwei Hunde.", "z|w|e|i</w>|h|u|n|d|e</w>|.</w>",
               "zwei hunde.");
  // A bpe tokenizer without merges is the char tokenizer.
  check_tokens(&bpe, "Zwei Hunde.", "z|w|e|i</w>|h|u|n|d|e</w>|.</w>",
               "zwei hunde.");
  const char *const lines_data[] = {"Zwei Hunde laufen.", "Ein Hund läuft.",
                                    "Zwei Hunde, ein Hund!"};
  ct_string_list lines = {0};
  for (int i = 0; i < 3; i++)
    ct_string_list_push(&lines, lines_data[i], strlen(lines_data[i]));
  const ct_string_list *corpora[] = {&lines};
  CHECK(ct_text_tokenizer_learn(&bpe, corpora, 1, 8) == CT_OK &&
            ct_bpe_merge_count(&bpe.bpe) == 8,
        "learn 8: %lld", (long long)ct_bpe_merge_count(&bpe.bpe));
  // By hand: h u, u n, n d occur 4 times (hunde 2, hund 2), "h" first;
  // then hu n 4; then everything left occurs twice at most, taken bytewise:
  // d e</w> (hunde), e i (ein), e i</w> (zwei; "i" < "i</w>"), ei n</w>,
  // hun d</w> ("d<" < "de"), hun de</w>.
  char list[512];
  merge_list(&bpe.bpe, list, sizeof list);
  printf("bpe on 3 lines: %s\n", list);
  CHECK(!strcmp(list,
                "h u, hu n, d e</w>, e i, e i</w>, ei n</w>, hun d</w>, "
                "hun de</w>"),
        "3 lines: %s", list);
  check_tokens(&bpe, "Hunde, Hund; Hündin",
               "hunde</w>|,</w>|hund</w>|;</w>|h|ü|n|d|i|n</w>",
               "hunde, hund; hündin");
  CHECK(ct_text_tokenizer_learn(&w, corpora, 1, 8) == CT_OK,
        "learning is a no-op for words");

  // Tokens without "</w>" continue their word; the last word ends anyway.
  const char *const toks[] = {"ab",    "c</w>", "<unk>", "d</w>", "(</w>",
                              "x</w>", ")</w>", ".</w>", "tail"};
  check_detokenize(&ch, toks, 9, "abc <unk>d (x). tail");
  check_detokenize(&ch, toks, 0, "");
  check_detokenize(&w, toks + 4, 3, "(</w> x</w> )</w>");
  ct_text_tokenizer_free(&w);
  ct_text_tokenizer_free(&ch);
  ct_text_tokenizer_free(&bpe);
  ct_string_list_free(&lines);
}

// Round trips of every line: the symbols joined up to "</w>" are the word
// tokenizer's words, and the detokenized text is the word tokenizer's
// (tokens -> text); through a vocabulary built from the same lines, ids
// decode back to the same text with no <unk>. Returns the mismatches.
static int64_t round_trip(const ct_text_tokenizer *t,
                          const ct_string_list *lines, const char *what) {
  ct_vocab_counter counter = {0};
  ct_string_list tokens = {0}, words = {0}, joined_words = {0};
  for (int64_t i = 0; i < lines->count; i++) {
    ct_string_list_clear(&tokens);
    ct_text_tokenizer_tokenize(t, ct_string_list_get(lines, i), &tokens);
    ct_vocab_counter_add_tokens(&counter, &tokens);
  }
  ct_vocab v;
  ct_vocab_build(&v, &counter, 1, 0);
  ct_vocab_counter_free(&counter);
  int64_t bad = 0, unknown_total = 0, token_total = 0, word_total = 0;
  int32_t *ids = NULL;
  const char **ptrs = NULL;
  int64_t cap = 0;
  for (int64_t i = 0; i < lines->count; i++) {
    const char *line = ct_string_list_get(lines, i);
    ct_string_list_clear(&tokens);
    ct_string_list_clear(&words);
    ct_string_list_clear(&joined_words);
    ct_text_tokenizer_tokenize(t, line, &tokens);
    ct_tokenize(line, t->lowercase, &words);
    if (tokens.count + 1 > cap) {
      cap = 2 * (tokens.count + 1);
      ids = realloc(ids, (size_t)cap * sizeof *ids);
      ptrs = realloc(ptrs, (size_t)cap * sizeof *ptrs);
    }
    // Words from the symbols.
    char word[4096];
    size_t n = 0;
    for (int64_t k = 0; k < tokens.count; k++) {
      const char *s = ct_string_list_get(&tokens, k);
      size_t len = strlen(s);
      bool ends = len >= 4 && !strcmp(s + len - 4, "</w>");
      size_t keep = ends ? len - 4 : len;
      if (n + keep < sizeof word) memcpy(word + n, s, keep);
      n += keep;
      if (ends) {
        ct_string_list_push(&joined_words, word, n);
        n = 0;
      }
    }
    bool same_words =
        n == 0 && words.count == joined_words.count &&
        words.chars_len == joined_words.chars_len &&
        !memcmp(words.chars, joined_words.chars, (size_t)words.chars_len);
    int64_t unknown;
    ct_vocab_encode(&v, &tokens, ids, &unknown);
    int64_t count;
    ct_vocab_decode(&v, ids, tokens.count, ptrs, &count);
    char *back = ct_text_tokenizer_detokenize(t, ptrs, count);
    for (int64_t k = 0; k < words.count; k++)
      ptrs[k] = ct_string_list_get(&words, k);
    char *want = ct_detokenize(ptrs, words.count);
    bool ok = same_words && unknown == 0 && back && want && !strcmp(back, want);
    if (!ok && bad++ < 3)
      fprintf(stderr, "%s line %lld: \"%s\" -> \"%s\", want \"%s\"\n", what,
              (long long)i + 1, line, back, want);
    unknown_total += unknown;
    token_total += tokens.count;
    word_total += words.count;
    free(back);
    free(want);
  }
  printf(
      "  %-30s %6lld lines, %7lld words -> %7lld %s tokens (vocabulary "
      "%lld), %lld mismatches\n",
      what, (long long)lines->count, (long long)word_total,
      (long long)token_total, ct_tokenizer_kind_name(t->kind),
      (long long)ct_vocab_size(&v), (long long)bad);
  free(ids);
  free(ptrs);
  ct_vocab_free(&v);
  ct_string_list_free(&tokens);
  ct_string_list_free(&words);
  ct_string_list_free(&joined_words);
  return bad + unknown_total;
}

static void test_toy_round_trips(void) {
  printf("round trips:\n");
  static const ct_toy_task tasks[] = {CT_TOY_COPY, CT_TOY_REVERSE,
                                      CT_TOY_GRAMMAR};
  for (int k = 0; k < 3; k++) {
    ct_toy_options o = {.task = tasks[k],
                        .seed = 1,
                        .train_size = 5000,
                        .val_size = 100,
                        .test_size = 100};
    ct_toy_corpus c = {0};
    CHECK(ct_toy_translation_generate(&o, &c) == CT_OK, "toy: %s",
          ct_last_error());
    const ct_string_list *corpora[] = {&c.train.src, &c.train.tgt};
    ct_text_tokenizer bpe, ch;
    ct_text_tokenizer_init(&bpe, CT_TOKENIZER_BPE, true);
    ct_text_tokenizer_init(&ch, CT_TOKENIZER_CHAR, true);
    CHECK(ct_text_tokenizer_learn(&bpe, corpora, 2, 300) == CT_OK, "learn");
    for (int side = 0; side < 2; side++) {
      char what[64];
      snprintf(what, sizeof what, "toy %s %s, %lld merges",
               ct_toy_task_name(tasks[k]), side ? "target" : "source",
               (long long)ct_bpe_merge_count(&bpe.bpe));
      CHECK(round_trip(&bpe, corpora[side], what) == 0, "%s", what);
      snprintf(what, sizeof what, "toy %s %s", ct_toy_task_name(tasks[k]),
               side ? "target" : "source");
      CHECK(round_trip(&ch, corpora[side], what) == 0, "%s", what);
    }
    ct_text_tokenizer_free(&bpe);
    ct_text_tokenizer_free(&ch);
    ct_parallel_text_free(&c.train);
    ct_parallel_text_free(&c.val);
    ct_parallel_text_free(&c.test);
  }
}

static void test_multi30k(const char *dir) {
  char de[1024], en[1024];
  snprintf(de, sizeof de, "%s/train.de.gz", dir);
  snprintf(en, sizeof en, "%s/train.en.gz", dir);
  struct stat sb;
  if (stat(de, &sb) != 0) {
    printf("multi30k: %s not found, skipped\n", de);
    return;
  }
  ct_parallel_text p;
  CHECK(ct_parallel_text_read_pair(de, en, 0, &p) == CT_OK, "read: %s",
        ct_last_error());
  const ct_string_list *corpora[] = {&p.src, &p.tgt};
  ct_text_tokenizer t[2];
  double seconds[2];
  char *saved[2] = {NULL, NULL};
  size_t size[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    ct_set_threads(k + 1);
    ct_text_tokenizer_init(&t[k], CT_TOKENIZER_BPE, true);
    double start = now();
    CHECK(ct_text_tokenizer_learn(&t[k], corpora, 2, 8000) == CT_OK,
          "learn: %s", ct_last_error());
    seconds[k] = now() - start;
    ct_bpe_save(&t[k].bpe, &saved[k], &size[k]);
  }
  printf(
      "multi30k: %lld pairs, 8000 joint merges learned (with word counting) "
      "in %.3f s on 1 thread, %.3f s on 2\n",
      (long long)p.src.count, seconds[0], seconds[1]);
  CHECK(ct_bpe_merge_count(&t[0].bpe) == 8000, "%lld merges",
        (long long)ct_bpe_merge_count(&t[0].bpe));
  CHECK(size[0] == size[1] && !memcmp(saved[0], saved[1], size[0]),
        "the merges differ between 1 and 2 threads");
  CHECK(round_trip(&t[0], &p.src, "multi30k train.de, 8000 merges") == 0,
        "multi30k de");
  CHECK(round_trip(&t[0], &p.tgt, "multi30k train.en, 8000 merges") == 0,
        "multi30k en");
  ct_text_tokenizer ch;
  ct_text_tokenizer_init(&ch, CT_TOKENIZER_CHAR, true);
  CHECK(round_trip(&ch, &p.src, "multi30k train.de") == 0, "char de");
  CHECK(round_trip(&ch, &p.tgt, "multi30k train.en") == 0, "char en");
  for (int k = 0; k < 2; k++) {
    ct_text_tokenizer_free(&t[k]);
    free(saved[k]);
  }
  ct_parallel_text_free(&p);
}

int main(int argc, char **argv) {
  test_hand_example();
  if (argc > 1)
    test_reference_fixture(argv[1]);
  else
    printf("reference fixture: no tests/ref folder given, skipped\n");
  test_merges_file_errors();
  test_fuzz();
  test_tokenizer_kinds();
  test_toy_round_trips();
  if (argc > 2)
    test_multi30k(argv[2]);
  else
    printf("multi30k: no directory given, skipped\n");
  return test_summary("bpe");
}
