// The training progress line.
//
// On a terminal one line is redrawn in place (\r), at most every
// `tty_interval` seconds:
//   step 120/2000  loss 3.214  lr 4.1e-04  1234 tok/s  ETA 3m12s
// Elsewhere (a log file, CI) the same text goes out as plain lines, every
// `every_steps` steps or `every_seconds` seconds, and at the first and last
// step. Step time and throughput are exponential moving averages (weight
// 0.1 per update), so the ETA follows speed changes without jumping around.
// Times come from CLOCK_MONOTONIC; the *_at variants take the time as an
// argument so tests can drive the clock.
//
//   ct_progress pr;
//   ct_progress_init(&pr, stderr, start_step, total_steps, "tok/s");
//   for (...) { ...; ct_progress_update(&pr, step, loss, lr, tokens_this_step); }
//   ct_progress_finish(&pr);
#ifndef CT_TRAIN_PROGRESS_H
#define CT_TRAIN_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ct_progress {
  FILE *out;
  bool tty;               // set by init from isatty(); may be overridden
  int64_t total_steps;    // <= 0: unknown (no "/total", no ETA)
  const char *rate_unit;  // "tok/s", "img/s"; NULL: no rate shown
  int64_t every_steps;    // plain mode: a line every N steps (default 100)
  double every_seconds;   // ... or every M seconds (default 30)
  double tty_interval;    // tty mode: redraw at most this often (default 0.1 s)
  // State.
  double t_last_update, t_last_print;
  int64_t step_last_update, last_printed_step;
  bool printed;         // any line printed yet
  bool line_open;       // tty: a live line is on screen without its newline
  double sec_per_step;  // moving averages; 0 until the first measurement
  double items_per_sec;
  char line[256];  // the last formatted status
  int line_len;
} ct_progress;

// Monotonic seconds (CLOCK_MONOTONIC).
double ct_time_now(void);

// "45s", "3m12s", "2h05m" into buf; "?" for a negative or non-finite value.
char *ct_duration_format(double seconds, char *buf, size_t size);

void ct_progress_init(ct_progress *p, FILE *out, int64_t start_step,
                      int64_t total_steps, const char *rate_unit);
void ct_progress_init_at(ct_progress *p, FILE *out, int64_t start_step,
                         int64_t total_steps, const char *rate_unit,
                         double now);

// Reports that `step` is done, with its loss and learning rate, and `items`
// (tokens, images) processed since the previous update.
void ct_progress_update(ct_progress *p, int64_t step, double loss, double lr,
                        double items);
void ct_progress_update_at(ct_progress *p, int64_t step, double loss, double lr,
                           double items, double now);

// Prints a whole line (an evaluation result, a checkpoint note) without
// garbling the live line, which is redrawn after it.
void ct_progress_log(ct_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Ends the live line with a newline (tty mode); safe to call twice.
void ct_progress_finish(ct_progress *p);

#endif
