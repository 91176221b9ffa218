// Parallel text readers (see text.h): a checked, gzip-transparent line reader
// and the two corpus layouts on top of it.
#include "data/text.h"
#include "data/utf8.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { READ_CHUNK = 1 << 16 };

// Reads a (possibly gzipped) file line by line, validating each line.
typedef struct line_reader {
  const char *path;
  gzFile gz;
  char *chunk;  // decompressed bytes [pos, len) not yet consumed
  size_t pos, len;
  char *line;  // the current line, without "\n" / "\r\n"
  int64_t line_len, line_cap;
  int64_t line_no;  // 1-based number of the current line
  bool eof;
} line_reader;

static ct_status reader_open(line_reader *r, const char *path) {
  *r = (line_reader){.path = path};
  errno = 0;
  r->gz = gzopen(path, "rb");
  if (!r->gz)
    return ct_error(CT_ERR_IO, "%s: cannot open: %s", path,
                    errno ? strerror(errno) : "out of memory");
  r->chunk = malloc(READ_CHUNK);
  if (!r->chunk) {
    gzclose_r(r->gz);
    return ct_error(CT_ERR_NOMEM, "%s: out of memory", path);
  }
  return CT_OK;
}

static void reader_close(line_reader *r) {
  if (r->gz) gzclose_r(r->gz);
  free(r->chunk);
  free(r->line);
  *r = (line_reader){0};
}

static ct_status reader_append(line_reader *r, const char *s, size_t n) {
  ct_status st = ct_grow_array((void **)&r->line, &r->line_cap,
                               r->line_len + (int64_t)n + 1, 1, r->path);
  if (st) return st;
  memcpy(r->line + r->line_len, s, n);
  r->line_len += (int64_t)n;
  r->line[r->line_len] = '\0';
  return CT_OK;
}

// Checks the line just read: no NUL, valid UTF-8; strips "\r" and a BOM.
static ct_status reader_finish_line(line_reader *r) {
  r->line_no++;
  if (r->line_len && r->line[r->line_len - 1] == '\r')
    r->line[--r->line_len] = '\0';
  if (r->line_no == 1 && r->line_len >= 3 &&
      memcmp(r->line, "\xEF\xBB\xBF", 3) == 0) {
    memmove(r->line, r->line + 3, (size_t)r->line_len - 2);
    r->line_len -= 3;
  }
  const char *nul = memchr(r->line, '\0', (size_t)r->line_len);
  if (nul)
    return ct_error(CT_ERR_FORMAT, "%s:%lld: NUL byte at column %lld", r->path,
                    (long long)r->line_no, (long long)(nul - r->line + 1));
  size_t bad = ct_utf8_find_invalid(r->line, (size_t)r->line_len);
  if (bad < (size_t)r->line_len)
    return ct_error(CT_ERR_FORMAT,
                    "%s:%lld: invalid UTF-8 byte 0x%02x at column %zu", r->path,
                    (long long)r->line_no,
                    (unsigned)(unsigned char)r->line[bad], bad + 1);
  return CT_OK;
}

// Reads the next line into r->line. *got = false at the end of the file.
static ct_status reader_next(line_reader *r, bool *got) {
  *got = false;
  r->line_len = 0;
  if (reader_append(r, "", 0)) return CT_ERR_NOMEM;
  bool partial = false;  // bytes of an unterminated line were read
  for (;;) {
    if (r->pos < r->len) {
      char *start = r->chunk + r->pos;
      char *nl = memchr(start, '\n', r->len - r->pos);
      size_t n = nl ? (size_t)(nl - start) : r->len - r->pos;
      if (reader_append(r, start, n)) return CT_ERR_NOMEM;
      r->pos += n + (nl ? 1 : 0);
      partial = true;
      if (nl) break;
      continue;
    }
    if (r->eof) {
      if (!partial) return CT_OK;
      break;
    }
    int n = gzread(r->gz, r->chunk, READ_CHUNK);
    // zlib reports a stream cut short as Z_BUF_ERROR once the input ends.
    int code = Z_OK;
    if (n <= 0) gzerror(r->gz, &code);
    if (code == Z_ERRNO)
      return ct_error(CT_ERR_IO, "%s: read error after line %lld: %s", r->path,
                      (long long)r->line_no, strerror(errno));
    if (code == Z_BUF_ERROR)
      return ct_error(CT_ERR_FORMAT,
                      "%s: gzip data cut short after line %lld (truncated "
                      "file?)",
                      r->path, (long long)r->line_no);
    if (n < 0 || code != Z_OK)
      return ct_error(CT_ERR_FORMAT,
                      "%s: corrupt gzip data after line %lld (zlib error %d)",
                      r->path, (long long)r->line_no, code);
    if (n == 0) r->eof = true;
    r->pos = 0;
    r->len = (size_t)n;
  }
  *got = true;
  return reader_finish_line(r);
}

// Calls take(r, ctx) on each of the first max_lines lines (all when <= 0)
// of `path`, stopping at the first error.
typedef ct_status (*line_fn)(const line_reader *r, void *ctx);
static ct_status read_each_line(const char *path, int64_t max_lines,
                                line_fn take, void *ctx) {
  line_reader r;
  ct_status st = reader_open(&r, path);
  for (int64_t n = 0; !st && (max_lines <= 0 || n < max_lines); n++) {
    bool got;
    st = reader_next(&r, &got);
    if (st || !got) break;
    st = take(&r, ctx);
  }
  reader_close(&r);
  return st;
}

static ct_status push_line(const line_reader *r, void *list) {
  return ct_string_list_push(list, r->line, (size_t)r->line_len);
}

ct_status ct_text_read_lines(const char *path, int64_t max_lines,
                             ct_string_list *out) {
  return read_each_line(path, max_lines, push_line, out);
}

ct_status ct_parallel_text_read_pair(const char *src_path, const char *tgt_path,
                                     int64_t max_lines, ct_parallel_text *out) {
  *out = (ct_parallel_text){0};
  ct_status st = ct_text_read_lines(src_path, max_lines, &out->src);
  if (!st) st = ct_text_read_lines(tgt_path, max_lines, &out->tgt);
  if (!st && out->src.count != out->tgt.count)
    st = ct_error(CT_ERR_FORMAT,
                  "%s has %lld lines but %s has %lld: the files must be "
                  "line-aligned (line i of one translates line i of the other)",
                  src_path, (long long)out->src.count, tgt_path,
                  (long long)out->tgt.count);
  if (st) ct_parallel_text_free(out);
  return st;
}

// One `source<TAB>target` line into the ct_parallel_text `pairs` (text
// after a second tab is dropped).
static ct_status push_tsv_line(const line_reader *r, void *pairs) {
  ct_parallel_text *out = pairs;
  char *tab = memchr(r->line, '\t', (size_t)r->line_len);
  if (!tab)
    return ct_error(CT_ERR_FORMAT,
                    "%s:%lld: no tab between source and target (expected "
                    "`source<TAB>target`)",
                    r->path, (long long)r->line_no);
  char *tgt = tab + 1;
  char *end = memchr(tgt, '\t', (size_t)(r->line + r->line_len - tgt));
  if (!end) end = r->line + r->line_len;
  ct_status st =
      ct_string_list_push(&out->src, r->line, (size_t)(tab - r->line));
  if (!st) st = ct_string_list_push(&out->tgt, tgt, (size_t)(end - tgt));
  return st;
}

ct_status ct_parallel_text_read_tsv(const char *path, int64_t max_lines,
                                    ct_parallel_text *out) {
  *out = (ct_parallel_text){0};
  ct_status st = read_each_line(path, max_lines, push_tsv_line, out);
  if (st) ct_parallel_text_free(out);
  return st;
}

ct_status ct_parallel_text_push(ct_parallel_text *p, const char *src,
                                const char *tgt) {
  ct_status st = ct_string_list_push(&p->src, src, strlen(src));
  if (st) return st;
  st = ct_string_list_push(&p->tgt, tgt, strlen(tgt));
  if (st) {  // keep the sides aligned: drop the source just pushed
    p->src.count--;
    p->src.chars_len = p->src.offsets[p->src.count];
  }
  return st;
}

void ct_parallel_text_free(ct_parallel_text *p) {
  ct_string_list_free(&p->src);
  ct_string_list_free(&p->tgt);
}
