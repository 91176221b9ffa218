// The session's profiler (core/profile.h).
#include "core/profile.h"

#include <time.h>

#include "core/session_internal.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool ct_prof_set_enabled(bool on) {
  ct_prof_state *p = &ct_session_current()->prof;
  bool was = p->on;
  p->on = on;
  if (on) ct_prof_mark();
  return was;
}

bool ct_prof_enabled(void) { return ct_session_current()->prof.on; }

void ct_prof_reset(void) {
  ct_prof_state *p = &ct_session_current()->prof;
  for (int k = 0; k < CT_PROF_KINDS; k++) p->seconds[k] = 0.0;
  ct_prof_mark();
}

void ct_prof_mark(void) {
  ct_prof_state *p = &ct_session_current()->prof;
  p->mark = now_s();
  p->gemm_since_mark = 0.0;
}

void ct_prof_attribute(ct_prof_kind kind) {
  ct_prof_state *p = &ct_session_current()->prof;
  if (!p->on || kind < 0 || kind >= CT_PROF_KINDS) return;
  const double t = now_s();
  p->seconds[kind] += (t - p->mark) - p->gemm_since_mark;
  p->mark = t;
  p->gemm_since_mark = 0.0;
}

double ct_prof_seconds(ct_prof_kind kind) {
  if (kind < 0 || kind >= CT_PROF_KINDS) return 0.0;
  return ct_session_current()->prof.seconds[kind];
}

const char *ct_prof_kind_name(ct_prof_kind kind) {
  static const char *const names[] = {"gemm",      "elementwise", "norm",
                                      "attention", "loss",        "optimizer",
                                      "layout",    "other"};
  _Static_assert(sizeof names / sizeof names[0] == CT_PROF_KINDS,
                 "a name for every profiler kind");
  return kind >= 0 && kind < CT_PROF_KINDS ? names[kind] : "unknown";
}

double ct_prof_gemm_begin(void) {
  return ct_session_current()->prof.on ? now_s() : -1.0;
}

void ct_prof_gemm_end(double start) {
  if (start < 0.0) return;
  ct_prof_state *p = &ct_session_current()->prof;
  const double dt = now_s() - start;
  p->seconds[CT_PROF_GEMM] += dt;
  p->gemm_since_mark += dt;
}
