// Fuzz target: CIFAR record files, plain or gzip, and class names files
// (data/cifar.h, ct_image_dataset_read_names). The input's first byte
// picks the kind (CIFAR-10, CIFAR-100 fine or coarse); the rest is one
// record file, and also a names file for the dataset read.
#include "data/cifar.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const ct_cifar_kind kinds[3] = {CT_CIFAR10, CT_CIFAR100_FINE,
                                  CT_CIFAR100_COARSE};
  const char *path = fuzz_write("batch.bin", data + 1, size - 1);
  ct_image_dataset d;
  if (ct_cifar_load_files(&d, kinds[data[0] % 3], &path, 1) == CT_OK) {
    ct_image_dataset_read_names(&d, path);
    ct_image_dataset_free(&d);
  }
  // A names file for a dataset of 10 classes.
  if (ct_image_dataset_alloc(&d, 1, 1, 1, 1, 10) == CT_OK) {
    ct_image_dataset_read_names(&d, path);
    ct_image_dataset_free(&d);
  }
  return 0;
}
