// Checkpoint files of a run folder: naming them by step, listing them newest
// first, reading down to the newest valid one, and deleting old ones.
#include "train/checkpoint_folder.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ct_status ct_ckpt_filename(char *buf, size_t size, const char *dir,
                           int64_t step) {
  if (!buf || !dir || step < 0)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: filename needs a buffer, a "
                    "folder and a step >= 0");
  int n = snprintf(buf, size, "%s/ckpt-%08lld.ct", dir, (long long)step);
  if (n < 0 || (size_t)n >= size)
    return ct_error(CT_ERR_ARG, "checkpoint: path '%s/ckpt-...' is too long",
                    dir);
  return CT_OK;
}

// The step of a file named "ckpt-<digits>.ct", or -1.
static int64_t ckpt_step_of(const char *name) {
  if (strncmp(name, "ckpt-", 5) != 0) return -1;
  const char *p = name + 5;
  int64_t step = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; p++, digits++) {
    if (step > (INT64_MAX - 9) / 10) return -1;
    step = step * 10 + (*p - '0');
  }
  return digits > 0 && strcmp(p, ".ct") == 0 ? step : -1;
}

typedef struct ckpt_entry {
  char *path;
  int64_t step;
} ckpt_entry;

static int compare_newest_first(const void *a, const void *b) {
  const ckpt_entry *x = a, *y = b;
  return x->step < y->step   ? 1
         : x->step > y->step ? -1
                             : strcmp(x->path, y->path);
}

static void free_entries(ckpt_entry *e, int n) {
  for (int i = 0; i < n; i++) free(e[i].path);
  free(e);
}

// The checkpoints in dir, newest first. A missing folder has none.
static ct_status list_checkpoints(const char *dir, ckpt_entry **out, int *n) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return CT_OK;
    return ct_error(CT_ERR_IO, "%s: cannot list checkpoints: %s", dir,
                    strerror(errno));
  }
  ckpt_entry *e = NULL;
  int count = 0, cap = 0;
  ct_status st = CT_OK;
  struct dirent *de;
  while (st == CT_OK && (de = readdir(d)) != NULL) {
    int64_t step = ckpt_step_of(de->d_name);
    if (step < 0) continue;
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      ckpt_entry *grown = realloc(e, (size_t)cap * sizeof *e);
      if (!grown) {
        st = ct_error(CT_ERR_NOMEM, "%s: out of memory listing checkpoints",
                      dir);
        break;
      }
      e = grown;
    }
    size_t len = strlen(dir) + 1 + strlen(de->d_name) + 1;
    char *path = malloc(len);
    if (!path) {
      st = ct_error(CT_ERR_NOMEM, "%s: out of memory listing checkpoints", dir);
      break;
    }
    snprintf(path, len, "%s/%s", dir, de->d_name);
    e[count++] = (ckpt_entry){path, step};
  }
  closedir(d);
  if (st != CT_OK) {
    free_entries(e, count);
    return st;
  }
  if (count) qsort(e, (size_t)count, sizeof *e, compare_newest_first);
  *out = e;
  *n = count;
  return CT_OK;
}

void ct_ckpt_latest_free(ct_ckpt_latest *l) {
  if (!l) return;
  free(l->path);
  ct_ckpt_free(l->ckpt);
  for (int i = 0; i < l->n_skipped; i++) free(l->skipped[i]);
  free(l->skipped);
  memset(l, 0, sizeof *l);
  l->step = -1;
}

ct_status ct_ckpt_find_latest(const char *dir, ct_ckpt_latest *out) {
  if (!dir || !out)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: find_latest needs a folder and "
                    "an output");
  memset(out, 0, sizeof *out);
  out->step = -1;
  ckpt_entry *e;
  int n;
  ct_status st = list_checkpoints(dir, &e, &n);
  if (st != CT_OK) return st;
  if (n) out->skipped = malloc((size_t)n * sizeof *out->skipped);
  if (n && !out->skipped) st = ct_error(CT_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n && st == CT_OK && !out->path; i++) {
    ct_ckpt *c = NULL;
    ct_status rs = ct_ckpt_read(e[i].path, &c);
    if (rs == CT_ERR_NOMEM) {
      st = rs;  // not the file's fault: stop rather than skip it
    } else if (rs != CT_OK) {
      // The message already names the path.
      char *why = strdup(ct_last_error());
      if (!why)
        st = ct_error(CT_ERR_NOMEM, "out of memory");
      else
        out->skipped[out->n_skipped++] = why;
    } else {
      out->ckpt = c;
      out->step = e[i].step;
      out->path = e[i].path;
      e[i].path = NULL;
    }
  }
  free_entries(e, n);
  if (st != CT_OK)
    ct_ckpt_latest_free(out);
  else
    ct_clear_error();  // the skipped files' errors are in out->skipped
  return st;
}

ct_status ct_ckpt_prune(const char *dir, int keep_last, int64_t keep_step,
                        int *n_deleted) {
  if (n_deleted) *n_deleted = 0;
  if (!dir || keep_last < 0)
    return ct_error(CT_ERR_ARG,
                    "checkpoint: prune needs a folder and "
                    "keep_last >= 0");
  ckpt_entry *e;
  int n;
  ct_status st = list_checkpoints(dir, &e, &n);
  for (int i = keep_last; i < n && st == CT_OK; i++) {
    if (e[i].step == keep_step) continue;
    if (remove(e[i].path) != 0 && errno != ENOENT)
      st = ct_error(CT_ERR_IO, "%s: cannot delete old checkpoint: %s",
                    e[i].path, strerror(errno));
    else if (n_deleted)
      (*n_deleted)++;
  }
  free_entries(e, n);
  return st;
}
