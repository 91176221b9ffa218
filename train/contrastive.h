// Contrastive image-text training (CLIP, Radford et al. 2021) behind the
// ct_task_ops table (train/task.h), and the work of `ctrain zeroshot` and
// `ctrain eval --zeroshot`.
//
// Data: the captioned images the captioning task reads (data/captions.h:
// source = files with captions_train + captions_train_images, the same for
// val and test; or source = toy, data/toy_captions.h, with toy_items =
// shapes | fmnist and toy_max_objects). A training example is an image and
// ONE of its captions, caption u32(seed, epoch, image) mod count, so the
// pairs depend on neither the batch layout, the thread count nor resuming;
// the images are a seeded permutation per epoch. Captions are tokenized as
// captioning does (word or char, [data] lowercase), mapped to the training
// captions' vocabulary (checkpoint section "vocab.captions") and framed as
// <bos> w1 .. wn <eos>, the end-of-text feature read at <eos>; a caption
// longer than context_length - 2 tokens is cut before its <eos>.
//
// Model and loss: nn/clip.h ([model] arch = vit | resnet with the
// classification task's keys, embed_dim, text_width, text_layers,
// text_heads, text_mlp, context_length). After every optimizer step the
// temperature parameter logit_scale is clamped to [0, ln 100].
//
// Data-parallel (mpirun -np N): each rank's image and text features are
// all-gathered with their gradient (train/dist_gather.h) and each rank's
// loss is open_clip's local loss (its rows against the global batch), so
// a step sees the N·B global batch's negatives, as one process with
// batch_size N·B would. Not its bits: see the README.
//
// Evaluation: every image and caption of the split embedded; recall@1/5/10
// image -> text (an image is found when any of its captions is among the
// top K texts) and text -> image (its image among the top K images), as
// fractions: r1_i2t, r5_i2t, r10_i2t, r1_t2i, r5_t2i, r10_t2i, and the same
// with the queries restricted to the images flagged heldout (and their
// captions) against the whole split, suffixed _heldout. A query's rank is
// the number of candidates scoring strictly higher than its best correct
// one (ties, as identical captions of other images, do not count against
// it). "temperature" is exp(logit_scale).
#ifndef CT_TRAIN_CONTRASTIVE_H
#define CT_TRAIN_CONTRASTIVE_H

#include <stdio.h>

#include "data/image.h"
#include "train/task.h"

extern const ct_task_ops ct_task_contrastive;

// The prompts classes are compared with when no --template is given: the
// toy captions' own forms, "{colour}" standing for the palette's colours
// (see ct_contrastive_zeroshot).
extern const char *const ct_contrastive_default_templates[];
extern const int ct_contrastive_default_template_count;

// What zero-shot classification compares images with: K class names and
// the templates ("a photo of a {}": {} is replaced by the name, "{colour}"
// by a palette colour's name).
typedef struct ct_zeroshot_prompts {
  const char *const *labels;
  int n_labels;
  const char *const *templates;  // NULL: the default set
  int n_templates;
} ct_zeroshot_prompts;

// `ctrain zeroshot`: prints each PNG's `top` classes with probabilities
// (softmax of exp(logit_scale) times the cosine similarities; for a model
// trained on generated canvases, an image of another size is a gray item
// drawn once in each palette colour, each view meeting the prompts of its
// colour, the class logit the mean over views). A word of a
// prompt that the vocabulary lacks is CT_ERR_ARG naming it. With
// panels_png, draws the first images as the model sees them (the first
// canvas), each captioned with its best class and probability.
ct_status ct_contrastive_zeroshot(ct_task *t, const ct_zeroshot_prompts *p,
                                  const char *const *paths, int n, int top,
                                  const char *panels_png, FILE *out);

// `ctrain eval --zeroshot PATH`: the accuracy of zero-shot classification
// of a labelled set read as the classification task reads it: a folder of
// IDX files (the test split, t10k-*), of CIFAR-10 binary files
// (test_batch.bin) or of PNG class folders. Labels: p->labels when given,
// else Fashion-MNIST's (IDX) as the toy generator names its items when the
// model was trained on them, else the set's class names. Adds "accuracy",
// "top5" (fractions) and "images" to out; a per-class summary to summary.
ct_status ct_contrastive_zeroshot_eval(ct_task *t, const char *path,
                                       const ct_zeroshot_prompts *p,
                                       ct_eval_metrics *out, FILE *summary);

#endif
