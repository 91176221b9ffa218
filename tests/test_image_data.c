// Image data (data/image.h, idx.h, cifar.h, png_folder.h): each loader on
// small files written here (IDX plain and gzip, CIFAR-10/100 with names,
// PNG folders of every colour type), each bad input's error naming the
// file; normalization values; augmentation on a known image; batches the
// same at 1 and 2 threads and with or without the prefetch thread; seek
// reproducing the rest of an epoch. Real Fashion-MNIST is read when
// installed (/usr/share/datasets/fashion-mnist, or argv[1]).
#include "core/threads.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/png_folder.h"
#include "tests/harness.h"

#include <png.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[] = "/tmp/ct_test_image_XXXXXX";

static const char *tmp_path(const char *name) {
  static char buf[8][512];
  static int next;
  char *p = buf[next++ % 8];
  snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
  return p;
}

static void write_bytes(const char *path, const void *bytes, size_t len,
                        bool gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    gzwrite(f, bytes, (unsigned)len);
    gzclose(f);
  } else {
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, len, f);
    fclose(f);
  }
}

static void write_text(const char *path, const char *text) {
  write_bytes(path, text, strlen(text), false);
}

static void check_error(ct_status st, ct_status want, const char *needle,
                        const char *what) {
  CHECK(st == want, "%s: status %s, want %s (%s)", what, ct_status_name(st),
        ct_status_name(want), ct_last_error());
  CHECK(strstr(ct_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'",
        what, ct_last_error(), needle);
}

// ---- IDX ---------------------------------------------------------------------

static size_t idx_file(uint8_t *out, uint32_t magic, const uint32_t *dims,
                       int ndim, const uint8_t *data, size_t n) {
  size_t k = 0;
  uint32_t words[4] = {magic, dims[0], ndim > 1 ? dims[1] : 0,
                       ndim > 2 ? dims[2] : 0};
  for (int w = 0; w <= ndim; w++)
    for (int b = 3; b >= 0; b--) out[k++] = (uint8_t)(words[w] >> (8 * b));
  memcpy(out + k, data, n);
  return k + n;
}

static void test_idx(void) {
  uint8_t px[3 * 2 * 4], lab[3] = {7, 0, 9}, buf[256];
  for (int i = 0; i < 24; i++) px[i] = (uint8_t)(i * 10);
  uint32_t dims[3] = {3, 2, 4};
  size_t n_img = idx_file(buf, 0x803, dims, 3, px, sizeof px);
  write_bytes(tmp_path("train-images-idx3-ubyte.gz"), buf, n_img, true);
  write_bytes(tmp_path("img.idx"), buf, n_img, false);
  write_bytes(tmp_path("img_trunc.idx"), buf, n_img - 1, false);
  {  // a gzip stream cut short
    gzFile f = gzopen(tmp_path("img_cut.idx.gz"), "wb");
    gzwrite(f, buf, (unsigned)n_img);
    gzclose(f);
    FILE *g = fopen(tmp_path("img_cut.idx.gz"), "rb");
    uint8_t z[256];
    size_t zn = fread(z, 1, sizeof z, g);
    fclose(g);
    write_bytes(tmp_path("img_cut.idx.gz"), z, zn - 6, false);
  }
  uint8_t longer[256];
  memcpy(longer, buf, n_img);
  longer[n_img] = 1;
  write_bytes(tmp_path("img_long.idx"), longer, n_img + 1, false);
  size_t n_lab = idx_file(buf, 0x801, dims, 1, lab, 3);
  write_bytes(tmp_path("train-labels-idx1-ubyte"), buf, n_lab, false);
  write_bytes(tmp_path("lab.idx.gz"), buf, n_lab, true);
  uint32_t two[1] = {2};
  n_lab = idx_file(buf, 0x801, two, 1, lab, 2);
  write_bytes(tmp_path("lab_two.idx"), buf, n_lab, false);

  ct_image_dataset d;
  // Plain images, gzipped labels.
  ct_status st =
      ct_idx_load(&d, tmp_path("img.idx"), tmp_path("lab.idx.gz"), 10);
  CHECK(st == CT_OK, "idx load: %s", ct_last_error());
  if (!st) {
    CHECK(d.N == 3 && d.C == 1 && d.H == 2 && d.W == 4 && d.K == 10,
          "idx dims %lld %d %d %d %d", (long long)d.N, d.C, d.H, d.W, d.K);
    CHECK(memcmp(d.pixels, px, sizeof px) == 0, "idx pixels");
    CHECK(d.labels[0] == 7 && d.labels[2] == 9, "idx labels");
    CHECK(strcmp(ct_string_list_get(&d.class_names, 3), "3") == 0,
          "default names");
    ct_image_dataset_set_names(&d, ct_fashion_mnist_class_names, 10);
    CHECK(strcmp(ct_string_list_get(&d.class_names, 9), "Ankle boot") == 0,
          "fashion names");
    ct_image_dataset_free(&d);
  }
  // The folder layout: gzipped images (".gz" found), plain labels.
  st = ct_idx_load_dir(&d, tmpdir, true, 10);
  CHECK(st == CT_OK && d.N == 3 && d.pixels[23] == 230, "idx dir: %s",
        ct_last_error());
  ct_image_dataset_free(&d);

  check_error(
      ct_idx_load(&d, tmp_path("lab.idx.gz"), tmp_path("lab.idx.gz"), 10),
      CT_ERR_FORMAT, "lab.idx.gz: magic number 0x00000801", "idx swapped");
  check_error(
      ct_idx_load(&d, tmp_path("img_trunc.idx"), tmp_path("lab.idx.gz"), 10),
      CT_ERR_FORMAT, "img_trunc.idx: truncated", "idx truncated");
  check_error(
      ct_idx_load(&d, tmp_path("img_cut.idx.gz"), tmp_path("lab.idx.gz"), 10),
      CT_ERR_FORMAT, "img_cut.idx.gz: the gzip data is truncated",
      "idx cut gzip");
  check_error(
      ct_idx_load(&d, tmp_path("img_long.idx"), tmp_path("lab.idx.gz"), 10),
      CT_ERR_FORMAT, "img_long.idx: 1 bytes after", "idx long");
  check_error(ct_idx_load(&d, tmp_path("img.idx"), tmp_path("lab_two.idx"), 10),
              CT_ERR_FORMAT, "lab_two.idx: 2 labels for the 3 images",
              "idx count");
  check_error(ct_idx_load(&d, tmp_path("img.idx"), tmp_path("lab.idx.gz"), 9),
              CT_ERR_INDEX, "lab.idx.gz: image 2: label 9 outside [0, 9)",
              "idx label range");
  check_error(
      ct_idx_load(&d, tmp_path("missing.idx"), tmp_path("lab.idx.gz"), 10),
      CT_ERR_IO, "missing.idx: cannot open", "idx missing");
  CHECK(d.pixels == NULL && d.N == 0, "failed load leaves an empty dataset");
}

// Bounds: an IDX .gz whose data inflates past its header's claim fails at
// the first extra byte, not when memory runs out; a header claiming more
// than the gzip bytes can inflate to is refused before any allocation; a
// whole-file read stops at its limit (/dev/zero); gzip members concatenate
// and trailing garbage is an error.
static void test_bounds(void) {
  uint8_t head[16], lab_head[8], none[1] = {0};
  uint32_t dims[3] = {2, 28, 28};
  idx_file(head, 0x803, dims, 3, none, 0);
  idx_file(lab_head, 0x801, dims, 1, none, 0);
  uint8_t *zeros = calloc(1, 1 << 24);
  {  // 16 MiB of zeros after a header that claims 2 images (1568 bytes)
    gzFile f = gzopen(tmp_path("bomb.idx.gz"), "wb9");
    gzwrite(f, head, 16);
    gzwrite(f, zeros, 1 << 24);
    gzclose(f);
    f = gzopen(tmp_path("lab2.idx.gz"), "wb");
    gzwrite(f, lab_head, 8);
    gzwrite(f, zeros, 2);
    gzclose(f);
  }
  ct_image_dataset d;
  check_error(
      ct_idx_load(&d, tmp_path("bomb.idx.gz"), tmp_path("lab2.idx.gz"), 10),
      CT_ERR_FORMAT, "bomb.idx.gz: over 1048576 bytes after the data",
      "idx gzip inflating past its claim");
  // A header claiming 60000 x 28 x 28 in a few hundred gzip bytes.
  dims[0] = 60000;
  idx_file(head, 0x803, dims, 3, none, 0);
  write_bytes(tmp_path("claim.idx.gz"), head, 16, true);
  check_error(
      ct_idx_load(&d, tmp_path("claim.idx.gz"), tmp_path("lab2.idx.gz"), 10),
      CT_ERR_FORMAT,
      "claim.idx.gz: truncated: the header's sizes need "
      "more bytes than the file can hold",
      "idx claim beyond the gzip size");
  uint8_t *bytes;
  int64_t len;
  check_error(ct_image_read_file("/dev/zero", 1 << 20, &bytes, &len),
              CT_ERR_FORMAT, "/dev/zero: more than 1048576 bytes",
              "read limit");
  // Two gzip members read as one stream; anything else after them is not.
  write_bytes(tmp_path("two.gz"), "ab", 2, true);
  {
    FILE *f = fopen(tmp_path("two.gz"), "ab");
    gzFile g = gzdopen(fileno(f), "ab");
    gzwrite(g, "cd", 2);
    gzclose(g);
  }
  CHECK(ct_image_read_file(tmp_path("two.gz"), 100, &bytes, &len) == CT_OK &&
            len == 4 && !memcmp(bytes, "abcd", 4),
        "gzip members: %s", ct_last_error());
  free(bytes);
  {
    FILE *f = fopen(tmp_path("two.gz"), "ab");
    fwrite(zeros, 1, 3, f);
    fclose(f);
  }
  check_error(ct_image_read_file(tmp_path("two.gz"), 100, &bytes, &len),
              CT_ERR_FORMAT, "two.gz: 3 bytes of trailing garbage",
              "gzip trailing zeros");
  free(zeros);
}

// A path past the 4096-byte buffers is an error naming it, not a stack
// overflow: ROOT (about 3900 bytes, nested folders) / CLASS / IMAGE.png.
static void test_long_paths(void) {
  char root[4096];
  char name[251];
  memset(name, 'd', 250);
  name[250] = '\0';
  int n = snprintf(root, sizeof root, "%s", tmpdir);
  while (n < 3600) {
    n += snprintf(root + n, sizeof root - (size_t)n, "/%s", name);
    mkdir(root, 0777);
  }
  memset(name, 'c', 200);
  name[200] = '\0';
  n += snprintf(root + n, sizeof root - (size_t)n, "/%s", name);
  mkdir(root, 0777);
  memset(name, 'f', 200);
  memcpy(name + 196, ".png", 5);
  // The class folder is opened relative to its parent: the image's path is
  // beyond what open() takes, so only its name is made.
  char cwd[512];
  if (getcwd(cwd, sizeof cwd) && chdir(root) == 0) {
    write_text(name, "not a png");
    if (chdir(cwd) != 0) perror("chdir");
  }
  *strrchr(root, '/') = '\0';  // back to ROOT
  ct_image_dataset d;
  check_error(ct_png_folder_load(&d, root, 1, 8, 8), CT_ERR_ARG,
              "path too long", "png folder with a path over 4095 bytes");
}

// ---- CIFAR -------------------------------------------------------------------

// A record: label byte(s), then R, G, B planes with value (seed + c + p) & 255.
static void cifar_record(uint8_t *r, int label_bytes, int coarse, int label,
                         int seed) {
  if (label_bytes == 2) *r++ = (uint8_t)coarse;
  *r++ = (uint8_t)label;
  for (int c = 0; c < 3; c++)
    for (int p = 0; p < 1024; p++)
      r[c * 1024 + p] = (uint8_t)(seed + 7 * c + p);
}

static void test_cifar(void) {
  char dir10[600], dir100[600];
  snprintf(dir10, sizeof dir10, "%s/c10", tmpdir);
  snprintf(dir100, sizeof dir100, "%s/c100", tmpdir);
  mkdir(dir10, 0755);
  mkdir(dir100, 0755);
  static uint8_t rec[4 * 3074];
  char path[700];
  for (int f = 1; f <= 5; f++) {
    for (int i = 0; i < 2; i++)
      cifar_record(rec + i * 3073, 1, 0, (f + i) % 10, 10 * f + i);
    snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir10, f);
    write_bytes(path, rec, 2 * 3073, false);
  }
  cifar_record(rec, 1, 0, 3, 99);
  snprintf(path, sizeof path, "%s/test_batch.bin", dir10);
  write_bytes(path, rec, 3073, false);
  snprintf(path, sizeof path, "%s/batches.meta.txt", dir10);
  write_text(path,
             "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\n"
             "ship\ntruck\n\n");
  ct_image_dataset d;
  ct_status st = ct_cifar_load(&d, dir10, CT_CIFAR10, true);
  CHECK(st == CT_OK, "cifar10 train: %s", ct_last_error());
  if (!st) {
    CHECK(d.N == 10 && d.C == 3 && d.H == 32 && d.W == 32 && d.K == 10,
          "cifar10 dims");
    // Image 5: file 3, record 1: label 4, seed 31; G plane pixel 5 = 31+7+5.
    CHECK(d.labels[5] == 4, "cifar10 label %d", d.labels[5]);
    CHECK(ct_image_dataset_image(&d, 5)[1024 + 5] == 43, "cifar10 pixel");
    CHECK(strcmp(ct_string_list_get(&d.class_names, 9), "truck") == 0,
          "cifar10 names");
    ct_image_dataset_free(&d);
  }
  st = ct_cifar_load(&d, dir10, CT_CIFAR10, false);
  CHECK(st == CT_OK && d.N == 1 && d.labels[0] == 3, "cifar10 test: %s",
        ct_last_error());
  ct_image_dataset_free(&d);

  // CIFAR-100: fine names present, coarse names absent.
  cifar_record(rec, 2, 19, 99, 1);
  cifar_record(rec + 3074, 2, 4, 42, 2);
  cifar_record(rec + 2 * 3074, 2, 0, 0, 3);
  snprintf(path, sizeof path, "%s/train.bin", dir100);
  write_bytes(path, rec, 3 * 3074, false);
  char names[1200] = "";
  for (int k = 0; k < 100; k++)
    snprintf(names + strlen(names), sizeof names - strlen(names),
             "class_%d\r\n", k);
  snprintf(path, sizeof path, "%s/fine_label_names.txt", dir100);
  write_text(path, names);
  st = ct_cifar_load(&d, dir100, CT_CIFAR100_FINE, true);
  CHECK(st == CT_OK && d.N == 3 && d.K == 100 && d.labels[0] == 99 &&
            d.labels[1] == 42,
        "cifar100 fine: %s", ct_last_error());
  CHECK(st || strcmp(ct_string_list_get(&d.class_names, 42), "class_42") == 0,
        "cifar100 names");
  CHECK(st || ct_image_dataset_image(&d, 1)[0] == 2, "cifar100 pixel");
  ct_image_dataset_free(&d);
  st = ct_cifar_load(&d, dir100, CT_CIFAR100_COARSE, true);
  CHECK(st == CT_OK && d.K == 20 && d.labels[0] == 19 && d.labels[1] == 4,
        "cifar100 coarse: %s", ct_last_error());
  CHECK(st || strcmp(ct_string_list_get(&d.class_names, 19), "19") == 0,
        "cifar100 coarse default names");
  ct_image_dataset_free(&d);

  // Bad inputs.
  write_bytes(tmp_path("cut.bin"), rec, 2 * 3073 - 5, false);
  const char *cut[1] = {tmp_path("cut.bin")};
  check_error(ct_cifar_load_files(&d, CT_CIFAR10, cut, 1), CT_ERR_FORMAT,
              "cut.bin: 6141 bytes is not a whole number", "cifar truncated");
  cifar_record(rec, 1, 0, 2, 0);
  cifar_record(rec + 3073, 1, 0, 10, 0);
  write_bytes(tmp_path("badlabel.bin"), rec, 2 * 3073, false);
  const char *bad[1] = {tmp_path("badlabel.bin")};
  check_error(ct_cifar_load_files(&d, CT_CIFAR10, bad, 1), CT_ERR_INDEX,
              "badlabel.bin: record 1: label 10 outside [0, 10)",
              "cifar label");
  check_error(ct_cifar_load_files(&d, CT_CIFAR100_FINE, cut, 1), CT_ERR_FORMAT,
              "CIFAR-100 records", "cifar100 truncated");
  snprintf(path, sizeof path, "%s/batches.meta.txt", dir10);
  write_text(path, "airplane\nautomobile\n");
  check_error(ct_cifar_load(&d, dir10, CT_CIFAR10, false), CT_ERR_FORMAT,
              "batches.meta.txt: 2 class names, expected 10", "cifar names");
  snprintf(path, sizeof path, "%s/data_batch_4.bin", dir10);
  unlink(path);
  check_error(ct_cifar_load(&d, dir10, CT_CIFAR10, true), CT_ERR_IO,
              "data_batch_4.bin: cannot open", "cifar missing");
}

// ---- PNG folders ---------------------------------------------------------------

// Writes a w x h PNG of `color_type` / `bit_depth` from raw row bytes.
static void write_png(const char *path, int w, int h, int color_type,
                      int bit_depth, const uint8_t *data,
                      const png_color *palette, int palette_n) {
  FILE *f = fopen(path, "wb");
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    CHECK(false, "libpng failed writing %s", path);
    png_destroy_write_struct(&png, &info);
    fclose(f);
    return;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, bit_depth, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (palette) png_set_PLTE(png, info, palette, palette_n);
  png_write_info(png, info);
  int channels = color_type == PNG_COLOR_TYPE_GRAY         ? 1
                 : color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                 : color_type == PNG_COLOR_TYPE_RGB        ? 3
                 : color_type == PNG_COLOR_TYPE_RGBA       ? 4
                                                           : 1;
  size_t row = (size_t)w * channels * (bit_depth / 8);
  for (int y = 0; y < h; y++) png_write_row(png, data + y * row);
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  fclose(f);
}

static void test_png(void) {
  char root[600], path[700];
  snprintf(root, sizeof root, "%s/png", tmpdir);
  mkdir(root, 0755);
  snprintf(path, sizeof path, "%s/cat", root);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/dog", root);
  mkdir(path, 0755);
  // 4x2 images, pixel p = y*4+x. Expected RGB per pixel: (p*10, p*20, p*30).
  enum { W = 4, H = 2, P = W * H };
  uint8_t gray[P], ga[2 * P], rgb[3 * P], rgba[4 * P], pal_idx[P];
  uint8_t g16[2 * P];
  png_color pal[P];
  for (int p = 0; p < P; p++) {
    gray[p] = (uint8_t)(p * 10);
    ga[2 * p] = (uint8_t)(p * 10);
    ga[2 * p + 1] = (uint8_t)(p * 3);
    for (int c = 0; c < 3; c++) rgb[3 * p + c] = (uint8_t)(p * 10 * (c + 1));
    for (int c = 0; c < 3; c++) rgba[4 * p + c] = (uint8_t)(p * 10 * (c + 1));
    rgba[4 * p + 3] = 128;
    pal[p] =
        (png_color){(uint8_t)(p * 10), (uint8_t)(p * 20), (uint8_t)(p * 30)};
    pal_idx[p] = (uint8_t)p;
    uint16_t v = (uint16_t)(p * 10 * 257);  // scales back to p * 10
    g16[2 * p] = (uint8_t)(v >> 8);
    g16[2 * p + 1] = (uint8_t)v;
  }
  snprintf(path, sizeof path, "%s/cat/a_gray.png", root);
  write_png(path, W, H, PNG_COLOR_TYPE_GRAY, 8, gray, NULL, 0);
  snprintf(path, sizeof path, "%s/cat/b_rgba.png", root);
  write_png(path, W, H, PNG_COLOR_TYPE_RGBA, 8, rgba, NULL, 0);
  snprintf(path, sizeof path, "%s/cat/notes.txt", root);
  write_text(path, "not an image, skipped");
  snprintf(path, sizeof path, "%s/dog/c_rgb.png", root);
  write_png(path, W, H, PNG_COLOR_TYPE_RGB, 8, rgb, NULL, 0);
  snprintf(path, sizeof path, "%s/dog/d_palette.png", root);
  write_png(path, W, H, PNG_COLOR_TYPE_PALETTE, 8, pal_idx, pal, P);
  snprintf(path, sizeof path, "%s/dog/e_gray16.png", root);
  write_png(path, W, H, PNG_COLOR_TYPE_GRAY, 16, g16, NULL, 0);
  snprintf(path, sizeof path, "%s/dog/f_gray_alpha.png", root);
  write_png(path, W, H, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga, NULL, 0);

  ct_image_dataset d;
  ct_status st = ct_png_folder_load(&d, root, 3, 0, 0);
  CHECK(st == CT_OK, "png folder: %s", ct_last_error());
  if (!st) {
    CHECK(d.N == 6 && d.C == 3 && d.H == H && d.W == W && d.K == 2,
          "png dims %lld %d %d %d %d", (long long)d.N, d.C, d.H, d.W, d.K);
    CHECK(strcmp(ct_string_list_get(&d.class_names, 1), "dog") == 0,
          "png class names");
    int want_labels[6] = {0, 0, 1, 1, 1, 1};
    bool colored[6] = {false, true, true, true, false, false};
    int bad = 0;
    for (int i = 0; i < 6; i++) {
      bad += d.labels[i] != want_labels[i];
      const uint8_t *img = ct_image_dataset_image(&d, i);
      for (int c = 0; c < 3; c++)
        for (int p = 0; p < P; p++)
          bad += img[c * P + p] != p * 10 * (colored[i] ? c + 1 : 1);
    }
    CHECK(bad == 0, "png pixels: %d wrong", bad);
    ct_image_dataset_free(&d);
  }
  // Gray: RGB becomes ITU-R 601 luma; gray stays as it is.
  st = ct_png_folder_load(&d, root, 1, 0, 0);
  CHECK(st == CT_OK && d.C == 1, "png gray: %s", ct_last_error());
  if (!st) {
    int p = 5, r = 50, g = 100, b = 150;
    int luma = (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16;
    CHECK(ct_image_dataset_image(&d, 2)[p] == luma, "luma %d want %d",
          ct_image_dataset_image(&d, 2)[p], luma);
    CHECK(ct_image_dataset_image(&d, 4)[p] == 50, "gray16 scaled");
    ct_image_dataset_free(&d);
  }
  // Resized: a 4x2 gray ramp to 8x4, bilinear with half-pixel centres.
  st = ct_png_folder_load(&d, root, 1, 4, 8);
  CHECK(st == CT_OK && d.H == 4 && d.W == 8, "png resize: %s", ct_last_error());
  if (!st) {
    const uint8_t *img = ct_image_dataset_image(&d, 0);
    // Output (y=1, x=3): source (0.25, 1.25) -> rows 0,1 weight .25,
    // cols 1,2 weight .25: top = 10*.75+20*.25 = 12.5, bottom = 52.5,
    // value = 12.5*.75 + 52.5*.25 = 22.5 -> 23.
    CHECK(img[1 * 8 + 3] == 23, "bilinear got %d", img[1 * 8 + 3]);
    CHECK(img[0] == 0 && img[4 * 8 - 1] == 70, "bilinear corners %d %d", img[0],
          img[31]);
    ct_image_dataset_free(&d);
  }
  uint8_t one[3 * 2 * 2];
  snprintf(path, sizeof path, "%s/dog/c_rgb.png", root);
  st = ct_png_read_image(path, 3, 2, 2, one);
  CHECK(st == CT_OK, "png read image: %s", ct_last_error());

  // Bad inputs, each naming the file or folder.
  snprintf(path, sizeof path, "%s/dog/e_gray16.png", root);
  FILE *f = fopen(path, "rb");
  uint8_t bytes[4096];
  size_t n = fread(bytes, 1, sizeof bytes, f);
  fclose(f);
  snprintf(path, sizeof path, "%s/dog/g_cut.png", root);
  write_bytes(path, bytes, n - 20, false);
  check_error(ct_png_folder_load(&d, root, 3, 8, 8), CT_ERR_FORMAT,
              "g_cut.png: cannot decode PNG", "png truncated");
  const char *why = strstr(ct_last_error(), "cannot decode PNG: ");
  CHECK(why && why[strlen("cannot decode PNG: ")], "libpng's reason: %s",
        ct_last_error());
  snprintf(path, sizeof path, "%s/dog/g_cut.png", root);
  write_text(path, "this is text");
  check_error(ct_png_folder_load(&d, root, 3, 8, 8), CT_ERR_FORMAT,
              "g_cut.png: not a PNG file", "png not png");
  unlink(path);
  snprintf(path, sizeof path, "%s/dog/h_big.png", root);
  write_png(path, 3, 3, PNG_COLOR_TYPE_GRAY, 8, gray, NULL, 0);
  check_error(ct_png_folder_load(&d, root, 3, 0, 0), CT_ERR_FORMAT,
              "h_big.png: image is 3x3, the first", "png mismatched");
  st = ct_png_folder_load(&d, root, 3, 8, 8);
  CHECK(st == CT_OK && d.N == 7, "resizing accepts mixed sizes: %s",
        ct_last_error());
  ct_image_dataset_free(&d);
  snprintf(path, sizeof path, "%s/empty", root);
  mkdir(path, 0755);
  check_error(ct_png_folder_load(&d, root, 3, 8, 8), CT_ERR_FORMAT,
              "png/empty: no .png images", "png empty class");
  check_error(ct_png_folder_load(&d, path, 3, 8, 8), CT_ERR_FORMAT,
              "png/empty: no class folders", "png no classes");
  snprintf(path, sizeof path, "%s/nowhere", root);
  check_error(ct_png_folder_load(&d, path, 3, 8, 8), CT_ERR_IO,
              "nowhere: cannot open folder", "png missing root");
}

// ---- normalization, augmentation, batches ---------------------------------------

// Pixel buffers: zeroed, and a real buffer even for no images (NULL is
// kept for running out of memory).
static void test_pixels_alloc(void) {
  uint8_t *none = ct_image_pixels_alloc(0, 3, 8, 8);
  CHECK(none != NULL, "no images: still a buffer");
  free(none);
  uint8_t *px = ct_image_pixels_alloc(2, 3, 5, 7);
  int nonzero = 0;
  for (int i = 0; px && i < 2 * 3 * 5 * 7; i++) nonzero += px[i] != 0;
  CHECK(px && nonzero == 0, "zeroed (%d nonzero)", nonzero);
  free(px);
}

// A dataset of n 3x8x8 images with distinct pixels and labels i % K.
static void make_dataset(ct_image_dataset *d, int64_t n, int K) {
  ct_image_dataset_alloc(d, n, 3, 8, 8, K);
  for (int64_t i = 0; i < n * 192; i++)
    d->pixels[i] = (uint8_t)((i * 37 + i / 192) & 255);
  for (int64_t i = 0; i < n; i++) d->labels[i] = (int32_t)(i % K);
}

static void test_normalize(void) {
  ct_image_dataset d;
  make_dataset(&d, 5, 3);
  ct_image_loader_options o = {.batch_size = 2,
                               .seed = 1,
                               .mean = {0.5f, 0.25f, 0.f},
                               .std = {0.5f, 0.25f, 2.f}};
  ct_image_loader l;
  ct_status st = ct_image_loader_init(&l, &d, &o);
  CHECK(st == CT_OK, "loader init: %s", ct_last_error());
  CHECK(ct_image_loader_epoch_batches(&l) == 3, "3 batches of 2, 2, 1");
  const ct_image_batch *b;
  double max_diff = 0;
  for (int k = 0; k < 3 && !st; k++) {
    ct_image_loader_next(&l, &b);
    CHECK(b->B == (k < 2 ? 2 : 1) && b->targets == NULL, "batch %d size", k);
    for (int64_t r = 0; r < b->B; r++) {
      CHECK(b->index[r] == 2 * k + r && b->labels[r] == (2 * k + r) % 3,
            "unshuffled order");
      const uint8_t *px = ct_image_dataset_image(&d, b->index[r]);
      for (int c = 0; c < 3; c++)
        for (int p = 0; p < 64; p++) {
          double want = ((double)px[c * 64 + p] / 255.0 - o.mean[c]) / o.std[c];
          double diff = fabs(b->images[(r * 3 + c) * 64 + p] - want);
          max_diff = diff > max_diff ? diff : max_diff;
        }
    }
  }
  printf("normalize: max |diff| %.3g\n", max_diff);
  CHECK(max_diff < 1e-6, "normalization off by %g", max_diff);
  CHECK(l.epoch == 1 && l.position == 0, "epoch advanced");
  ct_image_loader_free(&l);
  float mean[3], std[3];
  ct_image_dataset_channel_stats(&d, mean, std);
  CHECK(mean[0] > 0.3f && mean[0] < 0.7f && std[0] > 0.2f, "stats %g %g",
        mean[0], std[0]);
  o.std[1] = -1;
  check_error(ct_image_loader_init(&l, &d, &o), CT_ERR_ARG, "channel 1",
              "negative std");
  o = (ct_image_loader_options){.batch_size = 0};
  check_error(ct_image_loader_init(&l, &d, &o), CT_ERR_ARG, "batch_size",
              "batch size 0");
  ct_image_dataset_free(&d);
}

// Crop and flip on a known image: the output is the input shifted by some
// (dy, dx) in [-p, p]^2 (zero fill), possibly mirrored.
static void test_crop_flip(void) {
  enum { C = 1, H = 6, W = 5 };
  uint8_t src[H * W], dst[H * W], tmp[H * W];
  for (int i = 0; i < H * W; i++) src[i] = (uint8_t)(i + 1);
  ct_image_aug a = {.crop_padding = 2, .hflip = true};
  uint8_t fill[1] = {0};
  int found = 0, flips = 0, shifted = 0;
  for (int i = 0; i < 40; i++) {
    ct_rng rng = ct_rng_make(5, ct_rng_stream(CT_IMAGE_RNG_AUG, 0));
    rng.offset = (uint64_t)i << 16;
    ct_image_augment(&a, &rng, src, dst, tmp, C, H, W, fill);
    bool match = false;
    for (int f = 0; f < 2 && !match; f++)
      for (int dy = -2; dy <= 2 && !match; dy++)
        for (int dx = -2; dx <= 2 && !match; dx++) {
          bool ok = true;
          for (int y = 0; y < H && ok; y++)
            for (int x = 0; x < W && ok; x++) {
              int sy = y + dy, sx = (f ? W - 1 - x : x) + dx;
              int want =
                  sy >= 0 && sy < H && sx >= 0 && sx < W ? src[sy * W + sx] : 0;
              ok = dst[y * W + x] == want;
            }
          if (ok) {
            match = true;
            flips += f;
            shifted += dy != 0 || dx != 0;
          }
        }
    found += match;
  }
  CHECK(found == 40, "%d of 40 crops are a shift (+ flip) of the input", found);
  CHECK(flips > 5 && flips < 35 && shifted > 20, "flips %d, shifts %d", flips,
        shifted);
  // RandAugment ops on a known image.
  uint8_t img[3 * 4], out[3 * 4];
  uint8_t f3[3] = {0, 0, 0};
  for (int i = 0; i < 12; i++) img[i] = (uint8_t)(i * 20);
  ct_randaug_apply(CT_RANDAUG_BRIGHTNESS, 10.f, -1, img, out, 3, 2, 2, f3);
  CHECK(out[5] == 10, "brightness x0.1: %d", out[5]);  // 100 * 0.1
  ct_randaug_apply(CT_RANDAUG_SOLARIZE, 5.f, 1, img, out, 3, 2, 2, f3);
  CHECK(out[7] == 255 - 140 && out[6] == 120, "solarize at 128");
  ct_randaug_apply(CT_RANDAUG_TRANSLATE_X, 10.f, 1, img, out, 3, 2, 2, f3);
  // Shift by 0.45 * 2 = 0.9 px: nearest sampling at x + 0.5 + 0.9.
  CHECK(out[0] == img[1] && out[1] == 0, "translate x");
  for (int op = 0; op < CT_RANDAUG_OP_COUNT; op++)
    ct_randaug_apply((ct_randaug_op)op, 9.f, 1, img, out, 3, 2, 2, f3);
}

// A batch's bytes (images, labels, indices, targets) into out; their count.
static size_t batch_bytes(const ct_image_batch *b, uint8_t *out) {
  size_t n = 0, img = (size_t)b->B * b->C * b->H * b->W * sizeof(float);
  memcpy(out + n, b->images, img);
  n += img;
  memcpy(out + n, b->labels, (size_t)b->B * 4);
  n += (size_t)b->B * 4;
  memcpy(out + n, b->index, (size_t)b->B * 8);
  n += (size_t)b->B * 8;
  if (b->targets) {
    memcpy(out + n, b->targets, (size_t)b->B * b->K * 4);
    n += (size_t)b->B * b->K * 4;
  }
  return n;
}

// Runs `batches` batches from (epoch 0, 0) and returns their bytes
// (images, labels, targets) concatenated.
// Reads `batches` batches from (epoch, position) of a run of `horizon`
// batches (0: none set) into out; returns the bytes.
static size_t run_loader_horizon(const ct_image_dataset *d,
                                 const ct_image_loader_options *o,
                                 int64_t horizon, int64_t epoch,
                                 int64_t position, int batches, uint8_t *out) {
  ct_image_loader l;
  ct_status st = ct_image_loader_init(&l, d, o);
  CHECK(st == CT_OK, "init: %s", ct_last_error());
  if (st) return 0;
  if (epoch || position) ct_image_loader_seek(&l, epoch, position);
  // After the seek, as the trainer does: what was prefetched is dropped.
  if (horizon) ct_image_loader_set_horizon(&l, horizon);
  size_t n = 0;
  for (int k = 0; k < batches; k++) {
    const ct_image_batch *b;
    ct_image_loader_next(&l, &b);
    n += batch_bytes(b, out + n);
  }
  ct_image_loader_free(&l);
  return n;
}

static size_t run_loader(const ct_image_dataset *d,
                         const ct_image_loader_options *o, int64_t epoch,
                         int64_t position, int batches, uint8_t *out) {
  return run_loader_horizon(d, o, 0, epoch, position, batches, out);
}

// Data-parallel reading with a stride (ct_image_loader_set_stride), with
// and without the prefetch thread: rank r of N, seeked to batch r * A,
// reads batches s * N * A + r * A + a of the sequential reader, across
// epoch ends, and after each step stands where that reader is r * A on.
static void test_stride(void) {
  ct_image_dataset d;
  make_dataset(&d, 22, 5);
  ct_image_loader_options o = {.batch_size = 4,
                               .shuffle = true,
                               .seed = 9,
                               .aug = {.crop_padding = 1,
                                       .hflip = true,
                                       .mixup_alpha = 0.8f,
                                       .mix_prob = 1.0f,
                                       .label_smoothing = 0.1f},
                               .threads = 1};
  enum { TOTAL = 24, MAX = 4 * (192 * 4 + 4 + 8 + 5 * 4) };  // 4 epochs
  uint8_t *want = malloc((size_t)TOTAL * MAX), *got = malloc(MAX);
  size_t len[TOTAL];
  int64_t where[TOTAL + 1][2] = {{0, 0}};
  ct_image_loader seq;
  ct_image_loader_init(&seq, &d, &o);
  for (int g = 0; g < TOTAL; g++) {
    len[g] = run_loader(&d, &o, g / 6, g % 6, 1, want + (size_t)g * MAX);
    const ct_image_batch *b;
    ct_image_loader_next(&seq, &b);
    where[g + 1][0] = seq.epoch;
    where[g + 1][1] = seq.position;
  }
  ct_image_loader_free(&seq);
  static const int64_t layouts[][2] = {{2, 1}, {3, 2}, {4, 1}};
  for (int prefetch = 0; prefetch < 2; prefetch++)
    for (size_t k = 0; k < sizeof layouts / sizeof *layouts; k++) {
      const int64_t N = layouts[k][0], A = layouts[k][1], K = N * A;
      o.prefetch = prefetch;
      int bad = 0, bad_state = 0;
      for (int64_t r = 0; r < N; r++) {
        ct_image_loader l;
        ct_image_loader_init(&l, &d, &o);
        ct_image_loader_set_stride(&l, A, (N - 1) * A);
        ct_image_loader_seek(&l, where[r * A][0], where[r * A][1]);
        for (int64_t s = 0; s < TOTAL / K; s++) {
          for (int64_t a = 0; a < A; a++) {
            const ct_image_batch *b;
            ct_image_loader_next(&l, &b);
            const int64_t g = s * K + r * A + a;
            size_t n = batch_bytes(b, got);
            bad += n != len[g] || memcmp(got, want + (size_t)g * MAX, n) != 0;
          }
          const int64_t g = (s + 1) * K + r * A;
          bad_state += g <= TOTAL &&
                       (l.epoch != where[g][0] || l.position != where[g][1]);
        }
        ct_image_loader_free(&l);
      }
      CHECK(bad == 0 && bad_state == 0,
            "%lld ranks x %lld (prefetch %d): %d batches differ from the "
            "sequential reader's, %d states",
            (long long)N, (long long)A, prefetch, bad, bad_state);
    }
  free(want);
  free(got);
  ct_image_dataset_free(&d);
}

static void test_batches(void) {
  ct_image_dataset d;
  make_dataset(&d, 22, 5);
  ct_image_loader_options o = {.batch_size = 4,
                               .shuffle = true,
                               .seed = 7,
                               .mean = {0.5f, 0.5f, 0.5f},
                               .std = {0.25f, 0.25f, 0.25f},
                               .aug = {.crop_padding = 2,
                                       .hflip = true,
                                       .randaug_ops = 2,
                                       .randaug_magnitude = 9,
                                       .randaug_magnitude_std = 0.5f,
                                       .mixup_alpha = 0.8f,
                                       .cutmix_alpha = 1.0f,
                                       .mix_prob = 1.0f,
                                       .switch_prob = 0.5f,
                                       .label_smoothing = 0.1f},
                               .threads = 1};
  // 6 batches an epoch (22 = 5*4 + 2); 14 batches cross two boundaries.
  enum { BATCHES = 14 };
  size_t cap = BATCHES * 4 * (192 * 4 + 4 + 8 + 5 * 4);
  uint8_t *ref = malloc(cap), *got = malloc(cap);
  size_t n_ref = run_loader(&d, &o, 0, 0, BATCHES, ref);
  o.threads = 2;
  size_t n = run_loader(&d, &o, 0, 0, BATCHES, got);
  CHECK(n == n_ref && memcmp(ref, got, n) == 0, "1 vs 2 threads differ");
  o.prefetch = true;
  n = run_loader(&d, &o, 0, 0, BATCHES, got);
  CHECK(n == n_ref && memcmp(ref, got, n) == 0, "prefetch changes batches");
  // Seek to epoch 1, batch 2 (batch 8 overall): the rest is the same.
  size_t skip = 0;
  {
    uint8_t *head = malloc(cap);
    o.prefetch = false;
    skip = run_loader(&d, &o, 0, 0, 8, head);
    free(head);
  }
  o.prefetch = true;
  n = run_loader(&d, &o, 1, 2, BATCHES - 8, got);
  CHECK(n == n_ref - skip && memcmp(ref + skip, got, n) == 0,
        "seek(1, 2) with prefetch differs");
  o.prefetch = false;
  n = run_loader(&d, &o, 1, 2, BATCHES - 8, got);
  CHECK(n == n_ref - skip && memcmp(ref + skip, got, n) == 0,
        "seek(1, 2) differs");
  // Seek to an epoch's end: the next batch starts the next epoch.
  n = run_loader(&d, &o, 0, 6, BATCHES - 6, got);
  size_t six;
  {
    uint8_t *head = malloc(cap);
    six = run_loader(&d, &o, 0, 0, 6, head);
    free(head);
  }
  CHECK(n == n_ref - six && memcmp(ref + six, got, n) == 0,
        "seek(0, end) differs");

  // Mixing: targets are distributions; mixup rows are the blend of the
  // unmixed pair (the per-image stream does not depend on mixing).
  ct_image_loader lm, lp;
  ct_image_loader_options plain = o;
  plain.aug.mixup_alpha = plain.aug.cutmix_alpha = 0;
  ct_image_loader_init(&lm, &d, &o);
  ct_image_loader_init(&lp, &d, &plain);
  int mixups = 0, cutmixes = 0;
  double worst = 0, sum_err = 0;
  for (int k = 0; k < 12; k++) {
    const ct_image_batch *bm, *bp;
    ct_image_loader_next(&lm, &bm);
    ct_image_loader_next(&lp, &bp);
    CHECK(bm->targets && !bp->targets, "targets only when mixing");
    for (int64_t r = 0; r < bm->B; r++) {
      double s = 0;
      for (int k2 = 0; k2 < 5; k2++) s += bm->targets[r * 5 + k2];
      sum_err = fmax(sum_err, fabs(s - 1));
    }
    if (bm->mix_lambda < 1 && !bm->cutmix) {
      mixups++;
      float lam = bm->mix_lambda;
      for (int64_t r = 0; r < bm->B; r++)
        for (int e = 0; e < 192; e++) {
          float a = bp->images[r * 192 + e];
          float b = bp->images[(bm->B - 1 - r) * 192 + e];
          worst = fmax(
              worst, fabs(bm->images[r * 192 + e] - (a * lam + b * (1 - lam))));
        }
    }
    cutmixes += bm->cutmix;
  }
  CHECK(sum_err < 1e-5, "targets sum to 1 (off by %g)", sum_err);
  CHECK(mixups > 0 && cutmixes > 0, "mixups %d, cutmixes %d", mixups, cutmixes);
  CHECK(worst < 1e-6, "mixup blend off by %g", worst);
  ct_image_loader_free(&lm);
  ct_image_loader_free(&lp);

  // Augmentation depends on the image, not the batch it lands in.
  ct_image_loader_options o4 = plain, o8 = plain;
  o8.batch_size = 8;
  ct_image_loader l4, l8;
  ct_image_loader_init(&l4, &d, &o4);
  ct_image_loader_init(&l8, &d, &o8);
  const ct_image_batch *b4, *b8;
  ct_image_loader_next(&l8, &b8);
  int same = 0;
  for (int k = 0; k < 2; k++) {
    ct_image_loader_next(&l4, &b4);
    for (int r = 0; r < 4; r++)
      same += b4->index[r] == b8->index[4 * k + r] &&
              memcmp(b4->images + r * 192, b8->images + (4 * k + r) * 192,
                     192 * sizeof(float)) == 0;
  }
  CHECK(same == 8, "batch size changed the augmentation (%d of 8 same)", same);
  ct_image_loader_free(&l4);
  ct_image_loader_free(&l8);
  CHECK(ct_image_loader_init(&l4, &d, &o4) == CT_OK, "init");
  check_error(ct_image_loader_seek(&l4, 0, 7), CT_ERR_ARG, "outside 0..6",
              "seek past end");
  ct_image_loader_free(&l4);
  free(ref);
  free(got);
  ct_image_dataset_free(&d);
}

// The augmentation strength over a run (ct_aug_strength): its values, the
// augmentation it gives, and batches that are a function of (epoch,
// position, horizon) only: at 1 and 2 threads, with prefetch (whose first
// batch, built before the horizon was set, is rebuilt), after a seek.
static void test_aug_schedule(void) {
  const ct_aug_schedule both = {
      .full_epochs = 100, .off_epochs = 10, .ramp = 0.2};
  CHECK_CLOSE(ct_aug_strength(&both, 5, 0.9), 0.0, 0, "a short run: none");
  CHECK_CLOSE(ct_aug_strength(&both, 10, 0.9), 0.0, 0, "off_epochs: none");
  CHECK_CLOSE(ct_aug_strength(&both, 55, 0.9), 0.5, 1e-15, "half way: half");
  CHECK_CLOSE(ct_aug_strength(&both, 55, 0.1), 0.25, 1e-15, "in the ramp");
  CHECK_CLOSE(ct_aug_strength(&both, 55, 0.0), 0.0, 0, "the first batch");
  CHECK_CLOSE(ct_aug_strength(&both, 100, 0.2), 1.0, 1e-15, "the ramp's end");
  CHECK_CLOSE(ct_aug_strength(&both, 400, 0.5), 1.0, 0, "a long run: all");
  const ct_aug_schedule ramp = {.ramp = 0.25}, full = {.full_epochs = 40};
  CHECK_CLOSE(ct_aug_strength(&ramp, 1, 0.125), 0.5, 1e-15, "ramp only");
  CHECK_CLOSE(ct_aug_strength(&ramp, 1, 0.75), 1.0, 0, "after the ramp");
  CHECK_CLOSE(ct_aug_strength(&full, 10, 0.0), 0.25, 1e-15, "length only");
  const ct_aug_schedule none = {0};
  CHECK_CLOSE(ct_aug_strength(&none, 0.5, 0.0), 1.0, 0, "no schedule");
  // Nondecreasing along a run.
  double prev = 0.0;
  bool monotone = true;
  for (int i = 0; i <= 100; i++) {
    double v = ct_aug_strength(&both, 70, i / 100.0);
    monotone = monotone && v >= prev && v <= 1.0;
    prev = v;
  }
  CHECK(monotone, "the strength never falls along a run");

  const ct_image_aug a = {.crop_padding = 2,
                          .hflip = true,
                          .randaug_ops = 2,
                          .randaug_magnitude = 9,
                          .randaug_magnitude_std = 0.5f,
                          .mixup_alpha = 0.8f,
                          .cutmix_alpha = 1.0f,
                          .mix_prob = 1.0f,
                          .switch_prob = 0.5f,
                          .label_smoothing = 0.1f};
  ct_image_aug h = ct_image_aug_at_strength(&a, 0.5);
  CHECK(h.randaug_ops == 2 && h.randaug_magnitude == 4.5f &&
            h.randaug_magnitude_std == 0.25f && h.mix_prob == 0.5f &&
            h.crop_padding == 2 && h.hflip && h.mixup_alpha == 0.8f,
        "strength 0.5: ops %d, magnitude %g, std %g, mix_prob %g",
        h.randaug_ops, h.randaug_magnitude, h.randaug_magnitude_std,
        h.mix_prob);
  ct_image_aug z = ct_image_aug_at_strength(&a, 0.0);
  CHECK(z.randaug_ops == 0 && z.mix_prob == 0.0f && z.crop_padding == 2 &&
            z.hflip && ct_image_aug_mixing(&z),
        "strength 0: no RandAugment, no mixing, crops and flips kept");
  ct_image_aug f = ct_image_aug_at_strength(&a, 1.0);
  CHECK(f.randaug_ops == a.randaug_ops &&
            f.randaug_magnitude == a.randaug_magnitude &&
            f.randaug_magnitude_std == a.randaug_magnitude_std &&
            f.mix_prob == a.mix_prob,
        "strength 1: as configured");

  ct_image_dataset d;
  make_dataset(&d, 22, 5);
  ct_image_loader_options o = {.batch_size = 4,
                               .shuffle = true,
                               .drop_last = true,
                               .seed = 5,
                               .mean = {0.5f, 0.5f, 0.5f},
                               .std = {0.25f, 0.25f, 0.25f},
                               .aug = a,
                               .aug_schedule = {.ramp = 0.5},
                               .threads = 1};
  // 5 batches of 4 an epoch; a run of 14: the ramp ends at batch 7 = (1, 2).
  enum { BATCHES = 14 };
  size_t cap = BATCHES * 4 * (192 * 4 + 4 + 8 + 5 * 4);
  uint8_t *ref = malloc(cap), *got = malloc(cap), *plain = malloc(cap);
  ct_image_loader l;
  CHECK(ct_image_loader_init(&l, &d, &o) == CT_OK, "init");
  CHECK_CLOSE(ct_image_loader_strength(&l, 0, 3), 1.0, 0,
              "no horizon yet: as configured");
  ct_image_loader_set_horizon(&l, BATCHES);
  CHECK_CLOSE(ct_image_loader_strength(&l, 0, 0), 0.0, 0, "batch 0");
  CHECK_CLOSE(ct_image_loader_strength(&l, 0, 3), 3.0 / 7.0, 1e-15, "batch 3");
  CHECK_CLOSE(ct_image_loader_strength(&l, 1, 1), 6.0 / 7.0, 1e-15, "batch 6");
  CHECK_CLOSE(ct_image_loader_strength(&l, 1, 2), 1.0, 0, "batch 7");
  ct_image_loader_free(&l);

  size_t n_ref = run_loader_horizon(&d, &o, BATCHES, 0, 0, BATCHES, ref);
  o.threads = 2;
  size_t n = run_loader_horizon(&d, &o, BATCHES, 0, 0, BATCHES, got);
  CHECK(n == n_ref && !memcmp(ref, got, n), "scheduled: 1 vs 2 threads");
  o.prefetch = true;
  n = run_loader_horizon(&d, &o, BATCHES, 0, 0, BATCHES, got);
  CHECK(n == n_ref && !memcmp(ref, got, n),
        "scheduled with prefetch: the first batch is rebuilt");
  size_t per = n_ref / BATCHES;  // every batch has the same size here
  n = run_loader_horizon(&d, &o, BATCHES, 1, 3, BATCHES - 8, got);
  CHECK(n == n_ref - 8 * per && !memcmp(ref + 8 * per, got, n),
        "scheduled: seek(1, 3) with prefetch gives the rest");
  // Past the ramp the batches are the unscheduled loader's; before it not.
  ct_image_loader_options unscheduled = o;
  unscheduled.aug_schedule = (ct_aug_schedule){0};
  size_t n_plain = run_loader(&d, &unscheduled, 0, 0, BATCHES, plain);
  CHECK(n_plain == n_ref && !memcmp(ref + 7 * per, plain + 7 * per, 7 * per),
        "after the ramp: the configured augmentation");
  CHECK(memcmp(ref, plain, per), "batch 0: weaker than configured");
  // Another run length: other batches early on.
  n = run_loader_horizon(&d, &o, 3 * BATCHES, 0, 0, BATCHES, got);
  CHECK(memcmp(ref + 3 * per, got + 3 * per, per),
        "the strength follows the run's length");

  // A run too short for any: crops and flips only, never mixed.
  o.aug_schedule = (ct_aug_schedule){.full_epochs = 100, .off_epochs = 10};
  ct_image_loader_options crop_flip = o;
  crop_flip.aug_schedule = (ct_aug_schedule){0};
  crop_flip.aug.randaug_ops = 0;
  crop_flip.aug.mix_prob = 0;
  n = run_loader_horizon(&d, &o, BATCHES, 0, 0, BATCHES, got);
  n_plain = run_loader(&d, &crop_flip, 0, 0, BATCHES, plain);
  CHECK(n == n_plain && !memcmp(got, plain, n),
        "strength 0: the batches of crops and flips alone");
  CHECK(ct_image_loader_init(&l, &d, &o) == CT_OK, "init");
  ct_image_loader_set_horizon(&l, BATCHES);
  int mixed = 0;
  for (int k = 0; k < BATCHES; k++) {
    const ct_image_batch *b;
    ct_image_loader_next(&l, &b);
    mixed += b->mix_lambda < 1.0f;
  }
  CHECK(mixed == 0, "strength 0: %d batches mixed", mixed);
  ct_image_loader_free(&l);

  o.aug_schedule = (ct_aug_schedule){.full_epochs = 10, .off_epochs = 10};
  check_error(ct_image_loader_init(&l, &d, &o), CT_ERR_ARG, "off_epochs 10",
              "off_epochs not below full_epochs");
  o.aug_schedule = (ct_aug_schedule){.ramp = 1.5};
  check_error(ct_image_loader_init(&l, &d, &o), CT_ERR_ARG, "ramp 1.5",
              "ramp above 1");
  free(ref);
  free(got);
  free(plain);
  ct_image_dataset_free(&d);
}

// Real Fashion-MNIST, when installed.
static void test_real_fashion_mnist(const char *dir) {
  char probe[1024];
  struct stat s;
  snprintf(probe, sizeof probe, "%s/t10k-labels-idx1-ubyte.gz", dir);
  bool there = stat(probe, &s) == 0;
  snprintf(probe, sizeof probe, "%s/t10k-labels-idx1-ubyte", dir);
  there |= stat(probe, &s) == 0;
  if (!there) {
    printf("fashion-mnist: %s not found, skipped\n", dir);
    return;
  }
  ct_image_dataset d;
  ct_status st = ct_idx_load_dir(&d, dir, false, 10);
  CHECK(st == CT_OK, "fashion-mnist test split: %s", ct_last_error());
  if (st) return;
  CHECK(d.N == 10000 && d.H == 28 && d.W == 28, "fashion-mnist dims");
  int64_t counts[10] = {0};
  for (int64_t i = 0; i < d.N; i++) counts[d.labels[i]]++;
  CHECK(counts[0] == 1000 && counts[9] == 1000, "1000 per class");
  printf("fashion-mnist: %lld test images of %dx%d\n", (long long)d.N, d.H,
         d.W);
  ct_image_dataset_free(&d);
}

int main(int argc, char **argv) {
  ct_threads_from_env();
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_idx();
  test_bounds();
  test_long_paths();
  test_cifar();
  test_png();
  test_pixels_alloc();
  test_normalize();
  test_crop_flip();
  test_batches();
  test_stride();
  test_aug_schedule();
  test_real_fashion_mnist(argc > 1 ? argv[1]
                                   : "/usr/share/datasets/fashion-mnist");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return test_summary("image_data");
}
