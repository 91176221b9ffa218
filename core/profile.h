// Where a training step's time goes, by op kind: a lightweight profiler of
// the calling thread's session, off by default (bench_step turns it on).
//
// Time is wall time on the thread that drives the ops, cut into intervals
// at marks:
//   - the gemm entry points (core/gemm.h) time each product they run and
//     add it to CT_PROF_GEMM, less the time its threads spent packing
//     operands (CT_PROF_PACKING: the drivers time their packing);
//   - ct_prof_attribute(kind) gives the time since the last mark, less the
//     gemm time inside it, to `kind`, and marks anew. The tape calls it when
//     an op records its node (the op's forward, and whatever ran since the
//     previous op, such as a module's glue) and after each node's backward
//     (autograd/tape.c); a training loop calls it for its own parts (the
//     optimizer).
// So the kinds of one profiled stretch add up to its wall time. Products
// that run inside another kernel's parallel region (the fused attention's
// block products) stay with that kernel's kind: they are timed only as a
// whole.
//
// Idle threads: the profiler reads the CPU clocks of the team's threads
// (the OpenMP threads of the calling thread's setting, ct_set_threads) at
// every mark. Of an interval of wall time W in which the T threads ran for
// C seconds of CPU in all, C / T goes to the interval's kind and W - C / T
// to CT_PROF_IDLE: the time threads waited in barriers, slept between
// parallel regions, sat out a single-threaded op or were descheduled. (A
// waiting policy that spins, OMP_WAIT_POLICY=active, counts the spinning
// as work.) Packing is thread time too: its sum over the threads / T.
//
// The profiler only reads clocks and adds doubles; no result depends on it.
#ifndef CT_CORE_PROFILE_H
#define CT_CORE_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

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
  CT_PROF_PACKING,      // the gemm drivers copying and rounding operands
  CT_PROF_IDLE,         // threads without work (see above)
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
// profiler is off; ct_prof_gemm_end adds the time since it (not nested:
// products run inside a kernel's workers are not timed). While a product
// runs, ct_prof_pack_counter() is the counter its drivers add their packing
// time to (nanoseconds summed over threads), NULL when not profiled.
double ct_prof_gemm_begin(void);
void ct_prof_gemm_end(double start);
_Atomic uint64_t *ct_prof_pack_counter(void);

// The time of each op by name, forward and backward apart (products
// included): what ct_prof_attribute_op was told since the last reset.
typedef struct ct_prof_op {
  const char *op;  // the op's name as recorded (a string literal)
  bool backward;
  double seconds;  // wall time, its products included
  double idle;     // of which idle threads (as CT_PROF_IDLE counts them)
  int64_t calls;
} ct_prof_op;
// Gives the time since the last mark to `kind` as ct_prof_attribute does,
// and its whole wall time (with the products inside it) to op's row.
void ct_prof_attribute_op(const char *op, bool backward, ct_prof_kind kind);
// Up to max rows, largest time first; returns how many there are.
int ct_prof_ops(ct_prof_op *rows, int max);

#endif
