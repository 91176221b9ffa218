// metrics.jsonl (see jsonl.h): building objects, appending lines, and flat
// records. Not here: JSON syntax of its own; reading and string escaping are
// data/json.h's.
#include "train/jsonl.h"
#include "data/json.h"
#include "train/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- building ----

static void obj_puts(ct_json_obj *o, const char *s) {
  ct_byte_buffer_append(&o->text, s, strlen(s));
}

static void obj_key(ct_json_obj *o, const char *key) {
  if (o->text.len == 0) obj_puts(o, "{");
  if (o->text.len > 1) obj_puts(o, ", ");
  ct_json_write_string(key, ct_json_put_buffer, &o->text);
  obj_puts(o, ": ");
}

void ct_json_obj_init(ct_json_obj *o) { memset(o, 0, sizeof *o); }

void ct_json_obj_free(ct_json_obj *o) { ct_byte_buffer_free(&o->text); }

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
  ct_json_write_string(v ? v : "", ct_json_put_buffer, &o->text);
}

void ct_json_obj_bool(ct_json_obj *o, const char *key, bool v) {
  obj_key(o, key);
  obj_puts(o, v ? "true" : "false");
}

const char *ct_json_obj_text(ct_json_obj *o) {
  ct_byte_buffer *b = &o->text;
  if (b->len == 0) obj_puts(o, "{");
  // Close without consuming: later fields go before the "}". The room
  // reserved for it also holds the newline ct_jsonl_write puts after it.
  if (!ct_byte_buffer_reserve(b, 1)) return NULL;
  b->data[b->len] = '}';
  b->data[b->len + 1] = '\0';
  return b->data;
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
  if (fd < 0)
    return ct_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  off_t dropped = drop_torn_tail(fd);
  int err = errno;
  close(fd);
  if (dropped < 0)
    return ct_error(CT_ERR_IO, "%s: cannot read or repair: %s", path,
                    strerror(err));
  if (dropped > 0)
    snprintf(j->warning, sizeof j->warning,
             "%s: dropped a torn last line (%lld bytes) left by an interrupted "
             "write",
             path, (long long)dropped);
  j->f = fopen(path, "ab");
  if (!j->f)
    return ct_error(CT_ERR_IO, "%s: cannot open for appending: %s", path,
                    strerror(errno));
  return CT_OK;
}

ct_status ct_jsonl_write(ct_jsonl *j, ct_json_obj *o) {
  if (!j || !j->f) return ct_error(CT_ERR_STATE, "metrics log: not open");
  const char *text = ct_json_obj_text(o);
  if (!text)
    return ct_error(CT_ERR_NOMEM, "%s: out of memory building a line", j->path);
  // One fwrite for the line and its newline, then flush.
  ct_byte_buffer *b = &o->text;
  b->data[b->len + 1] = '\n';
  size_t n = b->len + 2;
  bool ok = fwrite(b->data, 1, n, j->f) == n && fflush(j->f) == 0;
  b->data[b->len + 1] = '\0';
  if (!ok)
    return ct_error(CT_ERR_IO, "%s: write failed: %s", j->path,
                    strerror(errno));
  return CT_OK;
}

ct_status ct_jsonl_close(ct_jsonl *j) {
  if (!j || !j->f) return CT_OK;
  int rc = fclose(j->f);
  j->f = NULL;
  if (rc != 0)
    return ct_error(CT_ERR_IO, "%s: close failed: %s", j->path,
                    strerror(errno));
  return CT_OK;
}

// ---- parsing ----

void ct_json_record_free(ct_json_record *r) {
  for (int i = 0; i < r->n; i++) {
    free(r->fields[i].key);
    free(r->fields[i].str);
  }
  free(r->fields);
  memset(r, 0, sizeof *r);
}

static char *copy_text(const char *s) {
  char *copy = strdup(s);
  if (!copy) ct_error(CT_ERR_NOMEM, "metrics: out of memory");
  return copy;
}

// The members of the flat object `obj` as fields (kinds per jsonl.h); a
// nested value is CT_ERR_FORMAT, described in *err.
static ct_status record_from_object(const ct_json_doc *doc,
                                    const ct_json_value *obj, ct_json_record *r,
                                    ct_json_error *err) {
  r->fields = calloc((size_t)obj->count + 1, sizeof *r->fields);
  if (!r->fields) return ct_error(CT_ERR_NOMEM, "metrics: out of memory");
  for (const ct_json_value *v = ct_json_first(doc, obj); v;
       v = ct_json_next(doc, v)) {
    ct_json_field *f = &r->fields[r->n];
    if (!(f->key = copy_text(ct_json_key(doc, v)))) return CT_ERR_NOMEM;
    r->n++;
    switch (v->type) {
    case CT_JVAL_STRING:
      f->kind = CT_JSON_STR;
      if (!(f->str = copy_text(ct_json_str(doc, v)))) return CT_ERR_NOMEM;
      break;
    case CT_JVAL_NUMBER:
      f->kind = CT_JSON_NUM;
      f->num = v->number;
      break;
    case CT_JVAL_BOOL:
      f->kind = CT_JSON_BOOL;
      f->num = v->number;
      break;
    case CT_JVAL_NULL:
      f->kind = CT_JSON_NULL;
      f->num = NAN;
      break;
    case CT_JVAL_ARRAY:
    case CT_JVAL_OBJECT:
      *err = (ct_json_error){.line = v->line, .column = v->column};
      snprintf(err->what, sizeof err->what,
               "nested objects and arrays are "
               "not supported (key '%s')",
               f->key);
      return CT_ERR_FORMAT;
    }
  }
  return CT_OK;
}

ct_status ct_json_parse_object(const char *text, size_t len,
                               ct_json_record *out, char *why,
                               size_t why_size) {
  memset(out, 0, sizeof *out);
  ct_json_doc doc;
  ct_json_error err;
  ct_status st = ct_json_doc_parse_quiet(&doc, text, len, CT_JSON_PYTHON, &err);
  const ct_json_value *root = ct_json_root(&doc);
  if (st == CT_OK && root->type != CT_JVAL_OBJECT) {
    err = (ct_json_error){
        .line = root->line, .column = root->column, .what = "expected '{'"};
    st = CT_ERR_FORMAT;
  }
  if (st == CT_OK) st = record_from_object(&doc, root, out, &err);
  ct_json_doc_free(&doc);
  if (st == CT_ERR_FORMAT)
    snprintf(why, why_size, "%s (column %d)", err.what, err.column);
  else if (st != CT_OK)
    snprintf(why, why_size, "%s", ct_last_error());
  if (st != CT_OK) ct_json_record_free(out);
  return st;
}

const ct_json_field *ct_json_record_get(const ct_json_record *r,
                                        const char *key) {
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
typedef ct_status (*line_fn)(ct_json_record *r, const char *line, size_t len,
                             void *ctx);

// Reads `path` and parses each non-blank line. A malformed last line without
// a newline is the torn write of a crash: skipped, with `warning` set.
static ct_status scan_lines(const char *path, line_fn fn, void *ctx,
                            char *warning, size_t warning_size) {
  char *text;
  size_t len;
  ct_status st = ct_file_read_all(path, CT_JSONL_MAX_BYTES, &text, &len);
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
    st = ct_json_parse_object(s, n, &r, why, sizeof why);
    if (st == CT_ERR_NOMEM) break;
    if (st != CT_OK) {
      if (!nl) {
        st = CT_OK;
        snprintf(warning, warning_size,
                 "%s:%d: skipped a truncated last line (the run was "
                 "interrupted while "
                 "writing it)",
                 path, line);
        break;
      }
      st =
          ct_error(CT_ERR_FORMAT, "%s:%d: malformed JSON: %s", path, line, why);
      break;
    }
    r.line = line;
    st = fn(&r, s, n, ctx);
  }
  free(text);
  return st;
}

static ct_status collect(ct_json_record *r, const char *line, size_t len,
                         void *ctx) {
  (void)line;
  (void)len;
  ct_jsonl_data *d = ctx;
  if ((d->n & (d->n - 1)) == 0) {  // grow at powers of two
    ct_json_record *rs =
        realloc(d->records, (size_t)(d->n ? 2 * d->n : 1) * sizeof *rs);
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
  ct_status st =
      scan_lines(path, collect, out, out->warning, sizeof out->warning);
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
  ct_byte_buffer kept;  // the lines kept, each with its newline
} keep_ctx;

static ct_status keep_line(ct_json_record *r, const char *line, size_t len,
                           void *ctx) {
  keep_ctx *k = ctx;
  double v;
  bool keep = !ct_json_record_num(r, k->key, &v) || !(v > k->max);
  ct_json_record_free(r);
  if (!keep) return CT_OK;
  ct_byte_buffer_append(&k->kept, line, len);
  ct_byte_buffer_append(&k->kept, "\n", 1);
  if (k->kept.failed) return ct_error(CT_ERR_NOMEM, "metrics: out of memory");
  return CT_OK;
}

static ct_status write_kept(FILE *f, const char *path, void *ctx) {
  (void)path;
  keep_ctx *k = ctx;
  if (k->kept.len) fwrite(k->kept.data, 1, k->kept.len, f);
  return CT_OK;
}

ct_status ct_jsonl_truncate_after(const char *path, const char *key,
                                  double max) {
  if (access(path, F_OK) != 0 && errno == ENOENT) return CT_OK;
  keep_ctx k = {.key = key, .max = max};
  char warning[512];
  ct_status s = scan_lines(path, keep_line, &k, warning, sizeof warning);
  if (s == CT_OK) s = ct_file_write_atomic(path, write_kept, &k);
  ct_byte_buffer_free(&k.kept);
  return s;
}
