// PNG decoding, resizing and class folders (see png_folder.h).
#include "data/png_folder.h"
#include "data/png_error.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

// Largest side accepted: a bound on what a corrupt header can make us
// allocate.
enum { PNG_MAX_SIDE = 1 << 14 };

// Interleaved (n pixels of `from` channels) -> `to` channels, 1 or 3.
static void convert_channels(const uint8_t *src, int from, uint8_t *dst, int to,
                             int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *s = src + i * from;
    uint8_t *d = dst + i * to;
    if (from == to) {
      memcpy(d, s, (size_t)to);
    } else if (to == 3) {
      d[0] = d[1] = d[2] = s[0];
    } else {  // ITU-R 601-2 luma, as PIL's convert("L")
      d[0] =
          (uint8_t)((s[0] * 19595u + s[1] * 38470u + s[2] * 7471u + 0x8000u) >>
                    16);
    }
  }
}

ct_status ct_png_decode(const char *path, int channels, uint8_t **pixels,
                        int *height, int *width) {
  *pixels = NULL;
  if (channels != 1 && channels != 3)
    return ct_error(CT_ERR_ARG,
                    "%s: channels %d: PNG images load as 1 "
                    "(gray) or 3 (RGB) channels",
                    path, channels);
  errno = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return ct_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  uint8_t sig[8];
  if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8)) {
    fclose(f);
    return ct_error(CT_ERR_FORMAT, "%s: not a PNG file (bad signature)", path);
  }
  ct_png_failure failure = {{0}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &failure,
                                           ct_png_on_error, ct_png_on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_read_struct(&png, NULL, NULL);
    fclose(f);
    return ct_error(CT_ERR_NOMEM, "%s: out of memory for libpng", path);
  }
  // Set after setjmp, read after a longjmp: volatile.
  uint8_t *volatile raw = NULL, *volatile out = NULL;
  png_bytep *volatile rows = NULL;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
    free(raw);
    free(out);
    free(rows);
    return ct_error(CT_ERR_FORMAT, "%s: cannot decode PNG: %s", path,
                    failure.message);
  }
  png_init_io(png, f);
  png_set_sig_bytes(png, 8);
  png_set_user_limits(png, PNG_MAX_SIDE, PNG_MAX_SIDE);
  png_read_info(png, info);
  png_set_expand(png);  // palette -> RGB, gray < 8 bits -> 8, tRNS -> alpha
#ifdef PNG_READ_SCALE_16_TO_8_SUPPORTED
  png_set_scale_16(png);  // v * 255 / 65535, rounded
#else
  png_set_strip_16(png);
#endif
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  int w = (int)png_get_image_width(png, info);
  int h = (int)png_get_image_height(png, info);
  int from = png_get_channels(png, info);
  size_t row_bytes = png_get_rowbytes(png, info);
  if ((from != 1 && from != 3) || row_bytes != (size_t)w * from) {
    snprintf(failure.message, sizeof failure.message,
             "unexpected layout after conversion (%d channels)", from);
    png_longjmp(png, 1);
  }
  raw = malloc((size_t)h * row_bytes);
  rows = malloc((size_t)h * sizeof *rows);
  out = malloc((size_t)h * w * channels);
  if (!raw || !rows || !out) {
    snprintf(failure.message, sizeof failure.message, "out of memory for %dx%d",
             w, h);
    png_longjmp(png, 1);
  }
  for (int y = 0; y < h; y++) rows[y] = raw + (size_t)y * row_bytes;
  png_read_image(png, rows);
  png_read_end(png, NULL);
  convert_channels(raw, from, out, channels, (int64_t)h * w);
  png_destroy_read_struct(&png, &info, NULL);
  fclose(f);
  free(raw);
  free(rows);
  *pixels = out;
  *height = h;
  *width = w;
  return CT_OK;
}

void ct_image_resize_bilinear(const uint8_t *src, int sh, int sw, int C,
                              uint8_t *dst, int H, int W) {
  int64_t plane = (int64_t)H * W;
  if (sh == H && sw == W) {
    for (int64_t p = 0; p < plane; p++)
      for (int c = 0; c < C; c++) dst[c * plane + p] = src[p * C + c];
    return;
  }
  // Half-pixel centres: source coordinate (y + 0.5) * sh / H - 0.5, clamped
  // at 0 (PyTorch's area_pixel_compute_source_index, align_corners=False).
  float ry = (float)sh / (float)H, rx = (float)sw / (float)W;
  for (int y = 0; y < H; y++) {
    float fy = ((float)y + 0.5f) * ry - 0.5f;
    fy = fy < 0 ? 0 : fy;
    int y0 = (int)fy, y1 = y0 + 1 < sh ? y0 + 1 : sh - 1;
    float wy = fy - (float)y0;
    for (int x = 0; x < W; x++) {
      float fx = ((float)x + 0.5f) * rx - 0.5f;
      fx = fx < 0 ? 0 : fx;
      int x0 = (int)fx, x1 = x0 + 1 < sw ? x0 + 1 : sw - 1;
      float wx = fx - (float)x0;
      const uint8_t *r0 = src + (int64_t)y0 * sw * C;
      const uint8_t *r1 = src + (int64_t)y1 * sw * C;
      for (int c = 0; c < C; c++) {
        float top = (1 - wx) * r0[x0 * C + c] + wx * r0[x1 * C + c];
        float bot = (1 - wx) * r1[x0 * C + c] + wx * r1[x1 * C + c];
        float v = floorf((1 - wy) * top + wy * bot + 0.5f);
        dst[c * plane + (int64_t)y * W + x] = v >= 255.f ? 255 : (uint8_t)v;
      }
    }
  }
}

ct_status ct_png_read_image(const char *path, int channels, int height,
                            int width, uint8_t *dst) {
  if (height < 1 || width < 1)
    return ct_error(CT_ERR_ARG, "%s: target size %dx%d must be positive", path,
                    width, height);
  uint8_t *px;
  int h, w;
  ct_status st = ct_png_decode(path, channels, &px, &h, &w);
  if (st) return st;
  ct_image_resize_bilinear(px, h, w, channels, dst, height, width);
  free(px);
  return CT_OK;
}

// ---- class folders -------------------------------------------------------------

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_png_name(const char *name) {
  size_t n = strlen(name);
  return n > 4 && strcasecmp(name + n - 4, ".png") == 0;
}

// The entries of `dir` that are folders (want_dirs) or regular .png files,
// skipping dot names, sorted, as a malloc'd array of malloc'd strings.
static ct_status list_dir(const char *dir, bool want_dirs, char ***names,
                          int64_t *count) {
  *names = NULL;
  *count = 0;
  errno = 0;
  DIR *dp = opendir(dir);
  if (!dp)
    return ct_error(CT_ERR_IO, "%s: cannot open folder: %s", dir,
                    strerror(errno));
  ct_status st = CT_OK;
  int64_t cap = 0;
  char path[4096];
  struct dirent *e;
  while (!st && (e = readdir(dp))) {
    if (e->d_name[0] == '.') continue;
    if (!want_dirs && !is_png_name(e->d_name)) continue;
    struct stat s;
    if ((st = ct_path_format(path, sizeof path, "%s/%s", dir, e->d_name)))
      break;
    if (stat(path, &s) != 0) continue;  // a dangling link: not an image
    if (want_dirs ? !S_ISDIR(s.st_mode) : !S_ISREG(s.st_mode)) continue;
    st = ct_grow_array((void **)names, &cap, *count + 1, sizeof **names, dir);
    if (!st && !((*names)[*count] = strdup(e->d_name)))
      st = ct_error(CT_ERR_NOMEM, "%s: out of memory", dir);
    if (!st) ++*count;
  }
  closedir(dp);
  if (!st && *count > 1)
    qsort(*names, (size_t)*count, sizeof **names, compare_names);
  return st;
}

static void free_names(char **names, int64_t count) {
  for (int64_t i = 0; i < count; i++) free(names[i]);
  free(names);
}

ct_status ct_png_folder_load(ct_image_dataset *d, const char *root,
                             int channels, int height, int width) {
  *d = (ct_image_dataset){0};
  if (channels != 1 && channels != 3)
    return ct_error(CT_ERR_ARG,
                    "%s: channels %d: PNG folders load as 1 or 3 "
                    "channels",
                    root, channels);
  if (height < 0 || width < 0 || (height == 0) != (width == 0))
    return ct_error(CT_ERR_ARG, "%s: size %dx%d: give both or neither", root,
                    width, height);
  char **classes;
  int64_t K;
  ct_status st = list_dir(root, true, &classes, &K);
  if (st) return st;
  if (K == 0) {
    free_names(classes, K);
    return ct_error(CT_ERR_FORMAT,
                    "%s: no class folders (expected "
                    "ROOT/<class>/<image>.png)",
                    root);
  }
  // Every image path and its label, in load order.
  ct_string_list files = {0};
  int32_t *labels = NULL;
  int64_t labels_cap = 0;
  char path[4096];
  for (int64_t k = 0; k < K && !st; k++) {
    char **images;
    int64_t n;
    st = ct_image_check_class_name(classes[k], strlen(classes[k]), root);
    if (!st) st = ct_path_format(path, sizeof path, "%s/%s", root, classes[k]);
    if (st || (st = list_dir(path, false, &images, &n))) break;
    if (n == 0)
      st = ct_error(CT_ERR_FORMAT, "%s: no .png images in this class folder",
                    path);
    for (int64_t i = 0; i < n && !st; i++) {
      st = ct_path_format(path, sizeof path, "%s/%s/%s", root, classes[k],
                          images[i]);
      if (!st) st = ct_string_list_push(&files, path, strlen(path));
      if (!st)
        st = ct_grow_array((void **)&labels, &labels_cap, files.count,
                           sizeof *labels, root);
      if (!st) labels[files.count - 1] = (int32_t)k;
    }
    free_names(images, n);
  }
  if (!st && K > INT32_MAX)
    st = ct_error(CT_ERR_FORMAT, "%s: too many class folders", root);
  bool resize = height > 0;  // else every image must have the first's size
  for (int64_t i = 0; i < files.count && !st; i++) {
    const char *file = ct_string_list_get(&files, i);
    uint8_t *px;
    int h, w;
    if ((st = ct_png_decode(file, channels, &px, &h, &w))) break;
    if (i == 0) {
      st = ct_image_dataset_alloc(d, files.count, channels, resize ? height : h,
                                  resize ? width : w, (int)K);
      if (!st)
        st =
            ct_image_dataset_set_names(d, (const char *const *)classes, (int)K);
    }
    if (!st && !resize && (h != d->H || w != d->W))
      st = ct_error(CT_ERR_FORMAT,
                    "%s: image is %dx%d, the first (%s) is "
                    "%dx%d: mismatched sizes (give a size to resize to)",
                    file, w, h, ct_string_list_get(&files, 0), d->W, d->H);
    if (!st) {
      ct_image_resize_bilinear(px, h, w, channels, ct_image_dataset_image(d, i),
                               d->H, d->W);
      d->labels[i] = labels[i];
    }
    free(px);
  }
  free_names(classes, K);
  ct_string_list_free(&files);
  free(labels);
  if (st) ct_image_dataset_free(d);
  return st;
}
