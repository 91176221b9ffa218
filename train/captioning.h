// The image captioning task (Show, Attend and Tell) behind the ct_task_ops
// table (train/task.h), and the `ctrain caption` command's work.
//
// Data: the generated set of data/toy_captions.h (source = toy; shapes, or
// Fashion-MNIST items with toy_items = fmnist read from image_dir) or
// captions files with PNG images (source = files: captions_train +
// captions_train_images, the same for val and test; data/captions.h).
// Images are normalized per channel with the training images' statistics.
// A training example is one (image, caption) pair; the batches are a seeded
// permutation of the pairs per epoch, so a resumed run sees the same ones.
// Captions are tokenized (word or char, lowercased by [data] lowercase) and
// mapped to a vocabulary of the training captions (section
// "vocab.captions" of the checkpoint).
//
// Model and loss: nn/captioner.h; cross-entropy on the real tokens (the
// caption and <eos>; padding excluded) plus [train] attention_reg times the
// doubly stochastic attention term. [model] encoder_init names a
// classification checkpoint (or run folder) of a ResNet whose weights
// initialize the encoder of a new run.
//
// Evaluation decodes every image (greedy, or beam search with beam > 1;
// never teacher-forced) and scores the captions against all references of
// their image: corpus BLEU-1..4 ("bleu1".."bleu4", train/bleu.h), BLEU-4 on
// the images flagged heldout ("bleu4_heldout", with "heldout_images"), and
// "grounding": of the generated words that name an object kind of the split
// (its "objects" names, singular or plural), the percentage whose step's
// attention peak (the feature-map cell of largest weight, at its centre)
// falls inside a box of that kind in the image.
#ifndef CT_TRAIN_CAPTIONING_H
#define CT_TRAIN_CAPTIONING_H

#include <stdio.h>

#include "train/task.h"

extern const ct_task_ops ct_task_captioning;

// Captions PNG files (converted and resized to the model's input): prints
// "path: caption" per file. With attention_png, writes the first image's
// attention panels there: one per generated word (and <eos>), the step's
// attention map upsampled over the image, the word under it.
ct_status ct_captioning_caption(ct_task *t, const char *const *paths, int n,
                                int beam, const char *attention_png, FILE *out);

#endif
