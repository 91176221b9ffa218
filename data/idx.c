// IDX reader (see idx.h): the whole file is read (gunzipped when needed),
// then the header is checked against the byte count before any copy.
#include "data/idx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const ct_fashion_mnist_class_names[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

// Checks the header of an IDX u8 file of `ndim` dimensions and returns its
// sizes in dims[] and the offset of the data in *data_at.
static ct_status idx_header(const char *path, const uint8_t *b, int64_t len,
                            int ndim, const char *what, int64_t *dims,
                            int64_t *data_at) {
  uint32_t want = 0x00000800u | (uint32_t)ndim;
  if (len < 4)
    return ct_error(CT_ERR_FORMAT,
                    "%s: truncated: %lld bytes, shorter than "
                    "the IDX magic number",
                    path, (long long)len);
  uint32_t magic = be32(b);
  if (magic != want)
    return ct_error(CT_ERR_FORMAT,
                    "%s: magic number 0x%08x, expected "
                    "0x%08x for an IDX %s file (u8, %d dims)%s",
                    path, magic, want, what, ndim,
                    (magic == 0x00000801u || magic == 0x00000803u)
                        ? ": images and labels swapped?"
                        : "");
  int64_t header = 4 + 4 * (int64_t)ndim;
  if (len < header)
    return ct_error(CT_ERR_FORMAT,
                    "%s: truncated header: %lld bytes, need "
                    "%lld",
                    path, (long long)len, (long long)header);
  int64_t count = 1;  // -1: more than the file could hold
  for (int k = 0; k < ndim; k++) {
    dims[k] = be32(b + 4 + 4 * k);
    // Sizes come from the file: compare with its length before multiplying.
    if (count >= 0 && dims[k] > 0 && count > len / dims[k])
      count = -1;
    else if (count >= 0)
      count *= dims[k];
  }
  if (count < 0)
    return ct_error(CT_ERR_FORMAT,
                    "%s: truncated: the header's sizes need "
                    "more bytes than the file's %lld",
                    path, (long long)len);
  if (header + count > len)
    return ct_error(CT_ERR_FORMAT,
                    "%s: truncated: the header promises %lld "
                    "bytes of data, the file holds %lld",
                    path, (long long)count, (long long)(len - header));
  if (header + count < len)
    return ct_error(CT_ERR_FORMAT,
                    "%s: %lld bytes after the data the header "
                    "describes",
                    path, (long long)(len - header - count));
  *data_at = header;
  return CT_OK;
}

ct_status ct_idx_load(ct_image_dataset *d, const char *images_path,
                      const char *labels_path, int num_classes) {
  *d = (ct_image_dataset){0};
  if (num_classes < 1 || num_classes > 256)
    return ct_error(CT_ERR_ARG,
                    "%s: num_classes %d outside 1..256 (u8 "
                    "labels)",
                    labels_path, num_classes);
  uint8_t *img = NULL, *lab = NULL;
  int64_t img_len = 0, lab_len = 0, dims[3] = {0}, ldim[1] = {0}, img_at = 0,
          lab_at = 0;
  ct_status st = ct_image_read_file(images_path, &img, &img_len);
  if (!st)
    st = idx_header(images_path, img, img_len, 3, "image", dims, &img_at);
  if (!st) st = ct_image_read_file(labels_path, &lab, &lab_len);
  if (!st)
    st = idx_header(labels_path, lab, lab_len, 1, "label", ldim, &lab_at);
  if (!st && ldim[0] != dims[0])
    st = ct_error(CT_ERR_FORMAT, "%s: %lld labels for the %lld images of %s",
                  labels_path, (long long)ldim[0], (long long)dims[0],
                  images_path);
  if (!st &&
      (dims[1] < 1 || dims[2] < 1 || dims[1] > 1 << 16 || dims[2] > 1 << 16))
    st = ct_error(CT_ERR_FORMAT, "%s: image size %lldx%lld outside 1..65536",
                  images_path, (long long)dims[1], (long long)dims[2]);
  if (!st)
    st = ct_image_dataset_alloc(d, dims[0], 1, (int)dims[1], (int)dims[2],
                                num_classes);
  if (!st) {
    memcpy(d->pixels, img + img_at, (size_t)(dims[0] * dims[1] * dims[2]));
    for (int64_t i = 0; i < d->N; i++) d->labels[i] = lab[lab_at + i];
    st = ct_image_dataset_check_labels(d, labels_path);
  }
  free(img);
  free(lab);
  if (st) ct_image_dataset_free(d);
  return st;
}

// DIR/NAME.gz when it exists, else DIR/NAME.
static void pick_path(char *out, size_t size, const char *dir,
                      const char *name) {
  struct stat s;
  snprintf(out, size, "%s/%s.gz", dir, name);
  if (stat(out, &s) != 0) snprintf(out, size, "%s/%s", dir, name);
}

ct_status ct_idx_load_dir(ct_image_dataset *d, const char *dir, bool train,
                          int num_classes) {
  char images[4096], labels[4096];
  const char *split = train ? "train" : "t10k";
  char name[64];
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
  pick_path(images, sizeof images, dir, name);
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
  pick_path(labels, sizeof labels, dir, name);
  return ct_idx_load(d, images, labels, num_classes);
}
