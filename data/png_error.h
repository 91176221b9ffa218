// libpng's error and warning callbacks for the library's PNG reader
// (data/png_folder.c) and writer (train/plot.c). libpng reports a fatal error
// by calling the error callback, which must not return: ours keeps libpng's
// message for the caller's error and jumps back to its setjmp. Warnings
// (unknown chunks, iCCP profiles) are benign and dropped.
//
//   ct_png_failure failure = {{0}};
//   png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &failure,
//                                            ct_png_on_error, ct_png_on_warning);
//   if (setjmp(png_jmpbuf(png))) ... failure.message says what went wrong ...
//
// Not installed: only code that includes <png.h> itself uses it.
#ifndef CT_DATA_PNG_ERROR_H
#define CT_DATA_PNG_ERROR_H

#include <png.h>

// The error pointer handed to libpng: where its last message lands.
typedef struct ct_png_failure {
  char message[256];
} ct_png_failure;

// Copies msg into the ct_png_failure error pointer and longjmps.
void ct_png_on_error(png_structp png, png_const_charp msg);
// Ignores the warning.
void ct_png_on_warning(png_structp png, png_const_charp msg);

#endif
