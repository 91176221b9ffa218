// The shared COCO annotation checks (see coco_json.h).
#include "data/coco_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "data/png_folder.h"

ct_status ct_coco_open(ct_coco_ctx *c, ct_json_doc *doc, const char *json_path,
                       int channels, int size) {
  if (channels != 1 && channels != 3)
    return ct_error(CT_ERR_ARG,
                    "%s: channels %d: images load as 1 (gray) or 3 (RGB) "
                    "channels",
                    json_path, channels);
  if (size < 0 || size > 65535)
    return ct_error(CT_ERR_ARG,
                    "%s: image size %d: must be in 1..65535 (0: the "
                    "images' own)",
                    json_path, size);
  ct_status st = ct_json_doc_read(doc, json_path);
  if (st) return st;
  *c = (ct_coco_ctx){.path = json_path, .doc = doc};
  return CT_OK;
}

ct_status ct_coco_fail(const ct_coco_ctx *c, ct_status st,
                       const ct_json_value *at, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return ct_error(st, "%s:%d:%d: %s[%lld]: %s", c->path, at->line, at->column,
                  c->list, (long long)c->index, what);
}

ct_status ct_coco_member(const ct_coco_ctx *c, const ct_json_value *obj,
                         const char *key, ct_json_value_type type,
                         const ct_json_value **out) {
  static const char *const type_names[] = {
      "null", "a boolean", "a number", "a string", "an array", "an object"};
  *out = ct_json_member(c->doc, obj, key);
  if (!*out)
    return ct_coco_fail(c, CT_ERR_FORMAT, obj, "missing key \"%s\"", key);
  if ((*out)->type != type)
    return ct_coco_fail(c, CT_ERR_FORMAT, *out, "\"%s\" must be %s", key,
                        type_names[type]);
  return CT_OK;
}

ct_status ct_coco_int(const ct_coco_ctx *c, const ct_json_value *obj,
                      const char *key, int64_t *out) {
  const ct_json_value *v;
  ct_status st = ct_coco_member(c, obj, key, CT_JVAL_NUMBER, &v);
  if (st) return st;
  if (v->number != floor(v->number) || fabs(v->number) >= 9007199254740992.0)
    return ct_coco_fail(c, CT_ERR_FORMAT, v,
                        "\"%s\" must be an integer (got %.17g)", key,
                        v->number);
  *out = (int64_t)v->number;
  return CT_OK;
}

ct_status ct_coco_list(const ct_coco_ctx *c, const char *key, const char *keys,
                       const ct_json_value **out) {
  const ct_json_value *root = ct_json_root(c->doc);
  *out = ct_json_member(c->doc, root, key);
  if (root->type != CT_JVAL_OBJECT)
    return ct_error(CT_ERR_FORMAT,
                    "%s:%d:%d: the top level must be an object with %s",
                    c->path, root->line, root->column, keys);
  if (!*out)
    return ct_error(CT_ERR_FORMAT, "%s: missing key \"%s\" at the top level",
                    c->path, key);
  if ((*out)->type != CT_JVAL_ARRAY)
    return ct_error(CT_ERR_FORMAT, "%s:%d:%d: \"%s\" must be an array", c->path,
                    (*out)->line, (*out)->column, key);
  return CT_OK;
}

static int compare_ids(const void *a, const void *b) {
  const ct_coco_id *x = a, *y = b;
  return x->id < y->id   ? -1
         : x->id > y->id ? 1
                         : (x->index > y->index) - (x->index < y->index);
}

ct_status ct_coco_sort_ids(const ct_coco_ctx *c, ct_coco_id *ids, int64_t n) {
  qsort(ids, (size_t)n, sizeof *ids, compare_ids);
  for (int64_t i = 1; i < n; i++)
    if (ids[i].id == ids[i - 1].id) {
      ct_coco_ctx at = *c;
      at.index = ids[i].index;
      return ct_coco_fail(
          &at, CT_ERR_FORMAT, ids[i].at, "duplicate id %lld (also %s[%lld])",
          (long long)ids[i].id, c->list, (long long)ids[i - 1].index);
    }
  return CT_OK;
}

int64_t ct_coco_find_id(const ct_coco_id *ids, int64_t n, int64_t id) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (ids[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && ids[lo].id == id ? lo : -1;
}

ct_status ct_coco_images(ct_coco_ctx *c, const ct_json_value *list,
                         ct_coco_image *ims, ct_coco_id *ids) {
  c->list = "images";
  c->index = 0;
  for (const ct_json_value *e = ct_json_first(c->doc, list); e;
       e = ct_json_next(c->doc, e), c->index++) {
    ct_coco_image *im = &ims[c->index];
    const ct_json_value *name, *at;
    if (e->type != CT_JVAL_OBJECT)
      return ct_coco_fail(c, CT_ERR_FORMAT, e, "must be an object");
    ct_status st = ct_coco_int(c, e, "id", &ids[c->index].id);
    if (!st) st = ct_coco_member(c, e, "file_name", CT_JVAL_STRING, &name);
    if (!st) st = ct_coco_int(c, e, "width", &im->width);
    if (!st) st = ct_coco_int(c, e, "height", &im->height);
    if (st) return st;
    at = ct_json_member(c->doc, e, "width");
    if (im->width < 1 || im->height < 1 || im->width > 65535 ||
        im->height > 65535)
      return ct_coco_fail(c, CT_ERR_FORMAT, at,
                          "size %lldx%lld: width and height must be in "
                          "1..65535",
                          (long long)im->width, (long long)im->height);
    im->file_name = ct_json_str(c->doc, name);
    ids[c->index].index = c->index;
    ids[c->index].at = e;
  }
  return ct_coco_sort_ids(c, ids, list->count);
}

ct_status ct_coco_bbox(const ct_coco_ctx *c, const ct_json_value *bbox,
                       const ct_coco_image *im, float xywh[4]) {
  double v[4];
  int n = 0;
  for (const ct_json_value *x = ct_json_first(c->doc, bbox); x;
       x = ct_json_next(c->doc, x)) {
    if (x->type != CT_JVAL_NUMBER || n == 4) {
      n = -1;
      break;
    }
    v[n++] = x->number;
  }
  if (n != 4)
    return ct_coco_fail(c, CT_ERR_FORMAT, bbox,
                        "\"bbox\" must be 4 numbers [x, y, width, height]");
  if (!(v[2] > 0) || !(v[3] > 0))
    return ct_coco_fail(c, CT_ERR_ARG, bbox,
                        "bbox [%g, %g, %g, %g]: width and height must be "
                        "positive",
                        v[0], v[1], v[2], v[3]);
  double x0 = fmax(v[0], 0), y0 = fmax(v[1], 0);
  double x1 = fmin(v[0] + v[2], (double)im->width);
  double y1 = fmin(v[1] + v[3], (double)im->height);
  if (v[0] < -1 || v[1] < -1 || v[0] + v[2] > (double)im->width + 1 ||
      v[1] + v[3] > (double)im->height + 1 || !(x1 > x0) || !(y1 > y0))
    return ct_coco_fail(c, CT_ERR_ARG, bbox,
                        "bbox [%g, %g, %g, %g] lies outside its image (%s, "
                        "%lldx%lld)",
                        v[0], v[1], v[2], v[3], im->file_name,
                        (long long)im->width, (long long)im->height);
  xywh[0] = (float)x0;
  xywh[1] = (float)y0;
  xywh[2] = (float)(x1 - x0);
  xywh[3] = (float)(y1 - y0);
  return CT_OK;
}

ct_status ct_coco_stored_size(const char *json_path, const ct_coco_image *ims,
                              int64_t n, int size, int *H, int *W) {
  *H = *W = size;
  for (int64_t i = 0; i < n && !size; i++) {
    if (i == 0) {
      *H = (int)ims[0].height;
      *W = (int)ims[0].width;
    } else if (ims[i].height != *H || ims[i].width != *W) {
      return ct_error(CT_ERR_FORMAT,
                      "%s: images[%lld] (%s) is %lldx%lld, images[0] (%s) "
                      "%dx%d: mismatched sizes (give a size to resize to)",
                      json_path, (long long)i, ims[i].file_name,
                      (long long)ims[i].width, (long long)ims[i].height,
                      ims[0].file_name, *W, *H);
    }
  }
  return CT_OK;
}

ct_status ct_coco_read_png(uint8_t *dst, int C, int H, int W,
                           const char *image_dir, const ct_coco_image *im,
                           int64_t i, const char *json_path) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", image_dir, im->file_name) >=
      (int)sizeof path)
    return ct_error(CT_ERR_ARG, "%s: image path %s/%s too long", json_path,
                    image_dir, im->file_name);
  uint8_t *px;
  int h, w;
  ct_status st = ct_png_decode(path, C, &px, &h, &w);
  if (st)
    return ct_error(st, "%s (images[%lld] of %s)", ct_last_error(),
                    (long long)i, json_path);
  if (w != im->width || h != im->height)
    st = ct_error(CT_ERR_FORMAT,
                  "%s: image is %dx%d but %s declares %lldx%lld "
                  "(images[%lld])",
                  path, w, h, json_path, (long long)im->width,
                  (long long)im->height, (long long)i);
  else
    ct_image_resize_bilinear(px, h, w, C, dst, H, W);
  free(px);
  return st;
}
