// Captioned images (see captions.h): the dataset, the COCO captions file
// read and written, and the captions tokenized.
#include "data/captions.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/coco_json.h"
#include "data/image.h"

void ct_caption_dataset_free(ct_caption_dataset *d) {
  free(d->pixels);
  free(d->ids);
  free(d->heldout);
  free(d->caption_start);
  ct_string_list_free(&d->captions);
  free(d->object_start);
  free(d->objects);
  ct_string_list_free(&d->object_names);
  *d = (ct_caption_dataset){0};
}

int64_t ct_caption_max_count(const ct_caption_dataset *d) {
  int64_t most = 0;
  for (int64_t i = 0; i < d->N; i++)
    if (ct_caption_count(d, i) > most) most = ct_caption_count(d, i);
  return most;
}

bool ct_caption_word_names(const char *word, const char *name) {
  size_t n = strlen(name);
  if (!n || strncmp(word, name, n)) return false;
  const char *rest = word + n;
  return !strcmp(rest, "") || !strcmp(rest, "s") || !strcmp(rest, "es");
}

// ---- reading -------------------------------------------------------------------

// Whether s holds something besides white space.
static bool has_text(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r') return true;
  return false;
}

// A non-empty string member `key` of obj.
static ct_status text_member(const ct_coco_ctx *c, const ct_json_value *obj,
                             const char *key, const char **out) {
  const ct_json_value *v;
  ct_status st = ct_coco_member(c, obj, key, CT_JVAL_STRING, &v);
  if (st) return st;
  *out = ct_json_str(c->doc, v);
  if (!has_text(*out))
    return ct_coco_fail(c, CT_ERR_FORMAT, v, "\"%s\" is empty", key);
  return CT_OK;
}

// An entry's image: its position among the images (CT_ERR_INDEX for an
// unknown image_id).
static ct_status entry_image(const ct_coco_ctx *c, const ct_json_value *e,
                             const ct_coco_id *ids, int64_t n, int64_t *image) {
  int64_t image_id;
  if (e->type != CT_JVAL_OBJECT)
    return ct_coco_fail(c, CT_ERR_FORMAT, e, "must be an object");
  ct_status st = ct_coco_int(c, e, "image_id", &image_id);
  if (st) return st;
  int64_t at = ct_coco_find_id(ids, n, image_id);
  if (at < 0)
    return ct_coco_fail(c, CT_ERR_INDEX, ct_json_member(c->doc, e, "image_id"),
                        "unknown image_id %lld", (long long)image_id);
  *image = ids[at].index;
  return CT_OK;
}

// Counting sort of n entries by their image: start (N + 1) and order (n),
// each image's entries in file order.
static void group_by_image(const int64_t *image, int64_t n, int64_t N,
                           int64_t *start, int64_t *order) {
  memset(start, 0, (size_t)(N + 1) * sizeof *start);
  for (int64_t a = 0; a < n; a++) start[image[a] + 1]++;
  for (int64_t i = 0; i < N; i++) start[i + 1] += start[i];
  int64_t *next = order + n;  // N slots after order (see the allocation)
  for (int64_t i = 0; i < N; i++) next[i] = start[i];
  for (int64_t a = 0; a < n; a++) order[next[image[a]]++] = a;
}

// The annotations: each one's image and caption, grouped by image into d.
static ct_status read_captions(ct_coco_ctx *c, const ct_json_value *list,
                               const ct_coco_id *ids, int64_t N,
                               const ct_coco_image *ims,
                               ct_caption_dataset *d) {
  int64_t A = list->count;
  int64_t *image = malloc((size_t)(A ? A : 1) * sizeof *image);
  const char **text = malloc((size_t)(A ? A : 1) * sizeof *text);
  int64_t *order = malloc((size_t)(A + N) * sizeof *order);
  ct_status st = image && text && order
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "%s: out of memory", c->path);
  c->list = "annotations";
  c->index = 0;
  for (const ct_json_value *e = ct_json_first(c->doc, list); e && !st;
       e = ct_json_next(c->doc, e), c->index++) {
    st = entry_image(c, e, ids, N, &image[c->index]);
    if (!st) st = text_member(c, e, "caption", &text[c->index]);
  }
  if (!st) {
    group_by_image(image, A, N, d->caption_start, order);
    for (int64_t i = 0; i < N && !st; i++)
      if (d->caption_start[i + 1] == d->caption_start[i])
        st = ct_error(CT_ERR_FORMAT,
                      "%s: images[%lld] (id %lld, %s) has no caption", c->path,
                      (long long)i, (long long)d->ids[i], ims[i].file_name);
  }
  for (int64_t k = 0; k < A && !st; k++)
    st = ct_string_list_push(&d->captions, text[order[k]],
                             strlen(text[order[k]]));
  free(image);
  free(text);
  free(order);
  return st;
}

// The optional objects: image, name and box (in the declared pixels),
// grouped by image into d.
static ct_status read_objects(ct_coco_ctx *c, const ct_json_value *list,
                              const ct_coco_id *ids, int64_t N,
                              const ct_coco_image *ims, ct_caption_dataset *d) {
  int64_t n = list ? list->count : 0;
  int64_t *image = malloc((size_t)(n ? n : 1) * sizeof *image);
  ct_caption_object *obj = malloc((size_t)(n ? n : 1) * sizeof *obj);
  int64_t *order = malloc((size_t)(n + N) * sizeof *order);
  d->objects = malloc((size_t)(n ? n : 1) * sizeof *d->objects);
  ct_string_table names = {0};
  ct_status st = image && obj && order && d->objects
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "%s: out of memory", c->path);
  c->list = "objects";
  c->index = 0;
  for (const ct_json_value *e = list ? ct_json_first(c->doc, list) : NULL;
       e && !st; e = ct_json_next(c->doc, e), c->index++) {
    const char *name;
    const ct_json_value *bbox;
    float b[4];
    st = entry_image(c, e, ids, N, &image[c->index]);
    if (!st) st = text_member(c, e, "name", &name);
    if (!st) st = ct_coco_member(c, e, "bbox", CT_JVAL_ARRAY, &bbox);
    if (!st) st = ct_coco_bbox(c, bbox, &ims[image[c->index]], b);
    if (st) break;
    int64_t k = ct_string_table_add(&names, name, strlen(name), NULL);
    if (k < 0) st = CT_ERR_NOMEM;
    obj[c->index] = (ct_caption_object){(int32_t)k, b[0], b[1], b[2], b[3]};
  }
  if (!st) {
    group_by_image(image, n, N, d->object_start, order);
    for (int64_t k = 0; k < n; k++) d->objects[k] = obj[order[k]];
    d->object_names = names.strings;
    names.strings = (ct_string_list){0};
  }
  ct_string_table_free(&names);
  free(image);
  free(obj);
  free(order);
  return st;
}

// The images' optional "heldout" flags.
static ct_status read_heldout(ct_coco_ctx *c, const ct_json_value *list,
                              bool *heldout) {
  c->list = "images";
  c->index = 0;
  for (const ct_json_value *e = ct_json_first(c->doc, list); e;
       e = ct_json_next(c->doc, e), c->index++) {
    const ct_json_value *v = ct_json_member(c->doc, e, "heldout");
    if (v && v->type != CT_JVAL_BOOL)
      return ct_coco_fail(c, CT_ERR_FORMAT, v,
                          "\"heldout\" must be true or false");
    heldout[c->index] = v && v->number != 0;
  }
  return CT_OK;
}

ct_status ct_captions_load(ct_caption_dataset *d, const char *json_path,
                           const char *image_dir, int channels, int size) {
  *d = (ct_caption_dataset){0};
  ct_json_doc doc;
  ct_coco_ctx c;
  ct_status st = ct_coco_open(&c, &doc, json_path, channels, size);
  if (st) return st;
  const ct_json_value *images, *anns, *objects = NULL;
  const char *keys = "images and annotations";
  st = ct_coco_list(&c, "images", keys, &images);
  if (!st) st = ct_coco_list(&c, "annotations", keys, &anns);
  if (!st && ct_json_member(&doc, ct_json_root(&doc), "objects"))
    st = ct_coco_list(&c, "objects", keys, &objects);
  int64_t N = st ? 0 : images->count;
  if (!st && N == 0)
    st = ct_error(CT_ERR_FORMAT, "%s: \"images\" is empty", json_path);
  ct_coco_image *ims = calloc((size_t)(N ? N : 1), sizeof *ims);
  ct_coco_id *ids = calloc((size_t)(N ? N : 1), sizeof *ids);
  d->ids = calloc((size_t)(N ? N : 1), sizeof *d->ids);
  d->heldout = calloc((size_t)(N ? N : 1), sizeof *d->heldout);
  d->caption_start = calloc((size_t)N + 1, sizeof *d->caption_start);
  d->object_start = calloc((size_t)N + 1, sizeof *d->object_start);
  if (!st && (!ims || !ids || !d->ids || !d->heldout || !d->caption_start ||
              !d->object_start))
    st = ct_error(CT_ERR_NOMEM, "%s: out of memory", json_path);
  if (!st) st = ct_coco_images(&c, images, ims, ids);
  for (int64_t k = 0; k < N && !st; k++) d->ids[ids[k].index] = ids[k].id;
  if (!st) st = read_heldout(&c, images, d->heldout);
  if (!st) st = read_captions(&c, anns, ids, N, ims, d);
  if (!st) st = read_objects(&c, objects, ids, N, ims, d);
  int H = size, W = size;
  if (!st) st = ct_coco_stored_size(json_path, ims, N, size, &H, &W);
  if (!st) {
    d->pixels = ct_image_pixels_alloc(N, channels, H, W);
    if (!d->pixels)
      st = ct_error(CT_ERR_NOMEM, "%s: out of memory for %lld images of %dx%d",
                    json_path, (long long)N, W, H);
    d->N = N;
    d->C = channels;
    d->H = H;
    d->W = W;
  }
  for (int64_t i = 0; i < N && !st; i++) {
    st = ct_coco_read_png(ct_caption_image(d, i), d->C, d->H, d->W, image_dir,
                          &ims[i], i, json_path);
    double sx = (double)W / (double)ims[i].width;
    double sy = (double)H / (double)ims[i].height;
    for (int64_t k = d->object_start[i]; k < d->object_start[i + 1]; k++) {
      ct_caption_object *o = &d->objects[k];
      o->x = (float)(o->x * sx);
      o->w = (float)(o->w * sx);
      o->y = (float)(o->y * sy);
      o->h = (float)(o->h * sy);
    }
  }
  free(ims);
  free(ids);
  ct_json_doc_free(&doc);
  if (st) ct_caption_dataset_free(d);
  return st;
}

// ---- writing -------------------------------------------------------------------

// A ct_json_put_fn writing to the FILE `sink`.
static void file_put(void *sink, const void *bytes, size_t n) {
  fwrite(bytes, 1, n, sink);
}

// Image i as DIR/SPLIT/NNNNNN.png (path: room for it).
static ct_status write_png(const ct_caption_dataset *d, int64_t i,
                           const char *path, uint8_t *rgb) {
  int64_t plane = (int64_t)d->H * d->W;
  const uint8_t *src = ct_caption_image(d, i);
  if (d->C == 3) {  // channel-first to interleaved
    for (int64_t p = 0; p < plane; p++)
      for (int ch = 0; ch < 3; ch++) rgb[p * 3 + ch] = src[ch * plane + p];
    src = rgb;
  }
  png_image img = {.version = PNG_IMAGE_VERSION,
                   .width = (png_uint_32)d->W,
                   .height = (png_uint_32)d->H,
                   .format = d->C == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY};
  if (!png_image_write_to_file(&img, path, 0, src, 0, NULL)) {
    ct_status st =
        ct_error(CT_ERR_IO, "%s: cannot write: %s", path, img.message);
    png_image_free(&img);
    return st;
  }
  return CT_OK;
}

static void write_json(FILE *f, const ct_caption_dataset *d) {
  fprintf(f, "{\n\"images\": [");
  for (int64_t i = 0; i < d->N; i++)
    fprintf(f,
            "%s\n  {\"id\": %lld, \"file_name\": \"%06lld.png\", "
            "\"width\": %d, \"height\": %d%s}",
            i ? "," : "", (long long)d->ids[i], (long long)i, d->W, d->H,
            d->heldout[i] ? ", \"heldout\": true" : "");
  fprintf(f, "\n],\n\"annotations\": [");
  for (int64_t i = 0, a = 0; i < d->N; i++)
    for (int64_t k = 0; k < ct_caption_count(d, i); k++, a++) {
      fprintf(f, "%s\n  {\"id\": %lld, \"image_id\": %lld, \"caption\": ",
              a ? "," : "", (long long)a + 1, (long long)d->ids[i]);
      ct_json_write_string(ct_caption_text(d, i, k), file_put, f);
      fputc('}', f);
    }
  fprintf(f, "\n],\n\"objects\": [");
  for (int64_t i = 0, a = 0; i < d->N; i++)
    for (int64_t k = 0; k < ct_caption_object_count(d, i); k++, a++) {
      const ct_caption_object *o = &ct_caption_objects(d, i)[k];
      fprintf(f, "%s\n  {\"image_id\": %lld, \"name\": ", a ? "," : "",
              (long long)d->ids[i]);
      ct_json_write_string(ct_string_list_get(&d->object_names, o->name),
                           file_put, f);
      fprintf(f, ", \"bbox\": [%.9g, %.9g, %.9g, %.9g]}", o->x, o->y, o->w,
              o->h);
    }
  fprintf(f, "\n]\n}\n");
}

ct_status ct_captions_write(const char *dir, const char *split,
                            const ct_caption_dataset *d, bool overwrite) {
  if (d->C != 1 && d->C != 3)
    return ct_error(CT_ERR_ARG,
                    "captions: %d channels: PNG files hold 1 (gray) or 3 (RGB)",
                    d->C);
  char path[4096];
  if (ct_path_format(path, sizeof path, "%s/%s/%0*d", dir, split, 64, 0))
    return ct_last_status();
  snprintf(path, sizeof path, "%s/%s", dir, split);
  ct_status st = ct_make_dirs(path);
  uint8_t *rgb = malloc((size_t)d->H * d->W * 3);
  if (!st && !rgb) st = ct_error(CT_ERR_NOMEM, "captions: out of memory");
  for (int64_t i = 0; i < d->N && !st; i++) {
    snprintf(path, sizeof path, "%s/%s/%06lld.png", dir, split, (long long)i);
    st = ct_refuse_existing(path, overwrite);
    if (!st) st = write_png(d, i, path, rgb);
  }
  free(rgb);
  if (st) return st;
  snprintf(path, sizeof path, "%s/%s.json", dir, split);
  if ((st = ct_refuse_existing(path, overwrite))) return st;
  errno = 0;
  FILE *f = fopen(path, "w");
  if (!f)
    return ct_error(CT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  write_json(f, d);
  bool failed = ferror(f) != 0;
  if (fclose(f) != 0 || failed) {
    remove(path);
    return ct_error(CT_ERR_IO, "%s: write failed", path);
  }
  return CT_OK;
}

// ---- tokens ----------------------------------------------------------------------

ct_status ct_captions_count_tokens(const ct_caption_dataset *d,
                                   const ct_text_tokenizer *t,
                                   ct_vocab_counter *c) {
  ct_string_list tokens = {0};
  ct_status st = CT_OK;
  for (int64_t j = 0; j < d->captions.count && !st; j++) {
    ct_string_list_clear(&tokens);
    st = ct_text_tokenizer_tokenize(t, ct_string_list_get(&d->captions, j),
                                    &tokens);
    if (!st) st = ct_vocab_counter_add_tokens(c, &tokens);
  }
  ct_string_list_free(&tokens);
  return st;
}

ct_status ct_captions_encode(const ct_caption_dataset *d,
                             const ct_text_tokenizer *t, const ct_vocab *v,
                             ct_caption_ids *out) {
  *out = (ct_caption_ids){0};
  int64_t n = d->captions.count, cap = 0;
  out->n = n;
  out->start = calloc((size_t)n + 1, sizeof *out->start);
  ct_string_list tokens = {0};
  ct_status st =
      out->start ? CT_OK : ct_error(CT_ERR_NOMEM, "captions: out of memory");
  for (int64_t j = 0; j < n && !st; j++) {
    ct_string_list_clear(&tokens);
    st = ct_text_tokenizer_tokenize(t, ct_string_list_get(&d->captions, j),
                                    &tokens);
    int64_t at = out->start[j], len = tokens.count;
    if (!st && ct_grow_array((void **)&out->ids, &cap, at + len + 1,
                             sizeof *out->ids, "caption ids"))
      st = CT_ERR_NOMEM;
    if (st) break;
    ct_vocab_encode(v, &tokens, out->ids + at, NULL);
    out->start[j + 1] = at + len;
    if (len > out->max_len) out->max_len = len;
  }
  ct_string_list_free(&tokens);
  if (st) ct_caption_ids_free(out);
  return st;
}

void ct_caption_ids_free(ct_caption_ids *ids) {
  free(ids->start);
  free(ids->ids);
  *ids = (ct_caption_ids){0};
}
