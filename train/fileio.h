// Checked whole-file I/O for the program's outputs and inputs.
//
// Outputs (config.ini, plots, later checkpoints) are written atomically: the
// bytes go to a temporary file beside the target, which is flushed, fsynced
// and renamed over it, then the directory is fsynced. A crash or an error
// leaves either the old file or the new one, never a torn mix. This file
// does not know any format; callers pass a function that writes the content.
#ifndef CT_TRAIN_FILEIO_H
#define CT_TRAIN_FILEIO_H

#include "core/error.h"

#include <stddef.h>
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

// Reads a whole file into a NUL-terminated malloc'd buffer (*len excludes the
// NUL). Errors name the path and strerror.
ct_status ct_file_read_all(const char *path, char **data, size_t *len);

#endif
