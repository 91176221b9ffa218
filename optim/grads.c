// Global gradient norm, clipping and the non-finite check (optim/grads.h).
//
// The norm's reduction is split by data, never by thread: each parameter is
// cut into NORM_CHUNK-float spans, a span's squares are summed in double by
// whichever thread gets it, and the span sums are added in order. Spans are
// processed NORM_BATCH at a time so the partial sums fit on the stack.
#include "optim/grads.h"

#include <math.h>
#include <stdio.h>

enum {
  NORM_CHUNK = 8192,          // floats per span (fixed: part of the result)
  NORM_BATCH = 256,           // spans per parallel pass
  GRADS_PARALLEL_MIN = 1 << 15,  // fewer floats than this: one thread
};

typedef struct grad_span {
  size_t lo, hi;  // floats [lo, hi) of the grad buffer
} grad_span;

// Sum over spans[0..n) of the sum of g^2 over each span, in span order.
static double spans_sum_squares(const float *g, const grad_span *spans, int n,
                                size_t floats) {
  double part[NORM_BATCH];
  #pragma omp parallel for schedule(dynamic, 1) \
      if (floats >= GRADS_PARALLEL_MIN)
  for (int s = 0; s < n; s++) {
    double acc = 0.0;
    for (size_t i = spans[s].lo; i < spans[s].hi; i++)
      acc += (double)g[i] * (double)g[i];
    part[s] = acc;
  }
  double total = 0.0;
  for (int s = 0; s < n; s++) total += part[s];
  return total;
}

double ct_grad_norm(const ct_params *p) {
  grad_span spans[NORM_BATCH];
  int n = 0;
  size_t floats = 0;
  double total = 0.0;
  for (int k = 0; k < p->n; k++) {
    const ct_param *it = &p->items[k];
    if (it->flags & CT_PARAM_FROZEN) continue;
    size_t end = it->offset + (size_t)it->tensor->numel;
    for (size_t lo = it->offset; lo < end; lo += NORM_CHUNK) {
      size_t hi = end - lo > NORM_CHUNK ? lo + NORM_CHUNK : end;
      spans[n++] = (grad_span){lo, hi};
      floats += hi - lo;
      if (n == NORM_BATCH) {
        total += spans_sum_squares(p->grad, spans, n, floats);
        n = 0;
        floats = 0;
      }
    }
  }
  if (n) total += spans_sum_squares(p->grad, spans, n, floats);
  return sqrt(total);
}

double ct_clip_grad_norm(ct_params *p, double max_norm) {
  double norm = ct_grad_norm(p);
  if (!(max_norm > 0.0) || !isfinite(norm)) return norm;
  double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return norm;
  float c = (float)coef;
  // One parallel region for the whole store (not one per parameter); the
  // scaling is elementwise, so no barrier is needed between parameters.
  #pragma omp parallel if (p->count >= GRADS_PARALLEL_MIN)
  for (int k = 0; k < p->n; k++) {
    const ct_param *it = &p->items[k];
    if (it->flags & CT_PARAM_FROZEN) continue;
    float *g = p->grad + it->offset;
    int64_t numel = it->tensor->numel;
    #pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < numel; i++) g[i] *= c;
  }
  return norm;
}

ct_status ct_grads_check_finite(const ct_params *p, int64_t step) {
  for (int k = 0; k < p->n; k++) {
    const ct_param *it = &p->items[k];
    if (it->flags & CT_PARAM_FROZEN) continue;
    const float *g = p->grad + it->offset;
    int64_t numel = it->tensor->numel;
    int bad = 0;
    #pragma omp parallel for schedule(static) reduction(| : bad) \
        if (numel >= GRADS_PARALLEL_MIN)
    for (int64_t i = 0; i < numel; i++) bad |= !isfinite(g[i]);
    if (!bad) continue;
    int64_t i = 0;
    while (isfinite(g[i])) i++;
    char at[48] = "";
    if (step >= 0) snprintf(at, sizeof at, " at step %lld", (long long)step);
    return ct_error(CT_ERR_NUMERIC,
                    "non-finite gradient in '%s'%s (element %lld is %s)",
                    it->name, at, (long long)i, isnan(g[i]) ? "nan"
                    : g[i] > 0 ? "inf" : "-inf");
  }
  return CT_OK;
}
