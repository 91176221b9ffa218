// The params digest: FNV-1a over the parameters sorted by name, with the
// integers in little-endian so the digest is the same on every host.
#include "train/params_digest.h"
#include "train/little_endian.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fnv {
  uint64_t h;
} fnv;

static void fnv_bytes(fnv *f, const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = f->h;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  f->h = h;
}

static void fnv_le(fnv *f, uint64_t v, int bytes) {
  unsigned char b[8];
  ct_put_le(b, v, bytes);
  fnv_bytes(f, b, (size_t)bytes);
}

static int compare_param_names(const void *a, const void *b) {
  const ct_param *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

uint64_t ct_params_digest(const ct_params *p, char *hex) {
  fnv f = {0xcbf29ce484222325ull};
  int n = p ? p->n : 0;
  const ct_param **order = malloc((size_t)(n ? n : 1) * sizeof *order);
  if (order) {
    for (int i = 0; i < n; i++) order[i] = &p->items[i];
    qsort(order, (size_t)n, sizeof *order, compare_param_names);
  }
  for (int i = 0; i < n; i++) {
    // Without memory to sort, registry order still gives a digest, though
    // one that depends on registration order.
    const ct_param *it = order ? order[i] : &p->items[i];
    fnv_bytes(&f, it->name, strlen(it->name) + 1);
    fnv_le(&f, (uint64_t)it->tensor->ndim, 4);
    for (int d = 0; d < it->tensor->ndim; d++)
      fnv_le(&f, (uint64_t)it->tensor->shape[d], 8);
    fnv_bytes(&f, p->data + it->offset,
              (size_t)it->tensor->numel * sizeof(float));
  }
  free(order);
  if (hex) snprintf(hex, 17, "%016llx", (unsigned long long)f.h);
  return f.h;
}
