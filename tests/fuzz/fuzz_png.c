// Fuzz target: PNG images (data/png_folder.h): the decoder with each
// channel count, the folder loader over a class folder holding the input
// (resized, and at its own size), and `classify`'s read of one image.
#include "data/png_folder.h"
#include "tests/fuzz/fuzz_util.h"

#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char root[256];
  if (!root[0]) {
    snprintf(root, sizeof root, "%s", fuzz_path("png"));
    mkdir(root, 0777);
    mkdir(fuzz_path("png/class"), 0777);
  }
  const char *path = fuzz_write("png/class/image.png", data, size);
  for (int channels = 1; channels <= 3; channels += 2) {
    uint8_t *px;
    int h, w;
    if (ct_png_decode(path, channels, &px, &h, &w) == CT_OK) free(px);
    ct_image_dataset d;
    if (ct_png_folder_load(&d, root, channels, 8, 8) == CT_OK)
      ct_image_dataset_free(&d);
    if (ct_png_folder_load(&d, root, channels, 0, 0) == CT_OK)
      ct_image_dataset_free(&d);
    uint8_t out[3 * 5 * 7];
    ct_png_read_image(path, channels, 5, 7, out);
  }
  return 0;
}
