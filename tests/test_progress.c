// The progress line: plain periodic lines, the in-place terminal line, the
// moving-average ETA and duration formatting, with a driven clock.
#include "tests/harness.h"
#include "train/progress.h"

#include <stdlib.h>
#include <string.h>

static int count_char(const char *s, char c) {
  int n = 0;
  for (; *s; s++) n += *s == c;
  return n;
}

static void test_duration(void) {
  char b[32];
  CHECK(!strcmp(ct_duration_format(45, b, sizeof b), "45s"), "%s", b);
  CHECK(!strcmp(ct_duration_format(192, b, sizeof b), "3m12s"), "%s", b);
  CHECK(!strcmp(ct_duration_format(7500, b, sizeof b), "2h05m"), "%s", b);
  CHECK(!strcmp(ct_duration_format(-1, b, sizeof b), "?"), "%s", b);
  CHECK(!strcmp(ct_duration_format(NAN, b, sizeof b), "?"), "%s", b);
  double t0 = ct_time_now(), t1 = ct_time_now();
  CHECK(t1 >= t0 && t0 > 0, "monotonic clock %f %f", t0, t1);
}

static void test_plain(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ct_progress p;
  ct_progress_init_at(&p, f, 0, 1000, "tok/s", 0.0);
  CHECK(!p.tty, "a memory stream is not a terminal");
  p.every_steps = 100;
  p.every_seconds = 1000;
  // 0.5 s and 1000 tokens per step: 2000 tok/s.
  for (int s = 1; s <= 1000; s++)
    ct_progress_update_at(&p, s, 2.5, 1e-3, 1000, 0.5 * s);
  ct_progress_finish(&p);
  fclose(f);
  // Lines at the first step, every 100 steps after it, and the last.
  CHECK(count_char(text, '\n') == 11 && count_char(text, '\r') == 0,
        "lines:\n%s", text);
  // ETA at step 101: 899 steps * 0.5 s = 449.5 s -> 7m30s.
  CHECK(
      strstr(text,
             "step 101/1000  loss 2.5  lr 1.0e-03  2000 tok/s  ETA 7m30s\n") !=
          NULL,
      "line format:\n%s", text);
  CHECK(strstr(text,
               "step 1000/1000  loss 2.5  lr 1.0e-03  2000 tok/s  ETA 0s\n") !=
            NULL,
        "last line:\n%s", text);
  free(text);

  // Time-based lines: every 10 s of 0.5 s steps, no total known.
  f = open_memstream(&text, &len);
  ct_progress_init_at(&p, f, 0, 0, NULL, 0.0);
  p.every_steps = 0;
  p.every_seconds = 10;
  for (int s = 1; s <= 100; s++)
    ct_progress_update_at(&p, s, 1.0, 1e-4, 0, 0.5 * s);
  fclose(f);
  CHECK(count_char(text, '\n') == 5, "time-based lines:\n%s", text);
  CHECK(strstr(text, "step 21  loss 1  lr 1.0e-04\n") != NULL,
        "no total, no rate:\n%s", text);
  free(text);
}

static void test_tty(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ct_progress p;
  ct_progress_init_at(&p, f, 0, 40, "img/s", 0.0);
  p.tty = true;
  p.tty_interval = 0.125;
  // 1/16 s steps with a 1/8 s redraw interval: steps 1, 3, ..., 19 are drawn.
  for (int s = 1; s <= 20; s++)
    ct_progress_update_at(&p, s, 10.25, 1e-3, 64, 0.0625 * s);
  int redraws = count_char(text, '\r');
  CHECK(redraws == 10 && count_char(text, '\n') == 0, "%d redraws", redraws);
  // A shorter line blanks the tail of the longer one before it.
  ct_progress_update_at(&p, 21, 9.5, 1e-3, 64, 2.0);
  fflush(f);
  const char *last = strrchr(text, '\r');
  CHECK(last && !strncmp(last, "\rstep 21/40  loss 9.5  lr 1.0e-03", 33) &&
            last[strlen(last) - 1] == ' ',
        "redraw '%s'", last);
  // A logged line clears the live line, prints, and redraws it.
  ct_progress_log(&p, "eval: bleu %.1f", 12.5);
  fflush(f);
  const char *logged = strstr(text, "eval: bleu 12.5\n\rstep 21/40");
  CHECK(logged != NULL, "log line:\n%s", text);
  // The last step is always drawn; finish ends the line once.
  ct_progress_update_at(&p, 40, 8.0, 1e-3, 64, 2.01);
  ct_progress_finish(&p);
  ct_progress_finish(&p);
  fclose(f);
  CHECK(len > 0 && text[len - 1] == '\n' && count_char(text, '\n') == 2,
        "finish:\n%s", text);
  CHECK(strstr(text, "\rstep 40/40  loss 8  lr 1.0e-03") != NULL,
        "last step drawn");
  free(text);
}

static void test_eta_average(void) {
  ct_progress p;
  ct_progress_init_at(&p, NULL, 0, 1000, NULL, 0.0);
  double t = 0;
  for (int s = 1; s <= 100; s++)
    ct_progress_update_at(&p, s, 1, 1, 0, t += 1.0);
  CHECK_CLOSE(p.sec_per_step, 1.0, 1e-12, "steady 1 s/step");
  // After a slowdown to 2 s/step the average moves as 2 - 0.9^k.
  for (int s = 101; s <= 150; s++)
    ct_progress_update_at(&p, s, 1, 1, 0, t += 2.0);
  CHECK_CLOSE(p.sec_per_step, 2.0 - pow(0.9, 50), 1e-9, "moving average");
}

// Steps at the ends of int64 (a damaged checkpoint's INT64_MIN) subtract
// without signed overflow (UBSan), and the line is still written.
static void test_extreme_steps(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ct_progress p;
  ct_progress_init_at(&p, f, INT64_MIN, INT64_MAX, "tok/s", 0.0);
  ct_progress_update_at(&p, INT64_MAX, 1, 1, 10, 1.0);
  ct_progress_update_at(&p, INT64_MIN + 1, 1, 1, 10, 2.0);
  fclose(f);
  CHECK(text && strstr(text, "step 9223372036854775807/") != NULL,
        "extreme steps:\n%s", text ? text : "");
  free(text);
}

int main(void) {
  test_duration();
  test_extreme_steps();
  test_plain();
  test_tty();
  test_eta_average();
  return test_summary("progress");
}
