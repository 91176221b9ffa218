// Parallel text readers (see text.h): a checked, gzip-transparent line reader
// and the two corpus layouts on top of it.
#include "data/text.h"
#include "data/file_stream.h"
#include "data/utf8.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { READ_CHUNK = 1 << 16 };

// Reads a (possibly gzipped) file line by line, validating each line.
typedef struct line_reader {
  const char *path;
  ct_file_stream in;
  char *chunk;  // decompressed bytes [pos, len) not yet consumed
  size_t pos, len;
  char *line;  // the current line, without "\n" / "\r\n"
  int64_t line_len, line_cap;
  int64_t line_no;  // 1-based number of the current line
  bool eof;
} line_reader;

static ct_status reader_open(line_reader *r, const char *path) {
  *r = (line_reader){.path = path};
  ct_status st = ct_file_stream_open(&r->in, path);
  if (st) return st;
  r->chunk = malloc(READ_CHUNK);
  if (!r->chunk) {
    ct_file_stream_close(&r->in);
    return ct_error(CT_ERR_NOMEM, "%s: out of memory", path);
  }
  return CT_OK;
}

static void reader_close(line_reader *r) {
  ct_file_stream_close(&r->in);
  free(r->chunk);
  free(r->line);
  *r = (line_reader){0};
}

static ct_status reader_append(line_reader *r, const char *s, size_t n) {
  if (r->line_len + (int64_t)n > CT_TEXT_MAX_LINE_BYTES + 1)  // + 1: "\r"
    return ct_error(CT_ERR_FORMAT,
                    "%s:%lld: longer than %d bytes (a corpus holds a "
                    "sentence per line: is this a text corpus?)",
                    r->path, (long long)r->line_no + 1, CT_TEXT_MAX_LINE_BYTES);
  ct_status st = ct_grow_array((void **)&r->line, &r->line_cap,
                               r->line_len + (int64_t)n + 1, 1, r->path);
  if (st) return st;
  memcpy(r->line + r->line_len, s, n);
  r->line_len += (int64_t)n;
  r->line[r->line_len] = '\0';
  return CT_OK;
}

// Checks the line just read: valid UTF-8 without NUL or other control
// characters (tabs aside); strips "\r" and a BOM.
static ct_status reader_finish_line(line_reader *r) {
  r->line_no++;
  if (r->line_len && r->line[r->line_len - 1] == '\r')
    r->line[--r->line_len] = '\0';
  if (r->line_no == 1 && r->line_len >= 3 &&
      memcmp(r->line, "\xEF\xBB\xBF", 3) == 0) {
    memmove(r->line, r->line + 3, (size_t)r->line_len - 2);
    r->line_len -= 3;
  }
  size_t n = (size_t)r->line_len, bad = ct_utf8_find_unsafe(r->line, n);
  if (bad < n) {
    char what[64];
    return ct_error(CT_ERR_FORMAT, "%s:%lld: %s at column %zu", r->path,
                    (long long)r->line_no,
                    ct_utf8_unsafe_what(r->line, n, bad, what, sizeof what),
                    bad + 1);
  }
  return CT_OK;
}

// Reads the next line into r->line. *got = false at the end of the file.
static ct_status reader_next(line_reader *r, bool *got) {
  *got = false;
  r->line_len = 0;
  if (reader_append(r, "", 0)) return ct_last_status();
  bool partial = false;  // bytes of an unterminated line were read
  for (;;) {
    if (r->pos < r->len) {
      char *start = r->chunk + r->pos;
      char *nl = memchr(start, '\n', r->len - r->pos);
      size_t n = nl ? (size_t)(nl - start) : r->len - r->pos;
      if (reader_append(r, start, n)) return ct_last_status();
      r->pos += n + (nl ? 1 : 0);
      partial = true;
      if (nl) break;
      continue;
    }
    if (r->eof) {
      if (!partial) return CT_OK;
      break;
    }
    size_t n;
    ct_status st = ct_file_stream_read(&r->in, r->chunk, READ_CHUNK, &n);
    if (st)
      return ct_error(st, "%s (after line %lld)", ct_last_error(),
                      (long long)r->line_no);
    if (n == 0) r->eof = true;
    r->pos = 0;
    r->len = n;
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
