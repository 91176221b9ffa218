// The checkpoints of a run folder: their file names, finding the newest one
// that reads cleanly (for --resume auto), and retention.
//
//   char path[4096];  ct_ckpt_filename(path, sizeof path, run_dir, step);
//   ct_ckpt_latest l;
//   if (ct_ckpt_find_latest(run_dir, &l) == CT_OK && l.path) ... l.ckpt ...
//   ct_ckpt_latest_free(&l);
//   ct_ckpt_prune(run_dir, 3, best_step, NULL);
//
// Checkpoints of a run are `DIR/ckpt-<step>.ct`, the step zero-padded to 8
// digits ("ckpt-00001200.ct"); newest means the largest step.
//
// What this file does not do: read or write a checkpoint's content
// (checkpoint.h), or decide when to save (the trainer does).
#ifndef CT_TRAIN_CHECKPOINT_FOLDER_H
#define CT_TRAIN_CHECKPOINT_FOLDER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "train/checkpoint.h"

// Writes "DIR/ckpt-00001200.ct" into buf; CT_ERR_ARG when it does not fit.
ct_status ct_ckpt_filename(char *buf, size_t size, const char *dir,
                           int64_t step);

typedef struct ct_ckpt_latest {
  char *path;     // the newest checkpoint that reads cleanly, or NULL
  int64_t step;   // its step (-1 when none)
  ct_ckpt *ckpt;  // it, already read; take it (set to NULL) or leave it to free
  char **skipped;  // "PATH: reason" for each newer checkpoint that was corrupt
  int n_skipped;
} ct_ckpt_latest;

// Finds the newest valid checkpoint in `dir`, reading candidates from the
// newest down. A folder with no checkpoints (or no folder) gives CT_OK with
// path NULL; so does one where every checkpoint is corrupt, with all of them
// in `skipped`.
ct_status ct_ckpt_find_latest(const char *dir, ct_ckpt_latest *out);
void ct_ckpt_latest_free(ct_ckpt_latest *l);

// Retention: deletes the checkpoints in `dir` other than the `keep_last`
// newest and the one of step `keep_step` (the best so far; -1 for none).
// Files not named like checkpoints are never touched. *n_deleted (may be
// NULL) receives how many were removed.
ct_status ct_ckpt_prune(const char *dir, int keep_last, int64_t keep_step,
                        int *n_deleted);

#endif
