// UTF-8 (see utf8.h).
#include "data/utf8.h"

#include <stdbool.h>
#include <stdio.h>

int32_t ct_utf8_decode(const char *str, size_t len, size_t *pos) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = *pos;
  unsigned c = s[i];
  if (c < 0x80) {
    *pos = i + 1;
    return (int32_t)c;
  }
  int n;  // continuation bytes
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 1;
    cp = c & 0x1F;
    min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 2;
    cp = c & 0x0F;
    min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 3;
    cp = c & 0x07;
    min = 0x10000;
  } else {
    *pos = i + 1;
    return -1;
  }
  if (len - i - 1 < (size_t)n) {
    *pos = i + 1;
    return -1;
  }  // cut short
  for (int k = 1; k <= n; k++) {
    unsigned d = s[i + (size_t)k];
    if ((d & 0xC0) != 0x80) {
      *pos = i + 1;
      return -1;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return -1;
  }
  *pos = i + 1 + (size_t)n;
  return (int32_t)cp;
}

int ct_utf8_encode(int32_t cp, char out[4]) {
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return ct_wtf8_encode(cp, out);
}

int ct_wtf8_encode(int32_t cp, char out[4]) {
  if (cp < 0 || cp > 0x10FFFF) return 0;
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

size_t ct_utf8_find_invalid(const char *s, size_t len) {
  size_t pos = 0;
  while (pos < len) {
    size_t at = pos;
    if (ct_utf8_decode(s, len, &pos) < 0) return at;
  }
  return len;
}

static bool is_control(int32_t cp) {
  return (cp < 0x20 && cp != '\t') || (cp >= 0x7F && cp <= 0x9F);
}

size_t ct_utf8_find_unsafe(const char *s, size_t len) {
  size_t pos = 0;
  while (pos < len) {
    size_t at = pos;
    int32_t cp = ct_utf8_decode(s, len, &pos);
    if (cp < 0 || is_control(cp)) return at;
  }
  return len;
}

const char *ct_utf8_unsafe_what(const char *s, size_t len, size_t at, char *buf,
                                size_t size) {
  size_t pos = at;
  int32_t cp = at < len ? ct_utf8_decode(s, len, &pos) : -1;
  if (cp < 0)
    snprintf(buf, size, "invalid UTF-8 byte 0x%02x",
             at < len ? (unsigned)(unsigned char)s[at] : 0u);
  else if (cp == 0)
    snprintf(buf, size, "NUL byte");
  else
    snprintf(buf, size, "control character U+%04X", (unsigned)cp);
  return buf;
}
