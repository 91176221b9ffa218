// Reading a PNG back as RGB in tests, with libpng's simplified API.
#ifndef CT_TESTS_PNG_READ_H
#define CT_TESTS_PNG_READ_H

#include <png.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The pixels of `path` as RGB (malloc'd, w * h * 3 bytes); NULL on failure.
static inline uint8_t *png_load(const char *path, int *w, int *h) {
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path)) return NULL;
  img.format = PNG_FORMAT_RGB;
  uint8_t *buf = malloc(PNG_IMAGE_SIZE(img));
  if (!buf || !png_image_finish_read(&img, NULL, buf, 0, NULL)) {
    free(buf);
    png_image_free(&img);
    return NULL;
  }
  *w = (int)img.width;
  *h = (int)img.height;
  return buf;
}

#endif
