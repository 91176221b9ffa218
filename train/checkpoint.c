// Checkpoint files: the container format (header, named sections, CRCs,
// zlib), its writer and its validating reader. What goes in the sections is
// elsewhere: records (record.c), parameter stores (checkpoint_params.c); so
// are the atomic write (fileio.c) and a run folder's files
// (checkpoint_folder.c).
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
// Floats inside sections are the host's IEEE bytes; the static assert in
// little_endian.h keeps that equal to little-endian.
#include "train/checkpoint.h"
#include "train/fileio.h"
#include "train/little_endian.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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

// ---- CRC and names ----------------------------------------------------------

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
    return ct_error(CT_ERR_NOMEM,
                    "checkpoint: out of memory compressing "
                    "%zu bytes",
                    len);
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
    return ct_error(CT_ERR_ARG,
                    "checkpoint: add needs a writer, a name and "
                    "data");
  size_t name_len = strlen(name);
  if (!valid_section_name(name, name_len))
    return ct_error(CT_ERR_ARG,
                    "checkpoint: bad section name '%.300s' "
                    "(1..%d printable ASCII characters, no spaces)",
                    name, CT_CKPT_NAME_MAX);
  for (int i = 0; i < w->n; i++)
    if (strcmp(w->items[i].name, name) == 0)
      return ct_error(CT_ERR_ARG, "checkpoint: section '%s' added twice", name);
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
      st = ct_error(CT_ERR_NOMEM,
                    "checkpoint: out of memory copying "
                    "section '%s' (%zu bytes)",
                    name, len);
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
  ct_put_le(h, name_len, 2);
  memcpy(h + 2, s->name, name_len);
  unsigned char *f = h + 2 + name_len;
  ct_put_le(f, s->flags, 4);
  ct_put_le(f + 4, s->raw_len, 8);
  ct_put_le(f + 12, s->stored_len, 8);
  ct_put_le(f + 20, s->crc, 4);
  ct_put_le(f + 24, crc32_of(0, h, 2 + name_len + 24), 4);
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
  ct_put_le(f->head + 8, CT_CKPT_FORMAT_VERSION, 4);
  ct_put_le(f->head + 12, (uint64_t)w->n, 4);
  ct_put_le(f->head + 16, total, 8);
  ct_put_le(f->head + 24, 0, 4);
  ct_put_le(f->head + 28, crc32_of(0, f->head, 28), 4);
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
  ct_put_le(f->tail + 8, (uint64_t)w->n, 4);
  uint32_t crc = 0;
  for (int i = 0; i < f->n - 1; i++)
    crc = crc32_of(crc, f->pieces[i].data, f->pieces[i].len);
  ct_put_le(f->tail + 12, crc32_of(crc, f->tail, 12), 4);
  f->pieces[f->n - 1] = (ct_ckpt_piece){f->tail, CKPT_TRAILER_BYTES};
  return CT_OK;
}

ct_status ct_ckpt_write(const ct_ckpt_writer *w, const char *path) {
  if (!w || !path)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: write needs a "
                    "writer and a path");
  file_pieces f;
  ct_status st = build_pieces(w, &f);
  if (st != CT_OK) return st;
  st = ct_ckpt_write_atomic(path, f.pieces, f.n);
  free(f.pieces);
  free(f.headers);
  return st;
}

ct_status ct_ckpt_writer_serialize(const ct_ckpt_writer *w, unsigned char **out,
                                   size_t *len) {
  if (!w || !out || !len)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: serialize needs a writer and "
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
    st = ct_error(CT_ERR_NOMEM,
                  "checkpoint: out of memory serializing %zu "
                  "bytes",
                  total);
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
// With `whole` false, b holds only the header (the file's first bytes):
// the checks of the total length against the bytes at hand are left out.
static ct_status parse_header(const unsigned char *b, size_t len,
                              const char *what, uint32_t *version,
                              uint32_t *count, bool whole) {
  size_t magic_seen = len < 8 ? len : 8;
  if (len > 0 && memcmp(b, ckpt_magic, magic_seen) != 0)
    return bad_file(what,
                    "not a ctrain checkpoint (its first bytes are not "
                    "\"CTRNCKPT\")");
  *version = len >= 12 ? (uint32_t)ct_get_le(b + 8, 4) : 0;
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
        ct_put_le(h + 8, v, 4);
        if (ct_get_le(b + 28, 4) == crc32_of(0, h, 28))
          return bad_file(what,
                          "the header is corrupt (its format version "
                          "reads %u, a damaged %u)",
                          *version, v);
      }
    }
    return bad_file(what,
                    "written by a newer ctrain (format %u, this build "
                    "reads up to %d): upgrade ctrain",
                    *version, CT_CKPT_FORMAT_VERSION);
  }
  if (len < CKPT_HEADER_BYTES)
    return bad_file(what,
                    "truncated: %zu bytes, shorter than the %d-byte "
                    "header (was the write interrupted?)",
                    len, CKPT_HEADER_BYTES);
  if (*version == 0) return bad_file(what, "corrupt header (format version 0)");
  if (ct_get_le(b + 28, 4) != crc32_of(0, b, 28))
    return bad_file(what, "the header is corrupt (CRC mismatch)");
  uint64_t total = ct_get_le(b + 16, 8);
  if (!whole) return CT_OK;
  if (total < len)
    return bad_file(what,
                    "%zu bytes where the header says %llu: trailing "
                    "garbage after the checkpoint",
                    len, (unsigned long long)total);
  if (total > len)
    return bad_file(what,
                    "truncated: %zu of %llu bytes (was the write "
                    "interrupted?)",
                    len, (unsigned long long)total);
  if (ct_get_le(b + 24, 4) != 0)
    return bad_file(what,
                    "header flags 0x%llx are unknown to this build: "
                    "upgrade ctrain",
                    (unsigned long long)ct_get_le(b + 24, 4));
  *count = (uint32_t)ct_get_le(b + 12, 4);
  size_t room = len - CKPT_HEADER_BYTES;
  if (room < CKPT_TRAILER_BYTES)
    return bad_file(what, "truncated: no end marker");
  if (*count > (room - CKPT_TRAILER_BYTES) / (CKPT_SECTION_FIXED_BYTES + 1))
    return bad_file(what,
                    "the header claims %u sections, more than %zu "
                    "bytes can hold",
                    *count, room);
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
  size_t name_len = (size_t)ct_get_le(b + p, 2);
  if (end - p < CKPT_SECTION_FIXED_BYTES + name_len)
    return bad_file(what, "section %d runs past the end of the file", index);
  const unsigned char *f = b + p + 2 + name_len;
  if (ct_get_le(f + 24, 4) != crc32_of(0, b + p, 2 + name_len + 24))
    return bad_file(what,
                    "the header of section %d is corrupt (CRC "
                    "mismatch)",
                    index);
  if (!valid_section_name((const char *)b + p + 2, name_len))
    return bad_file(what, "section %d has an invalid name", index);
  memcpy(s->name, b + p + 2, name_len);
  s->name[name_len] = '\0';
  *flags = (uint32_t)ct_get_le(f, 4);
  *raw_len = ct_get_le(f + 4, 8);
  *stored_len = ct_get_le(f + 12, 8);
  *crc = (uint32_t)ct_get_le(f + 20, 4);
  p += CKPT_SECTION_FIXED_BYTES + name_len;
  if (*flags & ~(uint32_t)CKPT_SECTION_KNOWN_FLAGS)
    return bad_file(what,
                    "section '%s' uses flags 0x%x unknown to this "
                    "build: upgrade ctrain",
                    s->name, (unsigned)*flags);
  if (*stored_len > end - p)
    return bad_file(what,
                    "section '%s' claims %llu bytes, past the end of "
                    "the file",
                    s->name, (unsigned long long)*stored_len);
  bool zlib = *flags & CKPT_SECTION_ZLIB;
  if (!zlib && *raw_len != *stored_len)
    return bad_file(what,
                    "section '%s' is stored raw but its lengths "
                    "differ (%llu and %llu)",
                    s->name, (unsigned long long)*raw_len,
                    (unsigned long long)*stored_len);
  if (zlib && (*raw_len > *stored_len * zlib_max_ratio + zlib_slack ||
               *raw_len > SIZE_MAX / 2))
    return bad_file(what,
                    "section '%s' claims %llu bytes uncompressed, "
                    "impossible for %llu compressed bytes",
                    s->name, (unsigned long long)*raw_len,
                    (unsigned long long)*stored_len);
  *pos = p;
  return CT_OK;
}

// Parses a whole file held in `file`, which it takes over (freed on error).
static ct_status parse_owned(unsigned char *file, size_t len, const char *what,
                             ct_ckpt **out) {
  uint32_t version = 0, count = 0;
  ct_status st = parse_header(file, len, what, &version, &count, true);
  if (st != CT_OK) {
    free(file);
    return st;
  }
  ct_ckpt *c = calloc(1, sizeof *c);
  if (c) {
    c->file = file;
    c->path = strdup(what);
    if (count) c->sections = calloc(count, sizeof *c->sections);
  } else {
    free(file);
  }
  if (!c || !c->path || (count && !c->sections)) {
    ct_ckpt_free(c);
    return ct_error(CT_ERR_NOMEM, "%s: out of memory reading checkpoint", what);
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
        st = ct_error(CT_ERR_NOMEM,
                      "%s: out of memory for section '%s' "
                      "(%llu bytes)",
                      what, s->name, (unsigned long long)raw_len);
        break;
      }
      if (!inflate_bytes(b + pos, (size_t)stored_len, s->owned,
                         (size_t)raw_len)) {
        st = bad_file(what,
                      "section '%s' is corrupt (zlib data does not "
                      "decompress to its %llu bytes)",
                      s->name, (unsigned long long)raw_len);
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
  if (st == CT_OK && (ct_get_le(b + end + 8, 4) != count ||
                      ct_get_le(b + end + 12, 4) != crc32_of(0, b, len - 4)))
    st = bad_file(what,
                  "the file is corrupt (its end marker's CRC does not "
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
  if (!out || !path)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: read needs a "
                    "path and an output");
  *out = NULL;
  // The header first: a file that is not a checkpoint (or /dev/zero) is
  // refused after 32 bytes, and the whole file is read only up to the
  // length its checked header states.
  unsigned char head[CKPT_HEADER_BYTES];
  size_t got;
  int64_t size;
  uint32_t version, count;
  ct_status st = ct_file_read_prefix(path, head, sizeof head, &got, &size);
  if (st == CT_OK)
    st = parse_header(head, got, path, &version, &count, got < sizeof head);
  if (st != CT_OK) return st;
  uint64_t total = ct_get_le(head + 16, 8);
  if (total > SIZE_MAX - 1 || (size >= 0 && (uint64_t)size < total))
    return bad_file(path,
                    "truncated: %lld of %llu bytes (was the write "
                    "interrupted?)",
                    (long long)size, (unsigned long long)total);
  char *data;
  size_t len;
  st = ct_file_read_all(path, (size_t)total, &data, &len);
  if (st == CT_ERR_FORMAT)
    return bad_file(path,
                    "more bytes than the %llu the header says: trailing "
                    "garbage after the checkpoint",
                    (unsigned long long)total);
  return st == CT_OK ? parse_owned((unsigned char *)data, len, path, out) : st;
}

static const reader_section *find_section(const ct_ckpt *c, const char *name) {
  for (int i = 0; c && name && i < c->n; i++)
    if (strcmp(c->sections[i].name, name) == 0) return &c->sections[i];
  return NULL;
}

ct_status ct_ckpt_section(const ct_ckpt *c, const char *name, const void **data,
                          size_t *len) {
  if (!c || !name || !data || !len)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: section lookup needs a "
                    "checkpoint, a name and outputs");
  const reader_section *s = find_section(c, name);
  *data = s ? s->data : NULL;
  *len = s ? s->len : 0;
  if (!s) return bad_file(c->path, "no section '%s' in this checkpoint", name);
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

// ---- Records as sections ----------------------------------------------------

ct_status ct_ckpt_writer_add_rec(ct_ckpt_writer *w, const char *name,
                                 const ct_rec *r) {
  if (!r) return ct_error(CT_ERR_ARG, "checkpoint: no record");
  ct_status st = ct_rec_status(r);
  return st != CT_OK ? st
                     : ct_ckpt_writer_add(w, name, r->bytes.data, r->bytes.len);
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
