// Compact string storage for the text side of the data layer.
//
// ct_string_list keeps many short strings (sentences, tokens) in one growing
// char buffer, each NUL-terminated, plus one offset per string: two
// allocations for a whole corpus instead of one per line.
// ct_string_table adds an open-addressing hash index (FNV-1a) over such a
// list, mapping a string to its insertion index; vocabularies, token counters
// and the toy generator's duplicate check use it.
// ct_byte_buffer is one growing run of bytes (or text) built by appends that
// never fail visibly: the first allocation failure sticks, so a run of
// appends needs one check at the end (checkpoint records, metrics lines and
// the resolved config are built in one).
//
// What this file does not do: Unicode handling (strings are bytes here) or
// removal of single strings.
#ifndef CT_DATA_STRINGS_H
#define CT_DATA_STRINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

// Zero-initialize ({0}) before the first push.
typedef struct ct_string_list {
  char *chars;       // all strings, each followed by '\0'
  int64_t *offsets;  // offsets[i]: start of string i in chars
  int64_t count;     // number of strings
  int64_t chars_len, chars_cap, offsets_cap;
} ct_string_list;

// Appends the `len` bytes at s (which need not be NUL-terminated).
// CT_ERR_NOMEM when memory runs out (the list is unchanged then).
ct_status ct_string_list_push(ct_string_list *list, const char *s, size_t len);
// String i (0 <= i < count) and its length in bytes.
static inline const char *ct_string_list_get(const ct_string_list *list,
                                             int64_t i) {
  return list->chars + list->offsets[i];
}
static inline int64_t ct_string_list_len(const ct_string_list *list,
                                         int64_t i) {
  int64_t end = i + 1 < list->count ? list->offsets[i + 1] : list->chars_len;
  return end - list->offsets[i] - 1;
}
// Forgets the strings but keeps the memory for reuse.
void ct_string_list_clear(ct_string_list *list);
// Frees the memory and zeroes the list.
void ct_string_list_free(ct_string_list *list);

// Zero-initialize ({0}) before the first add.
typedef struct ct_string_table {
  ct_string_list strings;  // index -> string, in insertion order
  int32_t *slots;          // hash slots: an index, or -1 when empty
  int64_t slot_count;      // a power of two (0 before the first add)
} ct_string_table;

// The index of the string (s, len), or -1 when absent.
int64_t ct_string_table_find(const ct_string_table *table, const char *s,
                             size_t len);
// The index of (s, len), adding it first when absent; -1 with CT_ERR_NOMEM
// recorded when memory runs out. *added (may be NULL) says whether it was new.
int64_t ct_string_table_add(ct_string_table *table, const char *s, size_t len,
                            int *added);
static inline int64_t ct_string_table_count(const ct_string_table *table) {
  return table->strings.count;
}
void ct_string_table_free(ct_string_table *table);

// Zero-initialize ({0}) before the first append.
typedef struct ct_byte_buffer {
  char *data;  // NULL until the first append; then data[len] is '\0' (not
               // counted in len), so a buffer of text is a C string
  size_t len, cap;
  bool failed;  // an allocation failed: later appends do nothing
} ct_byte_buffer;

// Makes room for `extra` more bytes after len, besides the terminator
// (cap > len + extra). False, with `failed` set, when memory runs out (or
// had run out before).
bool ct_byte_buffer_reserve(ct_byte_buffer *b, size_t extra);
// Appends the n bytes at `bytes` (nothing when n is 0).
void ct_byte_buffer_append(ct_byte_buffer *b, const void *bytes, size_t n);
// Appends printf-formatted text.
void ct_byte_buffer_printf(ct_byte_buffer *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// Frees the memory and zeroes the buffer.
void ct_byte_buffer_free(ct_byte_buffer *b);

// Grows *buf (holding *cap elements of elem_size bytes) to at least `need`
// elements by doubling. CT_ERR_NOMEM (with `what` in the message) on failure.
ct_status ct_grow_array(void **buf, int64_t *cap, int64_t need,
                        size_t elem_size, const char *what);

// printf into a fixed path buffer, checked: CT_ERR_ARG "path too long
// (N bytes, at most size - 1): BEGINNING..." when the result does not fit,
// instead of a path cut short (or copied past the buffer's end).
ct_status ct_path_format(char *out, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// mkdir -p: creates `path` and its missing parents. CT_ERR_IO naming the
// folder that cannot be created, or when path exists and is not a folder.
ct_status ct_make_dirs(const char *path);

// CT_ERR_IO "PATH already exists; not overwriting it ..." when `path` exists
// and overwrite is false (the generators' --force); CT_OK otherwise.
ct_status ct_refuse_existing(const char *path, bool overwrite);

#endif
