// `ctrain analyze` (see analyze.h).
#include "train/analyze.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/arena.h"
#include "train/classification.h"
#include "train/fileio.h"
#include "train/plot.h"
#include "train/run.h"

enum {
  BATCH = 16,  // images per forward pass
  ROLLOUT_IMAGES = 8,
  SIM_TILE = 64,  // about this many pixels per position-similarity tile
  SIM_GAP = 4,    // pixels between tiles
};

ct_status ct_analyze_layer_distance(const ct_nn_attention_layer *l, double *sum,
                                    int64_t *queries) {
  const ct_tensor *w = l->weights;
  if (!w || !l->query_yx || !l->key_yx)
    return ct_error(CT_ERR_ARG,
                    "analyze: an attention layer without its weights or "
                    "token places");
  if (w->ndim != 4 || l->groups < 1 || w->shape[0] % l->groups ||
      l->query_yx->numel != l->groups * w->shape[2] * 2 ||
      l->key_yx->numel != l->groups * w->shape[3] * 2)
    return ct_error(CT_ERR_SHAPE,
                    "analyze: the token places (%lld, %lld values) do not "
                    "fit weights of %d dims for %lld groups",
                    (long long)l->query_yx->numel, (long long)l->key_yx->numel,
                    w->ndim, (long long)l->groups);
  const int64_t G = w->shape[0], NH = w->shape[1], Nq = w->shape[2],
                Nk = w->shape[3];
  const float *qp = ct_f32(l->query_yx), *kp = ct_f32(l->key_yx);
  for (int64_t g = 0; g < G; g++) {
    const int64_t place = g % l->groups;
    for (int64_t i = 0; i < Nq; i++) {
      const float *q = qp + (place * Nq + i) * 2;
      if (isnan(q[0])) continue;
      for (int64_t h = 0; h < NH; h++) {
        const float *a = ct_f32(w) + ((g * NH + h) * Nq + i) * Nk;
        double weighted = 0.0, mass = 0.0;
        for (int64_t j = 0; j < Nk; j++) {
          const float *k = kp + (place * Nk + j) * 2;
          if (isnan(k[0])) continue;
          const double dy = (double)q[0] - k[0], dx = (double)q[1] - k[1];
          weighted += (double)a[j] * sqrt(dy * dy + dx * dx);
          mass += a[j];
        }
        if (mass > 0.0) {
          sum[h] += weighted / mass;
          if (h == 0) *queries += 1;
        }
      }
    }
  }
  return CT_OK;
}

// ---- outputs ---------------------------------------------------------------

typedef struct distances {
  int layers, max_heads;
  int heads[CT_NN_ATTENTION_LOG_MAX];
  double *sum;       // (layers, max_heads)
  int64_t *queries;  // (layers)
  double diagonal;   // of the input image, pixels
  int64_t images;
  const char *arch, *split;
} distances;

static double mean_distance(const distances *d, int l, int h) {
  return d->queries[l] ? d->sum[l * d->max_heads + h] / (double)d->queries[l]
                       : NAN;
}

static ct_status write_distance_csv(FILE *f, const char *path, void *ctx) {
  (void)path;
  const distances *d = ctx;
  fprintf(f, "layer,head,distance_px\n");
  for (int l = 0; l < d->layers; l++)
    for (int h = 0; h < d->heads[l]; h++)
      fprintf(f, "%d,%d,%.6f\n", l + 1, h, mean_distance(d, l, h));
  return CT_OK;
}

static ct_status write_distance_json(FILE *f, const char *path, void *ctx) {
  (void)path;
  const distances *d = ctx;
  fprintf(f,
          "{\"arch\": \"%s\", \"split\": \"%s\", \"images\": %lld, "
          "\"image_diagonal\": %.6f, \"mean_attention_distance\": [",
          d->arch, d->split, (long long)d->images, d->diagonal);
  for (int l = 0; l < d->layers; l++) {
    fprintf(f, "%s[", l ? ", " : "");
    for (int h = 0; h < d->heads[l]; h++)
      fprintf(f, "%s%.6f", h ? ", " : "", mean_distance(d, l, h));
    fprintf(f, "]");
  }
  fprintf(f, "]}\n");
  return CT_OK;
}

// One dot per head and layer: a series per head, its layers' points kept
// apart by NaN (a skipped point breaks the line), so only the markers show.
static ct_status distance_chart(const distances *d, const char *path) {
  const int H = d->max_heads, n = 2 * d->layers;
  double *x = malloc((size_t)n * H * sizeof *x);
  double *y = malloc((size_t)n * H * sizeof *y);
  ct_plot_series *series = calloc((size_t)H, sizeof *series);
  char(*names)[16] = calloc((size_t)H, sizeof *names);
  ct_status st = x && y && series && names
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "analyze: out of memory");
  for (int h = 0; h < H && st == CT_OK; h++) {
    double *sx = x + h * n, *sy = y + h * n;
    for (int l = 0; l < d->layers; l++) {
      sx[2 * l] = sx[2 * l + 1] = l + 1;
      sy[2 * l] = h < d->heads[l] ? mean_distance(d, l, h) : NAN;
      sy[2 * l + 1] = NAN;
    }
    snprintf(names[h], sizeof names[h], "head %d", h);
    series[h] = (ct_plot_series){
        .name = H <= 12 ? names[h] : NULL, .x = sx, .y = sy, .n = n};
  }
  char title[160];
  snprintf(title, sizeof title,
           "mean attention distance (px), %s, %lld %s images (diagonal "
           "%.0f)",
           d->arch, (long long)d->images, d->split, d->diagonal);
  ct_plot_chart chart = {.title = title,
                         .x_label = "network depth (layer)",
                         .series = series,
                         .n_series = H};
  if (st == CT_OK)
    st = ct_plot_write_png(path, &chart, 1, CT_PLOT_WIDTH, CT_PLOT_HEIGHT);
  free(x);
  free(y);
  free(series);
  free(names);
  return st;
}

// The cosine similarities of the patches' position embeddings: pos (1, T,
// D), its first `prefix` rows other tokens' -> sim (P, P), P = T - prefix.
static void position_similarity(const ct_tensor *pos, int64_t prefix,
                                double *sim) {
  const int64_t T = pos->shape[1], D = pos->shape[2], P = T - prefix;
  const float *e = ct_f32(pos) + prefix * D;
  for (int64_t i = 0; i < P; i++)
    for (int64_t j = 0; j < P; j++) {
      double dot = 0.0, ni = 0.0, nj = 0.0;
      for (int64_t k = 0; k < D; k++) {
        dot += (double)e[i * D + k] * e[j * D + k];
        ni += (double)e[i * D + k] * e[i * D + k];
        nj += (double)e[j * D + k] * e[j * D + k];
      }
      sim[i * P + j] = ni > 0.0 && nj > 0.0 ? dot / sqrt(ni * nj) : 0.0;
    }
}

typedef struct similarity {
  const double *sim;
  int64_t gh, gw;
} similarity;

static ct_status write_similarity_csv(FILE *f, const char *path, void *ctx) {
  (void)path;
  const similarity *s = ctx;
  const int64_t P = s->gh * s->gw;
  fprintf(f, "row,col,other_row,other_col,cosine\n");
  for (int64_t i = 0; i < P; i++)
    for (int64_t j = 0; j < P; j++)
      fprintf(f, "%lld,%lld,%lld,%lld,%.6f\n", (long long)(i / s->gw),
              (long long)(i % s->gw), (long long)(j / s->gw),
              (long long)(j % s->gw), s->sim[i * P + j]);
  return CT_OK;
}

// A grid of gh x gw tiles, tile (r, c) a gh x gw grid of patch (r, c)'s
// similarity with each patch, from blue (-1) through gray to yellow (1).
static ct_status similarity_png(const similarity *s, const char *path) {
  const int64_t side = s->gh > s->gw ? s->gh : s->gw;
  const int64_t cell = SIM_TILE / side > 2 ? SIM_TILE / side : 2;
  const int64_t tile_w = s->gw * cell, tile_h = s->gh * cell;
  const int64_t W = s->gw * (tile_w + SIM_GAP) + SIM_GAP,
                H = s->gh * (tile_h + SIM_GAP) + SIM_GAP;
  if (W > 16384 || H > 16384)
    return ct_error(CT_ERR_ARG,
                    "analyze: a %lldx%lld patch grid is too large to draw",
                    (long long)s->gh, (long long)s->gw);
  uint8_t *rgb = malloc((size_t)(W * H * 3));
  if (!rgb) return ct_error(CT_ERR_NOMEM, "analyze: out of memory");
  memset(rgb, 255, (size_t)(W * H * 3));
  const int64_t P = s->gh * s->gw;
  for (int64_t i = 0; i < P; i++)
    for (int64_t j = 0; j < P; j++) {
      double v = s->sim[i * P + j];
      double t = (v < -1.0 ? -1.0 : v > 1.0 ? 1.0 : v) * 0.5 + 0.5;
      const uint8_t col[3] = {(uint8_t)lround(40 + 215 * t),
                              (uint8_t)lround(60 + 170 * t),
                              (uint8_t)lround(160 - 130 * t)};
      const int64_t x0 = SIM_GAP + (i % s->gw) * (tile_w + SIM_GAP) +
                         (j % s->gw) * cell,
                    y0 = SIM_GAP + (i / s->gw) * (tile_h + SIM_GAP) +
                         (j / s->gw) * cell;
      for (int64_t y = y0; y < y0 + cell; y++)
        for (int64_t x = x0; x < x0 + cell; x++)
          memcpy(rgb + (y * W + x) * 3, col, 3);
    }
  ct_status st = ct_png_write_rgb(path, (int)W, (int)H, rgb);
  free(rgb);
  return st;
}

// ---- the command ------------------------------------------------------------

// dir/name into buf.
static const char *out_path(char *buf, size_t size, const char *dir,
                            const char *name) {
  snprintf(buf, size, "%s/%s", dir, name);
  return buf;
}

// Mean distances over `n` images, BATCH at a time.
static ct_status measure(ct_task *t, const uint8_t *images, int64_t n,
                         int64_t pixels, distances *d) {
  ct_nn_attention_log *log = malloc(sizeof *log);
  if (!log) return ct_error(CT_ERR_NOMEM, "analyze: out of memory");
  ct_status st = CT_OK;
  for (int64_t first = 0; first < n && st == CT_OK; first += BATCH) {
    const int64_t b = n - first < BATCH ? n - first : BATCH;
    ct_arena_mark mark = ct_arena_get_mark();
    log->count = 0;
    st = ct_classification_attention(t, images + first * pixels, b, log, NULL);
    if (st == CT_OK && !d->sum) {
      d->layers = log->count;
      for (int l = 0; l < log->count; l++) {
        d->heads[l] = (int)log->layers[l].weights->shape[1];
        if (d->heads[l] > d->max_heads) d->max_heads = d->heads[l];
      }
      d->sum = calloc((size_t)(d->layers * d->max_heads), sizeof *d->sum);
      d->queries = calloc((size_t)d->layers, sizeof *d->queries);
      if (!d->sum || !d->queries)
        st = ct_error(CT_ERR_NOMEM, "analyze: out of memory");
    }
    for (int l = 0; l < log->count && st == CT_OK; l++)
      st = ct_analyze_layer_distance(&log->layers[l], d->sum + l * d->max_heads,
                                     &d->queries[l]);
    ct_arena_rewind(mark);
  }
  free(log);
  return st;
}

static ct_status rollout_figure(ct_task *t, const ct_classification_view *v,
                                const uint8_t *images, int64_t n,
                                const char *path) {
  const int64_t pixels = (int64_t)v->C * v->H * v->W;
  const int64_t gh = v->grid_h, gw = v->grid_w;
  float *maps = malloc((size_t)(n * gh * gw) * sizeof *maps);
  const uint8_t *panels[ROLLOUT_IMAGES];
  const float *panel_maps[ROLLOUT_IMAGES];
  if (!maps) return ct_error(CT_ERR_NOMEM, "analyze: out of memory");
  ct_nn_attention_log *log = malloc(sizeof *log);
  ct_status st = log ? CT_OK : ct_error(CT_ERR_NOMEM, "analyze: out of memory");
  ct_arena_mark mark = ct_arena_get_mark();
  if (st == CT_OK) {
    log->count = 0;
    st = ct_classification_attention(t, images, n, log, maps);
  }
  ct_arena_rewind(mark);
  for (int64_t i = 0; i < n; i++) {
    panels[i] = images + i * pixels;
    panel_maps[i] = maps + i * gh * gw;
  }
  if (st == CT_OK)
    st = ct_plot_attention_png(path, (int)n, panels, v->C, v->H, v->W,
                               panel_maps, (int)gh, (int)gw, NULL);
  free(maps);
  free(log);
  return st;
}

ct_status ct_analyze_run(const char *ckpt, int64_t images, const char *split,
                         const char *out_dir, FILE *out) {
  ct_run_model m;
  ct_status st = ct_run_model_open(&m, ckpt, CT_TASK_EVAL_DATA);
  if (st == CT_OK && m.task.ops != &ct_task_classification)
    st = ct_error(CT_ERR_ARG,
                  "analyze: %s is a %s checkpoint; the analysis needs a "
                  "classification model with attention (vit, deit, swin, "
                  "cvt)",
                  ckpt, m.task.ops->name);
  ct_classification_view v = {0};
  if (st == CT_OK) {
    ct_run_apply_precision(&m.run);
    ct_classification_view_of(&m.task, &v);
    if (!v.grid_h)
      st = ct_error(CT_ERR_ARG,
                    "analyze: %s is a %s, which has no attention to analyze "
                    "(vit, deit, swin and cvt have)",
                    ckpt, v.arch);
  }
  const uint8_t *pix = NULL;
  int64_t n = 0;
  if (st == CT_OK)
    st = ct_classification_split_images(&m.task, split, images, &pix, &n);
  if (st == CT_OK) st = ct_make_dirs(out_dir);
  distances d = {.arch = v.arch,
                 .split = split,
                 .images = n,
                 .diagonal = hypot((double)v.H, (double)v.W)};
  char path[4096];
  bool was = ct_grad_set_enabled(false);
  const int64_t pixels = (int64_t)v.C * v.H * v.W;
  if (st == CT_OK) st = measure(&m.task, pix, n, pixels, &d);
  if (st == CT_OK)
    st = ct_file_write_atomic(
        out_path(path, sizeof path, out_dir, "attention_distance.csv"),
        write_distance_csv, &d);
  if (st == CT_OK)
    st = ct_file_write_atomic(
        out_path(path, sizeof path, out_dir, "attention_distance.json"),
        write_distance_json, &d);
  if (st == CT_OK)
    st = distance_chart(
        &d, out_path(path, sizeof path, out_dir, "attention_distance.png"));
  if (st == CT_OK) {
    fprintf(out,
            "%s, %lld %s images (diagonal %.1f px): mean attention distance "
            "per layer (pixels, mean [min, max] over heads)\n",
            v.arch, (long long)n, split, d.diagonal);
    for (int l = 0; l < d.layers; l++) {
      double sum = 0.0, lo = INFINITY, hi = -INFINITY;
      for (int h = 0; h < d.heads[l]; h++) {
        double x = mean_distance(&d, l, h);
        sum += x;
        lo = fmin(lo, x);
        hi = fmax(hi, x);
      }
      fprintf(out, "  layer %2d: %7.2f [%.2f, %.2f]\n", l + 1, sum / d.heads[l],
              lo, hi);
    }
  }
  if (st == CT_OK && v.pos_embed) {
    const int64_t gh = v.grid_h, gw = v.grid_w, P = gh * gw;
    double *sim = malloc((size_t)(P * P) * sizeof *sim);
    similarity s = {.sim = sim, .gh = gh, .gw = gw};
    st = sim ? CT_OK : ct_error(CT_ERR_NOMEM, "analyze: out of memory");
    if (st == CT_OK) {
      position_similarity(v.pos_embed, v.prefix_tokens, sim);
      st = ct_file_write_atomic(
          out_path(path, sizeof path, out_dir, "position_embedding.csv"),
          write_similarity_csv, &s);
    }
    if (st == CT_OK)
      st = similarity_png(
          &s, out_path(path, sizeof path, out_dir, "position_embedding.png"));
    free(sim);
  }
  if (st == CT_OK)
    st = rollout_figure(&m.task, &v, pix,
                        n < ROLLOUT_IMAGES ? n : ROLLOUT_IMAGES,
                        out_path(path, sizeof path, out_dir, "rollout.png"));
  ct_grad_set_enabled(was);
  if (st == CT_OK) fprintf(out, "figures and numbers in %s\n", out_dir);
  free(d.sum);
  free(d.queries);
  ct_run_model_close(&m);
  return st;
}
