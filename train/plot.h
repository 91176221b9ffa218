// PNG line charts of training metrics, confusion matrices and attention-map
// overlays, drawn from scratch (libpng only).
//
// A chart has a title, axes with tick labels, light grid lines, one colored
// line per series and a legend; text uses a built-in 5x7 bitmap font. Axes
// range themselves over the finite data (log10 y optional). Non-finite
// points are skipped and break the line there; a series with few points also
// gets a marker per point, so a single evaluation still shows; a chart with
// no data at all is drawn empty with a "no data" note. Files are written
// atomically (train/fileio.h).
//
// ct_plot_run_dir backs `ctrain plot RUN_DIR`. It reads RUN_DIR/metrics.jsonl,
// where each line has an integer "step", and lines with "type": "eval" are
// evaluations (any other or no "type" is a training line). It writes:
//   loss.png     training "loss", plus evaluation "loss" per "split"
//                (log y when the loss spans more than a factor of 20)
//   lr.png       training "lr"
//   metrics.png  one panel per other numeric evaluation field (bleu, acc,
//                ...; not the counts "images" and "sentences"), one series
//                per "split"
//
// ct_plot_confusion_png and ct_plot_attention_png draw a classifier's
// evaluation: a confusion heat map, and images with the attention they got;
// ct_plot_alignment_png a translator's attention over the source words.
//
// Not here: anti-aliasing, scatter/bar plots, y-axis titles, fonts.
#ifndef CT_TRAIN_PLOT_H
#define CT_TRAIN_PLOT_H

#include "core/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ct_plot_series {
  const char *name;     // legend label (NULL: not in the legend)
  const double *x, *y;  // n points
  int64_t n;
} ct_plot_series;

typedef struct ct_plot_chart {
  const char *title;
  const char *x_label;  // under the x axis, e.g. "step"; NULL for none
  const ct_plot_series *series;
  int n_series;
  bool log_y;  // log10 y axis; values <= 0 are skipped
} ct_plot_chart;

enum {
  CT_PLOT_WIDTH = 800,
  CT_PLOT_HEIGHT = 400,
  CT_PNG_MAX_SIDE = 1000000,     // libpng's limit on a side
  CT_PLOT_MAX_CLASSES = 1000,    // of a confusion matrix
  CT_PLOT_MAX_PANELS = 64,       // images in one attention figure
  CT_PLOT_MAX_IMAGE_SIDE = 512,  // of each of those images and of its map
  CT_PLOT_MAX_WORDS = 1000,      // of an alignment matrix, each way
};

// Draws the charts stacked vertically (each width x height pixels, 64..8192)
// into one RGB PNG at `path`. Errors name the path.
ct_status ct_plot_write_png(const char *path, const ct_plot_chart *charts,
                            int n_charts, int width, int height);

// Writes loss.png, lr.png and metrics.png into run_dir from its
// metrics.jsonl (see above). A note such as a skipped truncated last line
// is copied to `warning` ("" when none).
ct_status ct_plot_run_dir(const char *run_dir, char *warning,
                          size_t warning_size);
// Backs `ctrain plot RUN_DIR... --out FILE.png [--metrics LIST]`: the runs'
// metrics in one PNG at out_path, stacked: loss (training and evaluation),
// then one panel per evaluation metric, with one series per run (named by
// the run folder's last component) and split. `metrics` (NULL: all), a
// comma-separated list of evaluation fields and "loss", keeps only those
// panels, in its order (the loss first when listed); a name no run has is
// an error listing those they have. A note about a skipped line goes to
// `warning`.
ct_status ct_plot_compare_runs(const char *out_path,
                               const char *const *run_dirs, int n_runs,
                               const char *metrics, char *warning,
                               size_t warning_size);

// Writes an 8-bit RGB PNG atomically: rgb holds height rows of width pixels
// of 3 bytes (row-major), 1..CT_PNG_MAX_SIDE each way. Errors name the path.
ct_status ct_png_write_rgb(const char *path, int width, int height,
                           const uint8_t *rgb);

// Draws a confusion matrix of K = num_classes (1..CT_PLOT_MAX_CLASSES)
// classes: counts (K,K), row = true class, column = predicted class, all >= 0.
// A cell is shaded from white to dark blue by its fraction of the row (the
// recall of the true class on the diagonal; a row without samples is white).
// Cells are 40 px for K <= 10, 28 for K <= 20, 14 for K <= 50, 8 for
// K <= 100, 4 for K <= 200, then 2, so K = 1000 gives a 2000 px grid. Cells
// of 28 px or more show their count (12k, 3M when long); cells of 14 px or
// more get labels per class: the names (up to 16 characters) on the left
// and on top, across the columns when every name fits its cell, else
// turned to read upwards (the image grows by the longest); smaller cells
// get index labels every 5, 10, 20, ... classes. class_names (K
// entries) may be NULL, and so may any entry: indices stand in. The title
// (NULL: "confusion matrix") goes on top, e.g. "confusion matrix, test,
// accuracy 91.23%", with the captions "predicted" over the columns and
// "true" beside the rows. Errors name the path; nothing is written then.
// The width in pixels of `s` in the plots' 5x7 font at `scale` (a glyph
// advances 6 pixels at scale 1; no spacing after the last).
int ct_plot_text_width(const char *s, int scale);

ct_status ct_plot_confusion_png(const char *path, int num_classes,
                                const int64_t *counts,
                                const char *const *class_names,
                                const char *title);

// Draws n (1..CT_PLOT_MAX_PANELS) images with their attention maps, one
// panel per image, in rows of up to 8 panels with 10 px margins. images[k]
// is u8 (C,H,W) with C = channels (1 gray, 3 RGB) and H, W = height, width
// (1..CT_PLOT_MAX_IMAGE_SIDE). A panel is the image upscaled by the largest
// whole factor that keeps its longer side within 224 px (at least 1),
// nearest neighbour. maps[k] is (grid_h, grid_w), row-major, values in
// [0, 1] (others are clamped, NaN reads as 0); it is upsampled bilinearly
// over the panel, cell values at cell centers, and blended over the image as
//   out = (1 - 0.6 a) pixel + 0.6 a heat(a),  heat(a) = (255, 255 a, 0),
// red where attention is weak, yellow where strong, the plain image where it
// is 0. captions[k] (e.g. "coat 97.1%", cut to the panel width) goes in a
// 20 px band under panel k; captions or any entry may be NULL. Errors name
// the path; nothing is written then.
ct_status ct_plot_attention_png(const char *path, int n,
                                const uint8_t *const *images, int channels,
                                int height, int width, const float *const *maps,
                                int grid_h, int grid_w,
                                const char *const *captions);

// Draws an alignment matrix as Bahdanau, Cho & Bengio (2015) figure 3 do:
// weights (n_rows, n_cols), row-major, row i the attention of output word
// row_words[i] over the source words col_words[j]; each cell gray from
// black (0) to white (1) (clamped, NaN as 0). Source words stand on top,
// turned to read upwards, output words on the left; words are cut to 24
// characters, and non-ASCII letters lose their accents (the font is ASCII).
// Cells are 20 px up to 40 words each way, 12 up to 100, then 6. title may
// be NULL. 1..CT_PLOT_MAX_WORDS words each way. Errors name the path;
// nothing is written then.
ct_status ct_plot_alignment_png(const char *path, int n_rows,
                                const char *const *row_words, int n_cols,
                                const char *const *col_words,
                                const float *weights, const char *title);

// Draws one image (u8 channel-first, C = 1 or 3), upscaled to about 448
// pixels, with n boxes (pixel corners x0, y0, x1, y1 of the original image)
// framed in the color of their label and captioned ("circle 0.97") above:
// what `ctrain detect` writes.
ct_status ct_plot_boxes_png(const char *path, const uint8_t *image,
                            int channels, int height, int width, int n,
                            const float *boxes, const int *labels,
                            const char *const *captions);

#endif
