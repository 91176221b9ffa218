// Records: a byte payload built field by field (positional little-endian
// fields), and a reader that takes the fields back in the same order. The
// sections of checkpoints are made of them (checkpoint.h puts a record in a
// section and reads one back).
//
//   ct_rec r;  ct_rec_init(&r);
//   ct_rec_i64(&r, step);  ct_rec_f64(&r, lr);  ct_rec_str(&r, config_text);
//   if (ct_rec_status(&r) != CT_OK) ...   // one check for all the appends
//   ... r.bytes.data, r.bytes.len ...
//   ct_rec_free(&r);
//
//   ct_rec_reader rd;  ct_rec_reader_init(&rd, data, len, "section 'train'");
//   int64_t step = ct_rec_get_i64(&rd);  double lr = ct_rec_get_f64(&rd);
//   if (ct_rec_reader_done(&rd) != CT_OK) ... the message names the field ...
//
// Appends never fail visibly: the first allocation failure is remembered and
// reported by ct_rec_status (and by ct_ckpt_writer_add_rec), so a run of
// appends needs one check.
//
//   u32, u64, i64: 4/8 bytes; f64: the 8 bytes of the IEEE double;
//   str: u32 length + bytes (no terminator, no NUL inside);
//   bytes: u64 length + bytes.
//
// What this file does not do: name or type its fields (the reader must know
// the order they were written in), or know about checkpoint files.
#ifndef CT_TRAIN_RECORD_H
#define CT_TRAIN_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/strings.h"

typedef struct ct_rec {
  ct_byte_buffer bytes;  // the payload so far; bytes.failed: out of memory
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

#endif
