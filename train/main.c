// The ctrain program: parses the command line and runs a command.
//
//   ctrain train CONFIG [--set section.key=value]... [--resume PATH|auto]
//                [--threads N] [--reset-optimizer]
//   ctrain eval CKPT [--split val|test] [--beam N] [--threads N]
//   ctrain translate CKPT [--beam N] [TEXT]...   (stdin lines when no TEXT)
//   ctrain caption CKPT IMAGE.png... [--beam N] [--attention OUT.png]
//   ctrain zeroshot CKPT --labels "a,b,..." [--template T]... IMAGE.png...
//                   [--top N] [--out PANELS.png]
//   ctrain inspect CKPT
//   ctrain export CKPT [OUT.safetensors] [--vocab DIR]
//   ctrain plot RUN_DIR | ctrain plot RUN_DIR... --out FILE.png [--metrics L]
//   ctrain toy translation --out DIR [--task copy|reverse|grammar] [--seed N]
//              [--train N] [--val N] [--test N] [--force]
//
// Usage errors exit 2, runtime errors 1, each with "ctrain: error: ..." on
// stderr. The last stdout line of train and eval is one JSON object.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/gemm_bf16.h"
#include "core/threads.h"
#include "data/toy_translation.h"
#include "train/checkpoint.h"
#include "train/dist.h"
#include "train/jsonl.h"
#include "train/params_digest.h"
#include "train/plot.h"
#include "train/run.h"
#include "train/safetensors.h"
#include "train/trainer.h"
#include "train/translation.h"
#include "train/classification.h"
#include "train/analyze.h"
#include "train/captioning.h"
#include "train/contrastive.h"
#include "train/detection.h"
#include "data/detection.h"
#include "data/idx.h"
#include "data/toy_captions.h"
#include "data/toy_images.h"
#include "data/text.h"

#ifndef CT_VERSION
#define CT_VERSION "unknown"
#endif

static const char *const usage =
    "usage: ctrain COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  train CONFIG [--set section.key=value]... [--resume PATH|auto] "
    "[--threads N]\n"
    "        [--reset-optimizer]\n"
    "                             train a model described by a config file\n"
    "  eval CKPT [--split val|test] [--beam N] [--threads N]\n"
    "                             evaluate a checkpoint (last line: JSON "
    "metrics)\n"
    "  eval CKPT --zeroshot DIR [--labels \"a,b,...\"] [--template T]...\n"
    "                             contrastive: zero-shot accuracy on a "
    "labelled set\n"
    "  translate CKPT [--beam N] [--attention OUT.png] [TEXT]...\n"
    "                             translate TEXT, or stdin lines when none;\n"
    "                             RNN alignment of one TEXT\n"
    "  classify CKPT IMAGE.png... [--top N] [--attention OUT.png] [--threads "
    "N]\n"
    "                             top classes of images; ViT/DeiT/Swin/CvT\n"
    "                             attention maps\n"
    "  analyze CKPT --out DIR [--images N] [--split val|test] [--threads N]\n"
    "                             attention distances, position embeddings "
    "and\n"
    "                             rollouts of a ViT/DeiT/Swin/CvT (PNG, "
    "CSV, JSON)\n"
    "  detect CKPT IMAGE.png... [--out BOXES.png] [--threshold P] [--threads "
    "N]\n"
    "                             objects found in images, drawn on the first\n"
    "  caption CKPT IMAGE.png... [--beam N] [--attention OUT.png] [--threads "
    "N]\n"
    "                             a caption per image; per-word attention of "
    "the first\n"
    "  zeroshot CKPT --labels \"a,b,...\" [--template T]... IMAGE.png... "
    "[--top N]\n"
    "      [--out PANELS.png]\n"
    "                             contrastive: classes of images from their "
    "names\n"
    "  inspect CKPT               config, step, parameters, optimizer state\n"
    "  export CKPT [OUT.safetensors] [--vocab DIR]\n"
    "                             the parameters for PyTorch; the\n"
    "                             vocabularies and BPE merges (merges.txt)\n"
    "  forward CKPT IN.safetensors OUT.safetensors [--weights W.safetensors\n"
    "      [--allow-unexpected]]  the model's logits for given inputs; "
    "--weights\n"
    "                             replaces parameters by name, "
    "--allow-unexpected\n"
    "                             skips the file's tensors the model lacks\n"
    "  plot RUN_DIR               PNG charts of a run's metrics\n"
    "  plot RUN_DIR... --out FILE.png [--metrics loss,NAME,...]\n"
    "                             several runs' metrics in one chart\n"
    "  toy translation --out DIR [--task copy|reverse|grammar] [--seed N]\n"
    "      [--train N] [--val N] [--test N] [--force]\n"
    "                             write a built-in toy corpus as files\n"
    "  toy images --out DIR [--format png|cifar10|idx] [--size N] [--classes "
    "N]\n"
    "      [--variant shapes|textured] [--train N] [--test N] [--seed N] "
    "[--force]\n"
    "                             write the generated shape images as files\n"
    "  toy detection --out DIR [--size N] [--classes N] [--train N] [--val N]\n"
    "      [--min-size N] [--max-size N] [--objects N] [--seed N] [--force]\n"
    "                             write the generated detection set (COCO)\n"
    "  toy captions --out DIR [--items shapes|fmnist] [--size N] [--grid N]\n"
    "      [--count N] [--val N] [--test N] [--seed N] [--force]\n"
    "                             write the generated captioning set\n"
    "  info                       version, threads, gemm kernel\n"
    "  help                       this text\n";

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "ctrain: error: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(run 'ctrain help' for usage)\n");
  return 2;
}

static int runtime_error(void) {
  fprintf(stderr, "ctrain: error: %s\n", ct_last_error());
  return 1;
}

// Parses a positive integer option value; -1 when it is not one.
static long positive(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  return (*s && *end == '\0' && v >= 1 && v <= 1000000000L) ? v : -1;
}

// Options that take a value: returns the value or NULL (usage error printed).
static const char *option_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    usage_error("%s needs a value", argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

// Thread counts: 1..4096, as CT_THREADS (libgomp overflows its stack on
// hundreds of thousands of threads).
static long threads_value(const char *s) {
  long n = positive(s);
  return n <= 4096 ? n : -1;
}

// Parses a --threads value into *n; a usage error (2) when it is not one.
static int threads_option(const char *value, int *n) {
  long v = threads_value(value);
  if (v < 0)
    return usage_error("--threads wants an integer in 1..4096, not '%s'",
                       value);
  *n = (int)v;
  return 0;
}

// Parses the value of the --top at argv[*i] into *top (1..1000); 2 on a
// usage error (printed).
static int top_option(int argc, char **argv, int *i, int *top) {
  const char *v = option_value(argc, argv, i);
  if (!v) return 2;
  long n = positive(v);
  if (n < 1 || n > 1000)
    return usage_error("--top wants an integer in 1..1000, not '%s'", v);
  *top = (int)n;
  return 0;
}

static int cmd_train(int argc, char **argv) {
  if (argc < 3) return usage_error("%s", "train needs a CONFIG file");
  const char **sets = calloc((size_t)argc, sizeof *sets);
  ct_train_args a = {.config_path = NULL, .sets = sets};
  int rc = 0;
  for (int i = 2; i < argc && !rc; i++) {
    const char *v;
    if (!strcmp(argv[i], "--set")) {
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else
        sets[a.n_sets++] = v;
    } else if (!strcmp(argv[i], "--resume")) {
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else
        a.resume = v;
    } else if (!strcmp(argv[i], "--threads")) {
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else
        rc = threads_option(v, &a.threads);
    } else if (!strcmp(argv[i], "--reset-optimizer")) {
      a.reset_optimizer = true;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      rc = usage_error("train: unknown option '%s'", argv[i]);
    } else if (a.config_path) {
      rc = usage_error("train: one CONFIG only (got another: '%s')", argv[i]);
    } else {
      a.config_path = argv[i];
    }
  }
  if (!rc && !a.config_path)
    rc = usage_error("%s", "train needs a CONFIG file");
  if (!rc && a.reset_optimizer && !a.resume)
    rc = usage_error("%s", "--reset-optimizer goes with --resume");
  if (!rc) rc = ct_train_run(&a);
  free(sets);
  return rc;
}

// What the commands that open a checkpoint take besides their own options:
// --threads N anywhere, CKPT, then (translate, classify, detect) more
// positionals: texts or images.
typedef struct model_args {
  const char *ckpt;
  const char **rest;  // argc slots for the positionals after CKPT; NULL when
                      // the command takes none
  int n_rest;
} model_args;

// Takes argv[*i], which is none of the command's own options: --threads N,
// an unknown option, CKPT or one more positional. 0, or 2 after a usage
// error.
static int model_arg(model_args *a, int argc, char **argv, int *i) {
  const char *arg = argv[*i], *v;
  int threads;
  if (!strcmp(arg, "--threads")) {
    if (!(v = option_value(argc, argv, i)) || threads_option(v, &threads))
      return 2;
    ct_set_threads(threads);
  } else if (arg[0] == '-' && arg[1] && strcmp(arg, "--")) {
    return usage_error("unknown option '%s'", arg);
  } else if (!a->ckpt) {
    a->ckpt = arg;
  } else if (a->rest) {
    a->rest[a->n_rest++] = arg;
  } else {
    return usage_error("unexpected argument '%s'", arg);
  }
  return 0;
}

// After the arguments of command `cmd`: a usage error (2) without CKPT or,
// when `images` are needed, without any; else 0.
static int model_args_check(const model_args *a, const char *cmd, bool images) {
  if (!a->ckpt) return usage_error("%s: a checkpoint path is needed", cmd);
  if (images && a->n_rest == 0) return usage_error("%s: no image given", cmd);
  return 0;
}

// --labels "a,b,..." and --template T... of zeroshot and eval --zeroshot;
// labels and templates point into argv and `buf`.
typedef struct zeroshot_opts {
  char *buf;            // the --labels value, cut at its commas
  const char **labels;  // argc slots
  int n_labels;
  const char **templates;  // argc slots
  int n_templates;
} zeroshot_opts;

static void zeroshot_opts_free(zeroshot_opts *z) {
  free(z->buf);
  free(z->labels);
  free(z->templates);
}

// Whether argv[i] is --labels or --template.
static bool is_zeroshot_arg(const char *arg) {
  return !strcmp(arg, "--labels") || !strcmp(arg, "--template");
}

// Takes argv[*i], --labels or --template, with its value: 0, 2 after a
// usage error, 1 when memory runs out.
static int zeroshot_arg(zeroshot_opts *z, int argc, char **argv, int *i) {
  const char *v;
  bool labels = !strcmp(argv[*i], "--labels");
  if (!(v = option_value(argc, argv, i))) return 2;
  if (!z->templates &&
      !(z->templates = calloc((size_t)argc + 1, sizeof *z->templates)))
    return 1;
  if (!labels) {
    if (!*v) return usage_error("%s", "--template is empty");
    z->templates[z->n_templates++] = v;
    return 0;
  }
  if (z->buf) return usage_error("%s", "--labels is given twice");
  // At most one label per byte, plus one.
  if (!(z->buf = strdup(v)) ||
      !(z->labels = calloc(strlen(v) + 2, sizeof *z->labels)))
    return 1;
  for (char *p = z->buf, *next; p; p = next) {
    next = strchr(p, ',');
    if (next) *next++ = '\0';
    while (*p == ' ') p++;
    for (char *e = p + strlen(p); e > p && e[-1] == ' ';) *--e = '\0';
    if (!*p) return usage_error("--labels has an empty name: '%s'", v);
    z->labels[z->n_labels++] = p;
  }
  return 0;
}

// The prompts of the options (default templates when none given).
static ct_zeroshot_prompts zeroshot_prompts(const zeroshot_opts *z) {
  return (ct_zeroshot_prompts){
      .labels = z->n_labels ? z->labels : NULL,
      .n_labels = z->n_labels,
      .templates = z->n_templates ? z->templates : NULL,
      .n_templates = z->n_templates};
}

// Shared by eval and translate: --beam N, --split S (eval), texts
// (translate).
typedef struct model_opts {
  model_args args;
  int beam;  // 0: the config's final_beam
  const char *split;
  const char *attention;  // translate: the alignment PNG, or NULL
  // eval --zeroshot DIR [--labels L] [--template T]...
  const char *zeroshot;
  zeroshot_opts zs;
} model_opts;

static int parse_model_opts(int argc, char **argv, bool texts, bool split,
                            model_opts *o) {
  if (texts && !(o->args.rest = calloc((size_t)argc, sizeof *o->args.rest)))
    return 1;
  for (int i = 2; i < argc; i++) {
    const char *v;
    if (!strcmp(argv[i], "--beam")) {
      if (!(v = option_value(argc, argv, &i))) return 2;
      if (positive(v) < 0 || positive(v) > 64)
        return usage_error("--beam wants an integer in 1..64, not '%s'", v);
      o->beam = (int)positive(v);
    } else if (split && !strcmp(argv[i], "--split")) {
      if (!(v = option_value(argc, argv, &i))) return 2;
      if (strcmp(v, "val") && strcmp(v, "test"))
        return usage_error("--split is val or test, not '%s'", v);
      o->split = v;
    } else if (texts && !strcmp(argv[i], "--attention")) {
      if (!(o->attention = option_value(argc, argv, &i))) return 2;
    } else if (split && !strcmp(argv[i], "--zeroshot")) {
      if (!(o->zeroshot = option_value(argc, argv, &i))) return 2;
    } else if (split && is_zeroshot_arg(argv[i])) {
      int rc = zeroshot_arg(&o->zs, argc, argv, &i);
      if (rc) return rc;
    } else {
      int rc = model_arg(&o->args, argc, argv, &i);
      if (rc) return rc;
    }
  }
  return model_args_check(&o->args, argv[1], false);
}

static int open_model_of(ct_run_model *m, const char *ckpt,
                         const ct_task_ops *want, const char *cmd);

// ctrain eval CKPT --zeroshot DIR [--labels L] [--template T]...
static int eval_zeroshot(const model_opts *o) {
  const char *ckpt = o->args.ckpt;
  ct_run_model m;
  int rc = open_model_of(&m, ckpt, &ct_task_contrastive, "eval --zeroshot");
  ct_eval_metrics metrics = {0};
  if (!rc) printf("checkpoint %s (step %lld)\n", ckpt, (long long)m.state.step);
  ct_zeroshot_prompts p = zeroshot_prompts(&o->zs);
  if (!rc && ct_contrastive_zeroshot_eval(&m.task, o->zeroshot, &p, &metrics,
                                          stdout) != CT_OK)
    rc = runtime_error();
  if (!rc) {
    ct_json_obj line;
    ct_json_obj_init(&line);
    ct_json_obj_str(&line, "checkpoint", ckpt);
    ct_json_obj_str(&line, "zeroshot", o->zeroshot);
    ct_json_obj_int(&line, "step", m.state.step);
    ct_eval_metrics_to_json(&metrics, &line);
    printf("%s\n", ct_json_obj_text(&line));
    ct_json_obj_free(&line);
  }
  ct_run_model_close(&m);
  ct_arena_release();
  return rc;
}

static int cmd_eval(int argc, char **argv) {
  model_opts o = {.split = "val"};
  int rc = parse_model_opts(argc, argv, false, true, &o);
  if (!rc && !o.zeroshot && (o.zs.n_labels || o.zs.n_templates))
    rc = usage_error("%s", "--labels and --template go with --zeroshot");
  if (!rc && o.zeroshot) rc = eval_zeroshot(&o);
  if (rc || o.zeroshot) {
    zeroshot_opts_free(&o.zs);
    return rc;
  }
  const char *ckpt = o.args.ckpt;
  ct_run_model m;
  if (ct_run_model_open(&m, ckpt, CT_TASK_EVAL_DATA) != CT_OK) {
    rc = runtime_error();
    ct_run_model_close(&m);
    return rc;
  }
  ct_run_apply_precision(&m.run);
  int beam = o.beam ? o.beam : m.run.final_beam;
  printf("checkpoint %s (step %lld)\n", ckpt, (long long)m.state.step);
  ct_eval_metrics metrics = {0};
  if (m.task.ops->evaluate(&m.task, o.split, beam, 0, &metrics, stdout) !=
      CT_OK) {
    rc = runtime_error();
  } else {
    ct_json_obj line;
    ct_json_obj_init(&line);
    ct_json_obj_str(&line, "checkpoint", ckpt);
    ct_json_obj_str(&line, "split", o.split);
    ct_json_obj_int(&line, "step", m.state.step);
    ct_eval_metrics_to_json(&metrics, &line);
    printf("%s\n", ct_json_obj_text(&line));
    ct_json_obj_free(&line);
  }
  ct_run_model_close(&m);
  ct_arena_release();
  return rc;
}

// Reads one line of at most `max` bytes (without its "\n" or "\r\n") into
// buf (max + 2 bytes): its length, -1 at the end of input, -2 when it is
// longer (read no further).
static int64_t read_line(FILE *in, char *buf, int64_t max) {
  int64_t len = 0;
  int c = EOF;
  while ((c = getc(in)) != EOF && c != '\n') {
    if (len > max) return -2;  // max bytes and a "\r": the last chance
    buf[len++] = (char)c;
  }
  if (c == EOF && len == 0) return -1;
  if (len > 0 && buf[len - 1] == '\r') len--;
  if (len > max) return -2;
  buf[len] = '\0';
  return len;
}

// Reads stdin lines (without newlines) into a growing array; NULL with
// *n = -1 after printing an error for a line longer than a corpus line may
// be: however stdin is made, a line costs a bounded amount of memory.
static char **read_lines(FILE *in, int *n) {
  char **lines = NULL;
  char *line = malloc(CT_TEXT_MAX_LINE_BYTES + 2);
  int count = 0, room = 0;
  int64_t len;
  while (line && (len = read_line(in, line, CT_TEXT_MAX_LINE_BYTES)) != -1) {
    if (len == -2) {
      fprintf(stderr,
              "ctrain: error: translate: stdin line %d is longer than %d "
              "bytes\n",
              count + 1, CT_TEXT_MAX_LINE_BYTES);
      for (int i = 0; i < count; i++) free(lines[i]);
      free(lines);
      free(line);
      *n = -1;
      return NULL;
    }
    if (count == room) {
      room = room ? 2 * room : 64;
      char **more = realloc(lines, (size_t)room * sizeof *lines);
      if (!more) break;
      lines = more;
    }
    if (!(lines[count] = strdup(line))) break;
    count++;
  }
  free(line);
  *n = count;
  return lines;
}

// Opens CKPT for a command that needs a model of one task: 0, or the exit
// code after printing why (unreadable, or another task's checkpoint).
static int open_model_of(ct_run_model *m, const char *ckpt,
                         const ct_task_ops *want, const char *cmd) {
  if (ct_run_model_open(m, ckpt, CT_TASK_MODEL_ONLY) != CT_OK)
    return runtime_error();
  ct_run_apply_precision(&m->run);
  if (m->task.ops != want) {
    fprintf(stderr, "ctrain: error: %s: %s is a %s checkpoint, not a %s one\n",
            cmd, ckpt, m->task.ops->name, want->name);
    return 1;
  }
  return 0;
}

static int cmd_translate(int argc, char **argv) {
  model_opts o = {0};
  int rc = parse_model_opts(argc, argv, true, false, &o);
  if (!rc && o.attention && o.args.n_rest != 1)
    rc = usage_error(
        "%s draws the alignment of one sentence: give exactly "
        "one TEXT",
        "translate --attention");
  if (rc) {
    free(o.args.rest);
    return rc;
  }
  ct_run_model m;
  rc = open_model_of(&m, o.args.ckpt, &ct_task_translation, "translate");
  if (!rc && o.attention) {
    int beam = o.beam ? o.beam : m.run.final_beam;
    char *out = NULL;
    if (ct_translation_attention(&m.task, o.args.rest[0], beam, o.attention,
                                 &out) != CT_OK)
      rc = runtime_error();
    else
      printf("%s\n", out);
    free(out);
  } else if (!rc) {
    int beam = o.beam ? o.beam : m.run.final_beam;
    int n = o.args.n_rest;
    char **stdin_lines = NULL;
    const char **lines = o.args.rest;
    if (n == 0) {
      stdin_lines = read_lines(stdin, &n);
      lines = (const char **)stdin_lines;
      if (n < 0) {
        n = 0;
        rc = 1;
      }
    }
    char **out = calloc((size_t)(n ? n : 1), sizeof *out);
    // In chunks, so a long stdin starts printing early.
    for (int start = 0; start < n && !rc; start += 256) {
      int k = n - start < 256 ? n - start : 256;
      if (ct_translation_translate(&m.task, lines + start, k, beam,
                                   out + start) != CT_OK) {
        rc = runtime_error();
        break;
      }
      for (int i = start; i < start + k; i++) printf("%s\n", out[i]);
      fflush(stdout);
    }
    for (int i = 0; i < n; i++) {
      free(out[i]);
      if (stdin_lines) free(stdin_lines[i]);
    }
    free(out);
    free(stdin_lines);
  }
  ct_run_model_close(&m);
  free(o.args.rest);
  ct_arena_release();
  return rc;
}

static int cmd_classify(int argc, char **argv) {
  const char *attention = NULL;
  int top = 5;
  model_args a = {.rest = calloc((size_t)argc, sizeof *a.rest)};
  int rc = a.rest ? 0 : 1;
  for (int i = 2; i < argc && !rc; i++) {
    const char *v;
    if (!strcmp(argv[i], "--top")) {
      rc = top_option(argc, argv, &i, &top);
    } else if (!strcmp(argv[i], "--attention")) {
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else
        attention = v;
    } else {
      rc = model_arg(&a, argc, argv, &i);
    }
  }
  if (!rc) rc = model_args_check(&a, "classify", true);
  if (rc) {
    free(a.rest);
    return rc;
  }
  ct_run_model m;
  rc = open_model_of(&m, a.ckpt, &ct_task_classification, "classify");
  if (!rc && ct_classification_classify(&m.task, a.rest, a.n_rest, top,
                                        attention, stdout) != CT_OK)
    rc = runtime_error();
  ct_run_model_close(&m);
  free(a.rest);
  ct_arena_release();
  return rc;
}

static int cmd_analyze(int argc, char **argv) {
  const char *out_dir = NULL, *split = "val";
  long images = 64;
  model_args a = {0};
  int rc = 0;
  for (int i = 2; i < argc && !rc; i++) {
    const char *v;
    if (!strcmp(argv[i], "--out")) {
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else
        out_dir = v;
    } else if (!strcmp(argv[i], "--images")) {
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else if ((images = positive(v)) < 1 || images > 100000)
        rc = usage_error("--images wants an integer in 1..100000, not '%s'", v);
    } else if (!strcmp(argv[i], "--split")) {
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else if (strcmp(v, "val") && strcmp(v, "test"))
        rc = usage_error("--split is val or test, not '%s'", v);
      else
        split = v;
    } else {
      rc = model_arg(&a, argc, argv, &i);
    }
  }
  if (!rc) rc = model_args_check(&a, "analyze", false);
  if (!rc && !out_dir)
    rc = usage_error("%s: --out DIR is needed (where the figures go)",
                     "analyze");
  if (rc) return rc;
  if (ct_analyze_run(a.ckpt, images, split, out_dir, stdout) != CT_OK)
    rc = runtime_error();
  ct_arena_release();
  return rc;
}

static int cmd_detect(int argc, char **argv) {
  const char *out_png = NULL;
  float threshold = 0.5f;
  model_args a = {.rest = calloc((size_t)argc, sizeof *a.rest)};
  if (!a.rest) return 1;
  int rc = 0;
  for (int i = 2; i < argc && !rc; i++) {
    const char *v;
    if (!strcmp(argv[i], "--out")) {
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else
        out_png = v;
    } else if (!strcmp(argv[i], "--threshold")) {
      char *end;
      if (!(v = option_value(argc, argv, &i)))
        rc = 2;
      else if ((threshold = strtof(v, &end), *end) ||
               !(threshold >= 0.0f && threshold <= 1.0f))
        rc = usage_error("--threshold wants a number in [0, 1], not '%s'", v);
    } else {
      rc = model_arg(&a, argc, argv, &i);
    }
  }
  if (!rc) rc = model_args_check(&a, "detect", true);
  if (rc) {
    free(a.rest);
    return rc;
  }
  ct_run_model m;
  rc = open_model_of(&m, a.ckpt, &ct_task_detection, "detect");
  if (!rc && ct_detection_detect(&m.task, a.rest, a.n_rest, threshold, out_png,
                                 stdout) != CT_OK)
    rc = runtime_error();
  ct_run_model_close(&m);
  free(a.rest);
  ct_arena_release();
  return rc;
}

// ctrain caption CKPT IMG.png... [--beam N] [--attention OUT.png]
static int cmd_caption(int argc, char **argv) {
  model_opts o = {0};
  int rc = parse_model_opts(argc, argv, true, false, &o);
  if (!rc && o.args.n_rest < 1)
    rc = usage_error("%s", "caption takes a checkpoint and PNG files");
  if (rc) {
    free(o.args.rest);
    return rc;
  }
  ct_run_model m;
  rc = open_model_of(&m, o.args.ckpt, &ct_task_captioning, "caption");
  if (!rc && ct_captioning_caption(&m.task, o.args.rest, o.args.n_rest,
                                   o.beam ? o.beam : m.run.final_beam,
                                   o.attention, stdout) != CT_OK)
    rc = runtime_error();
  ct_run_model_close(&m);
  free(o.args.rest);
  ct_arena_release();
  return rc;
}

// ctrain zeroshot CKPT --labels "a,b,..." [--template T]... IMG.png...
// [--top N]
static int cmd_zeroshot(int argc, char **argv) {
  zeroshot_opts z = {0};
  const char *panels = NULL;
  int top = 5;
  model_args a = {.rest = calloc((size_t)argc, sizeof *a.rest)};
  int rc = a.rest ? 0 : 1;
  for (int i = 2; i < argc && !rc; i++) {
    if (!strcmp(argv[i], "--top")) {
      rc = top_option(argc, argv, &i, &top);
    } else if (is_zeroshot_arg(argv[i])) {
      rc = zeroshot_arg(&z, argc, argv, &i);
    } else if (!strcmp(argv[i], "--out")) {
      if (!(panels = option_value(argc, argv, &i))) rc = 2;
    } else {
      rc = model_arg(&a, argc, argv, &i);
    }
  }
  if (!rc) rc = model_args_check(&a, "zeroshot", true);
  if (!rc && !z.n_labels)
    rc = usage_error("%s", "zeroshot needs --labels \"name,name,...\"");
  ct_run_model m;
  bool opened = false;
  if (!rc) {
    rc = open_model_of(&m, a.ckpt, &ct_task_contrastive, "zeroshot");
    opened = true;
  }
  ct_zeroshot_prompts p = zeroshot_prompts(&z);
  if (!rc && ct_contrastive_zeroshot(&m.task, &p, a.rest, a.n_rest, top, panels,
                                     stdout) != CT_OK)
    rc = runtime_error();
  if (opened) ct_run_model_close(&m);
  zeroshot_opts_free(&z);
  free(a.rest);
  ct_arena_release();
  return rc;
}

static int cmd_inspect(int argc, char **argv) {
  if (argc != 3) return usage_error("%s", "inspect takes one checkpoint path");
  ct_run_model m;
  int rc = 0;
  if (ct_run_model_open(&m, argv[2], CT_TASK_MODEL_ONLY) != CT_OK) {
    rc = runtime_error();
  } else {
    char *text = ct_config_to_string(m.cfg);
    char digest[17];
    ct_params_digest(&m.params, digest);
    printf("checkpoint %s\n\n%s\n", argv[2], text ? text : "");
    free(text);
    printf("task: %s\nstep: %lld\nepoch: %lld (next batch %lld)\n",
           m.task.ops->name, (long long)m.state.step, (long long)m.state.epoch,
           (long long)m.state.position);
    if (m.state.best_step >= 0)
      printf("best %s: %.4f at step %lld\n", m.task.ops->best_metric,
             m.state.best, (long long)m.state.best_step);
    if (m.state.planned_steps > 0)
      printf("planned for a time budget: %lld steps, warmup %lld\n",
             (long long)m.state.planned_steps,
             (long long)m.state.planned_warmup);
    printf("parameters: %zu in %d tensors\n", ct_params_numel(&m.params),
           m.params.n);
    for (int i = 0; i < m.params.n; i++) {
      char s[96];
      const ct_tensor *t = m.params.items[i].tensor;
      printf("  %-56s %s\n", m.params.items[i].name,
             ct_shape_str(t->ndim, t->shape, s, sizeof s));
    }
    printf("optimizer: %s, state sections:",
           ct_optim_kind_name(m.run.optim.kind));
    for (int i = 0; i < ct_ckpt_section_count(m.ckpt); i++) {
      size_t len;
      const char *name = ct_ckpt_section_name(m.ckpt, i, &len);
      if (!strncmp(name, "optim.", 6)) printf(" %s", name);
    }
    ct_json_obj o;
    ct_json_obj_init(&o);
    ct_json_obj_int(&o, "step", m.state.step);
    ct_json_obj_int(&o, "epoch", m.state.epoch);
    ct_json_obj_int(&o, "params", (int64_t)ct_params_numel(&m.params));
    ct_json_obj_str(&o, "params_digest", digest);
    printf("\n%s\n", ct_json_obj_text(&o));
    ct_json_obj_free(&o);
  }
  ct_run_model_close(&m);
  ct_arena_release();
  return rc;
}

// ctrain export CKPT [OUT.safetensors] [--vocab DIR]: the parameters for
// PyTorch, and/or the tokenizers' vocabularies and merges.
static int cmd_export(int argc, char **argv) {
  const char *pos[2] = {NULL, NULL}, *vocab_dir = NULL;
  int n = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--vocab")) {
      if (!(vocab_dir = option_value(argc, argv, &i))) return 2;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return usage_error("export: unknown option '%s'", argv[i]);
    } else if (n < 2) {
      pos[n++] = argv[i];
    } else {
      return usage_error("export: unexpected argument '%s'", argv[i]);
    }
  }
  if (n == 0 || (n == 1 && !vocab_dir))
    return usage_error("%s",
                       "export takes a checkpoint and an output path "
                       "(OUT.safetensors, --vocab DIR or both)");
  ct_run_model m;
  int rc = 0;
  if (ct_run_model_open(&m, pos[0], CT_TASK_MODEL_ONLY) != CT_OK) {
    rc = runtime_error();
  } else if (vocab_dir && !m.task.ops->export_vocab) {
    fprintf(stderr,
            "ctrain: error: export --vocab: %s is a %s checkpoint, which "
            "has no vocabulary\n",
            pos[0], m.task.ops->name);
    rc = 1;
  } else {
    const char *meta[] = {"format", "pt", "producer", "ctrain " CT_VERSION,
                          NULL};
    if (pos[1] && ct_safetensors_save(pos[1], &m.params, meta) != CT_OK)
      rc = runtime_error();
    else if (pos[1])
      printf("wrote %s (%d tensors, %zu parameters)\n", pos[1], m.params.n,
             ct_params_numel(&m.params));
    if (!rc && vocab_dir &&
        m.task.ops->export_vocab(&m.task, vocab_dir, stdout) != CT_OK)
      rc = runtime_error();
  }
  ct_run_model_close(&m);
  ct_arena_release();
  return rc;
}

// ctrain forward CKPT IN.safetensors OUT.safetensors [--weights W
// [--allow-unexpected]]: the model's outputs for given inputs, for checks
// against other frameworks.
static int cmd_forward(int argc, char **argv) {
  const char *pos[3] = {NULL, NULL, NULL}, *weights = NULL;
  bool allow_unexpected = false;
  int n = 0;
  for (int i = 2; i < argc; i++) {
    const char *v;
    if (!strcmp(argv[i], "--weights")) {
      if (!(v = option_value(argc, argv, &i))) return 2;
      weights = v;
    } else if (!strcmp(argv[i], "--allow-unexpected")) {
      allow_unexpected = true;
    } else if (!strcmp(argv[i], "--threads")) {
      int t;
      if (!(v = option_value(argc, argv, &i)) || threads_option(v, &t))
        return 2;
      ct_set_threads(t);
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return usage_error("unknown option '%s'", argv[i]);
    } else if (n < 3) {
      pos[n++] = argv[i];
    } else {
      return usage_error("unexpected argument '%s'", argv[i]);
    }
  }
  if (n != 3)
    return usage_error("%s",
                       "forward takes a checkpoint, an input and an "
                       "output .safetensors file");
  if (allow_unexpected && !weights)
    return usage_error("%s",
                       "forward: --allow-unexpected applies to the file of "
                       "--weights, and there is none");
  ct_run_model m;
  ct_params in, out;
  ct_params_init(&in);
  ct_params_init(&out);
  int rc = 0;
  if (ct_run_model_open(&m, pos[0], CT_TASK_MODEL_ONLY) != CT_OK ||
      (weights &&
       ct_safetensors_load_weights(weights, &m.params, allow_unexpected,
                                   "pass --allow-unexpected to skip them",
                                   stderr) != CT_OK) ||
      ct_safetensors_load(pos[1], &in, CT_LOAD_REGISTER) != CT_OK) {
    rc = runtime_error();
  } else if (!m.task.ops->forward) {
    fprintf(stderr, "ctrain: error: forward: not available for %s\n",
            m.task.ops->name);
    rc = 1;
  } else {
    ct_run_apply_precision(&m.run);
    if (m.task.ops->forward(&m.task, &in, &out) != CT_OK ||
        ct_safetensors_save(pos[2], &out, NULL) != CT_OK)
      rc = runtime_error();
    else
      printf("wrote %s (%d tensors)\n", pos[2], out.n);
  }
  ct_params_free(&in);
  ct_params_free(&out);
  ct_run_model_close(&m);
  ct_arena_release();
  return rc;
}

// ctrain plot RUN_DIR: charts in the run folder; ctrain plot RUN_DIR...
// --out FILE.png [--metrics LIST]: the runs compared in one PNG (only the
// listed panels).
static int cmd_plot(int argc, char **argv) {
  const char *out = NULL, *metrics = NULL;
  const char **dirs = calloc((size_t)argc, sizeof *dirs);
  if (!dirs) return runtime_error();
  int n = 0, rc = 0;
  for (int i = 2; i < argc && !rc; i++) {
    if (!strcmp(argv[i], "--out") || !strcmp(argv[i], "--metrics")) {
      const char **dst = !strcmp(argv[i], "--out") ? &out : &metrics;
      const char *v = option_value(argc, argv, &i);
      if (!v) rc = 2;
      *dst = v;
    } else if (argv[i][0] == '-') {
      rc = usage_error("plot: unknown option '%s'", argv[i]);
    } else {
      dirs[n++] = argv[i];
    }
  }
  if (!rc && (n == 0 || (n > 1 && !out)))
    rc = usage_error("%s", n ? "plot: several run folders need --out FILE.png"
                             : "plot takes a run folder");
  if (!rc && metrics && !out)
    rc = usage_error("%s", "plot: --metrics goes with --out FILE.png");
  char warning[512] = "";
  if (!rc && !out) {
    if (ct_plot_run_dir(dirs[0], warning, sizeof warning) != CT_OK)
      rc = runtime_error();
    else
      printf("wrote %s/loss.png, %s/lr.png, %s/metrics.png\n", dirs[0], dirs[0],
             dirs[0]);
  } else if (!rc) {
    if (ct_plot_compare_runs(out, dirs, n, metrics, warning, sizeof warning) !=
        CT_OK)
      rc = runtime_error();
    else
      printf("wrote %s\n", out);
  }
  if (!rc && warning[0]) fprintf(stderr, "ctrain: warning: %s\n", warning);
  free(dirs);
  return rc;
}

// A toy command's integer option (--seed N, --train N, ...) and where its
// value goes.
typedef struct toy_number {
  const char *name;
  long *value;
} toy_number;

// Reads a word option's value into *out (a ct_toy_task, ...).
typedef ct_status (*toy_word_fn)(const char *text, void *out);

static ct_status toy_task_word(const char *text, void *task) {
  return ct_toy_task_parse(text, task);
}

static ct_status toy_format_word(const char *text, void *format) {
  return ct_toy_image_format_parse(text, format);
}

static ct_status toy_variant_word(const char *text, void *variant) {
  return ct_toy_image_variant_parse(text, variant);
}

// A word option: its name, its reader and where the value goes.
typedef struct toy_word {
  const char *name;
  toy_word_fn read;
  void *value;
} toy_word;

// Reads the options of `ctrain toy KIND` (from argv[3]): --force, --out DIR,
// the word options of `words` and the positive integers of `numbers` (both
// ended by a NULL name). 0, or the exit code after a usage error.
static int toy_options(int argc, char **argv, const char **out, bool *force,
                       const toy_word *words, const toy_number *numbers) {
  for (int i = 3; i < argc; i++) {
    const char *opt = argv[i], *v;
    if (!strcmp(opt, "--force")) {
      *force = true;
      continue;
    }
    const toy_number *number = NULL;
    for (const toy_number *n = numbers; n->name; n++)
      if (!strcmp(opt, n->name)) number = n;
    const toy_word *word = NULL;
    for (const toy_word *w = words; w->name; w++)
      if (!strcmp(opt, w->name)) word = w;
    bool is_out = !strcmp(opt, "--out");
    if (!number && !is_out && !word)
      return usage_error("toy: unknown option '%s'", opt);
    if (!(v = option_value(argc, argv, &i))) return 2;
    if (is_out) {
      *out = v;
    } else if (word) {
      if (word->read(v, word->value) != CT_OK)
        return usage_error("%s", ct_last_error());
    } else if (positive(v) < 0) {
      return usage_error("option wants a positive integer, not '%s'", v);
    } else {
      *number->value = positive(v);
    }
  }
  return 0;
}

// ctrain toy images: the generated shape set (gray shapes, or the
// textured RGB variant) as PNG folders, CIFAR-10 or IDX files.
static int cmd_toy_images(int argc, char **argv) {
  const char *out = NULL;
  ct_toy_image_format format = CT_TOY_IMAGES_PNG;
  ct_toy_image_variant variant = CT_TOY_IMAGES_SHAPES;
  long seed = 1, size = 16, classes = 0, train = 2000, test = 400;
  bool force = false;
  const toy_number numbers[] = {{"--seed", &seed},       {"--size", &size},
                                {"--classes", &classes}, {"--train", &train},
                                {"--test", &test},       {NULL, NULL}};
  const toy_word words[] = {{"--format", toy_format_word, &format},
                            {"--variant", toy_variant_word, &variant},
                            {NULL, NULL, NULL}};
  int rc = toy_options(argc, argv, &out, &force, words, numbers);
  if (rc) return rc;
  if (!out) return usage_error("%s", "toy images needs --out DIR");
  if (format == CT_TOY_IMAGES_CIFAR10) size = 32;
  const bool textured = variant == CT_TOY_IMAGES_TEXTURED;
  if (classes == 0) classes = textured ? 10 : 4;
  ct_image_dataset tr = {0}, te = {0};
  ct_status (*generate)(ct_image_dataset *, int64_t, int, int, uint64_t, int) =
      textured ? ct_toy_images_textured : ct_toy_images_generate;
  ct_status st =
      generate(&tr, train, (int)size, (int)classes, (uint64_t)seed, 0);
  if (st == CT_OK)
    st = generate(&te, test, (int)size, (int)classes, (uint64_t)seed, 2);
  if (st == CT_OK) st = ct_toy_images_write(out, format, &tr, &te, force);
  ct_image_dataset_free(&tr);
  ct_image_dataset_free(&te);
  if (st != CT_OK) return runtime_error();
  printf(
      "wrote %ld training and %ld test images (%s, %ldx%ld, %ld classes) "
      "to %s\n",
      train, test, textured ? "textured RGB" : "gray shapes", size, size,
      classes, out);
  return 0;
}

// ctrain toy detection: the generated detection set as COCO files.
static int cmd_toy_detection(int argc, char **argv) {
  const char *out = NULL;
  long seed = 1, size = 64, classes = 4, train = 2000, val = 200;
  long min_size = 0, max_size = 0, objects = 0;  // 0: the generator's default
  bool force = false;
  const toy_number numbers[] = {{"--seed", &seed},
                                {"--size", &size},
                                {"--classes", &classes},
                                {"--train", &train},
                                {"--val", &val},
                                {"--min-size", &min_size},
                                {"--max-size", &max_size},
                                {"--objects", &objects},
                                {NULL, NULL}};
  const toy_word words[] = {{NULL, NULL, NULL}};
  int rc = toy_options(argc, argv, &out, &force, words, numbers);
  if (rc) return rc;
  if (!out) return usage_error("%s", "toy detection needs --out DIR");
  const ct_toy_detection_sizes sizes = {.min_object = (int)min_size,
                                        .max_object = (int)max_size,
                                        .max_objects = (int)objects};
  ct_detection_dataset tr = {0}, va = {0};
  ct_status st = ct_toy_detection_generate_sized(
      &tr, train, (int)size, (int)classes, (uint64_t)seed, 0, NULL, &sizes);
  if (st == CT_OK)
    st = ct_toy_detection_generate_sized(&va, val, (int)size, (int)classes,
                                         (uint64_t)seed, 1, NULL, &sizes);
  if (st == CT_OK) st = ct_toy_detection_write(out, &tr, &va, force);
  ct_detection_dataset_free(&tr);
  ct_detection_dataset_free(&va);
  if (st != CT_OK) return runtime_error();
  printf(
      "wrote %s/{train,val}.json and %s/{train,val}/*.png (%ld + %ld images, "
      "%ldx%ld, %ld classes)\n",
      out, out, train, val, size, size, classes);
  return 0;
}

// Where `ctrain toy captions --items fmnist` reads Fashion-MNIST.
#define TOY_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static ct_status toy_items_word(const char *text, void *fmnist) {
  if (!strcmp(text, "shapes") || !strcmp(text, "fmnist")) {
    *(bool *)fmnist = !strcmp(text, "fmnist");
    return CT_OK;
  }
  return ct_error(CT_ERR_ARG,
                  "toy captions: --items '%s': the kinds are "
                  "'shapes' and 'fmnist'",
                  text);
}

// ctrain toy captions: the generated captioning set, train/val/test as
// COCO captions files with object boxes (data/toy_captions.h).
static int cmd_toy_captions(int argc, char **argv) {
  const char *out = NULL;
  long seed = 1, size = 64, grid = 3, count = 4000, val = 300, test = 500;
  bool force = false, fmnist = false;
  const toy_number numbers[] = {{"--seed", &seed}, {"--size", &size},
                                {"--grid", &grid}, {"--count", &count},
                                {"--val", &val},   {"--test", &test},
                                {NULL, NULL}};
  const toy_word words[] = {{"--items", toy_items_word, &fmnist},
                            {NULL, NULL, NULL}};
  int rc = toy_options(argc, argv, &out, &force, words, numbers);
  if (rc) return rc;
  if (!out) return usage_error("%s", "toy captions needs --out DIR");
  ct_image_dataset items[2] = {{0}, {0}};  // Fashion-MNIST train, test
  ct_status st = CT_OK;
  for (int k = 0; k < 2 && fmnist && !st; k++)
    st = ct_idx_load_dir(&items[k], TOY_FMNIST_DIR, k == 0, 10);
  const char *splits[3] = {"train", "val", "test"};
  long sizes[3] = {count, val, test};
  for (int s = 0; s < 3 && !st; s++) {
    ct_toy_captions_options o = {.size = (int)size,
                                 .grid = (int)grid,
                                 .seed = (uint64_t)seed,
                                 .items = fmnist ? &items[s > 0] : NULL};
    ct_caption_dataset d = {0};
    st = ct_toy_captions_generate(&d, sizes[s], &o, s);
    if (!st) st = ct_captions_write(out, splits[s], &d, force);
    ct_caption_dataset_free(&d);
  }
  ct_image_dataset_free(&items[0]);
  ct_image_dataset_free(&items[1]);
  if (st != CT_OK) return runtime_error();
  printf(
      "wrote %s/{train,val,test}.json and %s/{train,val,test}/*.png (%ld "
      "+ %ld + %ld images, %ldx%ld, %s, seed %ld)\n",
      out, out, count, val, test, size, size, fmnist ? "fmnist" : "shapes",
      seed);
  return 0;
}

static int cmd_toy(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[2], "captions"))
    return cmd_toy_captions(argc, argv);
  if (argc >= 3 && !strcmp(argv[2], "images"))
    return cmd_toy_images(argc, argv);
  if (argc >= 3 && !strcmp(argv[2], "detection"))
    return cmd_toy_detection(argc, argv);
  if (argc < 3 || strcmp(argv[2], "translation"))
    return usage_error(
        "%s",
        "toy: the kinds are 'translation' (ctrain toy "
        "translation --out DIR), 'images', 'detection' and 'captions'");
  ct_toy_task task = CT_TOY_GRAMMAR;
  long seed = 1, train = 20000, val = 500, test = 500;
  const char *out = NULL;
  bool force = false;
  const toy_number numbers[] = {{"--seed", &seed},
                                {"--train", &train},
                                {"--val", &val},
                                {"--test", &test},
                                {NULL, NULL}};
  const toy_word words[] = {{"--task", toy_task_word, &task},
                            {NULL, NULL, NULL}};
  int rc = toy_options(argc, argv, &out, &force, words, numbers);
  if (rc) return rc;
  if (!out) return usage_error("%s", "toy translation needs --out DIR");
  ct_toy_options o = {.task = task,
                      .seed = (uint64_t)seed,
                      .train_size = train,
                      .val_size = val,
                      .test_size = test};
  if (ct_toy_translation_write(out, &o, force) != CT_OK) return runtime_error();
  printf("wrote %s/{train,val,test}.{src,tgt} (%s, seed %llu)\n", out,
         ct_toy_task_name(o.task), (unsigned long long)o.seed);
  return 0;
}

static int cmd_info(void) {
  int threads = ct_threads_from_env();
  printf("ctrain %s\n", CT_VERSION);
  printf("threads: %d (CT_THREADS or OMP_NUM_THREADS to change)\n", threads);
  printf("gemm kernel: %s\n", ct_gemm_path_name(ct_gemm_active_path()));
  printf("bf16 gemm kernel: %s ([train] precision = bf16)\n",
         ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()));
  printf("MPI: %s\n", ct_dist_library());
  return 0;
}

// The commands other than train, with the process group joined when an MPI
// launcher started this process: they run as one process.
static int run_command(const char *cmd, int argc, char **argv) {
  if (!strcmp(cmd, "train")) return cmd_train(argc, argv);
  if (ct_dist_size() > 1) {
    if (ct_dist_rank() == 0)
      fprintf(stderr,
              "ctrain: error: %s runs as one process; only train is "
              "data-parallel (mpirun -np 1, or no mpirun)\n",
              cmd);
    return 2;
  }
  if (!strcmp(cmd, "eval")) return cmd_eval(argc, argv);
  if (!strcmp(cmd, "translate")) return cmd_translate(argc, argv);
  if (!strcmp(cmd, "classify")) return cmd_classify(argc, argv);
  if (!strcmp(cmd, "analyze")) return cmd_analyze(argc, argv);
  if (!strcmp(cmd, "forward")) return cmd_forward(argc, argv);
  if (!strcmp(cmd, "detect")) return cmd_detect(argc, argv);
  if (!strcmp(cmd, "caption")) return cmd_caption(argc, argv);
  if (!strcmp(cmd, "zeroshot")) return cmd_zeroshot(argc, argv);
  if (!strcmp(cmd, "inspect")) return cmd_inspect(argc, argv);
  if (!strcmp(cmd, "export")) return cmd_export(argc, argv);
  if (!strcmp(cmd, "plot")) return cmd_plot(argc, argv);
  if (!strcmp(cmd, "toy")) return cmd_toy(argc, argv);
  fprintf(stderr, "ctrain: error: unknown command '%s'\n%s", cmd, usage);
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    fputs(usage, stdout);
    return 0;
  }
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    printf("ctrain %s\n", CT_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "info")) return cmd_info();
  // Kernels use CT_THREADS / OMP_NUM_THREADS unless told otherwise.
  ct_threads_from_env();
  if (ct_dist_init() != CT_OK) {
    fprintf(stderr, "ctrain: error: %s\n", ct_last_error());
    return 1;
  }
  int rc = run_command(cmd, argc, argv);
  ct_dist_finalize();
  return rc;
}
