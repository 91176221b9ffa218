// Checkpoint files: a versioned, checksummed, zlib-compressed container of
// named sections, written atomically, plus helpers for what usually goes in
// (records of scalars, a parameter store, optimizer state) and for a run
// folder's checkpoints (newest valid one, retention).
//
//   ct_ckpt_writer *w = ct_ckpt_writer_new();
//   ct_rec r;  ct_rec_init(&r);
//   ct_rec_i64(&r, step);  ct_rec_f64(&r, lr);  ct_rec_str(&r, config_text);
//   ct_ckpt_writer_add_rec(w, "train", &r);  ct_rec_free(&r);
//   ct_ckpt_put_params(w, "params", &p);
//   ct_ckpt_put_param_state(w, "optim.exp_avg", &p, CT_OPTIM_SLOT_EXP_AVG);
//   char path[4096];  ct_ckpt_filename(path, sizeof path, run_dir, step);
//   if (ct_ckpt_write(w, path) != CT_OK) ... ct_last_error() ...
//   ct_ckpt_writer_free(w);
//
//   ct_ckpt *c;
//   if (ct_ckpt_read(path, &c) != CT_OK) ... every byte was checked ...
//   ct_ckpt_get_params(c, "params", &p, 0);  // fails, changing nothing, when
//   ...                                      // names or shapes disagree
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
// assembles the sections), or read other programs' formats (safetensors.h).
#ifndef CT_TRAIN_CHECKPOINT_H
#define CT_TRAIN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/params.h"

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
ct_status ct_ckpt_writer_serialize(const ct_ckpt_writer *w,
                                   unsigned char **out, size_t *len);

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
ct_status ct_ckpt_section(const ct_ckpt *c, const char *name,
                          const void **data, size_t *len);
bool ct_ckpt_has(const ct_ckpt *c, const char *name);
int ct_ckpt_section_count(const ct_ckpt *c);
// Name and size of section i (in file order), for `ctrain inspect`.
const char *ct_ckpt_section_name(const ct_ckpt *c, int i, size_t *len);
// The path (or `what`) it was read from.
const char *ct_ckpt_path(const ct_ckpt *c);

// ---- Records: positional little-endian fields -------------------------------
//
// A section's payload built field by field. Appends never fail visibly: the
// first allocation failure is remembered and reported by ct_rec_status (and
// by ct_ckpt_writer_add_rec), so a run of appends needs one check.
//
//   u32, u64, i64: 4/8 bytes; f64: the 8 bytes of the IEEE double;
//   str: u32 length + bytes (no terminator, no NUL inside);
//   bytes: u64 length + bytes.

typedef struct ct_rec {
  unsigned char *data;
  size_t len, cap;
  bool failed;  // an append ran out of memory
} ct_rec;

void ct_rec_init(ct_rec *r);
void ct_rec_free(ct_rec *r);
void ct_rec_u32(ct_rec *r, uint32_t v);
void ct_rec_u64(ct_rec *r, uint64_t v);
void ct_rec_i64(ct_rec *r, int64_t v);
void ct_rec_f64(ct_rec *r, double v);
void ct_rec_str(ct_rec *r, const char *s);
void ct_rec_bytes(ct_rec *r, const void *data, size_t len);
// Appends bytes with no length prefix (for building other formats).
void ct_rec_raw(ct_rec *r, const void *data, size_t len);
ct_status ct_rec_status(const ct_rec *r);
// ct_ckpt_writer_add of the record's bytes (its error when an append failed).
ct_status ct_ckpt_writer_add_rec(ct_ckpt_writer *w, const char *name,
                                 const ct_rec *r);

// Reads fields back in the order they were written. Reads past the end or of
// malformed fields return 0 / NULL and record one error (the first) naming
// `what` and the offset; check ct_rec_reader_done at the end, which also
// rejects unread trailing bytes.
typedef struct ct_rec_reader {
  const unsigned char *data;
  size_t len, pos;
  const char *what;  // "checkpoint runs/a/ckpt-00000100.ct section 'train'"
  ct_status status;
} ct_rec_reader;

void ct_rec_reader_init(ct_rec_reader *r, const void *data, size_t len,
                        const char *what);
// A reader over section `name` of c (CT_ERR_FORMAT when it has none).
ct_status ct_ckpt_section_reader(const ct_ckpt *c, const char *name,
                                 ct_rec_reader *r);
uint32_t ct_rec_get_u32(ct_rec_reader *r);
uint64_t ct_rec_get_u64(ct_rec_reader *r);
int64_t ct_rec_get_i64(ct_rec_reader *r);
double ct_rec_get_f64(ct_rec_reader *r);
// A malloc'd NUL-terminated copy (the caller frees it), or NULL.
char *ct_rec_get_str(ct_rec_reader *r);
// A pointer into the record and its length, or NULL (with *len = 0).
const void *ct_rec_get_bytes(ct_rec_reader *r, size_t *len);
// CT_OK when every read succeeded and all bytes were consumed.
ct_status ct_rec_reader_done(ct_rec_reader *r);

// ---- Parameter stores -------------------------------------------------------
//
// A params section lists each parameter in registry order:
//   u32 tensor count, then per tensor: str name, u32 dtype (0 = f32),
//   u32 ndim, i64 x ndim shape, bytes (numel little-endian f32 values).
// An optimizer state section has the same layout, holding slot `slot` of the
// state buffers (which are laid out like the values).

// Loading options: by default every tensor in the file must match a parameter
// of the store (same name and shape) and every parameter must be in the file.
enum {
  CT_LOAD_ALLOW_MISSING = 1u << 0,     // keep parameters the file lacks as is
  CT_LOAD_ALLOW_UNEXPECTED = 1u << 1,  // ignore tensors the store lacks
  CT_LOAD_REGISTER = 1u << 2,          // safetensors: first add every tensor
                                       // of the file to the store (FROZEN)
};

ct_status ct_ckpt_put_params(ct_ckpt_writer *w, const char *section,
                             const ct_params *p);
// Loads values by name into an already-built store. Names, shapes and counts
// are all checked first: on error the store is unchanged and the message says
// what differs ("... has 'fc.weight' [8, 4], the model expects [8, 6]").
ct_status ct_ckpt_get_params(const ct_ckpt *c, const char *section,
                             ct_params *dst, unsigned flags);
// The same for optimizer state slot `slot`. Saving a slot that was never
// allocated is a CT_ERR_STATE error; loading allocates it.
ct_status ct_ckpt_put_param_state(ct_ckpt_writer *w, const char *section,
                                  const ct_params *p, int slot);
ct_status ct_ckpt_get_param_state(const ct_ckpt *c, const char *section,
                                  ct_params *dst, int slot, unsigned flags);

// A named tensor found in some file, to be matched against a store by
// ct_params_load_named (checkpoints and safetensors both load through it).
typedef enum ct_file_dtype {
  CT_FILE_F32,
  CT_FILE_F16,
  CT_FILE_BF16,
  CT_FILE_F64,
} ct_file_dtype;

enum { CT_FILE_MAX_DIMS = 8 };

typedef struct ct_named_tensor {
  const char *name;
  ct_file_dtype dtype;
  int ndim;
  int64_t shape[CT_FILE_MAX_DIMS];
  const void *data;  // numel little-endian values of dtype (any alignment)
} ct_named_tensor;

// Copies (converting to f32) each tensor into `buf` (dst->data or one of its
// state buffers) at its parameter's offset, after checking names and shapes
// against dst's registry as ct_ckpt_get_params describes. `source` names the
// file in messages.
ct_status ct_params_load_named(ct_params *dst, float *buf,
                               const ct_named_tensor *t, int n, unsigned flags,
                               const char *source);

// A 64-bit FNV-1a hash of the parameters in name order: each name (with its
// terminating NUL), ndim (u32), shape (i64 each) and value bytes. Two stores
// with equal digests hold the same weights, whatever their registration
// order. `hex` (17 bytes) receives 16 lowercase hex digits when not NULL.
uint64_t ct_params_digest(const ct_params *p, char *hex);

// ---- Run folders ------------------------------------------------------------
//
// Checkpoints of a run are `DIR/ckpt-<step>.ct`, the step zero-padded to 8
// digits ("ckpt-00001200.ct"); newest means the largest step.

// Writes "DIR/ckpt-00001200.ct" into buf; CT_ERR_ARG when it does not fit.
ct_status ct_ckpt_filename(char *buf, size_t size, const char *dir,
                           int64_t step);

typedef struct ct_ckpt_latest {
  char *path;     // the newest checkpoint that reads cleanly, or NULL
  int64_t step;   // its step (-1 when none)
  ct_ckpt *ckpt;  // it, already read; take it (set to NULL) or leave it to free
  char **skipped; // "PATH: reason" for each newer checkpoint that was corrupt
  int n_skipped;
} ct_ckpt_latest;

// Finds the newest valid checkpoint in `dir`, reading candidates from the
// newest down. A folder with no checkpoints (or no folder) gives CT_OK with
// path NULL; so does one where every checkpoint is corrupt, with all of them
// in `skipped`.
ct_status ct_ckpt_find_latest(const char *dir, ct_ckpt_latest *out);
void ct_ckpt_latest_free(ct_ckpt_latest *l);

// Retention: deletes the checkpoints in `dir` other than the `keep_last`
// newest and the one of step `keep_step` (the best so far; -1 for none).
// Files not named like checkpoints are never touched. *n_deleted (may be
// NULL) receives how many were removed.
ct_status ct_ckpt_prune(const char *dir, int keep_last, int64_t keep_step,
                        int *n_deleted);

// ---- Atomic writes of a file made of pieces ---------------------------------
//
// One piece of a file being written (the pieces are concatenated), so that
// big buffers (payloads, parameter values) are written where they lie.
typedef struct ct_ckpt_piece {
  const void *data;
  size_t len;
} ct_ckpt_piece;

// Writes the pieces to `path` with ct_file_write_atomic (train/fileio.h):
// temporary file, fsync, rename, folder fsync; the old file survives errors.
ct_status ct_ckpt_write_atomic(const char *path, const ct_ckpt_piece *pieces,
                               int n);

#endif
