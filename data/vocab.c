// Vocabularies (see vocab.h): counting, building, lookup, encode/decode and
// the text serialization.
#include "data/vocab.h"
#include "data/tokenizer.h"
#include "data/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const special_tokens[CT_VOCAB_SPECIALS] = {
    [CT_VOCAB_PAD] = "<pad>",
    [CT_VOCAB_UNK] = "<unk>",
    [CT_VOCAB_BOS] = "<bos>",
    [CT_VOCAB_EOS] = "<eos>"};

static const char vocab_magic[] = "ctrain-vocab";
enum { VOCAB_VERSION = 1 };

ct_status ct_vocab_counter_add(ct_vocab_counter *c, const char *token) {
  int added;
  int64_t i = ct_string_table_add(&c->tokens, token, strlen(token), &added);
  if (i < 0) return ct_last_status();
  if (added) {
    ct_status st = ct_grow_array((void **)&c->counts, &c->counts_cap, i + 1,
                                 sizeof *c->counts, "vocab counter");
    if (st) return st;
    c->counts[i] = 0;
  }
  c->counts[i]++;
  return CT_OK;
}

ct_status ct_vocab_counter_add_tokens(ct_vocab_counter *c,
                                      const ct_string_list *tokens) {
  for (int64_t i = 0; i < tokens->count; i++) {
    ct_status st = ct_vocab_counter_add(c, ct_string_list_get(tokens, i));
    if (st) return st;
  }
  return CT_OK;
}

ct_status ct_vocab_counter_add_text(ct_vocab_counter *c, const char *text,
                                    bool lowercase) {
  ct_string_list tokens = {0};
  ct_status st = ct_tokenize(text, lowercase, &tokens);
  if (!st) st = ct_vocab_counter_add_tokens(c, &tokens);
  ct_string_list_free(&tokens);
  return st;
}

void ct_vocab_counter_free(ct_vocab_counter *c) {
  ct_string_table_free(&c->tokens);
  free(c->counts);
  *c = (ct_vocab_counter){0};
}

typedef struct counted {
  int64_t count;
  const char *token;
} counted;

// Count descending, then bytewise token order.
static int counted_cmp(const void *pa, const void *pb) {
  const counted *a = pa, *b = pb;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return strcmp(a->token, b->token);
}

static ct_status vocab_add(ct_vocab *v, const char *token, size_t len) {
  int added;
  if (ct_string_table_add(&v->tokens, token, len, &added) < 0)
    return ct_last_status();
  return CT_OK;
}

static ct_status vocab_init_specials(ct_vocab *v) {
  *v = (ct_vocab){0};
  for (int i = 0; i < CT_VOCAB_SPECIALS; i++) {
    ct_status st = vocab_add(v, special_tokens[i], strlen(special_tokens[i]));
    if (st) return st;
  }
  return CT_OK;
}

ct_status ct_vocab_build(ct_vocab *v, const ct_vocab_counter *c,
                         int64_t min_freq, int64_t max_size) {
  *v = (ct_vocab){0};
  if (max_size != 0 && max_size < CT_VOCAB_SPECIALS)
    return ct_error(CT_ERR_ARG,
                    "vocab: max_size %lld is below the %d special tokens "
                    "(use 0 for no limit)",
                    (long long)max_size, CT_VOCAB_SPECIALS);
  const int64_t n = ct_string_table_count(&c->tokens);
  counted *items = malloc((size_t)(n ? n : 1) * sizeof *items);
  if (!items)
    return ct_error(CT_ERR_NOMEM, "vocab: out of memory sorting %lld tokens",
                    (long long)n);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++)
    if (c->counts[i] >= min_freq)
      items[kept++] =
          (counted){c->counts[i], ct_string_list_get(&c->tokens.strings, i)};
  qsort(items, (size_t)kept, sizeof *items, counted_cmp);
  ct_status st = vocab_init_specials(v);
  for (int64_t i = 0; !st && i < kept; i++) {
    if (max_size && ct_vocab_size(v) >= max_size) break;
    st = vocab_add(v, items[i].token, strlen(items[i].token));
  }
  free(items);
  if (st) ct_vocab_free(v);
  return st;
}

void ct_vocab_free(ct_vocab *v) { ct_string_table_free(&v->tokens); }

int32_t ct_vocab_id(const ct_vocab *v, const char *token) {
  int64_t i = ct_string_table_find(&v->tokens, token, strlen(token));
  return i < 0 ? CT_VOCAB_UNK : (int32_t)i;
}

const char *ct_vocab_token(const ct_vocab *v, int32_t id) {
  if (id < 0 || id >= ct_vocab_size(v)) {
    ct_error(CT_ERR_INDEX, "vocab: id %d out of range [0, %lld)", id,
             (long long)ct_vocab_size(v));
    return NULL;
  }
  return ct_string_list_get(&v->tokens.strings, id);
}

void ct_vocab_encode(const ct_vocab *v, const ct_string_list *tokens,
                     int32_t *ids, int64_t *unknown) {
  int64_t unk = 0;
  for (int64_t i = 0; i < tokens->count; i++) {
    const char *t = ct_string_list_get(tokens, i);
    int64_t id = ct_string_table_find(&v->tokens, t,
                                      (size_t)ct_string_list_len(tokens, i));
    if (id < 0) {
      id = CT_VOCAB_UNK;
      unk++;
    }
    ids[i] = (int32_t)id;
  }
  if (unknown) *unknown = unk;
}

ct_status ct_vocab_decode(const ct_vocab *v, const int32_t *ids, int64_t n,
                          const char **tokens, int64_t *count) {
  *count = 0;
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] == CT_VOCAB_EOS) break;
    if (ids[i] == CT_VOCAB_PAD || ids[i] == CT_VOCAB_BOS) continue;
    const char *t = ct_vocab_token(v, ids[i]);
    if (!t) return ct_last_status();
    tokens[(*count)++] = t;
  }
  return CT_OK;
}

// The escape letter for a byte that must be escaped, or 0.
static char escape_of(char c) {
  switch (c) {
  case '\\': return '\\';
  case '\n': return 'n';
  case '\t': return 't';
  case '\r': return 'r';
  default: return 0;
  }
}

ct_status ct_vocab_save(const ct_vocab *v, char **buf, size_t *size) {
  const int64_t n = ct_vocab_size(v);
  size_t cap = sizeof vocab_magic + 48;
  for (int64_t i = 0; i < n; i++)
    cap += 2 * (size_t)ct_string_list_len(&v->tokens.strings, i) + 1;
  char *out = malloc(cap);
  if (!out)
    return ct_error(CT_ERR_NOMEM, "vocab: out of memory saving %lld tokens",
                    (long long)n);
  size_t k = (size_t)snprintf(out, cap, "%s %d\n%lld\n", vocab_magic,
                              VOCAB_VERSION, (long long)n);
  for (int64_t i = 0; i < n; i++) {
    for (const char *p = ct_string_list_get(&v->tokens.strings, i); *p; p++) {
      char e = escape_of(*p);
      if (e) out[k++] = '\\';
      out[k++] = e ? e : *p;
    }
    out[k++] = '\n';
  }
  *buf = out;
  *size = k;
  return CT_OK;
}

// One line of a buffer: [start, start+len) without its '\n'.
typedef struct buf_cursor {
  const char *buf;
  size_t size, pos;
  int64_t line_no;
} buf_cursor;

static bool cursor_line(buf_cursor *c, const char **start, size_t *len) {
  if (c->pos >= c->size) return false;
  const char *s = c->buf + c->pos;
  const char *nl = memchr(s, '\n', c->size - c->pos);
  if (!nl) return false;  // every line, the last included, ends in '\n'
  *start = s;
  *len = (size_t)(nl - s);
  c->pos += *len + 1;
  c->line_no++;
  return true;
}

static ct_status load_token(ct_vocab *v, const buf_cursor *c, const char *s,
                            size_t len, char *scratch) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (ch == '\0' || ch == '\t' || ch == '\r')
      return ct_error(CT_ERR_FORMAT,
                      "vocab buffer line %lld: raw control byte 0x%02x in a "
                      "token (it must be escaped)",
                      (long long)c->line_no, (unsigned)(unsigned char)ch);
    if (ch == '\\') {
      char e = i + 1 < len ? s[++i] : '\0';
      ch = e == 'n'    ? '\n'
           : e == 't'  ? '\t'
           : e == 'r'  ? '\r'
           : e == '\\' ? '\\'
                       : '\0';
      if (!ch)
        return ct_error(CT_ERR_FORMAT,
                        "vocab buffer line %lld: bad escape '\\%c' (only "
                        "\\\\ \\n \\t \\r are defined)",
                        (long long)c->line_no, e ? e : '?');
    }
    scratch[n++] = ch;
  }
  if (n == 0)
    return ct_error(CT_ERR_FORMAT, "vocab buffer line %lld: empty token",
                    (long long)c->line_no);
  // Tokens are printed back (translations, eval samples): text only. The
  // escaped line is checked, so \n \t \r written as escapes pass.
  size_t bad = ct_utf8_find_unsafe(s, len);
  if (bad < len) {
    char what[64];
    return ct_error(CT_ERR_FORMAT, "vocab buffer line %lld: %s in a token",
                    (long long)c->line_no,
                    ct_utf8_unsafe_what(s, len, bad, what, sizeof what));
  }
  int64_t id = ct_vocab_size(v);
  if (id < CT_VOCAB_SPECIALS && (strlen(special_tokens[id]) != n ||
                                 memcmp(scratch, special_tokens[id], n)))
    return ct_error(CT_ERR_FORMAT,
                    "vocab buffer line %lld: id %lld must be the special "
                    "token %s",
                    (long long)c->line_no, (long long)id, special_tokens[id]);
  int added;
  if (ct_string_table_add(&v->tokens, scratch, n, &added) < 0)
    return ct_last_status();
  if (!added)
    return ct_error(CT_ERR_FORMAT, "vocab buffer line %lld: duplicate token",
                    (long long)c->line_no);
  return CT_OK;
}

static ct_status load_header(buf_cursor *c, long long *count) {
  const char *s;
  size_t len;
  char line[64];
  const size_t magic_len = sizeof vocab_magic - 1;
  if (!cursor_line(c, &s, &len) || len < magic_len ||
      memcmp(s, vocab_magic, magic_len) != 0)
    return ct_error(CT_ERR_FORMAT,
                    "vocab buffer: not a ctrain vocabulary (line 1 must be "
                    "\"%s %d\")",
                    vocab_magic, VOCAB_VERSION);
  snprintf(line, sizeof line, "%.*s", (int)len, s);
  int version;
  char extra;
  if (sscanf(line + magic_len, " %d %c", &version, &extra) != 1 ||
      version != VOCAB_VERSION)
    return ct_error(CT_ERR_FORMAT,
                    "vocab buffer line 1: \"%s\": this build reads version "
                    "%d; re-create the vocabulary with this ctrain",
                    line, VOCAB_VERSION);
  if (!cursor_line(c, &s, &len) || len == 0 || len >= sizeof line)
    return ct_error(CT_ERR_FORMAT, "vocab buffer line 2: missing token count");
  snprintf(line, sizeof line, "%.*s", (int)len, s);
  char *end;
  *count = strtoll(line, &end, 10);
  if (*end || *count < CT_VOCAB_SPECIALS || *count > INT32_MAX)
    return ct_error(CT_ERR_FORMAT,
                    "vocab buffer line 2: bad token count \"%s\" (expected "
                    "an integer >= %d)",
                    line, CT_VOCAB_SPECIALS);
  return CT_OK;
}

ct_status ct_vocab_load(ct_vocab *v, const char *buf, size_t size) {
  *v = (ct_vocab){0};
  buf_cursor c = {.buf = buf, .size = size};
  long long count = 0;
  ct_status st = load_header(&c, &count);
  char *scratch = st ? NULL : malloc(size + 1);
  if (!st && !scratch)
    st = ct_error(CT_ERR_NOMEM, "vocab: out of memory loading");
  for (long long i = 0; !st && i < count; i++) {
    const char *s;
    size_t len;
    if (!cursor_line(&c, &s, &len)) {
      st = ct_error(CT_ERR_FORMAT,
                    "vocab buffer: truncated: the header says %lld tokens "
                    "but only %lld complete lines follow",
                    count, i);
      break;
    }
    st = load_token(v, &c, s, len, scratch);
  }
  if (!st && c.pos != size)
    st = ct_error(CT_ERR_FORMAT,
                  "vocab buffer line %lld: unexpected data after the %lld "
                  "tokens the header announced",
                  (long long)c.line_no + 1, count);
  free(scratch);
  if (st) ct_vocab_free(v);
  return st;
}
