// Captioned images (data/captions.h, data/toy_captions.h): the generated set
// is deterministic, its held-out colour-object combinations never occur in
// training (and are flagged where they occur), its captions name only the
// objects present with their counts, its boxes lie inside the canvas; the
// writer and reader round-trip images, captions, boxes and flags (also
// resized); every kind of malformed captions file is refused naming the
// file, line:column and entry; captions tokenize to vocabulary ids.
#include "data/captions.h"
#include "data/idx.h"
#include "data/toy_captions.h"
#include "tests/harness.h"

#include <dirent.h>
#include <png.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static bool same_sets(const ct_caption_dataset *a,
                      const ct_caption_dataset *b) {
  if (a->N != b->N || a->C != b->C || a->H != b->H || a->W != b->W ||
      a->captions.count != b->captions.count ||
      a->object_names.count != b->object_names.count)
    return false;
  if (memcmp(a->pixels, b->pixels, (size_t)(a->N * a->C * a->H * a->W)) ||
      memcmp(a->ids, b->ids, (size_t)a->N * sizeof *a->ids) ||
      memcmp(a->heldout, b->heldout, (size_t)a->N * sizeof *a->heldout) ||
      memcmp(a->caption_start, b->caption_start,
             (size_t)(a->N + 1) * sizeof(int64_t)) ||
      memcmp(a->object_start, b->object_start,
             (size_t)(a->N + 1) * sizeof(int64_t)))
    return false;
  for (int64_t j = 0; j < a->captions.count; j++)
    if (strcmp(ct_string_list_get(&a->captions, j),
               ct_string_list_get(&b->captions, j)))
      return false;
  for (int64_t k = 0; k < a->object_start[a->N]; k++) {
    const ct_caption_object *x = &a->objects[k], *y = &b->objects[k];
    if (strcmp(ct_string_list_get(&a->object_names, x->name),
               ct_string_list_get(&b->object_names, y->name)) ||
        x->x != y->x || x->y != y->y || x->w != y->w || x->h != y->h)
      return false;
  }
  return true;
}

// The index of a colour word, or -1.
static int colour_of(const char *word) {
  for (int c = 0; c < CT_TOY_CAPTIONS_COLOURS; c++)
    if (!strcmp(word, ct_toy_captions_colour_name(c))) return c;
  return -1;
}

// The kind a noun names (singular or plural), or -1.
static int kind_of(const char *word, bool items) {
  for (int k = 0; k < ct_toy_captions_kinds(items); k++)
    if (ct_caption_word_names(word, ct_toy_captions_kind_name(items, k)))
      return k;
  return -1;
}

// Splits a caption into words (',' and ':' dropped) in words[64][16].
static int split_words(const char *text, char words[64][16]) {
  int n = 0, len = 0;
  for (const char *p = text;; p++) {
    bool end = *p == ' ' || *p == ',' || *p == ':' || !*p;
    if (end && len) {
      words[n++][len] = 0;
      len = 0;
    } else if (!end && len < 15 && n < 64) {
      words[n][len++] = *p;
    }
    if (!*p) break;
  }
  return n;
}

// The properties of a generated split: boxes inside, nouns only of objects
// present, every object named by the first (list) caption with its count,
// the "N objects" count right; the (colour, kind) pairs of the captions,
// held out or not, checked against `train` and the flags.
static void check_generated(const ct_caption_dataset *d, bool items,
                            uint64_t seed, bool train, int64_t *heldout_seen) {
  for (int64_t i = 0; i < d->N; i++) {
    int64_t n = ct_caption_object_count(d, i);
    CHECK(n >= 1 && n <= 4, "image %lld: %lld objects", (long long)i,
          (long long)n);
    CHECK(ct_caption_count(d, i) >= 3 && ct_caption_count(d, i) <= 5,
          "image %lld: %lld captions", (long long)i,
          (long long)ct_caption_count(d, i));
    int per_kind[10] = {0};
    for (int64_t k = 0; k < n; k++) {
      const ct_caption_object *o = &ct_caption_objects(d, i)[k];
      CHECK(o->x >= 0 && o->y >= 0 && o->w > 0 && o->h > 0 &&
                o->x + o->w <= d->W && o->y + o->h <= d->H,
            "image %lld: box %g %g %g %g outside %dx%d", (long long)i, o->x,
            o->y, o->w, o->h, d->W, d->H);
      per_kind[o->name]++;
    }
    bool flagged = false;
    for (int64_t c = 0; c < ct_caption_count(d, i); c++) {
      char w[64][16];
      int nw = split_words(ct_caption_text(d, i, c), w);
      int named[10] = {0};
      for (int t = 0; t < nw; t++) {
        int k = kind_of(w[t], items);
        if (k < 0) continue;
        CHECK(per_kind[k] > 0, "image %lld caption '%s' names %s, not present",
              (long long)i, ct_caption_text(d, i, c), w[t]);
        // The colour next to the noun: before it ("red disk") or after it
        // in the inverted form ("disk, red").
        int col = t > 0 ? colour_of(w[t - 1]) : -1;
        if (col < 0 && t + 1 < nw) col = colour_of(w[t + 1]);
        CHECK(col >= 0, "image %lld caption '%s': %s has no colour",
              (long long)i, ct_caption_text(d, i, c), w[t]);
        if (col < 0) continue;
        bool held = ct_toy_captions_heldout(seed, items, k, col);
        CHECK(!(train && held), "training caption '%s' shows held-out %s %s",
              ct_caption_text(d, i, c), w[t - 1 >= 0 ? t - 1 : t], w[t]);
        flagged |= held;
        // The count word before the colour: "a" or a number.
        int count = 1;
        const char *num = t >= 2 ? w[t - 2] : "";
        if (!strcmp(num, "two")) count = 2;
        if (!strcmp(num, "three")) count = 3;
        if (!strcmp(num, "four")) count = 4;
        if (c == 0) named[k] += count;
      }
      if (c == 0)  // the list form names every object, counts included
        for (int k = 0; k < 10; k++)
          CHECK(named[k] == per_kind[k],
                "image %lld list caption '%s': %d of kind %d, %d present",
                (long long)i, ct_caption_text(d, i, c), named[k], k,
                per_kind[k]);
      if (strstr(ct_caption_text(d, i, c), "object")) {
        const char *want[] = {"", "one", "two", "three", "four"};
        CHECK(!strcmp(w[0], want[n]), "image %lld '%s': %lld objects",
              (long long)i, ct_caption_text(d, i, c), (long long)n);
      }
    }
    CHECK(flagged == d->heldout[i], "image %lld: heldout flag %d, captions %d",
          (long long)i, d->heldout[i], flagged);
    *heldout_seen += d->heldout[i];
  }
}

static void test_generate(void) {
  ct_toy_captions_options o = {.size = 64, .grid = 3, .seed = 7};
  ct_caption_dataset a, b, head, other;
  CHECK(!ct_toy_captions_generate(&a, 300, &o, 0), "%s", ct_last_error());
  CHECK(!ct_toy_captions_generate(&b, 300, &o, 0), "%s", ct_last_error());
  CHECK(same_sets(&a, &b), "same seed, different sets");
  CHECK(!ct_toy_captions_generate(&head, 40, &o, 0), "%s", ct_last_error());
  CHECK(head.N == 40 && !memcmp(head.pixels, a.pixels, 40 * 3 * 64 * 64) &&
            head.captions.count == a.caption_start[40] &&
            !strcmp(ct_caption_text(&head, 39, 0), ct_caption_text(&a, 39, 0)),
        "the first images depend on n");
  ct_toy_captions_options o2 = o;
  o2.seed = 8;
  CHECK(!ct_toy_captions_generate(&other, 300, &o2, 0), "%s", ct_last_error());
  CHECK(memcmp(a.pixels, other.pixels, 300 * 3 * 64 * 64),
        "seeds 7 and 8 give the same images");
  int64_t seen = 0;
  check_generated(&a, false, 7, true, &seen);
  CHECK(seen == 0, "%lld training images flagged heldout", (long long)seen);
  // Every kind has exactly one held-out colour, and each kind and colour
  // still occurs in training.
  for (int k = 0; k < ct_toy_captions_kinds(false); k++) {
    int held = 0;
    for (int c = 0; c < CT_TOY_CAPTIONS_COLOURS; c++)
      held += ct_toy_captions_heldout(7, false, k, c);
    CHECK(held == 1, "kind %d: %d held-out colours", k, held);
  }
  ct_caption_dataset test;
  CHECK(!ct_toy_captions_generate(&test, 300, &o, 2), "%s", ct_last_error());
  CHECK(memcmp(test.pixels, a.pixels, 300 * 3 * 64 * 64),
        "test split equals the training split");
  seen = 0;
  check_generated(&test, false, 7, false, &seen);
  CHECK(seen > 30 && seen < 270, "%lld of 300 test images held out",
        (long long)seen);
  // Bad options.
  ct_caption_dataset bad;
  o2.grid = 5;
  CHECK(ct_toy_captions_generate(&bad, 10, &o2, 0) == CT_ERR_ARG &&
            strstr(ct_last_error(), "grid 5"),
        "%s", ct_last_error());
  o2.grid = 2;
  o2.size = 16;
  CHECK(ct_toy_captions_generate(&bad, 10, &o2, 0) == CT_ERR_ARG &&
            strstr(ct_last_error(), "size"),
        "%s", ct_last_error());
  ct_caption_dataset_free(&a);
  ct_caption_dataset_free(&b);
  ct_caption_dataset_free(&head);
  ct_caption_dataset_free(&other);
  ct_caption_dataset_free(&test);
}

// Fashion-MNIST items when the data set is installed.
static void test_generate_items(void) {
  const char *dir = "/usr/share/datasets/fashion-mnist";
  ct_image_dataset items = {0};
  if (ct_idx_load_dir(&items, dir, false, 10)) {
    printf("captions_data: %s not readable, items skipped\n", dir);
    return;
  }
  ct_toy_captions_options o = {
      .size = 64, .grid = 2, .seed = 3, .items = &items};
  ct_caption_dataset a, b;
  CHECK(!ct_toy_captions_generate(&a, 100, &o, 0), "%s", ct_last_error());
  CHECK(!ct_toy_captions_generate(&b, 100, &o, 0), "%s", ct_last_error());
  CHECK(same_sets(&a, &b), "items: same seed, different sets");
  int64_t seen = 0;
  check_generated(&a, true, 3, true, &seen);
  CHECK(a.object_names.count == 10 &&
            !strcmp(ct_string_list_get(&a.object_names, 4), "coat"),
        "item names");
  ct_caption_dataset_free(&a);
  ct_caption_dataset_free(&b);
  ct_image_dataset_free(&items);
}

static void test_round_trip(void) {
  ct_toy_captions_options o = {.size = 48, .grid = 2, .seed = 5};
  ct_caption_dataset d, back, half;
  CHECK(!ct_toy_captions_generate(&d, 20, &o, 1), "%s", ct_last_error());
  CHECK(!ct_captions_write(tmp_path("cap"), "val", &d, false), "%s",
        ct_last_error());
  CHECK(ct_captions_write(tmp_path("cap"), "val", &d, false) == CT_ERR_IO,
        "overwrote without asking");
  CHECK(!ct_captions_write(tmp_path("cap"), "val", &d, true), "%s",
        ct_last_error());
  CHECK(!ct_captions_load(&back, tmp_path("cap/val.json"), tmp_path("cap/val"),
                          3, 0),
        "%s", ct_last_error());
  CHECK(same_sets(&d, &back), "write then load differs");
  CHECK(ct_caption_max_count(&back) <= 5 && ct_caption_max_count(&back) >= 3,
        "max captions %lld", (long long)ct_caption_max_count(&back));
  // Resized to 24: boxes halve.
  CHECK(!ct_captions_load(&half, tmp_path("cap/val.json"), tmp_path("cap/val"),
                          1, 24),
        "%s", ct_last_error());
  CHECK(half.H == 24 && half.C == 1 &&
            half.object_start[half.N] == d.object_start[d.N],
        "resized load");
  for (int64_t k = 0; k < d.object_start[d.N]; k++)
    CHECK(half.objects[k].x == d.objects[k].x / 2 &&
              half.objects[k].w == d.objects[k].w / 2,
          "object %lld not scaled", (long long)k);
  // Tokens: word tokenizer, lowercased; a vocabulary from the captions.
  ct_text_tokenizer tok;
  ct_text_tokenizer_init(&tok, CT_TOKENIZER_WORD, true);
  ct_vocab_counter c = {0};
  CHECK(!ct_captions_count_tokens(&d, &tok, &c), "%s", ct_last_error());
  ct_vocab v;
  CHECK(!ct_vocab_build(&v, &c, 1, 0), "%s", ct_last_error());
  ct_caption_ids ids;
  CHECK(!ct_captions_encode(&d, &tok, &v, &ids), "%s", ct_last_error());
  CHECK(ids.n == d.captions.count, "%lld ids rows", (long long)ids.n);
  // "a red disk, two blue rings" -> a red disk , two ...: the comma is a
  // token; every id is known.
  int64_t longest = 0;
  for (int64_t j = 0; j < ids.n; j++) {
    ct_string_list words = {0};
    ct_text_tokenizer_tokenize(&tok, ct_string_list_get(&d.captions, j),
                               &words);
    CHECK(ids.start[j + 1] - ids.start[j] == words.count,
          "caption %lld: %lld ids, %lld tokens", (long long)j,
          (long long)(ids.start[j + 1] - ids.start[j]), (long long)words.count);
    for (int64_t t = 0; t < words.count; t++)
      CHECK(!strcmp(ct_vocab_token(&v, ids.ids[ids.start[j] + t]),
                    ct_string_list_get(&words, t)),
            "caption %lld token %lld", (long long)j, (long long)t);
    if (words.count > longest) longest = words.count;
    ct_string_list_free(&words);
  }
  CHECK(ids.max_len == longest, "max_len %lld, want %lld",
        (long long)ids.max_len, (long long)longest);
  CHECK(ct_vocab_id(&v, ",") != CT_VOCAB_UNK, "',' is not a token");
  CHECK(ct_caption_word_names("dresses", "dress") &&
            ct_caption_word_names("coats", "coat") &&
            ct_caption_word_names("coat", "coat") &&
            !ct_caption_word_names("coated", "coat") &&
            !ct_caption_word_names("coa", "coat"),
        "word_names");
  ct_caption_ids_free(&ids);
  ct_vocab_free(&v);
  ct_vocab_counter_free(&c);
  ct_text_tokenizer_free(&tok);
  ct_caption_dataset_free(&d);
  ct_caption_dataset_free(&back);
  ct_caption_dataset_free(&half);
}

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

// A captions file with two 20x10 images (a.png id 5, b.png id 9): `images`
// replaces the second image's entry when given, `anns` and `objects` are
// the arrays' insides (objects NULL: no "objects" key).
static void write_captions(const char *name, const char *image2,
                           const char *anns, const char *objects) {
  char text[4096];
  snprintf(text, sizeof text,
           "{\"info\": {\"year\": 2024},\n"
           " \"images\": [{\"id\": 5, \"file_name\": \"a.png\", \"width\": "
           "20, \"height\": 10},\n"
           "              %s],\n"
           " \"annotations\": [%s]%s%s%s}\n",
           image2 ? image2
                  : "{\"id\": 9, \"file_name\": \"b.png\", \"width\": 20, "
                    "\"height\": 10, \"heldout\": true}",
           anns, objects ? ",\n \"objects\": [" : "", objects ? objects : "",
           objects ? "]" : "");
  write_text(tmp_path(name), text);
}

static const char *GOOD_ANNS =
    "{\"image_id\": 9, \"caption\": \"A Red Coat.\"},\n"
    "  {\"image_id\": 5, \"caption\": \"two bags\", \"id\": 3},\n"
    "  {\"image_id\": 9, \"caption\": \"a coat, red\"}";

static void check_refused(const char *name, ct_status want, const char *where,
                          const char *what) {
  ct_caption_dataset d;
  ct_status st = ct_captions_load(&d, tmp_path(name), tmp_path("img"), 1, 0);
  CHECK(st == want, "%s: status %s, want %s (%s)", name, ct_status_name(st),
        ct_status_name(want), ct_last_error());
  CHECK(strstr(ct_last_error(), name) != NULL,
        "%s: message '%s' lacks the file", name, ct_last_error());
  CHECK(strstr(ct_last_error(), where) != NULL, "%s: message '%s' lacks '%s'",
        name, ct_last_error(), where);
  CHECK(strstr(ct_last_error(), what) != NULL, "%s: message '%s' lacks '%s'",
        name, ct_last_error(), what);
  CHECK(d.N == 0 && d.pixels == NULL, "%s: dataset not empty after an error",
        name);
}

static void test_errors(void) {
  mkdir(tmp_path("img"), 0755);
  write_gray_png(tmp_path("img/a.png"), 20, 10);
  write_gray_png(tmp_path("img/b.png"), 20, 10);
  write_gray_png(tmp_path("img/c.png"), 21, 10);

  // A good file: captions grouped by image in file order, objects too, the
  // heldout flag read, a box 0.5 px past the border clipped.
  write_captions("good.json", NULL, GOOD_ANNS,
                 "{\"image_id\": 9, \"name\": \"coat\", \"bbox\": [1, 2, 3, "
                 "4]},\n  {\"image_id\": 5, \"name\": \"bag\", \"bbox\": [15, "
                 "5, 5.5, 5]},\n  {\"image_id\": 9, \"name\": \"bag\", "
                 "\"bbox\": [0, 0, 2e1, 1E1]}");
  ct_caption_dataset d;
  CHECK(!ct_captions_load(&d, tmp_path("good.json"), tmp_path("img"), 3, 0),
        "%s", ct_last_error());
  CHECK(d.N == 2 && d.C == 3 && d.H == 10 && d.W == 20, "good: sizes");
  if (d.N == 2) {
    CHECK(d.ids[0] == 5 && d.ids[1] == 9 && !d.heldout[0] && d.heldout[1],
          "good: ids and flags");
    CHECK(ct_caption_count(&d, 0) == 1 && ct_caption_count(&d, 1) == 2 &&
              !strcmp(ct_caption_text(&d, 0, 0), "two bags") &&
              !strcmp(ct_caption_text(&d, 1, 0), "A Red Coat.") &&
              !strcmp(ct_caption_text(&d, 1, 1), "a coat, red"),
          "good: captions");
    CHECK(ct_caption_object_count(&d, 0) == 1 &&
              ct_caption_object_count(&d, 1) == 2 &&
              ct_caption_objects(&d, 0)[0].w == 5 &&
              !strcmp(ct_string_list_get(&d.object_names,
                                         ct_caption_objects(&d, 1)[1].name),
                      "bag"),
          "good: objects");
  }
  ct_caption_dataset_free(&d);
  // Without objects: none.
  write_captions("noobj.json", NULL, GOOD_ANNS, NULL);
  CHECK(!ct_captions_load(&d, tmp_path("noobj.json"), tmp_path("img"), 1, 8),
        "%s", ct_last_error());
  CHECK(d.object_start && d.object_start[d.N] == 0 && d.H == 8, "no objects");
  ct_caption_dataset_free(&d);

  const char *one =
      "{\"image_id\": 9, \"caption\": \"x\"}, "
      "{\"image_id\": 5, \"caption\": \"y\"}";
  write_captions("noimageid.json", NULL, "{\"caption\": \"x\"}", NULL);
  check_refused("noimageid.json", CT_ERR_FORMAT, ":4:18: annotations[0]",
                "missing key \"image_id\"");
  write_captions("nocaption.json", NULL, "{\"image_id\": 5}", NULL);
  check_refused("nocaption.json", CT_ERR_FORMAT, "annotations[0]",
                "missing key \"caption\"");
  write_captions("numcaption.json", NULL,
                 "{\"image_id\": 5, \"caption\": 3}, {\"image_id\": 9, "
                 "\"caption\": \"x\"}",
                 NULL);
  check_refused("numcaption.json", CT_ERR_FORMAT, ":4:45: annotations[0]",
                "\"caption\" must be a string");
  write_captions("emptycaption.json", NULL,
                 "{\"image_id\": 5, \"caption\": \" \"}", NULL);
  check_refused("emptycaption.json", CT_ERR_FORMAT, "annotations[0]",
                "\"caption\" is empty");
  write_captions("strid.json", NULL,
                 "{\"image_id\": \"5\", \"caption\": \"x\"}", NULL);
  check_refused("strid.json", CT_ERR_FORMAT, "annotations[0]",
                "\"image_id\" must be a number");
  write_captions("unknown.json", NULL,
                 "{\"image_id\": 5, \"caption\": \"x\"}, {\"image_id\": 6, "
                 "\"caption\": \"y\"}",
                 NULL);
  check_refused("unknown.json", CT_ERR_INDEX, "annotations[1]",
                "unknown image_id 6");
  write_captions("uncaptioned.json", NULL,
                 "{\"image_id\": 5, \"caption\": \"x\"}", NULL);
  check_refused("uncaptioned.json", CT_ERR_FORMAT, "images[1] (id 9, b.png)",
                "has no caption");
  write_captions("dupid.json",
                 "{\"id\": 5, \"file_name\": \"b.png\", \"width\": 20, "
                 "\"height\": 10}",
                 one, NULL);
  check_refused("dupid.json", CT_ERR_FORMAT, "images[1]", "duplicate id 5");
  write_captions("nofile.json",
                 "{\"id\": 9, \"file_name\": \"missing.png\", \"width\": 20, "
                 "\"height\": 10}",
                 one, NULL);
  check_refused("nofile.json", CT_ERR_IO, "missing.png", "images[1]");
  write_captions("badsize.json",
                 "{\"id\": 9, \"file_name\": \"c.png\", \"width\": 20, "
                 "\"height\": 10}",
                 one, NULL);
  check_refused("badsize.json", CT_ERR_FORMAT, "c.png", "21x10");
  write_captions("nowidth.json",
                 "{\"id\": 9, \"file_name\": \"b.png\", \"height\": 10}", one,
                 NULL);
  check_refused("nowidth.json", CT_ERR_FORMAT, "images[1]",
                "missing key \"width\"");
  write_captions("badheld.json",
                 "{\"id\": 9, \"file_name\": \"b.png\", \"width\": 20, "
                 "\"height\": 10, \"heldout\": 1}",
                 one, NULL);
  check_refused("badheld.json", CT_ERR_FORMAT, "images[1]",
                "\"heldout\" must be true or false");
  write_captions("objnoname.json", NULL, one,
                 "{\"image_id\": 5, \"bbox\": [1, 1, 2, 2]}");
  check_refused("objnoname.json", CT_ERR_FORMAT, "objects[0]",
                "missing key \"name\"");
  write_captions("objunknown.json", NULL, one,
                 "{\"image_id\": 7, \"name\": \"a\", \"bbox\": [1, 1, 2, 2]}");
  check_refused("objunknown.json", CT_ERR_INDEX, "objects[0]",
                "unknown image_id 7");
  write_captions("objbox.json", NULL, one,
                 "{\"image_id\": 5, \"name\": \"a\", \"bbox\": [1, 1, 2]}");
  check_refused("objbox.json", CT_ERR_FORMAT, "objects[0]",
                "must be 4 numbers");
  write_captions("objoutside.json", NULL, one,
                 "{\"image_id\": 5, \"name\": \"a\", \"bbox\": [15, 1, 8, "
                 "2]}");
  check_refused("objoutside.json", CT_ERR_ARG, "objects[0]",
                "lies outside its image (a.png, 20x10)");
  write_captions("objzero.json", NULL, one,
                 "{\"image_id\": 5, \"name\": \"a\", \"bbox\": [1, 1, 0, 2]}");
  check_refused("objzero.json", CT_ERR_ARG, "objects[0]", "must be positive");
  write_text(tmp_path("objlist.json"),
             "{\"images\": [], \"annotations\": [], \"objects\": {}}");
  check_refused("objlist.json", CT_ERR_FORMAT,
                ":1:", "\"objects\" must be an array");
  write_text(tmp_path("noanns.json"), "{\"images\": []}");
  check_refused("noanns.json", CT_ERR_FORMAT, "noanns.json",
                "missing key \"annotations\"");
  write_text(tmp_path("noimages.json"),
             "{\"images\": [], \"annotations\": []}");
  check_refused("noimages.json", CT_ERR_FORMAT, "noimages.json",
                "\"images\" is empty");
  write_text(tmp_path("array.json"), "[1]");
  check_refused("array.json", CT_ERR_FORMAT, ":1:1",
                "top level must be an object with images and annotations");
  write_text(tmp_path("trailing.json"),
             "{\"images\": [],\n \"annotations\": [],}");
  check_refused("trailing.json", CT_ERR_FORMAT, "trailing.json:2:", "");
  check_refused("absent.json", CT_ERR_IO, "absent.json", "");
  CHECK(ct_captions_load(&d, tmp_path("good.json"), tmp_path("img"), 2, 0) ==
                CT_ERR_ARG &&
            strstr(ct_last_error(), "channels 2"),
        "channels 2: %s", ct_last_error());
}

int main(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmp_dir, sizeof tmp_dir, "%s/ct_test_captions_XXXXXX",
           base && *base ? base : "/tmp");
  if (!mkdtemp(tmp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_generate();
  test_generate_items();
  test_round_trip();
  test_errors();
  remove_tree(tmp_dir);
  return test_summary("captions_data");
}
