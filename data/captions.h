// Captioned images in memory (for captioning and contrastive image-text
// training): images of one size, each with several captions, and, where the
// file gives them, the boxes of the objects the captions name.
//
//   ct_caption_dataset train = {0};
//   ct_captions_load(&train, "data/toycap/train.json", "data/toycap/train",
//                    3, 64);
//   // image i: ct_caption_image(&train, i); its captions
//   // ct_caption_text(&train, i, k) for k < ct_caption_count(&train, i)
//   ct_text_tokenizer tok;
//   ct_text_tokenizer_init(&tok, CT_TOKENIZER_WORD, true);
//   ct_vocab_counter c = {0};
//   ct_captions_count_tokens(&train, &tok, &c);
//   ct_vocab v;  ct_vocab_build(&v, &c, 1, 0);
//   ct_caption_ids ids = {0};
//   ct_captions_encode(&train, &tok, &v, &ids);  // every caption's word ids
//   ...
//   ct_caption_ids_free(&ids);
//   ct_caption_dataset_free(&train);
//
// The file is COCO's captions layout (captions_train2017.json and the like,
// https://cocodataset.org/#format-data), with what captioning needs:
//   {"images": [{"id", "file_name", "width", "height"}],
//    "annotations": [{"image_id", "caption"}]}
// other keys (license, coco_url, annotation ids, info, ...) are ignored.
// Two optional extensions, which ctrain's generator writes:
//   "objects": [{"image_id", "name", "bbox": [x, y, w, h]}]  at the top
//       level: a box in the image's pixels (as COCO's bbox: top-left corner,
//       width, height) around an object, and the word naming it ("coat");
//       grounding is measured against them.
//   "heldout": true|false  in an image's entry: the image shows a
//       combination of attributes kept out of the training split (a
//       compositional split), so metrics can be reported on that subset.
// Every image needs at least one caption. Captions are kept as written
// (lowercasing and tokenizing happen in ct_captions_encode, with the
// tokenizer of data/text_tokenizer.h as translation uses it). Boxes are
// scaled with their image when it is resized.
//
// What this file does not do: the generated set (data/toy_captions.h),
// batching, augmentation, image formats other than PNG.
#ifndef CT_DATA_CAPTIONS_H
#define CT_DATA_CAPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/strings.h"
#include "data/text_tokenizer.h"
#include "data/vocab.h"

typedef struct ct_caption_object {
  int32_t name;      // index in object_names
  float x, y, w, h;  // pixels of the stored image: top-left corner, size
} ct_caption_object;

// Zero-initialize ({0}); the loader and the generator fill it.
typedef struct ct_caption_dataset {
  int64_t N;                    // images
  int C, H, W;                  // channels (1 or 3), size
  uint8_t *pixels;              // (N, C, H, W)
  int64_t *ids;                 // (N) the images' ids in the file
  bool *heldout;                // (N) the "heldout" flags (false if absent)
  int64_t *caption_start;       // (N + 1): image i's captions are
                                // captions[caption_start[i] .. [i + 1])
  ct_string_list captions;      // the captions, image by image, file order
  int64_t *object_start;        // (N + 1), as caption_start
  ct_caption_object *objects;   // object_start[N] objects, image by image
  ct_string_list object_names;  // the distinct names, in first-use order
} ct_caption_dataset;

void ct_caption_dataset_free(ct_caption_dataset *d);

static inline uint8_t *ct_caption_image(const ct_caption_dataset *d,
                                        int64_t i) {
  return d->pixels + i * (int64_t)d->C * d->H * d->W;
}
static inline int64_t ct_caption_count(const ct_caption_dataset *d, int64_t i) {
  return d->caption_start[i + 1] - d->caption_start[i];
}
static inline const char *ct_caption_text(const ct_caption_dataset *d,
                                          int64_t i, int64_t k) {
  return ct_string_list_get(&d->captions, d->caption_start[i] + k);
}
static inline int64_t ct_caption_object_count(const ct_caption_dataset *d,
                                              int64_t i) {
  return d->object_start[i + 1] - d->object_start[i];
}
static inline const ct_caption_object *ct_caption_objects(
    const ct_caption_dataset *d, int64_t i) {
  return d->objects + d->object_start[i];
}
// The most captions any image has.
int64_t ct_caption_max_count(const ct_caption_dataset *d);

// Whether a caption's word names objects called `name`: the name itself or
// its plural made with -s or -es ("coat", "coats"; "dress", "dresses").
// Both are compared as bytes (lowercase names match lowercased captions).
bool ct_caption_word_names(const char *word, const char *name);

// Reads the captions file json_path and its PNG images image_dir/file_name
// into *d with `channels` (1 or 3) channels, every image resized to size x
// size (0: keep the declared sizes, which must then all be equal). Errors
// name the file and, where the JSON is at fault, line:column and the entry
// ("annotations[3]"):
//   CT_ERR_IO      the JSON or a PNG cannot be opened or read
//   CT_ERR_FORMAT  malformed JSON; a missing key or a value of the wrong
//                  type; duplicate image ids; an empty caption or object
//                  name; an image without captions; no images; a PNG that
//                  is not one, is corrupt, or whose size is not the declared
//                  width x height
//   CT_ERR_INDEX   an annotation's or object's unknown image_id
//   CT_ERR_ARG     a box with w or h <= 0 or outside its image (1 pixel of
//                  slack, then clipped, as for detection); bad channels or
//                  size
// *d is left empty after an error.
ct_status ct_captions_load(ct_caption_dataset *d, const char *json_path,
                           const char *image_dir, int channels, int size);

// Writes d as DIR/SPLIT.json and DIR/SPLIT/NNNNNN.png (image ids as in d,
// file names by position), with its objects and heldout flags. The folders
// are created; existing files are not overwritten unless `overwrite`
// (CT_ERR_IO naming the first one).
ct_status ct_captions_write(const char *dir, const char *split,
                            const ct_caption_dataset *d, bool overwrite);

// Every caption's tokens (t's tokenization of the text) added to c: the
// vocabulary of a training split.
ct_status ct_captions_count_tokens(const ct_caption_dataset *d,
                                   const ct_text_tokenizer *t,
                                   ct_vocab_counter *c);

// Every caption as vocabulary ids (no <bos>/<eos>; unknown tokens are
// CT_VOCAB_UNK): caption j (in d->captions order) is
// ids[start[j] .. start[j + 1]).
typedef struct ct_caption_ids {
  int64_t n;        // captions
  int64_t *start;   // (n + 1)
  int32_t *ids;     // start[n]
  int64_t max_len;  // the longest caption's token count
} ct_caption_ids;

ct_status ct_captions_encode(const ct_caption_dataset *d,
                             const ct_text_tokenizer *t, const ct_vocab *v,
                             ct_caption_ids *out);
void ct_caption_ids_free(ct_caption_ids *ids);

#endif
