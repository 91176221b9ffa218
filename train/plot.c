// Line charts, confusion matrices and attention overlays rendered into an RGB
// buffer and saved as PNG.
//
// Layout of one chart panel (width W, height H): the title on top, the plot area
// framed in the middle, y tick labels on its left, x tick labels and the x
// label below it, the legend in its top-right corner.
#include "train/plot.h"

#include "data/png_error.h"
#include "data/utf8.h"
#include "train/fileio.h"
#include "train/jsonl.h"

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- canvas and font ----

typedef struct canvas {
  uint8_t *rgb;  // w * h * 3
  int w, h;
} canvas;

typedef struct rgb {
  uint8_t r, g, b;
} rgb;

static const rgb white = {255, 255, 255}, black = {0, 0, 0},
                 grid = {228, 228, 228}, gray = {110, 110, 110};
// Series colors (the matplotlib "tab10" cycle with its gray made dark blue,
// since the legend placement tells data from axes by grayness), reused in order.
static const rgb palette[] = {
    {31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
    {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {0, 0, 139},
    {188, 189, 34},  {23, 190, 207},
};
enum { N_COLORS = sizeof palette / sizeof palette[0] };

// A 5x7 font for printable ASCII (32..126): 7 rows per glyph, bit 4 of each
// row is the leftmost pixel. Glyphs advance 6 pixels. Lowercase letters sit
// on rows 2..6; g, p, q and y are drawn 2 rows lower so that their tails
// hang below that baseline.
enum { GLYPH_W = 5, GLYPH_H = 7, GLYPH_ADVANCE = 6 };
static const uint8_t font5x7[95][7] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // space
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04},  // !
    {0x0a, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00},  // "
    {0x0a, 0x0a, 0x1f, 0x0a, 0x1f, 0x0a, 0x0a},  // #
    {0x04, 0x0f, 0x14, 0x0e, 0x05, 0x1e, 0x04},  // $
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03},  // %
    {0x0c, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0d},  // &
    {0x04, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00},  // quote
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02},  // (
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08},  // )
    {0x00, 0x04, 0x15, 0x0e, 0x15, 0x04, 0x00},  // *
    {0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00},  // +
    {0x00, 0x00, 0x00, 0x00, 0x0c, 0x04, 0x08},  // ,
    {0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00},  // -
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c},  // .
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00},  // /
    {0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e},  // 0
    {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e},  // 1
    {0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f},  // 2
    {0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e},  // 3
    {0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02},  // 4
    {0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e},  // 5
    {0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e},  // 6
    {0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},  // 7
    {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e},  // 8
    {0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c},  // 9
    {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00},  // :
    {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x04, 0x08},  // ;
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02},  // <
    {0x00, 0x00, 0x1f, 0x00, 0x1f, 0x00, 0x00},  // =
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08},  // >
    {0x0e, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04},  // ?
    {0x0e, 0x11, 0x01, 0x0d, 0x15, 0x15, 0x0e},  // @
    {0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11},  // A
    {0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e},  // B
    {0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e},  // C
    {0x1c, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1c},  // D
    {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f},  // E
    {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10},  // F
    {0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f},  // G
    {0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11},  // H
    {0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e},  // I
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c},  // J
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11},  // K
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f},  // L
    {0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11},  // M
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11},  // N
    {0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e},  // O
    {0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10},  // P
    {0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d},  // Q
    {0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11},  // R
    {0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e},  // S
    {0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},  // T
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e},  // U
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04},  // V
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a},  // W
    {0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11},  // X
    {0x11, 0x11, 0x0a, 0x04, 0x04, 0x04, 0x04},  // Y
    {0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f},  // Z
    {0x0e, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0e},  // [
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00},  // backslash
    {0x0e, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0e},  // ]
    {0x04, 0x0a, 0x11, 0x00, 0x00, 0x00, 0x00},  // ^
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1f},  // _
    {0x08, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00},  // `
    {0x00, 0x00, 0x0e, 0x01, 0x0f, 0x11, 0x0f},  // a
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1e},  // b
    {0x00, 0x00, 0x0e, 0x10, 0x10, 0x11, 0x0e},  // c
    {0x01, 0x01, 0x0d, 0x13, 0x11, 0x11, 0x0f},  // d
    {0x00, 0x00, 0x0e, 0x11, 0x1f, 0x10, 0x0e},  // e
    {0x06, 0x09, 0x08, 0x1c, 0x08, 0x08, 0x08},  // f
    {0x0f, 0x11, 0x11, 0x13, 0x0d, 0x01, 0x0e},  // g
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11},  // h
    {0x04, 0x00, 0x0c, 0x04, 0x04, 0x04, 0x0e},  // i
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0c},  // j
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12},  // k
    {0x0c, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e},  // l
    {0x00, 0x00, 0x1a, 0x15, 0x15, 0x11, 0x11},  // m
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11},  // n
    {0x00, 0x00, 0x0e, 0x11, 0x11, 0x11, 0x0e},  // o
    {0x1e, 0x11, 0x11, 0x11, 0x1e, 0x10, 0x10},  // p
    {0x0f, 0x11, 0x11, 0x11, 0x0f, 0x01, 0x01},  // q
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10},  // r
    {0x00, 0x00, 0x0e, 0x10, 0x0e, 0x01, 0x1e},  // s
    {0x08, 0x08, 0x1c, 0x08, 0x08, 0x09, 0x06},  // t
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0d},  // u
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0a, 0x04},  // v
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0a},  // w
    {0x00, 0x00, 0x11, 0x0a, 0x04, 0x0a, 0x11},  // x
    {0x11, 0x11, 0x11, 0x13, 0x0d, 0x01, 0x0e},  // y
    {0x00, 0x00, 0x1f, 0x02, 0x04, 0x08, 0x1f},  // z
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02},  // {
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},  // |
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08},  // }
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00},  // ~
};

// Allocates a white canvas; false when out of memory.
static bool canvas_alloc(canvas *c, int w, int h) {
  c->w = w;
  c->h = h;
  c->rgb = malloc((size_t)w * (size_t)h * 3);
  if (c->rgb) memset(c->rgb, 255, (size_t)w * (size_t)h * 3);
  return c->rgb != NULL;
}

static void pixel_set(canvas *c, int x, int y, rgb col) {
  if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
  uint8_t *p = c->rgb + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
  p[0] = col.r;
  p[1] = col.g;
  p[2] = col.b;
}

static void rect_fill(canvas *c, int x0, int y0, int x1, int y1, rgb col) {
  for (int y = y0; y <= y1; y++)
    for (int x = x0; x <= x1; x++) pixel_set(c, x, y, col);
}

static void rect_frame(canvas *c, int x0, int y0, int x1, int y1, rgb col) {
  for (int x = x0; x <= x1; x++)
    pixel_set(c, x, y0, col), pixel_set(c, x, y1, col);
  for (int y = y0; y <= y1; y++)
    pixel_set(c, x0, y, col), pixel_set(c, x1, y, col);
}

// A line `thick` pixels wide (Bresenham with a square brush).
static void line_draw(canvas *c, int x0, int y0, int x1, int y1, rgb col,
                      int thick) {
  int dx = abs(x1 - x0), dy = -abs(y1 - y0);
  int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
  for (;;) {
    for (int i = 0; i < thick; i++)
      for (int j = 0; j < thick; j++)
        pixel_set(c, x0 + i - thick / 2, y0 + j - thick / 2, col);
    if (x0 == x1 && y0 == y1) break;
    int e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

static int text_width(const char *s, int scale) {
  return (int)strlen(s) * GLYPH_ADVANCE * scale - scale;
}

int ct_plot_text_width(const char *s, int scale) {
  return text_width(s, scale);
}

// Draws `s` with its top-left corner at (x, y); characters outside the
// font's range draw as '?'.
static void text_draw(canvas *c, int x, int y, const char *s, int scale,
                      rgb col) {
  for (; *s; s++, x += GLYPH_ADVANCE * scale) {
    unsigned ch = (unsigned char)*s;
    if (ch < 32 || ch > 126) ch = '?';
    const uint8_t *g = font5x7[ch - 32];
    int drop = strchr("gpqy", (int)ch) ? 2 * scale : 0;
    for (int r = 0; r < GLYPH_H; r++)
      for (int b = 0; b < GLYPH_W; b++)
        if (g[r] & (0x10 >> b))
          rect_fill(c, x + b * scale, y + drop + r * scale,
                    x + b * scale + scale - 1, y + drop + r * scale + scale - 1,
                    col);
  }
}

// Copies the longest prefix of `s` that is at most `max_px` wide at `scale`
// (and fits `size`) into buf.
static void text_fit(char *buf, size_t size, const char *s, int max_px,
                     int scale) {
  size_t n = 0;
  while (s[n] && n + 1 < size &&
         (int)(n + 1) * GLYPH_ADVANCE * scale - scale <= max_px)
    n++;
  memcpy(buf, s, n);
  buf[n] = '\0';
}

// Draws `s` turned a quarter turn counter-clockwise, reading upwards: the
// tops of the glyphs face left at column x, the first glyph ends at row y.
static void text_draw_up(canvas *c, int x, int y, const char *s, int scale,
                         rgb col) {
  int w = text_width(s, scale),
      h = (GLYPH_H + 2) * scale;  // + 2: the tails of g, p, q, y
  if (w < 1) return;
  canvas t;
  if (!canvas_alloc(&t, w, h)) return;
  text_draw(&t, 0, 0, s, scale, black);
  for (int v = 0; v < h; v++)
    for (int u = 0; u < w; u++)
      if (t.rgb[((size_t)v * (size_t)w + (size_t)u) * 3] == 0)
        pixel_set(c, x + v, y - u, col);
  free(t.rgb);
}

// (1 - t) * a + t * b per channel, t in [0, 1].
static rgb rgb_mix(rgb a, rgb b, double t) {
  return (rgb){(uint8_t)lround(a.r + t * (b.r - a.r)),
               (uint8_t)lround(a.g + t * (b.g - a.g)),
               (uint8_t)lround(a.b + t * (b.b - a.b))};
}

// ---- axes ----

typedef struct axis {
  double lo, hi;  // in axis units (log10 of the value for a log axis)
  double step;    // tick spacing in axis units
  bool log;
} axis;

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `target`
// intervals over `range`.
static double nice_step(double range, int target) {
  double raw = range / target, mag = pow(10, floor(log10(raw))),
         norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

// Fits an axis to [lo, hi] (finite, lo <= hi) in axis units.
static axis axis_fit(double lo, double hi, bool log_scale, int target) {
  axis a = {lo, hi, 1, log_scale};
  if (log_scale) {
    a.lo = floor(lo);
    a.hi = ceil(hi);
    if (a.hi <= a.lo) a.hi = a.lo + 1;
    a.step = ceil((a.hi - a.lo) / 8);  // whole decades, at most ~8 ticks
    return a;
  }
  if (hi - lo <=
      1e-12 * fmax(fabs(lo), fabs(hi))) {  // one value: widen around it
    double pad = lo == 0 ? 1 : fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  a.step = nice_step(hi - lo, target);
  a.lo = floor(lo / a.step + 1e-9) * a.step;
  a.hi = ceil(hi / a.step - 1e-9) * a.step;
  if (a.hi <= a.lo) a.hi = a.lo + a.step;
  return a;
}

// Shortens a %e label: "1.50e-04" -> "1.5e-4", "2.0e+03" -> "2e3".
static void exponent_trim(char *s) {
  char *e = strchr(s, 'e');
  if (!e) return;
  char *z = e;  // trailing zeros of the mantissa, and then a bare '.'
  while (z > s && z[-1] == '0') z--;
  if (z > s && z[-1] == '.') z--;
  memmove(z, e, strlen(e) + 1);
  e = z;
  char *d = e + 1;
  if (*d == '+')
    memmove(d, d + 1, strlen(d));
  else if (*d == '-')
    d++;
  while (*d == '0' && d[1]) memmove(d, d + 1, strlen(d));
}

// A tick label for value v on an axis with the given step (linear) or for
// 10^v (log).
static void tick_label(char *buf, size_t size, double v, const axis *a) {
  if (a->log) {
    double x = pow(10, v);
    if (v >= 0 && v < 7)
      snprintf(buf, size, "%.0f", x);
    else if (v < 0 && v >= -3)
      snprintf(buf, size, "%.*f", (int)-v, x);
    else
      snprintf(buf, size, "1e%d", (int)lround(v));
    return;
  }
  if (fabs(v) < a->step * 1e-9) {
    snprintf(buf, size, "0");
    return;
  }
  double big = fmax(fabs(a->lo), fabs(a->hi));
  if (a->step >= 1 && big < 1e7) {
    snprintf(buf, size, "%.0f", v);
  } else if (a->step < 1 && a->step >= 1e-3 && big < 1e5) {
    snprintf(buf, size, "%.*f", (int)-floor(log10(a->step) + 1e-9), v);
  } else {
    // Enough significant digits to tell neighbouring ticks apart.
    int digits = (int)(floor(log10(big)) - floor(log10(a->step) + 1e-9));
    digits = digits < 0 ? 0 : digits > 4 ? 4 : digits;
    snprintf(buf, size, "%.*e", digits, v);
    exponent_trim(buf);
  }
}

static double axis_pos(const axis *a, double v, double p0, double p1) {
  return p0 + (v - a->lo) / (a->hi - a->lo) * (p1 - p0);
}

// ---- one panel ----

// The value a point has on the y axis, or NaN when it cannot be drawn.
static double y_value(double y, bool log_y) {
  if (!isfinite(y)) return NAN;
  if (log_y) return y > 0 ? log10(y) : NAN;
  return y;
}

static void panel_draw(canvas *c, int top, int W, int H,
                       const ct_plot_chart *ch) {
  enum { LEFT = 78, RIGHT = 24, TOP = 36, BOTTOM = 44, MARKER_MAX_POINTS = 40 };
  int px0 = LEFT, px1 = W - RIGHT, py0 = top + TOP, py1 = top + H - BOTTOM;
  const char *title = ch->title ? ch->title : "";
  text_draw(c, (W - text_width(title, 2)) / 2, top + 10, title, 2, black);

  // Data ranges over the drawable points.
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (int s = 0; s < ch->n_series; s++) {
    const ct_plot_series *se = &ch->series[s];
    for (int64_t i = 0; i < se->n; i++) {
      double y = y_value(se->y[i], ch->log_y);
      if (isnan(y) || !isfinite(se->x[i])) continue;
      xlo = fmin(xlo, se->x[i]), xhi = fmax(xhi, se->x[i]);
      ylo = fmin(ylo, y), yhi = fmax(yhi, y);
    }
  }
  if (!(xlo <= xhi)) {
    rect_frame(c, px0, py0, px1, py1, gray);
    const char *note = "no data";
    text_draw(c, (px0 + px1 - text_width(note, 2)) / 2, (py0 + py1) / 2 - 7,
              note, 2, gray);
    return;
  }
  // About one x tick per 90 pixels and one y tick per 50, at least 2.
  int nx = (px1 - px0) / 90, ny = (py1 - py0) / 50;
  axis ax = axis_fit(xlo, xhi, false, nx < 2 ? 2 : nx);
  axis ay = axis_fit(ylo, yhi, ch->log_y, ny < 2 ? 2 : ny);

  // Grid and tick labels.
  char label[48];
  for (int k = 0;; k++) {
    double v = ay.lo + k * ay.step;
    if (v > ay.hi + ay.step * 1e-6) break;
    int y = (int)lround(axis_pos(&ay, v, py1, py0));
    for (int x = px0; x <= px1; x++) pixel_set(c, x, y, grid);
    for (int x = px0 - 4; x < px0; x++) pixel_set(c, x, y, black);
    tick_label(label, sizeof label, v, &ay);
    text_draw(c, px0 - 8 - text_width(label, 1), y - 3, label, 1, black);
  }
  for (int k = 0;; k++) {
    double v = ax.lo + k * ax.step;
    if (v > ax.hi + ax.step * 1e-6) break;
    int x = (int)lround(axis_pos(&ax, v, px0, px1));
    for (int y = py0; y <= py1; y++) pixel_set(c, x, y, grid);
    for (int y = py1; y < py1 + 4; y++) pixel_set(c, x, y, black);
    tick_label(label, sizeof label, v, &ax);
    text_draw(c, x - text_width(label, 1) / 2, py1 + 8, label, 1, black);
  }
  if (ch->x_label)
    text_draw(c, (px0 + px1 - text_width(ch->x_label, 1)) / 2, py1 + 24,
              ch->x_label, 1, gray);
  rect_frame(c, px0, py0, px1, py1, black);

  // Series: consecutive drawable points are joined; a skipped one breaks the line.
  for (int s = 0; s < ch->n_series; s++) {
    const ct_plot_series *se = &ch->series[s];
    rgb col = palette[s % N_COLORS];
    int64_t drawable = 0;
    for (int64_t i = 0; i < se->n; i++)
      drawable += !isnan(y_value(se->y[i], ch->log_y)) && isfinite(se->x[i]);
    bool markers = drawable <= MARKER_MAX_POINTS;
    bool have_prev = false;
    int prev_x = 0, prev_y = 0;
    for (int64_t i = 0; i < se->n; i++) {
      double y = y_value(se->y[i], ch->log_y);
      if (isnan(y) || !isfinite(se->x[i])) {
        have_prev = false;
        continue;
      }
      int x = (int)lround(axis_pos(&ax, se->x[i], px0, px1));
      int yy = (int)lround(axis_pos(&ay, y, py1, py0));
      if (have_prev) line_draw(c, prev_x, prev_y, x, yy, col, 2);
      if (markers) rect_fill(c, x - 2, yy - 2, x + 2, yy + 2, col);
      have_prev = true;
      prev_x = x, prev_y = yy;
    }
  }

  // Legend in the corner of the plot area that hides the fewest data pixels.
  int n_named = 0, name_w = 0;
  for (int s = 0; s < ch->n_series; s++) {
    if (!ch->series[s].name) continue;
    n_named++;
    int w = text_width(ch->series[s].name, 1);
    if (w > name_w) name_w = w;
  }
  if (n_named == 0) return;
  int lw = 8 + 18 + 6 + name_w + 8, lh = 6 + n_named * 12 + 2;
  int corner_x[4] = {px1 - 8 - lw, px0 + 8, px1 - 8 - lw, px0 + 8};
  int corner_y[4] = {py0 + 8, py0 + 8, py1 - 8 - lh, py1 - 8 - lh};
  int lx = corner_x[0], ly = corner_y[0];
  long fewest = -1;
  for (int k = 0; k < 4; k++) {
    long covered = 0;
    for (int y = corner_y[k]; y <= corner_y[k] + lh; y++)
      for (int x = corner_x[k]; x <= corner_x[k] + lw; x++) {
        if (x < 0 || y < 0 || x >= c->w || y >= c->h) continue;
        const uint8_t *p = c->rgb + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
        covered +=
            !(p[0] == p[1] && p[1] == p[2]);  // series colors are not gray
      }
    if (fewest < 0 || covered < fewest)
      fewest = covered, lx = corner_x[k], ly = corner_y[k];
  }
  rect_fill(c, lx, ly, lx + lw, ly + lh, white);
  rect_frame(c, lx, ly, lx + lw, ly + lh, gray);
  int row = 0;
  for (int s = 0; s < ch->n_series; s++) {
    if (!ch->series[s].name) continue;
    int y = ly + 6 + row++ * 12;
    line_draw(c, lx + 8, y + 3, lx + 26, y + 3, palette[s % N_COLORS], 2);
    text_draw(c, lx + 32, y, ch->series[s].name, 1, black);
  }
}

// ---- PNG output ----

typedef struct png_job {
  const uint8_t *rgb;  // w * h * 3
  int w, h;
  ct_png_failure failure;
} png_job;

static ct_status rgb_png_write(FILE *f, const char *path, void *ctx) {
  png_job *job = ctx;
  png_structp png = png_create_write_struct(
      PNG_LIBPNG_VER_STRING, &job->failure, ct_png_on_error, ct_png_on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) {
    png_destroy_write_struct(&png, NULL);
    return ct_error(CT_ERR_NOMEM, "%s: cannot start the PNG encoder", path);
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return ct_error(CT_ERR_IO, "%s: PNG encoding failed: %s", path,
                    job->failure.message);
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)job->w, (png_uint_32)job->h, 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < job->h; y++)
    png_write_row(png, job->rgb + (size_t)y * (size_t)job->w * 3);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return CT_OK;
}

ct_status ct_png_write_rgb(const char *path, int width, int height,
                           const uint8_t *rgb) {
  if (!path) return ct_error(CT_ERR_ARG, "png: no path");
  if (!rgb) return ct_error(CT_ERR_ARG, "%s: no pixels", path);
  if (width < 1 || width > CT_PNG_MAX_SIDE || height < 1 ||
      height > CT_PNG_MAX_SIDE)
    return ct_error(CT_ERR_ARG, "%s: image size %dx%d outside 1..%d", path,
                    width, height, CT_PNG_MAX_SIDE);
  png_job job = {rgb, width, height, {""}};
  return ct_file_write_atomic(path, rgb_png_write, &job);
}

// Saves the canvas as `path` and frees it.
static ct_status canvas_save(canvas *c, const char *path) {
  ct_status st = ct_png_write_rgb(path, c->w, c->h, c->rgb);
  free(c->rgb);
  c->rgb = NULL;
  return st;
}

ct_status ct_plot_write_png(const char *path, const ct_plot_chart *charts,
                            int n_charts, int width, int height) {
  if (!path) return ct_error(CT_ERR_ARG, "plot: no path");
  if (!charts || n_charts < 1 || n_charts > 64)
    return ct_error(CT_ERR_ARG, "%s: need 1..64 charts, got %d", path,
                    n_charts);
  if (width < 64 || width > 8192 || height < 64 || height > 8192)
    return ct_error(CT_ERR_ARG, "%s: chart size %dx%d outside 64..8192", path,
                    width, height);
  for (int k = 0; k < n_charts; k++)
    for (int s = 0; s < charts[k].n_series; s++) {
      const ct_plot_series *se = &charts[k].series[s];
      if (se->n < 0 || (se->n > 0 && (!se->x || !se->y)))
        return ct_error(CT_ERR_ARG,
                        "%s: series %d of chart %d has no data arrays", path, s,
                        k);
    }
  canvas c;
  if (!canvas_alloc(&c, width, height * n_charts))
    return ct_error(CT_ERR_NOMEM, "%s: out of memory for a %dx%d image", path,
                    c.w, c.h);
  for (int k = 0; k < n_charts; k++)
    panel_draw(&c, k * height, width, height, &charts[k]);
  return canvas_save(&c, path);
}

// ---- confusion matrix ----

// Cell side in pixels for K classes: room for a count up to K = 20, then
// shrinking so that the grid stays at most 2000 px across.
static int confusion_cell(int k) {
  return k <= 10    ? 40
         : k <= 20  ? 28
         : k <= 50  ? 14
         : k <= 100 ? 8
         : k <= 200 ? 4
                    : 2;
}

// A count that fits `max_px` at scale 1, in thousands, millions, ... if needed
// ("12345" -> "12k"); "" when not even that fits.
static void count_label(char *buf, size_t size, int64_t count, int max_px) {
  static const char suffix[] = " kMGTPE";
  for (int k = 0; k < 7; k++, count /= 1000) {
    if (k == 0)
      snprintf(buf, size, "%lld", (long long)count);
    else
      snprintf(buf, size, "%lld%c", (long long)count, suffix[k]);
    if (text_width(buf, 1) <= max_px) return;
  }
  buf[0] = '\0';
}

// The label of class i: its name cut to `max_chars`, or its index.
static void class_label(char *buf, size_t size, const char *const *names, int i,
                        int max_chars) {
  if (names && names[i])
    snprintf(buf, size, "%.*s", max_chars, names[i]);
  else
    snprintf(buf, size, "%d", i);
}

ct_status ct_plot_confusion_png(const char *path, int num_classes,
                                const int64_t *counts,
                                const char *const *class_names,
                                const char *title) {
  enum { M = 10, NAME_CHARS = 16, TITLE_CHARS = 200 };
  static const rgb dark_blue = {8, 48, 107};  // the end of matplotlib's "Blues"
  if (!path) return ct_error(CT_ERR_ARG, "confusion plot: no path");
  int K = num_classes;
  if (K < 1 || K > CT_PLOT_MAX_CLASSES)
    return ct_error(CT_ERR_ARG, "%s: need 1..%d classes, got %d", path,
                    CT_PLOT_MAX_CLASSES, K);
  if (!counts) return ct_error(CT_ERR_ARG, "%s: no counts", path);
  for (int64_t i = 0; i < (int64_t)K * K; i++)
    if (counts[i] < 0)
      return ct_error(
          CT_ERR_ARG,
          "%s: negative count %lld for true class %lld, predicted %lld", path,
          (long long)counts[i], (long long)(i / K), (long long)(i % K));

  // Each class gets a label when a cell is at least a text line high;
  // smaller cells get index labels every `every` classes, about 40 px apart.
  int cell = confusion_cell(K), every = 1;
  if (cell < 14) {
    static const int steps[] = {5, 10, 20, 50, 100, 200, 500};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++)
      if ((every = steps[k]) * cell >= 40) break;
  }
  const char *const *names = cell >= 14 ? class_names : NULL;
  char label[64], title_buf[TITLE_CHARS + 1];
  snprintf(title_buf, sizeof title_buf, "%s",
           title ? title : "confusion matrix");
  // Column labels are the row labels, across when every one fits its
  // cell, else turned to read upwards (a 14 px cell has room for a turned
  // line of text: 7 px glyphs and 2 px tails).
  int label_w = 0;
  bool fits_across = true;
  for (int i = 0; i < K; i += every) {
    class_label(label, sizeof label, names, i, NAME_CHARS);
    if (text_width(label, 1) > label_w) label_w = text_width(label, 1);
    if (text_width(label, 1) > cell - 2) fits_across = false;
  }
  const bool turned = names && !fits_across;

  // From the top: the title (14 px high at scale 2), "predicted", the column
  // labels, the grid. From the left: "true" (turned), the row labels, the grid.
  int side = K * cell, gy = turned ? M + 43 + label_w : M + 50,
      gx = M + 7 + 8 + label_w + 6;
  int W = gx + side + M, H = gy + side + M;
  if (text_width(title_buf, 2) + 2 * M > W)
    W = text_width(title_buf, 2) + 2 * M;
  canvas c;
  if (!canvas_alloc(&c, W, H))
    return ct_error(CT_ERR_NOMEM, "%s: out of memory for a %dx%d image", path,
                    W, H);
  text_draw(&c, (W - text_width(title_buf, 2)) / 2, M, title_buf, 2, black);
  text_draw(&c, gx + (side - text_width("predicted", 1)) / 2, M + 24,
            "predicted", 1, gray);
  text_draw_up(&c, M, gy + (side + text_width("true", 1)) / 2, "true", 1, gray);

  for (int i = 0; i < K; i++) {
    double total = 0;  // in double: a sum of int64 counts could overflow
    for (int j = 0; j < K; j++) total += (double)counts[(size_t)i * K + j];
    for (int j = 0; j < K; j++) {
      int64_t n = counts[(size_t)i * K + j];
      double f = total > 0 ? (double)n / total : 0;
      int x = gx + j * cell, y = gy + i * cell;
      rect_fill(&c, x, y, x + cell - 1, y + cell - 1,
                rgb_mix(white, dark_blue, f));
      if (cell < 28) continue;
      count_label(label, sizeof label, n, cell - 4);
      text_draw(&c, x + (cell - text_width(label, 1)) / 2,
                y + (cell - GLYPH_H) / 2, label, 1, f > 0.5 ? white : black);
    }
  }
  if (cell >= 14)  // light lines between the cells
    for (int k = 1; k < K; k++) {
      rect_fill(&c, gx + k * cell, gy, gx + k * cell, gy + side - 1, grid);
      rect_fill(&c, gx, gy + k * cell, gx + side - 1, gy + k * cell, grid);
    }
  for (int i = 0; i < K; i += every) {
    int mid = i * cell + cell / 2;
    class_label(label, sizeof label, names, i, NAME_CHARS);
    text_draw(&c, gx - 6 - text_width(label, 1), gy + mid - 3, label, 1, black);
    if (turned)
      text_draw_up(&c, gx + i * cell + (cell - GLYPH_H - 2) / 2, gy - 6, label,
                   1, black);
    else
      text_draw(&c, gx + mid - text_width(label, 1) / 2, gy - 12, label, 1,
                black);
    if (every > 1) {
      rect_fill(&c, gx - 3, gy + mid, gx - 1, gy + mid, black);
      rect_fill(&c, gx + mid, gy - 3, gx + mid, gy - 1, black);
    }
  }
  rect_frame(&c, gx - 1, gy - 1, gx + side, gy + side, gray);
  return canvas_save(&c, path);
}

// ---- alignment matrices ----

// The label of a word in the font's ASCII: Latin-1 letters lose their
// accents (a-umlaut -> a, sharp s -> ss), other characters outside ASCII
// become '?'.
static void ascii_label(char *buf, size_t size, const char *word) {
  // U+00C0..U+00FF without their diacritics ('?' for the two signs).
  static const char latin1[] =
      "AAAAAAACEEEEIIIIDNOOOOO?OUUUUYTsaaaaaaaceeeeiiiidnooooo?ouuuuyty";
  size_t n = 0, pos = 0, len = strlen(word);
  while (pos < len && n + 3 < size) {
    const int32_t cp = ct_utf8_decode(word, len, &pos);
    if (cp >= 32 && cp < 127) {
      buf[n++] = (char)cp;
    } else if (cp == 0xDF) {  // sharp s
      buf[n++] = 's';
      buf[n++] = 's';
    } else {
      buf[n++] = cp >= 0xC0 && cp <= 0xFF ? latin1[cp - 0xC0] : '?';
    }
  }
  buf[n] = '\0';
}

ct_status ct_plot_alignment_png(const char *path, int n_rows,
                                const char *const *row_words, int n_cols,
                                const char *const *col_words,
                                const float *weights, const char *title) {
  enum { M = 10, WORD_CHARS = 24 };
  if (!path) return ct_error(CT_ERR_ARG, "alignment plot: no path");
  if (n_rows < 1 || n_cols < 1 || n_rows > CT_PLOT_MAX_WORDS ||
      n_cols > CT_PLOT_MAX_WORDS)
    return ct_error(CT_ERR_ARG,
                    "%s: need 1..%d output and source words, got %d and %d",
                    path, CT_PLOT_MAX_WORDS, n_rows, n_cols);
  if (!weights || !row_words || !col_words)
    return ct_error(CT_ERR_ARG, "%s: no weights or words", path);
  const int most = n_rows > n_cols ? n_rows : n_cols;
  const int cell = most <= 40 ? 20 : most <= 100 ? 12 : 6;
  char label[4 * WORD_CHARS + 4], fit[WORD_CHARS + 1];
  int row_w = 0, col_h = 0;
  for (int i = 0; i < n_rows; i++) {
    ascii_label(label, sizeof label, row_words[i] ? row_words[i] : "");
    text_fit(fit, sizeof fit, label, WORD_CHARS * GLYPH_ADVANCE, 1);
    if (text_width(fit, 1) > row_w) row_w = text_width(fit, 1);
  }
  for (int j = 0; j < n_cols; j++) {
    ascii_label(label, sizeof label, col_words[j] ? col_words[j] : "");
    text_fit(fit, sizeof fit, label, WORD_CHARS * GLYPH_ADVANCE, 1);
    if (text_width(fit, 1) > col_h) col_h = text_width(fit, 1);
  }
  // From the top: the title, the source words (turned, reading upwards),
  // the grid; from the left: the output words, the grid.
  const int title_h = title ? 24 : 0;
  const int gx = M + row_w + 6, gy = M + title_h + col_h + 6;
  int W = gx + n_cols * cell + M, H = gy + n_rows * cell + M;
  if (title && text_width(title, 1) + 2 * M > W)
    W = text_width(title, 1) + 2 * M;
  canvas c;
  if (!canvas_alloc(&c, W, H))
    return ct_error(CT_ERR_NOMEM, "%s: out of memory for a %dx%d image", path,
                    W, H);
  if (title) text_draw(&c, M, M, title, 1, black);
  for (int i = 0; i < n_rows; i++)
    for (int j = 0; j < n_cols; j++) {
      float v = weights[(size_t)i * (size_t)n_cols + (size_t)j];
      const double a = v > 0 ? fmin(v, 1.0) : 0.0;  // NaN reads as 0
      const int x = gx + j * cell, y = gy + i * cell;
      rect_fill(&c, x, y, x + cell - 1, y + cell - 1, rgb_mix(black, white, a));
    }
  for (int i = 0; i < n_rows; i++) {
    ascii_label(label, sizeof label, row_words[i] ? row_words[i] : "");
    text_fit(fit, sizeof fit, label, WORD_CHARS * GLYPH_ADVANCE, 1);
    text_draw(&c, gx - 6 - text_width(fit, 1), gy + i * cell + (cell - 7) / 2,
              fit, 1, black);
  }
  for (int j = 0; j < n_cols; j++) {
    ascii_label(label, sizeof label, col_words[j] ? col_words[j] : "");
    text_fit(fit, sizeof fit, label, WORD_CHARS * GLYPH_ADVANCE, 1);
    text_draw_up(&c, gx + j * cell + (cell - GLYPH_H) / 2, gy - 6, fit, 1,
                 black);
  }
  rect_frame(&c, gx - 1, gy - 1, gx + n_cols * cell, gy + n_rows * cell, gray);
  return canvas_save(&c, path);
}

// ---- attention maps ----

// A map value clamped to [0, 1]; NaN counts as 0.
static double map_at(const float *map, int gw, int y, int x) {
  float v = map[(size_t)y * (size_t)gw + (size_t)x];
  return v > 0 ? fmin(v, 1.0) : 0.0;
}

// The map value at output pixel (py, px) of a ph x pw panel: bilinear between
// grid cell centers (half-pixel centers, edges clamped, like an image resize).
static double map_sample(const float *map, int gh, int gw, int py, int px,
                         int ph, int pw) {
  double gy = (py + 0.5) * gh / ph - 0.5, gx = (px + 0.5) * gw / pw - 0.5;
  gy = gy < 0 ? 0 : gy > gh - 1 ? gh - 1 : gy;
  gx = gx < 0 ? 0 : gx > gw - 1 ? gw - 1 : gx;
  int y0 = (int)gy, x0 = (int)gx, y1 = y0 + 1 < gh ? y0 + 1 : y0,
      x1 = x0 + 1 < gw ? x0 + 1 : x0;
  double ty = gy - y0, tx = gx - x0;
  return (1 - ty) * ((1 - tx) * map_at(map, gw, y0, x0) +
                     tx * map_at(map, gw, y0, x1)) +
         ty * ((1 - tx) * map_at(map, gw, y1, x0) +
               tx * map_at(map, gw, y1, x1));
}

// The images both image plots take: channel-first, 1 (gray) or 3 (RGB)
// channels, each side in 1..CT_PLOT_MAX_IMAGE_SIDE.
static ct_status check_image_shape(const char *path, int channels, int height,
                                   int width) {
  if (channels != 1 && channels != 3)
    return ct_error(CT_ERR_ARG, "%s: images need 1 or 3 channels, got %d", path,
                    channels);
  if (height < 1 || height > CT_PLOT_MAX_IMAGE_SIDE || width < 1 ||
      width > CT_PLOT_MAX_IMAGE_SIDE)
    return ct_error(CT_ERR_ARG, "%s: image size %dx%d outside 1..%d", path,
                    height, width, CT_PLOT_MAX_IMAGE_SIDE);
  return CT_OK;
}

// Pixel (y, x) of such an image as a color (gray repeated).
static rgb image_pixel(const uint8_t *image, int channels, int height,
                       int width, int y, int x) {
  size_t plane = (size_t)height * (size_t)width,
         at = (size_t)y * (size_t)width + (size_t)x;
  return channels == 1
             ? (rgb){image[at], image[at], image[at]}
             : (rgb){image[at], image[plane + at], image[2 * plane + at]};
}

ct_status ct_plot_attention_png(const char *path, int n,
                                const uint8_t *const *images, int channels,
                                int height, int width, const float *const *maps,
                                int grid_h, int grid_w,
                                const char *const *captions) {
  enum { M = 10, CAPTION = 20, PER_ROW = 8 };
  static const double opacity = 0.6;  // of the heat color where the map is 1
  if (!path) return ct_error(CT_ERR_ARG, "attention plot: no path");
  if (n < 1 || n > CT_PLOT_MAX_PANELS)
    return ct_error(CT_ERR_ARG, "%s: need 1..%d images, got %d", path,
                    CT_PLOT_MAX_PANELS, n);
  ct_status st = check_image_shape(path, channels, height, width);
  if (st != CT_OK) return st;
  if (grid_h < 1 || grid_h > CT_PLOT_MAX_IMAGE_SIDE || grid_w < 1 ||
      grid_w > CT_PLOT_MAX_IMAGE_SIDE)
    return ct_error(CT_ERR_ARG, "%s: attention grid %dx%d outside 1..%d", path,
                    grid_h, grid_w, CT_PLOT_MAX_IMAGE_SIDE);
  if (!images || !maps)
    return ct_error(CT_ERR_ARG, "%s: no %s", path, images ? "maps" : "images");
  for (int k = 0; k < n; k++)
    if (!images[k] || !maps[k])
      return ct_error(CT_ERR_ARG, "%s: %s %d is NULL", path,
                      images[k] ? "map" : "image", k);

  int longer = height > width ? height : width,
      scale = longer < 224 ? 224 / longer : 1;
  int ph = height * scale, pw = width * scale;
  int cols = n < PER_ROW ? n : PER_ROW, rows = (n + PER_ROW - 1) / PER_ROW;
  int W = 2 * M + cols * pw + (cols - 1) * M,
      H = 2 * M + rows * (ph + CAPTION) + (rows - 1) * M;
  canvas c;
  if (!canvas_alloc(&c, W, H))
    return ct_error(CT_ERR_NOMEM, "%s: out of memory for a %dx%d image", path,
                    W, H);
  for (int k = 0; k < n; k++) {
    int x0 = M + (k % PER_ROW) * (pw + M),
        y0 = M + (k / PER_ROW) * (ph + CAPTION + M);
    const uint8_t *img = images[k];
    for (int py = 0; py < ph; py++)
      for (int px = 0; px < pw; px++) {
        rgb p =
            image_pixel(img, channels, height, width, py / scale, px / scale);
        // Heat runs from red (low) to yellow (high); out = (1 - 0.6a) p + 0.6a heat(a).
        double a = map_sample(maps[k], grid_h, grid_w, py, px, ph, pw);
        rgb heat = {255, (uint8_t)lround(255 * a), 0};
        pixel_set(&c, x0 + px, y0 + py, rgb_mix(p, heat, opacity * a));
      }
    if (captions && captions[k]) {
      char text[128];
      text_fit(text, sizeof text, captions[k], pw, 1);
      text_draw(&c, x0 + (pw - text_width(text, 1)) / 2, y0 + ph + 6, text, 1,
                black);
    }
  }
  return canvas_save(&c, path);
}

ct_status ct_plot_boxes_png(const char *path, const uint8_t *image,
                            int channels, int height, int width, int n,
                            const float *boxes, const int *labels,
                            const char *const *captions) {
  enum { M = 10 };
  if (!path) return ct_error(CT_ERR_ARG, "boxes plot: no path");
  if (!image) return ct_error(CT_ERR_ARG, "%s: no image", path);
  ct_status st = check_image_shape(path, channels, height, width);
  if (st != CT_OK) return st;
  if (n < 0 || (n > 0 && (!boxes || !labels)))
    return ct_error(CT_ERR_ARG, "%s: %d boxes without coordinates or labels",
                    path, n);
  int longer = height > width ? height : width,
      scale = longer < 448 ? 448 / longer : 1;
  int ph = height * scale, pw = width * scale;
  canvas c;
  if (!canvas_alloc(&c, pw + 2 * M, ph + 2 * M))
    return ct_error(CT_ERR_NOMEM, "%s: out of memory", path);
  for (int py = 0; py < ph; py++)
    for (int px = 0; px < pw; px++)
      pixel_set(
          &c, M + px, M + py,
          image_pixel(image, channels, height, width, py / scale, px / scale));
  for (int i = 0; i < n; i++) {
    rgb col = palette[(labels[i] < 0 ? 0 : labels[i]) % N_COLORS];
    int x0 = M + (int)lround(boxes[4 * i] * scale),
        y0 = M + (int)lround(boxes[4 * i + 1] * scale);
    int x1 = M + (int)lround(boxes[4 * i + 2] * scale) - 1;
    int y1 = M + (int)lround(boxes[4 * i + 3] * scale) - 1;
    for (int t = 0; t < 2; t++)
      rect_frame(&c, x0 + t, y0 + t, x1 - t, y1 - t, col);
    if (captions && captions[i]) {
      char text[64];
      text_fit(text, sizeof text, captions[i], pw, 1);
      int tw = text_width(text, 1),
          ty = y0 - GLYPH_H - 4 < 0 ? y0 + 2 : y0 - GLYPH_H - 4;
      rect_fill(&c, x0, ty - 1, x0 + tw + 3, ty + GLYPH_H + 2, col);
      text_draw(&c, x0 + 2, ty + 1, text, 1, white);
    }
  }
  return canvas_save(&c, path);
}

// ---- charts from metrics.jsonl ----

// Growable (x, y) points under a name.
typedef struct xy_list {
  char name[64];
  double *x, *y;
  int64_t n, cap;
} xy_list;

// A set of named series (one panel), or of panels' series.
typedef struct xy_set {
  xy_list *items;
  int n;
} xy_set;

static xy_list *set_find(xy_set *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->items[i].name, name)) return &s->items[i];
  xy_list *it = realloc(s->items, (size_t)(s->n + 1) * sizeof *it);
  if (!it) return NULL;
  s->items = it;
  xy_list *l = &s->items[s->n++];
  memset(l, 0, sizeof *l);
  snprintf(l->name, sizeof l->name, "%s", name);
  return l;
}

static bool list_add(xy_list *l, double x, double y) {
  if (l->n == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 64;
    double *nx = realloc(l->x, (size_t)cap * sizeof *nx);
    if (nx) l->x = nx;
    double *ny = nx ? realloc(l->y, (size_t)cap * sizeof *ny) : NULL;
    if (ny) l->y = ny;
    if (!nx || !ny) return false;
    l->cap = cap;
  }
  l->x[l->n] = x;
  l->y[l->n] = y;
  l->n++;
  return true;
}

static void set_free(xy_set *s) {
  for (int i = 0; i < s->n; i++) {
    free(s->items[i].x);
    free(s->items[i].y);
  }
  free(s->items);
  memset(s, 0, sizeof *s);
}

// Adds a point to series `series` of set `s`; false when out of memory.
static bool set_add(xy_set *s, const char *series, double x, double y) {
  xy_list *l = set_find(s, series);
  return l && list_add(l, x, y);
}

// Chart series pointing into a set.
static ct_plot_series *series_of(const xy_set *s) {
  ct_plot_series *out = calloc((size_t)(s->n ? s->n : 1), sizeof *out);
  for (int i = 0; out && i < s->n; i++)
    out[i] = (ct_plot_series){s->items[i].name, s->items[i].x, s->items[i].y,
                              s->items[i].n};
  return out;
}

// Whether the finite positive values of a set span more than a factor of 20.
static bool wide_positive_range(const xy_set *s) {
  double lo = INFINITY, hi = 0;
  for (int i = 0; i < s->n; i++)
    for (int64_t k = 0; k < s->items[i].n; k++) {
      double v = s->items[i].y[k];
      if (!isfinite(v)) continue;
      if (v <= 0) return false;
      lo = fmin(lo, v), hi = fmax(hi, v);
    }
  return hi > 20 * lo;
}

// A run's metrics gathered into series: training and evaluation loss, the
// learning rate, and one set per other evaluation metric (names.items[m]
// names metrics[m]), each holding one series per split. With a label (a
// comparison of runs) every series name starts with it.
typedef struct run_series {
  xy_set loss, lr, names;
  xy_set *metrics;  // names.n of them
} run_series;

static void run_series_free(run_series *r) {
  for (int m = 0; r->metrics && m < r->names.n; m++) set_free(&r->metrics[m]);
  free(r->metrics);
  set_free(&r->loss);
  set_free(&r->lr);
  set_free(&r->names);
  *r = (run_series){0};
}

// Adds the records of d to r; false when out of memory.
static bool collect(run_series *r, const ct_jsonl_data *d, const char *label) {
  bool ok = true;
  char name[sizeof r->loss.items->name];
  for (int64_t k = 0; ok && k < d->n; k++) {
    const ct_json_record *rec = &d->records[k];
    double step, v;
    if (!ct_json_record_num(rec, "step", &step)) continue;
    const char *type = ct_json_record_str(rec, "type");
    if (!type || strcmp(type, "eval")) {
      snprintf(name, sizeof name, "%s%strain", label ? label : "",
               label ? " " : "");
      if (ct_json_record_num(rec, "loss", &v))
        ok = ok && set_add(&r->loss, name, step, v);
      if (ct_json_record_num(rec, "lr", &v))
        ok = ok && set_add(&r->lr, name, step, v);
      continue;
    }
    const char *split = ct_json_record_str(rec, "split");
    snprintf(name, sizeof name, "%s%s%s", label ? label : "", label ? " " : "",
             split ? split : "eval");
    for (int f = 0; ok && f < rec->n; f++) {
      const ct_json_field *fl = &rec->fields[f];
      // Counts of what was evaluated are not drawn.
      if (fl->kind == CT_JSON_STR || !strcmp(fl->key, "step") ||
          !strcmp(fl->key, "images") || !strcmp(fl->key, "sentences"))
        continue;
      if (!strcmp(fl->key, "loss")) {
        ok = set_add(&r->loss, name, step, fl->num);
        continue;
      }
      int before = r->names.n;
      xy_list *metric = set_find(&r->names, fl->key);
      if (!metric) {
        ok = false;
        break;
      }
      int m = (int)(metric - r->names.items);
      if (r->names.n > before) {
        xy_set *grown = realloc(r->metrics, (size_t)r->names.n * sizeof *grown);
        if (!grown) {
          r->names.n = before;  // keep names and metrics the same length
          ok = false;
          break;
        }
        r->metrics = grown;
        r->metrics[m] = (xy_set){0};
      }
      ok = set_add(&r->metrics[m], name, step, fl->num);
    }
  }
  return ok;
}

// Draws `loss` (and `lr` when lr_path is not NULL) and one panel per metric:
// into separate files (loss_path, lr_path, metrics_path), or, when
// metrics_path is NULL (a comparison), stacked into loss_path, the loss
// panel only when with_loss.
static ct_status render(const run_series *r, bool with_loss,
                        const char *loss_path, const char *lr_path,
                        const char *metrics_path) {
  const int n = r->names.n > 64 ? 64 : r->names.n;  // panels at most
  ct_plot_series *ls = series_of(&r->loss), *rs = series_of(&r->lr);
  ct_plot_chart *charts = calloc((size_t)n + 1, sizeof *charts);
  ct_plot_series **ms = calloc((size_t)(n ? n : 1), sizeof *ms);
  bool ok = ls && rs && charts && ms;
  for (int m = 0; ok && m < n; m++) {
    ms[m] = series_of(&r->metrics[m]);
    ok = ms[m] != NULL;
    if (ok)
      charts[m + 1] = (ct_plot_chart){r->names.items[m].name, "step", ms[m],
                                      r->metrics[m].n, false};
  }
  ct_status st =
      ok ? CT_OK : ct_error(CT_ERR_NOMEM, "%s: out of memory", loss_path);
  charts[0] = (ct_plot_chart){"loss", "step", ls, r->loss.n,
                              wide_positive_range(&r->loss)};
  if (st == CT_OK)
    st = ct_plot_write_png(loss_path, with_loss ? charts : charts + 1,
                           metrics_path ? 1 : n + with_loss, CT_PLOT_WIDTH,
                           CT_PLOT_HEIGHT);
  if (st == CT_OK && lr_path) {
    ct_plot_chart chart = {"learning rate", "step", rs, r->lr.n, false};
    st = ct_plot_write_png(lr_path, &chart, 1, CT_PLOT_WIDTH, CT_PLOT_HEIGHT);
  }
  if (st == CT_OK && metrics_path) {
    ct_plot_chart none = {"evaluation metrics", "step", NULL, 0, false};
    st = ct_plot_write_png(metrics_path, n ? charts + 1 : &none, n ? n : 1,
                           CT_PLOT_WIDTH, CT_PLOT_HEIGHT * 3 / 4);
  }
  for (int m = 0; ms && m < n; m++) free(ms[m]);
  free(ms);
  free(charts);
  free(ls);
  free(rs);
  return st;
}

ct_status ct_plot_run_dir(const char *run_dir, char *warning,
                          size_t warning_size) {
  if (warning && warning_size) warning[0] = '\0';
  if (!run_dir) return ct_error(CT_ERR_ARG, "plot: no run directory");
  char path[4200], lr_path[4200], metrics_path[4200];
  snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
  ct_jsonl_data d;
  ct_status st = ct_jsonl_read(path, &d);
  if (st != CT_OK) return st;
  if (warning && warning_size) snprintf(warning, warning_size, "%s", d.warning);
  run_series r = {0};
  if (!collect(&r, &d, NULL))
    st = ct_error(CT_ERR_NOMEM, "%s: out of memory", path);
  snprintf(path, sizeof path, "%s/loss.png", run_dir);
  snprintf(lr_path, sizeof lr_path, "%s/lr.png", run_dir);
  snprintf(metrics_path, sizeof metrics_path, "%s/metrics.png", run_dir);
  if (st == CT_OK) st = render(&r, true, path, lr_path, metrics_path);
  run_series_free(&r);
  ct_jsonl_data_free(&d);
  return st;
}

// Keeps the metric panels named in `list` (comma-separated; "loss" for the
// loss panel, which then goes first), in the list's order. Errors name a
// metric no run has, with those they have.
static ct_status select_panels(run_series *r, const char *list,
                               bool *with_loss) {
  *with_loss = false;
  const int n = r->names.n;
  int *pick = malloc((size_t)(n ? n : 1) * sizeof *pick);
  bool *used = calloc((size_t)(n ? n : 1), sizeof *used);
  ct_status st =
      pick && used ? CT_OK : ct_error(CT_ERR_NOMEM, "plot: out of memory");
  int kept = 0;
  for (const char *p = list, *next = list; st == CT_OK && next; p = next) {
    size_t len = strcspn(p, ",");
    next = p[len] == ',' ? p + len + 1 : NULL;
    char name[sizeof r->names.items->name];
    snprintf(name, sizeof name, "%.*s", (int)len, p);
    if (!len || len >= sizeof name) {
      st = ct_error(CT_ERR_ARG, "plot: --metrics '%s': %s", list,
                    len ? "a name is too long" : "an empty name");
      break;
    }
    if (!strcmp(name, "loss")) {
      *with_loss = true;
      continue;
    }
    int m = 0;
    while (m < n && strcmp(r->names.items[m].name, name)) m++;
    if (m == n) {
      char have[512] = "loss";
      for (int i = 0; i < n; i++) {
        size_t at = strlen(have);
        snprintf(have + at, sizeof have - at, ", %s", r->names.items[i].name);
      }
      st = ct_error(CT_ERR_ARG,
                    "plot: no run has the metric '%s' (they have: %s)", name,
                    have);
    } else if (!used[m]) {
      used[m] = true;
      pick[kept++] = m;
    }
  }
  if (st == CT_OK) {
    xy_list *names = malloc((size_t)(kept ? kept : 1) * sizeof *names);
    xy_set *metrics = malloc((size_t)(kept ? kept : 1) * sizeof *metrics);
    if (!names || !metrics) {
      free(names);
      free(metrics);
      st = ct_error(CT_ERR_NOMEM, "plot: out of memory");
    } else {
      for (int i = 0; i < kept; i++) {
        names[i] = r->names.items[pick[i]];
        metrics[i] = r->metrics[pick[i]];
      }
      for (int m = 0; m < n; m++)
        if (!used[m]) {
          set_free(&r->metrics[m]);
          free(r->names.items[m].x);
          free(r->names.items[m].y);
        }
      free(r->names.items);
      free(r->metrics);
      r->names.items = names;
      r->names.n = kept;
      r->metrics = metrics;
    }
  }
  free(pick);
  free(used);
  return st;
}

ct_status ct_plot_compare_runs(const char *out_path,
                               const char *const *run_dirs, int n_runs,
                               const char *metrics, char *warning,
                               size_t warning_size) {
  if (warning && warning_size) warning[0] = '\0';
  if (!out_path || n_runs < 1)
    return ct_error(CT_ERR_ARG, "plot: no output file or no run folders");
  run_series r = {0};
  ct_status st = CT_OK;
  for (int i = 0; st == CT_OK && i < n_runs; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dirs[i]);
    ct_jsonl_data d;
    st = ct_jsonl_read(path, &d);
    if (st != CT_OK) break;
    if (d.warning[0] && warning && warning_size && !warning[0])
      snprintf(warning, warning_size, "%s", d.warning);
    // The label: the run folder's last component.
    size_t len = strlen(run_dirs[i]);
    while (len > 1 && run_dirs[i][len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && run_dirs[i][start - 1] != '/') start--;
    char label[40];
    snprintf(label, sizeof label, "%.*s", (int)(len - start),
             run_dirs[i] + start);
    if (!collect(&r, &d, label))
      st = ct_error(CT_ERR_NOMEM, "%s: out of memory", path);
    ct_jsonl_data_free(&d);
  }
  bool with_loss = true;
  if (st == CT_OK && metrics) st = select_panels(&r, metrics, &with_loss);
  if (st == CT_OK) st = render(&r, with_loss, out_path, NULL, NULL);
  run_series_free(&r);
  return st;
}
