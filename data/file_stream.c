// Plain or gzip file bytes, with trailing-garbage and size checks (see
// file_stream.h). zlib's inflate is driven directly (not gzread) so that
// what follows the last gzip member can be told apart from another member.
#include "data/file_stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

enum { IN_CHUNK = 1 << 16, TRAILING_COUNT_MAX = 1 << 20 };

int64_t ct_gzip_max_inflated(int64_t n) {
  return n > INT64_MAX / 1032 - 1024 ? INT64_MAX : 1032 * n + 1024;
}

ct_status ct_file_stream_open(ct_file_stream *s, const char *path) {
  *s = (ct_file_stream){.path = path, .file_size = -1};
  errno = 0;
  s->f = fopen(path, "rb");
  if (!s->f)
    return ct_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(s->f), &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) {
      fclose(s->f);
      s->f = NULL;
      return ct_error(CT_ERR_IO, "%s: cannot read: it is a folder", path);
    }
    if (S_ISREG(sb.st_mode)) s->file_size = (int64_t)sb.st_size;
  }
  s->in = malloc(IN_CHUNK);
  if (!s->in) {
    ct_file_stream_close(s);
    return ct_error(CT_ERR_NOMEM, "%s: out of memory", path);
  }
  s->in_len = fread(s->in, 1, IN_CHUNK, s->f);
  if (ferror(s->f)) {
    ct_status st =
        ct_error(CT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    ct_file_stream_close(s);
    return st;
  }
  s->gzip = s->in_len >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
  if (s->gzip) {
    z_stream *z = calloc(1, sizeof *z);
    if (!z || inflateInit2(z, 15 + 16) != Z_OK) {  // 15 + 16: gzip wrapper
      free(z);
      ct_file_stream_close(s);
      return ct_error(CT_ERR_NOMEM, "%s: out of memory for zlib", path);
    }
    s->z = z;
  }
  return CT_OK;
}

void ct_file_stream_limit(ct_file_stream *s, int64_t limit, const char *why) {
  s->limit = limit;
  s->limit_why = why;
}

// Refills the compressed input when it is used up; false at the end of the
// file (or on a read error, which is recorded in *st).
static bool refill(ct_file_stream *s, ct_status *st) {
  if (s->in_pos < s->in_len) return true;
  s->in_pos = 0;
  s->in_len = fread(s->in, 1, IN_CHUNK, s->f);
  if (ferror(s->f))
    *st = ct_error(CT_ERR_IO, "%s: cannot read: %s", s->path, strerror(errno));
  return s->in_len > 0;
}

// Inflates into buf; *got = 0 at the end of the last member.
static ct_status inflate_some(ct_file_stream *s, unsigned char *buf, size_t n,
                              size_t *got) {
  z_stream *z = s->z;
  ct_status st = CT_OK;
  *got = 0;
  while (*got == 0 && !s->eof) {
    if (s->member_done) {
      // Another member, or the end; anything else is trailing garbage.
      if (!refill(s, &st)) {
        if (st) return st;
        s->eof = true;
        break;
      }
      if (s->in[s->in_pos] != 0x1f) {
        int64_t extra = 0;
        do {
          extra += (int64_t)(s->in_len - s->in_pos);
          s->in_pos = s->in_len;
        } while (extra < TRAILING_COUNT_MAX && refill(s, &st));
        return ct_error(CT_ERR_FORMAT,
                        "%s: %s%lld bytes of trailing garbage after the gzip "
                        "data",
                        s->path, extra >= TRAILING_COUNT_MAX ? "over " : "",
                        (long long)extra);
      }
      inflateReset(z);
      s->member_done = false;
    }
    if (!refill(s, &st)) {
      if (st) return st;
      return ct_error(CT_ERR_FORMAT,
                      "%s: the gzip data is truncated (cut short after %lld "
                      "bytes)",
                      s->path, (long long)(s->total + (int64_t)*got));
    }
    uInt in_avail = (uInt)(s->in_len - s->in_pos);
    z->next_in = s->in + s->in_pos;
    z->avail_in = in_avail;
    z->next_out = buf;
    z->avail_out = n > (1u << 30) ? (1u << 30) : (uInt)n;
    uInt out_avail = z->avail_out;
    int rc = inflate(z, Z_NO_FLUSH);
    s->in_pos += in_avail - z->avail_in;
    *got = out_avail - z->avail_out;
    if (rc == Z_STREAM_END) {
      s->member_done = true;
    } else if (rc == Z_MEM_ERROR) {
      return ct_error(CT_ERR_NOMEM, "%s: out of memory for zlib", s->path);
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return ct_error(CT_ERR_FORMAT, "%s: corrupt gzip data (%s)", s->path,
                      z->msg ? z->msg : "zlib error");
    }
  }
  return CT_OK;
}

ct_status ct_file_stream_read(ct_file_stream *s, void *buf, size_t n,
                              size_t *got) {
  *got = 0;
  if (n == 0 || !s->f) return CT_OK;
  if (s->limit > 0 && s->total >= s->limit) n = 1;  // one byte past: enough
  ct_status st = CT_OK;
  if (s->gzip) {
    st = inflate_some(s, buf, n, got);
  } else if (s->in_pos < s->in_len || refill(s, &st)) {
    size_t k = s->in_len - s->in_pos < n ? s->in_len - s->in_pos : n;
    memcpy(buf, s->in + s->in_pos, k);
    s->in_pos += k;
    *got = k;
  }
  if (st) return st;
  if (s->limit > 0 && s->total + (int64_t)*got > s->limit)
    return ct_error(CT_ERR_FORMAT, "%s: more than %lld bytes%s%s%s", s->path,
                    (long long)s->limit, s->gzip ? " once gunzipped" : "",
                    s->limit_why ? ": " : "", s->limit_why ? s->limit_why : "");
  s->total += (int64_t)*got;
  return CT_OK;
}

ct_status ct_file_stream_read_exact(ct_file_stream *s, void *buf, size_t n) {
  unsigned char *p = buf;
  size_t done = 0;
  while (done < n) {
    size_t got;
    ct_status st = ct_file_stream_read(s, p + done, n - done, &got);
    if (st) return st;
    if (got == 0)
      return ct_error(CT_ERR_FORMAT,
                      "%s: truncated: the data ends after %lld bytes, %lld "
                      "were needed",
                      s->path, (long long)(s->total),
                      (long long)(s->total - (int64_t)done + (int64_t)n));
    done += got;
  }
  return CT_OK;
}

ct_status ct_file_stream_expect_end(ct_file_stream *s, const char *after) {
  unsigned char buf[4096];
  int64_t extra = 0;
  size_t got;
  s->limit = 0;  // counting what is there, not keeping it
  do {
    ct_status st = ct_file_stream_read(s, buf, sizeof buf, &got);
    if (st) return st;
    extra += (int64_t)got;
  } while (got && extra < TRAILING_COUNT_MAX);
  if (!extra) return CT_OK;
  return ct_error(CT_ERR_FORMAT, "%s: %s%lld bytes after %s", s->path,
                  got ? "over " : "", (long long)extra, after);
}

void ct_file_stream_close(ct_file_stream *s) {
  if (s->z) {
    inflateEnd(s->z);
    free(s->z);
  }
  if (s->f) fclose(s->f);
  free(s->in);
  *s = (ct_file_stream){0};
}
