// Checked whole-file I/O for the program's outputs and inputs.
//
// Outputs (config.ini, plots, checkpoints, safetensors) are written
// atomically: the bytes go to a temporary file beside the target, which is
// flushed, fsynced and renamed over it, then the directory is fsynced. A
// crash or an error leaves either the old file or the new one, never a torn
// mix. This file does not know any format; callers pass a function that
// writes the content, or the content as pieces already in memory.
#ifndef CT_TRAIN_FILEIO_H
#define CT_TRAIN_FILEIO_H

#include "core/error.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Writes the content of a file to `f`. `path` is the final path, for error
// messages. Returns CT_OK or a recorded error; write errors on `f` itself are
// also caught afterwards by ct_file_write_atomic.
typedef ct_status (*ct_file_writer)(FILE *f, const char *path, void *ctx);

// Creates or replaces `path` atomically with what `write` produces. On any
// failure the temporary file is removed, an existing `path` is untouched, and
// the error names `path`.
ct_status ct_file_write_atomic(const char *path, ct_file_writer write,
                               void *ctx);

// One piece of a file being written (the pieces are concatenated), so that
// big buffers (payloads, parameter values) are written where they lie.
typedef struct ct_ckpt_piece {
  const void *data;
  size_t len;
} ct_ckpt_piece;

// Writes the pieces to `path` with ct_file_write_atomic: temporary file,
// fsync, rename, folder fsync; the old file survives errors.
ct_status ct_ckpt_write_atomic(const char *path, const ct_ckpt_piece *pieces,
                               int n);

// Reads a whole file into a NUL-terminated malloc'd buffer (*len excludes the
// NUL). Errors name the path and strerror. A file of more than max_len
// bytes is CT_ERR_FORMAT, refused before anything is allocated when it is
// a regular file, and after max_len + 1 bytes otherwise (/dev/zero, a
// pipe): every caller states what its kind of file may hold.
ct_status ct_file_read_all(const char *path, size_t max_len, char **data,
                           size_t *len);
// Reads the first n bytes of a file (fewer when it is shorter: *got), for
// formats whose header says how long the file is before it is read whole.
// *file_size: the size of a regular file, -1 for anything else.
ct_status ct_file_read_prefix(const char *path, void *buf, size_t n,
                              size_t *got, int64_t *file_size);

#endif
