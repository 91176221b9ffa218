// metrics.jsonl: one flat JSON object per line, written as training goes.
//
// Writing: build an object with ct_json_obj_* (numbers, integers, strings),
// then ct_jsonl_write appends it as one line and flushes, so a crash loses at
// most the line being written. Opening a file for append first drops a torn
// last line left by such a crash, so new lines never glue onto it.
//
//   ct_jsonl log;
//   if (ct_jsonl_open(&log, "runs/x/metrics.jsonl")) ...error...
//   ct_json_obj o;
//   ct_json_obj_init(&o);
//   ct_json_obj_str(&o, "type", "train");
//   ct_json_obj_int(&o, "step", step);
//   ct_json_obj_num(&o, "loss", loss);
//   ct_jsonl_write(&log, &o);
//   ct_json_obj_free(&o);
//
// Reading: ct_jsonl_read turns each line into a flat record whose values are
// numbers, strings, true/false or null; that is all metrics need. The JSON
// itself is read by data/json.h (with CT_JSON_PYTHON, so NaN and Infinity
// from Python scripts are read too). A malformed line is an error naming
// file:line, except a malformed last line with no newline (the crash case),
// which is skipped with a warning.
//
// Non-finite numbers are written as null (JSON has no NaN) and read back as NaN.
// Strings are escaped by ct_json_write_string (data/json.h).
// Not here: JSON syntax of its own, nested objects and arrays, pretty
// printing.
#ifndef CT_TRAIN_JSONL_H
#define CT_TRAIN_JSONL_H

#include "core/error.h"
#include "data/strings.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// ---- building one object ----

typedef struct ct_json_obj {
  ct_byte_buffer text;  // "{" and the fields so far, without the closing "}";
                        // text.failed: ct_json_obj_text returns NULL
} ct_json_obj;

void ct_json_obj_init(ct_json_obj *o);
void ct_json_obj_free(ct_json_obj *o);
void ct_json_obj_int(ct_json_obj *o, const char *key, int64_t v);
// Shortest text that reads back to the same double; null when not finite.
void ct_json_obj_num(ct_json_obj *o, const char *key, double v);
void ct_json_obj_str(ct_json_obj *o, const char *key, const char *v);
void ct_json_obj_bool(ct_json_obj *o, const char *key, bool v);
// The object so far as "{...}" (valid until the next call on o), NULL after
// an allocation failure. Also usable alone, e.g. for a last stdout line.
const char *ct_json_obj_text(ct_json_obj *o);

// ---- appending lines ----

typedef struct ct_jsonl {
  FILE *f;
  char path[4096];
  char warning[512];  // set by open when a torn last line was dropped; else ""
} ct_jsonl;

// Opens (creating if needed) for appending. Errors name the path.
ct_status ct_jsonl_open(ct_jsonl *j, const char *path);
// Appends the object as one line and flushes.
ct_status ct_jsonl_write(ct_jsonl *j, ct_json_obj *o);
ct_status ct_jsonl_close(ct_jsonl *j);

// ---- reading ----

typedef enum ct_json_kind {
  CT_JSON_NUM,
  CT_JSON_STR,
  CT_JSON_BOOL,
  CT_JSON_NULL
} ct_json_kind;

typedef struct ct_json_field {
  char *key;
  ct_json_kind kind;
  double num;  // CT_JSON_NUM; 1/0 for CT_JSON_BOOL; NaN for CT_JSON_NULL
  char *str;   // CT_JSON_STR (UTF-8, unescaped); else NULL
} ct_json_field;

typedef struct ct_json_record {
  ct_json_field *fields;
  int n;
  int line;  // 1-based line in the file
} ct_json_record;

typedef struct ct_jsonl_data {
  ct_json_record *records;
  int64_t n;
  char warning[512];  // set when a torn last line was skipped; else ""
} ct_jsonl_data;

// The most bytes a metrics.jsonl may hold to be read (a line per logged
// step: a million of them take about 100 MB).
#define CT_JSONL_MAX_BYTES ((size_t)1 << 30)

ct_status ct_jsonl_read(const char *path, ct_jsonl_data *out);
void ct_jsonl_data_free(ct_jsonl_data *d);

// Parses one flat object from text[0..len). On malformed text returns
// CT_ERR_FORMAT with the reason and column in `why` (not recorded as the last
// error); CT_ERR_NOMEM when memory runs out.
ct_status ct_json_parse_object(const char *text, size_t len,
                               ct_json_record *out, char *why, size_t why_size);
void ct_json_record_free(ct_json_record *r);

// The field named `key`, or NULL.
const ct_json_field *ct_json_record_get(const ct_json_record *r,
                                        const char *key);
// The numeric value of `key` (a number, bool or null); false when absent or a string.
bool ct_json_record_num(const ct_json_record *r, const char *key, double *out);
// The string value of `key`, or NULL when absent or not a string.
const char *ct_json_record_str(const ct_json_record *r, const char *key);

// Rewrites `path` atomically keeping only the lines whose numeric `key` is
// <= max (lines without it are kept). For resume: drop the metrics logged
// after the checkpoint being resumed. A missing file is not an error.
ct_status ct_jsonl_truncate_after(const char *path, const char *key,
                                  double max);

#endif
