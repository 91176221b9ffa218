// IDX files, the MNIST / Fashion-MNIST format, gzipped or not.
//
// Layout (all header integers big-endian): a magic number 0x0000TTDD, where
// TT is the element type (0x08: u8, the only one read here) and DD the
// number of dimensions; then DD u32 sizes; then the elements, row-major.
// Images: 0x00000803, u8 (N, H, W). Labels: 0x00000801, u8 (N).
//
// Bounds: the header's sizes are checked against what the file can hold
// before anything is allocated (a plain file's size exactly; a gzip file's
// bytes times 1032, deflate's largest ratio), and a file holds at most
// CT_IDX_MAX_BYTES of data; a gzip file that inflates past its header's
// claim is an error at the first extra byte.
//
// What this file does not do: element types other than u8, or writing.
#ifndef CT_DATA_IDX_H
#define CT_DATA_IDX_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/image.h"

#define CT_IDX_MAX_BYTES ((int64_t)1 << 32)

// Reads an image file and its label file into *d (C = 1, K = num_classes,
// names "0".."K-1"). Errors name the file: CT_ERR_IO (cannot open or read),
// CT_ERR_FORMAT (corrupt gzip data, wrong magic, truncated, trailing bytes,
// image and label counts differ), CT_ERR_INDEX (a label >= num_classes,
// naming its index).
ct_status ct_idx_load(ct_image_dataset *d, const char *images_path,
                      const char *labels_path, int num_classes);

// The usual folder layout: DIR/train-images-idx3-ubyte, train-labels-idx1-
// ubyte (train) or t10k-... (test), each with ".gz" or without (the ".gz"
// name is tried first).
ct_status ct_idx_load_dir(ct_image_dataset *d, const char *dir, bool train,
                          int num_classes);

// Fashion-MNIST's class names (label order), for ct_image_dataset_set_names.
extern const char *const ct_fashion_mnist_class_names[10];

#endif
