// A generated captioning set (no downloads): RGB canvases with 1..4
// coloured objects on a grid of cells, each image with 3..5 captions from a
// small grammar naming the objects, their colours, counts and spatial
// relations, and the objects' boxes (data/captions.h). Validation and test
// images may show colour-object combinations that never occur in training
// (a compositional split); those images are flagged "heldout".
//
//   ct_toy_captions_options o = {.size = 64, .grid = 3, .seed = 1};
//   ct_caption_dataset train = {0};
//   ct_toy_captions_generate(&train, 4000, &o, 0);   // split 0 train
//   ct_captions_write("data/toycap", "train", &train, false);
//
// Objects: shapes ("square", "disk", "triangle", "plus", "ring", "bar", the
// detection set's, data/detection.h), or Fashion-MNIST items (named "top",
// "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
// "bag", "boot"), tinted in one of six colours: red, green, blue, yellow,
// purple, white. Each object sits in its own grid cell (grid x grid cells of
// size / grid pixels), 60..85% of the cell's side, at a random offset in it;
// an object repeats an earlier one's kind and colour with probability 1/2,
// so counts ("two blue rings") occur.
//
// Captions, for the groups g1, g2, ... of equal objects in reading order
// (row by row, the group's first cell), NP(g) = "a red disk" / "two blue
// rings", REL = above | below | left of | right of (when one group lies
// wholly above, below, left or right of the other):
//   list      "a red disk, two blue rings and a green bar"   (always given)
//   relation  "a red disk above two blue rings and a green bar"
//   inverted  "two rings, blue, below a red disk and a green bar"
//   count     "four objects: a red disk, two blue rings and a green bar"
//   there     "there is a red disk, two blue rings and a green bar"
// (one object: "a disk, red" inverted; no relation sentence). 3..5 of the
// forms that apply, the list form first, the others in a seeded order.
//
// Held-out combinations: for each kind k, colour (k + o) mod 6, where the
// offset o is drawn from the seed (the same for every split). The training
// split never draws them; validation and test draw colours freely.
//
// Deterministic from (seed, split) (split 0 train, 1 val, 2 test), the same
// on every machine; the first m images do not depend on n.
//
// What this file does not do: overlapping objects, object sizes as words,
// grammars beyond the five forms.
#ifndef CT_DATA_TOY_CAPTIONS_H
#define CT_DATA_TOY_CAPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/captions.h"
#include "data/image.h"

// The core/rng.h purposes of the generated set.
enum {
  CT_TOY_CAPTIONS_RNG = 0xDA7A41u,          // images, step = split
  CT_TOY_CAPTIONS_RNG_HELDOUT = 0xDA7A42u,  // the held-out offset
  CT_TOY_CAPTIONS_COLOURS = 6,
  CT_TOY_CAPTIONS_MAX_OBJECTS = 4
};

typedef struct ct_toy_captions_options {
  int size;  // canvas side in pixels, 32..512
  int grid;  // cells per side, 2..4
  uint64_t seed;
  // NULL: shapes. Otherwise gray items with Fashion-MNIST's 10 labels
  // (ct_idx_load_dir), e.g. its training images for the training split and
  // its test images for the others.
  const ct_image_dataset *items;
  // The most objects an image holds, 1..4 (0: 4, the default); each image
  // draws its count uniformly from 1..max_objects. Fewer objects make
  // canvases that look more like single items (contrastive zero-shot).
  int max_objects;
} ct_toy_captions_options;

// The kinds' and colours' words.
const char *ct_toy_captions_kind_name(bool items, int kind);
const char *ct_toy_captions_colour_name(int colour);
// The RGB a colour tints an object with (an item's gray value v becomes
// rgb * v / 255).
void ct_toy_captions_colour_rgb(int colour, uint8_t rgb[3]);
// The number of kinds: 6 shapes or 10 items.
int ct_toy_captions_kinds(bool items);

// Whether (kind, colour) is held out of training for this seed.
bool ct_toy_captions_heldout(uint64_t seed, bool items, int kind, int colour);

// Fills *d with n images (ids 1..n). CT_ERR_ARG for bad options (naming
// the option and its range; max_objects outside 0..4 too), an item set
// that is not gray or lacks one of the 10 labels.
ct_status ct_toy_captions_generate(ct_caption_dataset *d, int64_t n,
                                   const ct_toy_captions_options *o, int split);

#endif
