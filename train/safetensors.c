// .safetensors export and import: the file layout, the meaning of its JSON
// header, and validation before anything is copied.
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
// What this file does not do: stream (the file is read whole), or read and
// escape JSON itself: data/json.h parses the header (strictly, as serde_json
// does) and ct_json_write_string escapes its strings.
#include "train/safetensors.h"
#include "data/json.h"
#include "data/utf8.h"
#include "train/fileio.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- Dtypes -----------------------------------------------------------------

typedef struct st_dtype {
  const char *name;
  size_t size;
  int file_dtype;  // ct_file_dtype, or -1 when ctrain cannot load it
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"F32", 4, CT_FILE_F32}, {"F16", 2, CT_FILE_F16}, {"BF16", 2, CT_FILE_BF16},
    {"F64", 8, CT_FILE_F64}, {"BOOL", 1, -1},         {"U8", 1, -1},
    {"I8", 1, -1},           {"F8_E5M2", 1, -1},      {"F8_E4M3", 1, -1},
    {"I16", 2, -1},          {"U16", 2, -1},          {"I32", 4, -1},
    {"U32", 4, -1},          {"I64", 8, -1},          {"U64", 8, -1},
};
enum { ST_DTYPE_COUNT = sizeof st_dtypes / sizeof st_dtypes[0] };

static const st_dtype *find_dtype(const char *name) {
  for (int i = 0; i < ST_DTYPE_COUNT; i++)
    if (strcmp(st_dtypes[i].name, name) == 0) return &st_dtypes[i];
  return NULL;
}

// ---- Writing ----------------------------------------------------------------

// Appends s as a JSON string literal, escaped as serde_json does.
static void json_put_string(ct_byte_buffer *h, const char *s) {
  ct_json_write_string(s, ct_json_put_buffer, h);
}

static void json_put_text(ct_byte_buffer *h, const char *text) {
  ct_byte_buffer_append(h, text, strlen(text));
}

static void json_put_u64(ct_byte_buffer *h, uint64_t v) {
  ct_byte_buffer_printf(h, "%llu", (unsigned long long)v);
}

static int compare_param_names(const void *a, const void *b) {
  const ct_param *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

// Builds the padded JSON header for the parameters in `order`.
static void build_header(ct_byte_buffer *h, const ct_param *const *order, int n,
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
    return ct_error(CT_ERR_ARG, "%s: metadata needs a value for key '%s'", path,
                    metadata[n_meta - 1]);
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->items[i].name, "__metadata__") == 0)
      return ct_error(CT_ERR_ARG,
                      "%s: a parameter cannot be called "
                      "'__metadata__' in safetensors",
                      path);
  return CT_OK;
}

ct_status ct_safetensors_save(const char *path, const ct_params *p,
                              const char *const *metadata) {
  ct_status st = check_save_args(path, p, metadata);
  if (st != CT_OK) return st;
  const ct_param **order = malloc((size_t)(p->n + 1) * sizeof *order);
  ct_ckpt_piece *pieces = malloc((size_t)(p->n + 2) * sizeof *pieces);
  ct_byte_buffer h = {0};
  if (order && pieces) {
    for (int i = 0; i < p->n; i++) order[i] = &p->items[i];
    qsort(order, (size_t)p->n, sizeof *order, compare_param_names);
    build_header(&h, order, p->n, metadata);
  }
  if (!order || !pieces || h.failed) {
    st = ct_error(CT_ERR_NOMEM, "%s: out of memory building the header", path);
  } else if (h.len > CT_SAFETENSORS_MAX_HEADER) {
    st = ct_error(CT_ERR_ARG,
                  "%s: the header would be %zu bytes, more than "
                  "safetensors allows (%d)",
                  path, h.len, CT_SAFETENSORS_MAX_HEADER);
  } else {
    unsigned char n_le[8];
    for (int i = 0; i < 8; i++) n_le[i] = (unsigned char)(h.len >> (8 * i));
    pieces[0] = (ct_ckpt_piece){n_le, 8};
    pieces[1] = (ct_ckpt_piece){h.data, h.len};
    for (int i = 0; i < p->n; i++)
      pieces[2 + i] =
          (ct_ckpt_piece){p->data + order[i]->offset,
                          (size_t)order[i]->tensor->numel * sizeof(float)};
    st = ct_ckpt_write_atomic(path, pieces, p->n + 2);
  }
  ct_byte_buffer_free(&h);
  free(order);
  free(pieces);
  return st;
}

// ---- Reading the header -----------------------------------------------------

// The fields of one tensor entry.
typedef struct st_entry {
  const char *name;  // a key of the header's ct_json_doc
  const st_dtype *dtype;
  int ndim;
  int64_t shape[CT_FILE_MAX_DIMS];
  uint64_t begin, end;
} st_entry;

typedef struct st_header {
  ct_json_doc doc;  // the parsed JSON, which the entries' names point into
  st_entry *e;
  int n;
} st_header;

static void header_free(st_header *h) {
  ct_json_doc_free(&h->doc);
  free(h->e);
  memset(h, 0, sizeof *h);
}

// A size or offset of entry e's `field`: a non-negative integer written
// without fraction or exponent (as serde reads a u64), below 2^bits. JSON
// numbers are doubles here, so exact below 2^53: more than any file holds.
static ct_status header_uint(const ct_json_value *v, int bits,
                             const st_entry *e, const char *field,
                             const char *what, uint64_t *out) {
  if (v->type != CT_JVAL_NUMBER || !v->integer || signbit(v->number))
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' %s: expected a "
                    "non-negative integer (header line %d, column %d)",
                    what, e->name, field, v->line, v->column);
  if (v->number >= ldexp(1.0, bits))
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' %s: expected an integer "
                    "below 2^%d (header line %d, column %d)",
                    what, e->name, field, bits, v->line, v->column);
  *out = (uint64_t)v->number;
  return CT_OK;
}

// The dtype, shape and data_offsets of `info` into e (other keys are
// ignored; of repeated keys the last counts).
static ct_status parse_tensor_info(const ct_json_doc *doc,
                                   const ct_json_value *info, st_entry *e,
                                   const char *what) {
  if (info->type != CT_JVAL_OBJECT)
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' must be an object with "
                    "dtype, shape and data_offsets",
                    what, e->name);
  const ct_json_value *dtype = NULL, *shape = NULL, *offsets = NULL;
  for (const ct_json_value *m = ct_json_first(doc, info); m;
       m = ct_json_next(doc, m)) {
    const char *key = ct_json_key(doc, m);
    if (strcmp(key, "dtype") == 0)
      dtype = m;
    else if (strcmp(key, "shape") == 0)
      shape = m;
    else if (strcmp(key, "data_offsets") == 0)
      offsets = m;
  }
  const char *lacking = !dtype     ? "a dtype"
                        : !shape   ? "a shape"
                        : !offsets ? "data_offsets"
                                   : NULL;
  if (lacking)
    return ct_error(CT_ERR_FORMAT, "%s: tensor '%s' lacks %s", what, e->name,
                    lacking);
  const char *dtype_name = ct_json_str(doc, dtype);
  if (!dtype_name)
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' has a dtype that is not "
                    "a string",
                    what, e->name);
  if (!(e->dtype = find_dtype(dtype_name)))
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' has unknown dtype "
                    "'%.40s'",
                    what, e->name, dtype_name);
  if (shape->type != CT_JVAL_ARRAY)
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' has a shape that is not "
                    "an array",
                    what, e->name);
  if (shape->count > CT_FILE_MAX_DIMS)
    return ct_error(CT_ERR_FORMAT, "%s: tensor '%s' has more than %d dims",
                    what, e->name, CT_FILE_MAX_DIMS);
  ct_status st = CT_OK;
  for (const ct_json_value *d = ct_json_first(doc, shape); d && st == CT_OK;
       d = ct_json_next(doc, d)) {
    uint64_t size = 0;
    st = header_uint(d, 63, e, "shape", what, &size);
    e->shape[e->ndim++] = (int64_t)size;
  }
  if (st != CT_OK) return st;
  if (offsets->type != CT_JVAL_ARRAY || offsets->count != 2)
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' data_offsets must be "
                    "[BEGIN, END]",
                    what, e->name);
  const ct_json_value *begin = ct_json_first(doc, offsets);
  st = header_uint(begin, 64, e, "data_offsets", what, &e->begin);
  if (st == CT_OK)
    st = header_uint(ct_json_next(doc, begin), 64, e, "data_offsets", what,
                     &e->end);
  return st;
}

// "__metadata__" must map strings to strings; its contents are not kept.
static ct_status check_metadata(const ct_json_doc *doc,
                                const ct_json_value *meta, const char *what) {
  bool ok = meta->type == CT_JVAL_OBJECT;
  for (const ct_json_value *m = ct_json_first(doc, meta); ok && m;
       m = ct_json_next(doc, m))
    ok = m->type == CT_JVAL_STRING;
  return ok ? CT_OK
            : ct_error(CT_ERR_FORMAT,
                       "%s: __metadata__ must map strings to "
                       "strings",
                       what);
}

// Parses the JSON text[0..len) into h: every entry but __metadata__.
static ct_status parse_header(const char *text, size_t len, const char *what,
                              st_header *h) {
  size_t start = 0;
  while (start < len && (text[start] == ' ' || text[start] == '\t' ||
                         text[start] == '\n' || text[start] == '\r'))
    start++;
  if (start == len || text[start] != '{')
    return ct_error(CT_ERR_FORMAT,
                    "%s: the header must be a JSON object: "
                    "expected '{' at the start",
                    what);
  // The header is UTF-8 (serde_json refuses anything else): a name with a
  // stray byte could not be written back, nor matched.
  size_t bad = ct_utf8_find_invalid(text, len);
  if (bad < len)
    return ct_error(CT_ERR_FORMAT,
                    "%s: the header is not UTF-8 (byte 0x%02x at header byte "
                    "%zu)",
                    what, (unsigned)(unsigned char)text[bad], bad);
  ct_json_error err;
  ct_status st = ct_json_doc_parse_quiet(&h->doc, text, len, 0, &err);
  if (st == CT_ERR_FORMAT)
    return ct_error(st,
                    "%s: the header is not valid JSON: %s (header line "
                    "%d, column %d)",
                    what, err.what, err.line, err.column);
  if (st != CT_OK) return st;
  const ct_json_value *root = ct_json_root(&h->doc);
  h->e = malloc((size_t)(root->count + 1) * sizeof *h->e);
  if (!h->e) return ct_error(CT_ERR_NOMEM, "%s: out of memory", what);
  bool seen_metadata = false;
  for (const ct_json_value *m = ct_json_first(&h->doc, root); m;
       m = ct_json_next(&h->doc, m)) {
    const char *name = ct_json_key(&h->doc, m);
    if (strcmp(name, "__metadata__") == 0) {
      if (seen_metadata)
        return ct_error(CT_ERR_FORMAT, "%s: __metadata__ appears twice", what);
      seen_metadata = true;
      st = check_metadata(&h->doc, m, what);
    } else {
      st_entry *e = &h->e[h->n++];
      *e = (st_entry){.name = name};
      st = parse_tensor_info(&h->doc, m, e, what);
    }
    if (st != CT_OK) return st;
  }
  return CT_OK;
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
      return ct_error(CT_ERR_FORMAT,
                      "%s: tensor '%s' is too large (its "
                      "size overflows)",
                      what, e->name);
    bytes *= dim;
  }
  if (e->end < e->begin)
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' has data_offsets [%llu, "
                    "%llu], ending before it begins",
                    what, e->name, (unsigned long long)e->begin,
                    (unsigned long long)e->end);
  if (e->end - e->begin != bytes)
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' (%s, %d dims) needs "
                    "%llu bytes, its data_offsets [%llu, %llu] hold %llu",
                    what, e->name, e->dtype->name, e->ndim,
                    (unsigned long long)bytes, (unsigned long long)e->begin,
                    (unsigned long long)e->end,
                    (unsigned long long)(e->end - e->begin));
  if (e->end > data_len)
    return ct_error(CT_ERR_FORMAT,
                    "%s: tensor '%s' data_offsets [%llu, "
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
      st = ct_error(CT_ERR_FORMAT,
                    "%s: the data of tensors '%s' and '%s' "
                    "overlap",
                    what, order[i - 1]->name, order[i]->name);
    else if (order[i]->begin > at)
      st = ct_error(CT_ERR_FORMAT,
                    "%s: data bytes [%llu, %llu) before "
                    "tensor '%s' belong to no tensor",
                    what, (unsigned long long)at,
                    (unsigned long long)order[i]->begin, order[i]->name);
    at = order[i]->end;
  }
  if (st == CT_OK && at != data_len)
    st = ct_error(CT_ERR_FORMAT,
                  "%s: %llu data bytes after the last tensor "
                  "(trailing garbage?)",
                  what, (unsigned long long)(data_len - at));
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
      return ct_error(CT_ERR_DTYPE,
                      "%s: tensor '%s' is %s; ctrain loads F32 "
                      "(and converts F16, BF16, F64)",
                      what, e->name, e->dtype->name);
    t[i] = (ct_named_tensor){.name = e->name,
                             .dtype = e->dtype->file_dtype < 0
                                          ? CT_FILE_F32
                                          : (ct_file_dtype)e->dtype->file_dtype,
                             .ndim = e->ndim,
                             .data = data + e->begin};
    memcpy(t[i].shape, e->shape, sizeof e->shape);
  }
  return CT_OK;
}

// The header length N from the first bytes b[0..got) of a file of
// file_len bytes, checked: 8 bytes to read it from, at most
// CT_SAFETENSORS_MAX_HEADER, and room for it in the file.
static ct_status header_length(const unsigned char *b, size_t got,
                               size_t file_len, const char *what, uint64_t *n) {
  if (got < 8)
    return ct_error(CT_ERR_FORMAT,
                    "%s: truncated: %zu bytes, not even the "
                    "8-byte header length",
                    what, got);
  *n = 0;
  for (int i = 0; i < 8; i++) *n |= (uint64_t)b[i] << (8 * i);
  if (*n > CT_SAFETENSORS_MAX_HEADER)
    return ct_error(CT_ERR_FORMAT,
                    "%s: header length %llu is over the %d "
                    "bytes safetensors allows (not a safetensors file?)",
                    what, (unsigned long long)*n, CT_SAFETENSORS_MAX_HEADER);
  if (*n > file_len - 8)
    return ct_error(CT_ERR_FORMAT,
                    "%s: truncated: the header needs %llu "
                    "bytes, the file has %zu after the length",
                    what, (unsigned long long)*n, file_len - 8);
  return CT_OK;
}

static ct_status load_buffer(const void *bytes, size_t len, const char *what,
                             ct_params *dst, unsigned flags,
                             ct_load_report *report);

ct_status ct_safetensors_load_buffer(const void *bytes, size_t len,
                                     const char *what, ct_params *dst,
                                     unsigned flags) {
  return load_buffer(bytes, len, what, dst, flags, NULL);
}

static ct_status load_buffer(const void *bytes, size_t len, const char *what,
                             ct_params *dst, unsigned flags,
                             ct_load_report *report) {
  if (report) *report = (ct_load_report){0};
  if (!what) what = "safetensors";
  if ((!bytes && len) || !dst)
    return ct_error(CT_ERR_ARG, "%s: load needs bytes and a store", what);
  const unsigned char *b = bytes;
  uint64_t n = 0;
  ct_status st = header_length(b, len, len, what, &n);
  if (st != CT_OK) return st;
  st_header h = {0};
  st = parse_header((const char *)b + 8, (size_t)n, what, &h);
  if (st == CT_OK) st = check_layout(&h, len - 8 - n, what);
  ct_named_tensor *t =
      st == CT_OK ? malloc((size_t)(h.n + 1) * sizeof *t) : NULL;
  if (st == CT_OK && !t) st = ct_error(CT_ERR_NOMEM, "%s: out of memory", what);
  if (st == CT_OK) st = to_named(&h, b + 8 + n, dst, what, t);
  // Reading a file as it is (e.g. model inputs): a store entry per tensor.
  for (int i = 0; st == CT_OK && (flags & CT_LOAD_REGISTER) && i < h.n; i++) {
    if (h.e[i].dtype->file_dtype < 0)
      st = ct_error(CT_ERR_DTYPE,
                    "%s: tensor '%s' is %s; ctrain reads F32 (and "
                    "converts F16, BF16, F64)",
                    what, h.e[i].name, h.e[i].dtype->name);
    else if (!ct_params_add(dst, t[i].name, t[i].ndim, t[i].shape,
                            CT_PARAM_FROZEN))
      st = ct_last_status();
  }
  if (st == CT_OK)
    st = ct_params_load_named_reported(dst, dst->data, t, h.n,
                                       flags & ~(unsigned)CT_LOAD_REGISTER,
                                       what, report);
  free(t);
  header_free(&h);
  return st;
}

// The length a safetensors file must have, from its header alone (read
// first, so that neither a foreign file nor /dev/zero is read whole): the
// header length, the header, and the end of the tensor data it lays out.
static ct_status file_length(const char *path, size_t *total) {
  unsigned char head[8];
  size_t got;
  int64_t size;
  ct_status st = ct_file_read_prefix(path, head, sizeof head, &got, &size);
  if (st != CT_OK) return st;
  uint64_t n = 0;
  st = header_length(head, got, size < 0 ? SIZE_MAX : (size_t)size, path, &n);
  if (st != CT_OK) return st;
  char *text = malloc((size_t)n + 8);
  if (!text) return ct_error(CT_ERR_NOMEM, "%s: out of memory", path);
  st = ct_file_read_prefix(path, text, (size_t)n + 8, &got, &size);
  st_header h = {0};
  if (st == CT_OK && got < n + 8)
    st = ct_error(CT_ERR_FORMAT,
                  "%s: truncated: the header needs %llu bytes, the file has "
                  "%zu after the length",
                  path, (unsigned long long)n, got - 8);
  if (st == CT_OK) st = parse_header(text + 8, (size_t)n, path, &h);
  uint64_t end = 0;
  for (int i = 0; st == CT_OK && i < h.n; i++)
    if (h.e[i].end > end) end = h.e[i].end;
  header_free(&h);
  free(text);
  if (st == CT_OK && end > SIZE_MAX - 8 - n)
    st = ct_error(CT_ERR_FORMAT, "%s: data_offsets beyond any file size", path);
  *total = (size_t)(8 + n + end);
  return st;
}

ct_status ct_safetensors_load(const char *path, ct_params *dst,
                              unsigned flags) {
  return ct_safetensors_load_reported(path, dst, flags, NULL);
}

ct_status ct_safetensors_load_weights(const char *path, ct_params *dst,
                                      bool allow_unexpected,
                                      const char *how_to_skip, FILE *warn) {
  ct_load_report r;
  ct_status st = ct_safetensors_load_reported(
      path, dst, allow_unexpected ? CT_LOAD_ALLOW_UNEXPECTED : 0, &r);
  if (st != CT_OK && r.refused_unexpected && how_to_skip)
    return ct_error(st, "%s (%s)", ct_last_error(), how_to_skip);
  if (st == CT_OK && r.unexpected && warn)
    fprintf(warn,
            "ctrain: warning: %s: skipped %d tensor(s) the model does not "
            "have: %s\n",
            path, r.unexpected, r.unexpected_names);
  return st;
}

ct_status ct_safetensors_load_reported(const char *path, ct_params *dst,
                                       unsigned flags, ct_load_report *report) {
  if (report) *report = (ct_load_report){0};
  if (!path || !dst)
    return ct_error(CT_ERR_ARG, "safetensors: load needs a path and a store");
  char *data;
  size_t len, total = 0;
  ct_status st = file_length(path, &total);
  if (st != CT_OK) return st;
  st = ct_file_read_all(path, total, &data, &len);
  if (st == CT_ERR_FORMAT)
    return ct_error(st,
                    "%s: more bytes than the %zu its header lays out "
                    "(trailing garbage?)",
                    path, total);
  if (st != CT_OK) return st;
  st = load_buffer(data, len, path, dst, flags, report);
  free(data);
  return st;
}
