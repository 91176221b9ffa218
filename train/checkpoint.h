// Checkpoint files: a versioned, checksummed, zlib-compressed container of
// named sections, written atomically, and read back only after the whole
// file has been validated.
//
//   ct_ckpt_writer *w = ct_ckpt_writer_new();
//   ct_rec r;  ct_rec_init(&r);
//   ct_rec_i64(&r, step);  ct_rec_f64(&r, lr);  ct_rec_str(&r, config_text);
//   ct_ckpt_writer_add_rec(w, "train", &r);  ct_rec_free(&r);
//   ct_ckpt_writer_add(w, "config", text, strlen(text));
//   if (ct_ckpt_write(w, path) != CT_OK) ... ct_last_error() ...
//   ct_ckpt_writer_free(w);
//
//   ct_ckpt *c;
//   if (ct_ckpt_read(path, &c) != CT_OK) ... every byte was checked ...
//   ct_rec_reader rd;  ct_ckpt_section_reader(c, "train", &rd);
//   ...
//   ct_ckpt_free(c);
//
// The file format (train/checkpoint.c has the byte layout) is little-endian
// and independent of the host's struct layout. Reading validates the whole
// file (magic, version, lengths, CRC-32 of the header, of each section header
// and of each section's uncompressed bytes) before anything is handed out,
// and allocates no more than the file's size justifies, so a damaged or
// hostile file gives an error naming the path and the problem, never a crash.
//
// What this file does not do: decide what a training run saves (the program
// assembles the sections), encode what goes in a section (record.h,
// checkpoint_params.h), name or find a run's checkpoint files
// (checkpoint_folder.h), or read other programs' formats (safetensors.h).
#ifndef CT_TRAIN_CHECKPOINT_H
#define CT_TRAIN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "train/record.h"

enum {
  CT_CKPT_FORMAT_VERSION = 1,  // the newest format this build reads and writes
  CT_CKPT_NAME_MAX = 255,      // longest section name (printable ASCII)
};

// ---- Writing ----------------------------------------------------------------

typedef struct ct_ckpt_writer ct_ckpt_writer;

// An empty checkpoint in memory, or NULL (no memory).
ct_ckpt_writer *ct_ckpt_writer_new(void);
void ct_ckpt_writer_free(ct_ckpt_writer *w);
// zlib level for sections added from now on: 0 (stored) .. 9; the default is
// 1, since float weights barely compress and speed matters more.
ct_status ct_ckpt_writer_set_level(ct_ckpt_writer *w, int level);
// Adds a section holding a copy of `len` bytes (compressed when that makes it
// smaller). Names are 1..255 printable ASCII characters, unique per file.
ct_status ct_ckpt_writer_add(ct_ckpt_writer *w, const char *name,
                             const void *data, size_t len);
// Writes the file atomically: a temporary file in the same folder, flushed
// and fsynced, renamed over `path`, then the folder fsynced. On any failure
// the file previously at `path` is untouched and the temporary is removed.
ct_status ct_ckpt_write(const ct_ckpt_writer *w, const char *path);
// The bytes ct_ckpt_write would write, in a malloc'd buffer (the caller
// frees it).
ct_status ct_ckpt_writer_serialize(const ct_ckpt_writer *w, unsigned char **out,
                                   size_t *len);

// ---- Reading ----------------------------------------------------------------

typedef struct ct_ckpt ct_ckpt;

// Reads and validates a whole checkpoint file. On error *out is NULL and the
// message names the path: "runs/a/ckpt-00001200.ct: section 'params' is
// corrupt (CRC mismatch)".
ct_status ct_ckpt_read(const char *path, ct_ckpt **out);
// The same for bytes already in memory; `what` names them in messages.
ct_status ct_ckpt_parse(const void *bytes, size_t len, const char *what,
                        ct_ckpt **out);
void ct_ckpt_free(ct_ckpt *c);

// The section called `name`: its uncompressed bytes, valid until
// ct_ckpt_free. CT_ERR_FORMAT naming the file when there is none.
ct_status ct_ckpt_section(const ct_ckpt *c, const char *name, const void **data,
                          size_t *len);
bool ct_ckpt_has(const ct_ckpt *c, const char *name);
int ct_ckpt_section_count(const ct_ckpt *c);
// Name and size of section i (in file order), for `ctrain inspect`.
const char *ct_ckpt_section_name(const ct_ckpt *c, int i, size_t *len);
// The path (or `what`) it was read from.
const char *ct_ckpt_path(const ct_ckpt *c);

// ---- Records as sections ----------------------------------------------------

// ct_ckpt_writer_add of the record's bytes (its error when an append failed).
ct_status ct_ckpt_writer_add_rec(ct_ckpt_writer *w, const char *name,
                                 const ct_rec *r);
// A reader over section `name` of c (CT_ERR_FORMAT when it has none), whose
// messages name the checkpoint's path.
ct_status ct_ckpt_section_reader(const ct_ckpt *c, const char *name,
                                 ct_rec_reader *r);

#endif
