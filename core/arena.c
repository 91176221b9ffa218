// Bump arena, one per session (core/session.h). Memory comes in blocks; when
// a step needs more than the current block holds, another block is chained
// on. On reset, several blocks are merged into one block of their total size
// (at least the high-water mark, which counts scratch given back by
// rewinds), so the next step fits in one block and the loop settles into
// zero system allocations.
//
// The tape's nodes and the gradient pool live in the arena too: a reset or a
// release empties them in the same move, so they never point into freed
// memory.
#include "core/arena.h"
#include "core/error.h"
#include "core/session_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { ARENA_ALIGN = 64 };
static const size_t DEFAULT_BLOCK = (size_t)16 << 20;

typedef struct ct_arena_block {
  struct ct_arena_block *prev;
  size_t size, used;
  unsigned char *mem;
} block;

static block *block_new(size_t size, block *prev) {
  block *b = malloc(sizeof *b);
  if (!b) return NULL;
  b->mem = aligned_alloc(ARENA_ALIGN, size);
  if (!b->mem) {
    free(b);
    return NULL;
  }
  b->prev = prev;
  b->size = size;
  b->used = 0;
  return b;
}

static void block_chain_free(block *b) {
  while (b) {
    block *prev = b->prev;
    free(b->mem);
    free(b);
    b = prev;
  }
}

// Everything recorded in the arena's memory is gone.
static void forget_step(ct_session *s) {
  s->tape_head = NULL;
  s->tape_count = 0;
  s->grad_pool_n = 0;
  s->arena_resets++;
}

void *ct_arena_alloc(size_t bytes) {
  ct_session *s = ct_session_current();
  size_t need = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  if (need < bytes) {
    ct_error(CT_ERR_NOMEM, "arena: request of %zu bytes overflows", bytes);
    return NULL;
  }
  if (need == 0) need = ARENA_ALIGN;
  block *cur = s->block;
  if (!cur || cur->size - cur->used < need) {
    size_t size = need > DEFAULT_BLOCK ? need : DEFAULT_BLOCK;
    block *b = block_new(size, cur);
    if (!b) {
      ct_error(CT_ERR_NOMEM, "arena: out of memory allocating %zu bytes", need);
      return NULL;
    }
    if (cur) s->arena_used_before += cur->used;
    s->block = cur = b;
  }
  void *p = cur->mem + cur->used;
  cur->used += need;
  size_t total = s->arena_used_before + cur->used;
  if (total > s->arena_peak) s->arena_peak = total;
  return p;
}

void *ct_arena_calloc(size_t bytes) {
  void *p = ct_arena_alloc(bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

void ct_arena_reset(void) {
  ct_session *s = ct_session_current();
  forget_step(s);
  block *cur = s->block;
  if (!cur) return;
  // Several blocks were needed, or blocks were given back by a rewind
  // (scratch beyond the current block, so the high-water mark exceeds it):
  // replace them by one block that holds it all, so the next step makes no
  // system allocations (and takes no page faults on fresh scratch pages).
  size_t total = 0;
  for (block *b = cur; b; b = b->prev) total += b->size;
  if (total < s->arena_peak) total = s->arena_peak;
  if (cur->prev || cur->size < total) {
    block_chain_free(cur);
    s->block = block_new(total, NULL);  // NULL is fine: the next alloc retries
  } else {
    cur->used = 0;
  }
  s->arena_used_before = 0;
}

size_t ct_arena_used_bytes(void) {
  const ct_session *s = ct_session_current();
  return s->arena_used_before + (s->block ? s->block->used : 0);
}

size_t ct_arena_peak_bytes(void) { return ct_session_current()->arena_peak; }

ct_arena_mark ct_arena_get_mark(void) {
  const ct_session *s = ct_session_current();
  return (ct_arena_mark){.block = s->block,
                         .used = s->block ? s->block->used : 0,
                         .resets = s->arena_resets};
}

void ct_arena_rewind(ct_arena_mark mark) {
  ct_session *s = ct_session_current();
  if (mark.resets != s->arena_resets) return;  // a reset already freed it all
  while (s->block && s->block != mark.block) {
    block *prev = s->block->prev;
    free(s->block->mem);
    free(s->block);
    s->block = prev;
    if (prev) s->arena_used_before -= prev->used;
  }
  if (s->block) s->block->used = mark.used;
}

void ct_arena_release(void) {
  ct_session *s = ct_session_current();
  forget_step(s);
  block_chain_free(s->block);
  s->block = NULL;
  s->arena_used_before = 0;
  free(s->workspace);
  s->workspace = NULL;
  s->workspace_bytes = 0;
}
