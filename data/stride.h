// Strided reading of a batch stream, for data-parallel training: a rank
// reads `take` batches, passes over the next `skip` (the other ranks'
// share of the step) without building them, reads `take` again, and so on.
// The loaders (data/batch.h, data/image.h, the detection task) keep one of
// these and move their (epoch, position) with ct_batch_stride_advance after
// each batch, so a prefetch thread builds the batch the rank will read next.
//
// What this file does not do: choose the rank's first batch (the caller
// seeks there) or know the epochs' lengths (the loader passes them).
#ifndef CT_DATA_STRIDE_H
#define CT_DATA_STRIDE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"

typedef struct ct_batch_stride {
  int64_t take;   // batches read per group (0: every batch, no skipping)
  int64_t skip;   // batches passed over after each group
  int64_t taken;  // read so far in the current group
} ct_batch_stride;

// Moves (*epoch, *position) past the batch just read: one on, or 1 + skip
// after the last batch of a group, across epochs of batches(arg, e)
// batches each. `eager` loaders turn the end of an epoch into the next
// epoch's start at once; the others keep (e, batches) until the next read,
// and so does this.
static inline void ct_batch_stride_advance(
    ct_batch_stride *s, int64_t *epoch, int64_t *position,
    int64_t (*batches)(void *arg, int64_t epoch), void *arg, bool eager) {
  int64_t n = 1;
  if (s->take > 0 && ++s->taken == s->take) {
    s->taken = 0;
    n += s->skip;
  }
  *position += n;
  for (;;) {
    int64_t count = batches(arg, *epoch);
    if (count < 1 || *position < count + (eager ? 0 : 1)) break;
    *position -= count;
    ++*epoch;
  }
}

// Where a loader of fixed-length epochs stands: the batch its next read
// returns, the epochs' length and its data-parallel stride. The detection,
// captioning and contrastive tasks keep one (train/task.h reads it for the
// trainer).
typedef struct ct_batch_cursor {
  int64_t epoch, position;  // the batch the next read returns
  int64_t batches;          // per epoch
  ct_batch_stride stride;   // data-parallel reading
} ct_batch_cursor;

static inline int64_t ct_batch_cursor_batches(void *cursor, int64_t epoch) {
  (void)epoch;
  return ((const ct_batch_cursor *)cursor)->batches;
}

// The next batch of a cursor over shuffled examples: past an epoch's last
// batch it moves to the next epoch's first; order (n entries) holds the
// permutation of epoch *order_epoch, drawn again from (seed,
// ct_rng_stream(purpose, epoch)) when the epoch changes. Returns the
// batch's B entries of order, its epoch in *epoch, and moves the cursor
// past it (and past the other ranks' share: the stride).
static inline const int64_t *ct_batch_cursor_next(
    ct_batch_cursor *c, int64_t *order, int64_t *order_epoch, int64_t n,
    int64_t B, uint64_t seed, uint32_t purpose, int64_t *epoch) {
  if (c->position >= c->batches) {
    c->epoch++;
    c->position = 0;
  }
  if (*order_epoch != c->epoch) {
    ct_rng r = ct_rng_make(seed, ct_rng_stream(purpose, (uint64_t)c->epoch));
    ct_rng_permutation(&r, order, n);
    *order_epoch = c->epoch;
  }
  const int64_t *batch = order + c->position * B;
  *epoch = c->epoch;
  ct_batch_stride_advance(&c->stride, &c->epoch, &c->position,
                          ct_batch_cursor_batches, c, false);
  return batch;
}

// Seeks a loader whose epochs hold `batches` batches each to (epoch,
// position), the batch its next read returns, and starts a new group of
// the stride. A place outside the epochs is an error naming `who` (the
// task).
static inline ct_status ct_batch_seek(const char *who, int64_t batches,
                                      int64_t epoch, int64_t position,
                                      int64_t *at_epoch, int64_t *at_position,
                                      ct_batch_stride *s) {
  if (epoch < 0 || position < 0 || position > batches)
    return ct_error(CT_ERR_ARG,
                    "%s: cannot seek to epoch %lld batch %lld (%lld batches "
                    "per epoch)",
                    who, (long long)epoch, (long long)position,
                    (long long)batches);
  *at_epoch = epoch;
  *at_position = position;
  s->taken = 0;
  return CT_OK;
}

#endif
