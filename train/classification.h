// The image classification task (ViT, DeiT, ResNet) behind the ct_task_ops
// table (train/task.h), and the `ctrain classify` command's work.
//
// Data: a generated shape set (source = toy), IDX files (Fashion-MNIST,
// MNIST), CIFAR-10/100 binary files or folders of PNGs (source = files,
// image_format). The validation split is `val_holdout` training images
// (a fraction below 1 of them, at most CT_VAL_HOLDOUT_FRACTION_MAX, or a
// count) picked by a seeded permutation (or the test split when 0). The class
// names and the input normalization (C, H, W, per-channel mean and std) are
// stored in checkpoints ("classes", "image"), so eval and classify never
// need the training data.
//
// Model: [model] arch = vit | deit | resnet | swin | cvt. DeiT distills
// from a teacher, any classification checkpoint ([model] teacher), run
// without recording and in eval mode on the same (augmented, mixed)
// batch; its input is re-normalized when its statistics differ. Swin,
// without a distillation token, distills on its class head when a teacher
// is set.
//
// Evaluation: loss (cross-entropy without smoothing), accuracy, top5 and a
// confusion matrix (summary text, and confusion_<split>.png in the run
// folder at the end of a run). DeiT evaluates the mean of its two heads.
#ifndef CT_TRAIN_CLASSIFICATION_H
#define CT_TRAIN_CLASSIFICATION_H

// The most images a fractional [data] val_holdout takes (the default, 0.1,
// of 60000 Fashion-MNIST images is 5000 too): a larger set only slows each
// validation; a count holds out more.
enum { CT_VAL_HOLDOUT_FRACTION_MAX = 5000 };

#include <stdio.h>

#include "nn/module.h"
#include "nn/resnet.h"
#include "nn/vit.h"
#include "train/task.h"

extern const ct_task_ops ct_task_classification;

// The [model] keys of a ViT (patch, dim, depth, heads, mlp_dim, dropout,
// attn_dropout, drop_path) and of a ResNet (width, stages, blocks) as this
// task reads them; the contrastive task's image towers take the same.
// Image size, channels and classes are left for the caller.
ct_nn_vit_config ct_classification_vit_config(const ct_config *cfg);
ct_nn_resnet_config ct_classification_resnet_config(const ct_config *cfg);

// Classifies PNG files (converted to the model's channels and resized to
// its input size): prints each file's `top` classes with probabilities to
// `out`. With attention_png (ViT, DeiT, Swin, CvT), also writes the images
// with their attention rollout overlaid, side by side: the class token's
// (ViT/DeiT), the average pool's (Swin, nn/swin.h), CvT's through its
// convolutions (nn/cvt.h).
ct_status ct_classification_classify(ct_task *t, const char *const *paths,
                                     int n, int top, const char *attention_png,
                                     FILE *out);

// What `ctrain analyze` (train/analyze.h) reads of an open model.
typedef struct ct_classification_view {
  const char *arch;  // the [model] arch name
  int C, H, W;       // the input images
  // The token grid of the rollout maps: the patch grid (ViT, DeiT, Swin),
  // the first stage's map (CvT); 0 x 0 for an arch without attention.
  int64_t grid_h, grid_w;
  // ViT/DeiT: pos_embed (1, T, D), its first prefix_tokens rows the class
  // (and distillation) token's; NULL otherwise.
  const ct_tensor *pos_embed;
  int64_t prefix_tokens;
} ct_classification_view;
void ct_classification_view_of(const ct_task *t, ct_classification_view *out);

// The first min(n, size) images of split "val" or "test" (u8 (C, H, W)
// each, consecutive, owned by the task) and their count. CT_ERR_ARG when
// the split has none.
ct_status ct_classification_split_images(ct_task *t, const char *split,
                                         int64_t n, const uint8_t **images,
                                         int64_t *count);

// The model in eval mode on n images (u8 (C, H, W) each, normalized as its
// input): every attention layer's per-head weights appended to *log (arena
// tensors: valid until the arena is rewound) and, when rollout is not
// NULL, each image's attention rollout (n, grid_h * grid_w of the view).
// CT_ERR_ARG for an arch without attention.
ct_status ct_classification_attention(ct_task *t, const uint8_t *images,
                                      int64_t n, ct_nn_attention_log *log,
                                      float *rollout);

#endif
