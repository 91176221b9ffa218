// IDX reader (see idx.h): the header is read first and its sizes checked
// against what the file can hold, then the data is read straight into the
// dataset (gunzipped when needed) and nothing may follow it.
#include "data/idx.h"
#include "data/file_stream.h"

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

// Reads and checks the header of an IDX u8 file of `ndim` dimensions from
// `in`, returning its sizes in dims[] and the data's byte count in *count.
// The claim is checked against what the file can hold before anything is
// allocated: a plain file's exact size, or what its gzip bytes can inflate
// to.
static ct_status idx_header(ct_file_stream *in, int ndim, const char *what,
                            int64_t *dims, int64_t *count) {
  const char *path = in->path;
  uint8_t b[4 + 4 * 3];
  int64_t header = 4 + 4 * (int64_t)ndim;
  ct_status st = ct_file_stream_read_exact(in, b, 4);
  if (st) return st;
  uint32_t want = 0x00000800u | (uint32_t)ndim;
  uint32_t magic = be32(b);
  if (magic != want)
    return ct_error(CT_ERR_FORMAT,
                    "%s: magic number 0x%08x, expected "
                    "0x%08x for an IDX %s file (u8, %d dims)%s",
                    path, magic, want, what, ndim,
                    (magic == 0x00000801u || magic == 0x00000803u)
                        ? ": images and labels swapped?"
                        : "");
  st = ct_file_stream_read_exact(in, b + 4, (size_t)header - 4);
  if (st) return st;
  // The most data bytes the file can hold.
  int64_t room = in->file_size < 0 ? CT_IDX_MAX_BYTES
                 : in->gzip        ? ct_gzip_max_inflated(in->file_size)
                                   : in->file_size - header;
  if (room > CT_IDX_MAX_BYTES) room = CT_IDX_MAX_BYTES;
  int64_t n = 1;  // -1: more than the file could hold
  for (int k = 0; k < ndim; k++) {
    dims[k] = be32(b + 4 + 4 * k);
    // Sizes come from the file: compare with its room before multiplying.
    if (n >= 0 && dims[k] > 0 && n > room / dims[k])
      n = -1;
    else if (n >= 0)
      n *= dims[k];
  }
  if (n < 0 || n > room)
    return ct_error(CT_ERR_FORMAT,
                    "%s: truncated: the header's sizes need more bytes than "
                    "the file can hold (%lld bytes on disk%s; at most %lld)",
                    path, (long long)in->file_size, in->gzip ? ", gzip" : "",
                    (long long)room);
  if (!in->gzip && n < room)
    return ct_error(CT_ERR_FORMAT,
                    "%s: %lld bytes after the data the header "
                    "describes",
                    path, (long long)(room - n));
  *count = n;
  return CT_OK;
}

// Reads the `count` data bytes that follow the header into buf, then
// checks that nothing follows them.
static ct_status idx_data(ct_file_stream *in, uint8_t *buf, int64_t count) {
  ct_status st = ct_file_stream_read_exact(in, buf, (size_t)count);
  if (st == CT_ERR_FORMAT && strstr(ct_last_error(), ": truncated"))
    return ct_error(CT_ERR_FORMAT,
                    "%s: truncated: the header promises %lld "
                    "bytes of data, the file holds less",
                    in->path, (long long)count);
  return st ? st
            : ct_file_stream_expect_end(in, "the data the header describes");
}

ct_status ct_idx_load(ct_image_dataset *d, const char *images_path,
                      const char *labels_path, int num_classes) {
  *d = (ct_image_dataset){0};
  if (num_classes < 1 || num_classes > 256)
    return ct_error(CT_ERR_ARG,
                    "%s: num_classes %d outside 1..256 (u8 "
                    "labels)",
                    labels_path, num_classes);
  ct_file_stream img, lab;
  int64_t dims[3] = {0}, ldim[1] = {0}, img_bytes = 0, lab_bytes = 0;
  ct_status st = ct_file_stream_open(&img, images_path);
  if (st) return st;
  st = idx_header(&img, 3, "image", dims, &img_bytes);
  if (!st) st = ct_file_stream_open(&lab, labels_path);
  if (st) {
    ct_file_stream_close(&img);
    return st;
  }
  st = idx_header(&lab, 1, "label", ldim, &lab_bytes);
  if (!st && ldim[0] != dims[0])
    st = ct_error(CT_ERR_FORMAT, "%s: %lld labels for the %lld images of %s",
                  labels_path, (long long)ldim[0], (long long)dims[0],
                  images_path);
  if (!st &&
      (dims[1] < 1 || dims[2] < 1 || dims[1] > 1 << 16 || dims[2] > 1 << 16))
    st = ct_error(CT_ERR_FORMAT, "%s: image size %lldx%lld outside 1..65536",
                  images_path, (long long)dims[1], (long long)dims[2]);
  uint8_t *labels = NULL;
  if (!st)
    st = ct_image_dataset_alloc(d, dims[0], 1, (int)dims[1], (int)dims[2],
                                num_classes);
  if (!st) st = idx_data(&img, d->pixels, img_bytes);
  if (!st && !(labels = malloc(lab_bytes ? (size_t)lab_bytes : 1)))
    st = ct_error(CT_ERR_NOMEM, "%s: out of memory", labels_path);
  if (!st) st = idx_data(&lab, labels, lab_bytes);
  if (!st) {
    for (int64_t i = 0; i < d->N; i++) d->labels[i] = labels[i];
    st = ct_image_dataset_check_labels(d, labels_path);
  }
  free(labels);
  ct_file_stream_close(&img);
  ct_file_stream_close(&lab);
  if (st) ct_image_dataset_free(d);
  return st;
}

// DIR/NAME.gz when it exists, else DIR/NAME.
static ct_status pick_path(char *out, size_t size, const char *dir,
                           const char *name) {
  struct stat s;
  ct_status st = ct_path_format(out, size, "%s/%s.gz", dir, name);
  if (!st && stat(out, &s) != 0)
    st = ct_path_format(out, size, "%s/%s", dir, name);
  return st;
}

ct_status ct_idx_load_dir(ct_image_dataset *d, const char *dir, bool train,
                          int num_classes) {
  char images[4096], labels[4096];
  const char *split = train ? "train" : "t10k";
  char name[64];
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
  ct_status st = pick_path(images, sizeof images, dir, name);
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
  if (!st) st = pick_path(labels, sizeof labels, dir, name);
  return st ? st : ct_idx_load(d, images, labels, num_classes);
}
