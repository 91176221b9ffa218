// Gradient check of the differentiable all-gather (train/dist_gather.h),
// run as one process and under `mpirun -np N` (tests/test_dist_gather.sh).
// Each rank r holds x_r (B, E); all = gather(x); rank r's loss is
// L_r = sum(tanh(all) * w_r) with its own weights w_r, and the checked
// function is the global L = sum over ranks of L_r. Backward on every rank
// must give dL/dx_r: the sum over ranks of their gradients of rank r's
// rows. Checked against central differences of L (every rank takes part
// in each perturbed forward), and the forward against the ranks' rows.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "tests/harness.h"
#include "train/dist.h"
#include "train/dist_gather.h"

enum { B = 3, E = 4 };

static float x_value(int rank, int i) {
  return 0.8f * sinf(0.37f * (float)i + 1.1f * (float)rank);
}
static float w_value(int rank, int j) {
  return cosf(0.71f * (float)j + 1.3f * (float)rank);
}

// L_r of x (B, E) on this rank; with grad, *loss_t the tape's scalar.
static double local_loss(const float *x, int N, int rank, ct_tensor **xt,
                         ct_tensor **loss_t) {
  ct_tensor *in = ct_tensor_from(CT_F32, x, CT_SHAPE(B, E));
  if (xt) *xt = ct_requires_grad(in);
  ct_tensor *all = ct_dist_gather_rows(in);
  float w[(int64_t)B * E * 16];
  for (int j = 0; j < B * E * N; j++) w[j] = w_value(rank, j);
  ct_tensor *wt = ct_tensor_from(CT_F32, w, CT_SHAPE((int64_t)N * B, E));
  ct_tensor *l = ct_sum(ct_mul(ct_tanh(all), wt));
  if (loss_t) *loss_t = l;
  return l ? (double)ct_f32(l)[0] : NAN;
}

// L = the sum over ranks of L_r, in rank order, on every rank.
static double global_loss(const float *x, int N, int rank) {
  bool was = ct_grad_set_enabled(false);
  double mine = local_loss(x, N, rank, NULL, NULL), all[16];
  ct_grad_set_enabled(was);
  ct_dist_allgather(&mine, sizeof mine, all);
  double sum = 0.0;
  for (int r = 0; r < N; r++) sum += all[r];
  return sum;
}

int main(void) {
  if (ct_dist_init() != CT_OK) {
    fprintf(stderr, "%s\n", ct_last_error());
    return 1;
  }
  const int N = ct_dist_size(), rank = ct_dist_rank();
  CHECK(N <= 16, "at most 16 ranks (got %d)", N);
  float x[B * E];
  for (int i = 0; i < B * E; i++) x[i] = x_value(rank, i);

  // Forward: every rank's rows in rank order.
  ct_tensor *in = ct_tensor_from(CT_F32, x, CT_SHAPE(B, E));
  ct_tensor *all = ct_dist_gather_rows(in);
  CHECK(all && all->shape[0] == (int64_t)N * B && all->shape[1] == E,
        "gather shape");
  int wrong = 0;
  for (int r = 0; all && r < N; r++)
    for (int i = 0; i < B * E; i++)
      wrong += ct_f32(all)[r * B * E + i] != x_value(r, i);
  CHECK(wrong == 0, "%d gathered values differ from the ranks' rows", wrong);
  ct_arena_reset();

  // Backward on every rank (a collective inside).
  ct_tensor *xt = NULL, *loss = NULL;
  local_loss(x, N, rank, &xt, &loss);
  CHECK(ct_backward(loss) == CT_OK, "backward: %s", ct_last_error());
  float grad[B * E];
  memcpy(grad, xt->grad, sizeof grad);
  ct_arena_reset();

  // Central differences of the global loss, one rank's element at a time.
  const float h = 1e-2f;
  double worst = 0.0;
  for (int q = 0; q < N; q++)
    for (int i = 0; i < B * E; i++) {
      float xp[B * E];
      memcpy(xp, x, sizeof xp);
      if (rank == q) xp[i] = x[i] + h;
      double up = global_loss(xp, N, rank);
      if (rank == q) xp[i] = x[i] - h;
      double down = global_loss(xp, N, rank);
      ct_arena_reset();
      if (rank != q) continue;
      double fd = (up - down) / (2.0 * (double)h);
      double diff = fabs(fd - (double)grad[i]) / fmax(1.0, fabs(fd));
      if (diff > worst) worst = diff;
      CHECK(diff < 2e-3, "rank %d x[%d]: backward %.6g, differences %.6g", q, i,
            (double)grad[i], fd);
    }
  printf(
      "rank %d of %d: gather backward vs central differences, max rel "
      "diff %.2e\n",
      rank, N, worst);
  int rc = test_summary("grad_dist_gather");
  ct_dist_finalize();
  return rc;
}
