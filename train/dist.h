// The processes of a data-parallel run: N ranks started by an MPI launcher
// (mpirun, mpiexec, srun), or one process. The training loop reads the same
// either way: with one process every collective below is a local copy.
//
//   ct_dist_init();                       // MPI when started by a launcher
//   int rank = ct_dist_rank(), n = ct_dist_size();
//   ... ct_dist_allgather(&mine, sizeof mine, all); ...
//   ct_dist_finalize();
//
// MPI is used only when ctrain was built with it (meson -Dmpi=auto|enabled)
// and a launcher's environment says this process is one of several
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, ...); a plain `ctrain train`
// never initializes MPI. A build without MPI that finds itself started as
// one of N > 1 processes refuses to run (each would train alone, into the
// same run folder).
//
// Every rank must call the collectives in the same order with matching
// sizes. MPI's default error handler ends the whole job on a communication
// failure; a rank that dies (kill -9) makes the launcher end the others.
// Only the main thread calls these (MPI_THREAD_FUNNELED).
//
// The collectives move bytes; none adds numbers. Sums over ranks are done by
// the caller in a fixed order (optim/grad_accum.h), which MPI_Allreduce does
// not promise.
//
// What this file does not do: choose which data a rank reads, reduce
// gradients (train/data_parallel.h), or recover from a lost rank.
#ifndef CT_TRAIN_DIST_H
#define CT_TRAIN_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/strings.h"

// Joins the launcher's job (MPI_Init_thread) when started by one; otherwise
// a single process. CT_ERR_STATE when started as one of several by a build
// without MPI. Call once, before any other function here.
ct_status ct_dist_init(void);
// Leaves the job (MPI_Finalize); nothing for a single process.
void ct_dist_finalize(void);
int ct_dist_rank(void);
int ct_dist_size(void);
// Ranks on this machine (sharing its cores), this one included.
int ct_dist_node_size(void);
// "Open MPI v4.1.4, ..." (the library's own version line) when built with
// MPI, else "none (built without MPI)".
const char *ct_dist_library(void);
// Ends every rank of the job with `code` (MPI_Abort), or this process.
_Noreturn void ct_dist_abort(int code);

// ---- collectives ----------------------------------------------------------

// all = every rank's `bytes` bytes of `mine`, in rank order (size * bytes).
ct_status ct_dist_allgather(const void *mine, size_t bytes, void *all);
// Every rank's bytes, each rank giving its own count: out = the
// concatenation in rank order, offsets[r] where rank r's begin (size + 1
// entries, offsets[size] the total). out is replaced.
ct_status ct_dist_allgatherv(const void *mine, size_t bytes,
                             ct_byte_buffer *out, size_t *offsets);
// Floats: rank r holds part r, buf[off[r] .. off[r + 1]); afterwards every
// rank's buf holds every part (in place).
ct_status ct_dist_allgather_floats(float *buf, const size_t *off);
// Rank r's n = off[r + 1] - off[r] floats `mine` into root's
// all[off[r] .. off[r + 1]); `all` is only used on root.
ct_status ct_dist_gather_floats(const float *mine, float *all,
                                const size_t *off, int root);

// ---- nonblocking exchanges, for overlapping communication with compute --

typedef int ct_dist_request;  // -1: none

// Every rank sends rank j send[soff[j] .. soff[j] + scount[j]) and receives
// rank j's part into recv[roff[j] .. roff[j] + rcount[j]) (an all-to-all).
ct_status ct_dist_alltoallv_start(const float *send, const int64_t *scount,
                                  const int64_t *soff, float *recv,
                                  const int64_t *rcount, const int64_t *roff,
                                  ct_dist_request *req);
// In place: rank r's part is buf[off[r] .. off[r] + count[r]); afterwards
// every rank holds every part.
ct_status ct_dist_allgatherv_start(float *buf, const int64_t *count,
                                   const int64_t *off, ct_dist_request *req);
// True when the exchange is done (then *req is finished); lets MPI make
// progress either way. A request of -1 is done.
bool ct_dist_test(ct_dist_request *req);
// Waits for the exchange; *req becomes -1.
ct_status ct_dist_wait(ct_dist_request *req);

// ---- work split -------------------------------------------------------------

// Evaluation split over ranks with the results of one process: unit u of n
// (a batch of the one-process loop, with the same contents) is computed by
// rank u % size into a byte buffer, the buffers are shared, and every rank
// folds all of them in unit order. With one process each unit is computed
// and folded in turn. A failure on any rank fails every rank (the failing
// rank's message, the others "rank R failed: see its message").
typedef ct_status (*ct_dist_unit_fn)(void *arg, int64_t unit,
                                     ct_byte_buffer *out);
typedef ct_status (*ct_dist_fold_fn)(void *arg, int64_t unit, const void *data,
                                     size_t len);
ct_status ct_dist_for_units(int64_t n, ct_dist_unit_fn compute,
                            ct_dist_fold_fn fold, void *arg);
// True when the last ct_dist_for_units failed because of another rank
// (which prints its own message).
bool ct_dist_failed_elsewhere(void);

#endif
