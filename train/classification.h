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
// Model: [model] arch = vit | deit | resnet. DeiT distills from a teacher,
// any classification checkpoint ([model] teacher), run without recording
// and in eval mode on the same (augmented, mixed) batch; its input is
// re-normalized when its statistics differ.
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

#include "train/task.h"

extern const ct_task_ops ct_task_classification;

// Classifies PNG files (converted to the model's channels and resized to
// its input size): prints each file's `top` classes with probabilities to
// `out`. With attention_png (ViT/DeiT only), also writes the images with
// the class token's attention rollout overlaid, side by side.
ct_status ct_classification_classify(ct_task *t, const char *const *paths,
                                     int n, int top, const char *attention_png,
                                     FILE *out);

#endif
