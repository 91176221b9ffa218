// PNG images: one file decoded to a dataset's channel count and size, and a
// folder of class subfolders read into a dataset.
//
// Decoding (libpng): palette, gray below 8 bits and tRNS are expanded; 16-bit
// samples are scaled to 8 bits; alpha is dropped (as PIL's convert("RGB")
// does: no compositing); gray becomes RGB by copying, RGB becomes gray by
// ITU-R 601 luma (PIL's convert("L")). Resizing is bilinear with half-pixel
// centres and no antialiasing, as torch.nn.functional.interpolate(...,
// mode="bilinear", align_corners=False), rounded to u8.
//
// Folder layout, as torchvision's ImageFolder: ROOT/<class>/<image>.png; the
// classes are the subfolders in byte order of their names (label = rank),
// the images of a class in byte order too. Files not ending in ".png" (any
// case) and names starting with "." are skipped.
//
// What this file does not do: other image formats, gamma or colour
// management, or keeping the aspect ratio when resizing.
#ifndef CT_DATA_PNG_FOLDER_H
#define CT_DATA_PNG_FOLDER_H

#include <stdint.h>

#include "core/error.h"
#include "data/image.h"

// Decodes the PNG at path into a malloc'd (h, w, channels) interleaved u8
// buffer; channels is 1 or 3. Errors name the file: CT_ERR_IO (cannot
// open), CT_ERR_FORMAT (not a PNG, corrupt or truncated data).
ct_status ct_png_decode(const char *path, int channels, uint8_t **pixels,
                        int *height, int *width);

// Bilinear resize and layout change: src (sh, sw, C) interleaved ->
// dst (C, H, W) channel-first. Sizes equal: an exact copy.
void ct_image_resize_bilinear(const uint8_t *src, int sh, int sw, int C,
                              uint8_t *dst, int H, int W);

// Decodes, converts and resizes one image into dst (channels, H, W): what
// `ctrain classify` feeds the model.
ct_status ct_png_read_image(const char *path, int channels, int height,
                            int width, uint8_t *dst);

// Reads ROOT's class folders into *d with the given channel count (1 or 3)
// and size; height = width = 0 keeps the images' own size, which must then
// be the same for all (CT_ERR_FORMAT naming the first file that differs).
// A class folder without images, or no class folder at all, is
// CT_ERR_FORMAT naming the folder.
ct_status ct_png_folder_load(ct_image_dataset *d, const char *root,
                             int channels, int height, int width);

#endif
