// Fuzz target: COCO annotation files (data/detection.h over the JSON
// reader, data/json.h). The input is the annotation JSON; its images
// folder holds 1.png, 2.png and a.png (16x16 RGB) for file_names that
// name them. The JSON reader also parses the input directly, strict and
// with Python's extensions.
#include "data/detection.h"
#include "data/json.h"
#include "tests/fuzz/fuzz_util.h"
#include "train/plot.h"

#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char images[256];
  if (!images[0]) {
    snprintf(images, sizeof images, "%s", fuzz_path("images"));
    mkdir(images, 0777);
    uint8_t rgb[16 * 16 * 3];
    for (int i = 0; i < 16 * 16 * 3; i++) rgb[i] = (uint8_t)(i * 7);
    const char *names[] = {"images/1.png", "images/2.png", "images/a.png"};
    for (int k = 0; k < 3; k++)
      if (ct_png_write_rgb(fuzz_path(names[k]), 16, 16, rgb) != CT_OK) abort();
  }
  const char *json = fuzz_write("ann.json", data, size);
  ct_detection_dataset d;
  if (ct_coco_load(&d, json, images, 1, 8) == CT_OK)
    ct_detection_dataset_free(&d);
  if (ct_coco_load(&d, json, images, 3, 0) == CT_OK)
    ct_detection_dataset_free(&d);
  ct_json_doc doc;
  ct_json_error err;
  const char *text = (const char *)data;
  if (ct_json_doc_parse_quiet(&doc, text, size, 0, &err) == CT_OK)
    ct_json_doc_free(&doc);
  if (ct_json_doc_parse_quiet(&doc, text, size, CT_JSON_PYTHON, &err) == CT_OK)
    ct_json_doc_free(&doc);
  return 0;
}
