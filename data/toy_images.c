// The generated shape images (see toy_images.h).
#include "data/toy_images.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "data/strings.h"

enum { RNG_TOY_IMAGES = 0xDA7A21u, RNG_TOY_TEXTURED = 0xDA7A23u };

static const char *const NAMES[CT_TOY_IMAGE_MAX_CLASSES] = {
    "hbar", "vbar", "square", "frame", "plus", "diag"};

static int below(ct_rng *r, int n) {
  return (int)ct_rng_next_below(r, (uint64_t)n);
}

// Draws shape `k` into img (size x size) with value v.
static void draw(uint8_t *img, int size, int k, ct_rng *r, uint8_t v) {
  int len = size / 2 + below(r, size / 3 + 1);   // long side
  int thick = 1 + below(r, size / 8 + 1);        // stroke width
  int side = size / 3 + below(r, size / 3 + 1);  // squares
  int x0, y0;
  switch (k) {
  case 0:  // horizontal bar
  case 1:  // vertical bar
    x0 = below(r, size - len + 1);
    y0 = below(r, size - thick + 1);
    for (int a = 0; a < len; a++)
      for (int b = 0; b < thick; b++) {
        int x = x0 + a, y = y0 + b;
        if (k == 0)
          img[y * size + x] = v;
        else
          img[x * size + y] = v;
      }
    break;
  case 2:  // filled square
  case 3:  // frame
    x0 = below(r, size - side + 1);
    y0 = below(r, size - side + 1);
    for (int y = 0; y < side; y++)
      for (int x = 0; x < side; x++) {
        bool edge =
            x < thick || y < thick || x >= side - thick || y >= side - thick;
        if (k == 2 || edge) img[(y0 + y) * size + x0 + x] = v;
      }
    break;
  case 4: {  // plus
    int c = side | 1;
    x0 = below(r, size - c + 1);
    y0 = below(r, size - c + 1);
    for (int a = 0; a < c; a++)
      for (int b = -(thick / 2); b <= thick / 2; b++) {
        int m = c / 2 + b;
        if (m < 0 || m >= c) continue;
        img[(y0 + m) * size + x0 + a] = v;
        img[(y0 + a) * size + x0 + m] = v;
      }
    break;
  }
  default: {  // diagonal, either direction
    bool down = below(r, 2);
    x0 = below(r, size - side + 1);
    y0 = below(r, size - side + 1);
    for (int a = 0; a < side; a++)
      for (int b = 0; b < thick && a + b < side; b++) {
        int x = x0 + a + b, y = y0 + (down ? a : side - 1 - a);
        img[y * size + x] = v;
      }
    break;
  }
  }
}

// Shuffles the rows so batches of the unshuffled order mix classes.
static ct_status shuffle(ct_image_dataset *d, ct_rng *r) {
  const size_t bytes = (size_t)d->C * d->H * d->W;
  uint8_t *tmp = malloc(bytes);
  if (!tmp) return ct_error(CT_ERR_NOMEM, "toy images: out of memory");
  for (int64_t i = d->N - 1; i > 0; i--) {
    int64_t j = (int64_t)ct_rng_next_below(r, (uint64_t)(i + 1));
    memcpy(tmp, ct_image_dataset_image(d, i), bytes);
    memcpy(ct_image_dataset_image(d, i), ct_image_dataset_image(d, j), bytes);
    memcpy(ct_image_dataset_image(d, j), tmp, bytes);
    int32_t l = d->labels[i];
    d->labels[i] = d->labels[j];
    d->labels[j] = l;
  }
  free(tmp);
  return CT_OK;
}

ct_status ct_toy_images_generate(ct_image_dataset *d, int64_t n, int size,
                                 int classes, uint64_t seed, int split) {
  if (n < 1 || size < 8 || size > 256)
    return ct_error(CT_ERR_ARG,
                    "toy images: %lld images of %d pixels: need "
                    "at least 1 image and a size in [8, 256]",
                    (long long)n, size);
  if (classes < 2 || classes > CT_TOY_IMAGE_MAX_CLASSES)
    return ct_error(CT_ERR_ARG, "toy images: %d classes: must be in [2, %d]",
                    classes, CT_TOY_IMAGE_MAX_CLASSES);
  ct_status st = ct_image_dataset_alloc(d, n, 1, size, size, classes);
  if (st == CT_OK) st = ct_image_dataset_set_names(d, NAMES, classes);
  if (st != CT_OK) return st;
  ct_rng r = ct_rng_make(seed, ct_rng_stream(RNG_TOY_IMAGES, (uint64_t)split));
  for (int64_t i = 0; i < n; i++) {
    uint8_t *img = ct_image_dataset_image(d, i);
    int k = (int)(i % classes);
    d->labels[i] = k;
    int base = below(&r, 60);
    for (int p = 0; p < size * size; p++)
      img[p] = (uint8_t)(base + below(&r, 40));
    draw(img, size, k, &r, (uint8_t)(160 + below(&r, 96)));
  }
  return shuffle(d, &r);
}

// ---- the textured variant ----------------------------------------------------

static const char *const TEXTURED_NAMES[CT_TOY_TEXTURED_MAX_CLASSES] = {
    "hbar", "vbar",  "square", "frame", "plus",
    "diag", "cross", "disc",   "ring",  "triangle"};

#define PI 3.14159265358979323846

static double uniform(ct_rng *r, double lo, double hi) {
  return lo + (hi - lo) * ct_rng_next_double(r);
}

static uint8_t clamp_u8(double v) {
  return v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)(v + 0.5);
}

// A two-colour pattern: which of colours a and b a pixel takes.
enum { TEXTURE_PLAIN, TEXTURE_STRIPES, TEXTURE_CHECKER, TEXTURE_NOISE };
enum { NOISE_CELLS = 130 };  // the noise grid: cells of >= 2 px, 256 px

typedef struct texture {
  int kind;
  double a[3], b[3];  // the two colours
  double period;      // stripes, checker and noise cells, pixels
  double cos_t, sin_t, phase;
  uint8_t cells[NOISE_CELLS][NOISE_CELLS];  // noise: 1 takes colour b
} texture;

// A texture around `base` (its second colour within 70 of it per channel,
// so that the texture stays inside its region's colour).
static void texture_draw(texture *t, ct_rng *r, const double base[3],
                         int size) {
  t->kind = below(r, 4);
  for (int c = 0; c < 3; c++) {
    t->a[c] = base[c];
    t->b[c] = fmin(255.0, fmax(0.0, base[c] + uniform(r, -70.0, 70.0)));
  }
  t->period = uniform(r, 2.0, fmax(3.0, size / 5.0));
  double angle = uniform(r, 0.0, PI);
  t->cos_t = cos(angle);
  t->sin_t = sin(angle);
  t->phase = uniform(r, 0.0, 2.0 * t->period);
  if (t->kind == TEXTURE_NOISE) {
    int n = (int)(size / t->period) + 2;
    if (n > NOISE_CELLS) n = NOISE_CELLS;
    for (int y = 0; y < n; y++)
      for (int x = 0; x < n; x++) t->cells[y][x] = (uint8_t)below(r, 2);
  }
}

static const double *texture_at(const texture *t, int x, int y) {
  bool second = false;
  switch (t->kind) {
  case TEXTURE_STRIPES:
    second =
        (int64_t)floor((x * t->cos_t + y * t->sin_t + t->phase) / t->period) &
        1;
    break;
  case TEXTURE_CHECKER:
    second = ((int64_t)floor((x + t->phase) / t->period) +
              (int64_t)floor((y + t->phase) / t->period)) &
             1;
    break;
  case TEXTURE_NOISE: {
    int cx = (int)(x / t->period), cy = (int)(y / t->period);
    second = t->cells[cy < NOISE_CELLS ? cy : NOISE_CELLS - 1]
                     [cx < NOISE_CELLS ? cx : NOISE_CELLS - 1];
    break;
  }
  default: break;
  }
  return second ? t->b : t->a;
}

// Whether the point (u, v) of the object's own frame (the shape spans about
// [-1, 1]^2, v pointing down) is inside shape k drawn with half-width w.
static bool textured_inside(int k, double u, double v, double w, bool flip) {
  const double au = fabs(u), av = fabs(v), side = 0.8;
  const double r = sqrt(u * u + v * v);
  const double d1 = fabs(u - v) / sqrt(2.0), d2 = fabs(u + v) / sqrt(2.0);
  switch (k) {
  case 0: return au <= 1.0 && av <= w;      // hbar
  case 1: return av <= 1.0 && au <= w;      // vbar
  case 2: return au <= side && av <= side;  // square
  case 3: return fmax(au, av) <= side && fmax(au, av) >= side - 2 * w;
  case 4: return (au <= 1.0 && av <= w) || (av <= 1.0 && au <= w);  // plus
  case 5:                                                           // diag
    return au <= side && av <= side && (flip ? d2 : d1) <= w;
  case 6: return au <= side && av <= side && (d1 <= w || d2 <= w);  // cross
  case 7: return r <= side;                                         // disc
  case 8: return r <= side && r >= side - 2 * w;                    // ring
  default:  // triangle: apex at v = -side, base at v = side
    return av <= side && au <= (v + side) * 0.6;
  }
}

// How far apart (largest channel) object and background colours are at
// least: the texture spreads each by up to 70, so the shape stays visible.
#define MIN_GAP 80.0

// The largest per-channel difference of two colours.
static double colour_gap(const double *a, const double *b) {
  double g = 0.0;
  for (int c = 0; c < 3; c++) g = fmax(g, fabs(a[c] - b[c]));
  return g;
}

// Draws one textured image of class k into img (3, size, size).
static void draw_textured(uint8_t *img, int size, int k, ct_rng *r) {
  const int64_t plane = (int64_t)size * size;
  texture bg, obj;
  double bg_base[3], obj_base[3];
  for (int c = 0; c < 3; c++) bg_base[c] = uniform(r, 0.0, 255.0);
  // An object colour at least MIN_GAP from the background's in some
  // channel.
  for (int tries = 0;; tries++) {
    for (int c = 0; c < 3; c++) obj_base[c] = uniform(r, 0.0, 255.0);
    if (colour_gap(obj_base, bg_base) >= MIN_GAP) break;
    if (tries == 15) {
      for (int c = 0; c < 3; c++) obj_base[c] = 255.0 - bg_base[c];
      if (colour_gap(obj_base, bg_base) < MIN_GAP)
        obj_base[0] = bg_base[0] < 128.0 ? 255.0 : 0.0;
      break;
    }
  }
  texture_draw(&bg, r, bg_base, size);
  texture_draw(&obj, r, obj_base, size);
  // The object's frame: half-extent s pixels, centre, rotation, stroke.
  const double s = uniform(r, 0.19 * size, 0.375 * size);
  const double cx = uniform(r, 0.7 * s, size - 0.7 * s);
  const double cy = uniform(r, 0.7 * s, size - 0.7 * s);
  const double theta = uniform(r, -15.0, 15.0) * PI / 180.0;
  const double w = uniform(r, 0.14, 0.26);
  const bool flip = below(r, 2);
  const double ct = cos(theta), st = sin(theta);
  for (int y = 0; y < size; y++)
    for (int x = 0; x < size; x++) {
      double dx = x + 0.5 - cx, dy = y + 0.5 - cy;
      double u = (dx * ct + dy * st) / s, v = (-dx * st + dy * ct) / s;
      const double *col = textured_inside(k, u, v, w, flip)
                              ? texture_at(&obj, x, y)
                              : texture_at(&bg, x, y);
      for (int c = 0; c < 3; c++)
        img[c * plane + y * size + x] = clamp_u8(col[c]);
    }
  // Distractors: dots and short strokes in random colours, smaller than any
  // object's stroke is long.
  const int distractors = 3 + below(r, 3);
  for (int i = 0; i < distractors; i++) {
    double col[3];
    for (int c = 0; c < 3; c++) col[c] = uniform(r, 0.0, 255.0);
    double x0 = uniform(r, 0.0, size), y0 = uniform(r, 0.0, size);
    double len = below(r, 2) ? 0.0 : uniform(r, 2.0, 0.2 * size);
    double a = uniform(r, 0.0, 2.0 * PI), rad = uniform(r, 0.7, 1.8);
    for (double t = 0.0; t <= len; t += 0.5)
      for (int y = (int)(y0 - rad - 1); y <= (int)(y0 + rad + 1); y++)
        for (int x = (int)(x0 - rad - 1); x <= (int)(x0 + rad + 1); x++) {
          double px = x + 0.5 - (x0 + t * cos(a)),
                 py = y + 0.5 - (y0 + t * sin(a));
          if (x < 0 || y < 0 || x >= size || y >= size ||
              px * px + py * py > rad * rad)
            continue;
          for (int c = 0; c < 3; c++)
            img[c * plane + y * size + x] = clamp_u8(col[c]);
        }
  }
  for (int64_t p = 0; p < 3 * plane; p++)
    img[p] = clamp_u8(img[p] + (double)below(r, 25) - 12.0);
}

ct_status ct_toy_images_textured(ct_image_dataset *d, int64_t n, int size,
                                 int classes, uint64_t seed, int split) {
  if (n < 1 || size < 16 || size > 256)
    return ct_error(CT_ERR_ARG,
                    "toy images: %lld textured images of %d pixels: need "
                    "at least 1 image and a size in [16, 256]",
                    (long long)n, size);
  if (classes < 2 || classes > CT_TOY_TEXTURED_MAX_CLASSES)
    return ct_error(CT_ERR_ARG,
                    "toy images: %d textured classes: must be in [2, %d]",
                    classes, CT_TOY_TEXTURED_MAX_CLASSES);
  ct_status st = ct_image_dataset_alloc(d, n, 3, size, size, classes);
  if (st == CT_OK) st = ct_image_dataset_set_names(d, TEXTURED_NAMES, classes);
  if (st != CT_OK) return st;
  ct_rng r =
      ct_rng_make(seed, ct_rng_stream(RNG_TOY_TEXTURED, (uint64_t)split));
  for (int64_t i = 0; i < n; i++) {
    int k = (int)(i % classes);
    d->labels[i] = k;
    draw_textured(ct_image_dataset_image(d, i), size, k, &r);
  }
  return shuffle(d, &r);
}

ct_status ct_toy_image_variant_parse(const char *name,
                                     ct_toy_image_variant *out) {
  if (!strcmp(name, "shapes") || !strcmp(name, "textured")) {
    *out =
        !strcmp(name, "shapes") ? CT_TOY_IMAGES_SHAPES : CT_TOY_IMAGES_TEXTURED;
    return CT_OK;
  }
  return ct_error(CT_ERR_ARG,
                  "unknown toy image variant '%s' (shapes or textured)", name);
}

// ---- writing the set as files ----------------------------------------------

ct_status ct_toy_image_format_parse(const char *name,
                                    ct_toy_image_format *out) {
  static const char *const names[] = {"png", "cifar10", "idx"};
  for (int i = 0; i < 3; i++)
    if (!strcmp(name, names[i])) {
      *out = (ct_toy_image_format)i;
      return CT_OK;
    }
  return ct_error(CT_ERR_ARG, "unknown image format '%s' (png, cifar10 or idx)",
                  name);
}

// Writes `len` bytes of each piece in turn to path.
static ct_status write_file(const char *path, const void *const *pieces,
                            const size_t *lens, int n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return ct_error(CT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  bool ok = true;
  for (int i = 0; i < n && ok; i++)
    ok = fwrite(pieces[i], 1, lens[i], f) == lens[i];
  if (fclose(f) != 0) ok = false;
  if (!ok) {
    remove(path);
    return ct_error(CT_ERR_IO, "%s: write failed", path);
  }
  return CT_OK;
}

static ct_status write_png_split(const char *dir, const char *split,
                                 const ct_image_dataset *d, bool overwrite) {
  char path[4096];
  ct_status st = CT_OK;
  for (int k = 0; k < d->K && st == CT_OK; k++) {
    snprintf(path, sizeof path, "%s/%s/%s", dir, split,
             ct_string_list_get(&d->class_names, k));
    st = ct_make_dirs(path);
  }
  // libpng takes RGB interleaved; the set holds planes.
  const int64_t plane = (int64_t)d->H * d->W;
  uint8_t *rgb = d->C == 3 ? malloc((size_t)(3 * plane)) : NULL;
  if (d->C == 3 && !rgb && st == CT_OK)
    st = ct_error(CT_ERR_NOMEM, "toy images: out of memory");
  for (int64_t i = 0; i < d->N && st == CT_OK; i++) {
    snprintf(path, sizeof path, "%s/%s/%s/%06lld.png", dir, split,
             ct_string_list_get(&d->class_names, d->labels[i]), (long long)i);
    st = ct_refuse_existing(path, overwrite);
    if (st != CT_OK) break;
    png_image img = {.version = PNG_IMAGE_VERSION,
                     .width = (png_uint_32)d->W,
                     .height = (png_uint_32)d->H,
                     .format = rgb ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY};
    const uint8_t *px = ct_image_dataset_image(d, i);
    for (int64_t p = 0; rgb && p < plane; p++)
      for (int c = 0; c < 3; c++) rgb[3 * p + c] = px[c * plane + p];
    if (!png_image_write_to_file(&img, path, 0, rgb ? rgb : px, 0, NULL)) {
      st = ct_error(CT_ERR_IO, "%s: cannot write: %s", path, img.message);
      png_image_free(&img);
    }
  }
  free(rgb);
  return st;
}

static ct_status write_cifar(const char *dir, const ct_image_dataset *train,
                             const ct_image_dataset *test, bool overwrite) {
  if (train->H != 32 || train->W != 32 || test->H != 32 || test->W != 32)
    return ct_error(CT_ERR_ARG,
                    "toy images: CIFAR-10 files hold 32x32 "
                    "images (use --size 32)");
  char path[4096];
  uint8_t *rec = malloc(3073);
  if (!rec) return ct_error(CT_ERR_NOMEM, "toy images: out of memory");
  ct_status st = CT_OK;
  for (int file = 0; file < 6 && st == CT_OK; file++) {
    const ct_image_dataset *d = file < 5 ? train : test;
    int64_t lo = file < 5 ? d->N * file / 5 : 0;
    int64_t hi = file < 5 ? d->N * (file + 1) / 5 : d->N;
    if (file < 5)
      snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, file + 1);
    else
      snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    st = ct_refuse_existing(path, overwrite);
    FILE *f = st == CT_OK ? fopen(path, "wb") : NULL;
    if (st == CT_OK && !f)
      st = ct_error(CT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    for (int64_t i = lo; i < hi && st == CT_OK; i++) {
      rec[0] = (uint8_t)d->labels[i];
      // RGB planes as they are; gray replicated into all three.
      for (int c = 0; c < 3; c++)
        memcpy(rec + 1 + c * 1024,
               ct_image_dataset_image(d, i) + (d->C == 3 ? c * 1024 : 0), 1024);
      if (fwrite(rec, 1, 3073, f) != 3073)
        st = ct_error(CT_ERR_IO, "%s: write failed", path);
    }
    if (f && fclose(f) != 0 && st == CT_OK)
      st = ct_error(CT_ERR_IO, "%s: write failed", path);
  }
  free(rec);
  // CIFAR-10 has 10 classes: the names file only fits a 10-class set
  // (otherwise the loader names the classes "0".."9").
  if (st != CT_OK || train->K != 10) return st;
  snprintf(path, sizeof path, "%s/batches.meta.txt", dir);
  st = ct_refuse_existing(path, overwrite);
  FILE *f = st == CT_OK ? fopen(path, "w") : NULL;
  if (st == CT_OK && !f)
    return ct_error(CT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  for (int k = 0; f && k < train->K; k++)
    fprintf(f, "%s\n", ct_string_list_get(&train->class_names, k));
  if (f && fclose(f) != 0) st = ct_error(CT_ERR_IO, "%s: write failed", path);
  return st;
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static ct_status write_idx(const char *dir, const char *prefix,
                           const ct_image_dataset *d, bool overwrite) {
  char path[4096];
  uint8_t head[16];
  put_be32(head, 0x0803);
  put_be32(head + 4, (uint32_t)d->N);
  put_be32(head + 8, (uint32_t)d->H);
  put_be32(head + 12, (uint32_t)d->W);
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
  ct_status st = ct_refuse_existing(path, overwrite);
  const void *img_pieces[2] = {head, d->pixels};
  size_t img_lens[2] = {16, (size_t)(d->N * d->H * d->W)};
  if (st == CT_OK) st = write_file(path, img_pieces, img_lens, 2);
  if (st != CT_OK) return st;
  uint8_t *labels = malloc((size_t)d->N);
  if (!labels) return ct_error(CT_ERR_NOMEM, "toy images: out of memory");
  for (int64_t i = 0; i < d->N; i++) labels[i] = (uint8_t)d->labels[i];
  uint8_t lhead[8];
  put_be32(lhead, 0x0801);
  put_be32(lhead + 4, (uint32_t)d->N);
  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
  st = ct_refuse_existing(path, overwrite);
  const void *lab_pieces[2] = {lhead, labels};
  size_t lab_lens[2] = {8, (size_t)d->N};
  if (st == CT_OK) st = write_file(path, lab_pieces, lab_lens, 2);
  free(labels);
  return st;
}

ct_status ct_toy_images_write(const char *dir, ct_toy_image_format format,
                              const ct_image_dataset *train,
                              const ct_image_dataset *test, bool overwrite) {
  if ((train->C != 1 && train->C != 3) || test->C != train->C)
    return ct_error(CT_ERR_ARG, "toy images: expected gray or RGB images");
  if (format == CT_TOY_IMAGES_IDX && train->C != 1)
    return ct_error(CT_ERR_ARG,
                    "toy images: IDX files hold gray images: write RGB ones "
                    "(--variant textured) with --format png or cifar10");
  // Room for the longest name written below (DIR/test/<class>/NNNNNN.png,
  // DIR/t10k-labels-idx1-ubyte) in its 4096-byte buffers.
  char room[4096];
  ct_status st = ct_path_format(room, sizeof room, "%s/%0*d", dir, 64, 0);
  if (st == CT_OK) st = ct_make_dirs(dir);
  if (st != CT_OK) return st;
  switch (format) {
  case CT_TOY_IMAGES_PNG:
    st = write_png_split(dir, "train", train, overwrite);
    if (st == CT_OK) st = write_png_split(dir, "test", test, overwrite);
    return st;
  case CT_TOY_IMAGES_CIFAR10: return write_cifar(dir, train, test, overwrite);
  case CT_TOY_IMAGES_IDX:
    st = write_idx(dir, "train", train, overwrite);
    if (st == CT_OK) st = write_idx(dir, "t10k", test, overwrite);
    return st;
  }
  return ct_error(CT_ERR_ARG, "toy images: unknown format %d", (int)format);
}
