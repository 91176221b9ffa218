// Data-parallel optimizer steps: N ranks (train/dist.h) with train.accum = A
// each take the optimizer step of one process with train.accum = N·A, bit
// for bit. The trainer's step reads the same for one process and for N:
//
//   for (a = 0; a < A; a++) {                  // this rank's micro-batches
//     m = ct_dp_micro_batch(dp, a);            // its index in the step, 0..K-1
//     ctx = train ctx keyed by (seed, step * K + m);
//     ctx.bn_updates = ct_dp_bn_log(dp);
//     ct_params_zero_grad(p);
//     loss = ...;                              // scaled by 1/K when K > 1
//     ct_dp_backward(dp, loss, a);
//   }
//   ct_dp_reduce_finish(dp);                   // p->grad: the step's gradient
//   ct_dp_gather_micro(dp, mine, k, all);      // losses etc. of all K
//   ct_dp_apply_bn_updates(dp);
//   ct_dp_clip(dp, max_norm, &norm);
//   ct_dp_optim_step(dp, opt, lr);
//
// Why the bits are those of one process:
// - Data: micro-batch m of a step is the batch one process would read m-th
//   in that step; rank r reads m = rA .. rA + A - 1 (train/task.h
//   data_stride) and keys its dropout by (step·K + m), as one process does.
// - Gradients: each micro-batch's gradient is computed on its own (from
//   zero) and the K are summed in the fixed tree of optim/grad_accum.h: a
//   rank sums its A (a subtree when A is a power of two), then the owner of
//   each part of the store sums the N ranks' parts with the tree over N.
//   MPI only moves the bytes (an all-to-all, then an all-gather), so no
//   sum depends on MPI's algorithm, N's factorization or message sizes.
// - Losses, counts, BatchNorm running statistics: every micro-batch's are
//   gathered and used in micro-batch order (ct_dp_gather_micro,
//   ct_dp_apply_bn_updates), as one process uses them.
// - Norm and clipping: every rank holds the whole summed gradient and
//   computes ct_clip_grad_norm; with ZeRO-1 the norm's span sums are
//   gathered (optim/grads.h), which gives the same double.
// - The optimizer is elementwise: every rank updates the whole store, or
//   (ZeRO-1) its shard with its shard's moments, then the parameters are
//   all-gathered.
//
// Overlap: the store is cut into buckets of `bucket_floats`. During the
// backward of a rank's last micro-batch, a bucket whose parameters' every
// gradient-writing node has run (ct_backward_with_hook) starts its
// all-to-all at once, in a fixed order (every rank issues collectives in
// the same order), so communication runs behind the rest of backward.
//
// ZeRO-1 (shard_optimizer): rank r owns the floats [shard[r], shard[r+1])
// of the store (boundaries at the norm's span starts): it receives the
// summed gradient of that range only, keeps the optimizer moments of that
// range only (÷N memory), updates it, and the parameters are all-gathered.
// Checkpoints still hold every moment: ct_dp_gather_optimizer_state
// collects them on rank 0 for the write.
//
// One process (N = 1) runs the same code without any exchange.
//
// What this file does not do: read data, choose micro-batches' contents,
// or write files (rank 0 does, train/trainer.c).
#ifndef CT_TRAIN_DATA_PARALLEL_H
#define CT_TRAIN_DATA_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

#include "autograd/ops_conv.h"
#include "core/params.h"
#include "optim/optim.h"

typedef struct ct_dp ct_dp;

typedef struct ct_dp_options {
  int64_t accum;         // micro-batches per rank and step (A >= 1)
  bool shard_optimizer;  // ZeRO-1 (a no-op for one process)
  size_t bucket_floats;  // gradient floats per bucket; 0: one exchange
                         // after backward (no overlap)
} ct_dp_options;

// Sets up the step for `p` (registered, and loaded from a checkpoint when
// resuming: with ZeRO-1 each rank then keeps its shard of the moments in
// p->state and frees the rest). `opt` says which state slots exist.
ct_status ct_dp_new(ct_dp **out, ct_params *p, const ct_optim *opt,
                    const ct_dp_options *o);
void ct_dp_free(ct_dp *dp);

// K = N·A, the micro-batches of a step over all ranks.
int64_t ct_dp_micro_batches(const ct_dp *dp);
// The step index m of this rank's micro-batch a: rank·A + a.
int64_t ct_dp_micro_batch(const ct_dp *dp, int64_t a);

// The BatchNorm update log for the next micro-batch (emptied here).
ct_bn_update_log *ct_dp_bn_log(ct_dp *dp);
// Backward of this rank's micro-batch a (0 <= a < A, in order; `loss`
// already scaled by 1/K; NULL: the micro-batch failed and counts as a zero
// gradient, so that the ranks' exchanges still match), folded into the
// rank's sum. After a = A - 1 the exchange is under way.
ct_status ct_dp_backward(ct_dp *dp, ct_tensor *loss, int64_t a);
// Completes the exchange: p->grad holds the step's gradient, the sum of all
// K micro-batches' (ZeRO-1: in this rank's shard only).
ct_status ct_dp_reduce_finish(ct_dp *dp);

// Each micro-batch's k doubles: this rank's A records `mine` (A·k) become
// all K records in step order in `all` (K·k), the same on every rank.
ct_status ct_dp_gather_micro(ct_dp *dp, const double *mine, int64_t k,
                             double *all);
// Applies every micro-batch's BatchNorm running-statistics updates (what
// ct_dp_bn_log recorded) in step order, on every rank.
ct_status ct_dp_apply_bn_updates(ct_dp *dp);

// ct_clip_grad_norm of the summed gradient: *norm before clipping.
ct_status ct_dp_clip(ct_dp *dp, double max_norm, double *norm);
// ct_grads_check_finite of the summed gradient (the first non-finite
// parameter in registry order, on every rank).
ct_status ct_dp_check_finite(ct_dp *dp, int64_t step);
// The optimizer step of the whole store on every rank, or (ZeRO-1) of each
// rank's shard followed by an all-gather of the parameters.
ct_status ct_dp_optim_step(ct_dp *dp, ct_optim *opt, float lr);

// The mean time of n gradient exchanges of zero gradients (the traffic of
// a step without its backward, which a budgeted run's timed passes lack),
// after one untimed exchange that lines the ranks up. Every rank calls it
// with the same n; nothing but the gradients changes. 0 for one process.
ct_status ct_dp_time_exchange(ct_dp *dp, int n, double *seconds);

// ZeRO-1: collects every rank's moments into rank 0's p->state, for a
// checkpoint (every rank calls it); ct_dp_release_optimizer_state frees
// them again. Nothing to do otherwise.
ct_status ct_dp_gather_optimizer_state(ct_dp *dp);
void ct_dp_release_optimizer_state(ct_dp *dp);

// What a step moves: floats this rank sends per step (the all-to-all and
// the all-gather), the optimizer-state floats it holds, the buckets.
typedef struct ct_dp_stats {
  double floats_sent;
  size_t state_floats;
  int buckets;
} ct_dp_stats;
ct_dp_stats ct_dp_get_stats(const ct_dp *dp);

#endif
