// Bump arena. Memory comes in blocks; when a step needs more than the current
// block holds, another block is chained on. On reset, several blocks are
// merged into one block of their total size (at least the high-water mark,
// which counts scratch given back by rewinds), so the next step fits in one
// block and the loop settles into zero system allocations.
#include "core/arena.h"
#include "core/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { ARENA_ALIGN = 64 };
static const size_t DEFAULT_BLOCK = (size_t)16 << 20;

typedef struct block {
  struct block *prev;
  size_t size, used;
  unsigned char *mem;
} block;

static block *current;        // newest block; older ones hang off ->prev
static size_t used_total;     // bytes handed out in blocks other than current
static size_t peak_total;
static unsigned generation = 1;

static block *block_new(size_t size, block *prev) {
  block *b = malloc(sizeof *b);
  if (!b) return NULL;
  b->mem = aligned_alloc(ARENA_ALIGN, size);
  if (!b->mem) { free(b); return NULL; }
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

void *ct_arena_alloc(size_t bytes) {
  size_t need = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  if (need < bytes) {
    ct_error(CT_ERR_NOMEM, "arena: request of %zu bytes overflows", bytes);
    return NULL;
  }
  if (need == 0) need = ARENA_ALIGN;
  if (!current || current->size - current->used < need) {
    size_t size = need > DEFAULT_BLOCK ? need : DEFAULT_BLOCK;
    if (current) used_total += current->used;
    block *b = block_new(size, current);
    if (!b) {
      if (current) used_total -= current->used;
      ct_error(CT_ERR_NOMEM, "arena: out of memory allocating %zu bytes", need);
      return NULL;
    }
    current = b;
  }
  void *p = current->mem + current->used;
  current->used += need;
  size_t total = used_total + current->used;
  if (total > peak_total) peak_total = total;
  return p;
}

void *ct_arena_calloc(size_t bytes) {
  void *p = ct_arena_alloc(bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

void ct_arena_reset(void) {
  generation++;
  if (!current) return;
  // Several blocks were needed, or blocks were given back by a rewind
  // (scratch beyond the current block, so the high-water mark exceeds it):
  // replace them by one block that holds it all, so the next step makes no
  // system allocations (and takes no page faults on fresh scratch pages).
  size_t total = 0;
  for (block *b = current; b; b = b->prev) total += b->size;
  if (total < peak_total) total = peak_total;
  if (current->prev || current->size < total) {
    block_chain_free(current);
    current = block_new(total, NULL);  // NULL is fine: the next alloc retries
  } else {
    current->used = 0;
  }
  used_total = 0;
}

unsigned ct_arena_generation(void) { return generation; }

size_t ct_arena_used_bytes(void) {
  return used_total + (current ? current->used : 0);
}

size_t ct_arena_peak_bytes(void) { return peak_total; }

ct_arena_mark ct_arena_get_mark(void) {
  return (ct_arena_mark){.block = current, .used = current ? current->used : 0,
                         .generation = generation};
}

void ct_arena_rewind(ct_arena_mark mark) {
  if (mark.generation != generation) return;  // a reset already freed it all
  while (current && current != mark.block) {
    block *prev = current->prev;
    free(current->mem);
    free(current);
    current = prev;
    if (current) used_total -= current->used;
  }
  if (current) current->used = mark.used;
}

void ct_arena_release(void) {
  block_chain_free(current);
  current = NULL;
  used_total = 0;
  generation++;
}
