// What train/dist.c needs from a message-passing library, for a job of
// more than one process: train/dist_mpi.c implements it with MPI; builds
// without MPI link train/dist_nompi.c, whose functions other than the
// first three are never reached (the job is always one process).
// The arguments are train/dist.h's, already checked there.
#ifndef CT_TRAIN_DIST_BACKEND_H
#define CT_TRAIN_DIST_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "train/dist.h"

// The library's version line, or "none (built without MPI)".
const char *ct_dist_backend_library(void);
// Joins the job: this process's rank, the job's size, the ranks on this
// machine. CT_ERR_STATE when the build has no MPI.
ct_status ct_dist_backend_init(int *rank, int *size, int *node_size);
void ct_dist_backend_finalize(void);
_Noreturn void ct_dist_backend_abort(int code);

ct_status ct_dist_backend_allgather(const void *mine, size_t bytes, void *all);
ct_status ct_dist_backend_allgatherv(const void *mine, const size_t *counts,
                                     const size_t *offsets, void *all);
ct_status ct_dist_backend_allgather_floats(float *buf, const size_t *off);
ct_status ct_dist_backend_gather_floats(const float *mine, float *all,
                                        const size_t *off, int root);
ct_status ct_dist_backend_alltoallv_start(
    const float *send, const int64_t *scount, const int64_t *soff, float *recv,
    const int64_t *rcount, const int64_t *roff, ct_dist_request *req);
ct_status ct_dist_backend_allgatherv_start(float *buf, const int64_t *count,
                                           const int64_t *off,
                                           ct_dist_request *req);
bool ct_dist_backend_test(ct_dist_request *req);
ct_status ct_dist_backend_wait(ct_dist_request *req);

#endif
