// Fuzz target: IDX image and label files, plain or gzip (data/idx.h). The
// input's first 4 bytes (little-endian) are the length of the images file,
// which follows; the labels file is the rest (so both, and their
// agreement, are fuzzed); the labels are read for 10 classes.
#include "data/idx.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  size_t rest = size - 4, cut = (size_t)data[0] | (size_t)data[1] << 8 |
                                (size_t)data[2] << 16 | (size_t)data[3] << 24;
  if (cut > rest) cut = rest;
  const char *images = fuzz_write("images.idx", data + 4, cut);
  const char *labels = fuzz_write("labels.idx", data + 4 + cut, rest - cut);
  ct_image_dataset d;
  if (ct_idx_load(&d, images, labels, 10) == CT_OK) ct_image_dataset_free(&d);
  return 0;
}
