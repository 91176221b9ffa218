// Fuzz target: config files and --set overrides (train/config.h with the
// training schema). The input is read as a config file; each of its lines
// is also applied as a --set argument to a fresh config. Whatever parses
// must print (ct_config_to_string) to text that parses back to an equal
// config, and must pass or fail ct_run_settings_read and the task's
// recipe defaults cleanly.
#include "tests/fuzz/fuzz_util.h"
#include "train/run.h"
#include "train/schema.h"

static void round_trip(const ct_config *cfg) {
  char *text = ct_config_to_string(cfg);
  if (!text) return;
  ct_config *back = ct_train_config_new();
  if (ct_config_parse(back, text, "resolved") != CT_OK ||
      ct_config_diff(cfg, back, NULL, 0) != -1) {
    fprintf(stderr, "resolved config does not read back: %s\n%s\n",
            ct_last_error(), text);
    abort();
  }
  ct_config_free(back);
  free(text);
}

static void check(ct_config *cfg) {
  round_trip(cfg);
  ct_run_settings run;
  if (ct_task_apply_defaults(cfg) == CT_OK) {
    ct_run_settings_read(cfg, &run);
    round_trip(cfg);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  ct_config *cfg = ct_train_config_new();
  if (ct_config_parse(cfg, text, "fuzz.ini") == CT_OK) check(cfg);
  ct_config_free(cfg);
  // Each line as a --set argument.
  cfg = ct_train_config_new();
  for (char *line = text, *end; line; line = end ? end + 1 : NULL) {
    end = strchr(line, '\n');
    if (end) *end = '\0';
    ct_config_set(cfg, line);
  }
  check(cfg);
  ct_config_free(cfg);
  // The file reader too (size bound, NUL bytes).
  cfg = ct_train_config_new();
  ct_config_load(cfg, fuzz_write("fuzz.ini", data, size));
  ct_config_free(cfg);
  free(text);
  return 0;
}
