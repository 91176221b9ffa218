// The differentiable all-gather of rows (see dist_gather.h).
#include "train/dist_gather.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/arena.h"
#include "train/dist.h"

// grad(x) += sum over ranks s (in rank order) of s's grad(all)[rank rows].
static void gather_rows_backward(ct_node *node) {
  ct_tensor *x = node->in[0], *all = node->out;
  const int N = ct_dist_size(), r = ct_dist_rank();
  const int64_t n = x->numel;
  const size_t bytes = (size_t)all->numel * sizeof(float);
  float *every = malloc(bytes * (size_t)N);
  ct_status st =
      every ? CT_OK : ct_error(CT_ERR_NOMEM, "gather: out of memory");
  // Every rank must take part in the exchange, even one that failed.
  const float *g = all->grad;
  float *zeros = NULL;
  if (!g) g = zeros = calloc((size_t)all->numel, sizeof(float));
  if (st == CT_OK && g) st = ct_dist_allgather(g, bytes, every);
  float *dx = st == CT_OK ? ct_grad_of(x) : NULL;
  for (int64_t i = 0; dx && i < n; i++) {
    float sum = 0.0f;
    for (int s = 0; s < N; s++)
      sum += every[(int64_t)s * all->numel + r * n + i];
    dx[i] += sum;
  }
  free(every);
  free(zeros);
}

ct_tensor *ct_dist_gather_rows(ct_tensor *x) {
  const int N = ct_dist_size();
  if (N == 1 || !x) return x;
  if (x->dtype != CT_F32 || x->ndim != 2) {
    ct_error(CT_ERR_ARG, "gather: wants (B, E) f32 rows");
    return NULL;
  }
  const int64_t B = x->shape[0], E = x->shape[1];
  ct_tensor *all = ct_tensor_empty(CT_F32, CT_SHAPE((int64_t)N * B, E));
  if (!all) return NULL;
  if (ct_dist_allgather(ct_f32(x), (size_t)x->numel * sizeof(float),
                        ct_f32(all)) != CT_OK)
    return NULL;
  if (ct_tape_record("gather_rows", gather_rows_backward, all, 1, &x, NULL) !=
      CT_OK)
    return NULL;
  return all;
}
