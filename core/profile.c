// The session's profiler (core/profile.h).
#include "core/profile.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/session_internal.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The team's CPU seconds so far (a clock that cannot be read, of a thread
// that has exited, counts 0).
static double team_cpu_s(const ct_prof_state *p) {
  double sum = 0.0;
  for (int i = 0; i < p->threads; i++) {
    struct timespec ts;
    if (clock_gettime(p->clocks[i], &ts) == 0)
      sum += (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  }
  return sum;
}

// The CPU clocks of the calling thread's OpenMP team, as its parallel
// regions would form it now (libgomp keeps those threads for the next
// regions). Where a thread's clock cannot be had, none is kept (threads
// 0): the kinds then get their wall time and idle stays 0.
static void take_team_clocks(ct_prof_state *p) {
  int want = omp_get_max_threads();
  if (want > CT_PROF_MAX_THREADS) want = CT_PROF_MAX_THREADS;
  int got = 1, failed = 0;
#pragma omp parallel num_threads(want)
  {
    const int t = omp_get_thread_num();
    if (t == 0) got = omp_get_num_threads();
    if (pthread_getcpuclockid(pthread_self(), &p->clocks[t]) != 0) {
#pragma omp atomic write
      failed = 1;
    }
  }
  p->threads = failed ? 0 : got;
}

bool ct_prof_set_enabled(bool on) {
  ct_prof_state *p = &ct_session_current()->prof;
  bool was = p->on;
  if (on && !was) take_team_clocks(p);
  p->on = on;
  if (on) ct_prof_mark();
  return was;
}

bool ct_prof_enabled(void) { return ct_session_current()->prof.on; }

void ct_prof_reset(void) {
  ct_prof_state *p = &ct_session_current()->prof;
  for (int k = 0; k < CT_PROF_KINDS; k++) p->seconds[k] = 0.0;
  p->n_ops = 0;
  ct_prof_mark();
}

void ct_prof_mark(void) {
  ct_prof_state *p = &ct_session_current()->prof;
  p->mark = now_s();
  p->cpu_mark = p->on ? team_cpu_s(p) : 0.0;
  p->idle_at_mark = p->seconds[CT_PROF_IDLE];
  p->gemm_since_mark = 0.0;
  p->gemm_cpu_since_mark = 0.0;
}

// wall seconds with `cpu` seconds of the team's CPU in them: the busy part
// (cpu over the team's threads) to kind, the rest to idle. Returns the
// busy part.
static double give(ct_prof_state *p, ct_prof_kind kind, double wall,
                   double cpu) {
  if (wall < 0.0) wall = 0.0;
  double busy = p->threads > 0 ? cpu / p->threads : wall;
  if (busy > wall) busy = wall;
  if (busy < 0.0) busy = 0.0;
  p->seconds[kind] += busy;
  p->seconds[CT_PROF_IDLE] += wall - busy;
  return busy;
}

// The interval since the last mark (less its products) to kind, ending at
// t; marks anew.
static void attribute_at(ct_prof_state *p, ct_prof_kind kind, double t) {
  const double cpu = team_cpu_s(p);
  give(p, kind, (t - p->mark) - p->gemm_since_mark,
       (cpu - p->cpu_mark) - p->gemm_cpu_since_mark);
  p->mark = t;
  p->cpu_mark = cpu;
  p->idle_at_mark = p->seconds[CT_PROF_IDLE];
  p->gemm_since_mark = 0.0;
  p->gemm_cpu_since_mark = 0.0;
}

void ct_prof_attribute(ct_prof_kind kind) {
  ct_prof_state *p = &ct_session_current()->prof;
  if (!p->on || kind < 0 || kind >= CT_PROF_KINDS) return;
  attribute_at(p, kind, now_s());
}

void ct_prof_attribute_op(const char *op, bool backward, ct_prof_kind kind) {
  ct_prof_state *p = &ct_session_current()->prof;
  if (!p->on || kind < 0 || kind >= CT_PROF_KINDS) return;
  const double t = now_s();
  int i = 0;
  while (i < p->n_ops && !(p->ops[i].backward == backward &&
                           (p->ops[i].op == op || !strcmp(p->ops[i].op, op))))
    i++;
  if (i == p->n_ops && i < CT_PROF_MAX_OPS)
    p->ops[p->n_ops++] = (ct_prof_op){.op = op, .backward = backward};
  // The op's wall and idle time: the interval's, its products' included.
  const double wall = t - p->mark, idle_mark = p->idle_at_mark;
  attribute_at(p, kind, t);
  if (i < p->n_ops) {
    p->ops[i].seconds += wall;
    p->ops[i].idle += p->seconds[CT_PROF_IDLE] - idle_mark;
    p->ops[i].calls++;
  }
}

static int by_time(const void *a, const void *b) {
  const double x = ((const ct_prof_op *)a)->seconds;
  const double y = ((const ct_prof_op *)b)->seconds;
  return (x < y) - (x > y);
}

int ct_prof_ops(ct_prof_op *rows, int max) {
  const ct_prof_state *p = &ct_session_current()->prof;
  ct_prof_op sorted[CT_PROF_MAX_OPS];
  memcpy(sorted, p->ops, (size_t)p->n_ops * sizeof *sorted);
  qsort(sorted, (size_t)p->n_ops, sizeof *sorted, by_time);
  for (int i = 0; i < p->n_ops && i < max; i++) rows[i] = sorted[i];
  return p->n_ops;
}

double ct_prof_seconds(ct_prof_kind kind) {
  if (kind < 0 || kind >= CT_PROF_KINDS) return 0.0;
  return ct_session_current()->prof.seconds[kind];
}

const char *ct_prof_kind_name(ct_prof_kind kind) {
  static const char *const names[] = {
      "gemm",      "elementwise", "norm",  "attention", "loss",
      "optimizer", "layout",      "other", "packing",   "idle"};
  _Static_assert(sizeof names / sizeof names[0] == CT_PROF_KINDS,
                 "a name for every profiler kind");
  return kind >= 0 && kind < CT_PROF_KINDS ? names[kind] : "unknown";
}

double ct_prof_gemm_begin(void) {
  ct_prof_state *p = &ct_session_current()->prof;
  if (!p->on || p->in_gemm) return -1.0;
  p->in_gemm = true;
  p->gemm_pack_start = p->pack_ns;
  p->gemm_cpu_start = team_cpu_s(p);
  return now_s();
}

_Atomic uint64_t *ct_prof_pack_counter(void) {
  ct_prof_state *p = &ct_session_current()->prof;
  return p->on && p->in_gemm ? &p->pack_ns : NULL;
}

void ct_prof_gemm_end(double start) {
  if (start < 0.0) return;
  ct_prof_state *p = &ct_session_current()->prof;
  const double wall = now_s() - start;
  const double cpu = team_cpu_s(p) - p->gemm_cpu_start;
  const double packing = 1e-9 * (double)(p->pack_ns - p->gemm_pack_start);
  p->in_gemm = false;
  // The product's busy part, with its threads' packing taken out of it.
  const double busy = give(p, CT_PROF_GEMM, wall, cpu);
  double pack = p->threads > 0 ? packing / p->threads : 0.0;
  if (pack > busy) pack = busy;
  p->seconds[CT_PROF_GEMM] -= pack;
  p->seconds[CT_PROF_PACKING] += pack;
  p->gemm_since_mark += wall;
  p->gemm_cpu_since_mark += cpu;
}
