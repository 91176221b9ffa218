// Config parsing, checking, overrides, resolved-config round trip and diff.
// Every error kind is checked with its exact "file:line: ... key" message.
#include "core/error.h"
#include "tests/harness.h"
#include "train/config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const ct_config_key schema[] = {
    {"run", "name", CT_CONFIG_STRING, "default run", NULL,
     "run directory name under runs/"},
    {"run", "seed", CT_CONFIG_INT, "1", NULL, "random seed"},
    {"data", "path", CT_CONFIG_STRING, "", NULL, "dataset folder"},
    {"model", "d_model", CT_CONFIG_INT, "256", "1..4096", "model width"},
    {"optim", "name", CT_CONFIG_ENUM, "adamw", "adam|adamw|sgd", "optimizer"},
    {"optim", "learning_rate", CT_CONFIG_FLOAT, "1e-3", NULL,
     "peak learning rate"},
    {"schedule", "warmup", CT_CONFIG_INT, "100", NULL, "warmup steps"},
    {"train", "steps", CT_CONFIG_INT, "1000", NULL, "optimizer steps"},
    {"train", "amp", CT_CONFIG_BOOL, "false", NULL, NULL},
};
enum { N_KEYS = sizeof schema / sizeof schema[0] };

static char dir[64];

static const char *write_file(const char *name, const char *text) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

// Loads `text` as a fresh file and checks the error message equals
// "<path>:<rest>".
static void check_load_error(const char *text, const char *rest) {
  const char *path = write_file("x.ini", text);
  ct_config *cfg = ct_config_new(schema, N_KEYS);
  ct_status st = ct_config_load(cfg, path);
  char want[512];
  snprintf(want, sizeof want, "%s:%s", path, rest);
  CHECK(st == CT_ERR_FORMAT, "status %d for %s", st, rest);
  CHECK(!strcmp(ct_last_error(), want), "\n  got  '%s'\n  want '%s'",
        ct_last_error(), want);
  ct_config_free(cfg);
}

static void check_set_error(const char *arg, const char *want) {
  ct_config *cfg = ct_config_new(schema, N_KEYS);
  ct_status st = ct_config_set(cfg, arg);
  CHECK(st == CT_ERR_ARG, "status %d for %s", st, arg);
  CHECK(!strcmp(ct_last_error(), want), "\n  got  '%s'\n  want '%s'",
        ct_last_error(), want);
  ct_config_free(cfg);
}

static void test_defaults(void) {
  ct_config *cfg = ct_config_new(schema, N_KEYS);
  CHECK(cfg != NULL, "new: %s", ct_last_error());
  CHECK(ct_config_int(cfg, "train", "steps") == 1000, "steps default");
  CHECK(ct_config_float(cfg, "optim", "learning_rate") == 1e-3, "lr default");
  CHECK(!strcmp(ct_config_str(cfg, "optim", "name"), "adamw"), "enum default");
  CHECK(ct_config_enum(cfg, "optim", "name") == 1, "enum index");
  CHECK(ct_config_bool(cfg, "train", "amp") == false, "bool default");
  CHECK(!strcmp(ct_config_origin(cfg, "train", "steps"), "default"), "origin");
  ct_clear_error();
  CHECK(ct_config_int(cfg, "train", "stepz") == 0 &&
            ct_last_status() == CT_ERR_ARG,
        "unknown getter key: %s", ct_last_error());
  CHECK(!strcmp(ct_last_error(),
                "ct_config_int: [train] stepz is not in the config schema"),
        "'%s'", ct_last_error());
  CHECK(ct_config_float(cfg, "train", "steps") == 0.0 &&
            ct_last_status() == CT_ERR_ARG,
        "wrong-type getter: %s", ct_last_error());
  ct_config_free(cfg);

  static const ct_config_key bad[] = {
      {"optim", "name", CT_CONFIG_ENUM, "adagrad", "adam|sgd", "optimizer"},
  };
  CHECK(ct_config_new(bad, 1) == NULL, "bad default accepted");
  CHECK(!strcmp(ct_last_error(),
                "config schema default: [optim] name = 'adagrad': "
                "expected one of adam, sgd"),
        "'%s'", ct_last_error());
  static const ct_config_key twice[] = {
      {"a", "b", CT_CONFIG_INT, "1", NULL, ""},
      {"a", "b", CT_CONFIG_INT, "2", NULL, ""},
  };
  CHECK(ct_config_new(twice, 2) == NULL, "duplicate schema key accepted");
}

static void test_valid_file(void) {
  const char *path = write_file(
      "ok.ini",
      "\xEF\xBB\xBF# a comment\n"
      "; another comment\n"
      "\n"
      "[run]\n"
      "  name = \"wmt \\\"small\\\" # 1\"   # quoted, with an inline comment\n"
      "seed=42\r\n"
      "[optim]   ; section comment\n"
      "name = sgd\n"
      "learning_rate = 3e-4 ; peak\n"
      "[train]\n"
      "amp = Yes\n"
      "[data]\n"
      "path = data/wmt#1\n");
  ct_config *cfg = ct_config_new(schema, N_KEYS);
  CHECK(ct_config_load(cfg, path) == CT_OK, "load: %s", ct_last_error());
  CHECK(!strcmp(ct_config_str(cfg, "run", "name"), "wmt \"small\" # 1"),
        "name '%s'", ct_config_str(cfg, "run", "name"));
  CHECK(ct_config_int(cfg, "run", "seed") == 42, "seed");
  CHECK(ct_config_enum(cfg, "optim", "name") == 2, "enum");
  CHECK(ct_config_float(cfg, "optim", "learning_rate") == 3e-4, "lr");
  CHECK(ct_config_bool(cfg, "train", "amp"), "bool");
  CHECK(!strcmp(ct_config_text(cfg, "train", "amp"), "true"),
        "bool canonical text");
  CHECK(!strcmp(ct_config_str(cfg, "data", "path"), "data/wmt#1"),
        "'#' inside a word '%s'", ct_config_str(cfg, "data", "path"));
  char origin[160];
  snprintf(origin, sizeof origin, "%s:6", path);
  CHECK(!strcmp(ct_config_origin(cfg, "run", "seed"), origin), "origin '%s'",
        ct_config_origin(cfg, "run", "seed"));
  CHECK(ct_config_int(cfg, "train", "steps") == 1000,
        "untouched key keeps default");

  // Overrides apply after the file, with the same checks.
  CHECK(ct_config_set(cfg, "train.steps=50") == CT_OK, "set: %s",
        ct_last_error());
  CHECK(ct_config_set(cfg, " optim.learning_rate = 0.01 ") == CT_OK, "set: %s",
        ct_last_error());
  CHECK(ct_config_set(cfg, "run.name=a b") == CT_OK, "set: %s",
        ct_last_error());
  CHECK(ct_config_int(cfg, "train", "steps") == 50, "override steps");
  CHECK(ct_config_float(cfg, "optim", "learning_rate") == 0.01, "override lr");
  CHECK(!strcmp(ct_config_str(cfg, "run", "name"), "a b"), "override string");
  CHECK(!strcmp(ct_config_origin(cfg, "train", "steps"), "--set"),
        "override origin");
  ct_config_free(cfg);
}

static void test_file_errors(void) {
  char want[256];
  ct_config *cfg = ct_config_new(schema, N_KEYS);
  snprintf(want, sizeof want,
           "%s/missing.ini: cannot open: No such file or directory", dir);
  char missing[128];
  snprintf(missing, sizeof missing, "%s/missing.ini", dir);
  CHECK(ct_config_load(cfg, missing) == CT_ERR_IO, "missing file status");
  CHECK(!strcmp(ct_last_error(), want), "'%s'", ct_last_error());
  ct_config_free(cfg);

  check_load_error("[optim]\n\n\n\n\n\n\n\n\n\n\nlerning_rate = 1e-3\n",
                   "12: unknown key 'lerning_rate' in [optim] (did you mean "
                   "'learning_rate'?)");
  check_load_error(
      "[train]\nwarmup = 10\n",
      "2: unknown key 'warmup' in [train] (it belongs in [schedule])");
  check_load_error("[train]\nbanana = 10\n",
                   "2: unknown key 'banana' in [train]");
  check_load_error("[optimm]\nname = adam\n",
                   "1: unknown section [optimm] (did you mean [optim]?)");
  check_load_error("# c\n[zzz]\n", "2: unknown section [zzz]");
  check_load_error(
      "[run]\n[data]\n[model]\n[optim]\n[schedule]\n[train]\nsteps = ten\n",
      "7: [train] steps = 'ten': expected an integer");
  check_load_error("[train]\nsteps = 1.5\n",
                   "2: [train] steps = '1.5': expected an integer");
  check_load_error(
      "[train]\nsteps = 99999999999999999999\n",
      "2: [train] steps = '99999999999999999999': must be in 0..2147483647");
  // Integers are checked against their key's range as they are read: a
  // value past int is never cut to fit (4294967298 used to build 2 layers).
  check_load_error("[model]\nd_model = 4294967298\n",
                   "2: [model] d_model = '4294967298': must be in 1..4096");
  check_load_error("[model]\nd_model = 0\n",
                   "2: [model] d_model = '0': must be in 1..4096");
  check_load_error("[run]\nseed = -1\n",
                   "2: [run] seed = '-1': must be in 0..2147483647");
  // Text is UTF-8 without control characters: nothing that would reach a
  // terminal or a JSON line raw.
  check_load_error("[run]\nname = caf\xe9\n",
                   "2: invalid UTF-8 byte 0xe9 at column 11");
  check_load_error("[run]\nname = red\x1b[31m\n",
                   "2: control character U+001B at column 11");
  check_load_error("[optim]\nlearning_rate = fast\n",
                   "2: [optim] learning_rate = 'fast': expected a number");
  check_load_error(
      "[optim]\nlearning_rate = inf\n",
      "2: [optim] learning_rate = 'inf': expected a finite number");
  check_load_error("[train]\namp = maybe\n",
                   "2: [train] amp = 'maybe': expected true or false");
  check_load_error(
      "[optim]\nname = adagrad\n",
      "2: [optim] name = 'adagrad': expected one of adam, adamw, sgd");
  check_load_error("[train]\nsteps = 10\n[model]\n[train]\nsteps = 20\n",
                   "5: duplicate key 'steps' in [train] (first set on line 2)");
  check_load_error(
      "# header\nsteps = 10\n[train]\n",
      "2: key 'steps' outside any section (add a [section] line above it)");
  check_load_error("[train]\nsteps 10\n",
                   "2: expected 'key = value' or '[section]', got 'steps 10'");
  check_load_error("[train\n",
                   "1: malformed section header '[train' (expected [name])");
  check_load_error("[run]\nname = \"abc\n",
                   "2: [run] name: unterminated quoted string");
  check_load_error("[run]\nname = \"abc\" def\n",
                   "2: [run] name: unexpected text after the closing quote");
  check_load_error("[train]\n= 3\n", "2: missing key before '='");
}

static void test_override_errors(void) {
  check_set_error(
      "optim.lerning_rate=1e-3",
      "--set optim.lerning_rate=1e-3: unknown key 'lerning_rate' in [optim] "
      "(did you mean 'learning_rate'?)");
  check_set_error(
      "train.steps=ten",
      "--set train.steps=ten: [train] steps = 'ten': expected an integer");
  check_set_error("optim.name=rmsprop",
                  "--set optim.name=rmsprop: [optim] name = 'rmsprop': "
                  "expected one of adam, adamw, sgd");
  check_set_error(
      "trian.steps=1",
      "--set trian.steps=1: unknown section [trian] (did you mean [train]?)");
  check_set_error("steps=1", "--set steps=1: expected section.key=value");
  check_set_error("model.d_model=99999",
                  "--set model.d_model=99999: [model] d_model = '99999': "
                  "must be in 1..4096");
  check_set_error("run.name=\xff",
                  "--set: invalid UTF-8 byte 0xff at byte 10 of the argument");
  check_set_error("train.steps",
                  "--set train.steps: expected section.key=value");
}

// Lines end in "\n", "\r\n" or a bare "\r": a file of old Mac line endings
// that starts with a comment is not one long comment.
static void test_line_endings(void) {
  const char *texts[] = {"# c\r[train]\rsteps = 7\r[run]\rseed = 3\r",
                         "# c\r\n[train]\r\nsteps = 7\r\n[run]\r\nseed = 3",
                         "# c\n[train]\nsteps = 7\n[run]\nseed = 3\n"};
  for (int i = 0; i < 3; i++) {
    ct_config *cfg = ct_config_new(schema, N_KEYS);
    const char *path = write_file("endings.ini", texts[i]);
    CHECK(ct_config_load(cfg, path) == CT_OK, "endings %d: %s", i,
          ct_last_error());
    CHECK(ct_config_int(cfg, "train", "steps") == 7 &&
              ct_config_int(cfg, "run", "seed") == 3,
          "endings %d: steps %lld seed %lld", i,
          (long long)ct_config_int(cfg, "train", "steps"),
          (long long)ct_config_int(cfg, "run", "seed"));
    char origin[160];
    snprintf(origin, sizeof origin, "%s:5", path);
    CHECK(!strcmp(ct_config_origin(cfg, "run", "seed"), origin),
          "endings %d: line numbers: '%s'", i,
          ct_config_origin(cfg, "run", "seed"));
    ct_config_free(cfg);
  }
}

// A schema's range must read as "min..max".
static void test_schema_ranges(void) {
  static const ct_config_key bad[] = {
      {"a", "b", CT_CONFIG_INT, "1", "1-5", ""},
  };
  CHECK(ct_config_new(bad, 1) == NULL && strstr(ct_last_error(), "'1-5'"),
        "malformed range accepted: %s", ct_last_error());
  static const ct_config_key outside[] = {
      {"a", "b", CT_CONFIG_INT, "9", "1..5", ""},
  };
  CHECK(ct_config_new(outside, 1) == NULL &&
            strstr(ct_last_error(), "must be in 1..5"),
        "default outside its range accepted: %s", ct_last_error());
}

static void test_round_trip(void) {
  ct_config *a = ct_config_new(schema, N_KEYS);
  CHECK(ct_config_set(a, "run.name= lead and trail # x ") == CT_OK, "%s",
        ct_last_error());
  CHECK(ct_config_set(a, "data.path=C:\\data \"q\"") == CT_OK, "%s",
        ct_last_error());
  CHECK(ct_config_set(a, "optim.learning_rate=0.0003") == CT_OK, "%s",
        ct_last_error());
  CHECK(ct_config_set(a, "train.amp=on") == CT_OK, "%s", ct_last_error());
  char path[128];
  snprintf(path, sizeof path, "%s/resolved.ini", dir);
  CHECK(ct_config_write(a, path) == CT_OK, "write: %s", ct_last_error());
  ct_config *b = ct_config_new(schema, N_KEYS);
  CHECK(ct_config_load(b, path) == CT_OK, "reload: %s", ct_last_error());
  CHECK(ct_config_diff(a, b, NULL, 0) == -1, "round trip differs: %s",
        ct_last_error());
  CHECK(!strcmp(ct_config_str(b, "run", "name"), "lead and trail # x"),
        "name '%s'", ct_config_str(b, "run", "name"));
  CHECK(!strcmp(ct_config_str(b, "data", "path"), "C:\\data \"q\""),
        "path '%s'", ct_config_str(b, "data", "path"));
  char *ta = ct_config_to_string(a), *tb = ct_config_to_string(b);
  CHECK(ta && tb && !strcmp(ta, tb), "resolved text differs:\n%s\n---\n%s", ta,
        tb);
  CHECK(
      strstr(
          ta,
          "[optim]\n# optimizer (one of: adam, adamw, sgd)\nname = adamw\n") !=
          NULL,
      "doc comments and grouping:\n%s", ta);
  CHECK(strstr(ta, "# model width (1..4096)\nd_model = 256\n") != NULL,
        "integer ranges in the comments:\n%s", ta);
  CHECK(strstr(ta,
               "[data]\n# dataset folder\npath = \"C:\\\\data \\\"q\\\"\"\n") !=
            NULL,
        "quoting:\n%s", ta);
  // The same text parses from memory too (checkpoints keep it).
  ct_config *c = ct_config_new(schema, N_KEYS);
  CHECK(ct_config_parse(c, ta, "checkpoint config") == CT_OK, "parse: %s",
        ct_last_error());
  CHECK(ct_config_diff(a, c, NULL, 0) == -1, "parsed text differs: %s",
        ct_last_error());
  free(ta);
  free(tb);

  // Diff on a key list: typed comparison and the first differing key.
  CHECK(ct_config_set(c, "optim.learning_rate=3e-4") == CT_OK, "%s",
        ct_last_error());
  CHECK(ct_config_diff(a, c, NULL, 0) == -1, "3e-4 == 0.0003");
  CHECK(ct_config_set(c, "model.d_model=512") == CT_OK, "%s", ct_last_error());
  CHECK(ct_config_set(c, "train.steps=7") == CT_OK, "%s", ct_last_error());
  const char *keys[] = {"run.seed", "model.d_model", "train.steps"};
  CHECK(ct_config_diff(a, c, keys, 3) == 1, "first diff index");
  CHECK(!strcmp(ct_last_error(), "[model] d_model differs: 256 vs 512"), "'%s'",
        ct_last_error());
  const char *same[] = {"run.seed", "optim.name"};
  CHECK(ct_config_diff(a, c, same, 2) == -1, "equal subset");
  const char *bad[] = {"model.width"};
  CHECK(ct_config_diff(a, c, bad, 1) == -2, "bad key");

  // A failed write names the path and leaves the old file alone.
  char nodir[160];
  snprintf(nodir, sizeof nodir, "%s/no/such/dir.ini", dir);
  CHECK(ct_config_write(a, nodir) == CT_ERR_IO, "write into missing dir");
  CHECK(strstr(ct_last_error(), nodir) != NULL, "'%s'", ct_last_error());
  ct_config_free(a);
  ct_config_free(b);
  ct_config_free(c);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/ct_test_config_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  test_defaults();
  test_valid_file();
  test_file_errors();
  test_override_errors();
  test_line_endings();
  test_schema_ranges();
  test_round_trip();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return test_summary("config");
}
