// Replays inputs through a fuzz target's LLVMFuzzerTestOneInput without
// libFuzzer: the `fuzz` test suite (every file of a target's corpus, run
// under the sanitizers in CI), and a way to rerun one finding:
//   build/tests/fuzz/fuzz_replay_config tests/fuzz/corpus/config/crash-...
// Arguments are files or folders (their files, not recursing); -v prints
// each input with the last error it left (what stopped the readers). Exits
// 0 when every input ran to its end; a crash ends the program (that is the
// failure).
#include "core/error.h"
#include "tests/fuzz/fuzz_util.h"

#include <stdbool.h>

#include <dirent.h>
#include <sys/stat.h>

static bool verbose;

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) return 1;
  ct_clear_error();
  LLVMFuzzerTestOneInput(buf, n);
  if (verbose) printf("%s: %s\n", path, ct_last_error());
  free(buf);
  return 0;
}

static int compare(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  int failed = 0, inputs = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-v")) {
      verbose = true;
      continue;
    }
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      perror(argv[i]);
      failed++;
      continue;
    }
    if (!S_ISDIR(sb.st_mode)) {
      failed += replay_file(argv[i]);
      inputs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      names = realloc(names, (n + 1) * sizeof *names);
      names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, n, sizeof *names, compare);  // the same order every time
    for (size_t k = 0; k < n; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], names[k]);
      failed += replay_file(path);
      inputs++;
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %d inputs, %d unreadable\n", inputs, failed);
  return failed || !inputs ? 1 : 0;
}
