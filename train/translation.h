// The translation task (train/task.h): parallel text, vocabularies, the
// translator (a Transformer or the attention GRU, [model] arch),
// label-smoothed training, BLEU and exact-match evaluation, and translating
// new text.
#ifndef CT_TRAIN_TRANSLATION_H
#define CT_TRAIN_TRANSLATION_H

#include "train/task.h"

// Translates n lines of source text (tokenized like the training data) with
// beam search; out[i] is a malloc'd detokenized line.
ct_status ct_translation_translate(ct_task *t, const char *const *lines,
                                   int64_t n, int beam, char **out);
// Translates one line and draws its alignment, the attention weights of
// every output token (and <eos>) over the source tokens
// (ct_plot_alignment_png), into png_path; arch = rnn only. *out receives
// the translation (malloc'd), as ct_translation_translate's.
ct_status ct_translation_attention(ct_task *t, const char *line, int beam,
                                   const char *png_path, char **out);

#endif
