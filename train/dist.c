// The process group (train/dist.h): one process is handled here, a job of
// several goes to the message-passing backend (train/dist_backend.h).
#include "train/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/dist_backend.h"

static int g_rank = 0, g_size = 1, g_node_size = 1;
static bool g_joined, g_failed_elsewhere;

// The job size a launcher announces in the environment (0: none). Open MPI
// sets OMPI_COMM_WORLD_SIZE, MPICH's Hydra PMI_SIZE, PMIx launchers
// (Open MPI 5, Slurm) PMIX_RANK with the size elsewhere.
static int launcher_size(void) {
  static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    const char *s = getenv(sizes[i]);
    if (s && atoi(s) > 0) return atoi(s);
  }
  return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 2 : 0;
}

ct_status ct_dist_init(void) {
  int announced = launcher_size();
  if (announced == 0) return CT_OK;  // a plain process: no MPI at all
  ct_status st = ct_dist_backend_init(&g_rank, &g_size, &g_node_size);
  if (st == CT_OK) {
    g_joined = true;
    return CT_OK;
  }
  if (announced > 1)
    return ct_error(st,
                    "this process is one of %d started by an MPI launcher, "
                    "but %s (install libopenmpi-dev and rebuild: meson "
                    "setup build -Dmpi=enabled)",
                    announced, ct_last_error());
  return CT_OK;  // a launcher of one process, and no MPI: run alone
}

void ct_dist_finalize(void) {
  if (g_joined) ct_dist_backend_finalize();
  g_joined = false;
  g_rank = 0;
  g_size = g_node_size = 1;
}

int ct_dist_rank(void) { return g_rank; }
int ct_dist_size(void) { return g_size; }
int ct_dist_node_size(void) { return g_node_size; }
const char *ct_dist_library(void) { return ct_dist_backend_library(); }

_Noreturn void ct_dist_abort(int code) {
  fflush(stdout);
  fflush(stderr);
  if (g_size > 1) ct_dist_backend_abort(code);
  exit(code);
}

ct_status ct_dist_allgather(const void *mine, size_t bytes, void *all) {
  if (g_size > 1) return ct_dist_backend_allgather(mine, bytes, all);
  if (bytes) memmove(all, mine, bytes);
  return CT_OK;
}

ct_status ct_dist_allgatherv(const void *mine, size_t bytes,
                             ct_byte_buffer *out, size_t *offsets) {
  out->len = 0;
  size_t *counts = malloc((size_t)g_size * sizeof *counts);
  if (!counts) return ct_error(CT_ERR_NOMEM, "allgatherv: out of memory");
  ct_status st = ct_dist_allgather(&bytes, sizeof bytes, counts);
  offsets[0] = 0;
  for (int r = 0; r < g_size; r++) offsets[r + 1] = offsets[r] + counts[r];
  if (st == CT_OK && !ct_byte_buffer_reserve(out, offsets[g_size]))
    st = ct_error(CT_ERR_NOMEM, "allgatherv: out of memory for %zu bytes",
                  offsets[g_size]);
  if (st == CT_OK && g_size > 1)
    st = ct_dist_backend_allgatherv(mine, counts, offsets, out->data);
  else if (st == CT_OK && bytes)
    memcpy(out->data, mine, bytes);
  if (st == CT_OK) {
    out->len = offsets[g_size];
    out->data[out->len] = '\0';
  }
  free(counts);
  return st;
}

ct_status ct_dist_allgather_floats(float *buf, const size_t *off) {
  return g_size > 1 ? ct_dist_backend_allgather_floats(buf, off) : CT_OK;
}

ct_status ct_dist_gather_floats(const float *mine, float *all,
                                const size_t *off, int root) {
  if (g_size > 1) return ct_dist_backend_gather_floats(mine, all, off, root);
  if (off[1] > off[0])
    memmove(all + off[0], mine, (off[1] - off[0]) * sizeof *all);
  return CT_OK;
}

ct_status ct_dist_alltoallv_start(const float *send, const int64_t *scount,
                                  const int64_t *soff, float *recv,
                                  const int64_t *rcount, const int64_t *roff,
                                  ct_dist_request *req) {
  *req = -1;
  if (g_size > 1)
    return ct_dist_backend_alltoallv_start(send, scount, soff, recv, rcount,
                                           roff, req);
  if (scount[0])
    memmove(recv + roff[0], send + soff[0], (size_t)scount[0] * sizeof *recv);
  return CT_OK;
}

ct_status ct_dist_allgatherv_start(float *buf, const int64_t *count,
                                   const int64_t *off, ct_dist_request *req) {
  *req = -1;
  return g_size > 1 ? ct_dist_backend_allgatherv_start(buf, count, off, req)
                    : CT_OK;
}

bool ct_dist_test(ct_dist_request *req) {
  return *req < 0 || ct_dist_backend_test(req);
}

ct_status ct_dist_wait(ct_dist_request *req) {
  return *req < 0 ? CT_OK : ct_dist_backend_wait(req);
}

// ---- work split ---------------------------------------------------------------

// A rank's share of the units: a status, then per unit its length and bytes.
typedef struct unit_header {
  int32_t status;
  int32_t pad;
} unit_header;

bool ct_dist_failed_elsewhere(void) { return g_failed_elsewhere; }

ct_status ct_dist_for_units(int64_t n, ct_dist_unit_fn compute,
                            ct_dist_fold_fn fold, void *arg) {
  g_failed_elsewhere = false;
  ct_byte_buffer mine = {0};
  ct_status st = CT_OK;
  if (g_size == 1) {  // compute and fold in turn: no copies kept
    for (int64_t u = 0; u < n && st == CT_OK; u++) {
      mine.len = 0;
      st = compute(arg, u, &mine);
      if (st == CT_OK && mine.failed)
        st = ct_error(CT_ERR_NOMEM, "evaluation: out of memory");
      if (st == CT_OK) st = fold(arg, u, mine.data, mine.len);
    }
    ct_byte_buffer_free(&mine);
    return st;
  }
  unit_header h = {0};
  ct_byte_buffer_append(&mine, &h, sizeof h);
  ct_byte_buffer out = {0};
  for (int64_t u = g_rank; u < n && st == CT_OK; u += g_size) {
    size_t at = mine.len;
    uint64_t len = 0;
    ct_byte_buffer_append(&mine, &len, sizeof len);
    st = compute(arg, u, &mine);
    if (st == CT_OK && mine.failed)
      st = ct_error(CT_ERR_NOMEM, "evaluation: out of memory");
    if (st == CT_OK) {
      len = mine.len - at - sizeof len;
      memcpy(mine.data + at, &len, sizeof len);
    }
  }
  // On failure only the header goes out: the others learn of it.
  h.status = (int32_t)st;
  if (st == CT_OK) memcpy(mine.data, &h, sizeof h);
  size_t *offsets = malloc((size_t)(g_size + 1) * sizeof *offsets);
  ct_status gst =
      offsets
          ? ct_dist_allgatherv(st == CT_OK ? (const void *)mine.data : &h,
                               st == CT_OK ? mine.len : sizeof h, &out, offsets)
          : ct_error(CT_ERR_NOMEM, "evaluation: out of memory");
  int failed = -1;
  for (int r = 0; r < g_size && gst == CT_OK && failed < 0; r++) {
    memcpy(&h, out.data + offsets[r], sizeof h);
    if (h.status != CT_OK) failed = r;
  }
  if (st == CT_OK && gst != CT_OK) st = gst;
  if (st == CT_OK && failed >= 0) {
    st = ct_error((ct_status)h.status, "rank %d failed: see its message",
                  failed);
    g_failed_elsewhere = true;
  }
  // Fold unit u from rank u % size, whose units come in order.
  size_t *at = offsets ? calloc((size_t)g_size, sizeof *at) : NULL;
  if (st == CT_OK && !at)
    st = ct_error(CT_ERR_NOMEM, "evaluation: out of memory");
  for (int r = 0; r < g_size && st == CT_OK; r++) at[r] = offsets[r] + sizeof h;
  for (int64_t u = 0; u < n && st == CT_OK; u++) {
    int r = (int)(u % g_size);
    uint64_t len;
    memcpy(&len, out.data + at[r], sizeof len);
    st = fold(arg, u, out.data + at[r] + sizeof len, (size_t)len);
    at[r] += sizeof len + (size_t)len;
  }
  free(at);
  free(offsets);
  ct_byte_buffer_free(&mine);
  ct_byte_buffer_free(&out);
  return st;
}
