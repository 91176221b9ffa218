// Soft-target cross-entropy and DeiT's distillation losses (see distill.h).
#include "nn/distill.h"

#include "autograd/ops.h"
#include "core/error.h"

ct_tensor *ct_nn_soft_cross_entropy(ct_tensor *logits, ct_tensor *targets) {
  if (!logits || !targets) return NULL;
  if (logits->ndim != 2 || targets->ndim != 2 ||
      logits->shape[0] != targets->shape[0] ||
      logits->shape[1] != targets->shape[1]) {
    ct_error(CT_ERR_SHAPE,
             "soft_cross_entropy: logits and targets must both "
             "be (B, K)");
    return NULL;
  }
  ct_tensor *nll = ct_mul(ct_log_softmax(logits), targets);
  return ct_scale(ct_sum(nll), -1.0f / (float)logits->shape[0]);
}

// The teacher's predicted class per row, as i32 (B).
static ct_tensor *argmax_rows(ct_tensor *z) {
  const int64_t B = z->shape[0], K = z->shape[1];
  ct_tensor *out = ct_tensor_empty(CT_I32, CT_SHAPE(B));
  if (!out) return NULL;
  for (int64_t b = 0; b < B; b++) {
    const float *row = ct_f32(z) + b * K;
    int64_t best = 0;
    for (int64_t k = 1; k < K; k++)
      if (row[k] > row[best]) best = k;
    ct_i32(out)[b] = (int32_t)best;
  }
  return out;
}

ct_tensor *ct_nn_distill_loss(ct_tensor *cls_logits, ct_tensor *dist_logits,
                              ct_tensor *teacher_logits, ct_tensor *labels,
                              ct_tensor *soft_targets,
                              const ct_nn_distill_opts *opts) {
  ct_tensor *base;
  if (soft_targets) {
    base = ct_nn_soft_cross_entropy(cls_logits, soft_targets);
  } else {
    ct_ce_opts ce = ct_ce_defaults();
    ce.label_smoothing = opts->label_smoothing;
    base = ct_cross_entropy(cls_logits, labels, &ce);
  }
  if (opts->kind == CT_NN_DISTILL_NONE || !base) return base;
  if (!dist_logits || !teacher_logits) {
    ct_error(CT_ERR_ARG,
             "distill_loss: distillation needs the distillation "
             "head's and the teacher's logits");
    return NULL;
  }
  if (teacher_logits->ndim != 2 || dist_logits->ndim != 2 ||
      teacher_logits->shape[0] != dist_logits->shape[0] ||
      teacher_logits->shape[1] != dist_logits->shape[1]) {
    ct_error(CT_ERR_SHAPE,
             "distill_loss: teacher and distillation logits "
             "must have the same (B, K) shape");
    return NULL;
  }
  ct_tensor *distill;
  if (opts->kind == CT_NN_DISTILL_HARD) {
    distill = ct_cross_entropy(dist_logits, argmax_rows(teacher_logits), NULL);
  } else {
    const float tau = opts->tau;
    ct_tensor *student = ct_log_softmax(ct_scale(dist_logits, 1.0f / tau));
    ct_tensor *teacher = ct_log_softmax(ct_scale(teacher_logits, 1.0f / tau));
    const int64_t per =
        opts->kl_per_sample ? dist_logits->shape[0] : dist_logits->numel;
    distill = ct_scale(ct_kl_div(student, teacher, true, CT_REDUCE_SUM),
                       tau * tau / (float)per);
  }
  return ct_add(ct_scale(base, 1.0f - opts->alpha),
                ct_scale(distill, opts->alpha));
}
