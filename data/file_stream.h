// The bytes of a data file, gunzipped on the fly when it is gzip: the one
// reader under the text corpora (data/text.h) and the whole-file reads of
// the image, label and annotation files (ct_image_read_file).
//
//   ct_file_stream s;
//   if (ct_file_stream_open(&s, path)) ...ct_last_error()...
//   size_t got;
//   while (!ct_file_stream_read(&s, buf, sizeof buf, &got) && got) ...
//   ct_file_stream_close(&s);
//
// A file is gzip when it starts with the gzip magic bytes (1f 8b); then
// every member is inflated in turn (concatenated gzip files are one
// stream, as gunzip reads them), and anything after the last member that
// is not another member is an error ("trailing garbage"), as is a member
// cut short or corrupt data. Other files are read as they are. Errors name
// the file: CT_ERR_IO (cannot open or read), CT_ERR_FORMAT (gzip damage).
//
// Bounds: ct_file_stream_limit makes a read that would take the total
// past a number of bytes an error, before the bytes are handed out, so a
// small gzip file that inflates to gigabytes (or /dev/zero) costs no more
// than the limit. The size on disk of a regular file is known from the
// start (file_size), for callers that check a header's claim against what
// the file can hold (ct_gzip_max_inflated for a gzip file).
//
// What this file does not do: seeking, writing, or formats other than
// gzip (zlib's deflate inside it).
#ifndef CT_DATA_FILE_STREAM_H
#define CT_DATA_FILE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

// zlib's deflate expands at most 1032:1: the most bytes `n` compressed
// bytes can inflate to (a bound on what a gzip file can claim to hold).
int64_t ct_gzip_max_inflated(int64_t n);

typedef struct ct_file_stream {
  const char *path;  // not owned
  FILE *f;
  bool gzip;              // the file starts with the gzip magic
  int64_t file_size;      // bytes on disk of a regular file; -1 otherwise
  int64_t total;          // bytes handed out so far
  int64_t limit;          // 0: none; else reads past it are errors
  const char *limit_why;  // what the limit is, for its message
  void *z;                // zlib's z_stream while inflating
  unsigned char *in;      // compressed bytes [in_pos, in_len) not yet used
  size_t in_pos, in_len;
  bool member_done;  // the last gzip member ended (Z_STREAM_END)
  bool eof;
} ct_file_stream;

ct_status ct_file_stream_open(ct_file_stream *s, const char *path);
// From now on, a read that would hand out more than `limit` bytes in all
// is CT_ERR_FORMAT "PATH: more than LIMIT bytes (why)".
void ct_file_stream_limit(ct_file_stream *s, int64_t limit, const char *why);
// Reads up to n bytes into buf; *got = 0 only at the end of the data.
ct_status ct_file_stream_read(ct_file_stream *s, void *buf, size_t n,
                              size_t *got);
// Reads exactly n bytes (CT_ERR_FORMAT "truncated" when the data ends
// first).
ct_status ct_file_stream_read_exact(ct_file_stream *s, void *buf, size_t n);
// CT_OK when the data has ended; CT_ERR_FORMAT "N bytes after ..." (at
// least one more byte, the count as far as it was read) otherwise.
ct_status ct_file_stream_expect_end(ct_file_stream *s, const char *after);
void ct_file_stream_close(ct_file_stream *s);

#endif
