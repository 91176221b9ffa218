// What a session holds (core/session.h), for the files that implement its
// parts: the arena (core/arena.c), the tape and its gradient pool
// (autograd/tape.c) and the gemm settings (core/gemm.c). Not installed:
// users reach these through the parts' own headers.
#ifndef CT_CORE_SESSION_INTERNAL_H
#define CT_CORE_SESSION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/gemm.h"
#include "core/profile.h"
#include "core/session.h"

struct ct_arena_block;
struct ct_node;

enum { CT_GRAD_POOL_MAX = 64 };

enum { CT_PROF_MAX_THREADS = 256, CT_PROF_MAX_OPS = 128 };

// The profiler's state (core/profile.c).
typedef struct ct_prof_state {
  bool on;
  // The team whose CPU clocks are read (taken when the profiler is turned
  // on): the OpenMP threads of the session's setting.
  int threads;
  clockid_t clocks[CT_PROF_MAX_THREADS];
  // Start of the current interval: wall time, team CPU, idle total.
  double mark, cpu_mark, idle_at_mark;
  // Wall and team CPU seconds of the products inside the current interval.
  double gemm_since_mark, gemm_cpu_since_mark;
  // The product being timed: its start's team CPU and packing counter.
  bool in_gemm;
  double gemm_cpu_start;
  uint64_t gemm_pack_start;
  _Atomic uint64_t pack_ns;  // packing, ns summed over threads
  double seconds[CT_PROF_KINDS];
  ct_prof_op ops[CT_PROF_MAX_OPS];
  int n_ops;
} ct_prof_state;

typedef struct ct_pooled_grad {
  float *buf;
  int64_t numel;
} ct_pooled_grad;

struct ct_session {
  // The step arena: the newest block, older ones chained behind it.
  struct ct_arena_block *block;
  size_t arena_used_before;  // bytes handed out in blocks other than `block`
  size_t arena_peak;
  unsigned arena_resets;  // lets a mark see that a reset freed its memory
  // The tape: the newest node first. Nodes live in the arena, so a reset
  // empties the tape (and the gradient pool) along with it.
  struct ct_node *tape_head;
  int tape_count;
  bool recording;
  // Gradient buffers of op outputs whose backward has run, for reuse later
  // in the same backward pass (arena memory).
  ct_pooled_grad grad_pool[CT_GRAD_POOL_MAX];
  int grad_pool_n;
  // Matrix products: precision and forced kernel paths.
  ct_gemm_mode gemm;
  // Activations stay fp32 in bf16 precision (ct_gemm_set_bf16_activations);
  // false, the default, keeps them in bf16 where that is exact.
  bool bf16_activations_off;
  // Work counters (core/flops.h): fp32, bf16. Atomic because the OpenMP
  // workers of a kernel add the products they issue on the session's behalf.
  _Atomic uint64_t flops[2];
  // Time by op kind (core/profile.h).
  ct_prof_state prof;
  // A grow-only workspace that outlives arena resets, for ops whose
  // backward must not allocate (a convolution's forward reserves what its
  // backward will use). Freed with the arena's memory (ct_arena_release).
  void *workspace;
  size_t workspace_bytes;
};

// Adds n to s's counter of `precision` (core/flops.h), from any thread.
void ct_flops_add_to(ct_session *s, ct_gemm_precision precision, uint64_t n);

// The calling thread's session's workspace with room for at least `bytes`
// (64-byte aligned, contents undefined), or NULL with an error when out of
// memory (the old workspace is kept).
void *ct_session_workspace_reserve(size_t bytes);
// The workspace as last reserved (NULL before any reserve).
void *ct_session_workspace(void);

#endif
