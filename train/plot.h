// PNG line charts of training metrics, drawn from scratch (libpng only).
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
//                ...), one series per "split"
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
  bool log_y;           // log10 y axis; values <= 0 are skipped
} ct_plot_chart;

enum { CT_PLOT_WIDTH = 800, CT_PLOT_HEIGHT = 400 };

// Draws the charts stacked vertically (each width x height pixels, 64..8192)
// into one RGB PNG at `path`. Errors name the path.
ct_status ct_plot_write_png(const char *path, const ct_plot_chart *charts,
                            int n_charts, int width, int height);

// Writes loss.png, lr.png and metrics.png into run_dir from its
// metrics.jsonl (see above). A note such as a skipped truncated last line
// is copied to `warning` ("" when none).
ct_status ct_plot_run_dir(const char *run_dir, char *warning, size_t warning_size);

#endif
