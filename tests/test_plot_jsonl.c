// metrics.jsonl writing/reading (round trip, torn last line, malformed
// lines, truncation for resume) and PNG charts (read back with libpng:
// size, not blank, series colors present; empty, NaN and one-point series).
#include "core/error.h"
#include "data/utf8.h"
#include "tests/harness.h"
#include "tests/png_read.h"
#include "train/jsonl.h"
#include "train/plot.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static const char *tmp_path(const char *name) {
  static char path[4][160];
  static int k;
  k = (k + 1) % 4;
  snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
  return path[k];
}

static void file_put(const char *path, const char *mode, const char *text) {
  FILE *f = fopen(path, mode);
  fputs(text, f);
  fclose(f);
}

static void test_json_obj(void) {
  ct_json_obj o;
  ct_json_obj_init(&o);
  CHECK(!strcmp(ct_json_obj_text(&o), "{}"), "empty '%s'",
        ct_json_obj_text(&o));
  ct_json_obj_str(&o, "type", "train");
  ct_json_obj_int(&o, "step", 120);
  ct_json_obj_num(&o, "loss", 3.214);
  ct_json_obj_num(&o, "lr", 4.1e-4);
  ct_json_obj_num(&o, "third", 1.0 / 3);
  ct_json_obj_num(&o, "bad", NAN);
  ct_json_obj_bool(&o, "ok", true);
  ct_json_obj_str(&o, "s", "a\"b\\c\nd\te\x01 é");
  const char *want =
      "{\"type\": \"train\", \"step\": 120, \"loss\": 3.214, \"lr\": 0.00041, "
      "\"third\": 0.3333333333333333, \"bad\": null, \"ok\": true, "
      "\"s\": \"a\\\"b\\\\c\\nd\\te\\u0001 é\"}";
  CHECK(!strcmp(ct_json_obj_text(&o), want), "\n  got  %s\n  want %s",
        ct_json_obj_text(&o), want);
  ct_json_record r;
  char why[128];
  const char *line = ct_json_obj_text(&o);
  CHECK(ct_json_parse_object(line, strlen(line), &r, why, sizeof why) == CT_OK,
        "%s", why);
  double v;
  CHECK(ct_json_record_num(&r, "third", &v) && v == 1.0 / 3,
        "shortest round trip exact");
  CHECK(ct_json_record_num(&r, "bad", &v) && isnan(v), "null reads as NaN");
  CHECK(ct_json_record_num(&r, "ok", &v) && v == 1.0, "bool as number");
  CHECK(!strcmp(ct_json_record_str(&r, "s"), "a\"b\\c\nd\te\x01 é"),
        "string round trip");
  CHECK(
      !ct_json_record_num(&r, "type", &v) && !ct_json_record_str(&r, "missing"),
      "kinds");
  ct_json_record_free(&r);
  ct_json_obj_free(&o);

  const char *text =
      "{ \"u\" : \"\\u00e9\\ud83d\\ude00\\/\", "
      "\"n\":-1.5e3,\"i\":Infinity,\"m\":NaN }";
  CHECK(ct_json_parse_object(text, strlen(text), &r, why, sizeof why) == CT_OK,
        "%s", why);
  CHECK(!strcmp(ct_json_record_str(&r, "u"), "é\xf0\x9f\x98\x80/"),
        "unicode escapes '%s'", ct_json_record_str(&r, "u"));
  CHECK(ct_json_record_num(&r, "n", &v) && v == -1500, "number");
  CHECK(ct_json_record_num(&r, "i", &v) && isinf(v), "Infinity");
  ct_json_record_free(&r);

  static const struct {
    const char *text, *why;
  } bad[] = {
      {"{\"a\" 1}", "expected ':' after key 'a' (column 6)"},
      {"{\"a\": [1]}",
       "nested objects and arrays are not supported (key 'a') (column 7)"},
      {"{\"a\": 01}", "invalid number (leading zero) (column 7)"},
      {"{\"a\": 1,}", "trailing ',' before '}' (column 9)"},
      {"{\"a\": 1} x", "unexpected text after the JSON value (column 10)"},
      {"{\"a\": \"x", "unterminated string (column 7)"},
      {"[1]", "expected '{' (column 1)"},
      {"{\"a\": tru}", "invalid literal (true, false or null?) (column 7)"},
      // Also refused with Python's extensions: other spellings, bad escapes,
      // nesting at any depth.
      {"{\"a\": \"\\x\"}", "invalid escape in a string (column 8)"},
      {"{\"a\": \"\\ud800\\u12\"}",
       "invalid \\u escape (need 4 hex digits) (column 14)"},
      {"{\"a\": nan}", "invalid literal (true, false or null?) (column 7)"},
      {"{\"a\": -Inf}", "invalid number (column 7)"},
      {"{\"a\": +1}", "expected a value (column 7)"},
      {"{\"a\": 1, \"b\": {\"c\": [[]]}}",
       "nested objects and arrays are not supported (key 'b') (column 15)"},
      {"", "unexpected end of input (column 1)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ct_status st = ct_json_parse_object(bad[i].text, strlen(bad[i].text), &r,
                                        why, sizeof why);
    CHECK(st == CT_ERR_FORMAT && !strcmp(why, bad[i].why) && r.n == 0 &&
              !r.fields,
          "%s:\n  got  '%s'\n  want '%s'", bad[i].text, why, bad[i].why);
  }
}

// What the metrics reader accepted before it read through data/json.h (with
// CT_JSON_PYTHON) and must go on accepting, with the same values.
static void test_record_reading(void) {
  ct_json_record r;
  char why[128];
  double v;
  // Lone surrogates stay as their 3-byte (WTF-8) form, a pair becomes one
  // code point, a high surrogate before a non-surrogate escape stays alone,
  // and \u0000 ends the C string there.
  const char *text =
      "{\"hi\": \"a\\ud800b\", \"lo\": \"\\udc00\", \"pair\": "
      "\"\\uD83D\\uDE00\","
      " \"hi_A\": \"\\ud800\\u0041\", \"nul\": \"x\\u0000y\", \"\\u00e9\": 1}";
  CHECK(ct_json_parse_object(text, strlen(text), &r, why, sizeof why) == CT_OK,
        "%s", why);
  const char *s = ct_json_record_str(&r, "hi");
  CHECK(s && !strcmp(s,
                     "a\xED\xA0\x80"
                     "b"),
        "lone high surrogate '%s'", s ? s : "(null)");
  s = ct_json_record_str(&r, "lo");
  CHECK(s && !strcmp(s, "\xED\xB0\x80"), "lone low surrogate '%s'",
        s ? s : "(null)");
  s = ct_json_record_str(&r, "pair");
  CHECK(s && !strcmp(s, "\xF0\x9F\x98\x80"), "surrogate pair '%s'",
        s ? s : "(null)");
  s = ct_json_record_str(&r, "hi_A");
  CHECK(s && !strcmp(s,
                     "\xED\xA0\x80"
                     "A"),
        "high surrogate, then A: '%s'", s ? s : "(null)");
  s = ct_json_record_str(&r, "nul");
  CHECK(s && !strcmp(s, "x"), "\\u0000 ends the string: '%s'",
        s ? s : "(null)");
  CHECK(ct_json_record_num(&r, "\xC3\xA9", &v) && v == 1, "escaped key");
  ct_json_record_free(&r);

  // Numbers: Python's spellings, overflow to infinity, JSON's forms.
  text =
      "{\"nan\": NaN, \"inf\": Infinity, \"ninf\": -Infinity, \"big\": -1e999,"
      " \"tiny\": 1e-999, \"neg0\": -0, \"e\": 1E+2, \"f\": 2.5e-3,"
      " \"t\": true, \"no\": false, \"null\": null, \"s\": \"1\"}";
  CHECK(ct_json_parse_object(text, strlen(text), &r, why, sizeof why) == CT_OK,
        "%s", why);
  CHECK(ct_json_record_num(&r, "nan", &v) && isnan(v), "NaN");
  CHECK(ct_json_record_num(&r, "inf", &v) && v == INFINITY, "Infinity");
  CHECK(ct_json_record_num(&r, "ninf", &v) && v == -INFINITY, "-Infinity");
  CHECK(ct_json_record_num(&r, "big", &v) && v == -INFINITY, "-1e999 %g", v);
  CHECK(ct_json_record_num(&r, "tiny", &v) && v == 0, "1e-999 %g", v);
  CHECK(ct_json_record_num(&r, "neg0", &v) && v == 0 && signbit(v), "-0");
  CHECK(ct_json_record_num(&r, "e", &v) && v == 100, "1E+2");
  CHECK(ct_json_record_num(&r, "f", &v) && v == 2.5e-3, "2.5e-3");
  const ct_json_field *f = ct_json_record_get(&r, "t");
  CHECK(f && f->kind == CT_JSON_BOOL && f->num == 1, "true");
  f = ct_json_record_get(&r, "no");
  CHECK(f && f->kind == CT_JSON_BOOL && f->num == 0, "false");
  f = ct_json_record_get(&r, "null");
  CHECK(f && f->kind == CT_JSON_NULL && isnan(f->num) && !f->str, "null");
  f = ct_json_record_get(&r, "s");
  CHECK(f && f->kind == CT_JSON_STR && !ct_json_record_num(&r, "s", &v),
        "a string is no number");
  CHECK(r.n == 12 && !strcmp(r.fields[11].key, "s"), "fields in order: %d",
        r.n);
  ct_json_record_free(&r);
  // A number literal may be longer than 64 bytes (no length limit).
  text =
      "{\"long\": "
      "0."
      "100000000000000000000000000000000000000000000000000000000000000000001}";
  CHECK(
      ct_json_parse_object(text, strlen(text), &r, why, sizeof why) == CT_OK &&
          ct_json_record_num(&r, "long", &v) && v == 0.1,
      "long literal: %s", why);
  ct_json_record_free(&r);

  // Duplicate keys: both kept, the first is found.
  text = "{\"a\": 1, \"a\": 2}";
  CHECK(
      ct_json_parse_object(text, strlen(text), &r, why, sizeof why) == CT_OK &&
          r.n == 2 && ct_json_record_num(&r, "a", &v) && v == 1,
      "duplicate keys");
  ct_json_record_free(&r);

  // Every byte from 0x01 to 0x7f (control characters, quote, backslash)
  // and UTF-8 text survive the writer's escaping and the reader.
  char all[256];
  for (int i = 1; i < 128; i++) all[i - 1] = (char)i;
  strcpy(all + 127, "caf\xC3\xA9 \xF0\x9F\x98\x80");
  ct_json_obj o;
  ct_json_obj_init(&o);
  ct_json_obj_str(&o, all, all);
  const char *line = ct_json_obj_text(&o);
  CHECK(line && !strchr(line, '\n') && strstr(line, "\\u001f\\u0020") == NULL &&
            strstr(line, "\\u001f !\\\"#") != NULL,
        "escaped: %s", line);
  CHECK(ct_json_parse_object(line, strlen(line), &r, why, sizeof why) == CT_OK,
        "%s", why);
  s = ct_json_record_str(&r, all);
  CHECK(r.n == 1 && s && !strcmp(s, all), "all bytes round trip");
  ct_json_record_free(&r);
  ct_json_obj_free(&o);
  // Bytes that are not UTF-8 (a run name from a Latin-1 shell) are written
  // as U+FFFD: the line stays valid JSON.
  ct_json_obj_init(&o);
  ct_json_obj_str(&o, "run_dir", "runs/caf\xe9\xff");
  line = ct_json_obj_text(&o);
  if (!line) line = "";
  CHECK(strstr(line, "\"runs/caf\\ufffd\\ufffd\"") != NULL, "invalid UTF-8: %s",
        line);
  CHECK(ct_utf8_find_invalid(line, strlen(line)) == strlen(line),
        "the line is not UTF-8: %s", line);
  ct_json_obj_free(&o);
}

static void write_step(ct_jsonl *log, const char *type, int64_t step,
                       double loss) {
  ct_json_obj o;
  ct_json_obj_init(&o);
  ct_json_obj_str(&o, "type", type);
  ct_json_obj_int(&o, "step", step);
  ct_json_obj_num(&o, "loss", loss);
  CHECK(ct_jsonl_write(log, &o) == CT_OK, "write: %s", ct_last_error());
  ct_json_obj_free(&o);
}

static void test_jsonl_file(void) {
  const char *path = tmp_path("metrics.jsonl");
  ct_jsonl log;
  CHECK(ct_jsonl_open(&log, path) == CT_OK, "open: %s", ct_last_error());
  for (int s = 1; s <= 3; s++) write_step(&log, "train", s, 1.0 / s);
  CHECK(ct_jsonl_close(&log) == CT_OK, "close");

  ct_jsonl_data d;
  CHECK(ct_jsonl_read(path, &d) == CT_OK, "read: %s", ct_last_error());
  CHECK(d.n == 3 && d.warning[0] == '\0', "n %lld warning '%s'", (long long)d.n,
        d.warning);
  double v;
  for (int i = 0; i < d.n; i++) {
    CHECK(ct_json_record_num(&d.records[i], "loss", &v) && v == 1.0 / (i + 1),
          "loss %d", i);
    CHECK(d.records[i].line == i + 1, "line numbers");
  }
  ct_jsonl_data_free(&d);

  // A crash mid-write leaves a torn last line without a newline: skipped on read.
  file_put(path, "a", "{\"type\": \"train\", \"step\": 4, \"lo");
  CHECK(ct_jsonl_read(path, &d) == CT_OK, "read torn: %s", ct_last_error());
  char want[256];
  snprintf(want, sizeof want,
           "%s:4: skipped a truncated last line (the run was "
           "interrupted while writing it)",
           path);
  CHECK(d.n == 3 && !strcmp(d.warning, want),
        "n %lld\n  got  '%s'\n  want '%s'", (long long)d.n, d.warning, want);
  ct_jsonl_data_free(&d);
  // Appending again drops the torn bytes first, so new lines stay whole.
  CHECK(ct_jsonl_open(&log, path) == CT_OK, "reopen: %s", ct_last_error());
  CHECK(strstr(log.warning, "dropped a torn last line (32 bytes)") != NULL,
        "'%s'", log.warning);
  write_step(&log, "eval", 4, 0.2);
  ct_jsonl_close(&log);
  CHECK(ct_jsonl_read(path, &d) == CT_OK, "read repaired: %s", ct_last_error());
  CHECK(d.n == 4 && d.warning[0] == '\0', "repaired n %lld", (long long)d.n);
  CHECK(d.n == 4 && !strcmp(ct_json_record_str(&d.records[3], "type"), "eval"),
        "appended");
  ct_jsonl_data_free(&d);

  // Resume: drop what was logged after the checkpoint's step.
  CHECK(ct_jsonl_truncate_after(path, "step", 2) == CT_OK, "truncate: %s",
        ct_last_error());
  CHECK(ct_jsonl_read(path, &d) == CT_OK && d.n == 2, "kept %lld",
        (long long)d.n);
  ct_jsonl_data_free(&d);
  CHECK(ct_jsonl_truncate_after(tmp_path("absent.jsonl"), "step", 2) == CT_OK,
        "absent file");

  // A malformed line that is not the last, or a last line with its newline,
  // is an error naming file:line.
  const char *bad = tmp_path("bad.jsonl");
  file_put(bad, "w", "{\"step\": 1}\n\n{\"step\" 2}\n{\"step\": 3}\n");
  CHECK(ct_jsonl_read(bad, &d) == CT_ERR_FORMAT,
        "malformed middle line accepted");
  snprintf(want, sizeof want,
           "%s:3: malformed JSON: expected ':' after key 'step' (column 9)",
           bad);
  CHECK(!strcmp(ct_last_error(), want), "\n  got  '%s'\n  want '%s'",
        ct_last_error(), want);
  CHECK(d.n == 0 && d.records == NULL, "nothing returned on error");
  file_put(bad, "w", "{\"step\": 1}\n{\"step\": }\n");
  CHECK(ct_jsonl_read(bad, &d) == CT_ERR_FORMAT,
        "malformed complete last line accepted");
  // Torn anywhere (inside an escape, a surrogate pair, a number or a
  // literal), a last line is skipped; once its newline is there, it is an
  // error naming file:line.
  const char *full =
      "{\"type\": \"eval\", \"s\": \"\\ud83d\\ude00\\n\", \"loss\": -1.5e-3, "
      "\"ok\": true}";
  for (size_t n = 1; n < strlen(full); n++) {
    char text[256];
    snprintf(text, sizeof text, "{\"step\": 1}\n%.*s", (int)n, full);
    file_put(bad, "w", text);
    bool skipped =
        ct_jsonl_read(bad, &d) == CT_OK && d.n == 1 &&
        strstr(d.warning, ":2: skipped a truncated last line") != NULL;
    ct_jsonl_data_free(&d);
    strcat(text, "\n");
    file_put(bad, "w", text);
    snprintf(want, sizeof want, "%s:2: malformed JSON: ", bad);
    bool refused = ct_jsonl_read(bad, &d) == CT_ERR_FORMAT &&
                   strstr(ct_last_error(), want) != NULL;
    ct_jsonl_data_free(&d);
    CHECK(skipped && refused,
          "torn after %zu bytes: skipped %d, refused %d (%s)", n, skipped,
          refused, ct_last_error());
  }
  const char *missing = tmp_path("missing.jsonl");
  CHECK(ct_jsonl_read(missing, &d) == CT_ERR_IO, "missing file");
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory",
           missing);
  CHECK(!strcmp(ct_last_error(), want), "'%s'", ct_last_error());
}

// Counts pixels of one color and pixels that are not white.
static void png_count(const char *path, int want_w, int want_h, uint8_t r,
                      uint8_t g, uint8_t b, long *n_color, long *n_ink) {
  int w = 0, h = 0;
  uint8_t *px = png_load(path, &w, &h);
  *n_color = *n_ink = 0;
  CHECK(px != NULL, "%s: not a readable PNG", path);
  CHECK(w == want_w && h == want_h, "%s: size %dx%d, want %dx%d", path, w, h,
        want_w, want_h);
  if (!px) return;
  for (long i = 0; i < (long)w * h; i++) {
    const uint8_t *p = px + 3 * i;
    *n_color += p[0] == r && p[1] == g && p[2] == b;
    *n_ink += !(p[0] == 255 && p[1] == 255 && p[2] == 255);
  }
  free(px);
}

static void test_plot(void) {
  enum { N = 200 };
  double x[N], y1[N], y2[N];
  for (int i = 0; i < N; i++) {
    x[i] = 10.0 * i;
    y1[i] = 5.0 * exp(-i / 50.0) + 0.1;
    y2[i] = i % 37 == 5 ? NAN : 4.0 * exp(-i / 80.0) + 0.3;
  }
  y1[17] = INFINITY;
  ct_plot_series s[] = {{"train", x, y1, N}, {"val", x, y2, N}};
  ct_plot_chart chart = {"loss", "step", s, 2, false};
  const char *path = tmp_path("loss.png");
  CHECK(ct_plot_write_png(path, &chart, 1, 640, 360) == CT_OK, "plot: %s",
        ct_last_error());
  long blue, orange, ink;
  png_count(path, 640, 360, 31, 119, 180, &blue, &ink);
  png_count(path, 640, 360, 255, 127, 14, &orange, &ink);
  CHECK(blue > 500 && orange > 500, "series colors: %ld blue, %ld orange", blue,
        orange);
  CHECK(ink > 5000 && ink < 640 * 360 / 2, "ink %ld", ink);

  chart.log_y = true;
  CHECK(ct_plot_write_png(path, &chart, 1, 640, 360) == CT_OK, "log plot: %s",
        ct_last_error());
  png_count(path, 640, 360, 31, 119, 180, &blue, &ink);
  CHECK(blue > 500, "log plot series drawn: %ld", blue);

  // Empty, all-NaN and single-point series in stacked panels.
  double nan_y[3] = {NAN, NAN, INFINITY}, one_x = 100, one_y = 0.5;
  ct_plot_series empty = {"none", NULL, NULL, 0}, nans = {"nan", x, nan_y, 3},
                 one = {"one", &one_x, &one_y, 1};
  ct_plot_chart panels[] = {
      {"empty", "step", &empty, 1, false},
      {"all NaN", "step", &nans, 1, false},
      {"one point", "step", &one, 1, false},
      {"no series", NULL, NULL, 0, false},
  };
  path = tmp_path("panels.png");
  CHECK(ct_plot_write_png(path, panels, 4, 320, 200) == CT_OK, "panels: %s",
        ct_last_error());
  png_count(path, 320, 800, 31, 119, 180, &blue, &ink);
  CHECK(blue >= 25 && blue < 400, "one-point marker and legend: %ld", blue);
  CHECK(ink > 1000, "frames and notes drawn: %ld", ink);

  // Errors name the path; nothing is left behind.
  const char *nodir = tmp_path("no/such/dir/x.png");
  CHECK(ct_plot_write_png(nodir, &chart, 1, 640, 360) == CT_ERR_IO, "bad dir");
  CHECK(strstr(ct_last_error(), nodir) == ct_last_error(), "'%s'",
        ct_last_error());
  CHECK(ct_plot_write_png(path, &chart, 1, 10, 360) == CT_ERR_ARG, "bad size");
}

static void test_plot_run_dir(void) {
  const char *metrics = tmp_path("metrics.jsonl");
  file_put(metrics, "w", "");
  ct_jsonl log;
  CHECK(ct_jsonl_open(&log, metrics) == CT_OK, "open: %s", ct_last_error());
  for (int s = 0; s <= 300; s += 10) {
    ct_json_obj o;
    ct_json_obj_init(&o);
    ct_json_obj_str(&o, "type", "train");
    ct_json_obj_int(&o, "step", s);
    ct_json_obj_num(&o, "loss", 8.0 * exp(-s / 60.0) + 0.05);
    ct_json_obj_num(&o, "lr", s < 50 ? 1e-3 * s / 50 : 1e-3 * (300 - s) / 250);
    ct_json_obj_num(&o, "tok_s", 1234);
    CHECK(ct_jsonl_write(&log, &o) == CT_OK, "%s", ct_last_error());
    ct_json_obj_free(&o);
    if (s % 100 == 0 && s > 0) {
      ct_json_obj_init(&o);
      ct_json_obj_str(&o, "type", "eval");
      ct_json_obj_str(&o, "split", "val");
      ct_json_obj_int(&o, "step", s);
      ct_json_obj_num(&o, "loss", 8.0 * exp(-s / 60.0) + 0.3);
      ct_json_obj_num(&o, "bleu", s / 10.0);
      ct_json_obj_num(&o, "accuracy", 0.2 + s / 1000.0);
      CHECK(ct_jsonl_write(&log, &o) == CT_OK, "%s", ct_last_error());
      ct_json_obj_free(&o);
    }
  }
  ct_jsonl_close(&log);
  file_put(metrics, "a", "{\"type\": \"tra");
  char warning[512];
  CHECK(ct_plot_run_dir(dir, warning, sizeof warning) == CT_OK, "run dir: %s",
        ct_last_error());
  CHECK(strstr(warning, "skipped a truncated last line") != NULL,
        "warning '%s'", warning);
  long blue, orange, ink;
  png_count(tmp_path("loss.png"), CT_PLOT_WIDTH, CT_PLOT_HEIGHT, 31, 119, 180,
            &blue, &ink);
  png_count(tmp_path("loss.png"), CT_PLOT_WIDTH, CT_PLOT_HEIGHT, 255, 127, 14,
            &orange, &ink);
  CHECK(blue > 300 && orange > 50, "loss: train %ld, val %ld", blue, orange);
  png_count(tmp_path("lr.png"), CT_PLOT_WIDTH, CT_PLOT_HEIGHT, 31, 119, 180,
            &blue, &ink);
  CHECK(blue > 300, "lr drawn: %ld", blue);
  // Two metrics (bleu, accuracy) -> two stacked panels of 3/4 height.
  png_count(tmp_path("metrics.png"), CT_PLOT_WIDTH,
            2 * (CT_PLOT_HEIGHT * 3 / 4), 31, 119, 180, &blue, &ink);
  CHECK(blue > 100, "metrics drawn: %ld", blue);

  // A run directory without metrics.jsonl: an error naming the file.
  char want[256];
  snprintf(want, sizeof want,
           "%s/no_run/metrics.jsonl: cannot open: No such file or directory",
           dir);
  CHECK(
      ct_plot_run_dir(tmp_path("no_run"), warning, sizeof warning) == CT_ERR_IO,
      "no run");
  CHECK(!strcmp(ct_last_error(), want), "'%s'", ct_last_error());
}

// Two runs in one PNG: loss and the metrics stacked, a series per run.
static void test_plot_compare(void) {
  const char *runs[2] = {tmp_path("cmp_a"), NULL};
  char b[600];
  snprintf(b, sizeof b, "%s", tmp_path("cmp_b/"));  // a trailing slash too
  runs[1] = b;
  char a[600];
  snprintf(a, sizeof a, "%s", runs[0]);
  runs[0] = a;
  for (int r = 0; r < 2; r++) {
    char cmd[700], path[700];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", runs[r]);
    CHECK(system(cmd) == 0, "mkdir");
    snprintf(path, sizeof path, "%s/metrics.jsonl", runs[r]);
    FILE *f = fopen(path, "w");
    for (int s = 10; f && s <= 300; s += 10) {
      fprintf(f, "{\"step\": %d, \"loss\": %g}\n", s,
              (r + 1) * 4.0 * exp(-s / 80.0) + 0.1);
      if (s % 100 == 0)
        fprintf(f,
                "{\"step\": %d, \"type\": \"eval\", \"split\": \"val\", "
                "\"loss\": %g, \"accuracy\": %g, \"images\": 500}\n",
                s, 2.0 / (r + 1), 0.1 * s / 100 + 0.2 * r);
    }
    if (f) fclose(f);
  }
  char warning[512];
  const char *out = tmp_path("compare.png");
  CHECK(ct_plot_compare_runs(out, runs, 2, NULL, warning, sizeof warning) ==
            CT_OK,
        "compare: %s", ct_last_error());
  // loss and accuracy ("images" is a count, not drawn): two full-height
  // charts. Series: cmp_a train (blue), cmp_a val (orange), cmp_b train
  // (green), cmp_b val (red).
  long blue, green, ink;
  png_count(out, CT_PLOT_WIDTH, 2 * CT_PLOT_HEIGHT, 31, 119, 180, &blue, &ink);
  png_count(out, CT_PLOT_WIDTH, 2 * CT_PLOT_HEIGHT, 44, 160, 44, &green, &ink);
  CHECK(blue > 300 && green > 300, "compare: run a %ld, run b %ld", blue,
        green);
  // --metrics accuracy: that panel alone, one chart high, the two runs'
  // val series blue and orange; a name no run has is refused, with the ones
  // they have.
  long orange;
  CHECK(ct_plot_compare_runs(out, runs, 2, "accuracy", warning,
                             sizeof warning) == CT_OK,
        "compare accuracy: %s", ct_last_error());
  png_count(out, CT_PLOT_WIDTH, CT_PLOT_HEIGHT, 31, 119, 180, &blue, &ink);
  png_count(out, CT_PLOT_WIDTH, CT_PLOT_HEIGHT, 255, 127, 14, &orange, &ink);
  CHECK(blue > 100 && orange > 100, "accuracy only: run a %ld, run b %ld", blue,
        orange);
  CHECK(ct_plot_compare_runs(out, runs, 2, "loss,accuracy,loss", warning,
                             sizeof warning) == CT_OK,
        "compare loss,accuracy: %s", ct_last_error());
  png_count(out, CT_PLOT_WIDTH, 2 * CT_PLOT_HEIGHT, 44, 160, 44, &green, &ink);
  CHECK(green > 300, "loss and accuracy: run b train %ld", green);
  CHECK(ct_plot_compare_runs(out, runs, 2, "accuracy,bleu", warning,
                             sizeof warning) == CT_ERR_ARG,
        "an unknown metric");
  CHECK(strstr(ct_last_error(), "'bleu' (they have: loss, accuracy)") != NULL,
        "'%s'", ct_last_error());
  CHECK(ct_plot_compare_runs(out, runs, 2, "accuracy,", warning,
                             sizeof warning) == CT_ERR_ARG,
        "an empty name");
  // A missing run: the error names its metrics file.
  const char *bad[2] = {runs[0], tmp_path("cmp_missing")};
  CHECK(ct_plot_compare_runs(out, bad, 2, NULL, warning, sizeof warning) ==
            CT_ERR_IO,
        "missing run");
  CHECK(strstr(ct_last_error(), "cmp_missing/metrics.jsonl") != NULL, "'%s'",
        ct_last_error());
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/ct_test_plot_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  test_json_obj();
  test_record_reading();
  test_jsonl_file();
  test_plot();
  test_plot_run_dir();
  test_plot_compare();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (getenv("CT_KEEP_TMP"))
    printf("kept %s\n", dir);
  else if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return test_summary("plot_jsonl");
}
