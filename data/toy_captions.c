// The generated captioning set (see toy_captions.h): objects placed on a
// grid, painted in colour, and described by a five-form grammar.
#include "data/toy_captions.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/detection.h"

static const char *const SHAPE_WORDS[CT_TOY_DETECTION_SHAPES][2] = {
    {"square", "squares"}, {"disk", "disks"}, {"triangle", "triangles"},
    {"plus", "pluses"},    {"ring", "rings"}, {"bar", "bars"}};
static const char *const ITEM_WORDS[10][2] = {
    {"top", "tops"},      {"trouser", "trousers"}, {"pullover", "pullovers"},
    {"dress", "dresses"}, {"coat", "coats"},       {"sandal", "sandals"},
    {"shirt", "shirts"},  {"sneaker", "sneakers"}, {"bag", "bags"},
    {"boot", "boots"}};
static const char *const COLOUR_WORDS[CT_TOY_CAPTIONS_COLOURS] = {
    "red", "green", "blue", "yellow", "purple", "white"};
static const uint8_t COLOUR_RGB[CT_TOY_CAPTIONS_COLOURS][3] = {
    {230, 40, 40},  {40, 200, 60},  {60, 100, 240},
    {235, 215, 40}, {170, 70, 220}, {240, 240, 240}};
static const char *const NUMBER_WORDS[CT_TOY_CAPTIONS_MAX_OBJECTS + 1] = {
    "no", "one", "two", "three", "four"};

enum { ITEM_KINDS = 10, ITEM_TRIES = 16 };

int ct_toy_captions_kinds(bool items) {
  return items ? ITEM_KINDS : CT_TOY_DETECTION_SHAPES;
}

const char *ct_toy_captions_kind_name(bool items, int kind) {
  return items ? ITEM_WORDS[kind][0] : SHAPE_WORDS[kind][0];
}

const char *ct_toy_captions_colour_name(int colour) {
  return COLOUR_WORDS[colour];
}

void ct_toy_captions_colour_rgb(int colour, uint8_t rgb[3]) {
  memcpy(rgb, COLOUR_RGB[colour], 3);
}

bool ct_toy_captions_heldout(uint64_t seed, bool items, int kind, int colour) {
  (void)items;
  ct_rng r = ct_rng_make(seed, ct_rng_stream(CT_TOY_CAPTIONS_RNG_HELDOUT, 0));
  int offset = (int)ct_rng_next_below(&r, CT_TOY_CAPTIONS_COLOURS);
  return colour == (kind + offset) % CT_TOY_CAPTIONS_COLOURS;
}

static int below(ct_rng *r, int n) {
  return (int)ct_rng_next_below(r, (uint64_t)n);
}

// One object of an image.
typedef struct toy_object {
  int kind, colour, cell;
} toy_object;

// A group of equal objects (kind and colour): count, and the rows and
// columns its cells span.
typedef struct toy_group {
  int kind, colour, count;
  int row0, row1, col0, col1;
} toy_group;

static int compare_cells(const void *a, const void *b) {
  const toy_object *x = a, *y = b;
  return (x->cell > y->cell) - (x->cell < y->cell);
}

// The groups of the objects (sorted by cell), in reading order of each
// group's first cell.
static int make_groups(const toy_object *obj, int n, int grid, toy_group *g) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    int row = obj[i].cell / grid, col = obj[i].cell % grid, k = 0;
    while (k < m && !(g[k].kind == obj[i].kind && g[k].colour == obj[i].colour))
      k++;
    if (k == m)
      g[m++] = (toy_group){obj[i].kind, obj[i].colour, 0, row, row, col, col};
    g[k].count++;
    g[k].row0 = row < g[k].row0 ? row : g[k].row0;
    g[k].row1 = row > g[k].row1 ? row : g[k].row1;
    g[k].col0 = col < g[k].col0 ? col : g[k].col0;
    g[k].col1 = col > g[k].col1 ? col : g[k].col1;
  }
  return m;
}

// Where a lies relative to b, or NULL when the cells interleave.
static const char *relation(const toy_group *a, const toy_group *b) {
  if (a->row1 < b->row0) return "above";
  if (a->row0 > b->row1) return "below";
  if (a->col1 < b->col0) return "left of";
  if (a->col0 > b->col1) return "right of";
  return NULL;
}

static const char *noun(bool items, const toy_group *g) {
  int plural = g->count > 1;
  return items ? ITEM_WORDS[g->kind][plural] : SHAPE_WORDS[g->kind][plural];
}

// "a red disk" / "two blue rings".
static void noun_phrase(ct_byte_buffer *b, bool items, const toy_group *g) {
  ct_byte_buffer_printf(b, "%s %s %s",
                        g->count == 1 ? "a" : NUMBER_WORDS[g->count],
                        COLOUR_WORDS[g->colour], noun(items, g));
}

// The groups from `first` on as a list: "x, y and z".
static void group_list(ct_byte_buffer *b, bool items, const toy_group *g,
                       int first, int m) {
  for (int k = first; k < m; k++) {
    if (k > first) ct_byte_buffer_printf(b, "%s", k == m - 1 ? " and " : ", ");
    noun_phrase(b, items, &g[k]);
  }
}

enum { FORM_LIST, FORM_RELATION, FORM_INVERTED, FORM_COUNT, FORM_THERE, FORMS };

// Caption form f of the groups into b (emptied first); false when the form
// does not apply.
static bool caption_form(ct_byte_buffer *b, int f, bool items,
                         const toy_group *g, int m, int objects) {
  b->len = 0;
  const char *rel = m >= 2 ? relation(&g[0], &g[1]) : NULL;
  switch (f) {
  case FORM_LIST: group_list(b, items, g, 0, m); break;
  case FORM_RELATION:
    if (!rel) return false;
    noun_phrase(b, items, &g[0]);
    ct_byte_buffer_printf(b, " %s ", rel);
    noun_phrase(b, items, &g[1]);
    if (m > 2) ct_byte_buffer_printf(b, " and ");
    group_list(b, items, g, 2, m);
    break;
  case FORM_INVERTED: {
    const toy_group *s = m >= 2 ? &g[1] : &g[0];
    if (m >= 2 && !rel) return false;
    ct_byte_buffer_printf(b, "%s %s, %s",
                          s->count == 1 ? "a" : NUMBER_WORDS[s->count],
                          noun(items, s), COLOUR_WORDS[s->colour]);
    if (m >= 2) {
      ct_byte_buffer_printf(b, ", %s ", relation(&g[1], &g[0]));
      noun_phrase(b, items, &g[0]);
      if (m > 2) ct_byte_buffer_printf(b, " and ");
      group_list(b, items, g, 2, m);
    }
    break;
  }
  case FORM_COUNT:
    ct_byte_buffer_printf(b, "%s object%s: ", NUMBER_WORDS[objects],
                          objects > 1 ? "s" : "");
    group_list(b, items, g, 0, m);
    break;
  default:
    ct_byte_buffer_printf(b, "there %s ", g[0].count == 1 ? "is" : "are");
    group_list(b, items, g, 0, m);
    break;
  }
  return true;
}

// Paints object o (cell values from the shape or item) into the image in
// its colour, and records its box.
static void paint(uint8_t *img, int size, const uint8_t *cell, int s, int x0,
                  int y0, int colour) {
  int64_t plane = (int64_t)size * size;
  for (int y = 0; y < s; y++)
    for (int x = 0; x < s; x++) {
      int v = cell[y * s + x];
      if (!v) continue;
      int64_t p = (int64_t)(y0 + y) * size + x0 + x;
      for (int ch = 0; ch < 3; ch++)
        img[ch * plane + p] = (uint8_t)(COLOUR_RGB[colour][ch] * v / 255);
    }
}

// The items of each label, for drawing an item of a given kind.
typedef struct item_index {
  int64_t *of;  // item positions grouped by label
  int64_t start[ITEM_KINDS + 1];
} item_index;

static ct_status index_items(item_index *ix, const ct_image_dataset *items) {
  memset(ix, 0, sizeof *ix);
  if (items->C != 1 || items->N < 1)
    return ct_error(CT_ERR_ARG,
                    "toy captions: the item set must hold gray images (it has "
                    "%lld of %d channels)",
                    (long long)items->N, items->C);
  ix->of = malloc((size_t)items->N * sizeof *ix->of);
  if (!ix->of) return ct_error(CT_ERR_NOMEM, "toy captions: out of memory");
  int64_t next[ITEM_KINDS] = {0};
  for (int64_t j = 0; j < items->N; j++)
    if (items->labels[j] >= 0 && items->labels[j] < ITEM_KINDS)
      ix->start[items->labels[j] + 1]++;
  for (int k = 0; k < ITEM_KINDS; k++) {
    if (!ix->start[k + 1])
      return ct_error(CT_ERR_ARG,
                      "toy captions: the item set has no item of label %d "
                      "(Fashion-MNIST's 10 labels are needed)",
                      k);
    ix->start[k + 1] += ix->start[k];
    next[k] = ix->start[k];
  }
  for (int64_t j = 0; j < items->N; j++)
    if (items->labels[j] >= 0 && items->labels[j] < ITEM_KINDS)
      ix->of[next[items->labels[j]]++] = j;
  return CT_OK;
}

// Draws the objects of one image: count, kinds, colours, cells.
static int draw_objects(ct_rng *r, int kinds, int grid, int max_objects,
                        bool train, uint64_t seed, bool items,
                        toy_object *obj) {
  int n = 1 + below(r, max_objects);
  int cells[16];
  for (int c = 0; c < grid * grid; c++) cells[c] = c;
  for (int i = 0; i < n; i++) {  // the first n of a partial shuffle
    int j = i + below(r, grid * grid - i);
    int t = cells[i];
    cells[i] = cells[j];
    cells[j] = t;
    obj[i].cell = cells[i];
    if (i > 0 && below(r, 2)) {  // repeat an earlier object
      const toy_object *e = &obj[below(r, i)];
      obj[i].kind = e->kind;
      obj[i].colour = e->colour;
      continue;
    }
    obj[i].kind = below(r, kinds);
    obj[i].colour = below(r, CT_TOY_CAPTIONS_COLOURS);
    if (train && ct_toy_captions_heldout(seed, items, obj[i].kind,
                                         obj[i].colour))  // one of the others
      obj[i].colour =
          (obj[i].colour + 1 + below(r, CT_TOY_CAPTIONS_COLOURS - 1)) %
          CT_TOY_CAPTIONS_COLOURS;
  }
  qsort(obj, (size_t)n, sizeof *obj, compare_cells);
  return n;
}

// The captions of one image into d (3..5 of the forms that apply).
static ct_status write_captions(ct_caption_dataset *d, ct_rng *r, bool items,
                                const toy_object *obj, int n, int grid,
                                ct_byte_buffer *b) {
  toy_group g[CT_TOY_CAPTIONS_MAX_OBJECTS];
  int m = make_groups(obj, n, grid, g);
  int order[FORMS] = {FORM_LIST, FORM_RELATION, FORM_INVERTED, FORM_COUNT,
                      FORM_THERE};
  for (int i = FORMS - 1; i > 1; i--) {  // the list form stays first
    int j = 1 + below(r, i);
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  int want = 3 + below(r, 3), made = 0;
  for (int k = 0; k < FORMS && made < want; k++) {
    if (!caption_form(b, order[k], items, g, m, n)) continue;
    if (b->failed) return ct_error(CT_ERR_NOMEM, "toy captions: out of memory");
    ct_status st = ct_string_list_push(&d->captions, b->data, b->len);
    if (st) return st;
    made++;
  }
  return CT_OK;
}

ct_status ct_toy_captions_generate(ct_caption_dataset *d, int64_t n,
                                   const ct_toy_captions_options *o,
                                   int split) {
  *d = (ct_caption_dataset){0};
  if (n < 1 || o->size < 32 || o->size > 512)
    return ct_error(CT_ERR_ARG,
                    "toy captions: %lld images of %d pixels: need at least 1 "
                    "image and a size in [32, 512]",
                    (long long)n, o->size);
  if (o->grid < 2 || o->grid > 4)
    return ct_error(CT_ERR_ARG,
                    "toy captions: grid %d: must be in [2, 4] cells per side",
                    o->grid);
  if (o->max_objects < 0 || o->max_objects > CT_TOY_CAPTIONS_MAX_OBJECTS)
    return ct_error(CT_ERR_ARG,
                    "toy captions: max_objects %d: must be in [1, %d] (0: %d)",
                    o->max_objects, CT_TOY_CAPTIONS_MAX_OBJECTS,
                    CT_TOY_CAPTIONS_MAX_OBJECTS);
  const int max_objects =
      o->max_objects ? o->max_objects : CT_TOY_CAPTIONS_MAX_OBJECTS;
  bool items = o->items != NULL;
  int kinds = ct_toy_captions_kinds(items), cs = o->size / o->grid;
  item_index ix = {0};
  ct_status st = items ? index_items(&ix, o->items) : CT_OK;
  uint8_t *cell = malloc((size_t)cs * cs);
  d->pixels = ct_image_pixels_alloc(n, 3, o->size, o->size);
  d->ids = malloc((size_t)n * sizeof *d->ids);
  d->heldout = calloc((size_t)n, sizeof *d->heldout);
  d->caption_start = calloc((size_t)n + 1, sizeof *d->caption_start);
  d->object_start = calloc((size_t)n + 1, sizeof *d->object_start);
  d->objects =
      malloc((size_t)n * CT_TOY_CAPTIONS_MAX_OBJECTS * sizeof *d->objects);
  if (!st && (!cell || !d->pixels || !d->ids || !d->heldout ||
              !d->caption_start || !d->object_start || !d->objects))
    st = ct_error(CT_ERR_NOMEM, "toy captions: out of memory for %lld images",
                  (long long)n);
  d->N = n;
  d->C = 3;
  d->H = d->W = o->size;
  for (int k = 0; k < kinds && !st; k++) {
    const char *name = ct_toy_captions_kind_name(items, k);
    st = ct_string_list_push(&d->object_names, name, strlen(name));
  }
  ct_rng r =
      ct_rng_make(o->seed, ct_rng_stream(CT_TOY_CAPTIONS_RNG, (uint64_t)split));
  ct_byte_buffer text = {0};
  int64_t plane = (int64_t)o->size * o->size;
  for (int64_t i = 0; i < n && !st; i++) {
    uint8_t *img = ct_caption_image(d, i);
    int base = below(&r, 40);
    for (int64_t p = 0; p < plane; p++) {
      uint8_t v = (uint8_t)(base + below(&r, 24));
      img[p] = img[plane + p] = img[2 * plane + p] = v;
    }
    d->ids[i] = i + 1;
    toy_object obj[CT_TOY_CAPTIONS_MAX_OBJECTS];
    int count = draw_objects(&r, kinds, o->grid, max_objects, split == 0,
                             o->seed, items, obj);
    d->object_start[i + 1] = d->object_start[i] + count;
    for (int k = 0; k < count && !st; k++) {
      int s = cs * 3 / 5 + below(&r, cs / 4 + 1);
      int x0 = obj[k].cell % o->grid * cs + below(&r, cs - s + 1);
      int y0 = obj[k].cell / o->grid * cs + below(&r, cs - s + 1);
      ct_detection_box b = {0};
      bool inked = false;
      for (int t = 0; t < ITEM_TRIES && !inked; t++) {
        if (items) {
          int64_t at = ix.start[obj[k].kind];
          int64_t span = ix.start[obj[k].kind + 1] - at;
          ct_toy_draw_item(
              cell, s, o->items,
              ix.of[at + (int64_t)ct_rng_next_below(&r, (uint64_t)span)]);
        } else {
          ct_toy_draw_shape(cell, s, obj[k].kind, &r,
                            (uint8_t)(170 + below(&r, 86)));
        }
        inked = ct_toy_cell_box(cell, s, x0, y0, &b);
      }
      if (!inked) {
        st = ct_error(CT_ERR_ARG,
                      "toy captions: no item of label %d with ink after %d "
                      "tries",
                      obj[k].kind, ITEM_TRIES);
        break;
      }
      paint(img, o->size, cell, s, x0, y0, obj[k].colour);
      d->objects[d->object_start[i] + k] =
          (ct_caption_object){obj[k].kind, b.x, b.y, b.w, b.h};
      if (ct_toy_captions_heldout(o->seed, items, obj[k].kind, obj[k].colour))
        d->heldout[i] = true;
    }
    if (!st) st = write_captions(d, &r, items, obj, count, o->grid, &text);
    d->caption_start[i + 1] = d->captions.count;
  }
  ct_byte_buffer_free(&text);
  free(cell);
  free(ix.of);
  if (st) ct_caption_dataset_free(d);
  return st;
}
