// Global gradient norm, clipping and the non-finite check (optim/grads.h).
//
// The norm's reduction is split by data, never by thread: each parameter is
// cut into NORM_CHUNK-float spans, a span's squares are summed in double by
// whichever thread gets it, and the span sums are added in order. Spans are
// processed NORM_BATCH at a time so the partial sums fit on the stack, and
// NORM_LANES at a time per thread, their sums interleaved.
#include "optim/grads.h"
#include "autograd/tape.h"
#include "core/vmath.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum {
  NORM_CHUNK = 8192,             // floats per span (fixed: part of the result)
  NORM_BATCH = 256,              // spans per parallel pass
  GRADS_PARALLEL_MIN = 1 << 15,  // fewer floats than this: one thread
};

typedef struct grad_span {
  size_t lo, hi;  // floats [lo, hi) of the grad buffer
} grad_span;

// The sums of g^2 over up to NORM_LANES spans, each in double and in its
// own order, into part[]: the spans' chains of adds run interleaved (a
// single chain waits on the add latency at every element), each span still
// summed front to back, so every part is the bits of a span on its own.
enum { NORM_LANES = 4 };

static void span_group_squares(const float *g, const grad_span *spans, int m,
                               double *part) {
  double acc[NORM_LANES] = {0.0, 0.0, 0.0, 0.0};
  size_t common = 0;
  if (m == NORM_LANES) {
    common = spans[0].hi - spans[0].lo;
    for (int s = 1; s < m; s++)
      if (spans[s].hi - spans[s].lo < common)
        common = spans[s].hi - spans[s].lo;
    const float *g0 = g + spans[0].lo, *g1 = g + spans[1].lo,
                *g2 = g + spans[2].lo, *g3 = g + spans[3].lo;
    for (size_t i = 0; i < common; i++) {
      acc[0] += (double)g0[i] * (double)g0[i];
      acc[1] += (double)g1[i] * (double)g1[i];
      acc[2] += (double)g2[i] * (double)g2[i];
      acc[3] += (double)g3[i] * (double)g3[i];
    }
  }
  for (int s = 0; s < m; s++) {  // what is left of each span, in order
    for (size_t i = spans[s].lo + common; i < spans[s].hi; i++)
      acc[s] += (double)g[i] * (double)g[i];
    part[s] = acc[s];
  }
}

// Each span's sum of g^2 into part[0..n) (n <= NORM_BATCH), spans in
// groups of NORM_LANES on whichever thread.
static void spans_squares(const float *g, const grad_span *spans, int n,
                          size_t floats, double *part) {
  const int groups = (n + NORM_LANES - 1) / NORM_LANES;
#pragma omp parallel for schedule(dynamic, 1) if (floats >= GRADS_PARALLEL_MIN)
  for (int q = 0; q < groups; q++) {
    const int s0 = q * NORM_LANES;
    const int m = n - s0 < NORM_LANES ? n - s0 : NORM_LANES;
    span_group_squares(g, spans + s0, m, part + s0);
  }
}

// The sum of a batch's span sums, in span order: the norm is the sum of
// these over the batches of NORM_BATCH spans, in order.
static double batch_total(const double *part, int n) {
  double total = 0.0;
  for (int s = 0; s < n; s++) total += part[s];
  return total;
}

// Calls fn(arg, span) for every span of the non-frozen parameters, in
// registry order.
static void each_span(const ct_params *p, void (*fn)(void *arg, grad_span span),
                      void *arg) {
  for (int k = 0; k < p->n; k++) {
    const ct_param *it = &p->items[k];
    if (it->flags & CT_PARAM_FROZEN) continue;
    size_t end = it->offset + (size_t)it->tensor->numel;
    for (size_t lo = it->offset; lo < end; lo += NORM_CHUNK)
      fn(arg, (grad_span){lo, end - lo > NORM_CHUNK ? lo + NORM_CHUNK : end});
  }
}

typedef struct norm_pass {
  const float *grad;
  grad_span spans[NORM_BATCH];
  int n;
  size_t floats;
  double total;
} norm_pass;

static void norm_flush(norm_pass *np) {
  double part[NORM_BATCH];
  spans_squares(np->grad, np->spans, np->n, np->floats, part);
  np->total += batch_total(part, np->n);
  np->n = 0;
  np->floats = 0;
}

static void norm_add_span(void *arg, grad_span span) {
  norm_pass *np = arg;
  np->spans[np->n++] = span;
  np->floats += span.hi - span.lo;
  if (np->n == NORM_BATCH) norm_flush(np);
}

double ct_grad_norm(const ct_params *p) {
  norm_pass np = {.grad = p->grad};
  each_span(p, norm_add_span, &np);
  if (np.n) norm_flush(&np);
  return sqrt(np.total);
}

typedef struct span_list {
  ct_grad_span *spans;
  int64_t n, cap;
  bool failed;
} span_list;

static void list_add_span(void *arg, grad_span span) {
  span_list *l = arg;
  if (l->failed) return;
  if (l->n == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 256;
    ct_grad_span *grown = realloc(l->spans, (size_t)cap * sizeof *grown);
    if (!grown) {
      l->failed = true;
      return;
    }
    l->spans = grown;
    l->cap = cap;
  }
  l->spans[l->n++] = (ct_grad_span){span.lo, span.hi};
}

ct_status ct_grad_spans(const ct_params *p, ct_grad_span **spans, int64_t *n) {
  span_list l = {0};
  each_span(p, list_add_span, &l);
  if (l.failed) {
    free(l.spans);
    *spans = NULL;
    *n = 0;
    return ct_error(CT_ERR_NOMEM, "gradient norm: out of memory for spans");
  }
  *spans = l.spans;
  *n = l.n;
  return CT_OK;
}

void ct_grad_span_squares(const float *grad, const ct_grad_span *spans,
                          int64_t n, double *sums) {
  grad_span batch[NORM_BATCH];
  for (int64_t b = 0; b < n; b += NORM_BATCH) {
    const int m = n - b < NORM_BATCH ? (int)(n - b) : NORM_BATCH;
    size_t floats = 0;
    for (int s = 0; s < m; s++) {
      batch[s] = (grad_span){spans[b + s].lo, spans[b + s].hi};
      floats += batch[s].hi - batch[s].lo;
    }
    spans_squares(grad, batch, m, floats, sums + b);
  }
}

double ct_grad_norm_from_squares(const double *sums, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += NORM_BATCH)
    total +=
        batch_total(sums + b, n - b < NORM_BATCH ? (int)(n - b) : NORM_BATCH);
  return sqrt(total);
}

double ct_clip_grad_norm(ct_params *p, double max_norm) {
  double norm = ct_grad_norm(p);
  ct_clip_grad_range(p, norm, max_norm, 0, p->count);
  return norm;
}

void ct_clip_grad_range(ct_params *p, double norm, double max_norm, size_t lo,
                        size_t hi) {
  if (!(max_norm > 0.0) || !isfinite(norm)) return;
  double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return;
  float c = (float)coef;
// One parallel region for the whole range (not one per parameter); the
// scaling is elementwise, so no barrier is needed between parameters.
#pragma omp parallel if (hi - lo >= GRADS_PARALLEL_MIN)
  for (int k = 0; k < p->n; k++) {
    const ct_param *it = &p->items[k];
    size_t a, b;
    if ((it->flags & CT_PARAM_FROZEN) || !ct_param_part(it, lo, hi, &a, &b))
      continue;
    float *g = p->grad + a;
    int64_t numel = (int64_t)(b - a);
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < numel; i++) g[i] *= c;
  }
}

static const char *value_name(float v) {
  return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

// The first parameter (registry order; frozen ones only if `frozen_too`)
// whose values in `buf` (p->data or p->grad) within [lo, hi) of the store
// are not all finite, with the index in that parameter of the first bad
// element; NULL when all are finite.
static const ct_param *first_nonfinite(const ct_params *p, const float *buf,
                                       bool frozen_too, size_t lo, size_t hi,
                                       int64_t *at) {
  for (int k = 0; k < p->n; k++) {
    const ct_param *it = &p->items[k];
    size_t a, b;
    if (((it->flags & CT_PARAM_FROZEN) && !frozen_too) ||
        !ct_param_part(it, lo, hi, &a, &b))
      continue;
    int64_t i = ct_vmath_first_nonfinite(buf + a, (int64_t)(b - a));
    if (i >= 0) {
      *at = i + (int64_t)(a - it->offset);
      return it;
    }
  }
  return NULL;
}

ct_status ct_grads_check_finite(const ct_params *p, int64_t step) {
  return ct_grads_check_finite_range(p, step, 0, p->count);
}

ct_status ct_grads_check_finite_range(const ct_params *p, int64_t step,
                                      size_t lo, size_t hi) {
  int64_t i;
  const ct_param *it = first_nonfinite(p, p->grad, false, lo, hi, &i);
  if (!it) return CT_OK;
  char at[48] = "";
  if (step >= 0) snprintf(at, sizeof at, " at step %lld", (long long)step);
  return ct_error(
      CT_ERR_NUMERIC, "non-finite gradient in '%s'%s (element %lld is %s)",
      it->name, at, (long long)i, value_name(p->grad[it->offset + i]));
}

ct_status ct_loss_check_finite(const ct_params *p, double loss, int64_t step) {
  if (isfinite(loss)) return CT_OK;
  int64_t i;
  const ct_param *it = first_nonfinite(p, p->data, true, 0, p->count, &i);
  if (it)
    return ct_error(CT_ERR_NUMERIC,
                    "non-finite loss (%g) at step %lld: parameter '%s' holds "
                    "%s (element %lld), from an earlier update",
                    loss, (long long)step, it->name,
                    value_name(p->data[it->offset + i]), (long long)i);
  // The parameters are finite: some activation overflowed. The largest
  // parameter says how far the weights have grown (a learning rate too
  // high makes them huge before anything is infinite).
  const ct_param *big = NULL;
  float big_abs = 0.0f;
  for (int k = 0; k < p->n; k++) {
    const float *v = p->data + p->items[k].offset;
    for (int64_t j = 0; j < p->items[k].tensor->numel; j++)
      if (fabsf(v[j]) > big_abs) big_abs = fabsf(v[j]), big = &p->items[k];
  }
  char largest[192] = "";
  if (big)
    snprintf(largest, sizeof largest,
             "; the largest parameter value is %.3g, in '%s'", (double)big_abs,
             big->name);
  const ct_node *n = ct_tape_first_nonfinite();
  if (!n)
    return ct_error(CT_ERR_NUMERIC,
                    "non-finite loss (%g) at step %lld: the parameters are "
                    "finite%s",
                    loss, (long long)step, largest);
  char shape[96];
  ct_shape_str(n->out->ndim, n->out->shape, shape, sizeof shape);
  int64_t j = ct_vmath_first_nonfinite(ct_f32(n->out), n->out->numel);
  return ct_error(CT_ERR_NUMERIC,
                  "non-finite loss (%g) at step %lld: the first non-finite "
                  "activation is the output of %s %s (element %lld is %s)%s",
                  loss, (long long)step, n->op, shape, (long long)j,
                  value_name(ct_f32(n->out)[j]), largest);
}
