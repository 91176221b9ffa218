// Checkpoint files: the container format, its atomic writer and validating
// reader, records, parameter-store sections and run-folder helpers.
//
// Byte layout (all integers little-endian; CRC-32 is zlib's crc32):
//
//   File
//   offset   size  field
//   0        8     magic "CTRNCKPT"
//   8        4     u32 format version (1)   -- bytes 0..11 mean this in every
//                                              version, the rest may change
//   12       4     u32 section count
//   16       8     u64 total file length in bytes
//   24       4     u32 flags (0; reserved)
//   28       4     u32 CRC-32 of bytes 0..27
//   32       ...   the sections, one after another
//   end-16   8     end marker "CTCKPEND"
//   end-8    4     u32 section count (again)
//   end-4    4     u32 CRC-32 of every byte before this field (this also
//                  catches damage that decodes to the same bytes, such as
//                  the padding bits at the end of a zlib stream)
//
//   Section (L = name length, S = stored length)
//   0        2     u16 L (1..255)
//   2        L     name, printable ASCII (0x21..0x7e)
//   2+L      4     u32 flags: bit 0 = the payload is a zlib stream; no others
//   6+L      8     u64 raw length (after decompression)
//   14+L     8     u64 stored length S
//   22+L     4     u32 CRC-32 of the raw bytes
//   26+L     4     u32 CRC-32 of this header's bytes 0..25+L
//   30+L     S     payload
//
// Floats inside sections are the host's IEEE bytes; the static assert below
// keeps that equal to little-endian.
#include "train/checkpoint.h"
#include "train/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "checkpoint and safetensors floats are copied in host byte "
               "order: add byte swaps before building for a big-endian host");

static const char ckpt_magic[8] = {'C', 'T', 'R', 'N', 'C', 'K', 'P', 'T'};
static const char ckpt_end_magic[8] = {'C', 'T', 'C', 'K', 'P', 'E', 'N', 'D'};

enum {
  CKPT_HEADER_BYTES = 32,
  CKPT_TRAILER_BYTES = 16,
  CKPT_SECTION_FIXED_BYTES = 30,  // a section header without its name
  CKPT_SECTION_ZLIB = 1u << 0,
  CKPT_SECTION_KNOWN_FLAGS = CKPT_SECTION_ZLIB,
  CKPT_DEFAULT_LEVEL = 1,
};

// zlib expands at most 1032:1; a raw length beyond that for the stored bytes
// (plus slack for tiny streams) cannot be right and is not allocated.
static const uint64_t zlib_max_ratio = 1032, zlib_slack = 1024;

// ---- Little-endian encoding -------------------------------------------------

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

// zlib's crc32 takes 32-bit lengths; this one takes any size.
static uint32_t crc32_of(uint32_t crc, const void *data, size_t len) {
  const unsigned char *p = data;
  while (len > 0) {
    uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;
    crc = (uint32_t)crc32(crc, p, chunk);
    p += chunk;
    len -= chunk;
  }
  return crc;
}

static bool valid_section_name(const char *name, size_t len) {
  if (len == 0 || len > CT_CKPT_NAME_MAX) return false;
  for (size_t i = 0; i < len; i++)
    if (name[i] < 0x21 || name[i] > 0x7e) return false;
  return true;
}

// ---- zlib -------------------------------------------------------------------

// Compresses src into a new buffer. CT_OK with *out = NULL when compression
// does not make it smaller (the caller stores it raw).
static ct_status deflate_bytes(const void *src, size_t len, int level,
                               unsigned char **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit(&z, level) != Z_OK)
    return ct_error(CT_ERR_NOMEM, "checkpoint: zlib deflateInit failed");
  size_t cap = len;  // anything not smaller than the input is not worth it
  unsigned char *buf = cap ? malloc(cap) : NULL;
  if (cap && !buf) {
    deflateEnd(&z);
    return ct_error(CT_ERR_NOMEM, "checkpoint: out of memory compressing "
                    "%zu bytes", len);
  }
  const unsigned char *in = src;
  size_t in_left = len, done = 0;
  int rc = Z_OK;
  while (rc == Z_OK && done < cap) {
    if (z.avail_in == 0 && in_left > 0) {
      z.next_in = (unsigned char *)in;
      z.avail_in = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
      in += z.avail_in;
      in_left -= z.avail_in;
    }
    size_t room = cap - done;
    z.next_out = buf + done;
    z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
    uInt before = z.avail_out;
    rc = deflate(&z, in_left == 0 ? Z_FINISH : Z_NO_FLUSH);
    done += before - z.avail_out;
  }
  deflateEnd(&z);
  if (rc == Z_STREAM_END && done < len) {
    *out = buf;
    *out_len = done;
  } else {
    free(buf);
  }
  return CT_OK;
}

// Inflates exactly raw_len bytes from a complete zlib stream of src_len bytes.
static bool inflate_bytes(const unsigned char *src, size_t src_len,
                          unsigned char *dst, size_t raw_len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit(&z) != Z_OK) return false;
  size_t in_left = src_len, out_left = raw_len;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (z.avail_in == 0 && in_left > 0) {
      z.next_in = (unsigned char *)src;
      z.avail_in = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
      src += z.avail_in;
      in_left -= z.avail_in;
    }
    if (z.avail_out == 0 && out_left > 0) {
      z.next_out = dst;
      z.avail_out = out_left > (1u << 30) ? (1u << 30) : (uInt)out_left;
      dst += z.avail_out;
      out_left -= z.avail_out;
    }
    rc = inflate(&z, Z_NO_FLUSH);
  }
  bool ok = rc == Z_STREAM_END && z.avail_in == 0 && in_left == 0 &&
            z.avail_out == 0 && out_left == 0;
  inflateEnd(&z);
  return ok;
}

// ---- Writer -----------------------------------------------------------------

typedef struct writer_section {
  char *name;
  uint32_t flags;
  uint64_t raw_len;
  uint32_t crc;
  unsigned char *stored;
  size_t stored_len;
} writer_section;

struct ct_ckpt_writer {
  writer_section *items;
  int n, cap;
  int level;
};

ct_ckpt_writer *ct_ckpt_writer_new(void) {
  ct_ckpt_writer *w = calloc(1, sizeof *w);
  if (!w) {
    ct_error(CT_ERR_NOMEM, "checkpoint: out of memory");
    return NULL;
  }
  w->level = CKPT_DEFAULT_LEVEL;
  return w;
}

void ct_ckpt_writer_free(ct_ckpt_writer *w) {
  if (!w) return;
  for (int i = 0; i < w->n; i++) {
    free(w->items[i].name);
    free(w->items[i].stored);
  }
  free(w->items);
  free(w);
}

ct_status ct_ckpt_writer_set_level(ct_ckpt_writer *w, int level) {
  if (!w) return ct_error(CT_ERR_ARG, "checkpoint: no writer");
  if (level < 0 || level > 9)
    return ct_error(CT_ERR_ARG, "checkpoint: zlib level %d outside 0..9",
                    level);
  w->level = level;
  return CT_OK;
}

ct_status ct_ckpt_writer_add(ct_ckpt_writer *w, const char *name,
                             const void *data, size_t len) {
  if (!w || !name || (!data && len))
    return ct_error(CT_ERR_ARG, "checkpoint: add needs a writer, a name and "
                    "data");
  size_t name_len = strlen(name);
  if (!valid_section_name(name, name_len))
    return ct_error(CT_ERR_ARG, "checkpoint: bad section name '%.300s' "
                    "(1..%d printable ASCII characters, no spaces)", name,
                    CT_CKPT_NAME_MAX);
  for (int i = 0; i < w->n; i++)
    if (strcmp(w->items[i].name, name) == 0)
      return ct_error(CT_ERR_ARG, "checkpoint: section '%s' added twice",
                      name);
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 8;
    writer_section *items = realloc(w->items, (size_t)cap * sizeof *items);
    if (!items) return ct_error(CT_ERR_NOMEM, "checkpoint: out of memory");
    w->items = items;
    w->cap = cap;
  }
  writer_section s = {.raw_len = len, .crc = crc32_of(0, data, len)};
  s.name = malloc(name_len + 1);
  if (!s.name) return ct_error(CT_ERR_NOMEM, "checkpoint: out of memory");
  memcpy(s.name, name, name_len + 1);
  ct_status st = w->level > 0 ? deflate_bytes(data, len, w->level, &s.stored,
                                              &s.stored_len)
                              : CT_OK;
  if (st == CT_OK && s.stored) {
    s.flags = CKPT_SECTION_ZLIB;
  } else if (st == CT_OK) {
    s.stored = len ? malloc(len) : NULL;
    if (len && !s.stored)
      st = ct_error(CT_ERR_NOMEM, "checkpoint: out of memory copying "
                    "section '%s' (%zu bytes)", name, len);
    else if (len)
      memcpy(s.stored, data, len);
    s.stored_len = len;
  }
  if (st != CT_OK) {
    free(s.name);
    return st;
  }
  w->items[w->n++] = s;
  return CT_OK;
}

static size_t section_header_bytes(const writer_section *s) {
  return CKPT_SECTION_FIXED_BYTES + strlen(s->name);
}

static void encode_section_header(const writer_section *s, unsigned char *h) {
  size_t name_len = strlen(s->name);
  put_le(h, name_len, 2);
  memcpy(h + 2, s->name, name_len);
  unsigned char *f = h + 2 + name_len;
  put_le(f, s->flags, 4);
  put_le(f + 4, s->raw_len, 8);
  put_le(f + 12, s->stored_len, 8);
  put_le(f + 20, s->crc, 4);
  put_le(f + 24, crc32_of(0, h, 2 + name_len + 24), 4);
}

// The file as pieces: the header, each section's header and payload, the
// trailer. `head`, `tail` and *headers (freed by the caller) hold the bytes
// the writer does not already have.
typedef struct file_pieces {
  ct_ckpt_piece *pieces;
  int n;
  unsigned char *headers;
  unsigned char head[CKPT_HEADER_BYTES], tail[CKPT_TRAILER_BYTES];
} file_pieces;

static ct_status build_pieces(const ct_ckpt_writer *w, file_pieces *f) {
  size_t headers_len = 0;
  uint64_t total = CKPT_HEADER_BYTES + CKPT_TRAILER_BYTES;
  for (int i = 0; i < w->n; i++) {
    headers_len += section_header_bytes(&w->items[i]);
    total += section_header_bytes(&w->items[i]) + w->items[i].stored_len;
  }
  f->n = 2 + 2 * w->n;
  f->pieces = malloc((size_t)f->n * sizeof *f->pieces);
  f->headers = malloc(headers_len ? headers_len : 1);
  if (!f->pieces || !f->headers) {
    free(f->pieces);
    free(f->headers);
    return ct_error(CT_ERR_NOMEM, "checkpoint: out of memory");
  }
  memcpy(f->head, ckpt_magic, 8);
  put_le(f->head + 8, CT_CKPT_FORMAT_VERSION, 4);
  put_le(f->head + 12, (uint64_t)w->n, 4);
  put_le(f->head + 16, total, 8);
  put_le(f->head + 24, 0, 4);
  put_le(f->head + 28, crc32_of(0, f->head, 28), 4);
  f->pieces[0] = (ct_ckpt_piece){f->head, CKPT_HEADER_BYTES};
  unsigned char *h = f->headers;
  for (int i = 0; i < w->n; i++) {
    const writer_section *s = &w->items[i];
    encode_section_header(s, h);
    f->pieces[1 + 2 * i] = (ct_ckpt_piece){h, section_header_bytes(s)};
    f->pieces[2 + 2 * i] = (ct_ckpt_piece){s->stored, s->stored_len};
    h += section_header_bytes(s);
  }
  memcpy(f->tail, ckpt_end_magic, 8);
  put_le(f->tail + 8, (uint64_t)w->n, 4);
  uint32_t crc = 0;
  for (int i = 0; i < f->n - 1; i++)
    crc = crc32_of(crc, f->pieces[i].data, f->pieces[i].len);
  put_le(f->tail + 12, crc32_of(crc, f->tail, 12), 4);
  f->pieces[f->n - 1] = (ct_ckpt_piece){f->tail, CKPT_TRAILER_BYTES};
  return CT_OK;
}

ct_status ct_ckpt_write(const ct_ckpt_writer *w, const char *path) {
  if (!w || !path) return ct_error(CT_ERR_ARG, "checkpoint: write needs a "
                                   "writer and a path");
  file_pieces f;
  ct_status st = build_pieces(w, &f);
  if (st != CT_OK) return st;
  st = ct_ckpt_write_atomic(path, f.pieces, f.n);
  free(f.pieces);
  free(f.headers);
  return st;
}

ct_status ct_ckpt_writer_serialize(const ct_ckpt_writer *w,
                                   unsigned char **out, size_t *len) {
  if (!w || !out || !len)
    return ct_error(CT_ERR_ARG, "checkpoint: serialize needs a writer and "
                    "outputs");
  *out = NULL;
  *len = 0;
  file_pieces f;
  ct_status st = build_pieces(w, &f);
  if (st != CT_OK) return st;
  size_t total = 0;
  for (int i = 0; i < f.n; i++) total += f.pieces[i].len;
  unsigned char *buf = malloc(total);
  if (buf) {
    for (int i = 0; i < f.n; i++) {
      if (f.pieces[i].len)
        memcpy(buf + *len, f.pieces[i].data, f.pieces[i].len);
      *len += f.pieces[i].len;
    }
    *out = buf;
  } else {
    st = ct_error(CT_ERR_NOMEM, "checkpoint: out of memory serializing %zu "
                  "bytes", total);
  }
  free(f.pieces);
  free(f.headers);
  return st;
}

// ---- Reader -----------------------------------------------------------------

typedef struct reader_section {
  char name[CT_CKPT_NAME_MAX + 1];
  const unsigned char *data;
  size_t len;
  unsigned char *owned;  // the decompressed bytes, when compressed
} reader_section;

struct ct_ckpt {
  char *path;
  unsigned char *file;  // the whole file (raw sections point into it)
  size_t file_len;
  uint32_t version;
  reader_section *sections;
  int n;
};

void ct_ckpt_free(ct_ckpt *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) free(c->sections[i].owned);
  free(c->sections);
  free(c->file);
  free(c->path);
  free(c);
}

static char *copy_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

// Records a CT_ERR_FORMAT error "WHAT: message" and returns it.
static ct_status bad_file(const char *what, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static ct_status bad_file(const char *what, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ct_error(CT_ERR_FORMAT, "%s: %s", what, msg);
}

// Checks the 32-byte file header; *count and the section area are returned.
static ct_status parse_header(const unsigned char *b, size_t len,
                              const char *what, uint32_t *version,
                              uint32_t *count) {
  size_t magic_seen = len < 8 ? len : 8;
  if (len > 0 && memcmp(b, ckpt_magic, magic_seen) != 0)
    return bad_file(what, "not a ctrain checkpoint (its first bytes are not "
                    "\"CTRNCKPT\")");
  *version = len >= 12 ? (uint32_t)get_le(b + 8, 4) : 0;
  if (*version > CT_CKPT_FORMAT_VERSION) {
    // A newer format may lay out the rest of its header differently, so
    // its CRC cannot be checked; but a version one bit away from a known
    // one whose header CRC then holds is damage, not a newer file.
    if (len >= CKPT_HEADER_BYTES) {
      unsigned char h[28];
      memcpy(h, b, 28);
      for (int bit = 0; bit < 32; bit++) {
        uint32_t v = *version ^ (1u << bit);
        if (v == 0 || v > CT_CKPT_FORMAT_VERSION) continue;
        put_le(h + 8, v, 4);
        if (get_le(b + 28, 4) == crc32_of(0, h, 28))
          return bad_file(what, "the header is corrupt (its format version "
                          "reads %u, a damaged %u)", *version, v);
      }
    }
    return bad_file(what, "written by a newer ctrain (format %u, this build "
                    "reads up to %d): upgrade ctrain", *version,
                    CT_CKPT_FORMAT_VERSION);
  }
  if (len < CKPT_HEADER_BYTES)
    return bad_file(what, "truncated: %zu bytes, shorter than the %d-byte "
                    "header (was the write interrupted?)", len,
                    CKPT_HEADER_BYTES);
  if (*version == 0)
    return bad_file(what, "corrupt header (format version 0)");
  if (get_le(b + 28, 4) != crc32_of(0, b, 28))
    return bad_file(what, "the header is corrupt (CRC mismatch)");
  uint64_t total = get_le(b + 16, 8);
  if (total < len)
    return bad_file(what, "%zu bytes where the header says %llu: trailing "
                    "garbage after the checkpoint", len,
                    (unsigned long long)total);
  if (total > len)
    return bad_file(what, "truncated: %zu of %llu bytes (was the write "
                    "interrupted?)", len, (unsigned long long)total);
  if (get_le(b + 24, 4) != 0)
    return bad_file(what, "header flags 0x%llx are unknown to this build: "
                    "upgrade ctrain", (unsigned long long)get_le(b + 24, 4));
  *count = (uint32_t)get_le(b + 12, 4);
  size_t room = len - CKPT_HEADER_BYTES;
  if (room < CKPT_TRAILER_BYTES)
    return bad_file(what, "truncated: no end marker");
  if (*count > (room - CKPT_TRAILER_BYTES) / (CKPT_SECTION_FIXED_BYTES + 1))
    return bad_file(what, "the header claims %u sections, more than %zu "
                    "bytes can hold", *count, room);
  return CT_OK;
}

// Validates one section header at b[*pos] and fills s (data not yet set).
static ct_status parse_section(const unsigned char *b, size_t end, size_t *pos,
                               const char *what, int index, reader_section *s,
                               uint32_t *flags, uint64_t *raw_len,
                               uint64_t *stored_len, uint32_t *crc) {
  size_t p = *pos;
  if (end - p < CKPT_SECTION_FIXED_BYTES + 1)
    return bad_file(what, "section %d runs past the end of the file", index);
  size_t name_len = (size_t)get_le(b + p, 2);
  if (end - p < CKPT_SECTION_FIXED_BYTES + name_len)
    return bad_file(what, "section %d runs past the end of the file", index);
  const unsigned char *f = b + p + 2 + name_len;
  if (get_le(f + 24, 4) != crc32_of(0, b + p, 2 + name_len + 24))
    return bad_file(what, "the header of section %d is corrupt (CRC "
                    "mismatch)", index);
  if (!valid_section_name((const char *)b + p + 2, name_len))
    return bad_file(what, "section %d has an invalid name", index);
  memcpy(s->name, b + p + 2, name_len);
  s->name[name_len] = '\0';
  *flags = (uint32_t)get_le(f, 4);
  *raw_len = get_le(f + 4, 8);
  *stored_len = get_le(f + 12, 8);
  *crc = (uint32_t)get_le(f + 20, 4);
  p += CKPT_SECTION_FIXED_BYTES + name_len;
  if (*flags & ~(uint32_t)CKPT_SECTION_KNOWN_FLAGS)
    return bad_file(what, "section '%s' uses flags 0x%x unknown to this "
                    "build: upgrade ctrain", s->name, (unsigned)*flags);
  if (*stored_len > end - p)
    return bad_file(what, "section '%s' claims %llu bytes, past the end of "
                    "the file", s->name, (unsigned long long)*stored_len);
  bool zlib = *flags & CKPT_SECTION_ZLIB;
  if (!zlib && *raw_len != *stored_len)
    return bad_file(what, "section '%s' is stored raw but its lengths "
                    "differ (%llu and %llu)", s->name,
                    (unsigned long long)*raw_len,
                    (unsigned long long)*stored_len);
  if (zlib && (*raw_len > *stored_len * zlib_max_ratio + zlib_slack ||
               *raw_len > SIZE_MAX / 2))
    return bad_file(what, "section '%s' claims %llu bytes uncompressed, "
                    "impossible for %llu compressed bytes", s->name,
                    (unsigned long long)*raw_len,
                    (unsigned long long)*stored_len);
  *pos = p;
  return CT_OK;
}

// Parses a whole file held in `file`, which it takes over (freed on error).
static ct_status parse_owned(unsigned char *file, size_t len, const char *what,
                            ct_ckpt **out) {
  uint32_t version = 0, count = 0;
  ct_status st = parse_header(file, len, what, &version, &count);
  if (st != CT_OK) {
    free(file);
    return st;
  }
  ct_ckpt *c = calloc(1, sizeof *c);
  if (c) {
    c->file = file;
    c->path = copy_str(what);
    if (count) c->sections = calloc(count, sizeof *c->sections);
  } else {
    free(file);
  }
  if (!c || !c->path || (count && !c->sections)) {
    ct_ckpt_free(c);
    return ct_error(CT_ERR_NOMEM, "%s: out of memory reading checkpoint",
                    what);
  }
  c->file_len = len;
  c->version = version;
  const unsigned char *b = file;
  size_t end = len - CKPT_TRAILER_BYTES, pos = CKPT_HEADER_BYTES;
  for (uint32_t i = 0; i < count && st == CT_OK; i++) {
    reader_section *s = &c->sections[c->n];
    uint32_t flags = 0, crc = 0;
    uint64_t raw_len = 0, stored_len = 0;
    st = parse_section(b, end, &pos, what, (int)i, s, &flags, &raw_len,
                       &stored_len, &crc);
    if (st != CT_OK) break;
    for (int j = 0; j < c->n && st == CT_OK; j++)
      if (strcmp(c->sections[j].name, s->name) == 0)
        st = bad_file(what, "section '%s' appears twice", s->name);
    if (st != CT_OK) break;
    if (flags & CKPT_SECTION_ZLIB) {
      s->owned = malloc(raw_len ? (size_t)raw_len : 1);
      if (!s->owned) {
        st = ct_error(CT_ERR_NOMEM, "%s: out of memory for section '%s' "
                      "(%llu bytes)", what, s->name,
                      (unsigned long long)raw_len);
        break;
      }
      if (!inflate_bytes(b + pos, (size_t)stored_len, s->owned,
                         (size_t)raw_len)) {
        st = bad_file(what, "section '%s' is corrupt (zlib data does not "
                      "decompress to its %llu bytes)", s->name,
                      (unsigned long long)raw_len);
        free(s->owned);
        s->owned = NULL;
        break;
      }
      s->data = s->owned;
    } else {
      s->data = b + pos;
    }
    s->len = (size_t)raw_len;
    c->n++;
    if (crc32_of(0, s->data, s->len) != crc)
      st = bad_file(what, "section '%s' is corrupt (CRC mismatch)", s->name);
    pos += (size_t)stored_len;
  }
  if (st == CT_OK && pos != end)
    st = bad_file(what, "%zu unexplained bytes after the last section",
                  end - pos);
  if (st == CT_OK && memcmp(b + end, ckpt_end_magic, 8) != 0)
    st = bad_file(what, "the end marker is missing or corrupt");
  if (st == CT_OK && (get_le(b + end + 8, 4) != count ||
                      get_le(b + end + 12, 4) != crc32_of(0, b, len - 4)))
    st = bad_file(what, "the file is corrupt (its end marker's CRC does not "
                  "match)");
  if (st != CT_OK) {
    ct_ckpt_free(c);
    return st;
  }
  *out = c;
  return CT_OK;
}

ct_status ct_ckpt_parse(const void *bytes, size_t len, const char *what,
                        ct_ckpt **out) {
  if (!out) return ct_error(CT_ERR_ARG, "checkpoint: parse needs an output");
  *out = NULL;
  if (!what) what = "checkpoint";
  if (!bytes && len) return ct_error(CT_ERR_ARG, "%s: no bytes", what);
  unsigned char *copy = malloc(len ? len : 1);
  if (!copy) return ct_error(CT_ERR_NOMEM, "%s: out of memory", what);
  if (len) memcpy(copy, bytes, len);
  return parse_owned(copy, len, what, out);
}

ct_status ct_ckpt_read(const char *path, ct_ckpt **out) {
  if (!out || !path) return ct_error(CT_ERR_ARG, "checkpoint: read needs a "
                                     "path and an output");
  *out = NULL;
  char *data;
  size_t len;
  ct_status st = ct_file_read_all(path, &data, &len);
  return st == CT_OK ? parse_owned((unsigned char *)data, len, path, out)
                     : st;
}

static const reader_section *find_section(const ct_ckpt *c, const char *name) {
  for (int i = 0; c && name && i < c->n; i++)
    if (strcmp(c->sections[i].name, name) == 0) return &c->sections[i];
  return NULL;
}

ct_status ct_ckpt_section(const ct_ckpt *c, const char *name,
                          const void **data, size_t *len) {
  if (!c || !name || !data || !len)
    return ct_error(CT_ERR_ARG, "checkpoint: section lookup needs a "
                    "checkpoint, a name and outputs");
  const reader_section *s = find_section(c, name);
  *data = s ? s->data : NULL;
  *len = s ? s->len : 0;
  if (!s) return bad_file(c->path, "no section '%s' in this checkpoint",
                          name);
  return CT_OK;
}

bool ct_ckpt_has(const ct_ckpt *c, const char *name) {
  return find_section(c, name) != NULL;
}

int ct_ckpt_section_count(const ct_ckpt *c) { return c ? c->n : 0; }

const char *ct_ckpt_section_name(const ct_ckpt *c, int i, size_t *len) {
  if (!c || i < 0 || i >= c->n) return NULL;
  if (len) *len = c->sections[i].len;
  return c->sections[i].name;
}

const char *ct_ckpt_path(const ct_ckpt *c) { return c ? c->path : NULL; }

// ---- Records ----------------------------------------------------------------

void ct_rec_init(ct_rec *r) { memset(r, 0, sizeof *r); }

void ct_rec_free(ct_rec *r) {
  free(r->data);
  memset(r, 0, sizeof *r);
}

void ct_rec_raw(ct_rec *r, const void *data, size_t len) {
  if (r->failed || len == 0) return;
  if (len > SIZE_MAX / 2 - r->len) {
    r->failed = true;
    return;
  }
  if (r->len + len > r->cap) {
    size_t cap = r->cap ? r->cap : 256;
    while (cap < r->len + len) cap *= 2;
    unsigned char *d = realloc(r->data, cap);
    if (!d) {
      r->failed = true;
      return;
    }
    r->data = d;
    r->cap = cap;
  }
  memcpy(r->data + r->len, data, len);
  r->len += len;
}

static void rec_le(ct_rec *r, uint64_t v, int bytes) {
  unsigned char b[8];
  put_le(b, v, bytes);
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
    r->failed = true;
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
  if (r->failed)
    return ct_error(CT_ERR_NOMEM, "checkpoint: out of memory building a "
                    "record (%zu bytes so far)", r->len);
  return CT_OK;
}

ct_status ct_ckpt_writer_add_rec(ct_ckpt_writer *w, const char *name,
                                 const ct_rec *r) {
  if (!r) return ct_error(CT_ERR_ARG, "checkpoint: no record");
  ct_status st = ct_rec_status(r);
  return st != CT_OK ? st : ct_ckpt_writer_add(w, name, r->data, r->len);
}

void ct_rec_reader_init(ct_rec_reader *r, const void *data, size_t len,
                        const char *what) {
  *r = (ct_rec_reader){.data = data, .len = data ? len : 0,
                       .what = what ? what : "record", .status = CT_OK};
}

ct_status ct_ckpt_section_reader(const ct_ckpt *c, const char *name,
                                 ct_rec_reader *r) {
  const void *data = NULL;
  size_t len = 0;
  ct_status st = ct_ckpt_section(c, name, &data, &len);
  ct_rec_reader_init(r, data, len, c ? c->path : NULL);
  if (st != CT_OK) r->status = st;
  return st;
}

// Takes n bytes, or records the reader's (first) error and returns NULL.
static const unsigned char *rec_take(ct_rec_reader *r, size_t n,
                                     const char *field) {
  if (r->status != CT_OK) return NULL;
  if (n > r->len - r->pos) {
    r->status = ct_error(CT_ERR_FORMAT, "%s: truncated record: %s of %zu "
                         "bytes at offset %zu, only %zu left", r->what, field,
                         n, r->pos, r->len - r->pos);
    return NULL;
  }
  const unsigned char *p = r->data + r->pos;
  r->pos += n;
  return p;
}

uint32_t ct_rec_get_u32(ct_rec_reader *r) {
  const unsigned char *p = rec_take(r, 4, "u32");
  return p ? (uint32_t)get_le(p, 4) : 0;
}

uint64_t ct_rec_get_u64(ct_rec_reader *r) {
  const unsigned char *p = rec_take(r, 8, "u64");
  return p ? get_le(p, 8) : 0;
}

int64_t ct_rec_get_i64(ct_rec_reader *r) {
  const unsigned char *p = rec_take(r, 8, "i64");
  return p ? (int64_t)get_le(p, 8) : 0;
}

double ct_rec_get_f64(ct_rec_reader *r) {
  const unsigned char *p = rec_take(r, 8, "f64");
  uint64_t bits = p ? get_le(p, 8) : 0;
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
    r->status = ct_error(CT_ERR_FORMAT, "%s: the string at offset %zu "
                         "contains a NUL byte", r->what, at);
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
    r->status = ct_error(CT_ERR_FORMAT, "%s: byte string length %llu is "
                         "impossible", r->what, (unsigned long long)n);
  *len = p ? (size_t)n : 0;
  return p;
}

ct_status ct_rec_reader_done(ct_rec_reader *r) {
  if (r->status != CT_OK) return r->status;  // its message is recorded
  if (r->pos != r->len)
    r->status = ct_error(CT_ERR_FORMAT, "%s: %zu unexpected bytes at the "
                         "end of the record", r->what, r->len - r->pos);
  return r->status;
}

// ---- Parameter stores -------------------------------------------------------

enum { PARAMS_DTYPE_F32 = 0 };

static ct_status put_buffer(ct_ckpt_writer *w, const char *section,
                            const ct_params *p, const float *buf) {
  ct_rec r;
  ct_rec_init(&r);
  ct_rec_u32(&r, (uint32_t)p->n);
  for (int i = 0; i < p->n; i++) {
    const ct_param *it = &p->items[i];
    ct_rec_str(&r, it->name);
    ct_rec_u32(&r, PARAMS_DTYPE_F32);
    ct_rec_u32(&r, (uint32_t)it->tensor->ndim);
    for (int d = 0; d < it->tensor->ndim; d++)
      ct_rec_i64(&r, it->tensor->shape[d]);
    ct_rec_bytes(&r, buf + it->offset,
                 (size_t)it->tensor->numel * sizeof(float));
  }
  ct_status st = ct_ckpt_writer_add_rec(w, section, &r);
  ct_rec_free(&r);
  return st;
}

ct_status ct_ckpt_put_params(ct_ckpt_writer *w, const char *section,
                             const ct_params *p) {
  if (!p) return ct_error(CT_ERR_ARG, "checkpoint: no parameter store");
  return put_buffer(w, section, p, p->data);
}

ct_status ct_ckpt_put_param_state(ct_ckpt_writer *w, const char *section,
                                  const ct_params *p, int slot) {
  if (!p || slot < 0 || slot >= CT_PARAM_STATE_SLOTS)
    return ct_error(CT_ERR_ARG, "checkpoint: need a store and a state slot "
                    "in 0..%d (got %d)", CT_PARAM_STATE_SLOTS - 1, slot);
  if (!p->state[slot])
    return ct_error(CT_ERR_STATE, "checkpoint: optimizer state slot %d was "
                    "never allocated; nothing to save in '%s'", slot,
                    section ? section : "?");
  return put_buffer(w, section, p, p->state[slot]);
}

// Parses a params-layout section into tensors and loads them into buf.
static ct_status get_buffer(const ct_ckpt *c, const char *section,
                            ct_params *dst, float *buf, unsigned flags) {
  char what[1024];
  snprintf(what, sizeof what, "%s section '%s'", c ? c->path : "?",
           section ? section : "?");
  ct_rec_reader r;
  ct_status st = ct_ckpt_section_reader(c, section, &r);
  if (st != CT_OK) return st;
  r.what = what;
  uint32_t count = ct_rec_get_u32(&r);
  // Each tensor takes at least 20 bytes, which bounds the allocation.
  if (r.status == CT_OK && count > (r.len - r.pos) / 20)
    r.status = ct_error(CT_ERR_FORMAT, "%s: claims %u tensors in %zu bytes",
                        what, count, r.len);
  ct_named_tensor *t =
      r.status == CT_OK ? calloc(count ? count : 1, sizeof *t) : NULL;
  if (r.status == CT_OK && !t)
    r.status = ct_error(CT_ERR_NOMEM, "%s: out of memory", what);
  uint32_t got = 0;
  for (; r.status == CT_OK && got < count; got++) {
    ct_named_tensor *e = &t[got];
    e->name = ct_rec_get_str(&r);
    uint32_t dtype = ct_rec_get_u32(&r), ndim = ct_rec_get_u32(&r);
    if (r.status != CT_OK) break;
    if (dtype != PARAMS_DTYPE_F32 || ndim > CT_FILE_MAX_DIMS) {
      r.status = ct_error(CT_ERR_FORMAT, "%s: tensor '%s' has dtype %u and "
                          "%u dims (this build reads f32, up to %d dims)",
                          what, e->name, dtype, ndim, CT_FILE_MAX_DIMS);
      break;
    }
    e->dtype = CT_FILE_F32;
    e->ndim = (int)ndim;
    uint64_t numel = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < ndim; d++) {
      e->shape[d] = ct_rec_get_i64(&r);
      if (e->shape[d] < 0 ||
          (e->shape[d] && numel > UINT64_MAX / 4 / (uint64_t)e->shape[d]))
        overflow = true;
      else
        numel *= (uint64_t)e->shape[d];
    }
    size_t nbytes = 0;
    e->data = ct_rec_get_bytes(&r, &nbytes);
    if (r.status == CT_OK && (overflow || nbytes != numel * 4))
      r.status = ct_error(CT_ERR_FORMAT, "%s: tensor '%s' holds %zu bytes, "
                          "which does not fit its shape", what, e->name,
                          nbytes);
  }
  st = ct_rec_reader_done(&r);
  if (st == CT_OK) st = ct_params_load_named(dst, buf, t, (int)count, flags,
                                             what);
  for (uint32_t i = 0; t && i < count; i++) free((char *)t[i].name);
  free(t);
  return st;
}

ct_status ct_ckpt_get_params(const ct_ckpt *c, const char *section,
                             ct_params *dst, unsigned flags) {
  if (!c || !dst) return ct_error(CT_ERR_ARG, "checkpoint: get_params needs "
                                  "a checkpoint and a store");
  return get_buffer(c, section, dst, dst->data, flags);
}

ct_status ct_ckpt_get_param_state(const ct_ckpt *c, const char *section,
                                  ct_params *dst, int slot, unsigned flags) {
  if (!c || !dst) return ct_error(CT_ERR_ARG, "checkpoint: get_param_state "
                                  "needs a checkpoint and a store");
  if (!ct_ckpt_has(c, section))  // before allocating the slot
    return bad_file(c->path, "no section '%s' in this checkpoint",
                    section ? section : "?");
  float *buf = ct_params_state(dst, slot);
  return buf ? get_buffer(c, section, dst, buf, flags) : ct_last_status();
}

// ---- Matching named tensors against a store ---------------------------------

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31,
           man = h & 1023u, bits;
  if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);  // inf or nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: renormalize
    exp = 113;
    while (!(man & 1024u)) {
      man <<= 1;
      exp--;
    }
    bits = sign | (exp << 23) | ((man & 1023u) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static void convert_to_f32(float *dst, const unsigned char *src, int64_t n,
                           ct_file_dtype dtype) {
  if (dtype == CT_FILE_F32) {
    memcpy(dst, src, (size_t)n * 4);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (dtype == CT_FILE_F64) {
      uint64_t bits = get_le(src + 8 * i, 8);
      double v;
      memcpy(&v, &bits, 8);
      dst[i] = (float)v;
    } else if (dtype == CT_FILE_BF16) {
      uint32_t bits = (uint32_t)get_le(src + 2 * i, 2) << 16;
      memcpy(&dst[i], &bits, 4);
    } else {
      dst[i] = half_to_float((uint16_t)get_le(src + 2 * i, 2));
    }
  }
}

static bool same_shape(const ct_named_tensor *e, const ct_tensor *t) {
  if (e->ndim != t->ndim) return false;
  for (int d = 0; d < e->ndim; d++)
    if (e->shape[d] != t->shape[d]) return false;
  return true;
}

// Appends "'name' [2, 3]" items to a message, at most three then "(and N
// more)".
typedef struct name_list {
  char text[600];
  int count;
} name_list;

static void name_list_add(name_list *l, const char *name, int ndim,
                          const int64_t *shape) {
  if (l->count++ >= 3) return;
  char dims[128];
  size_t used = strlen(l->text);
  ct_shape_str(ndim > CT_MAX_DIMS ? CT_MAX_DIMS : ndim, shape, dims,
               sizeof dims);
  snprintf(l->text + used, sizeof l->text - used, "%s'%.120s' %s%s",
           used ? ", " : "", name, dims, ndim > CT_MAX_DIMS ? "..." : "");
}

static const char *name_list_end(name_list *l) {
  size_t used = strlen(l->text);
  if (l->count > 3)
    snprintf(l->text + used, sizeof l->text - used, " (and %d more)",
             l->count - 3);
  return l->text;
}

ct_status ct_params_load_named(ct_params *dst, float *buf,
                               const ct_named_tensor *t, int n, unsigned flags,
                               const char *source) {
  if (!dst || (!buf && dst->n) || (n && !t) || n < 0)
    return ct_error(CT_ERR_ARG, "load: needs a store, a buffer and tensors");
  if (!source) source = "file";
  // found[i]: which file tensor fills parameter i (-1 none).
  int *found = malloc((size_t)(dst->n ? dst->n : 1) * sizeof *found);
  if (!found) return ct_error(CT_ERR_NOMEM, "%s: out of memory", source);
  for (int i = 0; i < dst->n; i++) found[i] = -1;
  name_list unexpected = {{0}, 0}, missing = {{0}, 0};
  ct_status st = CT_OK;
  for (int k = 0; k < n && st == CT_OK; k++) {
    ct_param *it = ct_params_find(dst, t[k].name);
    if (!it) {
      name_list_add(&unexpected, t[k].name, t[k].ndim, t[k].shape);
      continue;
    }
    int i = (int)(it - dst->items);
    char want[128], got[128];
    if (found[i] >= 0) {
      st = ct_error(CT_ERR_FORMAT, "%s: has '%s' twice", source, t[k].name);
    } else if (!same_shape(&t[k], it->tensor)) {
      ct_shape_str(it->tensor->ndim, it->tensor->shape, want, sizeof want);
      if (t[k].ndim > CT_MAX_DIMS)
        snprintf(got, sizeof got, "with %d dims", t[k].ndim);
      else
        ct_shape_str(t[k].ndim, t[k].shape, got, sizeof got);
      st = ct_error(CT_ERR_SHAPE, "%s: has '%s' %s, the model expects %s",
                    source, t[k].name, got, want);
    }
    found[i] = k;
  }
  for (int i = 0; i < dst->n && st == CT_OK; i++)
    if (found[i] < 0)
      name_list_add(&missing, dst->items[i].name, dst->items[i].tensor->ndim,
                    dst->items[i].tensor->shape);
  if (st == CT_OK && unexpected.count && !(flags & CT_LOAD_ALLOW_UNEXPECTED))
    st = ct_error(CT_ERR_FORMAT, "%s: has %d tensor(s) the model does not: "
                  "%s (allow unexpected tensors to ignore them)", source,
                  unexpected.count, name_list_end(&unexpected));
  if (st == CT_OK && missing.count && !(flags & CT_LOAD_ALLOW_MISSING))
    st = ct_error(CT_ERR_FORMAT, "%s: lacks %d model parameter(s): %s (allow "
                  "missing tensors to keep their current values)", source,
                  missing.count, name_list_end(&missing));
  for (int i = 0; i < dst->n && st == CT_OK; i++)
    if (found[i] >= 0)
      convert_to_f32(buf + dst->items[i].offset, t[found[i]].data,
                     dst->items[i].tensor->numel, t[found[i]].dtype);
  free(found);
  return st;
}

// ---- Digest -----------------------------------------------------------------

typedef struct fnv {
  uint64_t h;
} fnv;

static void fnv_bytes(fnv *f, const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = f->h;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  f->h = h;
}

static void fnv_le(fnv *f, uint64_t v, int bytes) {
  unsigned char b[8];
  put_le(b, v, bytes);
  fnv_bytes(f, b, (size_t)bytes);
}

static int compare_param_names(const void *a, const void *b) {
  const ct_param *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

uint64_t ct_params_digest(const ct_params *p, char *hex) {
  fnv f = {0xcbf29ce484222325ull};
  int n = p ? p->n : 0;
  const ct_param **order = malloc((size_t)(n ? n : 1) * sizeof *order);
  if (order) {
    for (int i = 0; i < n; i++) order[i] = &p->items[i];
    qsort(order, (size_t)n, sizeof *order, compare_param_names);
  }
  for (int i = 0; i < n; i++) {
    // Without memory to sort, registry order still gives a digest, though
    // one that depends on registration order.
    const ct_param *it = order ? order[i] : &p->items[i];
    fnv_bytes(&f, it->name, strlen(it->name) + 1);
    fnv_le(&f, (uint64_t)it->tensor->ndim, 4);
    for (int d = 0; d < it->tensor->ndim; d++)
      fnv_le(&f, (uint64_t)it->tensor->shape[d], 8);
    fnv_bytes(&f, p->data + it->offset,
              (size_t)it->tensor->numel * sizeof(float));
  }
  free(order);
  if (hex) snprintf(hex, 17, "%016llx", (unsigned long long)f.h);
  return f.h;
}

// ---- Run folders ------------------------------------------------------------

ct_status ct_ckpt_filename(char *buf, size_t size, const char *dir,
                           int64_t step) {
  if (!buf || !dir || step < 0)
    return ct_error(CT_ERR_ARG, "checkpoint: filename needs a buffer, a "
                    "folder and a step >= 0");
  int n = snprintf(buf, size, "%s/ckpt-%08lld.ct", dir, (long long)step);
  if (n < 0 || (size_t)n >= size)
    return ct_error(CT_ERR_ARG, "checkpoint: path '%s/ckpt-...' is too long",
                    dir);
  return CT_OK;
}

// The step of a file named "ckpt-<digits>.ct", or -1.
static int64_t ckpt_step_of(const char *name) {
  if (strncmp(name, "ckpt-", 5) != 0) return -1;
  const char *p = name + 5;
  int64_t step = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; p++, digits++) {
    if (step > (INT64_MAX - 9) / 10) return -1;
    step = step * 10 + (*p - '0');
  }
  return digits > 0 && strcmp(p, ".ct") == 0 ? step : -1;
}

typedef struct ckpt_entry {
  char *path;
  int64_t step;
} ckpt_entry;

static int compare_newest_first(const void *a, const void *b) {
  const ckpt_entry *x = a, *y = b;
  return x->step < y->step ? 1 : x->step > y->step ? -1
                                                   : strcmp(x->path, y->path);
}

static void free_entries(ckpt_entry *e, int n) {
  for (int i = 0; i < n; i++) free(e[i].path);
  free(e);
}

// The checkpoints in dir, newest first. A missing folder has none.
static ct_status list_checkpoints(const char *dir, ckpt_entry **out, int *n) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return CT_OK;
    return ct_error(CT_ERR_IO, "%s: cannot list checkpoints: %s", dir,
                    strerror(errno));
  }
  ckpt_entry *e = NULL;
  int count = 0, cap = 0;
  ct_status st = CT_OK;
  struct dirent *de;
  while (st == CT_OK && (de = readdir(d)) != NULL) {
    int64_t step = ckpt_step_of(de->d_name);
    if (step < 0) continue;
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      ckpt_entry *grown = realloc(e, (size_t)cap * sizeof *e);
      if (!grown) {
        st = ct_error(CT_ERR_NOMEM, "%s: out of memory listing checkpoints",
                      dir);
        break;
      }
      e = grown;
    }
    size_t len = strlen(dir) + 1 + strlen(de->d_name) + 1;
    char *path = malloc(len);
    if (!path) {
      st = ct_error(CT_ERR_NOMEM, "%s: out of memory listing checkpoints",
                    dir);
      break;
    }
    snprintf(path, len, "%s/%s", dir, de->d_name);
    e[count++] = (ckpt_entry){path, step};
  }
  closedir(d);
  if (st != CT_OK) {
    free_entries(e, count);
    return st;
  }
  if (count) qsort(e, (size_t)count, sizeof *e, compare_newest_first);
  *out = e;
  *n = count;
  return CT_OK;
}

void ct_ckpt_latest_free(ct_ckpt_latest *l) {
  if (!l) return;
  free(l->path);
  ct_ckpt_free(l->ckpt);
  for (int i = 0; i < l->n_skipped; i++) free(l->skipped[i]);
  free(l->skipped);
  memset(l, 0, sizeof *l);
  l->step = -1;
}

ct_status ct_ckpt_find_latest(const char *dir, ct_ckpt_latest *out) {
  if (!dir || !out)
    return ct_error(CT_ERR_ARG, "checkpoint: find_latest needs a folder and "
                    "an output");
  memset(out, 0, sizeof *out);
  out->step = -1;
  ckpt_entry *e;
  int n;
  ct_status st = list_checkpoints(dir, &e, &n);
  if (st != CT_OK) return st;
  if (n) out->skipped = malloc((size_t)n * sizeof *out->skipped);
  if (n && !out->skipped) st = ct_error(CT_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n && st == CT_OK && !out->path; i++) {
    ct_ckpt *c = NULL;
    ct_status rs = ct_ckpt_read(e[i].path, &c);
    if (rs == CT_ERR_NOMEM) {
      st = rs;  // not the file's fault: stop rather than skip it
    } else if (rs != CT_OK) {
      // The message already names the path.
      char *why = copy_str(ct_last_error());
      if (!why) st = ct_error(CT_ERR_NOMEM, "out of memory");
      else out->skipped[out->n_skipped++] = why;
    } else {
      out->ckpt = c;
      out->step = e[i].step;
      out->path = e[i].path;
      e[i].path = NULL;
    }
  }
  free_entries(e, n);
  if (st != CT_OK) ct_ckpt_latest_free(out);
  else ct_clear_error();  // the skipped files' errors are in out->skipped
  return st;
}

ct_status ct_ckpt_prune(const char *dir, int keep_last, int64_t keep_step,
                        int *n_deleted) {
  if (n_deleted) *n_deleted = 0;
  if (!dir || keep_last < 0)
    return ct_error(CT_ERR_ARG, "checkpoint: prune needs a folder and "
                    "keep_last >= 0");
  ckpt_entry *e;
  int n;
  ct_status st = list_checkpoints(dir, &e, &n);
  for (int i = keep_last; i < n && st == CT_OK; i++) {
    if (e[i].step == keep_step) continue;
    if (remove(e[i].path) != 0 && errno != ENOENT)
      st = ct_error(CT_ERR_IO, "%s: cannot delete old checkpoint: %s",
                    e[i].path, strerror(errno));
    else if (n_deleted)
      (*n_deleted)++;
  }
  free_entries(e, n);
  return st;
}

// ---- Atomic file writes -----------------------------------------------------

typedef struct pieces_ctx {
  const ct_ckpt_piece *pieces;
  int n;
} pieces_ctx;

static ct_status write_pieces(FILE *f, const char *path, void *ctx) {
  const pieces_ctx *c = ctx;
  for (int i = 0; i < c->n; i++) {
    size_t len = c->pieces[i].len;
    if (len && fwrite(c->pieces[i].data, 1, len, f) != len)
      return ct_error(CT_ERR_IO, "%s: write failed: %s", path,
                      strerror(errno));
  }
  return CT_OK;
}

ct_status ct_ckpt_write_atomic(const char *path, const ct_ckpt_piece *pieces,
                               int n) {
  if (!path || !*path || (n && !pieces) || n < 0)
    return ct_error(CT_ERR_ARG, "write: needs a path and data");
  pieces_ctx ctx = {pieces, n};
  return ct_file_write_atomic(path, write_pieces, &ctx);
}
