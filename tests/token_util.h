// Test helper: a token list as one string, for comparing against an expected
// spelling ("zwei</w>|hun|de</w>").
#ifndef CT_TESTS_TOKEN_UTIL_H
#define CT_TESTS_TOKEN_UTIL_H

#include <stdio.h>

#include "data/strings.h"

// The tokens of t joined with '|' into out (size bytes, NUL-terminated).
static inline void joined(const ct_string_list *t, char *out, size_t size) {
  size_t n = 0;
  out[0] = '\0';
  for (int64_t i = 0; i < t->count && n < size; i++)
    n += (size_t)snprintf(out + n, size - n, "%s%s", i ? "|" : "",
                          ct_string_list_get(t, i));
}

#endif
