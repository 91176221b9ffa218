// The generated image sets (data/toy_images.h), mostly the textured
// variant: the same seed gives the same bytes and another seed or split
// others; every class has its share; the images are colour; the CIFAR-10
// files it writes read back through the CIFAR loader byte for byte with the
// class names, and the PNG folders through the PNG loader; IDX refuses RGB;
// bad arguments are errors naming the problem.
#include "data/cifar.h"
#include "data/image.h"
#include "data/png_folder.h"
#include "data/toy_images.h"
#include "tests/harness.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ct_test_toy_images_XXXXXX";

static size_t image_bytes(const ct_image_dataset *d) {
  return (size_t)d->N * d->C * d->H * d->W;
}

static bool same_set(const ct_image_dataset *a, const ct_image_dataset *b) {
  return a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W &&
         !memcmp(a->pixels, b->pixels, image_bytes(a)) &&
         !memcmp(a->labels, b->labels, (size_t)a->N * sizeof *a->labels);
}

static void test_determinism(void) {
  ct_image_dataset a = {0}, b = {0}, c = {0}, s = {0};
  ct_status st = ct_toy_images_textured(&a, 200, 32, 10, 7, 0);
  CHECK(st == CT_OK, "generate: %s", ct_last_error());
  st = ct_toy_images_textured(&b, 200, 32, 10, 7, 0);
  CHECK(st == CT_OK && same_set(&a, &b), "the same seed: the same bytes");
  ct_image_dataset_free(&b);
  st = ct_toy_images_textured(&b, 200, 32, 10, 8, 0);
  CHECK(st == CT_OK && memcmp(a.pixels, b.pixels, image_bytes(&a)),
        "another seed: other images");
  st = ct_toy_images_textured(&c, 200, 32, 10, 7, 2);
  CHECK(st == CT_OK && memcmp(a.pixels, c.pixels, image_bytes(&a)),
        "another split: other images");
  // The gray variant draws from its own stream: unchanged by this one.
  st = ct_toy_images_generate(&s, 200, 32, 6, 7, 0);
  CHECK(st == CT_OK && s.C == 1, "the gray variant is still gray");
  ct_image_dataset_free(&a);
  ct_image_dataset_free(&b);
  ct_image_dataset_free(&c);
  ct_image_dataset_free(&s);
}

static void test_balance_and_colour(void) {
  const int64_t n = 1003;
  ct_image_dataset d = {0};
  ct_status st = ct_toy_images_textured(&d, n, 32, 10, 3, 0);
  CHECK(st == CT_OK, "generate: %s", ct_last_error());
  if (st != CT_OK) return;
  CHECK(d.C == 3 && d.H == 32 && d.W == 32 && d.K == 10, "shape %dx%dx%d, %d",
        d.C, d.H, d.W, d.K);
  int64_t count[10] = {0};
  for (int64_t i = 0; i < n; i++) {
    CHECK(d.labels[i] >= 0 && d.labels[i] < 10, "label %d", d.labels[i]);
    if (d.labels[i] >= 0 && d.labels[i] < 10) count[d.labels[i]]++;
  }
  for (int k = 0; k < 10; k++)
    CHECK(count[k] == 100 + (k < 3), "class %d: %lld images", k,
          (long long)count[k]);
  // Shuffled: the first ten labels are not 0..9 in order.
  bool cycled = true;
  for (int i = 0; i < 10; i++) cycled = cycled && d.labels[i] == i;
  CHECK(!cycled, "the rows are shuffled");
  // Colour: most images have pixels whose channels differ widely, and the
  // set's mean colour is not gray-ish in every image.
  int64_t colourful = 0;
  const int64_t plane = 32 * 32;
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *px = ct_image_dataset_image(&d, i);
    int64_t wide = 0;
    for (int64_t p = 0; p < plane; p++) {
      int r = px[p], g = px[plane + p], b = px[2 * plane + p];
      int hi = r > g ? (r > b ? r : b) : (g > b ? g : b);
      int lo = r < g ? (r < b ? r : b) : (g < b ? g : b);
      wide += hi - lo > 60;
    }
    colourful += wide > plane / 4;
  }
  CHECK(colourful > n / 2, "%lld of %lld images are colourful",
        (long long)colourful, (long long)n);
  const char *names[] = {"hbar", "vbar",  "square", "frame", "plus",
                         "diag", "cross", "disc",   "ring",  "triangle"};
  for (int k = 0; k < 10; k++)
    CHECK(!strcmp(ct_string_list_get(&d.class_names, k), names[k]),
          "class %d named %s", k, ct_string_list_get(&d.class_names, k));
  ct_image_dataset_free(&d);
}

// The CIFAR-10 files read back through the CIFAR loader as generated.
static void test_cifar_files(void) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/cifar", tmpdir);
  ct_image_dataset tr = {0}, te = {0}, rtr = {0}, rte = {0};
  ct_status st = ct_toy_images_textured(&tr, 500, 32, 10, 1, 0);
  if (st == CT_OK) st = ct_toy_images_textured(&te, 120, 32, 10, 1, 2);
  if (st == CT_OK)
    st = ct_toy_images_write(dir, CT_TOY_IMAGES_CIFAR10, &tr, &te, false);
  CHECK(st == CT_OK, "write: %s", ct_last_error());
  st = ct_cifar_load(&rtr, dir, CT_CIFAR10, true);
  CHECK(st == CT_OK, "load the training files: %s", ct_last_error());
  CHECK(st == CT_OK && same_set(&tr, &rtr),
        "the training files hold the generated images and labels");
  st = ct_cifar_load(&rte, dir, CT_CIFAR10, false);
  CHECK(st == CT_OK && same_set(&te, &rte),
        "the test file holds the generated images and labels (%s)",
        st == CT_OK ? "" : ct_last_error());
  for (int k = 0; st == CT_OK && k < 10; k++)
    CHECK(!strcmp(ct_string_list_get(&rtr.class_names, k),
                  ct_string_list_get(&tr.class_names, k)),
          "class %d read back as %s", k,
          ct_string_list_get(&rtr.class_names, k));
  st = ct_toy_images_write(dir, CT_TOY_IMAGES_CIFAR10, &tr, &te, false);
  CHECK(st == CT_ERR_IO || st == CT_ERR_ARG,
        "existing files are not overwritten (%s)", ct_status_name(st));
  CHECK(strstr(ct_last_error(), "data_batch_1.bin") != NULL,
        "the refusal names the file: %s", ct_last_error());

  // PNG folders: RGB files the PNG loader reads back (by class folder).
  char png[512];
  snprintf(png, sizeof png, "%s/png", tmpdir);
  st = ct_toy_images_write(png, CT_TOY_IMAGES_PNG, &tr, &te, false);
  CHECK(st == CT_OK, "write PNG: %s", ct_last_error());
  char train_dir[600];
  snprintf(train_dir, sizeof train_dir, "%s/train", png);
  ct_image_dataset p = {0};
  st = ct_png_folder_load(&p, train_dir, 3, 32, 32);
  CHECK(st == CT_OK && p.N == tr.N && p.C == 3, "PNG read back: %s",
        st == CT_OK ? "" : ct_last_error());
  uint64_t sum_png = 0, sum_gen = 0;
  for (size_t i = 0; st == CT_OK && i < image_bytes(&tr); i++) {
    sum_png += p.pixels[i];
    sum_gen += tr.pixels[i];
  }
  CHECK(sum_png == sum_gen, "PNG pixels: sum %llu, generated %llu",
        (unsigned long long)sum_png, (unsigned long long)sum_gen);

  // IDX holds gray images only.
  char idx[512];
  snprintf(idx, sizeof idx, "%s/idx", tmpdir);
  st = ct_toy_images_write(idx, CT_TOY_IMAGES_IDX, &tr, &te, false);
  CHECK(st == CT_ERR_ARG && strstr(ct_last_error(), "gray"),
        "IDX refuses RGB: %s", ct_last_error());
  CHECK(access(idx, F_OK) != 0, "nothing written for IDX (not even %s)", idx);
  ct_image_dataset_free(&p);
  ct_image_dataset_free(&tr);
  ct_image_dataset_free(&te);
  ct_image_dataset_free(&rtr);
  ct_image_dataset_free(&rte);
}

static void test_errors(void) {
  ct_image_dataset d = {0};
  ct_status st = ct_toy_images_textured(&d, 10, 32, 11, 1, 0);
  CHECK(st == CT_ERR_ARG && strstr(ct_last_error(), "11 textured classes"),
        "11 classes: %s", ct_last_error());
  st = ct_toy_images_textured(&d, 10, 8, 10, 1, 0);
  CHECK(st == CT_ERR_ARG && strstr(ct_last_error(), "size"), "size 8: %s",
        ct_last_error());
  st = ct_toy_images_textured(&d, 0, 32, 10, 1, 0);
  CHECK(st == CT_ERR_ARG, "no images: %s", ct_last_error());
  ct_toy_image_variant v;
  CHECK(ct_toy_image_variant_parse("textured", &v) == CT_OK &&
            v == CT_TOY_IMAGES_TEXTURED,
        "parse textured");
  CHECK(ct_toy_image_variant_parse("shapes", &v) == CT_OK &&
            v == CT_TOY_IMAGES_SHAPES,
        "parse shapes");
  st = ct_toy_image_variant_parse("stripes", &v);
  CHECK(st == CT_ERR_ARG && strstr(ct_last_error(), "shapes or textured"),
        "an unknown variant lists the known ones: %s", ct_last_error());
}

int main(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_determinism();
  test_balance_and_colour();
  test_cifar_files();
  test_errors();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return test_summary("toy_images");
}
