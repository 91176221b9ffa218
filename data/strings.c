// String lists, the string hash table and byte buffers (see strings.h).
#include "data/strings.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ct_status ct_grow_array(void **buf, int64_t *cap, int64_t need,
                        size_t elem_size, const char *what) {
  if (need <= *cap) return CT_OK;
  int64_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void *p = realloc(*buf, (size_t)n * elem_size);
  if (!p)
    return ct_error(CT_ERR_NOMEM, "%s: out of memory growing to %lld items",
                    what, (long long)n);
  *buf = p;
  *cap = n;
  return CT_OK;
}

bool ct_byte_buffer_reserve(ct_byte_buffer *b, size_t extra) {
  if (b->failed) return false;
  if (extra >= SIZE_MAX / 2 - b->len) {  // no size doubles past SIZE_MAX
    b->failed = true;
    return false;
  }
  if (b->len + extra < b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap <= b->len + extra) cap *= 2;
  char *data = realloc(b->data, cap);
  if (!data) {
    b->failed = true;
    return false;
  }
  b->data = data;
  b->cap = cap;
  return true;
}

void ct_byte_buffer_append(ct_byte_buffer *b, const void *bytes, size_t n) {
  if (n == 0 || !ct_byte_buffer_reserve(b, n)) return;
  memcpy(b->data + b->len, bytes, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void ct_byte_buffer_printf(ct_byte_buffer *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) b->failed = true;
  if (n < 0 || !ct_byte_buffer_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void ct_byte_buffer_free(ct_byte_buffer *b) {
  free(b->data);
  *b = (ct_byte_buffer){0};
}

ct_status ct_string_list_push(ct_string_list *list, const char *s, size_t len) {
  ct_status st =
      ct_grow_array((void **)&list->chars, &list->chars_cap,
                    list->chars_len + (int64_t)len + 1, 1, "string list");
  if (st) return st;
  st = ct_grow_array((void **)&list->offsets, &list->offsets_cap,
                     list->count + 1, sizeof *list->offsets, "string list");
  if (st) return st;
  if (len) memcpy(list->chars + list->chars_len, s, len);
  list->chars[list->chars_len + (int64_t)len] = '\0';
  list->offsets[list->count++] = list->chars_len;
  list->chars_len += (int64_t)len + 1;
  return CT_OK;
}

void ct_string_list_clear(ct_string_list *list) {
  list->count = 0;
  list->chars_len = 0;
}

void ct_string_list_free(ct_string_list *list) {
  free(list->chars);
  free(list->offsets);
  *list = (ct_string_list){0};
}

// FNV-1a, 64 bit.
static uint64_t hash_bytes(const char *s, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static int64_t probe(const ct_string_table *t, const char *s, size_t len,
                     uint64_t h) {
  const int64_t mask = t->slot_count - 1;
  for (int64_t k = (int64_t)(h & (uint64_t)mask);; k = (k + 1) & mask) {
    int32_t i = t->slots[k];
    if (i < 0) return k;
    if (ct_string_list_len(&t->strings, i) == (int64_t)len &&
        memcmp(ct_string_list_get(&t->strings, i), s, len) == 0)
      return k;
  }
}

int64_t ct_string_table_find(const ct_string_table *table, const char *s,
                             size_t len) {
  if (!table->slot_count) return -1;
  return table->slots[probe(table, s, len, hash_bytes(s, len))];
}

// Keeps the load factor at most 1/2.
static ct_status table_reserve(ct_string_table *t, int64_t count) {
  if (2 * count <= t->slot_count) return CT_OK;
  int64_t n = t->slot_count ? t->slot_count : 64;
  while (2 * count > n) n *= 2;
  if (n > ((int64_t)1 << 32))
    return ct_error(CT_ERR_NOMEM, "string table: too many strings (%lld)",
                    (long long)count);
  int32_t *slots = malloc((size_t)n * sizeof *slots);
  if (!slots)
    return ct_error(CT_ERR_NOMEM, "string table: out of memory (%lld slots)",
                    (long long)n);
  for (int64_t k = 0; k < n; k++) slots[k] = -1;
  free(t->slots);
  t->slots = slots;
  t->slot_count = n;
  for (int64_t i = 0; i < t->strings.count; i++) {
    const char *s = ct_string_list_get(&t->strings, i);
    size_t len = (size_t)ct_string_list_len(&t->strings, i);
    t->slots[probe(t, s, len, hash_bytes(s, len))] = (int32_t)i;
  }
  return CT_OK;
}

int64_t ct_string_table_add(ct_string_table *table, const char *s, size_t len,
                            int *added) {
  if (added) *added = 0;
  if (table_reserve(table, table->strings.count + 1)) return -1;
  int64_t k = probe(table, s, len, hash_bytes(s, len));
  if (table->slots[k] >= 0) return table->slots[k];
  if (table->strings.count >= INT32_MAX) {
    ct_error(CT_ERR_NOMEM, "string table: more than %d strings", INT32_MAX);
    return -1;
  }
  if (ct_string_list_push(&table->strings, s, len)) return -1;
  table->slots[k] = (int32_t)(table->strings.count - 1);
  if (added) *added = 1;
  return table->slots[k];
}

void ct_string_table_free(ct_string_table *table) {
  ct_string_list_free(&table->strings);
  free(table->slots);
  *table = (ct_string_table){0};
}

ct_status ct_path_format(char *out, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, size, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < size) return CT_OK;
  return ct_error(CT_ERR_ARG, "path too long (%d bytes, at most %zu): %.60s...",
                  n, size - 1, out);
}

ct_status ct_make_dirs(const char *path) {
  char buf[4096];
  if (!*path) return ct_error(CT_ERR_ARG, "cannot create a folder: empty path");
  if (strlen(path) >= sizeof buf)
    return ct_error(CT_ERR_ARG, "%s: path too long", path);
  strcpy(buf, path);
  for (char *p = buf + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char keep = *p;
      *p = '\0';
      if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return ct_error(CT_ERR_IO, "%s: cannot create folder: %s", buf,
                        strerror(errno));
      *p = keep;
      if (keep == '\0') break;
    }
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return ct_error(CT_ERR_IO, "%s: exists and is not a folder", path);
  return CT_OK;
}

ct_status ct_refuse_existing(const char *path, bool overwrite) {
  if (!overwrite && access(path, F_OK) == 0)
    return ct_error(CT_ERR_IO,
                    "%s already exists; not overwriting it (choose "
                    "another folder or pass --force)",
                    path);
  return CT_OK;
}
