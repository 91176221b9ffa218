// The ctrain program: dispatches the subcommands of DESIGN.md.
//
// Commands land here as the features behind them do; a command that is not
// in this build says so and exits with the usage status (2).
#include "core/error.h"
#include "core/gemm.h"
#include "core/threads.h"

#include <stdio.h>
#include <string.h>

#ifndef CT_VERSION
#define CT_VERSION "unknown"
#endif

static const char *const usage =
    "usage: ctrain COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  info                       build, CPU features and thread count\n"
    "  version                    print the version\n"
    "  help                       this text\n"
    "\n"
    "planned (not in this build yet): train, eval, translate, classify,\n"
    "detect, inspect, export, plot, toy\n";

static const char *const planned[] = {"train",   "eval",   "translate",
                                      "classify", "detect", "inspect",
                                      "export",  "plot",   "toy"};

static int cmd_info(void) {
  int threads = ct_threads_from_env();
  printf("ctrain %s\n", CT_VERSION);
  printf("threads: %d (CT_THREADS or OMP_NUM_THREADS to change)\n", threads);
  printf("gemm kernel: %s\n", ct_gemm_path_name(ct_gemm_active_path()));
  return 0;
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
  for (size_t i = 0; i < sizeof planned / sizeof planned[0]; i++) {
    if (!strcmp(cmd, planned[i])) {
      fprintf(stderr, "ctrain: error: '%s' is not available in this build "
                      "yet\n", cmd);
      return 2;
    }
  }
  fprintf(stderr, "ctrain: error: unknown command '%s'\n%s", cmd, usage);
  return 2;
}
