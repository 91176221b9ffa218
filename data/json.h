// A strict JSON reader (RFC 8259) that builds a read-only tree, for the
// annotation files of the data layer (COCO detection, data/detection.h).
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
// surrogate pairs included) become UTF-8; \u0000 is refused (strings are
// handed out NUL-terminated); other bytes pass through unchecked (UTF-8
// is not validated). Nesting deeper than CT_JSON_MAX_DEPTH is
// refused, so hostile input cannot exhaust the stack. An error says
// "name:line:column: what was expected" (columns count bytes from 1).
//
// Every value records the line and column where it starts, so a caller
// checking the tree's meaning can point at the place too.
//
// What this file does not do: writing JSON (train/jsonl.h writes metrics),
// streaming, or numbers beyond double precision (they are parsed by strtod).
#ifndef CT_DATA_JSON_H
#define CT_DATA_JSON_H

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
  double number;     // CT_JVAL_NUMBER; 1/0 for CT_JVAL_BOOL
  int64_t str;       // CT_JVAL_STRING: index in doc->strings; else -1
  int64_t key;       // an object member's key: index in doc->strings; else -1
  int64_t first;     // arrays, objects: index of the first child; else -1
  int64_t next;      // index of the next sibling; -1 for the last
  int64_t count;     // arrays, objects: number of children
} ct_json_value;

typedef struct ct_json_doc {
  ct_json_value *values;   // values[0] is the root
  int64_t count, cap;
  ct_string_list strings;  // keys and string values, unescaped
} ct_json_doc;

// Parses text[0..len) (`name`, e.g. the file, goes into error messages).
// CT_ERR_FORMAT "name:line:column: ..." on malformed input, CT_ERR_NOMEM;
// *doc is empty (and may be freed) after an error.
ct_status ct_json_doc_parse(ct_json_doc *doc, const char *text, size_t len,
                            const char *name);
// Reads and parses a file (gzip or plain, through ct_image_read_file).
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

#endif
