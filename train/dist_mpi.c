// The MPI side of train/dist.h (train/dist_backend.h): MPI_COMM_WORLD,
// blocking and nonblocking collectives that only move data, and
// MPI_ERRORS_ARE_FATAL (the default), so that a failed transfer or a lost
// rank ends the job rather than hanging it. Any MPI-3 library works (Open
// MPI, MPICH and their derivatives).
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "train/dist_backend.h"

const char *ct_dist_backend_library(void) {
  static char text[MPI_MAX_LIBRARY_VERSION_STRING];
  if (!text[0]) {
    int len = 0;
    MPI_Get_library_version(text, &len);
    text[strcspn(text, "\n")] = '\0';
  }
  return text;
}

ct_status ct_dist_backend_init(int *rank, int *size, int *node_size) {
  int provided = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) !=
      MPI_SUCCESS)
    return ct_error(CT_ERR_STATE, "MPI_Init_thread failed");
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                      &node);
  MPI_Comm_size(node, node_size);
  MPI_Comm_free(&node);
  return CT_OK;
}

void ct_dist_backend_finalize(void) { MPI_Finalize(); }

_Noreturn void ct_dist_backend_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}

// Counts and offsets as MPI's ints; false (with an error) past INT_MAX.
static bool to_ints(const char *what, int n, const int64_t *count,
                    const int64_t *off, int *icount, int *ioff) {
  for (int r = 0; r < n; r++) {
    if (count[r] < 0 || count[r] > INT_MAX || off[r] < 0 || off[r] > INT_MAX) {
      ct_error(CT_ERR_ARG,
               "%s: %lld elements at %lld: beyond MPI's int counts (a "
               "model of more than 2^31 floats)",
               what, (long long)count[r], (long long)off[r]);
      return false;
    }
    icount[r] = (int)count[r];
    ioff[r] = (int)off[r];
  }
  return true;
}

static int world_size(void) {
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

ct_status ct_dist_backend_allgather(const void *mine, size_t bytes, void *all) {
  if (bytes > INT_MAX)
    return ct_error(CT_ERR_ARG, "allgather: %zu bytes per rank", bytes);
  MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                MPI_COMM_WORLD);
  return CT_OK;
}

ct_status ct_dist_backend_allgatherv(const void *mine, const size_t *counts,
                                     const size_t *offsets, void *all) {
  const int n = world_size();
  int *ints = malloc(2 * (size_t)n * sizeof *ints);
  int64_t *wide = malloc(2 * (size_t)n * sizeof *wide);
  ct_status st = ints && wide
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "allgatherv: out of memory");
  for (int r = 0; r < n && st == CT_OK; r++) {
    wide[r] = (int64_t)counts[r];
    wide[n + r] = (int64_t)offsets[r];
  }
  if (st == CT_OK && !to_ints("allgatherv", n, wide, wide + n, ints, ints + n))
    st = CT_ERR_ARG;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (st == CT_OK)
    MPI_Allgatherv(mine, ints[rank], MPI_BYTE, all, ints, ints + n, MPI_BYTE,
                   MPI_COMM_WORLD);
  free(ints);
  free(wide);
  return st;
}

// Float parts [off[r], off[r + 1]) as MPI counts and displacements.
static ct_status float_parts(const char *what, const size_t *off, int n,
                             int *ints) {
  int64_t *wide = malloc(2 * (size_t)n * sizeof *wide);
  if (!wide) return ct_error(CT_ERR_NOMEM, "%s: out of memory", what);
  for (int r = 0; r < n; r++) {
    wide[r] = (int64_t)(off[r + 1] - off[r]);
    wide[n + r] = (int64_t)off[r];
  }
  bool ok = to_ints(what, n, wide, wide + n, ints, ints + n);
  free(wide);
  return ok ? CT_OK : CT_ERR_ARG;
}

ct_status ct_dist_backend_allgather_floats(float *buf, const size_t *off) {
  const int n = world_size();
  int *ints = malloc(2 * (size_t)n * sizeof *ints);
  if (!ints) return ct_error(CT_ERR_NOMEM, "allgather: out of memory");
  ct_status st = float_parts("allgather", off, n, ints);
  if (st == CT_OK)
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, ints, ints + n,
                   MPI_FLOAT, MPI_COMM_WORLD);
  free(ints);
  return st;
}

ct_status ct_dist_backend_gather_floats(const float *mine, float *all,
                                        const size_t *off, int root) {
  const int n = world_size();
  int *ints = malloc(2 * (size_t)n * sizeof *ints);
  if (!ints) return ct_error(CT_ERR_NOMEM, "gather: out of memory");
  ct_status st = float_parts("gather", off, n, ints);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (st == CT_OK)
    MPI_Gatherv(mine, ints[rank], MPI_FLOAT, all, ints, ints + n, MPI_FLOAT,
                root, MPI_COMM_WORLD);
  free(ints);
  return st;
}

// ---- nonblocking exchanges ----------------------------------------------------
//
// A request keeps its MPI_Request and the int arrays MPI reads until the
// exchange completes (the standard forbids freeing them earlier).

typedef struct pending {
  MPI_Request req;
  int *ints;  // counts and displacements; NULL: the slot is free
} pending;

static pending *g_pending;
static int g_pending_cap;

// A free slot with room for `ints` ints, or -1 with an error.
static int take_slot(int ints) {
  int k = 0;
  while (k < g_pending_cap && g_pending[k].ints) k++;
  if (k == g_pending_cap) {
    int cap = g_pending_cap ? 2 * g_pending_cap : 64;
    pending *grown = realloc(g_pending, (size_t)cap * sizeof *grown);
    if (!grown) {
      ct_error(CT_ERR_NOMEM, "MPI requests: out of memory");
      return -1;
    }
    memset(grown + g_pending_cap, 0,
           (size_t)(cap - g_pending_cap) * sizeof *grown);
    g_pending = grown;
    g_pending_cap = cap;
  }
  g_pending[k].ints = malloc((size_t)ints * sizeof(int));
  if (!g_pending[k].ints) {
    ct_error(CT_ERR_NOMEM, "MPI requests: out of memory");
    return -1;
  }
  return k;
}

static void release_slot(ct_dist_request *req) {
  free(g_pending[*req].ints);
  g_pending[*req].ints = NULL;
  *req = -1;
}

ct_status ct_dist_backend_alltoallv_start(
    const float *send, const int64_t *scount, const int64_t *soff, float *recv,
    const int64_t *rcount, const int64_t *roff, ct_dist_request *req) {
  const int n = world_size();
  int k = take_slot(4 * n);
  if (k < 0) return ct_last_status();
  int *ints = g_pending[k].ints;
  if (!to_ints("alltoallv", n, scount, soff, ints, ints + n) ||
      !to_ints("alltoallv", n, rcount, roff, ints + 2 * n, ints + 3 * n)) {
    *req = k;
    release_slot(req);
    return CT_ERR_ARG;
  }
  MPI_Ialltoallv(send, ints, ints + n, MPI_FLOAT, recv, ints + 2 * n,
                 ints + 3 * n, MPI_FLOAT, MPI_COMM_WORLD, &g_pending[k].req);
  *req = k;
  return CT_OK;
}

ct_status ct_dist_backend_allgatherv_start(float *buf, const int64_t *count,
                                           const int64_t *off,
                                           ct_dist_request *req) {
  const int n = world_size();
  int k = take_slot(2 * n);
  if (k < 0) return ct_last_status();
  int *ints = g_pending[k].ints;
  if (!to_ints("allgatherv", n, count, off, ints, ints + n)) {
    *req = k;
    release_slot(req);
    return CT_ERR_ARG;
  }
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, ints, ints + n,
                  MPI_FLOAT, MPI_COMM_WORLD, &g_pending[k].req);
  *req = k;
  return CT_OK;
}

bool ct_dist_backend_test(ct_dist_request *req) {
  int done = 0;
  MPI_Test(&g_pending[*req].req, &done, MPI_STATUS_IGNORE);
  if (done) release_slot(req);
  return done != 0;
}

ct_status ct_dist_backend_wait(ct_dist_request *req) {
  MPI_Wait(&g_pending[*req].req, MPI_STATUS_IGNORE);
  release_slot(req);
  return CT_OK;
}
