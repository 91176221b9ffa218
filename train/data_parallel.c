// Data-parallel optimizer steps with the bits of one process
// (train/data_parallel.h).
#include "train/data_parallel.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "optim/grad_accum.h"
#include "optim/grads.h"
#include "train/dist.h"
#include "train/progress.h"

// A bucket: floats [lo, hi) of the store, exchanged as one.
typedef struct bucket {
  size_t lo, hi;
  int64_t ready;  // the backward node index after which its gradients are
                  // complete (-1: complete before backward starts)
  ct_dist_request exchange, gather;
  int64_t *counts;  // per rank: 4 arrays of `size` (send count and offset,
                    // receive count and offset)
  float *recv;      // size parts of this rank's share of the bucket
  size_t part_lo, part_hi;  // this rank's share of [lo, hi)
} bucket;

struct ct_dp {
  ct_params *p;
  int rank, size;
  int64_t accum;
  bool zero;
  unsigned state_slots;  // the optimizer's (ct_optim_state_slots)
  size_t *shard;         // size + 1 boundaries
  bucket *buckets;
  int n_buckets;
  size_t bucket_floats;  // per bucket (the last may be shorter)
  int started;           // buckets whose exchange has started (nth_bucket)
  float *recv;           // every bucket's receive parts
  ct_grad_accum local;   // this rank's sum over its micro-batches
  // Backward tracking: the parameters by offset, for the tape scan.
  int64_t *param_last;  // per parameter: the last node index using it
  // ZeRO-1: the moments of this rank's shard; the norm's spans.
  float *moments[CT_PARAM_STATE_SLOTS];
  ct_grad_span *spans;
  int64_t n_spans;
  size_t *span_first;  // size + 1: rank r's spans [first[r], first[r + 1])
  // BatchNorm updates: the log of the current micro-batch and the terms
  // of this rank's micro-batches of the step (A * bn_n).
  ct_bn_update_log bn_log;
  double *bn_terms;
  int64_t bn_n, bn_cap;
  bool bn_mismatch;
};

int64_t ct_dp_micro_batches(const ct_dp *dp) { return dp->accum * dp->size; }

int64_t ct_dp_micro_batch(const ct_dp *dp, int64_t a) {
  return dp->rank * dp->accum + a;
}

static ct_status nomem(const char *what) {
  return ct_error(CT_ERR_NOMEM, "data parallel: out of memory for %s", what);
}

// Shard boundaries at span starts, near r * count / size.
static void choose_shards(ct_dp *dp) {
  const size_t count = dp->p->count;
  int64_t s = 0;
  dp->shard[0] = 0;
  dp->span_first[0] = 0;
  for (int r = 1; r < dp->size; r++) {
    size_t target = count / (size_t)dp->size * (size_t)r;
    while (s < dp->n_spans && dp->spans[s].lo < target) s++;
    dp->shard[r] = s < dp->n_spans ? dp->spans[s].lo : count;
    if (dp->shard[r] < dp->shard[r - 1]) dp->shard[r] = dp->shard[r - 1];
    dp->span_first[r] = (size_t)s;
  }
  dp->shard[dp->size] = count;
  dp->span_first[dp->size] = (size_t)dp->n_spans;
}

// Buckets of bucket_floats (one when 0), and each one's exchange layout.
static ct_status make_buckets(ct_dp *dp, size_t bucket_floats) {
  const size_t count = dp->p->count;
  const int n = dp->size;
  size_t per = bucket_floats ? bucket_floats : count;
  if (per == 0) per = 1;
  dp->bucket_floats = per;
  dp->n_buckets = count ? (int)((count + per - 1) / per) : 0;
  dp->buckets =
      calloc((size_t)(dp->n_buckets ? dp->n_buckets : 1), sizeof *dp->buckets);
  const size_t recv =
      (size_t)n * (dp->shard[dp->rank + 1] - dp->shard[dp->rank]);
  dp->recv = malloc((recv ? recv : 1) * sizeof(float));
  if (!dp->buckets || !dp->recv) return nomem("buckets");
  size_t recv_at = 0;
  for (int k = 0; k < dp->n_buckets; k++) {
    bucket *b = &dp->buckets[k];
    b->lo = (size_t)k * per;
    b->hi = b->lo + per < count ? b->lo + per : count;
    b->exchange = b->gather = -1;
    b->counts = malloc(4 * (size_t)n * sizeof *b->counts);
    if (!b->counts) return nomem("buckets");
    int64_t *scount = b->counts, *soff = scount + n, *rcount = soff + n,
            *roff = rcount + n;
    for (int r = 0; r < n; r++) {
      size_t lo = dp->shard[r] > b->lo ? dp->shard[r] : b->lo;
      size_t hi = dp->shard[r + 1] < b->hi ? dp->shard[r + 1] : b->hi;
      if (hi < lo) hi = lo;
      scount[r] = (int64_t)(hi - lo);
      soff[r] = (int64_t)(lo - b->lo);
      if (r == dp->rank) {
        b->part_lo = lo;
        b->part_hi = hi;
      }
    }
    const int64_t part = (int64_t)(b->part_hi - b->part_lo);
    for (int r = 0; r < n; r++) {
      rcount[r] = part;
      roff[r] = r * part;
    }
    b->recv = dp->recv + recv_at;
    recv_at += (size_t)n * (size_t)part;
  }
  return CT_OK;
}

// ZeRO-1: this rank's shard of the moments, from p->state when a
// checkpoint filled it (then freed), else zeros.
static ct_status take_moments(ct_dp *dp, const ct_optim *opt) {
  const size_t lo = dp->shard[dp->rank], hi = dp->shard[dp->rank + 1];
  const unsigned slots = ct_optim_state_slots(&opt->cfg);
  for (int k = 0; k < CT_PARAM_STATE_SLOTS; k++) {
    if (!(slots & 1u << k)) {
      ct_params_state_release(dp->p, k);
      continue;
    }
    dp->moments[k] = calloc(hi > lo ? hi - lo : 1, sizeof(float));
    if (!dp->moments[k]) return nomem("the optimizer's moments");
    if (dp->p->state[k])
      memcpy(dp->moments[k], dp->p->state[k] + lo, (hi - lo) * sizeof(float));
    ct_params_state_release(dp->p, k);
  }
  return CT_OK;
}

ct_status ct_dp_new(ct_dp **out, ct_params *p, const ct_optim *opt,
                    const ct_dp_options *o) {
  *out = NULL;
  if (o->accum < 1)
    return ct_error(CT_ERR_ARG, "data parallel: accum %lld must be >= 1",
                    (long long)o->accum);
  ct_dp *dp = calloc(1, sizeof *dp);
  if (!dp) return nomem("its state");
  *out = dp;
  dp->p = p;
  dp->rank = ct_dist_rank();
  dp->size = ct_dist_size();
  dp->accum = o->accum;
  dp->zero = o->shard_optimizer && dp->size > 1;
  dp->state_slots = ct_optim_state_slots(&opt->cfg);
  ct_grad_accum_init(&dp->local, p->count, true);
  if (dp->size == 1) return CT_OK;
  dp->shard = malloc((size_t)(dp->size + 1) * sizeof *dp->shard);
  dp->span_first = malloc((size_t)(dp->size + 1) * sizeof *dp->span_first);
  dp->param_last = malloc((size_t)(p->n ? p->n : 1) * sizeof *dp->param_last);
  if (!dp->shard || !dp->span_first || !dp->param_last)
    return nomem("its state");
  ct_status st = ct_grad_spans(p, &dp->spans, &dp->n_spans);
  if (st != CT_OK) return st;
  choose_shards(dp);
  st = make_buckets(dp, o->bucket_floats);
  if (st == CT_OK && dp->zero) st = take_moments(dp, opt);
  return st;
}

void ct_dp_free(ct_dp *dp) {
  if (!dp) return;
  for (int k = 0; k < dp->n_buckets; k++) free(dp->buckets[k].counts);
  free(dp->buckets);
  free(dp->recv);
  ct_grad_accum_free(&dp->local);
  free(dp->shard);
  free(dp->span_first);
  free(dp->param_last);
  for (int k = 0; k < CT_PARAM_STATE_SLOTS; k++) free(dp->moments[k]);
  free(dp->spans);
  ct_bn_update_log_free(&dp->bn_log);
  free(dp->bn_terms);
  free(dp);
}

// ---- BatchNorm updates ----------------------------------------------------------

ct_bn_update_log *ct_dp_bn_log(ct_dp *dp) {
  ct_bn_update_log_clear(&dp->bn_log);
  return &dp->bn_log;
}

// Keeps micro-batch a's terms.
static ct_status keep_bn_terms(ct_dp *dp, int64_t a) {
  const int64_t n = dp->bn_log.n_values;
  if (a == 0) dp->bn_n = n;
  if (n != dp->bn_n) {
    dp->bn_mismatch = true;  // a failed micro-batch: the step fails anyway
    return CT_OK;
  }
  if (dp->accum * n > dp->bn_cap) {
    double *grown =
        realloc(dp->bn_terms, (size_t)(dp->accum * n) * sizeof *grown);
    if (!grown) return nomem("BatchNorm statistics");
    dp->bn_terms = grown;
    dp->bn_cap = dp->accum * n;
  }
  if (n)
    memcpy(dp->bn_terms + a * n, dp->bn_log.values, (size_t)n * sizeof(double));
  return CT_OK;
}

ct_status ct_dp_apply_bn_updates(ct_dp *dp) {
  int64_t *sizes = malloc((size_t)dp->size * sizeof *sizes);
  if (!sizes) return nomem("BatchNorm statistics");
  int64_t mine = dp->bn_mismatch ? -1 : dp->bn_n;
  ct_status st = ct_dist_allgather(&mine, sizeof mine, sizes);
  for (int r = 0; r < dp->size && st == CT_OK; r++)
    if (sizes[r] != mine)
      st = ct_error(CT_ERR_STATE,
                    "data parallel: BatchNorm ran %lld times on rank %d and "
                    "%lld times on rank %d in this step",
                    (long long)sizes[r], r, (long long)mine, dp->rank);
  free(sizes);
  dp->bn_mismatch = false;
  if (st != CT_OK || dp->bn_n == 0) return st;
  const int64_t K = ct_dp_micro_batches(dp), n = dp->bn_n;
  double *all = malloc((size_t)(K * n) * sizeof *all);
  if (!all) return nomem("BatchNorm statistics");
  st = ct_dist_allgather(dp->bn_terms, (size_t)(dp->accum * n) * sizeof *all,
                         all);
  for (int64_t m = 0; m < K && st == CT_OK; m++)
    ct_bn_update_log_apply(&dp->bn_log, all + m * n);
  free(all);
  return st;
}

// ---- gradients --------------------------------------------------------------------

// The index of the parameter whose values hold `data` (inside the store),
// or -1.
static int param_of(const ct_params *p, const float *data) {
  if (data < p->data || data >= p->data + p->count) return -1;
  size_t at = (size_t)(data - p->data);
  int lo = 0, hi = p->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    const ct_param *it = &p->items[mid];
    if (at < it->offset)
      hi = mid - 1;
    else if (at >= it->offset + (size_t)it->tensor->numel)
      lo = mid + 1;
    else
      return mid;
  }
  return -1;
}

// Each bucket's ready index: the last node (in backward order) that has one
// of its parameters as an input.
static void scan_tape(ct_dp *dp) {
  const ct_params *p = dp->p;
  for (int k = 0; k < p->n; k++) dp->param_last[k] = -1;
  int64_t index = 0;
  for (const ct_node *n = ct_tape_newest(); n; n = n->prev, index++)
    for (int i = 0; i < n->n_in; i++) {
      const ct_tensor *x = n->in[i];
      int k = x && x->dtype == CT_F32 ? param_of(p, ct_f32(x)) : -1;
      if (k >= 0) dp->param_last[k] = index;
    }
  for (int b = 0; b < dp->n_buckets; b++) dp->buckets[b].ready = -1;
  for (int k = 0; k < p->n; k++) {
    const size_t lo = p->items[k].offset;
    const size_t hi = lo + (size_t)p->items[k].tensor->numel;
    if (dp->param_last[k] < 0 || hi == lo) continue;
    for (size_t b = lo / dp->bucket_floats; b <= (hi - 1) / dp->bucket_floats;
         b++)
      if (dp->param_last[k] > dp->buckets[b].ready)
        dp->buckets[b].ready = dp->param_last[k];
  }
}

// Buckets start in one fixed order on every rank (MPI needs collectives in
// the same order): from the end of the store, where backward finishes
// first. started counts them; bucket (n_buckets - 1 - i) is the i-th.
static bucket *nth_bucket(ct_dp *dp, int i) {
  return &dp->buckets[dp->n_buckets - 1 - i];
}

// Completes this rank's sum for the bucket and starts its all-to-all.
static ct_status start_bucket(ct_dp *dp, bucket *b) {
  ct_status st = ct_grad_accum_add(&dp->local, dp->accum - 1, dp->accum,
                                   dp->p->grad, b->lo, b->hi);
  const int n = dp->size;
  const int64_t *c = b->counts;
  if (st == CT_OK)
    st = ct_dist_alltoallv_start(dp->p->grad + b->lo, c, c + n, b->recv,
                                 c + 2 * n, c + 3 * n, &b->exchange);
  dp->started++;
  return st;
}

typedef struct hook_state {
  ct_dp *dp;
  ct_status st;
} hook_state;

static void on_node(void *arg, const ct_node *node, int64_t index) {
  (void)node;
  hook_state *h = arg;
  ct_dp *dp = h->dp;
  while (h->st == CT_OK && dp->started < dp->n_buckets &&
         nth_bucket(dp, dp->started)->ready <= index)
    h->st = start_bucket(dp, nth_bucket(dp, dp->started));
  // Let MPI move the started exchanges along.
  for (int i = 0; i < dp->started; i++) {
    bucket *b = nth_bucket(dp, i);
    if (b->exchange >= 0) {
      ct_dist_test(&b->exchange);
      break;
    }
  }
}

ct_status ct_dp_backward(ct_dp *dp, ct_tensor *loss, int64_t a) {
  ct_status st = loss ? CT_OK : CT_ERR_STATE;
  const bool last = a == dp->accum - 1;
  ct_status kept = keep_bn_terms(dp, a);
  if (kept != CT_OK) return kept;
  if (dp->size == 1 || !last) {
    if (loss) st = ct_backward(loss);
    ct_status added = ct_grad_accum_add(&dp->local, a, dp->accum, dp->p->grad,
                                        0, dp->p->count);
    return st != CT_OK && loss ? st : added;
  }
  dp->started = 0;
  hook_state h = {.dp = dp, .st = CT_OK};
  if (loss) {
    scan_tape(dp);
    st = ct_backward_with_hook(loss, on_node, &h);
  } else {
    for (int b = 0; b < dp->n_buckets; b++) dp->buckets[b].ready = -1;
  }
  // The rest (all of them without backward) start now.
  while (h.st == CT_OK && dp->started < dp->n_buckets)
    h.st = start_bucket(dp, nth_bucket(dp, dp->started));
  return st != CT_OK && loss ? st : h.st;
}

// The owner's sum of a bucket's share: the N ranks' parts with the tree over
// N, into the store.
static ct_status sum_parts(ct_dp *dp, bucket *b) {
  const size_t part = b->part_hi - b->part_lo;
  if (part == 0) return CT_OK;
  ct_grad_accum tree;
  ct_grad_accum_init(&tree, part, false);
  ct_status st = CT_OK;
  for (int r = 0; r < dp->size && st == CT_OK; r++)
    st = ct_grad_accum_add(&tree, r, dp->size, b->recv + (size_t)r * part, 0,
                           part);
  if (st == CT_OK)
    memcpy(dp->p->grad + b->part_lo, b->recv + (size_t)(dp->size - 1) * part,
           part * sizeof(float));
  return st;
}

ct_status ct_dp_reduce_finish(ct_dp *dp) {
  if (dp->size == 1) return CT_OK;
  ct_status st = CT_OK;
  const int n = dp->size;
  for (int i = 0; i < dp->n_buckets; i++) {
    bucket *b = nth_bucket(dp, i);
    ct_status w = ct_dist_wait(&b->exchange);
    if (st == CT_OK) st = w;
    if (st == CT_OK) st = sum_parts(dp, b);
    // The summed shares back to every rank (ZeRO-1: the parameters instead,
    // after the update). Started even after a failure: ranks stay matched.
    if (!dp->zero) {
      ct_status g = ct_dist_allgatherv_start(dp->p->grad + b->lo, b->counts,
                                             b->counts + n, &b->gather);
      if (st == CT_OK) st = g;
    }
  }
  for (int i = 0; i < dp->n_buckets; i++) {
    ct_status w = ct_dist_wait(&nth_bucket(dp, i)->gather);
    if (st == CT_OK) st = w;
  }
  return st;
}

ct_status ct_dp_time_exchange(ct_dp *dp, int n, double *seconds) {
  *seconds = 0.0;
  if (dp->size == 1 || n < 1) return CT_OK;
  ct_status st = CT_OK;
  double started = 0.0;
  for (int i = 0; i <= n && st == CT_OK; i++) {
    if (i == 1) started = ct_time_now();
    ct_params_zero_grad(dp->p);
    for (int64_t a = 0; a < dp->accum && st == CT_OK; a++) {
      ct_dp_bn_log(dp);
      st = ct_dp_backward(dp, NULL, a);
    }
    if (st == CT_OK) st = ct_dp_reduce_finish(dp);
  }
  *seconds = (ct_time_now() - started) / n;
  ct_params_zero_grad(dp->p);
  return st;
}

ct_status ct_dp_gather_micro(ct_dp *dp, const double *mine, int64_t k,
                             double *all) {
  return ct_dist_allgather(mine, (size_t)(dp->accum * k) * sizeof(double), all);
}

ct_status ct_dp_clip(ct_dp *dp, double max_norm, double *norm) {
  if (!dp->zero) {
    *norm = ct_clip_grad_norm(dp->p, max_norm);
    return CT_OK;
  }
  const size_t first = dp->span_first[dp->rank];
  const size_t n = dp->span_first[dp->rank + 1] - first;
  double *sums = malloc((n ? n : 1) * sizeof *sums);
  size_t *offsets = malloc((size_t)(dp->size + 1) * sizeof *offsets);
  ct_byte_buffer all = {0};
  ct_status st = sums && offsets ? CT_OK : nomem("the gradient norm");
  if (st == CT_OK) {
    ct_grad_span_squares(dp->p->grad, dp->spans + first, (int64_t)n, sums);
    st = ct_dist_allgatherv(sums, n * sizeof *sums, &all, offsets);
  }
  if (st == CT_OK) {
    double *every =
        malloc((size_t)(dp->n_spans ? dp->n_spans : 1) * sizeof *every);
    if (!every) {
      st = nomem("the gradient norm");
    } else {
      memcpy(every, all.data, (size_t)dp->n_spans * sizeof *every);
      *norm = ct_grad_norm_from_squares(every, dp->n_spans);
      free(every);
      ct_clip_grad_range(dp->p, *norm, max_norm, dp->shard[dp->rank],
                         dp->shard[dp->rank + 1]);
    }
  }
  free(sums);
  free(offsets);
  ct_byte_buffer_free(&all);
  return st;
}

ct_status ct_dp_check_finite(ct_dp *dp, int64_t step) {
  if (!dp->zero) return ct_grads_check_finite(dp->p, step);
  // Each rank checks its shard; the first rank (lowest offsets) that found
  // one names it, on every rank.
  ct_status st = ct_grads_check_finite_range(dp->p, step, dp->shard[dp->rank],
                                             dp->shard[dp->rank + 1]);
  const char *msg = st == CT_OK ? "" : ct_last_error();
  size_t *offsets = malloc((size_t)(dp->size + 1) * sizeof *offsets);
  if (!offsets) return nomem("the finite check");
  ct_byte_buffer all = {0};
  ct_status g = ct_dist_allgatherv(msg, strlen(msg), &all, offsets);
  ct_status out = g;
  for (int r = 0; r < dp->size && g == CT_OK; r++)
    if (offsets[r + 1] > offsets[r]) {
      out = ct_error(CT_ERR_NUMERIC, "%.*s", (int)(offsets[r + 1] - offsets[r]),
                     all.data + offsets[r]);
      break;
    }
  free(offsets);
  ct_byte_buffer_free(&all);
  return out;
}

ct_status ct_dp_optim_step(ct_dp *dp, ct_optim *opt, float lr) {
  if (!dp->zero) return ct_optim_step(opt, dp->p, lr);
  ct_status st = ct_optim_step_range(opt, dp->p, lr, dp->shard[dp->rank],
                                     dp->shard[dp->rank + 1], dp->moments);
  // Every rank takes part in the all-gather, even after a failure.
  ct_status g = ct_dist_allgather_floats(dp->p->data, dp->shard);
  return st != CT_OK ? st : g;
}

ct_status ct_dp_gather_optimizer_state(ct_dp *dp) {
  if (!dp->zero) return CT_OK;
  ct_status st = CT_OK;
  for (int k = 0; k < CT_PARAM_STATE_SLOTS && st == CT_OK; k++) {
    if (!dp->moments[k]) continue;
    float *all = NULL;
    if (dp->rank == 0 && !(all = ct_params_state(dp->p, k))) st = CT_ERR_NOMEM;
    // (a failure on rank 0 leaves the others waiting: it ends the job)
    if (st == CT_OK)
      st = ct_dist_gather_floats(dp->moments[k], all, dp->shard, 0);
  }
  return st;
}

void ct_dp_release_optimizer_state(ct_dp *dp) {
  if (!dp->zero) return;
  for (int k = 0; k < CT_PARAM_STATE_SLOTS; k++)
    if (dp->moments[k]) ct_params_state_release(dp->p, k);
}

ct_dp_stats ct_dp_get_stats(const ct_dp *dp) {
  ct_dp_stats s = {.buckets = dp->n_buckets};
  const size_t held =
      dp->zero ? dp->shard[dp->rank + 1] - dp->shard[dp->rank] : dp->p->count;
  for (int k = 0; k < CT_PARAM_STATE_SLOTS; k++)
    if (dp->state_slots & 1u << k) s.state_floats += held;
  if (dp->size > 1) {
    // All-to-all: every float of the store but this rank's share goes out;
    // all-gather: this rank's share goes to each of the others.
    const double mine = (double)(dp->shard[dp->rank + 1] - dp->shard[dp->rank]);
    s.floats_sent = (double)dp->p->count - mine + mine * (dp->size - 1);
  }
  return s;
}
