// .safetensors export and import: the file layout, a JSON parser just large
// enough for its header, and validation before anything is copied.
//
// Byte layout (as the reference implementation, huggingface/safetensors,
// writes and checks it):
//
//   offset   size  field
//   0        8     u64 little-endian N, the header length (at most 100 MB)
//   8        N     JSON object, UTF-8, padded with spaces to a multiple of 8
//                  so the data starts 8-byte aligned:
//                    {"__metadata__": {"key": "value", ...},   (optional)
//                     "NAME": {"dtype": "F32", "shape": [2, 3],
//                              "data_offsets": [BEGIN, END]}, ...}
//   8+N      ...   the data: each tensor's row-major little-endian bytes at
//                  [BEGIN, END) relative to 8+N. Tensors are packed: sorted by
//                  BEGIN they start at 0, each begins where the previous
//                  ends, and the last ends at the end of the file; END -
//                  BEGIN = numel * dtype size. The writer orders them by name
//                  (all F32, so the reference's dtype-then-name order).
//
// What this file does not do: stream (the file is read whole), or parse JSON
// beyond what a header holds (numbers must be non-negative integers).
#include "train/safetensors.h"
#include "train/fileio.h"
#include "train/record.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JSON_MAX_DEPTH = 64 };

// ---- Dtypes -----------------------------------------------------------------

typedef struct st_dtype {
  const char *name;
  size_t size;
  int file_dtype;  // ct_file_dtype, or -1 when ctrain cannot load it
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"F32", 4, CT_FILE_F32},  {"F16", 2, CT_FILE_F16},
    {"BF16", 2, CT_FILE_BF16}, {"F64", 8, CT_FILE_F64},
    {"BOOL", 1, -1},          {"U8", 1, -1},
    {"I8", 1, -1},            {"F8_E5M2", 1, -1},
    {"F8_E4M3", 1, -1},       {"I16", 2, -1},
    {"U16", 2, -1},           {"I32", 4, -1},
    {"U32", 4, -1},           {"I64", 8, -1},
    {"U64", 8, -1},
};
enum { ST_DTYPE_COUNT = sizeof st_dtypes / sizeof st_dtypes[0] };

static const st_dtype *find_dtype(const char *name) {
  for (int i = 0; i < ST_DTYPE_COUNT; i++)
    if (strcmp(st_dtypes[i].name, name) == 0) return &st_dtypes[i];
  return NULL;
}

// ---- Writing ----------------------------------------------------------------

// Appends s as a JSON string literal, escaped as serde_json does.
static void json_put_string(ct_rec *r, const char *s) {
  ct_rec_raw(r, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    char esc[8];
    const char *short_esc = *c == '"'    ? "\\\""
                            : *c == '\\' ? "\\\\"
                            : *c == '\b' ? "\\b"
                            : *c == '\f' ? "\\f"
                            : *c == '\n' ? "\\n"
                            : *c == '\r' ? "\\r"
                            : *c == '\t' ? "\\t"
                                         : NULL;
    if (short_esc) {
      ct_rec_raw(r, short_esc, 2);
    } else if (*c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", *c);
      ct_rec_raw(r, esc, 6);
    } else {
      ct_rec_raw(r, c, 1);
    }
  }
  ct_rec_raw(r, "\"", 1);
}

static void json_put_text(ct_rec *r, const char *text) {
  ct_rec_raw(r, text, strlen(text));
}

static void json_put_u64(ct_rec *r, uint64_t v) {
  char num[24];
  snprintf(num, sizeof num, "%llu", (unsigned long long)v);
  json_put_text(r, num);
}

static int compare_param_names(const void *a, const void *b) {
  const ct_param *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

// Builds the padded JSON header for the parameters in `order`.
static void build_header(ct_rec *h, const ct_param *const *order, int n,
                         const char *const *metadata) {
  json_put_text(h, "{");
  bool first = true;
  if (metadata && metadata[0]) {
    json_put_text(h, "\"__metadata__\":{");
    for (int i = 0; metadata[i] && metadata[i + 1]; i += 2) {
      if (i) json_put_text(h, ",");
      json_put_string(h, metadata[i]);
      json_put_text(h, ":");
      json_put_string(h, metadata[i + 1]);
    }
    json_put_text(h, "}");
    first = false;
  }
  uint64_t offset = 0;
  for (int i = 0; i < n; i++) {
    const ct_tensor *t = order[i]->tensor;
    if (!first) json_put_text(h, ",");
    first = false;
    json_put_string(h, order[i]->name);
    json_put_text(h, ":{\"dtype\":\"F32\",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) {
      if (d) json_put_text(h, ",");
      json_put_u64(h, (uint64_t)t->shape[d]);
    }
    json_put_text(h, "],\"data_offsets\":[");
    json_put_u64(h, offset);
    offset += (uint64_t)t->numel * sizeof(float);
    json_put_text(h, ",");
    json_put_u64(h, offset);
    json_put_text(h, "]}");
  }
  json_put_text(h, "}");
  while (h->len % 8) json_put_text(h, " ");
}

static ct_status check_save_args(const char *path, const ct_params *p,
                                 const char *const *metadata) {
  if (!path || !p)
    return ct_error(CT_ERR_ARG, "safetensors: save needs a path and a store");
  int n_meta = 0;
  while (metadata && metadata[n_meta]) n_meta++;
  if (n_meta % 2)
    return ct_error(CT_ERR_ARG, "%s: metadata needs a value for key '%s'",
                    path, metadata[n_meta - 1]);
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->items[i].name, "__metadata__") == 0)
      return ct_error(CT_ERR_ARG, "%s: a parameter cannot be called "
                      "'__metadata__' in safetensors", path);
  return CT_OK;
}

ct_status ct_safetensors_save(const char *path, const ct_params *p,
                              const char *const *metadata) {
  ct_status st = check_save_args(path, p, metadata);
  if (st != CT_OK) return st;
  const ct_param **order = malloc((size_t)(p->n + 1) * sizeof *order);
  ct_ckpt_piece *pieces = malloc((size_t)(p->n + 2) * sizeof *pieces);
  ct_rec h;
  ct_rec_init(&h);
  if (order && pieces) {
    for (int i = 0; i < p->n; i++) order[i] = &p->items[i];
    qsort(order, (size_t)p->n, sizeof *order, compare_param_names);
    build_header(&h, order, p->n, metadata);
  }
  if (!order || !pieces || h.failed) {
    st = ct_error(CT_ERR_NOMEM, "%s: out of memory building the header",
                  path);
  } else if (h.len > CT_SAFETENSORS_MAX_HEADER) {
    st = ct_error(CT_ERR_ARG, "%s: the header would be %zu bytes, more than "
                  "safetensors allows (%d)", path, h.len,
                  CT_SAFETENSORS_MAX_HEADER);
  } else {
    unsigned char n_le[8];
    for (int i = 0; i < 8; i++) n_le[i] = (unsigned char)(h.len >> (8 * i));
    pieces[0] = (ct_ckpt_piece){n_le, 8};
    pieces[1] = (ct_ckpt_piece){h.data, h.len};
    for (int i = 0; i < p->n; i++)
      pieces[2 + i] = (ct_ckpt_piece){
          p->data + order[i]->offset,
          (size_t)order[i]->tensor->numel * sizeof(float)};
    st = ct_ckpt_write_atomic(path, pieces, p->n + 2);
  }
  ct_rec_free(&h);
  free(order);
  free(pieces);
  return st;
}

// ---- A JSON parser for the header -------------------------------------------

typedef struct json {
  const char *s;
  size_t len, pos;
  const char *what;
  ct_status status;  // the first error
  int depth;
} json;

static ct_status json_fail(json *j, const char *expected) {
  if (j->status == CT_OK)
    j->status = ct_error(CT_ERR_FORMAT, "%s: the header is not valid JSON: "
                         "expected %s at byte %zu of %zu", j->what, expected,
                         j->pos, j->len);
  return j->status;
}

static void json_ws(json *j) {
  while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                             j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
    j->pos++;
}

// Consumes `c` (after whitespace) if it is next.
static bool json_eat(json *j, char c) {
  json_ws(j);
  if (j->pos < j->len && j->s[j->pos] == c) {
    j->pos++;
    return true;
  }
  return false;
}

static ct_status json_expect(json *j, char c) {
  char what[4] = {'\'', c, '\'', '\0'};
  return json_eat(j, c) ? CT_OK : json_fail(j, what);
}

static void put_utf8(char *out, size_t *n, uint32_t cp) {
  if (cp < 0x80) {
    out[(*n)++] = (char)cp;
  } else if (cp < 0x800) {
    out[(*n)++] = (char)(0xc0 | (cp >> 6));
    out[(*n)++] = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out[(*n)++] = (char)(0xe0 | (cp >> 12));
    out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[(*n)++] = (char)(0x80 | (cp & 0x3f));
  } else {
    out[(*n)++] = (char)(0xf0 | (cp >> 18));
    out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[(*n)++] = (char)(0x80 | (cp & 0x3f));
  }
}

static bool json_hex4(json *j, uint32_t *v) {
  if (j->len - j->pos < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = j->s[j->pos++];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return false;
    *v = *v * 16 + (uint32_t)d;
  }
  return true;
}

// A string literal, unescaped into a malloc'd buffer (NULL on error). Each
// escape decodes to no more bytes than it occupies, so the literal's length
// bounds the allocation.
static char *json_string(json *j) {
  if (json_expect(j, '"') != CT_OK) return NULL;
  size_t start = j->pos, end = start;
  while (end < j->len && j->s[end] != '"') end += j->s[end] == '\\' ? 2 : 1;
  if (end >= j->len) {
    json_fail(j, "the end of a string");
    return NULL;
  }
  char *out = malloc(end - start + 1);
  if (!out) {
    j->status = ct_error(CT_ERR_NOMEM, "%s: out of memory", j->what);
    return NULL;
  }
  size_t n = 0;
  while (j->status == CT_OK && j->pos < end) {
    unsigned char c = (unsigned char)j->s[j->pos++];
    if (c < 0x20) {
      j->pos--;
      json_fail(j, "no control characters in a string");
    } else if (c != '\\') {
      out[n++] = (char)c;
    } else {
      char e = j->s[j->pos++];
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *k = e ? strchr(from, e) : NULL;
      uint32_t cp = 0, lo = 0;
      if (k) {
        out[n++] = to[k - from];
      } else if (e != 'u' || !json_hex4(j, &cp)) {
        json_fail(j, "a valid escape");
      } else if (cp >= 0xdc00 && cp <= 0xdfff) {
        json_fail(j, "a high surrogate before a low one");
      } else if (cp >= 0xd800 && cp <= 0xdbff) {
        // A pair: \ud83d\ude00 is one code point (4 UTF-8 bytes from 12).
        if (j->pos + 2 > end || j->s[j->pos] != '\\' ||
            j->s[j->pos + 1] != 'u' || (j->pos += 2, !json_hex4(j, &lo)) ||
            lo < 0xdc00 || lo > 0xdfff)
          json_fail(j, "a low surrogate after a high one");
        else
          put_utf8(out, &n, 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00));
      } else {
        put_utf8(out, &n, cp);
      }
    }
  }
  if (j->status != CT_OK || j->pos != end) {
    json_fail(j, "a string");
    free(out);
    return NULL;
  }
  j->pos = end + 1;
  out[n] = '\0';
  if (strlen(out) != n) {  // a \u0000 inside
    j->pos = start;
    json_fail(j, "no NUL in a string");
    free(out);
    return NULL;
  }
  return out;
}

// A non-negative integer (no sign, fraction or exponent), as header numbers
// are.
static uint64_t json_uint(json *j) {
  json_ws(j);
  size_t start = j->pos;
  uint64_t v = 0;
  while (j->pos < j->len && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
    unsigned d = (unsigned)(j->s[j->pos++] - '0');
    if (v > (UINT64_MAX - d) / 10) {
      j->pos = start;
      json_fail(j, "an integer below 2^64");
      return 0;
    }
    v = v * 10 + d;
  }
  if (j->pos == start) json_fail(j, "a non-negative integer");
  return v;
}

// Skips any JSON value (for keys this parser does not use).
static void json_skip(json *j) {
  json_ws(j);
  if (j->status != CT_OK || j->pos >= j->len) {
    json_fail(j, "a value");
    return;
  }
  char c = j->s[j->pos];
  if (c == '"') {
    free(json_string(j));
  } else if (c == '{' || c == '[') {
    if (++j->depth > JSON_MAX_DEPTH) {
      json_fail(j, "nesting no deeper than 64");
      return;
    }
    char close = c == '{' ? '}' : ']';
    j->pos++;
    if (!json_eat(j, close)) {
      do {
        if (c == '{') {
          free(json_string(j));
          json_expect(j, ':');
        }
        json_skip(j);
      } while (j->status == CT_OK && json_eat(j, ','));
      json_expect(j, close);
    }
    j->depth--;
  } else {
    // A number or a literal: the characters that can make one up.
    size_t start = j->pos;
    while (j->pos < j->len && strchr("+-.0123456789eEtruefalsn", j->s[j->pos]))
      j->pos++;
    if (j->pos == start) json_fail(j, "a value");
  }
}

// The fields of one tensor entry.
typedef struct st_entry {
  char *name;
  const st_dtype *dtype;
  int ndim;
  int64_t shape[CT_FILE_MAX_DIMS];
  uint64_t begin, end;
} st_entry;

static ct_status parse_tensor_info(json *j, st_entry *e) {
  bool has_dtype = false, has_shape = false, has_offsets = false;
  json_expect(j, '{');
  if (!json_eat(j, '}')) {
    do {
      char *key = json_string(j);
      json_expect(j, ':');
      if (j->status != CT_OK) {
        free(key);
        break;
      }
      if (strcmp(key, "dtype") == 0) {
        char *dtype = json_string(j);
        if (dtype && !(e->dtype = find_dtype(dtype)))
          j->status = ct_error(CT_ERR_FORMAT, "%s: tensor '%s' has unknown "
                               "dtype '%.40s'", j->what, e->name, dtype);
        has_dtype = true;
        free(dtype);
      } else if (strcmp(key, "shape") == 0) {
        json_expect(j, '[');
        e->ndim = 0;
        if (!json_eat(j, ']')) {
          do {
            if (e->ndim == CT_FILE_MAX_DIMS) {
              j->status = ct_error(CT_ERR_FORMAT, "%s: tensor '%s' has more "
                                   "than %d dims", j->what, e->name,
                                   CT_FILE_MAX_DIMS);
              break;
            }
            uint64_t d = json_uint(j);
            if (d > INT64_MAX) json_fail(j, "a dimension below 2^63");
            e->shape[e->ndim++] = (int64_t)d;
          } while (j->status == CT_OK && json_eat(j, ','));
          json_expect(j, ']');
        }
        has_shape = true;
      } else if (strcmp(key, "data_offsets") == 0) {
        json_expect(j, '[');
        e->begin = json_uint(j);
        json_expect(j, ',');
        e->end = json_uint(j);
        json_expect(j, ']');
        has_offsets = true;
      } else {
        json_skip(j);
      }
      free(key);
    } while (j->status == CT_OK && json_eat(j, ','));
    json_expect(j, '}');
  }
  const char *lacking = !has_dtype     ? "a dtype"
                        : !has_shape   ? "a shape"
                        : !has_offsets ? "data_offsets"
                                       : NULL;
  if (j->status == CT_OK && lacking)
    j->status = ct_error(CT_ERR_FORMAT, "%s: tensor '%s' lacks %s", j->what,
                         e->name, lacking);
  return j->status;
}

// "__metadata__" must map strings to strings; its contents are not kept.
static ct_status parse_metadata(json *j) {
  json_expect(j, '{');
  if (j->status == CT_OK && !json_eat(j, '}')) {
    do {
      free(json_string(j));
      json_expect(j, ':');
      json_ws(j);
      if (j->status == CT_OK && (j->pos >= j->len || j->s[j->pos] != '"'))
        j->status = ct_error(CT_ERR_FORMAT, "%s: __metadata__ must map "
                             "strings to strings", j->what);
      free(json_string(j));
    } while (j->status == CT_OK && json_eat(j, ','));
    json_expect(j, '}');
  }
  return j->status;
}

typedef struct st_header {
  st_entry *e;
  int n, cap;
} st_header;

static void header_free(st_header *h) {
  for (int i = 0; i < h->n; i++) free(h->e[i].name);
  free(h->e);
  memset(h, 0, sizeof *h);
}

static ct_status parse_header(json *j, st_header *h) {
  json_ws(j);
  if (j->pos >= j->len || j->s[j->pos] != '{')
    return json_fail(j, "'{' at the start of the header");
  json_expect(j, '{');
  bool seen_metadata = false;
  if (!json_eat(j, '}')) {
    do {
      char *name = json_string(j);
      json_expect(j, ':');
      if (j->status == CT_OK && strcmp(name, "__metadata__") == 0) {
        if (seen_metadata)
          j->status = ct_error(CT_ERR_FORMAT, "%s: __metadata__ appears "
                               "twice", j->what);
        seen_metadata = true;
        free(name);
        parse_metadata(j);
        continue;
      }
      if (j->status == CT_OK && h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        st_entry *e = realloc(h->e, (size_t)cap * sizeof *e);
        if (!e) {
          j->status = ct_error(CT_ERR_NOMEM, "%s: out of memory", j->what);
        } else {
          h->e = e;
          h->cap = cap;
        }
      }
      if (j->status != CT_OK) {
        free(name);
        break;
      }
      st_entry *e = &h->e[h->n++];
      memset(e, 0, sizeof *e);
      e->name = name;
      parse_tensor_info(j, e);
    } while (j->status == CT_OK && json_eat(j, ','));
    json_expect(j, '}');
  }
  json_ws(j);
  if (j->status == CT_OK && j->pos != j->len)
    json_fail(j, "only spaces after the header object");
  return j->status;
}

// ---- Validation -------------------------------------------------------------

static int compare_entry_names(const void *a, const void *b) {
  const st_entry *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

static int compare_entry_offsets(const void *a, const void *b) {
  const st_entry *const *x = a, *const *y = b;
  if ((*x)->begin != (*y)->begin) return (*x)->begin < (*y)->begin ? -1 : 1;
  if ((*x)->end != (*y)->end) return (*x)->end < (*y)->end ? -1 : 1;
  return 0;
}

// Each tensor's byte count agrees with its shape and lies inside the data.
static ct_status check_sizes(const st_entry *e, uint64_t data_len,
                             const char *what) {
  uint64_t bytes = e->dtype->size;
  for (int d = 0; d < e->ndim; d++) {
    uint64_t dim = (uint64_t)e->shape[d];
    if (dim && bytes > UINT64_MAX / dim)
      return ct_error(CT_ERR_FORMAT, "%s: tensor '%s' is too large (its "
                      "size overflows)", what, e->name);
    bytes *= dim;
  }
  if (e->end < e->begin)
    return ct_error(CT_ERR_FORMAT, "%s: tensor '%s' has data_offsets [%llu, "
                    "%llu], ending before it begins", what, e->name,
                    (unsigned long long)e->begin, (unsigned long long)e->end);
  if (e->end - e->begin != bytes)
    return ct_error(CT_ERR_FORMAT, "%s: tensor '%s' (%s, %d dims) needs "
                    "%llu bytes, its data_offsets [%llu, %llu] hold %llu",
                    what, e->name, e->dtype->name, e->ndim,
                    (unsigned long long)bytes, (unsigned long long)e->begin,
                    (unsigned long long)e->end,
                    (unsigned long long)(e->end - e->begin));
  if (e->end > data_len)
    return ct_error(CT_ERR_FORMAT, "%s: tensor '%s' data_offsets [%llu, "
                    "%llu] run past the %llu data bytes (truncated file?)",
                    what, e->name, (unsigned long long)e->begin,
                    (unsigned long long)e->end, (unsigned long long)data_len);
  return CT_OK;
}

// Names are unique, and the data is packed: no gaps, overlaps or trailing
// bytes.
static ct_status check_layout(st_header *h, uint64_t data_len,
                              const char *what) {
  for (int i = 0; i < h->n; i++) {
    ct_status st = check_sizes(&h->e[i], data_len, what);
    if (st != CT_OK) return st;
  }
  const st_entry **order = malloc((size_t)(h->n + 1) * sizeof *order);
  if (!order) return ct_error(CT_ERR_NOMEM, "%s: out of memory", what);
  for (int i = 0; i < h->n; i++) order[i] = &h->e[i];
  ct_status st = CT_OK;
  qsort(order, (size_t)h->n, sizeof *order, compare_entry_names);
  for (int i = 1; i < h->n && st == CT_OK; i++)
    if (strcmp(order[i - 1]->name, order[i]->name) == 0)
      st = ct_error(CT_ERR_FORMAT, "%s: tensor '%s' appears twice", what,
                    order[i]->name);
  qsort(order, (size_t)h->n, sizeof *order, compare_entry_offsets);
  uint64_t at = 0;
  for (int i = 0; i < h->n && st == CT_OK; i++) {
    if (order[i]->begin < at)
      st = ct_error(CT_ERR_FORMAT, "%s: the data of tensors '%s' and '%s' "
                    "overlap", what, order[i - 1]->name, order[i]->name);
    else if (order[i]->begin > at)
      st = ct_error(CT_ERR_FORMAT, "%s: data bytes [%llu, %llu) before "
                    "tensor '%s' belong to no tensor", what,
                    (unsigned long long)at,
                    (unsigned long long)order[i]->begin, order[i]->name);
    at = order[i]->end;
  }
  if (st == CT_OK && at != data_len)
    st = ct_error(CT_ERR_FORMAT, "%s: %llu data bytes after the last tensor "
                  "(trailing garbage?)", what,
                  (unsigned long long)(data_len - at));
  free(order);
  return st;
}

// The entries as tensors for ct_params_load_named. A tensor the store will
// load must have a dtype ctrain converts; others are only ever reported or
// ignored, never read.
static ct_status to_named(const st_header *h, const unsigned char *data,
                          const ct_params *dst, const char *what,
                          ct_named_tensor *t) {
  for (int i = 0; i < h->n; i++) {
    const st_entry *e = &h->e[i];
    if (e->dtype->file_dtype < 0 && ct_params_find(dst, e->name))
      return ct_error(CT_ERR_DTYPE, "%s: tensor '%s' is %s; ctrain loads F32 "
                      "(and converts F16, BF16, F64)", what, e->name,
                      e->dtype->name);
    t[i] = (ct_named_tensor){
        .name = e->name,
        .dtype = e->dtype->file_dtype < 0 ? CT_FILE_F32
                                          : (ct_file_dtype)e->dtype->file_dtype,
        .ndim = e->ndim,
        .data = data + e->begin};
    memcpy(t[i].shape, e->shape, sizeof e->shape);
  }
  return CT_OK;
}

ct_status ct_safetensors_load_buffer(const void *bytes, size_t len,
                                     const char *what, ct_params *dst,
                                     unsigned flags) {
  if (!what) what = "safetensors";
  if ((!bytes && len) || !dst)
    return ct_error(CT_ERR_ARG, "%s: load needs bytes and a store", what);
  const unsigned char *b = bytes;
  if (len < 8)
    return ct_error(CT_ERR_FORMAT, "%s: truncated: %zu bytes, not even the "
                    "8-byte header length", what, len);
  uint64_t n = 0;
  for (int i = 0; i < 8; i++) n |= (uint64_t)b[i] << (8 * i);
  if (n > CT_SAFETENSORS_MAX_HEADER)
    return ct_error(CT_ERR_FORMAT, "%s: header length %llu is over the %d "
                    "bytes safetensors allows (not a safetensors file?)", what,
                    (unsigned long long)n, CT_SAFETENSORS_MAX_HEADER);
  if (n > len - 8)
    return ct_error(CT_ERR_FORMAT, "%s: truncated: the header needs %llu "
                    "bytes, the file has %zu after the length", what,
                    (unsigned long long)n, len - 8);
  json j = {.s = (const char *)b + 8, .len = (size_t)n, .what = what};
  st_header h = {0};
  ct_status st = parse_header(&j, &h);
  if (st == CT_OK) st = check_layout(&h, len - 8 - n, what);
  ct_named_tensor *t =
      st == CT_OK ? malloc((size_t)(h.n + 1) * sizeof *t) : NULL;
  if (st == CT_OK && !t) st = ct_error(CT_ERR_NOMEM, "%s: out of memory", what);
  if (st == CT_OK) st = to_named(&h, b + 8 + n, dst, what, t);
  // Reading a file as it is (e.g. model inputs): a store entry per tensor.
  for (int i = 0; st == CT_OK && (flags & CT_LOAD_REGISTER) && i < h.n; i++) {
    if (h.e[i].dtype->file_dtype < 0)
      st = ct_error(CT_ERR_DTYPE, "%s: tensor '%s' is %s; ctrain reads F32 (and "
                    "converts F16, BF16, F64)", what, h.e[i].name,
                    h.e[i].dtype->name);
    else if (!ct_params_add(dst, t[i].name, t[i].ndim, t[i].shape,
                            CT_PARAM_FROZEN))
      st = ct_last_status();
  }
  if (st == CT_OK)
    st = ct_params_load_named(dst, dst->data, t, h.n,
                              flags & ~(unsigned)CT_LOAD_REGISTER, what);
  free(t);
  header_free(&h);
  return st;
}

ct_status ct_safetensors_load(const char *path, ct_params *dst,
                              unsigned flags) {
  if (!path || !dst)
    return ct_error(CT_ERR_ARG, "safetensors: load needs a path and a store");
  char *data;
  size_t len;
  ct_status st = ct_file_read_all(path, &data, &len);
  if (st != CT_OK) return st;
  st = ct_safetensors_load_buffer(data, len, path, dst, flags);
  free(data);
  return st;
}
