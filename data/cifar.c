// CIFAR binary reader (see cifar.h): each file is read whole, checked to be
// a whole number of records with labels in range, then appended.
#include "data/cifar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { CIFAR_SIDE = 32, CIFAR_PIXELS = 3 * 32 * 32 };

ct_status ct_cifar_load_files(ct_image_dataset *d, ct_cifar_kind kind,
                              const char *const *paths, int count) {
  bool c100 = kind != CT_CIFAR10;
  int K = kind == CT_CIFAR10 ? 10 : kind == CT_CIFAR100_FINE ? 100 : 20;
  int64_t label_bytes = c100 ? 2 : 1, record = label_bytes + CIFAR_PIXELS;
  ct_status st = ct_image_dataset_alloc(d, 0, 3, CIFAR_SIDE, CIFAR_SIDE, K);
  if (st) return st;
  if (count < 1) st = ct_error(CT_ERR_ARG, "CIFAR: no files to read");
  for (int f = 0; f < count && !st; f++) {
    const char *path = paths[f];
    uint8_t *b;
    int64_t len;
    if ((st = ct_image_read_file(path, CT_CIFAR_FILE_MAX_BYTES, &b, &len)))
      break;
    int64_t n = len / record;
    if (len == 0 || len % record)
      st = ct_error(CT_ERR_FORMAT,
                    "%s: %lld bytes is not a whole number of "
                    "%lld-byte %s records (record %lld is cut short: "
                    "truncated, or the wrong CIFAR kind?)",
                    path, (long long)len, (long long)record,
                    c100 ? "CIFAR-100" : "CIFAR-10", (long long)n);
    for (int64_t i = 0; i < n && !st; i++) {
      const uint8_t *r = b + i * record;
      int coarse = c100 ? r[0] : 0, label = c100 ? r[1] : r[0];
      if (c100 && coarse >= 20)
        st = ct_error(CT_ERR_INDEX,
                      "%s: record %lld: coarse label %d "
                      "outside [0, 20)",
                      path, (long long)i, coarse);
      else if (label >= (c100 ? 100 : 10))
        st = ct_error(CT_ERR_INDEX,
                      "%s: record %lld: label %d outside "
                      "[0, %d)",
                      path, (long long)i, label, c100 ? 100 : 10);
    }
    if (!st) {
      uint8_t *px = realloc(d->pixels, (size_t)(d->N + n) * CIFAR_PIXELS);
      if (px) d->pixels = px;
      int32_t *lab = realloc(d->labels, (size_t)(d->N + n) * sizeof *lab);
      if (lab) d->labels = lab;
      if (!px || !lab)
        st = ct_error(CT_ERR_NOMEM, "%s: out of memory for %lld images", path,
                      (long long)(d->N + n));
    }
    for (int64_t i = 0; i < n && !st; i++) {
      const uint8_t *r = b + i * record;
      d->labels[d->N + i] =
          kind == CT_CIFAR100_COARSE ? r[0] : r[label_bytes - 1];
      memcpy(d->pixels + (d->N + i) * CIFAR_PIXELS, r + label_bytes,
             CIFAR_PIXELS);
    }
    if (!st) d->N += n;
    free(b);
  }
  if (st) ct_image_dataset_free(d);
  return st;
}

ct_status ct_cifar_load(ct_image_dataset *d, const char *dir,
                        ct_cifar_kind kind, bool train) {
  char buf[6][4096];
  const char *paths[6];
  int count = 0;
  ct_status st = CT_OK;
  if (kind == CT_CIFAR10 && train) {
    for (int k = 1; k <= 5 && !st; k++, count++)
      st = ct_path_format(buf[count], sizeof buf[0], "%s/data_batch_%d.bin",
                          dir, k);
  } else {
    st = ct_path_format(buf[count++], sizeof buf[0], "%s/%s", dir,
                        kind == CT_CIFAR10 ? "test_batch.bin"
                        : train            ? "train.bin"
                                           : "test.bin");
  }
  for (int k = 0; k < count; k++) paths[k] = buf[k];
  if (!st) st = ct_cifar_load_files(d, kind, paths, count);
  if (st) return st;
  char names[4096];
  st = ct_path_format(names, sizeof names, "%s/%s", dir,
                      kind == CT_CIFAR10         ? "batches.meta.txt"
                      : kind == CT_CIFAR100_FINE ? "fine_label_names.txt"
                                                 : "coarse_label_names.txt");
  if (st) {
    ct_image_dataset_free(d);
    return st;
  }
  struct stat s;
  if (stat(names, &s) == 0 && (st = ct_image_dataset_read_names(d, names)))
    ct_image_dataset_free(d);
  return st;
}
