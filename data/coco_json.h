// Reading files in COCO's annotation layout: the checks and messages that
// every COCO-style reader shares (detection, data/detection.h; captions,
// data/captions.h). An error names the file, line:column and the entry
// ("annotations[3]"), then the problem.
//
//   ct_coco_ctx c = {.path = json_path, .doc = &doc, .list = "images"};
//   const ct_json_value *images;
//   ct_coco_list(&c, "images", "images and annotations", &images);
//   ct_coco_image *ims = ...; ct_coco_id *ids = ...;
//   ct_coco_images(&c, images, ims, ids);            // checked and sorted
//   int64_t at = ct_coco_find_id(ids, images->count, image_id);
//   ct_coco_read_png(pixels_of_i, 3, H, W, image_dir, &ims[i], i, json_path);
//
// What this file does not do: know any task's annotation keys (bbox,
// category_id, caption); the callers check those with ct_coco_member and
// ct_coco_int.
#ifndef CT_DATA_COCO_JSON_H
#define CT_DATA_COCO_JSON_H

#include <stdint.h>

#include "core/error.h"
#include "data/json.h"

// Where the annotation file is and which entry is being read, for messages.
typedef struct ct_coco_ctx {
  const char *path;
  const ct_json_doc *doc;
  const char *list;  // "images", "annotations", ...
  int64_t index;     // the entry
} ct_coco_ctx;

// Checks a loader's image options (channels 1 or 3, size 0..65535, 0 the
// images' own) and reads json_path into *doc (free with ct_json_doc_free);
// *c then reads it. Errors name json_path.
ct_status ct_coco_open(ct_coco_ctx *c, ct_json_doc *doc, const char *json_path,
                       int channels, int size);

// Records "path:line:column: list[index]: <fmt...>" (line and column those of
// `at`) with status st, and returns st.
ct_status ct_coco_fail(const ct_coco_ctx *c, ct_status st,
                       const ct_json_value *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Member `key` of entry obj, which must be of `type` (CT_ERR_FORMAT when
// missing or of another type).
ct_status ct_coco_member(const ct_coco_ctx *c, const ct_json_value *obj,
                         const char *key, ct_json_value_type type,
                         const ct_json_value **out);
// An integer member (ids and sizes); |v| < 2^53 so it is exact.
ct_status ct_coco_int(const ct_coco_ctx *c, const ct_json_value *obj,
                      const char *key, int64_t *out);

// The top-level array `key` of the root object; `keys` lists the file's
// keys for the message when the top level is not an object ("images,
// annotations and categories").
ct_status ct_coco_list(const ct_coco_ctx *c, const char *key, const char *keys,
                       const ct_json_value **out);

// An id and the position of its entry.
typedef struct ct_coco_id {
  int64_t id, index;
  const ct_json_value *at;
} ct_coco_id;

// Sorts the ids; a repeated one is CT_ERR_FORMAT naming its second entry
// (in c->list).
ct_status ct_coco_sort_ids(const ct_coco_ctx *c, ct_coco_id *ids, int64_t n);
// The position of id in sorted ids, or -1.
int64_t ct_coco_find_id(const ct_coco_id *ids, int64_t n, int64_t id);

// What an annotation file says about one image.
typedef struct ct_coco_image {
  const char *file_name;  // in the document's strings
  int64_t width, height;  // in 1..65535
} ct_coco_image;

// Reads the `images` array into ims (list->count of them) and ids (sorted,
// duplicates refused). Sets c->list to "images".
ct_status ct_coco_images(ct_coco_ctx *c, const ct_json_value *list,
                         ct_coco_image *ims, ct_coco_id *ids);

// A "bbox" member [x, y, w, h] of image im checked: 4 numbers (CT_ERR_FORMAT
// otherwise), w and h > 0, inside the image up to 1 pixel past its border
// (rounding in other tools; CT_ERR_ARG otherwise). xywh receives the box
// clipped to the image.
ct_status ct_coco_bbox(const ct_coco_ctx *c, const ct_json_value *bbox,
                       const ct_coco_image *im, float xywh[4]);

// The stored size of the n images: size x size when size > 0, else their
// declared size, which must then be the same for all (CT_ERR_FORMAT naming
// the first that differs).
ct_status ct_coco_stored_size(const char *json_path, const ct_coco_image *ims,
                              int64_t n, int size, int *H, int *W);

// Reads image_dir/im->file_name (images[i] of json_path) as a PNG of C
// channels, checks its size against the declared one and resizes it into
// dst (C, H, W). Errors name the PNG and the entry.
ct_status ct_coco_read_png(uint8_t *dst, int C, int H, int W,
                           const char *image_dir, const ct_coco_image *im,
                           int64_t i, const char *json_path);

#endif
