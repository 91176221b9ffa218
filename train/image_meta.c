// Class names and input normalization in checkpoints (see image_meta.h).
#include "train/image_meta.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ct_status ct_image_meta_save(const ct_image_meta *m, ct_ckpt_writer *w) {
  ct_rec names, image;
  ct_rec_init(&names);
  ct_rec_u32(&names, (uint32_t)m->K);
  for (int k = 0; k < m->K; k++)
    ct_rec_str(&names, ct_string_list_get(&m->class_names, k));
  ct_rec_init(&image);
  ct_rec_u32(&image, (uint32_t)m->C);
  ct_rec_u32(&image, (uint32_t)m->H);
  ct_rec_u32(&image, (uint32_t)m->W);
  for (int i = 0; i < m->C; i++) {
    ct_rec_f64(&image, m->mean[i]);
    ct_rec_f64(&image, m->std[i]);
  }
  ct_status st = ct_ckpt_writer_add_rec(w, "classes", &names);
  if (st == CT_OK) st = ct_ckpt_writer_add_rec(w, "image", &image);
  ct_rec_free(&names);
  ct_rec_free(&image);
  return st;
}

ct_status ct_image_meta_load(ct_image_meta *m, const ct_ckpt *ckpt) {
  ct_rec_reader r;
  ct_status st = ct_ckpt_section_reader(ckpt, "classes", &r);
  if (st != CT_OK) return st;
  uint32_t K = ct_rec_get_u32(&r);
  for (uint32_t k = 0; k < K && K <= 100000; k++) {
    char *name = ct_rec_get_str(&r);
    if (!name) break;
    st = ct_image_check_class_name(name, strlen(name), ct_ckpt_path(ckpt));
    if (st == CT_OK)
      st = ct_string_list_push(&m->class_names, name, strlen(name));
    free(name);
    if (st != CT_OK) return st;
  }
  st = ct_rec_reader_done(&r);
  if (st == CT_OK && (K < 1 || m->class_names.count != (int64_t)K))
    st = ct_error(CT_ERR_FORMAT, "%s: the classes section is malformed",
                  ct_ckpt_path(ckpt));
  if (st != CT_OK) return st;
  m->K = (int)K;
  st = ct_ckpt_section_reader(ckpt, "image", &r);
  if (st != CT_OK) return st;
  uint32_t C = ct_rec_get_u32(&r), H = ct_rec_get_u32(&r),
           W = ct_rec_get_u32(&r);
  for (uint32_t i = 0; i < C && C <= CT_IMAGE_MAX_CHANNELS; i++) {
    m->mean[i] = (float)ct_rec_get_f64(&r);
    m->std[i] = (float)ct_rec_get_f64(&r);
  }
  st = ct_rec_reader_done(&r);
  if (st == CT_OK && (C < 1 || C > CT_IMAGE_MAX_CHANNELS || H < 1 || W < 1 ||
                      H > 4096 || W > 4096))
    st = ct_error(CT_ERR_FORMAT, "%s: the image section is malformed",
                  ct_ckpt_path(ckpt));
  // The normalization divides by std: 0 would give every image the same
  // input (and the same answer), NaN or Inf non-finite ones.
  for (uint32_t i = 0; i < C && st == CT_OK; i++)
    if (!isfinite(m->mean[i]) || !(m->std[i] > 0.0f) || !isfinite(m->std[i]))
      st = ct_error(CT_ERR_FORMAT,
                    "%s: the image section is damaged: channel %u has mean "
                    "%g and std %g (std must be positive and finite)",
                    ct_ckpt_path(ckpt), i, (double)m->mean[i],
                    (double)m->std[i]);
  m->C = (int)C;
  m->H = (int)H;
  m->W = (int)W;
  return st;
}

void ct_image_meta_stats(ct_image_meta *m, const uint8_t *pixels, int64_t n,
                         int C, int64_t plane) {
  for (int c = 0; c < C; c++) {
    uint64_t sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
      const uint8_t *p = pixels + (i * C + c) * plane;
      for (int64_t j = 0; j < plane; j++) {
        sum += p[j];
        sq += (uint64_t)p[j] * p[j];
      }
    }
    double count = (double)n * (double)plane;
    double mean = count > 0 ? (double)sum / count / 255.0 : 0.0;
    double var =
        count > 0 ? (double)sq / count / (255.0 * 255.0) - mean * mean : 0.0;
    m->mean[c] = (float)mean;
    m->std[c] = var > 1e-12 ? (float)sqrt(var) : 1.0f;
  }
}
