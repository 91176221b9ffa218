// What the fuzz targets share: the libFuzzer entry point they each define,
// and a scratch folder for the readers that take paths.
//
// Each tests/fuzz/fuzz_SURFACE.c defines LLVMFuzzerTestOneInput, which
// feeds one input to the readers of one input surface; any crash, leak or
// sanitizer report is a finding, an error status is not. Built with
// `-Dfuzz=true` (clang), each links libFuzzer; in every build each also
// links tests/fuzz/replay.c, a main() that runs the files of its corpus
// (tests/fuzz/corpus/SURFACE/) through the same function: the `fuzz`
// test suite.
#ifndef CT_TESTS_FUZZ_FUZZ_UTIL_H
#define CT_TESTS_FUZZ_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir_name[64];

static inline void fuzz_dir_remove(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_name);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fuzz_dir_name);
}

// A folder of this process's own under /tmp (made once, removed at exit).
static inline const char *fuzz_dir(void) {
  if (!fuzz_dir_name[0]) {
    snprintf(fuzz_dir_name, sizeof fuzz_dir_name, "/tmp/ctrain-fuzz-XXXXXX");
    if (!mkdtemp(fuzz_dir_name)) {
      perror("mkdtemp");
      abort();
    }
    atexit(fuzz_dir_remove);
  }
  return fuzz_dir_name;
}

// DIR/name, in one of a few rotating buffers.
static inline const char *fuzz_path(const char *name) {
  static char buf[4][256];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", fuzz_dir(), name);
  return p;
}

// Writes bytes to DIR/name and returns its path.
static inline const char *fuzz_write(const char *name, const void *data,
                                     size_t size) {
  const char *path = fuzz_path(name);
  FILE *f = fopen(path, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) {
    perror(path);
    abort();
  }
  return path;
}

// A NUL-terminated copy of the input (malloc'd).
static inline char *fuzz_text(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

#endif
