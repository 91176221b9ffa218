// The run folder's lock file (see run_lock.h).
#include "train/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ct_status ct_run_lock(const char *dir, int *fd) {
  *fd = -1;
  size_t n = strlen(dir) + sizeof "/.lock";
  char *path = malloc(n);
  if (!path) return ct_error(CT_ERR_NOMEM, "%s: out of memory", dir);
  snprintf(path, n, "%s/.lock", dir);
  int f = open(path, O_RDWR | O_CREAT, 0666);
  if (f < 0) {
    ct_status st = ct_error(CT_ERR_IO, "%s: cannot create the run's lock: %s",
                            path, strerror(errno));
    free(path);
    return st;
  }
  struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (fcntl(f, F_SETLK, &lk) != 0) {
    int err = errno;
    struct flock held = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    long pid = fcntl(f, F_GETLK, &held) == 0 && held.l_type != F_UNLCK
                   ? (long)held.l_pid
                   : -1;
    close(f);
    free(path);
    if (err != EACCES && err != EAGAIN)
      return ct_error(CT_ERR_IO, "%s/.lock: cannot lock the run folder: %s",
                      dir, strerror(err));
    char holder[48] = "";
    if (pid > 0) snprintf(holder, sizeof holder, " (pid %ld)", pid);
    return ct_error(CT_ERR_STATE,
                    "%s is in use by another ctrain train%s: wait for it to "
                    "end, or choose another [run] name",
                    dir, holder);
  }
  free(path);
  // The holder's pid, for people looking at the folder (the lock itself is
  // what counts).
  char text[32];
  int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
  if (ftruncate(f, 0) != 0 || write(f, text, (size_t)len) != len) {
    // Not fatal: the lock is held either way.
  }
  *fd = f;
  return CT_OK;
}

void ct_run_unlock(int fd) {
  if (fd >= 0) close(fd);
}
