// Atomic file writes (temp + fsync + rename + fsync dir), from a writer
// function or from pieces in memory, and whole-file reads.
#include "train/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Flushes a directory entry change (the rename) to disk. Some filesystems do
// not support fsync on directories (EINVAL); the rename is still atomic there.
static ct_status dir_sync(const char *path) {
  const char *slash = strrchr(path, '/');
  char dir[4096];
  if (!slash) {
    strcpy(dir, ".");
  } else if (slash == path) {
    strcpy(dir, "/");
  } else {
    size_t n = (size_t)(slash - path);
    if (n >= sizeof dir) return CT_OK;
    memcpy(dir, path, n);
    dir[n] = '\0';
  }
  int fd = open(dir, O_RDONLY);
  if (fd < 0) return CT_OK;
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0 && err != EINVAL && err != EROFS)
    return ct_error(CT_ERR_IO, "%s: cannot sync directory %s: %s", path, dir,
                    strerror(err));
  return CT_OK;
}

// Opens a fresh temporary file next to `path` (same directory, so that the
// rename stays within one filesystem).
static FILE *temp_open(const char *path, char *tmp, size_t tmp_size) {
  static _Atomic unsigned counter;
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned k = counter++;
    int n = snprintf(tmp, tmp_size, "%s.tmp.%ld.%u", path, (long)getpid(), k);
    if (n < 0 || (size_t)n >= tmp_size) {
      ct_error(CT_ERR_ARG, "%s: path too long", path);
      return NULL;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      ct_error(CT_ERR_IO, "%s: cannot create temporary file %s: %s", path, tmp,
               strerror(errno));
      return NULL;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
      ct_error(CT_ERR_IO, "%s: %s", path, strerror(errno));
      close(fd);
      unlink(tmp);
    }
    return f;
  }
  ct_error(CT_ERR_IO, "%s: cannot create a temporary file beside it", path);
  return NULL;
}

ct_status ct_file_write_atomic(const char *path, ct_file_writer write,
                               void *ctx) {
  if (!path || !write) return ct_error(CT_ERR_ARG, "write: no path or writer");
  char tmp[4200];
  FILE *f = temp_open(path, tmp, sizeof tmp);
  if (!f) return ct_last_status();
  ct_status st = write(f, path, ctx);
  if (st == CT_OK && (fflush(f) != 0 || ferror(f)))
    st = ct_error(CT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
  if (st == CT_OK && fsync(fileno(f)) != 0)
    st = ct_error(CT_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
  if (fclose(f) != 0 && st == CT_OK)
    st = ct_error(CT_ERR_IO, "%s: close failed: %s", path, strerror(errno));
  if (st == CT_OK && rename(tmp, path) != 0)
    st = ct_error(CT_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp,
                  strerror(errno));
  if (st != CT_OK) {
    unlink(tmp);
    return st;
  }
  return dir_sync(path);
}

typedef struct pieces_ctx {
  const ct_ckpt_piece *pieces;
  int n;
} pieces_ctx;

static ct_status write_pieces(FILE *f, const char *path, void *ctx) {
  const pieces_ctx *c = ctx;
  for (int i = 0; i < c->n; i++) {
    size_t len = c->pieces[i].len;
    if (len && fwrite(c->pieces[i].data, 1, len, f) != len)
      return ct_error(CT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
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

ct_status ct_file_read_all(const char *path, size_t max_len, char **data,
                           size_t *len) {
  *data = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return ct_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  // A regular file's size is known before reading: one allocation, and a
  // file over the bound is refused before any. Other files (pipes,
  // devices) are read up to the bound.
  struct stat sb;
  size_t cap = 4096;
  if (fstat(fileno(f), &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) {
      fclose(f);
      return ct_error(CT_ERR_IO, "%s: cannot read: it is a folder", path);
    }
    if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > max_len) {
      fclose(f);
      return ct_error(CT_ERR_FORMAT, "%s: %lld bytes, more than the %zu %s",
                      path, (long long)sb.st_size, max_len,
                      "this kind of file may hold");
    }
    if (S_ISREG(sb.st_mode)) cap = (size_t)sb.st_size + 2;
  }
  size_t n = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fclose(f);
      return ct_error(CT_ERR_NOMEM, "%s: out of memory reading the file", path);
    }
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n > max_len) {
      free(buf);
      fclose(f);
      return ct_error(CT_ERR_FORMAT, "%s: more than the %zu bytes %s", path,
                      max_len, "this kind of file may hold");
    }
    if (n < cap - 1) break;
    if (cap > SIZE_MAX / 4) {
      free(buf);
      fclose(f);
      return ct_error(CT_ERR_NOMEM, "%s: too big to read", path);
    }
    cap *= 2;
    char *b = realloc(buf, cap);
    if (!b) free(buf);
    buf = b;
  }
  int failed = ferror(f);
  int err = errno;
  fclose(f);
  if (failed) {
    free(buf);
    return ct_error(CT_ERR_IO, "%s: read failed: %s", path, strerror(err));
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return CT_OK;
}

ct_status ct_file_read_prefix(const char *path, void *buf, size_t n,
                              size_t *got, int64_t *file_size) {
  *got = 0;
  *file_size = -1;
  FILE *f = fopen(path, "rb");
  if (!f)
    return ct_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) {
      fclose(f);
      return ct_error(CT_ERR_IO, "%s: cannot read: it is a folder", path);
    }
    if (S_ISREG(sb.st_mode)) *file_size = (int64_t)sb.st_size;
  }
  *got = fread(buf, 1, n, f);
  int failed = ferror(f);
  int err = errno;
  fclose(f);
  if (failed)
    return ct_error(CT_ERR_IO, "%s: read failed: %s", path, strerror(err));
  return CT_OK;
}
