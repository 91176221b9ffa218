// Test helpers for token lists: one string for comparing against an expected
// spelling ("zwei</w>|hun|de</w>"), and the array of pointers that
// ct_text_tokenizer_detokenize takes.
#ifndef CT_TESTS_TOKEN_UTIL_H
#define CT_TESTS_TOKEN_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "data/strings.h"

// The tokens of t joined with '|' into out (size bytes, NUL-terminated).
static inline void joined(const ct_string_list *t, char *out, size_t size) {
  size_t n = 0;
  out[0] = '\0';
  for (int64_t i = 0; i < t->count && n < size; i++)
    n += (size_t)snprintf(out + n, size - n, "%s%s", i ? "|" : "",
                          ct_string_list_get(t, i));
}

// The tokens of t as pointers into it (malloc'd, t->count + 1 entries; the
// caller frees the array), or NULL when out of memory.
static inline const char **token_ptrs(const ct_string_list *t) {
  const char **p = malloc((size_t)(t->count + 1) * sizeof *p);
  for (int64_t i = 0; p && i < t->count; i++) p[i] = ct_string_list_get(t, i);
  return p;
}

#endif
