// A differentiable all-gather over the ranks of a data-parallel run
// (train/dist.h), for losses that need every rank's rows: open_clip's
// gather_with_grad, which CLIP's contrastive loss uses so that each rank's
// loss sees the negatives of the whole global batch.
//
//   x (B, E) on each of N ranks -> all (N·B, E): rank r's rows at r·B.
//
// Backward: every rank holds d(its loss)/d(all); the true gradient of this
// rank's rows is the sum over ranks s of rank s's gradient of rows
// [r·B, (r+1)·B). The gathered gradients are exchanged (an all-gather of
// N·B·E floats per rank) and summed in rank order, so the sum does not
// depend on MPI's algorithm.
//
// One process: `all` is x itself (no node, no copy).
//
// Every rank must call it (and run its backward) at the same point, with
// the same B and E: it is a collective. A rank whose micro-batch fails
// before the gather (out of memory) leaves the others waiting in it, where
// the trainer's failure exchange comes too late: such a job has to be
// ended from outside (Ctrl-C, the launcher's timeout).
//
// What this file does not do: rows of different counts per rank.
#ifndef CT_TRAIN_DIST_GATHER_H
#define CT_TRAIN_DIST_GATHER_H

#include "core/tensor.h"

// NULL (with an error) when the exchange fails or memory runs out.
ct_tensor *ct_dist_gather_rows(ct_tensor *x);

#endif
