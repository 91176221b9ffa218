// The tokenizer (data/tokenizer.h) and vocabularies (data/vocab.h):
// tokenization cases, lowercasing, detokenization round trips, vocabulary
// building rules, encode/decode, and the serialization with its errors; the
// UTF-8 encoder they use (data/utf8.h).
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "data/vocab.h"
#include "tests/harness.h"
#include "tests/token_util.h"

#include <stdlib.h>
#include <string.h>

static void check_tokens(const char *text, bool lower, const char *want) {
  ct_string_list t = {0};
  CHECK(ct_tokenize(text, lower, &t) == CT_OK, "tokenize: %s", ct_last_error());
  char got[512];
  joined(&t, got, sizeof got);
  CHECK(!strcmp(got, want), "tokenize(\"%s\"):\n   got  %s\n   want %s", text,
        got, want);
  ct_string_list_free(&t);
}

// detokenize(tokenize(s)) == s, and tokenize(detokenize(tokens)) == tokens.
static void check_round_trip(const char *text) {
  ct_string_list t = {0}, again = {0};
  ct_tokenize(text, false, &t);
  const char **ptrs = malloc((size_t)(t.count + 1) * sizeof *ptrs);
  for (int64_t i = 0; i < t.count; i++) ptrs[i] = ct_string_list_get(&t, i);
  char *s = ct_detokenize(ptrs, t.count);
  CHECK(s && !strcmp(s, text), "detokenize:\n   got  \"%s\"\n   want \"%s\"", s,
        text);
  ct_tokenize(s, false, &again);
  char a[512], b[512];
  joined(&t, a, sizeof a);
  joined(&again, b, sizeof b);
  CHECK(!strcmp(a, b), "re-tokenize: %s vs %s", a, b);
  free(s);
  free(ptrs);
  ct_string_list_free(&t);
  ct_string_list_free(&again);
}

static void test_tokenizer(void) {
  check_tokens("Ein Mädchen, das Straße überquert.", true,
               "ein|mädchen|,|das|straße|überquert|.");
  check_tokens("Ein Mädchen, das Straße überquert.", false,
               "Ein|Mädchen|,|das|Straße|überquert|.");
  check_tokens("ÄÖÜ ß ẞ Émile ÇA Łódź ŸES", true, "äöü|ß|ß|émile|ça|łódź|ÿes");
  check_tokens("Don't stop!", false, "Don't|stop|!");
  check_tokens("l’homme rock'n'roll", false, "l’homme|rock'n'roll");
  check_tokens("'quoted' dogs' toys", false, "'|quoted|'|dogs|'|toys");
  check_tokens("3.5 km, 1,000 people at 10:30.", false,
               "3.5|km|,|1,000|people|at|10:30|.");
  check_tokens("A T-shirt -- well-known 5-year-old.", false,
               "A|T-shirt|-|-|well-known|5-year-old|.");
  check_tokens("Wait... what?!", false, "Wait|...|what|?|!");
  check_tokens("„Hallo“, sagte er – «oui».", false,
               "„|Hallo|“|,|sagte|er|–|«|oui|»|.");
  check_tokens("He said \"hi (there)\" to me; 50% ok", false,
               "He|said|\"|hi|(|there|)|\"|to|me|;|50|%|ok");
  check_tokens("  multiple\t spaces\xC2\xA0nbsp  \n", false,
               "multiple|spaces|nbsp");
  check_tokens("", false, "");
  check_tokens("bad \xFF byte", false, "bad|\xEF\xBF\xBD|byte");

  static const int32_t lower[][2] = {
      {'A', 'a'},     {0xC4, 0xE4},   {0xD6, 0xF6},   {0xDC, 0xFC},
      {0xDF, 0xDF},   {0xC9, 0xE9},   {0xD7, 0xD7},   {0xE4, 0xE4},
      {0x100, 0x101}, {0x141, 0x142}, {0x178, 0xFF},  {0x17D, 0x17E},
      {0x130, 'i'},   {0x1E9E, 0xDF}, {0x3A3, 0x3C3}, {0x416, 0x436},
      {'1', '1'}};
  for (size_t i = 0; i < sizeof lower / sizeof *lower; i++)
    CHECK(ct_unicode_lower(lower[i][0]) == lower[i][1],
          "lower(U+%04X) = U+%04X, want U+%04X", (unsigned)lower[i][0],
          (unsigned)ct_unicode_lower(lower[i][0]), (unsigned)lower[i][1]);

  static const char *const sentences[] = {
      "Ein Mädchen, das Straße überquert.",
      "He said \"hi (there)\" to me.",
      "„Hallo“, sagte er.",
      "Wait... what?!",
      "A man in a T-shirt, 3.5 km away: done; ok!",
      "Two young, White males are outside near many bushes.",
      "Sie sagte: 'Nein!' [laut] {leise} ¿Qué? ¡Sí!",
      "«Bonjour» — dit-il…",
  };
  for (size_t i = 0; i < sizeof sentences / sizeof *sentences; i++)
    check_round_trip(sentences[i]);
  const char *toks[] = {"a", "dog", "(", "big", ")", ",", "runs", "."};
  char *s = ct_detokenize(toks, 8);
  CHECK(s && !strcmp(s, "a dog (big), runs."), "detokenize: %s", s);
  printf("detokenize: %s\n", s);
  free(s);
}

static void count_words(ct_vocab_counter *c, const char *text) {
  CHECK(ct_vocab_counter_add_text(c, text, true) == CT_OK, "count: %s",
        ct_last_error());
}

static void check_vocab_error(const char *buf, const char *needle,
                              const char *what) {
  ct_vocab v;
  ct_status st = ct_vocab_load(&v, buf, strlen(buf));
  CHECK(st == CT_ERR_FORMAT, "%s: status %s", what, ct_status_name(st));
  CHECK(strstr(ct_last_error(), needle) != NULL, "%s: \"%s\" lacks \"%s\"",
        what, ct_last_error(), needle);
  CHECK(ct_vocab_size(&v) == 0, "%s: vocab not emptied", what);
  printf("  %-20s -> %s\n", what, ct_last_error());
}

static void test_vocab(void) {
  ct_vocab_counter c = {0};
  // the 5, a 3, b 3, dog 2, cat 2, zebra 1, apple 1, <unk> 1 (lowercased)
  count_words(&c, "The the THE the the");
  count_words(&c, "b a b a b a");
  count_words(&c, "dog cat Cat dog zebra apple");
  ct_vocab_counter_add(&c, "<unk>");  // a token spelled like a special
  ct_vocab v;
  CHECK(ct_vocab_build(&v, &c, 1, 0) == CT_OK, "build: %s", ct_last_error());
  static const char *const want_all[] = {"<pad>", "<unk>", "<bos>", "<eos>",
                                         "the",   "a",     "b",     "cat",
                                         "dog",   "apple", "zebra"};
  CHECK(ct_vocab_size(&v) == 11, "size %lld", (long long)ct_vocab_size(&v));
  for (int i = 0; i < 11 && i < ct_vocab_size(&v); i++)
    CHECK(!strcmp(ct_vocab_token(&v, i), want_all[i]), "id %d: %s, want %s", i,
          ct_vocab_token(&v, i), want_all[i]);
  CHECK(ct_vocab_id(&v, "<eos>") == CT_VOCAB_EOS, "eos id");
  CHECK(ct_vocab_id(&v, "<unk>") == CT_VOCAB_UNK, "<unk> in the corpus");
  CHECK(ct_vocab_id(&v, "missing") == CT_VOCAB_UNK, "unknown -> unk");
  CHECK(ct_vocab_token(&v, 11) == NULL && ct_last_status() == CT_ERR_INDEX,
        "id out of range");
  ct_vocab_free(&v);

  CHECK(ct_vocab_build(&v, &c, 2, 0) == CT_OK, "build min_freq 2");
  CHECK(ct_vocab_size(&v) == 9, "min_freq 2: size %lld",
        (long long)ct_vocab_size(&v));
  CHECK(ct_vocab_id(&v, "zebra") == CT_VOCAB_UNK, "rare -> unk");
  ct_string_list toks = {0};
  ct_tokenize("the cat, zebra", true, &toks);
  int32_t ids[4];
  int64_t unknown;
  ct_vocab_encode(&v, &toks, ids, &unknown);
  CHECK(ids[0] == 4 && ids[1] == 7 && ids[2] == CT_VOCAB_UNK &&
            ids[3] == CT_VOCAB_UNK && unknown == 2,
        "encode: %d %d %d %d (%lld unknown)", ids[0], ids[1], ids[2], ids[3],
        (long long)unknown);
  ct_string_list_free(&toks);
  const int32_t seq[] = {CT_VOCAB_BOS, 4, 8, CT_VOCAB_PAD, CT_VOCAB_UNK,
                         CT_VOCAB_EOS, 5, 6};
  const char *out[8];
  int64_t n;
  CHECK(ct_vocab_decode(&v, seq, 8, out, &n) == CT_OK && n == 3 &&
            !strcmp(out[0], "the") && !strcmp(out[1], "dog") &&
            !strcmp(out[2], "<unk>"),
        "decode: %lld tokens", (long long)n);
  const int32_t bad_ids[] = {4, 99};
  CHECK(ct_vocab_decode(&v, bad_ids, 2, out, &n) == CT_ERR_INDEX,
        "decode out of range");
  ct_vocab_free(&v);

  CHECK(ct_vocab_build(&v, &c, 1, 6) == CT_OK && ct_vocab_size(&v) == 6 &&
            ct_vocab_id(&v, "a") == 5 && ct_vocab_id(&v, "b") == CT_VOCAB_UNK,
        "max_size 6 keeps the, a (tie a < b)");
  ct_vocab_free(&v);
  CHECK(ct_vocab_build(&v, &c, 1, 3) == CT_ERR_ARG, "max_size below specials");
  ct_vocab_counter_free(&c);

  // Serialization round trip, with tokens needing escapes.
  ct_vocab_counter_add(&c, "über");
  ct_vocab_counter_add(&c, "a\nb");
  ct_vocab_counter_add(&c, "tab\there");
  ct_vocab_counter_add(&c, "back\\slash\r");
  ct_vocab_build(&v, &c, 1, 0);
  ct_vocab_counter_free(&c);
  char *buf;
  size_t size;
  CHECK(ct_vocab_save(&v, &buf, &size) == CT_OK, "save");
  CHECK(size > 18 && !memcmp(buf, "ctrain-vocab 1\n8\n<pad>\n", 23),
        "save header: %.*s", (int)size, buf);
  printf("serialized vocab (%zu bytes):\n%.*s", size, (int)size, buf);
  ct_vocab w;
  CHECK(ct_vocab_load(&w, buf, size) == CT_OK, "load: %s", ct_last_error());
  CHECK(ct_vocab_size(&w) == ct_vocab_size(&v), "loaded size %lld",
        (long long)ct_vocab_size(&w));
  for (int32_t i = 0; i < ct_vocab_size(&v) && i < ct_vocab_size(&w); i++) {
    CHECK(!strcmp(ct_vocab_token(&v, i), ct_vocab_token(&w, i)),
          "token %d differs", i);
    CHECK(ct_vocab_id(&w, ct_vocab_token(&v, i)) == i, "id of token %d", i);
  }
  free(buf);
  // Tokens reach the terminal: an escape sequence or invalid UTF-8 in a
  // stored vocabulary is refused.
  ct_vocab x;
  const char *esc =
      "ctrain-vocab 1\n5\n<pad>\n<unk>\n<bos>\n<eos>\nred\x1b[31m\n";
  CHECK(ct_vocab_load(&x, esc, strlen(esc)) == CT_ERR_FORMAT &&
            strstr(ct_last_error(), "line 7: control character U+001B"),
        "escape sequence in a token: %s", ct_last_error());
  const char *bad = "ctrain-vocab 1\n5\n<pad>\n<unk>\n<bos>\n<eos>\nx\xff\n";
  CHECK(ct_vocab_load(&x, bad, strlen(bad)) == CT_ERR_FORMAT &&
            strstr(ct_last_error(), "invalid UTF-8 byte 0xff"),
        "invalid UTF-8 in a token: %s", ct_last_error());
  ct_vocab_free(&w);
  ct_vocab_free(&v);

  printf("malformed vocab buffers:\n");
  const char *specials = "<pad>\n<unk>\n<bos>\n<eos>\n";
  char b[256];
  check_vocab_error("", "not a ctrain vocabulary", "empty buffer");
  check_vocab_error("hello\n", "not a ctrain vocabulary", "bad magic");
  snprintf(b, sizeof b, "ctrain-vocab 2\n4\n%s", specials);
  check_vocab_error(b, "this build reads version 1", "bad version");
  check_vocab_error("ctrain-vocab 1\nabc\n", "line 2: bad token count",
                    "bad count");
  snprintf(b, sizeof b, "ctrain-vocab 1\n6\n%sx\n", specials);
  check_vocab_error(b, "truncated", "too few tokens");
  snprintf(b, sizeof b, "ctrain-vocab 1\n5\n%sx", specials);
  check_vocab_error(b, "truncated", "no final newline");
  snprintf(b, sizeof b, "ctrain-vocab 1\n6\n%sx\nbad\\q\n", specials);
  check_vocab_error(b, "line 8: bad escape '\\q'", "bad escape");
  snprintf(b, sizeof b, "ctrain-vocab 1\n6\n%sx\nx\n", specials);
  check_vocab_error(b, "line 8: duplicate token", "duplicate");
  snprintf(b, sizeof b, "ctrain-vocab 1\n5\n%s\n", specials);
  check_vocab_error(b, "line 7: empty token", "empty token");
  check_vocab_error("ctrain-vocab 1\n4\n<pad>\n<bos>\n<unk>\n<eos>\n",
                    "line 4: id 1 must be the special token <unk>",
                    "specials out of order");
  snprintf(b, sizeof b, "ctrain-vocab 1\n4\n%sextra\n", specials);
  check_vocab_error(b, "line 7: unexpected data", "extra data");
  snprintf(b, sizeof b, "ctrain-vocab 1\n5\n%sa\tb\n", specials);
  check_vocab_error(b, "line 7: raw control byte 0x09", "raw tab");
}

// The one UTF-8 encoder (data/utf8.h) at every length boundary, and its WTF-8
// variant for the lone surrogates JSON escapes may carry.
static void test_utf8_encode(void) {
  static const struct {
    int32_t cp;
    const char *utf8;
  } cases[] = {
      {0x00, ""},
      {0x7F, "\x7F"},
      {0x80, "\xC2\x80"},
      {0x7FF, "\xDF\xBF"},
      {0x800, "\xE0\xA0\x80"},
      {0xD7FF, "\xED\x9F\xBF"},
      {0xE000, "\xEE\x80\x80"},
      {0xFFFF, "\xEF\xBF\xBF"},
      {0x10000, "\xF0\x90\x80\x80"},
      {0x10FFFF, "\xF4\x8F\xBF\xBF"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[4], wtf[4];
    int n = ct_utf8_encode(cases[i].cp, out);
    int want = cases[i].cp ? (int)strlen(cases[i].utf8) : 1;
    size_t pos = 0;
    CHECK(n == want && !memcmp(out, cases[i].utf8, (size_t)want) &&
              ct_wtf8_encode(cases[i].cp, wtf) == n &&
              !memcmp(wtf, out, (size_t)n) &&
              ct_utf8_decode(out, (size_t)n, &pos) == cases[i].cp &&
              pos == (size_t)n,
          "U+%04X: %d bytes", (unsigned)cases[i].cp, n);
  }
  static const struct {
    int32_t cp;
    const char *wtf8;
  } surrogates[] = {
      {0xD800, "\xED\xA0\x80"},
      {0xDBFF, "\xED\xAF\xBF"},
      {0xDC00, "\xED\xB0\x80"},
      {0xDFFF, "\xED\xBF\xBF"},
  };
  for (size_t i = 0; i < sizeof surrogates / sizeof surrogates[0]; i++) {
    char out[4];
    CHECK(ct_utf8_encode(surrogates[i].cp, out) == 0, "U+%04X is no UTF-8",
          (unsigned)surrogates[i].cp);
    CHECK(ct_wtf8_encode(surrogates[i].cp, out) == 3 &&
              !memcmp(out, surrogates[i].wtf8, 3) &&
              ct_utf8_find_invalid(out, 3) == 0,
          "U+%04X as WTF-8", (unsigned)surrogates[i].cp);
  }
  const int32_t out_of_range[] = {-1, 0x110000, INT32_MAX};
  for (size_t i = 0; i < 3; i++) {
    char out[4];
    CHECK(ct_utf8_encode(out_of_range[i], out) == 0 &&
              ct_wtf8_encode(out_of_range[i], out) == 0,
          "%d out of range", (int)out_of_range[i]);
  }
}

int main(void) {
  test_utf8_encode();
  test_tokenizer();
  test_vocab();
  return test_summary("tokenizer_vocab");
}
