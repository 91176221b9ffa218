// Progress line: moving-average speed and ETA, in-place or periodic output.
#include "train/progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const double ema_weight = 0.1;

double ct_time_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

char *ct_duration_format(double seconds, char *buf, size_t size) {
  if (!isfinite(seconds) || seconds < 0 || seconds > 1e9) {
    snprintf(buf, size, "?");
    return buf;
  }
  long s = lround(seconds);
  if (s < 60)
    snprintf(buf, size, "%lds", s);
  else if (s < 3600)
    snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
  else
    snprintf(buf, size, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

void ct_progress_init_at(ct_progress *p, FILE *out, int64_t start_step,
                         int64_t total_steps, const char *rate_unit,
                         double now) {
  memset(p, 0, sizeof *p);
  p->out = out;
  p->tty = out && isatty(fileno(out));
  p->total_steps = total_steps;
  p->rate_unit = rate_unit;
  p->every_steps = 100;
  p->every_seconds = 30;
  p->tty_interval = 0.1;
  p->t_last_update = p->t_last_print = now;
  p->step_last_update = start_step;
}

void ct_progress_init(ct_progress *p, FILE *out, int64_t start_step,
                      int64_t total_steps, const char *rate_unit) {
  ct_progress_init_at(p, out, start_step, total_steps, rate_unit,
                      ct_time_now());
}

// The first measurement starts the average; later ones move it by ema_weight.
static double ema(double avg, double x) {
  return avg == 0 ? x : (1 - ema_weight) * avg + ema_weight * x;
}

static void status_format(ct_progress *p, int64_t step, double loss,
                          double lr) {
  char *b = p->line;
  size_t size = sizeof p->line, n = 0;
  if (p->total_steps > 0)
    n += (size_t)snprintf(b + n, size - n, "step %lld/%lld", (long long)step,
                          (long long)p->total_steps);
  else
    n += (size_t)snprintf(b + n, size - n, "step %lld", (long long)step);
  if (n < size)
    n += (size_t)snprintf(b + n, size - n, "  loss %.4g  lr %.1e", loss, lr);
  if (p->rate_unit && p->items_per_sec > 0 && n < size)
    n += (size_t)snprintf(b + n, size - n, "  %.0f %s", p->items_per_sec,
                          p->rate_unit);
  if (p->total_steps > 0 && p->sec_per_step > 0 && n < size) {
    char eta[32];
    double left = ((double)p->total_steps - (double)step) * p->sec_per_step;
    ct_duration_format(left > 0 ? left : 0, eta, sizeof eta);
    n += (size_t)snprintf(b + n, size - n, "  ETA %s", eta);
  }
  p->line_len = (int)(n < size ? n : size - 1);
}

// Draws the live line over the previous one, blanking any leftover tail.
static void tty_draw(ct_progress *p, int previous_len) {
  fprintf(p->out, "\r%s", p->line);
  for (int i = p->line_len; i < previous_len; i++) fputc(' ', p->out);
  fflush(p->out);
  p->line_open = true;
}

void ct_progress_update_at(ct_progress *p, int64_t step, double loss, double lr,
                           double items, double now) {
  // Step differences in double: any two int64 steps (a damaged
  // checkpoint's too) subtract without overflow.
  double dt = now - p->t_last_update;
  double ds = (double)step - (double)p->step_last_update;
  if (ds > 0 && dt > 0) {
    p->sec_per_step = ema(p->sec_per_step, dt / ds);
    p->items_per_sec = ema(p->items_per_sec, items / dt);
  }
  p->t_last_update = now;
  p->step_last_update = step;
  if (!p->out) return;
  bool last = p->total_steps > 0 && step >= p->total_steps;
  if (p->tty) {
    if (!last && p->printed && now - p->t_last_print < p->tty_interval) return;
    int previous = p->line_open ? p->line_len : 0;
    status_format(p, step, loss, lr);
    tty_draw(p, previous);
  } else {
    double since =
        p->printed ? (double)step - (double)p->last_printed_step : INFINITY;
    bool due =
        !p->printed || last ||
        (p->every_steps > 0 && since >= (double)p->every_steps) ||
        (p->every_seconds > 0 && now - p->t_last_print >= p->every_seconds);
    if (!due) return;
    status_format(p, step, loss, lr);
    fprintf(p->out, "%s\n", p->line);
    fflush(p->out);
  }
  p->printed = true;
  p->t_last_print = now;
  p->last_printed_step = step;
}

void ct_progress_update(ct_progress *p, int64_t step, double loss, double lr,
                        double items) {
  ct_progress_update_at(p, step, loss, lr, items, ct_time_now());
}

void ct_progress_log(ct_progress *p, const char *fmt, ...) {
  if (!p->out) return;
  bool redraw = p->tty && p->line_open;
  if (redraw) fprintf(p->out, "\r%*s\r", p->line_len, "");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(p->out, fmt, ap);
  va_end(ap);
  fputc('\n', p->out);
  if (redraw) tty_draw(p, 0);
  fflush(p->out);
}

void ct_progress_finish(ct_progress *p) {
  if (p->out && p->tty && p->line_open) {
    fputc('\n', p->out);
    fflush(p->out);
  }
  p->line_open = false;
}
