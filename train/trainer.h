// `ctrain train`: the training loop shared by every task.
#ifndef CT_TRAIN_TRAINER_H
#define CT_TRAIN_TRAINER_H

#include <stdbool.h>

typedef struct ct_train_args {
  const char *config_path;
  const char *const *sets;  // "section.key=value" overrides
  int n_sets;
  const char *resume;  // NULL, "auto" or a checkpoint path
  // Resume without the checkpoint's optimizer state (moments from zero,
  // optimizer step 0): --reset-optimizer. Without it, a checkpoint that
  // lacks the state the optimizer keeps is refused.
  bool reset_optimizer;
  int threads;  // 0: from the config or the environment
} ct_train_args;

// Runs a training to its end; returns the program's exit status (0, or 1
// after printing "ctrain: error: ..." to stderr).
int ct_train_run(const ct_train_args *args);

#endif
