// The JSON reader (see json.h): recursive descent over the bytes, values
// appended to one array and linked to their siblings by index; and the
// string escaper, its inverse. Not here: writing documents, or what a
// document means (its callers check that).
#include "data/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"
#include "data/utf8.h"

typedef struct parser {
  const char *s;
  size_t len, pos;
  size_t line_start;  // offset of the current line's first byte
  int line;
  bool python;  // CT_JSON_PYTHON
  ct_json_error *err;
  ct_json_doc *doc;
  char *buf;  // scratch for unescaping one string
  int64_t buf_cap;
} parser;

static int column_at(const parser *p, size_t pos) {
  return (int)(pos - p->line_start) + 1;
}

static ct_status fail_at(const parser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ct_status fail_at(const parser *p, size_t pos, const char *fmt, ...) {
  p->err->line = p->line;
  p->err->column = column_at(p, pos);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err->what, sizeof p->err->what, fmt, ap);
  va_end(ap);
  return CT_ERR_FORMAT;
}

static void skip_space(parser *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c == '\n') {
      p->line++;
      p->line_start = p->pos + 1;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      return;
    }
    p->pos++;
  }
}

// Appends a value starting at the current position; its index in *out.
static ct_status new_value(parser *p, ct_json_value_type type, int64_t *out) {
  ct_json_doc *d = p->doc;
  if (ct_grow_array((void **)&d->values, &d->cap, d->count + 1,
                    sizeof *d->values, "JSON values"))
    return CT_ERR_NOMEM;
  *out = d->count++;
  d->values[*out] = (ct_json_value){.type = type,
                                    .line = p->line,
                                    .column = column_at(p, p->pos),
                                    .str = -1,
                                    .key = -1,
                                    .first = -1,
                                    .next = -1};
  return CT_OK;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits at p->pos (after "\u"); -1 when malformed.
static int32_t read_hex4(parser *p) {
  if (p->len - p->pos < 4) return -1;
  int32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hex_digit(p->s[p->pos + i]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  p->pos += 4;
  return v;
}

// A string at p->pos (the opening quote), unescaped and pushed to
// doc->strings; its index in *out.
static ct_status parse_string(parser *p, int64_t *out) {
  size_t start = p->pos++;
  int64_t n = 0;
  for (;;) {
    if (p->pos >= p->len) return fail_at(p, start, "unterminated string");
    // An escape expands to at most 4 bytes.
    if (ct_grow_array((void **)&p->buf, &p->buf_cap, n + 4, 1, "JSON string"))
      return CT_ERR_NOMEM;
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"') break;
    if (c < 0x20)
      return fail_at(p, p->pos,
                     c == '\n' ? "unterminated string (newline "
                                 "inside it)"
                               : "control character in a string (escape "
                                 "it)");
    if (c != '\\') {
      p->buf[n++] = (char)c;
      p->pos++;
      continue;
    }
    size_t esc = p->pos++;
    if (p->pos >= p->len) return fail_at(p, start, "unterminated string");
    char e = p->s[p->pos++];
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      static const char map[] = "\"\\/\b\f\n\r\t";
      p->buf[n++] = map[simple - "\"\\/bfnrt"];
      continue;
    }
    if (e != 'u') return fail_at(p, esc, "invalid escape in a string");
    int32_t cp = read_hex4(p);
    if (cp < 0)
      return fail_at(p, esc, "invalid \\u escape (need 4 hex digits)");
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its pair follows
      size_t after = p->pos;
      int32_t lo = -1;
      if (p->len - p->pos >= 2 && p->s[p->pos] == '\\' &&
          p->s[p->pos + 1] == 'u') {
        p->pos += 2;
        lo = read_hex4(p);
      }
      if (lo >= 0xDC00 && lo <= 0xDFFF)
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      else
        p->pos = after;  // alone: what follows is read on its own
    }
    bool lone = cp >= 0xD800 && cp <= 0xDFFF;
    if (lone && !p->python)
      return fail_at(p, esc, "unpaired UTF-16 surrogate in a \\u escape");
    if (cp == 0 && !p->python)
      return fail_at(p, esc, "\\u0000 in a string is not supported");
    // ct_utf8_encode but for the lone surrogates CT_JSON_PYTHON lets by.
    n += ct_wtf8_encode(cp, p->buf + n);
  }
  p->pos++;  // the closing quote
  if (ct_string_list_push(&p->doc->strings, p->buf, (size_t)n))
    return CT_ERR_NOMEM;
  *out = p->doc->strings.count - 1;
  return CT_OK;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool match_word(parser *p, const char *word) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n)) return false;
  p->pos += n;
  return true;
}

// A number, checked against the JSON grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and converted by strtod;
// *integer says whether it had neither fraction nor exponent.
static ct_status parse_number(parser *p, double *out, bool *integer) {
  static const struct {
    const char *word;
    double value;
  } python_words[] = {
      {"NaN", NAN},
      {"Infinity", INFINITY},
      {"-Infinity", -INFINITY},
  };
  *integer = false;
  for (size_t k = 0;
       p->python && k < sizeof python_words / sizeof python_words[0]; k++)
    if (match_word(p, python_words[k].word)) {
      *out = python_words[k].value;
      return CT_OK;
    }
  size_t start = p->pos, i = p->pos;
  const char *s = p->s;
  if (i < p->len && s[i] == '-') i++;
  if (i >= p->len || !is_digit(s[i]))
    return fail_at(p, start, "invalid number");
  if (s[i] == '0') {
    i++;
    if (i < p->len && is_digit(s[i]))
      return fail_at(p, start, "invalid number (leading zero)");
  } else {
    while (i < p->len && is_digit(s[i])) i++;
  }
  *integer = i >= p->len || (s[i] != '.' && s[i] != 'e' && s[i] != 'E');
  if (i < p->len && s[i] == '.') {
    i++;
    if (i >= p->len || !is_digit(s[i]))
      return fail_at(p, start, "invalid number (no digit after '.')");
    while (i < p->len && is_digit(s[i])) i++;
  }
  if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= p->len || !is_digit(s[i]))
      return fail_at(p, start, "invalid number (no digit in the exponent)");
    while (i < p->len && is_digit(s[i])) i++;
  }
  char tmp[64];
  size_t n = i - start;
  if (n >= sizeof tmp) {  // long literals: parse a NUL-terminated copy
    char *copy = malloc(n + 1);
    if (!copy) return ct_error(CT_ERR_NOMEM, "JSON number: out of memory");
    memcpy(copy, s + start, n);
    copy[n] = 0;
    *out = strtod(copy, NULL);
    free(copy);
  } else {
    memcpy(tmp, s + start, n);
    tmp[n] = 0;
    *out = strtod(tmp, NULL);
  }
  if (!isfinite(*out) && !p->python)
    return fail_at(p, start, "number out of range");
  p->pos = i;
  return CT_OK;
}

static ct_status parse_value(parser *p, int depth, int64_t *out);

// An array or object at p->pos (its opening bracket), children linked.
static ct_status parse_container(parser *p, int depth, bool object,
                                 int64_t self) {
  char close = object ? '}' : ']';
  p->pos++;
  skip_space(p);
  if (p->pos < p->len && p->s[p->pos] == close) {
    p->pos++;
    return CT_OK;
  }
  int64_t prev = -1;
  for (;;) {
    int64_t key = -1;
    if (object) {
      if (p->pos >= p->len || p->s[p->pos] != '"')
        return fail_at(p, p->pos,
                       prev < 0 ? "expected a key string or '}'"
                                : "expected a key string");
      ct_status st = parse_string(p, &key);
      if (st) return st;
      skip_space(p);
      if (p->pos >= p->len || p->s[p->pos] != ':')
        return fail_at(p, p->pos, "expected ':' after key '%s'",
                       ct_string_list_get(&p->doc->strings, key));
      p->pos++;
      skip_space(p);
    }
    int64_t child;
    ct_status st = parse_value(p, depth + 1, &child);
    if (st) return st;
    ct_json_value *v = p->doc->values;
    v[child].key = key;
    if (prev < 0)
      v[self].first = child;
    else
      v[prev].next = child;
    v[self].count++;
    prev = child;
    skip_space(p);
    if (p->pos < p->len && p->s[p->pos] == ',') {
      p->pos++;
      skip_space(p);
      if (p->pos < p->len && p->s[p->pos] == close)
        return fail_at(
            p, p->pos,
            object ? "trailing ',' before '}'" : "trailing ',' before ']'");
      continue;
    }
    if (p->pos < p->len && p->s[p->pos] == close) {
      p->pos++;
      return CT_OK;
    }
    return fail_at(p, p->pos,
                   object ? "expected ',' or '}' in an object"
                          : "expected ',' or ']' in an array");
  }
}

static ct_status parse_value(parser *p, int depth, int64_t *out) {
  if (p->pos >= p->len) return fail_at(p, p->pos, "unexpected end of input");
  if (depth > CT_JSON_MAX_DEPTH) return fail_at(p, p->pos, "nesting too deep");
  char c = p->s[p->pos];
  ct_status st;
  switch (c) {
  case '{':
  case '[':
    if ((st = new_value(p, c == '{' ? CT_JVAL_OBJECT : CT_JVAL_ARRAY, out)))
      return st;
    return parse_container(p, depth, c == '{', *out);
  case '"': {
    int64_t s;
    if ((st = new_value(p, CT_JVAL_STRING, out))) return st;
    if ((st = parse_string(p, &s))) return st;
    p->doc->values[*out].str = s;
    return CT_OK;
  }
  case 't':
  case 'f':
  case 'n': {
    size_t at = p->pos;
    bool t = match_word(p, "true"), f = !t && match_word(p, "false");
    bool n = !t && !f && match_word(p, "null");
    if (!t && !f && !n) {
      p->pos = at;
      return fail_at(p, at, "invalid literal (true, false or null?)");
    }
    p->pos = at;  // the value starts here
    if ((st = new_value(p, n ? CT_JVAL_NULL : CT_JVAL_BOOL, out))) return st;
    p->doc->values[*out].number = t ? 1 : 0;
    p->pos = at + (t ? 4 : f ? 5 : 4);
    return CT_OK;
  }
  default: {
    if (c != '-' && !is_digit(c) && !(p->python && (c == 'N' || c == 'I')))
      return fail_at(p, p->pos, "expected a value");
    double num = 0;
    bool integer;
    if ((st = new_value(p, CT_JVAL_NUMBER, out))) return st;
    if ((st = parse_number(p, &num, &integer))) return st;
    p->doc->values[*out].number = num;
    p->doc->values[*out].integer = integer;
    return CT_OK;
  }
  }
}

ct_status ct_json_doc_parse_quiet(ct_json_doc *doc, const char *text,
                                  size_t len, unsigned flags,
                                  ct_json_error *err) {
  *doc = (ct_json_doc){0};
  *err = (ct_json_error){0};
  parser p = {.s = text,
              .len = len,
              .line = 1,
              .python = (flags & CT_JSON_PYTHON) != 0,
              .err = err,
              .doc = doc};
  if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3))  // a UTF-8 BOM
    p.pos = p.line_start = 3;
  skip_space(&p);
  int64_t root;
  ct_status st = parse_value(&p, 0, &root);
  if (!st) {
    skip_space(&p);
    if (p.pos < p.len)
      st = fail_at(&p, p.pos, "unexpected text after the JSON value");
  }
  free(p.buf);
  if (st) ct_json_doc_free(doc);
  return st;
}

ct_status ct_json_doc_parse(ct_json_doc *doc, const char *text, size_t len,
                            const char *name) {
  ct_json_error err;
  ct_status st = ct_json_doc_parse_quiet(doc, text, len, 0, &err);
  if (st == CT_ERR_FORMAT)
    return ct_error(st, "%s:%d:%d: %s", name, err.line, err.column, err.what);
  return st;
}

ct_status ct_json_doc_read(ct_json_doc *doc, const char *path) {
  *doc = (ct_json_doc){0};
  uint8_t *bytes;
  int64_t len;
  ct_status st = ct_image_read_file(path, CT_JSON_FILE_MAX_BYTES, &bytes, &len);
  if (st) return st;
  st = ct_json_doc_parse(doc, (const char *)bytes, (size_t)len, path);
  free(bytes);
  return st;
}

void ct_json_doc_free(ct_json_doc *doc) {
  free(doc->values);
  ct_string_list_free(&doc->strings);
  *doc = (ct_json_doc){0};
}

const ct_json_value *ct_json_first(const ct_json_doc *doc,
                                   const ct_json_value *v) {
  if (!v || (v->type != CT_JVAL_ARRAY && v->type != CT_JVAL_OBJECT) ||
      v->first < 0)
    return NULL;
  return &doc->values[v->first];
}

const ct_json_value *ct_json_next(const ct_json_doc *doc,
                                  const ct_json_value *v) {
  return v && v->next >= 0 ? &doc->values[v->next] : NULL;
}

const ct_json_value *ct_json_member(const ct_json_doc *doc,
                                    const ct_json_value *obj, const char *key) {
  if (!obj || obj->type != CT_JVAL_OBJECT) return NULL;
  for (const ct_json_value *m = ct_json_first(doc, obj); m;
       m = ct_json_next(doc, m))
    if (!strcmp(ct_string_list_get(&doc->strings, m->key), key)) return m;
  return NULL;
}

const char *ct_json_str(const ct_json_doc *doc, const ct_json_value *v) {
  return v && v->type == CT_JVAL_STRING
             ? ct_string_list_get(&doc->strings, v->str)
             : NULL;
}

const char *ct_json_key(const ct_json_doc *doc, const ct_json_value *v) {
  return v && v->key >= 0 ? ct_string_list_get(&doc->strings, v->key) : NULL;
}

void ct_json_write_string(const char *s, ct_json_put_fn put, void *sink) {
  put(sink, "\"", 1);
  const size_t len = strlen(s);
  for (size_t i = 0; i < len;) {
    const unsigned char *c = (const unsigned char *)s + i;
    static const char plain[] = "\"\\\b\f\n\r\t", escaped[] = "\"\\bfnrt";
    const char *k = *c ? strchr(plain, *c) : NULL;
    char esc[8];
    if (k) {
      esc[0] = '\\';
      esc[1] = escaped[k - plain];
      put(sink, esc, 2);
      i++;
    } else if (*c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", *c);
      put(sink, esc, 6);
      i++;
    } else if (*c < 0x80) {
      put(sink, c, 1);
      i++;
    } else {
      // JSON text is UTF-8: a byte that is not part of a valid sequence is
      // written as U+FFFD, the replacement character.
      size_t next = i;
      if (ct_utf8_decode(s, len, &next) < 0)
        put(sink, "\\ufffd", 6);
      else
        put(sink, c, next - i);
      i = next;
    }
  }
  put(sink, "\"", 1);
}

void ct_json_put_buffer(void *sink, const void *bytes, size_t n) {
  ct_byte_buffer_append(sink, bytes, n);
}
