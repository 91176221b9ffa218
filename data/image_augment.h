// Training-time image augmentation: per image, random crop with zero
// padding, horizontal flip and a small RandAugment; per batch, mixup and
// cutmix with soft targets.
//
// Per image (u8, (C,H,W)), in the order of the usual CIFAR/DeiT pipelines:
//   1. random crop: pad each side with `crop_padding` pixels of value
//      fill[c], crop back an HxW window at a uniform offset (torchvision
//      RandomCrop(size, padding));
//   2. horizontal flip with probability 1/2 (RandomHorizontalFlip);
//   3. RandAugment (Cubuk et al. 2020, timm's magnitude scale 0..10):
//      `randaug_ops` ops, each picked uniformly from identity, autocontrast,
//      brightness, contrast, color, solarize, posterize, translate-x/y and
//      shear-x/y, at magnitude ~ N(randaug_magnitude, randaug_magnitude_std)
//      clipped to [0, 10]; signed ops flip their sign with probability 1/2.
//      Geometric ops sample the nearest pixel and fill with fill[c]; the
//      color ops follow PIL's ImageEnhance (blend with a degenerate image).
// Per batch (f32 (B,C,H,W), after normalization), as timm's Mixup in batch
// mode: with probability mix_prob the batch is mixed; cutmix is chosen over
// mixup with probability switch_prob when both alphas are > 0; lambda ~
// Beta(alpha, alpha); row i is mixed with row B-1-i (mixup: a blend; cutmix:
// a box of area ~ (1 - lambda) HW pasted, lambda then set to the kept
// area). Targets: lambda * onehot(y_i) + (1 - lambda) * onehot(y_{B-1-i}),
// each one-hot smoothed (1 - s + s/K on the class, s/K elsewhere).
//
// Every draw comes from the ct_rng the caller passes, sequentially: the
// result is a function of that generator's (seed, stream, offset).
//
// What this file does not do: rotation, equalize, random erasing, resizing.
#ifndef CT_DATA_IMAGE_AUGMENT_H
#define CT_DATA_IMAGE_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rng.h"

#define CT_IMAGE_MAX_CHANNELS 3

typedef struct ct_image_aug {
  int crop_padding;  // 0: no random crop
  bool hflip;
  int randaug_ops;              // 0: no RandAugment
  float randaug_magnitude;      // 0..10 (DeiT: 9)
  float randaug_magnitude_std;  // noise on the magnitude per op (DeiT: 0.5)
  float mixup_alpha;            // > 0: mixup on
  float cutmix_alpha;           // > 0: cutmix on
  float mix_prob;               // probability a batch is mixed (timm: 1)
  float switch_prob;            // cutmix instead of mixup, when both on
  float label_smoothing;        // in the soft targets of mixed batches
} ct_image_aug;

static inline bool ct_image_aug_mixing(const ct_image_aug *a) {
  return a->mixup_alpha > 0 || a->cutmix_alpha > 0;
}

// How strong the RandAugment and mixing of a run are, from its length and
// where in it a batch falls (short runs and the first steps learn faster
// with less of them: a ViT under RandAugment, mixup and cutmix together
// stays at chance for the first thousands of steps). Strength s in [0, 1]
// is the product of
//   - a length share: 1 for a run of full_epochs epochs or more, 0 for one
//     of off_epochs or fewer, linear in between (full_epochs = 0: always 1);
//   - a ramp: progress / ramp over the first `ramp` of the run (progress =
//     batch / the run's batches), then 1 (ramp = 0: always 1).
// At strength s the RandAugment magnitude and its noise are s times the
// configured ones (no ops at all at s = 0) and a batch is mixed with
// probability s · mix_prob; crops and flips are kept as configured. A pure
// function of the batch's place and the run's length: the same batch at
// every thread count, with or without prefetch, before and after a resume.
typedef struct ct_aug_schedule {
  double full_epochs;  // a run this long gets the configured strengths
  double off_epochs;   // one this short none (< full_epochs)
  double ramp;         // share of the run over which s rises from 0 (0..1)
} ct_aug_schedule;

static inline bool ct_aug_schedule_on(const ct_aug_schedule *s) {
  return s->full_epochs > 0 || s->ramp > 0;
}

// The strength of a batch at `progress` (0..1) of a run of `run_epochs`.
double ct_aug_strength(const ct_aug_schedule *s, double run_epochs,
                       double progress);
// The augmentation `a` at strength s (see above).
ct_image_aug ct_image_aug_at_strength(const ct_image_aug *a, double s);

// The RandAugment ops, in the order the draw picks from.
typedef enum ct_randaug_op {
  CT_RANDAUG_IDENTITY,
  CT_RANDAUG_AUTOCONTRAST,
  CT_RANDAUG_BRIGHTNESS,
  CT_RANDAUG_CONTRAST,
  CT_RANDAUG_COLOR,
  CT_RANDAUG_SOLARIZE,
  CT_RANDAUG_POSTERIZE,
  CT_RANDAUG_TRANSLATE_X,
  CT_RANDAUG_TRANSLATE_Y,
  CT_RANDAUG_SHEAR_X,
  CT_RANDAUG_SHEAR_Y,
  CT_RANDAUG_OP_COUNT
} ct_randaug_op;

// Augments one image: src (C,H,W) -> dst (C,H,W); tmp is scratch of the
// same size. src, dst and tmp must not overlap. C <= CT_IMAGE_MAX_CHANNELS.
void ct_image_augment(const ct_image_aug *a, ct_rng *rng, const uint8_t *src,
                      uint8_t *dst, uint8_t *tmp, int C, int H, int W,
                      const uint8_t *fill);
// One RandAugment op at magnitude m (0..10; sign -1/+1 for signed ops):
// src -> dst, both (C,H,W), not overlapping.
void ct_randaug_apply(ct_randaug_op op, float m, int sign, const uint8_t *src,
                      uint8_t *dst, int C, int H, int W, const uint8_t *fill);

// Mixes a batch in place: images (B,C,H,W); labels (B) in [0, K); writes
// targets (B,K). Returns lambda (1 when the batch was left unmixed) and sets
// *cutmix to whether cutmix was used.
float ct_image_mix_batch(const ct_image_aug *a, ct_rng *rng, float *images,
                         const int32_t *labels, float *targets, int64_t B,
                         int C, int H, int W, int K, bool *cutmix);

#endif
