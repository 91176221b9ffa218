// Detection data (data/detection.h, data/json.h): the generated set is
// deterministic and well-formed (0..6 boxes, inside the image, labels in
// range, overlaps bounded), with shapes and with pasted items; the COCO
// writer and loader round-trip the boxes (also rescaled); every kind of bad
// annotation file or image gives its error naming the file (and the entry);
// the JSON reader's strictness and escapes, and its CT_JSON_PYTHON mode.
#include "data/detection.h"
#include "data/idx.h"
#include "data/json.h"
#include "tests/harness.h"

#include <dirent.h>
#include <png.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmp_dir[512];

static const char *tmp_path(const char *name) {
  static char buf[8][1024];
  static int next;
  char *p = buf[next++ % 8];
  snprintf(p, sizeof buf[0], "%s/%s", tmp_dir, name);
  return p;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  fputs(text, f);
  fclose(f);
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  char path[1024];
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
      remove_tree(path);
    else
      remove(path);
  }
  closedir(d);
  rmdir(dir);
}

static void check_error(ct_status st, ct_status want, const char *needle,
                        const char *needle2, const char *what) {
  CHECK(st == want, "%s: status %s, want %s (%s)", what, ct_status_name(st),
        ct_status_name(want), ct_last_error());
  CHECK(strstr(ct_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'",
        what, ct_last_error(), needle);
  if (needle2)
    CHECK(strstr(ct_last_error(), needle2) != NULL,
          "%s: message '%s' lacks '%s'", what, ct_last_error(), needle2);
}

static bool same_sets(const ct_detection_dataset *a,
                      const ct_detection_dataset *b) {
  if (a->N != b->N || a->C != b->C || a->H != b->H || a->W != b->W ||
      a->K != b->K)
    return false;
  if (memcmp(a->pixels, b->pixels, (size_t)(a->N * a->C * a->H * a->W)) ||
      memcmp(a->box_start, b->box_start, (size_t)(a->N + 1) * sizeof(int64_t)))
    return false;
  for (int64_t i = 0; i < a->box_start[a->N]; i++)
    if (a->boxes[i].label != b->boxes[i].label ||
        a->boxes[i].x != b->boxes[i].x || a->boxes[i].y != b->boxes[i].y ||
        a->boxes[i].w != b->boxes[i].w || a->boxes[i].h != b->boxes[i].h)
      return false;
  return true;
}

// Boxes inside the image, labels in range, counts 0..6, IoU < 0.5; returns
// the histogram of box counts and of labels.
static void check_properties(const ct_detection_dataset *d, const char *what,
                             int64_t counts[7], int64_t *labels) {
  for (int64_t i = 0; i < d->N; i++) {
    int64_t T = ct_detection_box_count(d, i);
    CHECK(T >= 0 && T <= CT_TOY_DETECTION_MAX_OBJECTS,
          "%s: image %lld has "
          "%lld boxes",
          what, (long long)i, (long long)T);
    if (T < 0 || T > CT_TOY_DETECTION_MAX_OBJECTS) continue;
    counts[T]++;
    const ct_detection_box *b = ct_detection_boxes(d, i);
    for (int64_t t = 0; t < T; t++) {
      CHECK(b[t].label >= 0 && b[t].label < d->K, "%s: label %d", what,
            b[t].label);
      if (b[t].label >= 0 && b[t].label < d->K) labels[b[t].label]++;
      CHECK(b[t].x >= 0 && b[t].y >= 0 && b[t].w >= 1 && b[t].h >= 1 &&
                b[t].x + b[t].w <= d->W && b[t].y + b[t].h <= d->H,
            "%s: image %lld box %lld (%g %g %g %g) outside %dx%d", what,
            (long long)i, (long long)t, b[t].x, b[t].y, b[t].w, b[t].h, d->W,
            d->H);
      CHECK(b[t].w <= d->W / 2 && b[t].h <= d->H / 2, "%s: box too big", what);
      for (int64_t u = 0; u < t; u++) {
        float p[4], q[4];
        ct_detection_box_xyxy(&b[t], p);
        ct_detection_box_xyxy(&b[u], q);
        CHECK(ct_detection_iou(p, q) < 0.5,
              "%s: image %lld boxes %lld, %lld "
              "overlap with IoU %g",
              what, (long long)i, (long long)t, (long long)u,
              ct_detection_iou(p, q));
      }
    }
  }
}

static void test_generate(void) {
  ct_detection_dataset a, b, c, v;
  CHECK(!ct_toy_detection_generate(&a, 300, 64, 6, 7, 0, NULL), "%s",
        ct_last_error());
  CHECK(!ct_toy_detection_generate(&b, 300, 64, 6, 7, 0, NULL), "%s",
        ct_last_error());
  CHECK(!ct_toy_detection_generate(&c, 40, 64, 6, 7, 0, NULL), "%s",
        ct_last_error());
  CHECK(!ct_toy_detection_generate(&v, 300, 64, 6, 7, 1, NULL), "%s",
        ct_last_error());
  CHECK(same_sets(&a, &b), "same seed and split: different sets");
  CHECK(!same_sets(&a, &v), "train and val splits are equal");
  // The first 40 images do not depend on n.
  CHECK(
      !memcmp(a.pixels, c.pixels, 40 * 64 * 64) &&
          !memcmp(a.box_start, c.box_start, 41 * sizeof(int64_t)) &&
          !memcmp(a.boxes, c.boxes, (size_t)c.box_start[40] * sizeof *c.boxes),
      "a prefix differs when n changes");
  CHECK(a.N == 300 && a.C == 1 && a.H == 64 && a.W == 64 && a.K == 6,
        "shape %lld %d %d %d K %d", (long long)a.N, a.C, a.H, a.W, a.K);
  CHECK(!strcmp(ct_string_list_get(&a.class_names, 1), "disk") &&
            !strcmp(ct_string_list_get(&a.class_names, 5), "bar"),
        "class names");
  int64_t counts[7] = {0}, labels[6] = {0};
  check_properties(&a, "shapes", counts, labels);
  for (int n = 0; n <= 6; n++)
    CHECK(counts[n] > 0, "no image with %d objects in 300", n);
  for (int k = 0; k < 6; k++) CHECK(labels[k] > 0, "class %d never drawn", k);
  printf("box counts 0..6:");
  for (int n = 0; n <= 6; n++) printf(" %lld", (long long)counts[n]);
  printf("\n");
  // Objects are bright (>= 150) on a dark background (< 80): the tight box
  // touches object pixels on all four sides; the last object drawn is
  // never covered, and the others almost never entirely.
  {
    int64_t visible = 0;
    for (int64_t i = 0; i < a.N; i++) {
      const uint8_t *img = ct_detection_image(&a, i);
      int lit = 0;
      for (int p = 0; p < 64 * 64; p++) lit += img[p] >= 80;
      int64_t T = ct_detection_box_count(&a, i);
      for (int64_t t = 0; t < T; t++) {
        const ct_detection_box *bx = &ct_detection_boxes(&a, i)[t];
        int x0 = (int)bx->x, y0 = (int)bx->y, x1 = x0 + (int)bx->w - 1,
            y1 = y0 + (int)bx->h - 1, sides = 0, bright = 0;
        for (int x = x0; x <= x1; x++) {
          sides |= (img[y0 * 64 + x] >= 150) << 0;
          sides |= (img[y1 * 64 + x] >= 150) << 1;
        }
        for (int y = y0; y <= y1; y++) {
          sides |= (img[y * 64 + x0] >= 150) << 2;
          sides |= (img[y * 64 + x1] >= 150) << 3;
          for (int x = x0; x <= x1; x++) bright += img[y * 64 + x] >= 80;
        }
        visible += bright > 0;
        if (t == T - 1)
          CHECK(sides == 15,
                "image %lld: the last box does not touch its "
                "object on every side (%x)",
                (long long)i, sides);
      }
      if (T == 0)
        CHECK(lit == 0, "image %lld: bright pixels but no box", (long long)i);
    }
    CHECK(visible >= a.box_start[a.N] * 98 / 100,
          "only %lld of %lld boxes "
          "show their object",
          (long long)visible, (long long)a.box_start[a.N]);
  }
  // Targets: normalized (cx, cy, w, h), and back to the same pixel corners.
  {
    int64_t i = 0;
    while (ct_detection_box_count(&a, i) < 2) i++;
    int32_t lab[6];
    float t[24], xy[24];
    int64_t T = ct_detection_targets(&a, i, lab, t);
    CHECK(T == ct_detection_box_count(&a, i), "target count");
    ct_detection_cxcywh_to_pixels(t, T, a.W, a.H, xy);
    for (int64_t k = 0; k < T; k++) {
      const ct_detection_box *bx = &ct_detection_boxes(&a, i)[k];
      float want[4];
      ct_detection_box_xyxy(bx, want);
      CHECK(lab[k] == bx->label, "target label");
      CHECK_CLOSE(t[4 * k + 0], (bx->x + bx->w / 2) / 64, 1e-6, "cx");
      CHECK_CLOSE(t[4 * k + 3], bx->h / 64, 1e-6, "h");
      for (int j = 0; j < 4; j++)
        CHECK_CLOSE(xy[4 * k + j], want[j], 1e-4, "xyxy");
    }
  }
  CHECK(ct_detection_max_boxes(&a) == 6, "max boxes %lld",
        (long long)ct_detection_max_boxes(&a));
  ct_detection_dataset bad;
  check_error(ct_toy_detection_generate(&bad, 10, 64, 7, 1, 0, NULL),
              CT_ERR_ARG, "7 classes", NULL, "too many classes");
  check_error(ct_toy_detection_generate(&bad, 10, 8, 2, 1, 0, NULL), CT_ERR_ARG,
              "16, 1024", NULL, "too small");
  ct_detection_dataset_free(&a);
  ct_detection_dataset_free(&b);
  ct_detection_dataset_free(&c);
  ct_detection_dataset_free(&v);
}

// Object sizes and counts: all 0 (or the defaults spelled out) give the
// default set bit for bit; a small-object set keeps its sides and counts.
static void test_generate_sized(void) {
  ct_detection_dataset a, z, e, s;
  const ct_toy_detection_sizes zero = {0}, spelled = {8, 32, 6},
                               small = {4, 10, 20};
  CHECK(!ct_toy_detection_generate(&a, 100, 64, 4, 3, 0, NULL), "%s",
        ct_last_error());
  CHECK(!ct_toy_detection_generate_sized(&z, 100, 64, 4, 3, 0, NULL, &zero),
        "%s", ct_last_error());
  CHECK(!ct_toy_detection_generate_sized(&e, 100, 64, 4, 3, 0, NULL, &spelled),
        "%s", ct_last_error());
  CHECK(same_sets(&a, &z), "sizes all 0: not the default set");
  CHECK(same_sets(&a, &e), "sizes 8, 32, 6: not the default set");
  CHECK(!ct_toy_detection_generate_sized(&s, 100, 64, 4, 3, 0, NULL, &small),
        "%s", ct_last_error());
  int64_t most = 0, over6 = 0;
  for (int64_t i = 0; i < s.N; i++) {
    int64_t T = ct_detection_box_count(&s, i);
    most = T > most ? T : most;
    over6 += T > 6;
    for (int64_t t = 0; t < T; t++) {
      const ct_detection_box *b = &ct_detection_boxes(&s, i)[t];
      CHECK(b->w >= 1 && b->h >= 1 && b->w <= 10 && b->h <= 10,
            "small set: image %lld box %lld is %gx%g, want sides <= 10",
            (long long)i, (long long)t, (double)b->w, (double)b->h);
    }
  }
  CHECK(most <= 20 && over6 > 20,
        "small set: at most %lld objects, %lld images with more than 6",
        (long long)most, (long long)over6);
  printf("small set: %lld boxes in 100 images, at most %lld per image\n",
         (long long)s.box_start[s.N], (long long)most);
  ct_detection_dataset bad;
  const ct_toy_detection_sizes inverted = {12, 10, 0}, tiny = {2, 0, 0},
                               huge = {0, 65, 0}, crowd = {0, 0, 65};
  check_error(
      ct_toy_detection_generate_sized(&bad, 10, 64, 4, 1, 0, NULL, &inverted),
      CT_ERR_ARG, "12..10", NULL, "min > max");
  check_error(
      ct_toy_detection_generate_sized(&bad, 10, 64, 4, 1, 0, NULL, &tiny),
      CT_ERR_ARG, "2..32", "4 <= min", "min < 4");
  check_error(
      ct_toy_detection_generate_sized(&bad, 10, 64, 4, 1, 0, NULL, &huge),
      CT_ERR_ARG, "8..65", "image size 64", "max > size");
  check_error(
      ct_toy_detection_generate_sized(&bad, 10, 64, 4, 1, 0, NULL, &crowd),
      CT_ERR_ARG, "65 objects", "[1, 64]", "too many objects");
  ct_detection_dataset_free(&a);
  ct_detection_dataset_free(&z);
  ct_detection_dataset_free(&e);
  ct_detection_dataset_free(&s);
}

// Pasted items: a made-up 10-class item set (28x28 blobs), as Fashion-MNIST.
static void test_generate_items(void) {
  ct_image_dataset items;
  CHECK(!ct_image_dataset_alloc(&items, 30, 1, 28, 28, 10), "%s",
        ct_last_error());
  for (int64_t j = 0; j < 30; j++) {
    items.labels[j] = (int32_t)(j % 10);
    uint8_t *im = ct_image_dataset_image(&items, j);
    for (int y = 4; y < 24; y++)
      for (int x = 6 + (int)(j % 5); x < 22; x++)
        im[y * 28 + x] = (uint8_t)(60 + 5 * j);
  }
  ct_detection_dataset a, b;
  CHECK(!ct_toy_detection_generate(&a, 100, 64, 3, 5, 0, &items), "%s",
        ct_last_error());
  CHECK(!ct_toy_detection_generate(&b, 100, 64, 3, 5, 0, &items), "%s",
        ct_last_error());
  CHECK(same_sets(&a, &b), "items: not deterministic");
  CHECK(a.K == 3 && !strcmp(ct_string_list_get(&a.class_names, 2), "2"),
        "items: K %d", a.K);
  int64_t counts[7] = {0}, labels[3] = {0};
  check_properties(&a, "items", counts, labels);
  for (int k = 0; k < 3; k++) CHECK(labels[k] > 0, "item class %d unused", k);
  ct_detection_dataset bad;
  check_error(ct_toy_detection_generate(&bad, 10, 64, 11, 1, 0, &items),
              CT_ERR_ARG, "11 classes", NULL, "items: too many classes");
  ct_detection_dataset_free(&a);
  ct_detection_dataset_free(&b);
  ct_image_dataset_free(&items);

  // Real Fashion-MNIST items when installed (its test split is enough).
  const char *fm = "/usr/share/datasets/fashion-mnist";
  if (ct_idx_load_dir(&items, fm, false, 10)) {
    printf("Fashion-MNIST not found in %s: skipping its pasted set\n", fm);
    return;
  }
  ct_image_dataset_set_names(&items, ct_fashion_mnist_class_names, 10);
  CHECK(!ct_toy_detection_generate(&a, 60, 96, 10, 2, 0, &items), "%s",
        ct_last_error());
  int64_t fcounts[7] = {0}, flabels[10] = {0};
  check_properties(&a, "fashion-mnist", fcounts, flabels);
  CHECK(a.K == 10 && !strcmp(ct_string_list_get(&a.class_names, 9),
                             ct_fashion_mnist_class_names[9]),
        "Fashion-MNIST names");
  ct_detection_dataset_free(&a);
  ct_image_dataset_free(&items);
}

static void test_coco_round_trip(void) {
  ct_detection_dataset train, val, back, half, rgb;
  CHECK(!ct_toy_detection_generate(&train, 24, 64, 4, 3, 0, NULL), "%s",
        ct_last_error());
  CHECK(!ct_toy_detection_generate(&val, 8, 64, 4, 3, 1, NULL), "%s",
        ct_last_error());
  const char *dir = tmp_path("toydet");
  CHECK(!ct_toy_detection_write(dir, &train, &val, false), "%s",
        ct_last_error());
  check_error(ct_toy_detection_write(dir, &train, &val, false), CT_ERR_IO,
              "already exists", "000000.png", "no overwrite");
  CHECK(!ct_toy_detection_write(dir, &train, &val, true), "%s",
        ct_last_error());

  CHECK(!ct_coco_load(&back, tmp_path("toydet/train.json"),
                      tmp_path("toydet/train"), 1, 64),
        "%s", ct_last_error());
  CHECK(same_sets(&train, &back), "round trip at the same size differs");
  for (int k = 0; k < 4 && back.K == 4; k++)
    CHECK(!strcmp(ct_string_list_get(&back.class_names, k),
                  ct_string_list_get(&train.class_names, k)),
          "name %d", k);
  ct_detection_dataset_free(&back);
  CHECK(!ct_coco_load(&back, tmp_path("toydet/val.json"),
                      tmp_path("toydet/val"), 1, 0),
        "%s", ct_last_error());
  CHECK(same_sets(&val, &back), "val round trip (own size) differs");
  ct_detection_dataset_free(&back);

  // Rescaled: boxes scale with the image (0.5 is exact in float).
  CHECK(!ct_coco_load(&half, tmp_path("toydet/train.json"),
                      tmp_path("toydet/train"), 1, 32),
        "%s", ct_last_error());
  CHECK(half.H == 32 && half.W == 32 && half.N == train.N, "half size");
  bool equal = half.box_start[half.N] == train.box_start[train.N];
  for (int64_t i = 0; equal && i < train.box_start[train.N]; i++) {
    const ct_detection_box *p = &train.boxes[i], *q = &half.boxes[i];
    equal = p->label == q->label && q->x == p->x / 2 && q->y == p->y / 2 &&
            q->w == p->w / 2 && q->h == p->h / 2;
  }
  CHECK(equal, "rescaled boxes differ");
  // The normalized targets do not change with the size.
  for (int64_t i = 0; i < train.N; i++) {
    float t1[24], t2[24];
    int64_t T = ct_detection_targets(&train, i, NULL, t1);
    ct_detection_targets(&half, i, NULL, t2);
    for (int64_t j = 0; j < 4 * T; j++)
      CHECK_CLOSE(t2[j], t1[j], 1e-6, "target");
  }
  ct_detection_dataset_free(&half);

  // RGB: gray replicated into three channels.
  CHECK(!ct_coco_load(&rgb, tmp_path("toydet/val.json"), tmp_path("toydet/val"),
                      3, 64),
        "%s", ct_last_error());
  CHECK(rgb.C == 3 && !memcmp(ct_detection_image(&rgb, 1) + 2 * 64 * 64,
                              ct_detection_image(&val, 1), 64 * 64),
        "RGB load");
  // An RGB set written and read back, with category names that need
  // escaping (ct_json_write_string) in the file.
  const char *names[] = {"qu\"ote", "back\\slash/", "tab\there",
                         "caf\xC3\xA9 \xF0\x9F\x98\x80"};
  ct_string_list_clear(&rgb.class_names);
  for (int k = 0; k < 4; k++)
    ct_string_list_push(&rgb.class_names, names[k], strlen(names[k]));
  CHECK(!ct_toy_detection_write(tmp_path("rgbdet"), &rgb, &rgb, false), "%s",
        ct_last_error());
  CHECK(!ct_coco_load(&back, tmp_path("rgbdet/val.json"),
                      tmp_path("rgbdet/val"), 3, 64),
        "%s", ct_last_error());
  CHECK(same_sets(&rgb, &back), "RGB round trip differs");
  for (int k = 0; k < 4 && back.K == 4; k++)
    CHECK(!strcmp(ct_string_list_get(&back.class_names, k), names[k]),
          "escaped name %d: '%s'", k, ct_string_list_get(&back.class_names, k));
  ct_detection_dataset_free(&back);
  ct_detection_dataset_free(&rgb);
  ct_detection_dataset_free(&train);
  ct_detection_dataset_free(&val);
}

// ---- bad input ------------------------------------------------------------------

static void write_gray_png(const char *path, int w, int h) {
  uint8_t *px = calloc((size_t)w * h, 1);
  for (int i = 0; i < w * h; i++) px[i] = (uint8_t)(i * 7);
  png_image img = {.version = PNG_IMAGE_VERSION,
                   .width = (png_uint_32)w,
                   .height = (png_uint_32)h,
                   .format = PNG_FORMAT_GRAY};
  png_image_write_to_file(&img, path, 0, px, 0, NULL);
  free(px);
}

// A COCO file with two 20x10 images (a.png, b.png) and categories 7 "cat",
// 3 "dog"; `anns` is the annotations array's inside.
static void write_coco(const char *name, const char *anns) {
  char text[4096];
  snprintf(text, sizeof text,
           "{\"info\": {\"year\": 2024},\n"
           " \"images\": [{\"id\": 5, \"file_name\": \"a.png\", \"width\": 20, "
           "\"height\": 10},\n"
           "              {\"id\": 9, \"file_name\": \"b.png\", \"width\": 20, "
           "\"height\": 10, \"license\": 1}],\n"
           " \"annotations\": [%s],\n"
           " \"categories\": [{\"id\": 7, \"name\": \"cat\"}, {\"id\": 3, "
           "\"name\": \"dog\", \"supercategory\": \"animal\"}]}\n",
           anns);
  write_text(tmp_path(name), text);
}

static ct_status load(const char *json, int size) {
  ct_detection_dataset d;
  ct_status st = ct_coco_load(&d, tmp_path(json), tmp_path("img"), 1, size);
  ct_detection_dataset_free(&d);
  return st;
}

static void test_coco_errors(void) {
  mkdir(tmp_path("img"), 0755);
  write_gray_png(tmp_path("img/a.png"), 20, 10);
  write_gray_png(tmp_path("img/b.png"), 20, 10);

  // A good file: labels by category id order (3 "dog" -> 0, 7 "cat" -> 1),
  // a box 0.5 px past the border clipped, boxes grouped by image.
  write_coco(
      "good.json",
      "{\"image_id\": 9, \"category_id\": 7, \"bbox\": [1, 2, 3, 4]},"
      "{\"image_id\": 5, \"category_id\": 3, \"bbox\": [15, 5, 5.5, 5]},"
      "{\"image_id\": 9, \"category_id\": 3, \"bbox\": [0, 0, 2e1, 1E1]}");
  ct_detection_dataset d;
  CHECK(!ct_coco_load(&d, tmp_path("good.json"), tmp_path("img"), 1, 40), "%s",
        ct_last_error());
  if (d.N == 2) {
    CHECK(!strcmp(ct_string_list_get(&d.class_names, 0), "dog") &&
              !strcmp(ct_string_list_get(&d.class_names, 1), "cat"),
          "category order");
    CHECK(ct_detection_box_count(&d, 0) == 1 &&
              ct_detection_box_count(&d, 1) == 2,
          "boxes per image");
    const ct_detection_box *b0 = ct_detection_boxes(&d, 0);
    const ct_detection_box *b1 = ct_detection_boxes(&d, 1);
    // 20x10 -> 40x40: x scales by 2, y by 4; the clipped box is 5 wide.
    CHECK(b0->label == 0 && b0->x == 30 && b0->w == 10 && b0->y == 20 &&
              b0->h == 20,
          "clipped box %g %g %g %g", b0->x, b0->y, b0->w, b0->h);
    CHECK(b1[0].label == 1 && b1[0].x == 2 && b1[0].y == 8 && b1[0].w == 6 &&
              b1[0].h == 16,
          "box %g %g %g %g", b1[0].x, b1[0].y, b1[0].w, b1[0].h);
    CHECK(b1[1].label == 0 && b1[1].w == 40 && b1[1].h == 40, "whole box");
  }
  ct_detection_dataset_free(&d);

  write_text(tmp_path("malformed.json"),
             "{\"images\": [\n  {\"id\": 1,, \"file_name\": \"a.png\"}]}");
  check_error(load("malformed.json", 16), CT_ERR_FORMAT, "malformed.json:2:12",
              "expected a key string", "malformed JSON");
  write_text(tmp_path("trailing.json"), "{\"images\": [1, 2,]}");
  check_error(load("trailing.json", 16), CT_ERR_FORMAT, "trailing.json:1:18",
              "trailing ','", "trailing comma");
  write_text(tmp_path("truncated.json"), "{\"images\": [");
  check_error(load("truncated.json", 16), CT_ERR_FORMAT, "truncated.json:1:13",
              "end of input", "truncated JSON");
  write_text(tmp_path("top.json"), "[]");
  check_error(load("top.json", 16), CT_ERR_FORMAT, "top.json:1:1",
              "must be an object", "top level not an object");
  write_text(tmp_path("nocats.json"), "{\"images\": [], \"annotations\": []}");
  check_error(load("nocats.json", 16), CT_ERR_FORMAT, "nocats.json",
              "missing key \"categories\"", "missing categories");
  check_error(load("absent.json", 16), CT_ERR_IO, "absent.json", NULL,
              "missing file");
  // Category names are printed by detect and eval: a terminal escape
  // sequence in one is refused, naming where it is.
  write_text(tmp_path("escape.json"),
             "{\"images\": [], \"annotations\": [], \"categories\": "
             "[{\"id\": 1, \"name\": \"red\\u001b[31m\"}]}");
  check_error(load("escape.json", 16), CT_ERR_FORMAT,
              "escape.json:1:", "class name 'red...': control character U+001B",
              "escape sequence in a category name");
  // Trailing garbage after a gzip stream is an error, not ignored.
  {
    gzFile f = gzopen(tmp_path("garbage.json"), "wb");
    gzputs(f, "{\"images\": [], \"annotations\": [], \"categories\": []}");
    gzclose(f);
    FILE *g = fopen(tmp_path("garbage.json"), "ab");
    fputs("junk", g);
    fclose(g);
  }
  check_error(load("garbage.json", 16), CT_ERR_FORMAT, "garbage.json",
              "4 bytes of trailing garbage after the gzip data",
              "gzip trailing garbage");

  write_coco("nobbox.json",
             "{\"image_id\": 5, \"category_id\": 7, \"bbox\": [1, 1, 2, 2]},"
             "{\"image_id\": 5, \"category_id\": 7}");
  check_error(load("nobbox.json", 16), CT_ERR_FORMAT,
              "nobbox.json:4:", "annotations[1]: missing key \"bbox\"",
              "missing bbox");
  write_coco("badid.json",
             "{\"image_id\": 5, \"category_id\": 7, \"bbox\": [1, 1, 2, 2]},"
             "{\"image_id\": 99, \"category_id\": 7, \"bbox\": [1, 1, 2, 2]}");
  check_error(load("badid.json", 16), CT_ERR_INDEX, "badid.json",
              "annotations[1]: unknown image_id 99", "unknown image_id");
  write_coco("badcat.json",
             "{\"image_id\": 5, \"category_id\": 4, \"bbox\": [1, 1, 2, 2]}");
  check_error(load("badcat.json", 16), CT_ERR_INDEX, "badcat.json",
              "annotations[0]: unknown category_id 4", "unknown category_id");
  write_coco("zerow.json",
             "{\"image_id\": 5, \"category_id\": 3, \"bbox\": [1, 1, 0, 2]}");
  check_error(load("zerow.json", 16), CT_ERR_ARG, "zerow.json",
              "annotations[0]: bbox [1, 1, 0, 2]: width and height must be "
              "positive",
              "zero width");
  write_coco("negh.json",
             "{\"image_id\": 5, \"category_id\": 3, \"bbox\": [1, 1, 2, -3]}");
  check_error(load("negh.json", 16), CT_ERR_ARG, "negh.json",
              "must be positive", "negative height");
  write_coco("outside.json",
             "{\"image_id\": 5, \"category_id\": 3, \"bbox\": [1, 1, 2, 2]},"
             "{\"image_id\": 9, \"category_id\": 3, \"bbox\": [15, 2, 7, 2]}");
  check_error(load("outside.json", 16), CT_ERR_ARG, "outside.json",
              "annotations[1]: bbox [15, 2, 7, 2] lies outside its image "
              "(b.png, 20x10)",
              "box outside");
  write_coco(
      "left.json",
      "{\"image_id\": 5, \"category_id\": 3, \"bbox\": [-1.5, 1, 2, 2]}");
  check_error(load("left.json", 16), CT_ERR_ARG, "left.json", "lies outside",
              "box left of the image");
  write_coco("shortbox.json",
             "{\"image_id\": 5, \"category_id\": 3, \"bbox\": [1, 1, 2]}");
  check_error(load("shortbox.json", 16), CT_ERR_FORMAT, "shortbox.json",
              "\"bbox\" must be 4 numbers", "3-number bbox");
  write_coco(
      "strid.json",
      "{\"image_id\": \"5\", \"category_id\": 3, \"bbox\": [1, 1, 2, 2]}");
  check_error(load("strid.json", 16), CT_ERR_FORMAT, "strid.json",
              "\"image_id\" must be a number", "string id");
  write_coco("fracid.json",
             "{\"image_id\": 5.5, \"category_id\": 3, \"bbox\": [1, 1, 2, 2]}");
  check_error(load("fracid.json", 16), CT_ERR_FORMAT, "fracid.json",
              "must be an integer", "fractional id");

  write_text(tmp_path("dupimg.json"),
             "{\"images\": [{\"id\": 1, \"file_name\": \"a.png\", \"width\": "
             "20, \"height\": 10}, {\"id\": 1, \"file_name\": \"b.png\", "
             "\"width\": 20, \"height\": 10}], \"annotations\": [], "
             "\"categories\": [{\"id\": 1, \"name\": \"x\"}]}");
  check_error(load("dupimg.json", 16), CT_ERR_FORMAT, "dupimg.json",
              "images[1]: duplicate id 1", "duplicate image id");
  write_text(tmp_path("nofile.json"),
             "{\"images\": [{\"id\": 1, \"width\": 20, \"height\": 10}], "
             "\"annotations\": [], \"categories\": [{\"id\": 1, \"name\": "
             "\"x\"}]}");
  check_error(load("nofile.json", 16), CT_ERR_FORMAT, "nofile.json:1:13",
              "images[0]: missing key \"file_name\"", "missing file_name");

  // Images: missing, not a PNG, a size other than declared.
  write_text(tmp_path("missing_png.json"),
             "{\"images\": [{\"id\": 1, \"file_name\": \"a.png\", \"width\": "
             "20, \"height\": 10}, {\"id\": 2, \"file_name\": \"gone.png\", "
             "\"width\": 20, \"height\": 10}], \"annotations\": [], "
             "\"categories\": [{\"id\": 1, \"name\": \"x\"}]}");
  check_error(load("missing_png.json", 16), CT_ERR_IO, "img/gone.png",
              "images[1] of", "missing PNG");
  write_text(tmp_path("img/junk.png"), "this is not a PNG file at all");
  write_text(
      tmp_path("junk_png.json"),
      "{\"images\": [{\"id\": 1, \"file_name\": \"junk.png\", \"width\": "
      "20, \"height\": 10}], \"annotations\": [], "
      "\"categories\": [{\"id\": 1, \"name\": \"x\"}]}");
  check_error(load("junk_png.json", 16), CT_ERR_FORMAT, "img/junk.png",
              "not a PNG", "not a PNG");
  write_text(tmp_path("size_png.json"),
             "{\"images\": [{\"id\": 1, \"file_name\": \"a.png\", \"width\": "
             "30, \"height\": 10}], \"annotations\": [], "
             "\"categories\": [{\"id\": 1, \"name\": \"x\"}]}");
  check_error(load("size_png.json", 16), CT_ERR_FORMAT, "img/a.png",
              "declares 30x10", "declared size differs");
  write_text(tmp_path("mixed.json"),
             "{\"images\": [{\"id\": 1, \"file_name\": \"a.png\", \"width\": "
             "20, \"height\": 10}, {\"id\": 2, \"file_name\": \"c.png\", "
             "\"width\": 10, \"height\": 10}], \"annotations\": [], "
             "\"categories\": [{\"id\": 1, \"name\": \"x\"}]}");
  check_error(load("mixed.json", 0), CT_ERR_FORMAT, "mixed.json",
              "mismatched sizes", "own sizes differ");
}

// ---- the JSON reader -----------------------------------------------------------

static ct_status parse(const char *text) {
  ct_json_doc doc;
  ct_status st = ct_json_doc_parse(&doc, text, strlen(text), "t.json");
  ct_json_doc_free(&doc);
  return st;
}

static void test_json(void) {
  const char *text =
      "\xEF\xBB\xBF {\"a\": [1, -0.5e2, true, false, null],\r\n"
      "  \"s\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\","
      " \"o\": {}, \"e\": []}";
  ct_json_doc doc;
  CHECK(!ct_json_doc_parse(&doc, text, strlen(text), "t.json"), "%s",
        ct_last_error());
  const ct_json_value *root = ct_json_root(&doc);
  const ct_json_value *a = ct_json_member(&doc, root, "a");
  CHECK(a && a->type == CT_JVAL_ARRAY && a->count == 5, "array");
  const ct_json_value *x = ct_json_first(&doc, a);
  CHECK(x && x->number == 1, "1");
  x = ct_json_next(&doc, x);
  CHECK(x && x->number == -50 && x->line == 1 && x->column == 12,
        "-0.5e2 at %d:%d", x ? x->line : 0, x ? x->column : 0);
  x = ct_json_next(&doc, x);
  CHECK(x && x->type == CT_JVAL_BOOL && x->number == 1, "true");
  x = ct_json_next(&doc, ct_json_next(&doc, x));
  CHECK(x && x->type == CT_JVAL_NULL && !ct_json_next(&doc, x), "null last");
  const char *s = ct_json_str(&doc, ct_json_member(&doc, root, "s"));
  CHECK(s && !strcmp(s, "x\"\\/\b\f\n\r\t\xC3\xA9\xF0\x9F\x98\x80"),
        "escapes: '%s'", s ? s : "(null)");
  CHECK(ct_json_member(&doc, root, "s")->line == 2, "line of s");
  CHECK(ct_json_member(&doc, root, "o")->count == 0 &&
            !ct_json_first(&doc, ct_json_member(&doc, root, "e")),
        "empty containers");
  CHECK(!ct_json_member(&doc, root, "zz"), "absent key");
  ct_json_doc_free(&doc);

  const char *bad[][2] = {
      {"", "end of input"},
      {"01", "leading zero"},
      {"+1", "expected a value"},
      {"1.", "no digit after"},
      {"1e", "exponent"},
      {"NaN", "expected a value"},
      {"[1 2]", "expected ',' or ']'"},
      {"{\"a\" 1}", "expected ':'"},
      {"{'a': 1}", "expected a key string"},
      {"\"a\nb\"", "unterminated string"},
      {"\"\\x\"", "invalid escape"},
      {"\"\\u12\"", "4 hex digits"},
      {"\"\\ud800\"", "unpaired"},
      {"\"\\u0000\"", "\\u0000"},
      {"tru", "invalid literal"},
      {"{} {}", "after the JSON value"},
      {"[1,]", "trailing ','"},
      {"// c\n{}", "expected a value"},
      {"1e999", "out of range"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    check_error(parse(bad[i][0]), CT_ERR_FORMAT, bad[i][1],
                "t.json:", bad[i][0]);
  // Every proper prefix of a valid document is an error, never a crash
  // (the sanitizer build checks the reads).
  for (size_t n = 0; n < strlen(text); n++) {
    ct_json_doc part;
    ct_status st = ct_json_doc_parse(&part, text, n, "t.json");
    CHECK(st == CT_ERR_FORMAT, "prefix of %zu bytes: status %s", n,
          ct_status_name(st));
    ct_json_doc_free(&part);
  }
  // Deep nesting is refused, not a stack overflow.
  char deep[2 * CT_JSON_MAX_DEPTH + 8];
  memset(deep, '[', sizeof deep - 1);
  deep[sizeof deep - 1] = 0;
  check_error(parse(deep), CT_ERR_FORMAT, "nesting too deep", NULL, "deep");
}

// How numbers were written, the quiet variant, and what CT_JSON_PYTHON
// accepts beyond RFC 8259 (and strict parsing refuses).
static void test_json_modes(void) {
  const char *text = "[0, -12, 1.0, 1e2, 2E-1, 123456789012345678901234567890]";
  ct_json_doc doc;
  CHECK(!ct_json_doc_parse(&doc, text, strlen(text), "t.json"), "%s",
        ct_last_error());
  const bool integer[] = {true, true, false, false, false, true};
  int i = 0;
  for (const ct_json_value *v = ct_json_first(&doc, ct_json_root(&doc)); v;
       v = ct_json_next(&doc, v), i++)
    CHECK(v->integer == integer[i], "number %d: integer %d", i, v->integer);
  CHECK(i == 6, "%d numbers", i);
  ct_json_doc_free(&doc);

  // The quiet variant: the place and the reason in err, no last error.
  ct_error(CT_ERR_IO, "earlier");
  ct_json_error err;
  text = "{\"a\": 1,\n \"bee\" 2}";
  CHECK(ct_json_doc_parse_quiet(&doc, text, strlen(text), 0, &err) ==
                CT_ERR_FORMAT &&
            err.line == 2 && err.column == 8 &&
            !strcmp(err.what, "expected ':' after key 'bee'") &&
            !strcmp(ct_last_error(), "earlier") && doc.count == 0,
        "quiet: %d:%d %s / %s", err.line, err.column, err.what,
        ct_last_error());
  check_error(parse(text), CT_ERR_FORMAT,
              "t.json:2:8: expected ':' after key 'bee'", NULL, "loud");

  // Python's extensions: refused strictly, read with CT_JSON_PYTHON.
  text =
      "[NaN, Infinity, -Infinity, 1e999, \"\\ud800\", \"x\\udfff\\u0041\","
      " \"\\udbff\\udfff\", \"a\\u0000b\"]";
  CHECK(ct_json_doc_parse_quiet(&doc, text, strlen(text), 0, &err) ==
                CT_ERR_FORMAT &&
            err.column == 2,
        "strict: %d %s", err.column, err.what);
  CHECK(
      !ct_json_doc_parse_quiet(&doc, text, strlen(text), CT_JSON_PYTHON, &err),
      "python: %s", err.what);
  const ct_json_value *v = ct_json_first(&doc, ct_json_root(&doc));
  CHECK(v && isnan(v->number) && !v->integer, "NaN");
  v = ct_json_next(&doc, v);
  CHECK(v && v->number == INFINITY, "Infinity");
  v = ct_json_next(&doc, v);
  CHECK(v && v->number == -INFINITY, "-Infinity");
  v = ct_json_next(&doc, v);
  CHECK(v && v->number == INFINITY && !v->integer, "1e999");
  static const struct {
    const char *bytes;
    int64_t len;
  } strings[] = {
      {"\xED\xA0\x80", 3},  // a lone high surrogate, WTF-8
      {"x\xED\xBF\xBF"
       "A",
       5},                      // a lone low one
      {"\xF4\x8F\xBF\xBF", 4},  // the last pair: U+10FFFF
      {"a\0b", 3},              // \u0000 kept; C callers see "a"
  };
  for (int k = 0; k < 4; k++) {
    v = ct_json_next(&doc, v);
    CHECK(v && v->type == CT_JVAL_STRING &&
              ct_string_list_len(&doc.strings, v->str) == strings[k].len &&
              !memcmp(ct_json_str(&doc, v), strings[k].bytes,
                      (size_t)strings[k].len),
          "string %d", k);
  }
  ct_json_doc_free(&doc);
  const char *strict_only[][2] = {
      {"[\"\\udfff\"]", "unpaired"}, {"[\"\\udbff\\udbff\"]", "unpaired"},
      {"[\"x\\u0000\"]", "\\u0000"}, {"[-Infinity]", "invalid number"},
      {"[1e400]", "out of range"},
  };
  for (size_t k = 0; k < sizeof strict_only / sizeof strict_only[0]; k++) {
    const char *t = strict_only[k][0];
    check_error(parse(t), CT_ERR_FORMAT, strict_only[k][1], "t.json:1:", t);
    CHECK(!ct_json_doc_parse_quiet(&doc, t, strlen(t), CT_JSON_PYTHON, &err),
          "python %s: %s", t, err.what);
    ct_json_doc_free(&doc);
  }
  // Still refused with CT_JSON_PYTHON: other spellings and the usual errors.
  const char *never[] = {"[nan]",  "[inf]",       "[+1]", "[-Inf]",
                         "[NaNa]", "[\"\\u12\"]", "[01]", "[1,]"};
  for (size_t k = 0; k < sizeof never / sizeof never[0]; k++) {
    CHECK(ct_json_doc_parse_quiet(&doc, never[k], strlen(never[k]),
                                  CT_JSON_PYTHON, &err) == CT_ERR_FORMAT,
          "python accepted %s", never[k]);
    ct_json_doc_free(&doc);
  }
}

int main(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmp_dir, sizeof tmp_dir, "%s/ct_test_detection_XXXXXX",
           base && *base ? base : "/tmp");
  if (!mkdtemp(tmp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_generate();
  test_generate_sized();
  test_generate_items();
  test_coco_round_trip();
  test_coco_errors();
  test_json();
  test_json_modes();
  remove_tree(tmp_dir);
  return test_summary("detection_data");
}
