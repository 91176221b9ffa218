// Detection data (see detection.h): the dataset, box helpers, the generated
// set, and COCO annotation files read and written.
#include "data/detection.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "data/coco_json.h"
#include "data/png_folder.h"

// ---- the dataset -------------------------------------------------------------

// Allocates n images of (c, h, w) and an empty box list per image, with K
// classes named by the caller.
static ct_status detection_alloc(ct_detection_dataset *d, int64_t n, int c,
                                 int h, int w, int num_classes) {
  *d = (ct_detection_dataset){0};
  d->pixels = ct_image_pixels_alloc(n, c, h, w);
  d->box_start = calloc((size_t)n + 1, sizeof *d->box_start);
  if (!d->pixels || !d->box_start) {
    ct_detection_dataset_free(d);
    return ct_error(CT_ERR_NOMEM,
                    "detection dataset: out of memory for %lld "
                    "images of %dx%dx%d",
                    (long long)n, c, h, w);
  }
  d->N = n;
  d->C = c;
  d->H = h;
  d->W = w;
  d->K = num_classes;
  return CT_OK;
}

void ct_detection_dataset_free(ct_detection_dataset *d) {
  free(d->pixels);
  free(d->box_start);
  free(d->boxes);
  ct_string_list_free(&d->class_names);
  *d = (ct_detection_dataset){0};
}

int64_t ct_detection_max_boxes(const ct_detection_dataset *d) {
  int64_t most = 0;
  for (int64_t i = 0; i < d->N; i++)
    if (ct_detection_box_count(d, i) > most)
      most = ct_detection_box_count(d, i);
  return most;
}

int64_t ct_detection_targets(const ct_detection_dataset *d, int64_t i,
                             int32_t *labels, float *boxes) {
  const ct_detection_box *b = ct_detection_boxes(d, i);
  int64_t T = ct_detection_box_count(d, i);
  for (int64_t t = 0; t < T; t++) {
    if (labels) labels[t] = b[t].label;
    if (boxes) {
      boxes[4 * t + 0] = (b[t].x + 0.5f * b[t].w) / (float)d->W;
      boxes[4 * t + 1] = (b[t].y + 0.5f * b[t].h) / (float)d->H;
      boxes[4 * t + 2] = b[t].w / (float)d->W;
      boxes[4 * t + 3] = b[t].h / (float)d->H;
    }
  }
  return T;
}

void ct_detection_box_xyxy(const ct_detection_box *b, float xyxy[4]) {
  xyxy[0] = b->x;
  xyxy[1] = b->y;
  xyxy[2] = b->x + b->w;
  xyxy[3] = b->y + b->h;
}

void ct_detection_cxcywh_to_pixels(const float *cxcywh, int64_t n, int W, int H,
                                   float *xyxy) {
  for (int64_t i = 0; i < n; i++) {
    const float *b = cxcywh + 4 * i;
    float cx = b[0] * (float)W, cy = b[1] * (float)H;
    float w = b[2] * (float)W, h = b[3] * (float)H;
    xyxy[4 * i + 0] = cx - 0.5f * w;
    xyxy[4 * i + 1] = cy - 0.5f * h;
    xyxy[4 * i + 2] = cx + 0.5f * w;
    xyxy[4 * i + 3] = cy + 0.5f * h;
  }
}

double ct_detection_iou(const float a[4], const float b[4]) {
  double iw = fmin(a[2], b[2]) - fmax(a[0], b[0]);
  double ih = fmin(a[3], b[3]) - fmax(a[1], b[1]);
  if (iw <= 0 || ih <= 0) return 0;
  double inter = iw * ih;
  double uni = ((double)a[2] - a[0]) * ((double)a[3] - a[1]) +
               ((double)b[2] - b[0]) * ((double)b[3] - b[1]) - inter;
  return uni > 0 ? inter / uni : 0;
}

// Appends a box to d->boxes (capacity *cap) as the last of image `i`, the
// image being filled now (box_start[i + 1] counts it).
static ct_status push_box(ct_detection_dataset *d, int64_t *cap, int64_t i,
                          ct_detection_box box) {
  int64_t n = d->box_start[i + 1];
  if (ct_grow_array((void **)&d->boxes, cap, n + 1, sizeof *d->boxes,
                    "detection boxes"))
    return CT_ERR_NOMEM;
  d->boxes[n] = box;
  d->box_start[i + 1] = n + 1;
  return CT_OK;
}

// ---- the generated set -------------------------------------------------------

static const char *const SHAPE_NAMES[CT_TOY_DETECTION_SHAPES] = {
    "square", "disk", "triangle", "plus", "ring", "bar"};

enum { PLACE_TRIES = 16, FMNIST_INK = 16 };

static int below(ct_rng *r, int n) {
  return (int)ct_rng_next_below(r, (uint64_t)n);
}

// Draws shape k into the s x s cell with value v, where the shape covers a
// pixel's centre (u, w are pixel centres relative to the cell's centre).
void ct_toy_draw_shape(uint8_t *cell, int s, int k, ct_rng *r, uint8_t v) {
  double half = s / 2.0;
  double stroke = fmax(2.0, s / 4.0);          // plus arms, bar thickness
  double ring_in = half - fmax(2.0, s / 6.0);  // the ring's inner radius
  bool horizontal = k == 5 && below(r, 2);
  for (int y = 0; y < s; y++)
    for (int x = 0; x < s; x++) {
      double u = x + 0.5 - half, w = y + 0.5 - half, d2 = u * u + w * w;
      bool on;
      switch (k) {
      case 0: on = true; break;
      case 1: on = d2 <= half * half; break;
      case 2: on = fabs(u) <= (y + 0.5) / 2.0; break;  // apex up
      case 3: on = fabs(u) <= stroke / 2 || fabs(w) <= stroke / 2; break;
      case 4: on = d2 <= half * half && d2 >= ring_in * ring_in; break;
      default: on = fabs(horizontal ? w : u) <= fmax(3.0, s / 3.0) / 2; break;
      }
      cell[y * s + x] = on ? v : 0;
    }
}

// Scales a gray item to the s x s cell; its ink (pixels >= FMNIST_INK) is
// lifted above the background's range, the rest left out.
void ct_toy_draw_item(uint8_t *cell, int s, const ct_image_dataset *items,
                      int64_t j) {
  ct_image_resize_bilinear(ct_image_dataset_image(items, j), items->H, items->W,
                           1, cell, s, s);
  for (int p = 0; p < s * s; p++)
    cell[p] = cell[p] >= FMNIST_INK ? (uint8_t)(96 + cell[p] * 159 / 255) : 0;
}

// The tight box of the cell's nonzero pixels, placed at (x0, y0); false
// when the cell is empty.
bool ct_toy_cell_box(const uint8_t *cell, int s, int x0, int y0,
                     ct_detection_box *b) {
  int lx = s, ly = s, hx = -1, hy = -1;
  for (int y = 0; y < s; y++)
    for (int x = 0; x < s; x++)
      if (cell[y * s + x]) {
        lx = x < lx ? x : lx;
        hx = x > hx ? x : hx;
        ly = y < ly ? y : ly;
        hy = y > hy ? y : hy;
      }
  if (hx < 0) return false;
  b->x = (float)(x0 + lx);
  b->y = (float)(y0 + ly);
  b->w = (float)(hx - lx + 1);
  b->h = (float)(hy - ly + 1);
  return true;
}

// Whether box b covers half or more of a placed box, or one of them covers
// half or more of b: then IoU >= 0.5 is impossible and no object hides
// under another.
static bool overlaps_too_much(const ct_detection_box *placed, int64_t n,
                              const ct_detection_box *b) {
  for (int64_t i = 0; i < n; i++) {
    const ct_detection_box *p = &placed[i];
    double iw = fmin(b->x + b->w, p->x + p->w) - fmax(b->x, p->x);
    double ih = fmin(b->y + b->h, p->y + p->h) - fmax(b->y, p->y);
    double smaller = fmin((double)b->w * b->h, (double)p->w * p->h);
    if (iw > 0 && ih > 0 && iw * ih >= 0.5 * smaller) return true;
  }
  return false;
}

ct_status ct_toy_detection_generate(ct_detection_dataset *d, int64_t n,
                                    int size, int classes, uint64_t seed,
                                    int split, const ct_image_dataset *fmnist) {
  return ct_toy_detection_generate_sized(d, n, size, classes, seed, split,
                                         fmnist, NULL);
}

ct_status ct_toy_detection_generate_sized(ct_detection_dataset *d, int64_t n,
                                          int size, int classes, uint64_t seed,
                                          int split,
                                          const ct_image_dataset *fmnist,
                                          const ct_toy_detection_sizes *sizes) {
  *d = (ct_detection_dataset){0};
  if (n < 1 || size < 16 || size > 1024)
    return ct_error(CT_ERR_ARG,
                    "toy detection: %lld images of %d pixels: "
                    "need at least 1 image and a size in [16, 1024]",
                    (long long)n, size);
  const int min_side = sizes && sizes->min_object ? sizes->min_object
                                                  : CT_TOY_DETECTION_MIN_OBJECT,
            max_side =
                sizes && sizes->max_object ? sizes->max_object : size / 2,
            max_objects = sizes && sizes->max_objects
                              ? sizes->max_objects
                              : CT_TOY_DETECTION_MAX_OBJECTS;
  if (min_side < CT_TOY_DETECTION_SMALLEST || min_side > max_side ||
      max_side > size)
    return ct_error(CT_ERR_ARG,
                    "toy detection: object sides %d..%d pixels: need "
                    "%d <= min <= max <= the image size %d",
                    min_side, max_side, (int)CT_TOY_DETECTION_SMALLEST, size);
  if (max_objects < 1 || max_objects > CT_TOY_DETECTION_MOST_OBJECTS)
    return ct_error(CT_ERR_ARG,
                    "toy detection: %d objects per image at most: must be "
                    "in [1, %d]",
                    max_objects, (int)CT_TOY_DETECTION_MOST_OBJECTS);
  int max_classes = fmnist ? fmnist->K : CT_TOY_DETECTION_SHAPES;
  if (classes < 1 || classes > max_classes)
    return ct_error(CT_ERR_ARG,
                    "toy detection: %d classes: must be in "
                    "[1, %d]%s",
                    classes, max_classes,
                    fmnist ? " (the item set's classes)" : "");
  if (fmnist && (fmnist->C != 1 || fmnist->N < 1))
    return ct_error(CT_ERR_ARG,
                    "toy detection: the item set must hold gray "
                    "images (it has %lld of %d channels)",
                    (long long)fmnist->N, fmnist->C);
  // The items that may be pasted: those of the first `classes` labels.
  int64_t *eligible = NULL, n_eligible = 0;
  if (fmnist) {
    eligible = malloc((size_t)fmnist->N * sizeof *eligible);
    if (!eligible)
      return ct_error(CT_ERR_NOMEM, "toy detection: out of memory");
    for (int64_t j = 0; j < fmnist->N; j++)
      if (fmnist->labels[j] >= 0 && fmnist->labels[j] < classes)
        eligible[n_eligible++] = j;
    if (!n_eligible) {
      free(eligible);
      return ct_error(CT_ERR_ARG,
                      "toy detection: the item set has no item "
                      "with a label below %d",
                      classes);
    }
  }
  uint8_t *cell = malloc((size_t)max_side * max_side);
  ct_status st = cell ? detection_alloc(d, n, 1, size, size, classes)
                      : ct_error(CT_ERR_NOMEM, "toy detection: out of memory");
  for (int k = 0; k < classes && !st; k++) {
    const char *name =
        fmnist ? ct_string_list_get(&fmnist->class_names, k) : SHAPE_NAMES[k];
    st = ct_string_list_push(&d->class_names, name, strlen(name));
  }
  int64_t cap = 0;
  ct_rng r =
      ct_rng_make(seed, ct_rng_stream(CT_DETECTION_RNG_TOY, (uint64_t)split));
  for (int64_t i = 0; i < n && !st; i++) {
    uint8_t *img = ct_detection_image(d, i);
    int base = below(&r, 48);
    for (int p = 0; p < size * size; p++)
      img[p] = (uint8_t)(base + below(&r, 32));
    d->box_start[i + 1] = d->box_start[i];
    int objects = below(&r, max_objects + 1);
    for (int o = 0; o < objects && !st; o++)
      for (int attempt = 0; attempt < PLACE_TRIES; attempt++) {
        int s = min_side + below(&r, max_side - min_side + 1);
        int x0 = below(&r, size - s + 1), y0 = below(&r, size - s + 1);
        ct_detection_box b;
        if (fmnist) {
          int64_t j = eligible[ct_rng_next_below(&r, (uint64_t)n_eligible)];
          b.label = fmnist->labels[j];
          ct_toy_draw_item(cell, s, fmnist, j);
        } else {
          b.label = below(&r, classes);
          ct_toy_draw_shape(cell, s, b.label, &r,
                            (uint8_t)(150 + below(&r, 106)));
        }
        if (!ct_toy_cell_box(cell, s, x0, y0, &b) ||
            overlaps_too_much(ct_detection_boxes(d, i),
                              ct_detection_box_count(d, i), &b))
          continue;
        for (int y = 0; y < s; y++)
          for (int x = 0; x < s; x++)
            if (cell[y * s + x])
              img[(y0 + y) * size + x0 + x] = cell[y * s + x];
        st = push_box(d, &cap, i, b);
        break;
      }
  }
  free(cell);
  free(eligible);
  if (st) ct_detection_dataset_free(d);
  return st;
}

// ---- COCO: reading -------------------------------------------------------------

// Reads the categories: their ids sorted (label = rank) and names.
static ct_status coco_categories(ct_coco_ctx *c, const ct_json_value *list,
                                 ct_coco_id **ids, ct_string_list *names) {
  *ids = malloc((size_t)(list->count ? list->count : 1) * sizeof **ids);
  if (!*ids) return ct_error(CT_ERR_NOMEM, "%s: out of memory", c->path);
  if (!list->count)
    return ct_error(CT_ERR_FORMAT,
                    "%s:%d:%d: \"categories\" is empty: a "
                    "detection set needs at least one class",
                    c->path, list->line, list->column);
  c->list = "categories";
  c->index = 0;
  for (const ct_json_value *e = ct_json_first(c->doc, list); e;
       e = ct_json_next(c->doc, e), c->index++) {
    const ct_json_value *name;
    if (e->type != CT_JVAL_OBJECT)
      return ct_coco_fail(c, CT_ERR_FORMAT, e, "must be an object");
    ct_status st = ct_coco_int(c, e, "id", &(*ids)[c->index].id);
    if (!st) st = ct_coco_member(c, e, "name", CT_JVAL_STRING, &name);
    if (!st) {
      const char *text = ct_json_str(c->doc, name);
      if (ct_image_check_class_name(text, strlen(text), "\"name\""))
        return ct_coco_fail(c, CT_ERR_FORMAT, name, "%s", ct_last_error());
    }
    if (st) return st;
    (*ids)[c->index].index = c->index;
    (*ids)[c->index].at = e;
  }
  ct_status st = ct_coco_sort_ids(c, *ids, list->count);
  for (int64_t k = 0; k < list->count && !st; k++) {
    const ct_json_value *e = (*ids)[k].at;
    const char *name = ct_json_str(c->doc, ct_json_member(c->doc, e, "name"));
    st = ct_string_list_push(names, name, strlen(name));
  }
  return st;
}

// One annotation checked: its image (position in ims), label and box in the
// image's declared pixels, clipped to it.
static ct_status coco_annotation(const ct_coco_ctx *c, const ct_json_value *e,
                                 const ct_coco_id *image_ids, int64_t n_images,
                                 const ct_coco_image *ims,
                                 const ct_coco_id *cat_ids, int64_t n_cats,
                                 int64_t *image, ct_detection_box *box) {
  const ct_json_value *bbox;
  int64_t image_id, category_id;
  if (e->type != CT_JVAL_OBJECT)
    return ct_coco_fail(c, CT_ERR_FORMAT, e, "must be an object");
  ct_status st = ct_coco_int(c, e, "image_id", &image_id);
  if (!st) st = ct_coco_int(c, e, "category_id", &category_id);
  if (!st) st = ct_coco_member(c, e, "bbox", CT_JVAL_ARRAY, &bbox);
  if (st) return st;
  int64_t at = ct_coco_find_id(image_ids, n_images, image_id);
  if (at < 0)
    return ct_coco_fail(c, CT_ERR_INDEX, ct_json_member(c->doc, e, "image_id"),
                        "unknown image_id %lld", (long long)image_id);
  int64_t label = ct_coco_find_id(cat_ids, n_cats, category_id);
  if (label < 0)
    return ct_coco_fail(c, CT_ERR_INDEX,
                        ct_json_member(c->doc, e, "category_id"),
                        "unknown category_id %lld", (long long)category_id);
  *image = image_ids[at].index;
  float xywh[4];
  st = ct_coco_bbox(c, bbox, &ims[*image], xywh);
  if (st) return st;
  *box = (ct_detection_box){.label = (int32_t)label,
                            .x = xywh[0],
                            .y = xywh[1],
                            .w = xywh[2],
                            .h = xywh[3]};
  return CT_OK;
}

ct_status ct_coco_load(ct_detection_dataset *d, const char *json_path,
                       const char *image_dir, int channels, int size) {
  *d = (ct_detection_dataset){0};
  ct_json_doc doc;
  ct_coco_ctx c;
  ct_status st = ct_coco_open(&c, &doc, json_path, channels, size);
  if (st) return st;
  const ct_json_value *images, *anns, *cats;
  const char *keys = "images, annotations and categories";
  st = ct_coco_list(&c, "images", keys, &images);
  if (!st) st = ct_coco_list(&c, "annotations", keys, &anns);
  if (!st) st = ct_coco_list(&c, "categories", keys, &cats);
  if (st) {
    ct_json_doc_free(&doc);
    return st;
  }
  int64_t N = images->count, A = anns->count;
  ct_coco_image *ims = calloc((size_t)(N ? N : 1), sizeof *ims);
  ct_coco_id *image_ids = calloc((size_t)(N ? N : 1), sizeof *image_ids);
  int64_t *ann_image = malloc((size_t)(A ? A : 1) * sizeof *ann_image);
  ct_detection_box *ann_box = malloc((size_t)(A ? A : 1) * sizeof *ann_box);
  ct_coco_id *cat_ids = NULL;
  ct_string_list names = {0};
  if (!ims || !image_ids || !ann_image || !ann_box)
    st = ct_error(CT_ERR_NOMEM, "%s: out of memory", json_path);
  if (!st) st = coco_categories(&c, cats, &cat_ids, &names);
  if (!st) st = ct_coco_images(&c, images, ims, image_ids);
  c.list = "annotations";
  c.index = 0;
  for (const ct_json_value *e = ct_json_first(&doc, anns); e && !st;
       e = ct_json_next(&doc, e), c.index++)
    st = coco_annotation(&c, e, image_ids, N, ims, cat_ids, cats->count,
                         &ann_image[c.index], &ann_box[c.index]);
  // The stored size: the one asked for, or the images' own (all equal).
  int H = size, W = size;
  if (!st) st = ct_coco_stored_size(json_path, ims, N, size, &H, &W);
  if (!st && N == 0)
    st = ct_error(CT_ERR_FORMAT, "%s: \"images\" is empty", json_path);
  if (!st) st = detection_alloc(d, N, channels, H, W, (int)cats->count);
  if (!st) {
    d->class_names = names;
    names = (ct_string_list){0};
    // Boxes grouped by image, each image's in annotation order.
    d->boxes = malloc((size_t)(A ? A : 1) * sizeof *d->boxes);
    if (!d->boxes) st = ct_error(CT_ERR_NOMEM, "%s: out of memory", json_path);
  }
  int64_t *next = NULL;  // each image's next box slot
  if (!st && !(next = malloc((size_t)N * sizeof *next)))
    st = ct_error(CT_ERR_NOMEM, "%s: out of memory", json_path);
  if (!st) {
    for (int64_t a = 0; a < A; a++) d->box_start[ann_image[a] + 1]++;
    for (int64_t i = 0; i < N; i++) d->box_start[i + 1] += d->box_start[i];
    for (int64_t i = 0; i < N; i++) next[i] = d->box_start[i];
    for (int64_t a = 0; a < A; a++) {
      const ct_coco_image *im = &ims[ann_image[a]];
      double sx = (double)W / (double)im->width;
      double sy = (double)H / (double)im->height;
      ct_detection_box b = ann_box[a];
      b.x = (float)(b.x * sx);
      b.w = (float)(b.w * sx);
      b.y = (float)(b.y * sy);
      b.h = (float)(b.h * sy);
      d->boxes[next[ann_image[a]]++] = b;
    }
  }
  for (int64_t i = 0; i < N && !st; i++)
    st = ct_coco_read_png(ct_detection_image(d, i), d->C, d->H, d->W, image_dir,
                          &ims[i], i, json_path);
  free(next);
  free(ims);
  free(image_ids);
  free(ann_image);
  free(ann_box);
  free(cat_ids);
  ct_string_list_free(&names);
  ct_json_doc_free(&doc);
  if (st) ct_detection_dataset_free(d);
  return st;
}

// ---- COCO: writing -------------------------------------------------------------

// A ct_json_put_fn writing to the FILE `sink`.
static void file_put(void *sink, const void *bytes, size_t n) {
  fwrite(bytes, 1, n, sink);
}

static ct_status write_split(const char *dir, const char *split,
                             const ct_detection_dataset *d, bool overwrite) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, split);
  ct_status st = ct_make_dirs(path);
  if (st) return st;
  int64_t plane = (int64_t)d->H * d->W;
  uint8_t *rgb = d->C == 3 ? malloc((size_t)plane * 3) : NULL;
  if (d->C == 3 && !rgb)
    return ct_error(CT_ERR_NOMEM, "toy detection: out of memory");
  for (int64_t i = 0; i < d->N && !st; i++) {
    snprintf(path, sizeof path, "%s/%s/%06lld.png", dir, split, (long long)i);
    if ((st = ct_refuse_existing(path, overwrite))) break;
    const uint8_t *src = ct_detection_image(d, i);
    if (rgb) {  // channel-first to interleaved
      for (int64_t p = 0; p < plane; p++)
        for (int ch = 0; ch < 3; ch++) rgb[p * 3 + ch] = src[ch * plane + p];
      src = rgb;
    }
    png_image img = {.version = PNG_IMAGE_VERSION,
                     .width = (png_uint_32)d->W,
                     .height = (png_uint_32)d->H,
                     .format = rgb ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY};
    if (!png_image_write_to_file(&img, path, 0, src, 0, NULL)) {
      st = ct_error(CT_ERR_IO, "%s: cannot write: %s", path, img.message);
      png_image_free(&img);
    }
  }
  free(rgb);
  if (st) return st;
  snprintf(path, sizeof path, "%s/%s.json", dir, split);
  if ((st = ct_refuse_existing(path, overwrite))) return st;
  errno = 0;
  FILE *f = fopen(path, "w");
  if (!f)
    return ct_error(CT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  fprintf(f, "{\n\"images\": [");
  for (int64_t i = 0; i < d->N; i++)
    fprintf(f,
            "%s\n  {\"id\": %lld, \"file_name\": \"%06lld.png\", "
            "\"width\": %d, \"height\": %d}",
            i ? "," : "", (long long)i + 1, (long long)i, d->W, d->H);
  fprintf(f, "\n],\n\"annotations\": [");
  for (int64_t i = 0, a = 0; i < d->N; i++)
    for (int64_t t = 0; t < ct_detection_box_count(d, i); t++, a++) {
      const ct_detection_box *b = &ct_detection_boxes(d, i)[t];
      fprintf(f,
              "%s\n  {\"id\": %lld, \"image_id\": %lld, \"category_id\": "
              "%d, \"bbox\": [%.9g, %.9g, %.9g, %.9g], \"area\": %.9g, "
              "\"iscrowd\": 0}",
              a ? "," : "", (long long)a + 1, (long long)i + 1, b->label + 1,
              b->x, b->y, b->w, b->h, (double)b->w * b->h);
    }
  fprintf(f, "\n],\n\"categories\": [");
  for (int k = 0; k < d->K; k++) {
    fprintf(f, "%s\n  {\"id\": %d, \"name\": ", k ? "," : "", k + 1);
    ct_json_write_string(ct_string_list_get(&d->class_names, k), file_put, f);
    fputc('}', f);
  }
  fprintf(f, "\n]\n}\n");
  bool failed = ferror(f) != 0;
  if (fclose(f) != 0 || failed) {
    remove(path);
    return ct_error(CT_ERR_IO, "%s: write failed", path);
  }
  return CT_OK;
}

ct_status ct_toy_detection_write(const char *dir,
                                 const ct_detection_dataset *train,
                                 const ct_detection_dataset *val,
                                 bool overwrite) {
  // Room for the longest name written (DIR/train/NNNNNN.png and longer
  // indices) in the 4096-byte buffers.
  char room[4096];
  if (ct_path_format(room, sizeof room, "%s/%0*d", dir, 64, 0) != CT_OK)
    return ct_last_status();
  const ct_detection_dataset *sets[2] = {train, val};
  for (int s = 0; s < 2; s++)
    if (sets[s]->C != 1 && sets[s]->C != 3)
      return ct_error(CT_ERR_ARG,
                      "toy detection: %d channels: PNG files "
                      "hold 1 (gray) or 3 (RGB)",
                      sets[s]->C);
  ct_status st = ct_make_dirs(dir);
  if (!st) st = write_split(dir, "train", train, overwrite);
  if (!st) st = write_split(dir, "val", val, overwrite);
  return st;
}
