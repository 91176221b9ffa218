// Fuzz target: captions files (data/captions.h, COCO's captions layout
// with the objects and heldout extensions, over data/coco_json.h). The
// input is the captions JSON; its images folder holds 1.png, 2.png and
// a.png (16x16 RGB) for file_names that name them. A loaded set is also
// tokenized and encoded, as the captioning task does.
#include "data/captions.h"
#include "tests/fuzz/fuzz_util.h"
#include "train/plot.h"

#include <sys/stat.h>

// Tokenizes and encodes every caption of d with a vocabulary of its own.
static void encode(const ct_caption_dataset *d) {
  ct_text_tokenizer tok;
  ct_text_tokenizer_init(&tok, CT_TOKENIZER_WORD, true);
  ct_vocab_counter c = {0};
  ct_vocab v;
  ct_caption_ids ids;
  if (ct_captions_count_tokens(d, &tok, &c) == CT_OK &&
      ct_vocab_build(&v, &c, 1, 0) == CT_OK) {
    if (ct_captions_encode(d, &tok, &v, &ids) == CT_OK) {
      if (ids.start[ids.n] > 0 && ids.max_len < 1) abort();
      ct_caption_ids_free(&ids);
    }
    ct_vocab_free(&v);
  }
  ct_vocab_counter_free(&c);
  ct_text_tokenizer_free(&tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char images[256];
  if (!images[0]) {
    snprintf(images, sizeof images, "%s", fuzz_path("images"));
    mkdir(images, 0777);
    uint8_t rgb[16 * 16 * 3];
    for (int i = 0; i < 16 * 16 * 3; i++) rgb[i] = (uint8_t)(i * 5);
    const char *names[] = {"images/1.png", "images/2.png", "images/a.png"};
    for (int k = 0; k < 3; k++)
      if (ct_png_write_rgb(fuzz_path(names[k]), 16, 16, rgb) != CT_OK) abort();
  }
  const char *json = fuzz_write("captions.json", data, size);
  ct_caption_dataset d;
  if (ct_captions_load(&d, json, images, 3, 0) == CT_OK) {
    encode(&d);
    ct_caption_dataset_free(&d);
  }
  if (ct_captions_load(&d, json, images, 1, 8) == CT_OK)
    ct_caption_dataset_free(&d);
  return 0;
}
