// Where a training step's time goes, by op kind: a lightweight profiler of
// the calling thread's session, off by default (bench_step turns it on).
//
// Time is wall time on the thread that drives the ops, cut into intervals
// at marks:
//   - the gemm entry points (core/gemm.h) time each product they run and
//     add it to CT_PROF_GEMM;
//   - ct_prof_attribute(kind) gives the time since the last mark, less the
//     gemm time inside it, to `kind`, and marks anew. The tape calls it when
//     an op records its node (the op's forward, and whatever ran since the
//     previous op, such as a module's glue) and after each node's backward
//     (autograd/tape.c); a training loop calls it for its own parts (the
//     optimizer).
// So the kinds of one profiled stretch add up to its wall time. Products
// that run inside another kernel's parallel region (the fused attention's
// block products) stay with that kernel's kind: they are timed only as a
// whole. Idle threads are not measured: the time other threads wait in
// OpenMP barriers is inside the wall time of the kinds whose kernels wait.
//
// The profiler only reads clocks and adds doubles; no result depends on it.
#ifndef CT_CORE_PROFILE_H
#define CT_CORE_PROFILE_H

#include <stdbool.h>

typedef enum ct_prof_kind {
  CT_PROF_GEMM,         // matrix products run by the gemm entry points
  CT_PROF_ELEMENTWISE,  // activations, dropout, adds, the rest of fused linears
  CT_PROF_NORM,         // layernorm, batchnorm
  CT_PROF_ATTENTION,    // fused attention (with its products), softmax
  CT_PROF_LOSS,         // cross-entropy and the other losses
  CT_PROF_OPTIMIZER,    // zeroing grads, clipping, the optimizer step
  CT_PROF_LAYOUT,       // reshapes, permutes, concat, slices, embeddings,
                        // im2col and the rest of a convolution
  CT_PROF_OTHER,        // reductions, pools, what linear and matmul do
                        // besides their products, anything unnamed
  CT_PROF_KINDS
} ct_prof_kind;

// Turns the calling thread's session's profiler on or off; returns the
// previous setting. Turning it on marks (the time before is not counted).
bool ct_prof_set_enabled(bool on);
bool ct_prof_enabled(void);
// Zeroes the totals and marks.
void ct_prof_reset(void);
// Starts a new interval now: the time since the last mark is dropped.
void ct_prof_mark(void);
// Gives the time since the last mark, less the gemm time within it, to
// `kind`, and marks. Nothing when the profiler is off.
void ct_prof_attribute(ct_prof_kind kind);
// Seconds given to `kind` since the last reset.
double ct_prof_seconds(ct_prof_kind kind);
// "gemm", "elementwise", ...: the kind's name in bench output.
const char *ct_prof_kind_name(ct_prof_kind kind);

// For the gemm entry points: a start time, or a negative number when the
// profiler is off; ct_prof_gemm_end adds the time since it.
double ct_prof_gemm_begin(void);
void ct_prof_gemm_end(double start);

#endif
