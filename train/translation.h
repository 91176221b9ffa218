// The translation task (train/task.h): parallel text, vocabularies, the
// seq2seq Transformer, label-smoothed training, BLEU and exact-match
// evaluation, and translating new text.
#ifndef CT_TRAIN_TRANSLATION_H
#define CT_TRAIN_TRANSLATION_H

#include "train/task.h"

// Translates n lines of source text (tokenized like the training data) with
// beam search; out[i] is a malloc'd detokenized line.
ct_status ct_translation_translate(ct_task *t, const char *const *lines,
                                   int64_t n, int beam, char **out);

#endif
