// A generated image classification set (no files needed): gray S x S
// images of one shape each, the class being the shape. Positions, sizes,
// brightness and background noise vary, so a model has to learn the shape
// rather than a pixel. Generated from a seed (Philox), the same on every
// machine.
//
//   class 0 "hbar"   a horizontal bar      class 3 "frame"   a hollow square
//   class 1 "vbar"   a vertical bar        class 4 "plus"    a cross
//   class 2 "square" a filled square       class 5 "diag"    a diagonal line
//
// The textured variant (ct_toy_images_textured) is a harder RGB set of ten
// classes, the six above and
//
//   class 6 "cross"  a diagonal cross (x)  class 8 "ring"     a hollow disc
//   class 7 "disc"   a filled disc         class 9 "triangle" pointing up
//
// each at a random place, size (a fifth to three quarters of the image),
// rotation (within 15 degrees, so that a bar never turns into a diagonal)
// and stroke width, filled with a random texture (plain, stripes at a random
// angle, a checkerboard or blocky noise, at a random scale) in random
// colours, over a background textured the same way in other colours, with
// three to five small distractors (dots and short strokes) on top and pixel
// noise. Object and background differ by at least a fixed amount in some
// channel's mean colour, so the shape is always visible; the colours and
// textures say nothing about the class.
#ifndef CT_DATA_TOY_IMAGES_H
#define CT_DATA_TOY_IMAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "data/image.h"

enum { CT_TOY_IMAGE_MAX_CLASSES = 6, CT_TOY_TEXTURED_MAX_CLASSES = 10 };

// Fills *d with n images of size x size (8..256) over `classes` classes
// (2..6), labels cycling through the classes in a seeded shuffle. `split`
// (0 train, 1 val, 2 test) picks an independent stream, so splits differ.
ct_status ct_toy_images_generate(ct_image_dataset *d, int64_t n, int size,
                                 int classes, uint64_t seed, int split);

// Fills *d with n RGB images (3, size, size) of the textured variant over
// `classes` classes (2..10), size 16..256; labels, splits and the shuffle
// as for ct_toy_images_generate, from an independent stream.
ct_status ct_toy_images_textured(ct_image_dataset *d, int64_t n, int size,
                                 int classes, uint64_t seed, int split);

typedef enum ct_toy_image_variant {
  CT_TOY_IMAGES_SHAPES,    // gray shapes over noise (ct_toy_images_generate)
  CT_TOY_IMAGES_TEXTURED,  // coloured, textured (ct_toy_images_textured)
} ct_toy_image_variant;

// Parses "shapes" or "textured" (CT_ERR_ARG listing them otherwise).
ct_status ct_toy_image_variant_parse(const char *name,
                                     ct_toy_image_variant *out);

typedef enum ct_toy_image_format {
  CT_TOY_IMAGES_PNG,      // DIR/{train,test}/<class>/NNNNNN.png
  CT_TOY_IMAGES_CIFAR10,  // DIR/data_batch_{1..5}.bin, test_batch.bin
                          // (32x32 RGB: gray replicated; CIFAR-10 has 10
                          // classes, so with fewer the unused labels stay
                          // empty and batches.meta.txt is not written)
  CT_TOY_IMAGES_IDX,      // DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte
                          // (gray images only)
} ct_toy_image_format;

// Parses "png", "cifar10" or "idx" (CT_ERR_ARG listing them otherwise).
ct_status ct_toy_image_format_parse(const char *name, ct_toy_image_format *out);

// Writes a generated training and test set to `dir` in one of the formats
// users' own data comes in, so every loader can be tried without
// downloads. CIFAR-10 needs size 32. Existing files are not overwritten
// unless `overwrite`; the folder is created. Gray (C = 1) or RGB (C = 3)
// images; IDX takes gray ones only.
ct_status ct_toy_images_write(const char *dir, ct_toy_image_format format,
                              const ct_image_dataset *train,
                              const ct_image_dataset *test, bool overwrite);

#endif
