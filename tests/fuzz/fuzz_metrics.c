// Fuzz target: metrics.jsonl, as `ctrain plot` and a resume read it
// (train/jsonl.h, train/plot.h): the lines as records, the charts of a run
// folder holding it (loss, lr, the evaluation metrics), and the rewrite a
// resume does (the lines up to a step).
#include "tests/fuzz/fuzz_util.h"
#include "train/jsonl.h"
#include "train/plot.h"

#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char run[256];
  if (!run[0]) {
    snprintf(run, sizeof run, "%s", fuzz_path("run"));
    mkdir(run, 0777);
  }
  const char *path = fuzz_write("run/metrics.jsonl", data, size);
  ct_jsonl_data d;
  if (ct_jsonl_read(path, &d) == CT_OK) ct_jsonl_data_free(&d);
  char warning[512];
  ct_plot_run_dir(run, warning, sizeof warning);
  ct_jsonl_truncate_after(path, "step", 100);
  return 0;
}
