// A tiny test harness: CHECK records a failure with file and line and goes
// on; each test program ends with `return test_summary("name");`, which prints
// "name: N checks, N failed" and returns the exit status.
#ifndef CT_TESTS_HARNESS_H
#define CT_TESTS_HARNESS_H

#include <math.h>
#include <stdio.h>

static int test_checks, test_failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    test_checks++;                                                             \
    if (!(cond)) {                                                             \
      test_failures++;                                                         \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

// Checks |got - want| <= tol * max(1, |want|) and prints both on failure.
#define CHECK_CLOSE(got, want, tol, what)             \
  do {                                                \
    double g_ = (got), w_ = (want);                   \
    CHECK(fabs(g_ - w_) <= (tol)*fmax(1.0, fabs(w_)), \
          "%s: got %.9g, want %.9g", (what), g_, w_); \
  } while (0)

static inline int test_summary(const char *name) {
  printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
  return test_failures ? 1 : 0;
}

#endif
