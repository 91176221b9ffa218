// libpng's error and warning callbacks (see png_error.h).
#include "data/png_error.h"

#include <stdio.h>

void ct_png_on_error(png_structp png, png_const_charp msg) {
  ct_png_failure *f = png_get_error_ptr(png);
  snprintf(f->message, sizeof f->message, "%s", msg);
  png_longjmp(png, 1);
}

void ct_png_on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}
