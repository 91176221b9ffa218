// A generated image classification set (no files needed): gray S x S
// images of one shape each, the class being the shape. Positions, sizes,
// brightness and background noise vary, so a model has to learn the shape
// rather than a pixel. Generated from a seed (Philox), the same on every
// machine.
//
//   class 0 "hbar"   a horizontal bar      class 3 "frame"   a hollow square
//   class 1 "vbar"   a vertical bar        class 4 "plus"    a cross
//   class 2 "square" a filled square       class 5 "diag"    a diagonal line
#ifndef CT_DATA_TOY_IMAGES_H
#define CT_DATA_TOY_IMAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "data/image.h"

enum { CT_TOY_IMAGE_MAX_CLASSES = 6 };

// Fills *d with n images of size x size (8..256) over `classes` classes
// (2..6), labels cycling through the classes in a seeded shuffle. `split`
// (0 train, 1 val, 2 test) picks an independent stream, so splits differ.
ct_status ct_toy_images_generate(ct_image_dataset *d, int64_t n, int size,
                                 int classes, uint64_t seed, int split);

typedef enum ct_toy_image_format {
  CT_TOY_IMAGES_PNG,      // DIR/{train,test}/<class>/NNNNNN.png
  CT_TOY_IMAGES_CIFAR10,  // DIR/data_batch_{1..5}.bin, test_batch.bin
                          // (32x32 RGB: gray replicated; CIFAR-10 has 10
                          // classes, so with fewer the unused labels stay
                          // empty and batches.meta.txt is not written)
  CT_TOY_IMAGES_IDX,      // DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte
} ct_toy_image_format;

// Parses "png", "cifar10" or "idx" (CT_ERR_ARG listing them otherwise).
ct_status ct_toy_image_format_parse(const char *name, ct_toy_image_format *out);

// Writes a generated training and test set to `dir` in one of the formats
// users' own data comes in, so every loader can be tried without
// downloads. CIFAR-10 needs size 32. Existing files are not overwritten
// unless `overwrite`; the folder is created.
ct_status ct_toy_images_write(const char *dir, ct_toy_image_format format,
                              const ct_image_dataset *train,
                              const ct_image_dataset *test, bool overwrite);

#endif
