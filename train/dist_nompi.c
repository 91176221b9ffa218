// train/dist_backend.h for builds without MPI: the job is always one
// process, so only the first three functions are ever called (and init
// says why a job of several cannot run); the rest fail if reached.
#include <stdlib.h>

#include "train/dist_backend.h"

static ct_status no_mpi(void) {
  return ct_error(CT_ERR_STATE, "ctrain was built without MPI");
}

const char *ct_dist_backend_library(void) { return "none (built without MPI)"; }

ct_status ct_dist_backend_init(int *rank, int *size, int *node_size) {
  *rank = 0;
  *size = *node_size = 1;
  return no_mpi();
}

void ct_dist_backend_finalize(void) {}

_Noreturn void ct_dist_backend_abort(int code) { exit(code); }

ct_status ct_dist_backend_allgather(const void *mine, size_t bytes, void *all) {
  (void)mine, (void)bytes, (void)all;
  return no_mpi();
}

ct_status ct_dist_backend_allgatherv(const void *mine, const size_t *counts,
                                     const size_t *offsets, void *all) {
  (void)mine, (void)counts, (void)offsets, (void)all;
  return no_mpi();
}

ct_status ct_dist_backend_allgather_floats(float *buf, const size_t *off) {
  (void)buf, (void)off;
  return no_mpi();
}

ct_status ct_dist_backend_gather_floats(const float *mine, float *all,
                                        const size_t *off, int root) {
  (void)mine, (void)all, (void)off, (void)root;
  return no_mpi();
}

ct_status ct_dist_backend_alltoallv_start(
    const float *send, const int64_t *scount, const int64_t *soff, float *recv,
    const int64_t *rcount, const int64_t *roff, ct_dist_request *req) {
  (void)send, (void)scount, (void)soff, (void)recv, (void)rcount, (void)roff;
  *req = -1;
  return no_mpi();
}

ct_status ct_dist_backend_allgatherv_start(float *buf, const int64_t *count,
                                           const int64_t *off,
                                           ct_dist_request *req) {
  (void)buf, (void)count, (void)off;
  *req = -1;
  return no_mpi();
}

bool ct_dist_backend_test(ct_dist_request *req) {
  *req = -1;
  return true;
}

ct_status ct_dist_backend_wait(ct_dist_request *req) {
  *req = -1;
  return no_mpi();
}
