// Classification losses beyond plain cross-entropy: soft-target
// cross-entropy (mixup/cutmix targets) and DeiT's distillation losses.
//
// DeiT (Touvron et al. 2021, and its reference DistillationLoss):
//   base = CE(z_cls, y) with label smoothing, or the soft-target CE when
//          the batch was mixed (the targets then carry the smoothing);
//   hard:  (1 - alpha) base + alpha CE(z_dist, argmax z_teacher)
//   soft:  (1 - alpha) base + alpha tau^2 KL(softmax(z_t/tau) || softmax(z_dist/tau)),
//          the KL summed and divided by z_dist's element count, as the
//          reference computes it (F.kl_div(..., reduction='sum',
//          log_target=True) * tau^2 / numel), or with kl_per_sample by the
//          row count: the paper's per-image KL (Hinton et al.'s scaling),
//          K times the reference's term for K classes.
// The teacher's logits are plain data (no gradient): run the teacher with
// recording off.
#ifndef CT_NN_DISTILL_H
#define CT_NN_DISTILL_H

#include "core/tensor.h"

// logits (B, K), targets (B, K) probabilities (no gradient) ->
// mean over rows of -sum_k targets * log_softmax(logits).
ct_tensor *ct_nn_soft_cross_entropy(ct_tensor *logits, ct_tensor *targets);

typedef enum ct_nn_distill_kind {
  CT_NN_DISTILL_NONE,  // base loss on z_cls only
  CT_NN_DISTILL_HARD,
  CT_NN_DISTILL_SOFT,
} ct_nn_distill_kind;

typedef struct ct_nn_distill_opts {
  ct_nn_distill_kind kind;
  float alpha;            // weight of the distillation term
  float tau;              // soft distillation temperature
  bool kl_per_sample;     // soft: KL summed / B (else / B*K, the reference)
  float label_smoothing;  // of the true-label CE (labels only)
} ct_nn_distill_opts;

// The loss of one batch. labels i32 (B) are used when soft_targets is
// NULL; soft_targets (B, K) otherwise. dist_logits and teacher_logits
// (B, K) are needed unless kind is NONE.
ct_tensor *ct_nn_distill_loss(ct_tensor *cls_logits, ct_tensor *dist_logits,
                              ct_tensor *teacher_logits, ct_tensor *labels,
                              ct_tensor *soft_targets,
                              const ct_nn_distill_opts *opts);

#endif
