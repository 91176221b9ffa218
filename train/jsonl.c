// metrics.jsonl writing and a minimal reader for flat JSON objects.
#include "train/jsonl.h"
#include "train/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- building ----

static void obj_append(ct_json_obj *o, const char *s, size_t n) {
  if (o->failed) return;
  if (o->len + n + 2 > o->cap) {  // room for the closing "}" and NUL
    size_t cap = o->cap ? o->cap : 128;
    while (o->len + n + 2 > cap) cap *= 2;
    char *b = realloc(o->buf, cap);
    if (!b) {
      o->failed = true;
      return;
    }
    o->buf = b;
    o->cap = cap;
  }
  memcpy(o->buf + o->len, s, n);
  o->len += n;
}

static void obj_puts(ct_json_obj *o, const char *s) { obj_append(o, s, strlen(s)); }

// Writes a JSON string literal: quotes, backslash and control characters
// escaped, other bytes (UTF-8) as they are.
static void obj_string(ct_json_obj *o, const char *s) {
  obj_puts(o, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    switch (*p) {
    case '"': obj_puts(o, "\\\""); break;
    case '\\': obj_puts(o, "\\\\"); break;
    case '\n': obj_puts(o, "\\n"); break;
    case '\r': obj_puts(o, "\\r"); break;
    case '\t': obj_puts(o, "\\t"); break;
    case '\b': obj_puts(o, "\\b"); break;
    case '\f': obj_puts(o, "\\f"); break;
    default:
      if (*p < 0x20) {
        snprintf(esc, sizeof esc, "\\u%04x", *p);
        obj_puts(o, esc);
      } else {
        obj_append(o, (const char *)p, 1);
      }
    }
  }
  obj_puts(o, "\"");
}

static void obj_key(ct_json_obj *o, const char *key) {
  if (o->len == 0) obj_puts(o, "{");
  if (o->len > 1) obj_puts(o, ", ");
  obj_string(o, key);
  obj_puts(o, ": ");
}

void ct_json_obj_init(ct_json_obj *o) { memset(o, 0, sizeof *o); }

void ct_json_obj_free(ct_json_obj *o) {
  free(o->buf);
  memset(o, 0, sizeof *o);
}

void ct_json_obj_int(ct_json_obj *o, const char *key, int64_t v) {
  char num[32];
  snprintf(num, sizeof num, "%" PRId64, v);
  obj_key(o, key);
  obj_puts(o, num);
}

void ct_json_obj_num(ct_json_obj *o, const char *key, double v) {
  char num[40] = "null";
  if (isfinite(v)) {
    // The shortest %g precision that reads back exactly (at most 17 digits).
    for (int prec = 6; prec <= 17; prec++) {
      snprintf(num, sizeof num, "%.*g", prec, v);
      if (strtod(num, NULL) == v) break;
    }
  }
  obj_key(o, key);
  obj_puts(o, num);
}

void ct_json_obj_str(ct_json_obj *o, const char *key, const char *v) {
  obj_key(o, key);
  obj_string(o, v ? v : "");
}

void ct_json_obj_bool(ct_json_obj *o, const char *key, bool v) {
  obj_key(o, key);
  obj_puts(o, v ? "true" : "false");
}

const char *ct_json_obj_text(ct_json_obj *o) {
  if (o->len == 0) obj_puts(o, "{");
  if (o->failed) return NULL;
  // Close without consuming: later fields go before the "}".
  o->buf[o->len] = '}';
  o->buf[o->len + 1] = '\0';
  return o->buf;
}

// ---- appending ----

// Drops a torn last line (bytes after the last newline) left by a crash in
// the middle of a write. Returns how many bytes were dropped, -1 on error.
static off_t drop_torn_tail(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  off_t size = st.st_size, end = size;
  char buf[4096];
  while (end > 0) {
    off_t start = end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0;
    ssize_t n = pread(fd, buf, (size_t)(end - start), start);
    if (n != end - start) return -1;
    ssize_t i = n;
    while (i > 0 && buf[i - 1] != '\n') i--;
    if (i > 0) {
      end = start + i;
      break;
    }
    end = start;
  }
  if (end == size) return 0;
  if (ftruncate(fd, end) != 0) return -1;
  return size - end;
}

ct_status ct_jsonl_open(ct_jsonl *j, const char *path) {
  memset(j, 0, sizeof *j);
  if (!path || strlen(path) >= sizeof j->path)
    return ct_error(CT_ERR_ARG, "metrics log: no path or path too long");
  snprintf(j->path, sizeof j->path, "%s", path);
  int fd = open(path, O_RDWR | O_CREAT, 0666);
  if (fd < 0) return ct_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  off_t dropped = drop_torn_tail(fd);
  int err = errno;
  close(fd);
  if (dropped < 0) return ct_error(CT_ERR_IO, "%s: cannot read or repair: %s", path, strerror(err));
  if (dropped > 0)
    snprintf(j->warning, sizeof j->warning,
             "%s: dropped a torn last line (%lld bytes) left by an interrupted write",
             path, (long long)dropped);
  j->f = fopen(path, "ab");
  if (!j->f) return ct_error(CT_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
  return CT_OK;
}

ct_status ct_jsonl_write(ct_jsonl *j, ct_json_obj *o) {
  if (!j || !j->f) return ct_error(CT_ERR_STATE, "metrics log: not open");
  const char *text = ct_json_obj_text(o);
  if (!text) return ct_error(CT_ERR_NOMEM, "%s: out of memory building a line", j->path);
  // One fwrite for the line and its newline, then flush.
  o->buf[o->len + 1] = '\n';
  size_t n = o->len + 2;
  bool ok = fwrite(o->buf, 1, n, j->f) == n && fflush(j->f) == 0;
  o->buf[o->len + 1] = '\0';
  if (!ok) return ct_error(CT_ERR_IO, "%s: write failed: %s", j->path, strerror(errno));
  return CT_OK;
}

ct_status ct_jsonl_close(ct_jsonl *j) {
  if (!j || !j->f) return CT_OK;
  int rc = fclose(j->f);
  j->f = NULL;
  if (rc != 0) return ct_error(CT_ERR_IO, "%s: close failed: %s", j->path, strerror(errno));
  return CT_OK;
}

// ---- parsing ----

typedef struct parser {
  const char *s, *end, *start;
  char *why;
  size_t why_size;
} parser;

static bool fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(p->why, p->why_size, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < p->why_size)
    snprintf(p->why + n, p->why_size - (size_t)n, " (column %d)", (int)(p->s - p->start) + 1);
  return false;
}

static void skip_ws(parser *p) {
  while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n'))
    p->s++;
}

static int hex4(const char *s) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

static size_t utf8_put(char *out, unsigned cp) {
  if (cp < 0x80) return out[0] = (char)cp, 1;
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12);
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18);
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

// Parses a string literal at p->s (which is '"') into a malloc'd string.
static bool parse_string(parser *p, char **out) {
  const char *q = ++p->s;
  // Unescaped text is never longer than the literal.
  char *buf = malloc((size_t)(p->end - q) + 1);
  if (!buf) return fail(p, "out of memory");
  size_t n = 0;
  while (q < p->end && *q != '"') {
    unsigned char c = (unsigned char)*q;
    if (c < 0x20) {
      p->s = q;
      free(buf);
      return fail(p, "control character in a string");
    }
    if (c != '\\') {
      buf[n++] = *q++;
      continue;
    }
    if (q + 1 >= p->end) break;
    char e = q[1];
    q += 2;
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      buf[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
      continue;
    }
    int cp = e == 'u' && p->end - q >= 4 ? hex4(q) : -1;
    if (cp < 0) {
      p->s = q - 2;
      free(buf);
      return fail(p, "bad escape in a string");
    }
    q += 4;
    // A UTF-16 surrogate pair encodes one code point above U+FFFF.
    if (cp >= 0xD800 && cp < 0xDC00 && p->end - q >= 6 && q[0] == '\\' && q[1] == 'u') {
      int lo = hex4(q + 2);
      if (lo >= 0xDC00 && lo < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        q += 6;
      }
    }
    n += utf8_put(buf + n, (unsigned)cp);
  }
  if (q >= p->end) {
    p->s = q;
    free(buf);
    return fail(p, "unterminated string");
  }
  p->s = q + 1;
  buf[n] = '\0';
  *out = buf;
  return true;
}

// A JSON number (plus Python's NaN/Infinity spellings, read as NaN/inf).
static bool parse_number(parser *p, double *out) {
  static const struct { const char *word; double value; } words[] = {
    {"NaN", NAN}, {"Infinity", INFINITY}, {"-Infinity", -INFINITY},
  };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
    size_t n = strlen(words[i].word);
    if ((size_t)(p->end - p->s) >= n && !memcmp(p->s, words[i].word, n)) {
      p->s += n;
      *out = words[i].value;
      return true;
    }
  }
  const char *q = p->s;
  if (q < p->end && *q == '-') q++;
  const char *digits = q;
  while (q < p->end && *q >= '0' && *q <= '9') q++;
  bool ok = q > digits && !(q - digits > 1 && *digits == '0');
  if (ok && q < p->end && *q == '.') {
    const char *f = ++q;
    while (q < p->end && *q >= '0' && *q <= '9') q++;
    ok = q > f;
  }
  if (ok && q < p->end && (*q == 'e' || *q == 'E')) {
    q++;
    if (q < p->end && (*q == '+' || *q == '-')) q++;
    const char *x = q;
    while (q < p->end && *q >= '0' && *q <= '9') q++;
    ok = q > x;
  }
  if (!ok) return fail(p, "expected a value");
  char tmp[64];
  size_t n = (size_t)(q - p->s);
  if (n >= sizeof tmp) return fail(p, "number too long");
  memcpy(tmp, p->s, n);
  tmp[n] = '\0';
  *out = strtod(tmp, NULL);
  p->s = q;
  return true;
}

static bool parse_value(parser *p, ct_json_field *f) {
  static const struct { const char *word; ct_json_kind kind; double num; } lits[] = {
    {"true", CT_JSON_BOOL, 1.0}, {"false", CT_JSON_BOOL, 0.0}, {"null", CT_JSON_NULL, NAN},
  };
  if (p->s >= p->end) return fail(p, "expected a value");
  char c = *p->s;
  if (c == '"') {
    f->kind = CT_JSON_STR;
    return parse_string(p, &f->str);
  }
  if (c == '{' || c == '[')
    return fail(p, "nested objects and arrays are not supported (key '%s')", f->key);
  for (size_t i = 0; i < sizeof lits / sizeof lits[0]; i++) {
    size_t n = strlen(lits[i].word);
    if ((size_t)(p->end - p->s) >= n && !memcmp(p->s, lits[i].word, n)) {
      p->s += n;
      f->kind = lits[i].kind;
      f->num = lits[i].num;
      return true;
    }
  }
  f->kind = CT_JSON_NUM;
  return parse_number(p, &f->num);
}

void ct_json_record_free(ct_json_record *r) {
  for (int i = 0; i < r->n; i++) {
    free(r->fields[i].key);
    free(r->fields[i].str);
  }
  free(r->fields);
  memset(r, 0, sizeof *r);
}

static bool parse_object(parser *p, ct_json_record *r) {
  skip_ws(p);
  if (p->s >= p->end || *p->s != '{') return fail(p, "expected '{'");
  p->s++;
  skip_ws(p);
  if (p->s < p->end && *p->s == '}') {
    p->s++;
  } else {
    for (int cap = 0;;) {
      skip_ws(p);
      if (p->s >= p->end || *p->s != '"') return fail(p, "expected a quoted key");
      if (r->n == cap) {
        cap = cap ? 2 * cap : 8;
        ct_json_field *fl = realloc(r->fields, (size_t)cap * sizeof *fl);
        if (!fl) return fail(p, "out of memory");
        r->fields = fl;
      }
      ct_json_field *f = &r->fields[r->n];
      memset(f, 0, sizeof *f);
      if (!parse_string(p, &f->key)) return false;
      r->n++;
      skip_ws(p);
      if (p->s >= p->end || *p->s != ':') return fail(p, "expected ':' after key '%s'", f->key);
      p->s++;
      skip_ws(p);
      if (!parse_value(p, f)) return false;
      skip_ws(p);
      if (p->s < p->end && *p->s == ',') {
        p->s++;
        continue;
      }
      if (p->s < p->end && *p->s == '}') {
        p->s++;
        break;
      }
      return fail(p, "expected ',' or '}'");
    }
  }
  skip_ws(p);
  if (p->s < p->end) return fail(p, "unexpected text after the object");
  return true;
}

ct_status ct_json_parse_object(const char *text, size_t len, ct_json_record *out,
                               char *why, size_t why_size) {
  memset(out, 0, sizeof *out);
  parser p = {text, text + len, text, why, why_size};
  if (parse_object(&p, out)) return CT_OK;
  ct_json_record_free(out);
  return CT_ERR_FORMAT;
}

const ct_json_field *ct_json_record_get(const ct_json_record *r, const char *key) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->fields[i].key, key)) return &r->fields[i];
  return NULL;
}

bool ct_json_record_num(const ct_json_record *r, const char *key, double *out) {
  const ct_json_field *f = ct_json_record_get(r, key);
  if (!f || f->kind == CT_JSON_STR) return false;
  *out = f->num;
  return true;
}

const char *ct_json_record_str(const ct_json_record *r, const char *key) {
  const ct_json_field *f = ct_json_record_get(r, key);
  return f && f->kind == CT_JSON_STR ? f->str : NULL;
}

// ---- reading files ----

// Called for each parsed line with the record (owned by the callee when it
// returns true) and the raw line text.
typedef ct_status (*line_fn)(ct_json_record *r, const char *line, size_t len, void *ctx);

// Reads `path` and parses each non-blank line. A malformed last line without
// a newline is the torn write of a crash: skipped, with `warning` set.
static ct_status scan_lines(const char *path, line_fn fn, void *ctx, char *warning,
                            size_t warning_size) {
  char *text;
  size_t len;
  ct_status st = ct_file_read_all(path, &text, &len);
  if (st != CT_OK) return st;
  warning[0] = '\0';
  int line = 0;
  for (size_t pos = 0; pos < len && st == CT_OK;) {
    line++;
    const char *s = text + pos;
    const char *nl = memchr(s, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - s) : len - pos;
    pos += n + (nl != NULL);
    size_t k = 0;
    while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
    if (k == n) continue;
    ct_json_record r;
    char why[256];
    if (ct_json_parse_object(s, n, &r, why, sizeof why) != CT_OK) {
      if (!nl) {
        snprintf(warning, warning_size,
                 "%s:%d: skipped a truncated last line (the run was interrupted while "
                 "writing it)", path, line);
        break;
      }
      st = ct_error(CT_ERR_FORMAT, "%s:%d: malformed JSON: %s", path, line, why);
      break;
    }
    r.line = line;
    st = fn(&r, s, n, ctx);
  }
  free(text);
  return st;
}

static ct_status collect(ct_json_record *r, const char *line, size_t len, void *ctx) {
  (void)line;
  (void)len;
  ct_jsonl_data *d = ctx;
  if ((d->n & (d->n - 1)) == 0) {  // grow at powers of two
    ct_json_record *rs = realloc(d->records, (size_t)(d->n ? 2 * d->n : 1) * sizeof *rs);
    if (!rs) {
      ct_json_record_free(r);
      return ct_error(CT_ERR_NOMEM, "metrics: out of memory");
    }
    d->records = rs;
  }
  d->records[d->n++] = *r;
  return CT_OK;
}

ct_status ct_jsonl_read(const char *path, ct_jsonl_data *out) {
  memset(out, 0, sizeof *out);
  ct_status st = scan_lines(path, collect, out, out->warning, sizeof out->warning);
  if (st != CT_OK) {
    char keep[sizeof out->warning];
    memcpy(keep, out->warning, sizeof keep);
    ct_jsonl_data_free(out);
    memcpy(out->warning, keep, sizeof keep);
  }
  return st;
}

void ct_jsonl_data_free(ct_jsonl_data *d) {
  for (int64_t i = 0; i < d->n; i++) ct_json_record_free(&d->records[i]);
  free(d->records);
  memset(d, 0, sizeof *d);
}

// ---- truncation for resume ----

typedef struct keep_ctx {
  const char *key;
  double max;
  char *out;
  size_t len, cap;
} keep_ctx;

static ct_status keep_line(ct_json_record *r, const char *line, size_t len, void *ctx) {
  keep_ctx *k = ctx;
  double v;
  bool keep = !ct_json_record_num(r, k->key, &v) || !(v > k->max);
  ct_json_record_free(r);
  if (!keep) return CT_OK;
  if (k->len + len + 1 > k->cap) {
    size_t cap = k->cap ? k->cap : 4096;
    while (k->len + len + 1 > cap) cap *= 2;
    char *out = realloc(k->out, cap);
    if (!out) return ct_error(CT_ERR_NOMEM, "metrics: out of memory");
    k->out = out;
    k->cap = cap;
  }
  memcpy(k->out + k->len, line, len);
  k->len += len;
  k->out[k->len++] = '\n';
  return CT_OK;
}

static ct_status write_kept(FILE *f, const char *path, void *ctx) {
  (void)path;
  keep_ctx *k = ctx;
  if (k->len) fwrite(k->out, 1, k->len, f);
  return CT_OK;
}

ct_status ct_jsonl_truncate_after(const char *path, const char *key, double max) {
  if (access(path, F_OK) != 0 && errno == ENOENT) return CT_OK;
  keep_ctx k = {key, max, NULL, 0, 0};
  char warning[512];
  ct_status s = scan_lines(path, keep_line, &k, warning, sizeof warning);
  if (s == CT_OK) s = ct_file_write_atomic(path, write_kept, &k);
  free(k.out);
  return s;
}
