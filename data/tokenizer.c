// The word/punctuation tokenizer and detokenizer (rules in tokenizer.h).
#include "data/tokenizer.h"
#include "data/utf8.h"

#include <stdlib.h>
#include <string.h>

enum char_class { CLASS_WORD, CLASS_SPACE, CLASS_PUNCT };

static enum char_class classify(int32_t c) {
  if (c <= 0x20 || c == 0x7F || c == 0x85 || c == 0xA0 || c == 0x1680 ||
      (c >= 0x2000 && c <= 0x200B) || c == 0x2028 || c == 0x2029 ||
      c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF)
    return CLASS_SPACE;
  if (c < 0x80) {
    bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                 (c >= 'A' && c <= 'Z');
    return alnum ? CLASS_WORD : CLASS_PUNCT;
  }
  if (c == 0xA1 || c == 0xA7 || c == 0xAB || c == 0xB6 || c == 0xB7 ||
      c == 0xBB || c == 0xBF || (c >= 0x2010 && c <= 0x2027) ||
      (c >= 0x2030 && c <= 0x205E) || (c >= 0x3001 && c <= 0x3003) ||
      (c >= 0x3008 && c <= 0x3011))
    return CLASS_PUNCT;
  return CLASS_WORD;
}

static bool is_digit(int32_t c) { return c >= '0' && c <= '9'; }

int32_t ct_unicode_lower(int32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xC0) return c;
  if (c <= 0xDE) return c == 0xD7 ? c : c + 32;  // À..Þ except ×
  if (c >= 0x100 && c <= 0x17F) {                // Latin Extended-A
    if (c == 0x130) return 'i';                  // İ
    if (c == 0x178) return 0xFF;                 // Ÿ → ÿ
    if (c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
    // Ĺ..ň and Ź..ž pair odd (upper) with even (lower); the rest even/odd.
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
      return (c & 1) ? c + 1 : c;
    return (c & 1) ? c : c + 1;
  }
  if (c == 0x1E9E) return 0xDF;                               // ẞ → ß
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;  // Greek
  if (c >= 0x410 && c <= 0x42F) return c + 32;                // Cyrillic А..Я
  if (c >= 0x400 && c <= 0x40F) return c + 80;                // Ѐ..Џ
  return c;
}

// A token being built: bytes plus the last code point appended.
typedef struct token_buf {
  char *s;
  int64_t len, cap;
  int32_t last;
} token_buf;

static ct_status token_append(token_buf *t, int32_t cp) {
  char enc[4];
  int n = ct_utf8_encode(cp, enc);
  ct_status st =
      ct_grow_array((void **)&t->s, &t->cap, t->len + n, 1, "tokenizer");
  if (st) return st;
  memcpy(t->s + t->len, enc, (size_t)n);
  t->len += n;
  t->last = cp;
  return CT_OK;
}

static ct_status token_flush(token_buf *t, ct_string_list *out) {
  if (!t->len) return CT_OK;
  ct_status st = ct_string_list_push(out, t->s, (size_t)t->len);
  t->len = 0;
  return st;
}

// Whether punctuation `c` between the token so far (last code point `prev`)
// and the next code point `next` stays inside the word.
static bool joins_word(int32_t c, int32_t prev, int32_t next) {
  if (c == '\'' || c == 0x2019 || c == '-')
    return classify(prev) == CLASS_WORD && classify(next) == CLASS_WORD;
  if (c == '.' || c == ',' || c == ':') return is_digit(prev) && is_digit(next);
  return false;
}

ct_status ct_tokenize(const char *text, bool lowercase, ct_string_list *out) {
  const size_t len = strlen(text);
  token_buf t = {0};
  ct_status st = CT_OK;
  size_t pos = 0;
  while (!st && pos < len) {
    int32_t c = ct_utf8_decode(text, len, &pos);
    if (c < 0) c = 0xFFFD;
    enum char_class k = classify(c);
    if (k == CLASS_WORD) {
      st = token_append(&t, lowercase ? ct_unicode_lower(c) : c);
      continue;
    }
    if (k == CLASS_SPACE) {
      st = token_flush(&t, out);
      continue;
    }
    size_t peek = pos;
    int32_t next = pos < len ? ct_utf8_decode(text, len, &peek) : ' ';
    if (t.len && joins_word(c, t.last, next)) {
      st = token_append(&t, c);
      continue;
    }
    st = token_flush(&t, out);
    if (!st) st = token_append(&t, c);
    while (!st && c == '.' && pos < len && text[pos] == '.')  // "..."
      st = token_append(&t, text[pos++]);
    if (!st) st = token_flush(&t, out);
  }
  if (!st) st = token_flush(&t, out);
  free(t.s);
  return st;
}

// How a token attaches to its neighbours when detokenizing.
enum { ATTACH_NONE = 0, ATTACH_LEFT = 1, ATTACH_RIGHT = 2 };

typedef struct quote_state {
  bool double_open, single_open, low_open;  // " ' „/‚ currently open
} quote_state;

static int attachment(const char *tok, quote_state *q) {
  static const char *const closing[] = {",",
                                        ".",
                                        "...",
                                        "!",
                                        "?",
                                        ":",
                                        ";",
                                        ")",
                                        "]",
                                        "}",
                                        "%",
                                        "\xC2\xBB" /* » */,
                                        "\xE2\x80\xBA" /* › */,
                                        "\xE2\x80\x9D" /* ” */,
                                        "\xE2\x80\x99" /* ’ */,
                                        "\xE2\x80\xA6" /* … */};
  static const char *const opening[] = {"(",
                                        "[",
                                        "{",
                                        "\xC2\xAB" /* « */,
                                        "\xE2\x80\xB9" /* ‹ */,
                                        "\xE2\x80\x9E" /* „ */,
                                        "\xE2\x80\x9A" /* ‚ */,
                                        "\xE2\x80\x98" /* ‘ */,
                                        "\xC2\xBF" /* ¿ */,
                                        "\xC2\xA1" /* ¡ */};
  if (!strcmp(tok, "\"") || !strcmp(tok, "'")) {
    bool *open = tok[0] == '"' ? &q->double_open : &q->single_open;
    *open = !*open;
    return *open ? ATTACH_RIGHT : ATTACH_LEFT;
  }
  if (!strcmp(tok, "\xE2\x80\x9C")) {  // “ closes a German „, else opens
    if (q->low_open) {
      q->low_open = false;
      return ATTACH_LEFT;
    }
    return ATTACH_RIGHT;
  }
  for (size_t i = 0; i < sizeof closing / sizeof *closing; i++)
    if (!strcmp(tok, closing[i])) return ATTACH_LEFT;
  for (size_t i = 0; i < sizeof opening / sizeof *opening; i++)
    if (!strcmp(tok, opening[i])) {
      if (tok[0] == '\xE2' && (tok[2] == '\x9E' || tok[2] == '\x9A'))
        q->low_open = true;
      return ATTACH_RIGHT;
    }
  return ATTACH_NONE;
}

char *ct_detokenize(const char *const *tokens, int64_t count) {
  size_t size = 1;
  for (int64_t i = 0; i < count; i++) size += strlen(tokens[i]) + 1;
  char *out = malloc(size);
  if (!out) {
    ct_error(CT_ERR_NOMEM, "detokenize: out of memory (%zu bytes)", size);
    return NULL;
  }
  size_t n = 0;
  bool glue_next = true;  // no space before the next token
  quote_state q = {0};
  for (int64_t i = 0; i < count; i++) {
    int a = attachment(tokens[i], &q);
    if (!glue_next && !(a & ATTACH_LEFT)) out[n++] = ' ';
    size_t len = strlen(tokens[i]);
    memcpy(out + n, tokens[i], len);
    n += len;
    glue_next = (a & ATTACH_RIGHT) != 0;
  }
  out[n] = '\0';
  return out;
}
