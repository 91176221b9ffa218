// PNG images other than line charts, read back with libpng: raw RGB
// (exact bytes), confusion matrices (cell colors by row fraction, counts
// drawn, K = 1..1000) and attention overlays (only the attended region is
// tinted, nearest-neighbour upscaling, panel layout for 64 images), the
// image under detection boxes and alignment matrices (cells gray by
// weight, words in and out of ASCII). Bad arguments and unwritable paths
// return an error and write nothing.
#include "core/error.h"
#include "tests/harness.h"
#include "tests/png_read.h"
#include "train/plot.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static const char *tmp_path(const char *name) {
  static char path[4][160];
  static int k;
  k = (k + 1) % 4;
  snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
  return path[k];
}

// Entries in the temp dir: an error must leave neither the file nor a
// temporary behind.
static int dir_entries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

typedef struct image {
  uint8_t *px;  // RGB
  int w, h;
} image;

static image image_load(const char *path) {
  image im = {NULL, 0, 0};
  im.px = png_load(path, &im.w, &im.h);
  CHECK(im.px != NULL, "%s: not a readable PNG", path);
  return im;
}

static const uint8_t *at(const image *im, int x, int y) {
  static const uint8_t outside[3] = {1, 2, 3};
  if (x < 0 || y < 0 || x >= im->w || y >= im->h) return outside;
  return im->px + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
}

static bool is(const uint8_t *p, int r, int g, int b) {
  return p[0] == r && p[1] == g && p[2] == b;
}

// The first pixel of a color in reading order; false when there is none.
static bool find_color(const image *im, int r, int g, int b, int *x, int *y) {
  for (*y = 0; *y < im->h; (*y)++)
    for (*x = 0; *x < im->w; (*x)++)
      if (is(at(im, *x, *y), r, g, b)) return true;
  return false;
}

// Pixels in [x0, x1) x [y0, y1) of a color.
static long count_color(const image *im, int x0, int y0, int x1, int y1, int r,
                        int g, int b) {
  long n = 0;
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++) n += is(at(im, x, y), r, g, b);
  return n;
}

static void test_png_write_rgb(void) {
  const uint8_t rgb[2 * 3 * 3] = {255, 0,  0,  0,  255, 0,  0,  0,  255,
                                  10,  20, 30, 40, 50,  60, 70, 80, 90};
  const char *path = tmp_path("raw.png");
  CHECK(ct_png_write_rgb(path, 3, 2, rgb) == CT_OK, "write: %s",
        ct_last_error());
  image im = image_load(path);
  CHECK(im.w == 3 && im.h == 2, "size %dx%d", im.w, im.h);
  CHECK(im.px && !memcmp(im.px, rgb, sizeof rgb), "pixels differ");
  free(im.px);

  int before = dir_entries();
  const char *nodir = "/nonexistent/dir/x.png";
  CHECK(ct_png_write_rgb(nodir, 3, 2, rgb) == CT_ERR_IO, "unwritable path");
  CHECK(strstr(ct_last_error(), nodir) == ct_last_error(), "'%s'",
        ct_last_error());
  const char *bad = tmp_path("bad.png");
  CHECK(ct_png_write_rgb(bad, 3, 2, NULL) == CT_ERR_ARG, "NULL pixels");
  CHECK(strstr(ct_last_error(), bad) == ct_last_error(), "'%s'",
        ct_last_error());
  CHECK(ct_png_write_rgb(bad, 0, 2, rgb) == CT_ERR_ARG, "zero width");
  CHECK(ct_png_write_rgb(bad, 3, -1, rgb) == CT_ERR_ARG, "negative height");
  CHECK(ct_png_write_rgb(NULL, 3, 2, rgb) == CT_ERR_ARG, "NULL path");
  CHECK(dir_entries() == before && access(bad, F_OK) != 0,
        "nothing written on error");
}

enum { DARK_R = 8, DARK_G = 48, DARK_B = 107 };  // a full row fraction

static void test_confusion(void) {
  // Diagonal only: dark diagonal cells with their counts in white, white
  // off-diagonal cells with a black "0".
  enum { K = 4, CELL = 40 };
  int64_t counts[K * K] = {0};
  const int64_t diag[K] = {5, 10, 200, 1234567};
  for (int i = 0; i < K; i++) counts[i * K + i] = diag[i];
  const char *names[K] = {"cat", "dog", NULL, "a very long class name indeed"};
  const char *path = tmp_path("confusion.png");
  CHECK(
      ct_plot_confusion_png(path, K, counts, names,
                            "confusion matrix, test, accuracy 91.23%") == CT_OK,
      "confusion: %s", ct_last_error());
  image im = image_load(path);
  CHECK(im.w > K * CELL && im.w < 600 && im.h > K * CELL && im.h < 400,
        "size %dx%d", im.w, im.h);
  int x0 = 0, y0 = 0;
  CHECK(find_color(&im, DARK_R, DARK_G, DARK_B, &x0, &y0), "no dark cell");
  for (int i = 0; i < K; i++)
    for (int j = 0; j < K; j++) {
      const uint8_t *p = at(&im, x0 + j * CELL + 10, y0 + i * CELL + 10);
      bool ok = i == j ? is(p, DARK_R, DARK_G, DARK_B) : is(p, 255, 255, 255);
      CHECK(ok, "cell (%d,%d) is (%d,%d,%d)", i, j, p[0], p[1], p[2]);
    }
  long text_white =
      count_color(&im, x0, y0, x0 + CELL, y0 + CELL, 255, 255, 255);
  long text_big = count_color(&im, x0 + 3 * CELL, y0 + 3 * CELL, x0 + 4 * CELL,
                              y0 + 4 * CELL, 255, 255, 255);
  long text_black =
      count_color(&im, x0 + CELL, y0, x0 + 2 * CELL, y0 + CELL, 0, 0, 0);
  CHECK(text_white > 5 && text_black > 5, "counts drawn: %ld white, %ld black",
        text_white, text_black);
  CHECK(text_big > text_white, "1234567 shows as 1234k, wider than 5: %ld",
        text_big);
  long title_ink = count_color(&im, 0, 0, im.w, 30, 0, 0, 0);
  long labels_left = count_color(&im, 0, y0, x0, y0 + K * CELL, 0, 0, 0);
  long labels_top = count_color(&im, x0, y0 - 14, x0 + K * CELL, y0, 0, 0, 0);
  CHECK(title_ink > 100 && labels_left > 50 && labels_top > 30,
        "title %ld, labels %ld %ld", title_ink, labels_left, labels_top);
  free(im.px);

  // Shades by row fraction: 3/4 and 1/4 of white -> dark blue; an empty row
  // stays white.
  int64_t two[4] = {3, 1, 0, 0};
  CHECK(ct_plot_confusion_png(path, 2, two, NULL, NULL) == CT_OK, "2x2: %s",
        ct_last_error());
  im = image_load(path);
  CHECK(find_color(&im, 70, 100, 144, &x0, &y0), "no 3/4 cell");
  const uint8_t *p = at(&im, x0 + CELL + 10, y0 + 10);
  CHECK(is(p, 193, 203, 218), "1/4 cell (%d,%d,%d)", p[0], p[1], p[2]);
  p = at(&im, x0 + 10, y0 + CELL + 10);
  CHECK(is(p, 255, 255, 255), "empty row (%d,%d,%d)", p[0], p[1], p[2]);
  free(im.px);

  // One class.
  int64_t one = 5;
  CHECK(ct_plot_confusion_png(path, 1, &one, NULL, "") == CT_OK, "K=1: %s",
        ct_last_error());
  im = image_load(path);
  CHECK(find_color(&im, DARK_R, DARK_G, DARK_B, &x0, &y0) &&
            is(at(&im, x0 + CELL - 1, y0 + CELL - 1), DARK_R, DARK_G, DARK_B) &&
            !is(at(&im, x0 + CELL, y0 + CELL), DARK_R, DARK_G, DARK_B),
        "K=1: one dark 40 px cell");
  free(im.px);
}

// The ink of column j's label above the grid (at x0, y0; cells `cell`
// wide): its topmost and bottommost rows, *top > *bottom when none.
static void column_label_rows(const image *im, int x0, int y0, int cell, int j,
                              int *top, int *bottom) {
  *top = y0;
  *bottom = -1;
  for (int y = 0; y < y0 - 1; y++)
    for (int x = x0 + j * cell; x < x0 + (j + 1) * cell; x++)
      if (is(at(im, x, y), 0, 0, 0)) {
        if (y < *top) *top = y;
        if (y > *bottom) *bottom = y;
      }
}

// Column labels are whole class names: across when every name fits its
// cell, turned to read upwards when one does not ("checker" is 41 px, a
// 40 px cell leaves 38), never cut ("checke").
static void test_confusion_labels(void) {
  enum { K = 4, CELL = 40 };
  int64_t counts[K * K] = {0};
  for (int i = 0; i < K; i++) counts[i * K + i] = 3;
  const char *path = tmp_path("labels.png");
  const char *shapes[K] = {"checker", "dots", "stripes", "rings"};
  CHECK(ct_plot_confusion_png(path, K, counts, shapes, "t") == CT_OK, "%s",
        ct_last_error());
  image im = image_load(path);
  int x0 = 0, y0 = 0, top, bottom;
  CHECK(find_color(&im, DARK_R, DARK_G, DARK_B, &x0, &y0), "no dark cell");
  const int whole = ct_plot_text_width("checker", 1),
            cut = ct_plot_text_width("checke", 1);
  CHECK(whole > CELL - 2 && cut <= CELL - 2, "font: %d and %d px", whole, cut);
  column_label_rows(&im, x0, y0, CELL, 0, &top, &bottom);
  CHECK(bottom - top + 1 > cut && bottom - top + 1 <= whole,
        "'checker' turned: %d px of ink upwards (whole %d, cut %d)",
        bottom - top + 1, whole, cut);
  int tall = im.h;
  free(im.px);

  const char *short_names[K] = {"cat", "dog", "ox", "emu"};
  CHECK(ct_plot_confusion_png(path, K, counts, short_names, "t") == CT_OK, "%s",
        ct_last_error());
  im = image_load(path);
  CHECK(find_color(&im, DARK_R, DARK_G, DARK_B, &x0, &y0), "no dark cell");
  column_label_rows(&im, x0, y0, CELL, 0, &top, &bottom);
  CHECK(bottom - top + 1 == 7 && y0 - bottom <= 8,
        "'cat' across, one text line over the grid: rows %d..%d, grid at %d",
        top, bottom, y0);
  CHECK(tall - im.h == whole - 7,
        "turned labels add their length less the 7 px of a line: %d vs %d",
        tall, im.h);
  free(im.px);
}

// K >= 2 classes: row 0 is 70% right, 30% predicted as class K-1, the
// other rows all right. Small cells have no numbers; K = 1000 stays about
// 2000 px.
static void test_confusion_large(int K, int cell, int max_side) {
  int64_t *counts = calloc((size_t)K * K, sizeof *counts);
  if (!counts) return;
  for (int i = 0; i < K; i++) counts[(size_t)i * K + i] = 7 + i;
  counts[K - 1] = 3;  // true 0, predicted K-1: a small share of row 0
  const char *path = tmp_path("confusion_large.png");
  CHECK(ct_plot_confusion_png(path, K, counts, NULL, "big") == CT_OK,
        "K=%d: %s", K, ct_last_error());
  free(counts);
  image im = image_load(path);
  CHECK(
      im.w > K * cell && im.w < max_side && im.h > K * cell && im.h < max_side,
      "K=%d size %dx%d", K, im.w, im.h);
  int x0 = 0, y0 = 0;
  // Rows 1.. are diagonal only: find cell (1,1), the first fully dark pixel.
  CHECK(find_color(&im, DARK_R, DARK_G, DARK_B, &x0, &y0), "K=%d: no dark cell",
        K);
  x0 -= cell, y0 -= cell;  // back to cell (0,0)
  for (int i = 1; i < K; i += K / 10 + 1) {
    long dark =
        count_color(&im, x0 + i * cell, y0 + i * cell, x0 + (i + 1) * cell,
                    y0 + (i + 1) * cell, DARK_R, DARK_G, DARK_B);
    CHECK(dark == (long)cell * cell,
          "K=%d: cell (%d,%d) has %ld dark pixels, no count", K, i, i, dark);
    const uint8_t *p = at(&im, x0 + ((i + K / 2) % K) * cell, y0 + i * cell);
    CHECK(is(p, 255, 255, 255), "K=%d: off-diagonal (%d,%d,%d)", K, p[0], p[1],
          p[2]);
  }
  const uint8_t *p = at(&im, x0 + (K - 1) * cell, y0);
  CHECK(p[2] > p[0] && p[0] < 255, "K=%d: cell (0,K-1) tinted (%d,%d,%d)", K,
        p[0], p[1], p[2]);
  free(im.px);
}

static void test_confusion_errors(void) {
  int64_t counts[4] = {1, 2, 3, 4};
  const char *path = tmp_path("never.png");
  int before = dir_entries();
  CHECK(ct_plot_confusion_png(path, 0, counts, NULL, NULL) == CT_ERR_ARG,
        "K=0");
  CHECK(strstr(ct_last_error(), path) == ct_last_error(), "'%s'",
        ct_last_error());
  CHECK(ct_plot_confusion_png(path, 1001, counts, NULL, NULL) == CT_ERR_ARG,
        "K=1001");
  CHECK(ct_plot_confusion_png(path, 2, NULL, NULL, NULL) == CT_ERR_ARG,
        "NULL counts");
  counts[2] = -1;
  CHECK(ct_plot_confusion_png(path, 2, counts, NULL, NULL) == CT_ERR_ARG,
        "negative count");
  CHECK(strstr(ct_last_error(), "true class 1, predicted 0") != NULL, "'%s'",
        ct_last_error());
  counts[2] = 3;
  CHECK(ct_plot_confusion_png(NULL, 2, counts, NULL, NULL) == CT_ERR_ARG,
        "NULL path");
  const char *nodir = "/nonexistent/dir/x.png";
  CHECK(ct_plot_confusion_png(nodir, 2, counts, NULL, NULL) == CT_ERR_IO,
        "unwritable");
  CHECK(strstr(ct_last_error(), nodir) == ct_last_error(), "'%s'",
        ct_last_error());
  CHECK(dir_entries() == before, "nothing written on error");
}

enum {
  SIDE = 28,
  PANEL = 224,
  M = 10,
  CAPTION = 20
};  // 28 px images upscale 8x

// One gray 28x28 image, a 4x4 map hot in cell (1,2): pixels farther than
// one cell (56 px) from that cell's center keep the image's gray exactly,
// pixels near the center turn yellowish.
static void test_attention_region(void) {
  enum { G = 4 };
  uint8_t img[SIDE * SIDE];
  memset(img, 100, sizeof img);
  float map[G * G] = {0};
  map[1 * G + 2] = 1;
  const uint8_t *images[1] = {img};
  const float *maps[1] = {map};
  const char *captions[1] = {"coat 97.1%"};
  const char *path = tmp_path("attention.png");
  CHECK(ct_plot_attention_png(path, 1, images, 1, SIDE, SIDE, maps, G, G,
                              captions) == CT_OK,
        "attention: %s", ct_last_error());
  image im = image_load(path);
  CHECK(im.w == PANEL + 2 * M && im.h == PANEL + CAPTION + 2 * M, "size %dx%d",
        im.w, im.h);
  long outside_bad = 0, inside_bad = 0, hot = 0;
  double cy = 1.5 * PANEL / G, cx = 2.5 * PANEL / G, cell = (double)PANEL / G;
  for (int y = 0; y < PANEL; y++)
    for (int x = 0; x < PANEL; x++) {
      const uint8_t *p = at(&im, M + x, M + y);
      bool near = fabs(y + 0.5 - cy) < cell && fabs(x + 0.5 - cx) < cell;
      if (!near)
        outside_bad += !is(p, 100, 100, 100);
      else
        inside_bad += !(p[0] >= 100 && p[0] >= p[1] && p[2] <= 100);
      hot += p[0] > 160 && p[2] < 70;
    }
  CHECK(outside_bad == 0, "%ld pixels tinted outside the attended region",
        outside_bad);
  CHECK(inside_bad == 0,
        "%ld pixels in the region not blended toward red/yellow", inside_bad);
  CHECK(hot > 300 && hot < 56 * 56, "%ld strongly tinted pixels", hot);
  const uint8_t *c = at(&im, M + (int)cx, M + (int)cy);
  CHECK(c[0] > 180 && c[1] > 170 && c[2] < 60, "center (%d,%d,%d)", c[0], c[1],
        c[2]);
  long caption =
      count_color(&im, M, M + PANEL, M + PANEL, M + PANEL + CAPTION, 0, 0, 0);
  long margin = count_color(&im, 0, 0, im.w, M, 255, 255, 255);
  CHECK(caption > 30 && margin == (long)im.w * M, "caption ink %ld, margin %ld",
        caption, margin);
  free(im.px);
}

// An RGB image, channel-first, taller than wide: planes land on the right
// channels, nearest-neighbour upscaling by 224 / 8 = 28, a zero map leaves
// the image as is.
static void test_attention_rgb(void) {
  enum { H = 8, W = 4, S = 28 };
  uint8_t img[3 * H * W];
  for (int i = 0; i < H * W; i++)
    img[i] = 10, img[H * W + i] = 200, img[2 * H * W + i] = 30;
  img[2 * W + 3] = 250, img[H * W + 2 * W + 3] = 0,
              img[2 * H * W + 2 * W + 3] = 5;
  float map[2 * 2] = {0};
  const uint8_t *images[1] = {img};
  const float *maps[1] = {map};
  const char *path = tmp_path("attention_rgb.png");
  CHECK(ct_plot_attention_png(path, 1, images, 3, H, W, maps, 2, 2, NULL) ==
            CT_OK,
        "rgb: %s", ct_last_error());
  image im = image_load(path);
  CHECK(im.w == W * S + 2 * M && im.h == H * S + CAPTION + 2 * M, "size %dx%d",
        im.w, im.h);
  long special = count_color(&im, M, M, M + W * S, M + H * S, 250, 0, 5);
  long plain = count_color(&im, M, M, M + W * S, M + H * S, 10, 200, 30);
  CHECK(special == S * S && plain == (long)(H * W - 1) * S * S,
        "special %ld, plain %ld", special, plain);
  CHECK(is(at(&im, M + 3 * S, M + 2 * S), 250, 0, 5) &&
            is(at(&im, M + 3 * S - 1, M + 2 * S), 10, 200, 30),
        "block edges");
  free(im.px);
}

// 64 panels in 8 rows of 8: each panel's top-left pixel is its own image.
static void test_attention_many(void) {
  enum { N = 64, G = 7, PER_ROW = 8 };
  static uint8_t img[N][SIDE * SIDE];
  static float map[N][G * G];
  const uint8_t *images[N];
  const float *maps[N];
  const char *captions[N];
  char text[N][32];
  for (int k = 0; k < N; k++) {
    memset(img[k], 2 * k, sizeof img[k]);
    map[k][(k % G) * G + (k * 3) % G + 0] = 0.5f + (float)k / 128;
    map[k][0] = 0;
    snprintf(text[k], sizeof text[k], "class %d %.1f%%", k, 50 + k * 0.7);
    images[k] = img[k], maps[k] = map[k], captions[k] = text[k];
  }
  map[5][0] = NAN, map[6][1] = -3, map[7][2] = 40;  // clamped
  const char *path = tmp_path("attention_many.png");
  CHECK(ct_plot_attention_png(path, N, images, 1, SIDE, SIDE, maps, G, G,
                              captions) == CT_OK,
        "64 panels: %s", ct_last_error());
  image im = image_load(path);
  int want_w = 2 * M + PER_ROW * PANEL + (PER_ROW - 1) * M;
  int want_h =
      2 * M + (N / PER_ROW) * (PANEL + CAPTION) + (N / PER_ROW - 1) * M;
  CHECK(im.w == want_w && im.h == want_h, "size %dx%d, want %dx%d", im.w, im.h,
        want_w, want_h);
  for (int k = 0; k < N; k++) {
    int x = M + (k % PER_ROW) * (PANEL + M),
        y = M + (k / PER_ROW) * (PANEL + CAPTION + M);
    const uint8_t *p = at(&im, x, y);
    CHECK(is(p, 2 * k, 2 * k, 2 * k), "panel %d top-left (%d,%d,%d)", k, p[0],
          p[1], p[2]);
    CHECK(is(at(&im, x - 1, y), 255, 255, 255), "panel %d margin", k);
  }
  free(im.px);
}

static void test_attention_errors(void) {
  uint8_t img[SIDE * SIDE] = {0};
  float map[4] = {0};
  const uint8_t *images[2] = {img, NULL};
  const float *maps[2] = {map, map};
  const char *path = tmp_path("never.png");
  int before = dir_entries();
  CHECK(ct_plot_attention_png(path, 0, images, 1, SIDE, SIDE, maps, 2, 2,
                              NULL) == CT_ERR_ARG,
        "n=0");
  CHECK(strstr(ct_last_error(), path) == ct_last_error(), "'%s'",
        ct_last_error());
  CHECK(ct_plot_attention_png(path, 65, images, 1, SIDE, SIDE, maps, 2, 2,
                              NULL) == CT_ERR_ARG,
        "n=65");
  CHECK(ct_plot_attention_png(path, 2, images, 1, SIDE, SIDE, maps, 2, 2,
                              NULL) == CT_ERR_ARG,
        "NULL image 1");
  CHECK(strstr(ct_last_error(), "image 1 is NULL") != NULL, "'%s'",
        ct_last_error());
  CHECK(ct_plot_attention_png(path, 1, NULL, 1, SIDE, SIDE, maps, 2, 2, NULL) ==
            CT_ERR_ARG,
        "NULL images");
  CHECK(ct_plot_attention_png(path, 1, images, 1, SIDE, SIDE, NULL, 2, 2,
                              NULL) == CT_ERR_ARG,
        "NULL maps");
  CHECK(ct_plot_attention_png(path, 1, images, 2, SIDE, SIDE, maps, 2, 2,
                              NULL) == CT_ERR_ARG,
        "2 channels");
  CHECK(ct_plot_attention_png(path, 1, images, 1, 0, SIDE, maps, 2, 2, NULL) ==
            CT_ERR_ARG,
        "height 0");
  CHECK(ct_plot_attention_png(path, 1, images, 1, SIDE, 513, maps, 2, 2,
                              NULL) == CT_ERR_ARG,
        "width 513");
  CHECK(ct_plot_attention_png(path, 1, images, 1, SIDE, SIDE, maps, 0, 2,
                              NULL) == CT_ERR_ARG,
        "grid 0");
  CHECK(ct_plot_attention_png(NULL, 1, images, 1, SIDE, SIDE, maps, 2, 2,
                              NULL) == CT_ERR_ARG,
        "NULL path");
  const char *nodir = "/nonexistent/dir/x.png";
  CHECK(ct_plot_attention_png(nodir, 1, images, 1, SIDE, SIDE, maps, 2, 2,
                              NULL) == CT_ERR_IO,
        "unwritable");
  CHECK(strstr(ct_last_error(), nodir) == ct_last_error(), "'%s'",
        ct_last_error());
  CHECK(dir_entries() == before, "nothing written on error");
}

// Three output words over four source words: weight 1 is a white cell,
// 0 a black one, 0.5 mid-gray; labels may be any UTF-8.
static void test_alignment(void) {
  const char *src[4] = {"ein", "groäßer", "Hund", "\xf0\x9f\x90\x95"};
  const char *out[3] = {"a", "big", "dog"};
  const float w[12] = {1, 0, 0, 0, 0, 0.5f, 0.5f, 0, 0, 0, 0, 1};
  const char *path = tmp_path("align.png");
  CHECK(ct_plot_alignment_png(path, 3, out, 4, src, w, "ein Hund") == CT_OK,
        "alignment: %s", ct_last_error());
  image im = image_load(path);
  if (!im.px) return;
  // 20 px cells: two mid-gray cells, two white ones (found as 20x20 white
  // squares right of the labels), six black ones.
  CHECK(count_color(&im, 0, 0, im.w, im.h, 128, 128, 128) == 2 * 400,
        "mid-gray pixels: %ld",
        count_color(&im, 0, 0, im.w, im.h, 128, 128, 128));
  int x, y;
  CHECK(find_color(&im, 128, 128, 128, &x, &y), "no gray cell");
  // The first gray cell is row 1, column 1: column 0 of row 0 is white,
  // column 0 of row 1 black, the last cell of row 2 white.
  CHECK(is(at(&im, x - 10, y - 10), 255, 255, 255) &&
            is(at(&im, x - 10, y + 10), 0, 0, 0) &&
            is(at(&im, x + 50, y + 30), 255, 255, 255) &&
            is(at(&im, x + 30, y + 30), 0, 0, 0),
        "cells in the wrong places");
  CHECK(im.h > 3 * 20 && im.w > 4 * 20, "size %dx%d", im.w, im.h);
  free(im.px);
  int before = dir_entries();
  const char *bad = tmp_path("bad_align.png");
  CHECK(ct_plot_alignment_png(bad, 0, out, 4, src, w, NULL) == CT_ERR_ARG,
        "no output words");
  CHECK(ct_plot_alignment_png(bad, 3, out, 4, src, NULL, NULL) == CT_ERR_ARG,
        "no weights");
  CHECK(ct_plot_alignment_png("/nonexistent/a.png", 3, out, 4, src, w, NULL) ==
            CT_ERR_IO,
        "unwritable path");
  CHECK(dir_entries() == before, "nothing written on error");
}

// The image under detection boxes: RGB planes and gray on the right
// channels, upscaled by 448 / 8 = 56; a box frames its corner; the image
// checks of the attention plot.
static void test_boxes_image(void) {
  enum { H = 8, W = 4, S = 56 };
  uint8_t img[3 * H * W];
  for (int i = 0; i < H * W; i++)
    img[i] = 10, img[H * W + i] = 200, img[2 * H * W + i] = 30;
  img[2 * W + 3] = 250, img[H * W + 2 * W + 3] = 0,
              img[2 * H * W + 2 * W + 3] = 5;
  const char *path = tmp_path("boxes_rgb.png");
  float box[4] = {1, 4, 2, 6};
  int label = 0;
  CHECK(ct_plot_boxes_png(path, img, 3, H, W, 1, box, &label, NULL) == CT_OK,
        "rgb: %s", ct_last_error());
  image im = image_load(path);
  CHECK(im.w == W * S + 2 * M && im.h == H * S + 2 * M, "size %dx%d", im.w,
        im.h);
  CHECK(is(at(&im, M + 3 * S, M + 2 * S), 250, 0, 5) &&
            is(at(&im, M + 3 * S - 1, M + 2 * S), 10, 200, 30) &&
            is(at(&im, M + W * S - 1, M + H * S - 1), 10, 200, 30),
        "image pixels");
  CHECK(!is(at(&im, M + S, M + 4 * S), 10, 200, 30) &&
            is(at(&im, M + S + S / 2, M + 5 * S), 10, 200, 30),
        "box frame, inside untouched");
  free(im.px);
  CHECK(ct_plot_boxes_png(path, img, 1, H, W, 0, NULL, NULL, NULL) == CT_OK,
        "gray: %s", ct_last_error());
  im = image_load(path);
  CHECK(is(at(&im, M + 3 * S, M + 2 * S), 250, 250, 250) &&
            is(at(&im, M, M), 10, 10, 10),
        "gray repeated");
  free(im.px);
  CHECK(ct_plot_boxes_png(path, img, 2, H, W, 0, NULL, NULL, NULL) ==
                CT_ERR_ARG &&
            strstr(ct_last_error(), "images need 1 or 3 channels, got 2"),
        "2 channels: %s", ct_last_error());
  CHECK(ct_plot_boxes_png(path, img, 3, H, 0, 0, NULL, NULL, NULL) ==
                CT_ERR_ARG &&
            strstr(ct_last_error(), "image size 8x0 outside 1..512"),
        "width 0: %s", ct_last_error());
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/ct_test_plot_images_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  test_png_write_rgb();
  test_confusion();
  test_confusion_labels();
  test_confusion_errors();
  test_confusion_large(100, 8, 1000);
  test_confusion_large(1000, 2, 2200);
  test_attention_region();
  test_attention_rgb();
  test_attention_many();
  test_attention_errors();
  test_alignment();
  test_boxes_image();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (getenv("CT_KEEP_TMP"))
    printf("kept %s\n", dir);
  else if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return test_summary("plot_images");
}
