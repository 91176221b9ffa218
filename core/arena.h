// The per-step bump arena: activations, tape nodes and temporaries.
//
// Allocation is a pointer bump; ct_arena_reset() frees everything at once
// after an optimizer step. Memory is kept between steps, so a training loop
// in steady state does no malloc/free. The tape lives in the arena, so a
// reset also empties it.
//
// Each session (core/session.h) has its own arena, and these calls use the
// calling thread's. Allocate from the thread that drives the model: kernels
// running in OpenMP regions write into memory allocated before the region.
#ifndef CT_CORE_ARENA_H
#define CT_CORE_ARENA_H

#include <stddef.h>

// Returns `bytes` of 64-byte aligned, uninitialized memory, or NULL with an
// error recorded if the system is out of memory.
void *ct_arena_alloc(size_t bytes);
// Like ct_arena_alloc, zero-filled.
void *ct_arena_calloc(size_t bytes);
// Frees everything allocated since the last reset, tape included.
void ct_arena_reset(void);
// Bytes handed out since the last reset, and the most ever handed out.
size_t ct_arena_used_bytes(void);
size_t ct_arena_peak_bytes(void);
// A position in the arena, to give back everything allocated after it (for
// loops that run many no-grad evaluations inside one step, such as gradient
// checks). Rewinding past live tape nodes or tensors is the caller's bug.
typedef struct ct_arena_mark {
  void *block;
  size_t used;
  unsigned resets;  // a rewind after a reset has nothing to give back
} ct_arena_mark;
ct_arena_mark ct_arena_get_mark(void);
void ct_arena_rewind(ct_arena_mark mark);
// Returns all arena memory to the system (at program end, or in tests),
// with the session's op workspace.
void ct_arena_release(void);

#endif
