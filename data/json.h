// The JSON reader of ctrain (RFC 8259): it builds a read-only tree. The data
// layer reads COCO annotation files with it (data/detection.h); the program
// reads metrics.jsonl lines (train/jsonl.h) and safetensors headers
// (train/safetensors.h) through it. Its inverse for strings,
// ct_json_write_string, is the one JSON string escaper of those writers.
//
//   ct_json_doc doc;
//   if (ct_json_doc_read(&doc, "train.json")) ...ct_last_error()...
//   const ct_json_value *images = ct_json_member(&doc, ct_json_root(&doc),
//                                                "images");
//   for (const ct_json_value *v = ct_json_first(&doc, images); v;
//        v = ct_json_next(&doc, v))
//     ... v->type, v->number, ct_json_str(&doc, v), v->line, v->column ...
//   ct_json_doc_free(&doc);
//
// Strict: one value with optional whitespace around it; no comments, no
// trailing commas, no single quotes, no NaN/Infinity, no leading zeros or
// '+' signs, no raw control characters in strings. Escapes (\uXXXX with
// surrogate pairs included) become UTF-8 (data/utf8.h); \u0000 and lone
// surrogates are refused (strings are handed out NUL-terminated); other
// bytes pass through unchecked (UTF-8 is not validated). Nesting deeper than
// CT_JSON_MAX_DEPTH is refused, so hostile input cannot exhaust the stack.
// An error says "name:line:column: what was expected" (columns count bytes
// from 1). CT_JSON_PYTHON relaxes the first rules for files that Python's
// json module may have written (see below).
//
// Every value records the line and column where it starts, so a caller
// checking the tree's meaning can point at the place too.
//
// What this file does not do: writing JSON documents (train/jsonl.h builds
// objects, each file format lays out its own), streaming, or numbers beyond
// double precision (they are parsed by strtod; `integer` only says how a
// number was written).
#ifndef CT_DATA_JSON_H
#define CT_DATA_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/strings.h"

enum { CT_JSON_MAX_DEPTH = 256 };

typedef enum ct_json_value_type {
  CT_JVAL_NULL,
  CT_JVAL_BOOL,
  CT_JVAL_NUMBER,
  CT_JVAL_STRING,
  CT_JVAL_ARRAY,
  CT_JVAL_OBJECT
} ct_json_value_type;

typedef struct ct_json_value {
  ct_json_value_type type;
  int line, column;  // where the value starts (1-based)
  bool integer;      // CT_JVAL_NUMBER written without fraction or exponent
  double number;     // CT_JVAL_NUMBER; 1/0 for CT_JVAL_BOOL
  int64_t str;       // CT_JVAL_STRING: index in doc->strings; else -1
  int64_t key;       // an object member's key: index in doc->strings; else -1
  int64_t first;     // arrays, objects: index of the first child; else -1
  int64_t next;      // index of the next sibling; -1 for the last
  int64_t count;     // arrays, objects: number of children
} ct_json_value;

typedef struct ct_json_doc {
  ct_json_value *values;  // values[0] is the root
  int64_t count, cap;
  ct_string_list strings;  // keys and string values, unescaped
} ct_json_doc;

// Parses text[0..len) (`name`, e.g. the file, goes into error messages).
// CT_ERR_FORMAT "name:line:column: ..." on malformed input, CT_ERR_NOMEM;
// *doc is empty (and may be freed) after an error.
ct_status ct_json_doc_parse(ct_json_doc *doc, const char *text, size_t len,
                            const char *name);

// Flags for ct_json_doc_parse_quiet.
enum {
  // Also accept what Python's json module writes and reads beyond RFC 8259:
  // NaN, Infinity and -Infinity; numbers beyond double range (as +-Infinity);
  // \u0000 (a string then ends there for C callers); lone UTF-16 surrogates,
  // kept as their 3-byte WTF-8 form (ct_wtf8_encode), which is not valid
  // UTF-8. For metrics.jsonl, which Python scripts may write too.
  CT_JSON_PYTHON = 1u << 0,
};

// Where and why a parse failed.
typedef struct ct_json_error {
  int line, column;  // 1-based; columns count bytes
  char what[200];    // e.g. "expected ':' after key 'a'"
} ct_json_error;

// ct_json_doc_parse with `flags`, reporting a malformed text (CT_ERR_FORMAT)
// only in *err, not as the last error: for callers that word the message
// themselves or expect failures (a torn last line). CT_ERR_NOMEM is recorded
// as usual.
ct_status ct_json_doc_parse_quiet(ct_json_doc *doc, const char *text,
                                  size_t len, unsigned flags,
                                  ct_json_error *err);
// Reads and parses a file (gzip or plain, through ct_image_read_file) of
// at most CT_JSON_FILE_MAX_BYTES (COCO's largest annotation file, the 2017
// training instances, is 448 MB).
#define CT_JSON_FILE_MAX_BYTES ((int64_t)1 << 30)
ct_status ct_json_doc_read(ct_json_doc *doc, const char *path);
void ct_json_doc_free(ct_json_doc *doc);

static inline const ct_json_value *ct_json_root(const ct_json_doc *doc) {
  return doc->count ? &doc->values[0] : NULL;
}
// The first child of an array or object (NULL when empty or not one).
const ct_json_value *ct_json_first(const ct_json_doc *doc,
                                   const ct_json_value *v);
// The next sibling (NULL after the last).
const ct_json_value *ct_json_next(const ct_json_doc *doc,
                                  const ct_json_value *v);
// The first member of object `obj` named `key`; NULL when absent or obj is
// not an object.
const ct_json_value *ct_json_member(const ct_json_doc *doc,
                                    const ct_json_value *obj, const char *key);
// A string value's text, NULL when v is not a string.
const char *ct_json_str(const ct_json_doc *doc, const ct_json_value *v);
// A member's key, NULL when v is not an object member.
const char *ct_json_key(const ct_json_doc *doc, const ct_json_value *v);

// Receives the bytes of a JSON text being written.
typedef void (*ct_json_put_fn)(void *sink, const void *bytes, size_t n);
// Writes s as a JSON string literal through put: quotes, backslash and
// control characters escaped (\" \\ \b \f \n \r \t, the others as \u00XX),
// valid UTF-8 as it is; the escapes serde_json writes. The reader reads it
// back to s. A byte of s that is not valid UTF-8 is written as \ufffd, so
// the output is always valid JSON (and then reads back with U+FFFD there).
void ct_json_write_string(const char *s, ct_json_put_fn put, void *sink);
// A ct_json_put_fn appending to the ct_byte_buffer `sink` (data/strings.h).
void ct_json_put_buffer(void *sink, const void *bytes, size_t n);

#endif
