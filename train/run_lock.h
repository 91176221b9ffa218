// The lock of a run folder: one `ctrain train` at a time writes into it.
//
//   int lock;
//   if (ct_run_lock(run_dir, &lock) != CT_OK) ...ct_last_error()...
//   ... train: checkpoints, config.ini, metrics.jsonl ...
//   ct_run_unlock(lock);
//
// The lock is a POSIX record lock (fcntl F_SETLK) on DIR/.lock, held for
// the life of the run. The kernel drops it when the process ends, however
// it ends (kill -9 included), so a stale lock file never blocks the next
// run: only a live holder does, and the error names its pid (F_GETLK),
// also written into the file for people to read. The file itself stays.
// Readers (eval, inspect, plot) take no lock: every file of a run is
// replaced atomically, so they always see whole files.
//
// What this file does not do: wait for the holder, or lock anything but
// the run folder (the generators' outputs are guarded by their --force).
#ifndef CT_TRAIN_RUN_LOCK_H
#define CT_TRAIN_RUN_LOCK_H

#include "core/error.h"

// Takes the lock of the existing folder `dir` into *fd. CT_ERR_STATE
// "DIR is in use by another ctrain train (pid N) ..." when a live process
// holds it; CT_ERR_IO when the lock file cannot be made.
ct_status ct_run_lock(const char *dir, int *fd);
// Releases a lock taken by ct_run_lock (fd < 0: nothing).
void ct_run_unlock(int fd);

#endif
