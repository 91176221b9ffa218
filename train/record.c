// Records: appending positional little-endian fields to a growing buffer,
// and reading them back with bounds checks that name the field and offset.
// The field encodings are listed in record.h.
#include "train/record.h"
#include "train/little_endian.h"

#include <stdlib.h>
#include <string.h>

void ct_rec_init(ct_rec *r) { memset(r, 0, sizeof *r); }

void ct_rec_free(ct_rec *r) { ct_byte_buffer_free(&r->bytes); }

void ct_rec_raw(ct_rec *r, const void *data, size_t len) {
  ct_byte_buffer_append(&r->bytes, data, len);
}

static void rec_le(ct_rec *r, uint64_t v, int bytes) {
  unsigned char b[8];
  ct_put_le(b, v, bytes);
  ct_rec_raw(r, b, (size_t)bytes);
}

void ct_rec_u32(ct_rec *r, uint32_t v) { rec_le(r, v, 4); }
void ct_rec_u64(ct_rec *r, uint64_t v) { rec_le(r, v, 8); }
void ct_rec_i64(ct_rec *r, int64_t v) { rec_le(r, (uint64_t)v, 8); }

void ct_rec_f64(ct_rec *r, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  rec_le(r, bits, 8);
}

void ct_rec_str(ct_rec *r, const char *s) {
  size_t len = s ? strlen(s) : 0;
  if (len > UINT32_MAX) {
    r->bytes.failed = true;
    return;
  }
  rec_le(r, len, 4);
  ct_rec_raw(r, s, len);
}

void ct_rec_bytes(ct_rec *r, const void *data, size_t len) {
  rec_le(r, len, 8);
  ct_rec_raw(r, data, len);
}

ct_status ct_rec_status(const ct_rec *r) {
  if (r->bytes.failed)
    return ct_error(CT_ERR_NOMEM,
                    "checkpoint: out of memory building a "
                    "record (%zu bytes so far)",
                    r->bytes.len);
  return CT_OK;
}

void ct_rec_reader_init(ct_rec_reader *r, const void *data, size_t len,
                        const char *what) {
  *r = (ct_rec_reader){.data = data,
                       .len = data ? len : 0,
                       .what = what ? what : "record",
                       .status = CT_OK};
}

// Takes n bytes, or records the reader's (first) error and returns NULL.
static const unsigned char *rec_take(ct_rec_reader *r, size_t n,
                                     const char *field) {
  if (r->status != CT_OK) return NULL;
  if (n > r->len - r->pos) {
    r->status = ct_error(CT_ERR_FORMAT,
                         "%s: truncated record: %s of %zu "
                         "bytes at offset %zu, only %zu left",
                         r->what, field, n, r->pos, r->len - r->pos);
    return NULL;
  }
  const unsigned char *p = r->data + r->pos;
  r->pos += n;
  return p;
}

uint32_t ct_rec_get_u32(ct_rec_reader *r) {
  const unsigned char *p = rec_take(r, 4, "u32");
  return p ? (uint32_t)ct_get_le(p, 4) : 0;
}

uint64_t ct_rec_get_u64(ct_rec_reader *r) {
  const unsigned char *p = rec_take(r, 8, "u64");
  return p ? ct_get_le(p, 8) : 0;
}

int64_t ct_rec_get_i64(ct_rec_reader *r) {
  const unsigned char *p = rec_take(r, 8, "i64");
  return p ? (int64_t)ct_get_le(p, 8) : 0;
}

double ct_rec_get_f64(ct_rec_reader *r) {
  const unsigned char *p = rec_take(r, 8, "f64");
  uint64_t bits = p ? ct_get_le(p, 8) : 0;
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

char *ct_rec_get_str(ct_rec_reader *r) {
  size_t at = r->pos;
  uint32_t len = ct_rec_get_u32(r);
  const unsigned char *p = rec_take(r, len, "string");
  if (!p) return NULL;
  if (memchr(p, 0, len)) {
    r->status = ct_error(CT_ERR_FORMAT,
                         "%s: the string at offset %zu "
                         "contains a NUL byte",
                         r->what, at);
    return NULL;
  }
  char *s = malloc((size_t)len + 1);
  if (!s) {
    r->status = ct_error(CT_ERR_NOMEM, "%s: out of memory", r->what);
    return NULL;
  }
  memcpy(s, p, len);
  s[len] = '\0';
  return s;
}

const void *ct_rec_get_bytes(ct_rec_reader *r, size_t *len) {
  uint64_t n = ct_rec_get_u64(r);
  const unsigned char *p =
      n <= SIZE_MAX ? rec_take(r, (size_t)n, "byte string") : NULL;
  if (!p && r->status == CT_OK)
    r->status = ct_error(CT_ERR_FORMAT,
                         "%s: byte string length %llu is "
                         "impossible",
                         r->what, (unsigned long long)n);
  *len = p ? (size_t)n : 0;
  return p;
}

ct_status ct_rec_reader_done(ct_rec_reader *r) {
  if (r->status != CT_OK) return r->status;  // its message is recorded
  if (r->pos != r->len)
    r->status = ct_error(CT_ERR_FORMAT,
                         "%s: %zu unexpected bytes at the "
                         "end of the record",
                         r->what, r->len - r->pos);
  return r->status;
}
