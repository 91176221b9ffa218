// The tape: a linked list of nodes in the step arena, newest first, held by
// the calling thread's session (core/session.h) with the recording switch
// and the gradient pool. ct_arena_reset() empties all three.
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/profile.h"
#include "core/session_internal.h"
#include "core/vmath.h"

#include <string.h>

bool ct_grad_enabled(void) { return ct_session_current()->recording; }

bool ct_grad_set_enabled(bool on) {
  ct_session *s = ct_session_current();
  bool was = s->recording;
  s->recording = on;
  return was;
}

ct_tensor *ct_requires_grad(ct_tensor *t) {
  if (!t) return NULL;
  if (t->dtype != CT_F32) {
    ct_error(CT_ERR_DTYPE,
             "requires_grad: only f32 tensors have gradients "
             "(got %s)",
             ct_dtype_name(t->dtype));
    return NULL;
  }
  t->requires_grad = true;
  return t;
}

bool ct_tape_wants(int n_in, ct_tensor *const *in) {
  if (!ct_session_current()->recording) return false;
  for (int i = 0; i < n_in; i++)
    if (in[i] && in[i]->requires_grad) return true;
  return false;
}

// ---- the profiler's op kinds ---------------------------------------------------
//
// The kind (core/profile.h) an op's time goes to, by the op's name: what is
// left of an op once its top-level products (timed as gemm) are taken out.
// Ops not listed count as other, among them linear and matmul, whose
// remainder is the zeroing of their gradient buffers and their checks.
typedef struct op_kind_entry {
  const char *op;
  ct_prof_kind kind;
} op_kind_entry;

static const op_kind_entry op_kinds[] = {
    {"linear_fused", CT_PROF_ELEMENTWISE},
    {"add", CT_PROF_ELEMENTWISE},
    {"sub", CT_PROF_ELEMENTWISE},
    {"mul", CT_PROF_ELEMENTWISE},
    {"scale", CT_PROF_ELEMENTWISE},
    {"relu", CT_PROF_ELEMENTWISE},
    {"gelu", CT_PROF_ELEMENTWISE},
    {"sigmoid", CT_PROF_ELEMENTWISE},
    {"tanh", CT_PROF_ELEMENTWISE},
    {"dropout", CT_PROF_ELEMENTWISE},
    {"add_dropout", CT_PROF_ELEMENTWISE},
    {"relu_dropout", CT_PROF_ELEMENTWISE},
    {"gru_cell", CT_PROF_ELEMENTWISE},
    {"lstm_cell", CT_PROF_ELEMENTWISE},
    {"gru_scan", CT_PROF_ELEMENTWISE},
    {"lstm_scan", CT_PROF_ELEMENTWISE},
    {"layernorm", CT_PROF_NORM},
    {"batchnorm2d", CT_PROF_NORM},
    {"batchnorm_tokens", CT_PROF_NORM},
    {"attention", CT_PROF_ATTENTION},
    {"attention_qkv", CT_PROF_ATTENTION},
    {"additive_attention", CT_PROF_ATTENTION},
    {"softmax", CT_PROF_ATTENTION},
    {"log_softmax", CT_PROF_ATTENTION},
    {"relative_position_bias", CT_PROF_ATTENTION},
    {"swin_shift_mask", CT_PROF_ATTENTION},
    {"cross_entropy", CT_PROF_LOSS},
    {"kl_div", CT_PROF_LOSS},
    {"l1", CT_PROF_LOSS},
    {"mse", CT_PROF_LOSS},
    {"generalized_box_iou", CT_PROF_LOSS},
    {"generalized_box_iou_pairs", CT_PROF_LOSS},
    {"reshape", CT_PROF_LAYOUT},
    {"permute", CT_PROF_LAYOUT},
    {"transpose", CT_PROF_LAYOUT},
    {"concat", CT_PROF_LAYOUT},
    {"slice", CT_PROF_LAYOUT},
    {"embedding", CT_PROF_LAYOUT},
    {"gather_rows", CT_PROF_LAYOUT},
    {"conv2d", CT_PROF_LAYOUT},
    {"window_partition", CT_PROF_LAYOUT},
    {"window_reverse", CT_PROF_LAYOUT},
    {"roll2d", CT_PROF_LAYOUT},
    {"patch_merge", CT_PROF_LAYOUT},
};

static ct_prof_kind op_kind(const char *op) {
  for (size_t i = 0; i < sizeof op_kinds / sizeof op_kinds[0]; i++)
    if (strcmp(op, op_kinds[i].op) == 0) return op_kinds[i].kind;
  return CT_PROF_OTHER;
}

// Gives the time since the profiler's last mark to op's kind and to its
// row of the op table, forward or backward (nothing when the profiler is
// off).
static void prof_attribute_op(const char *op, bool backward) {
  if (ct_session_current()->prof.on)
    ct_prof_attribute_op(op, backward, op_kind(op));
}

ct_status ct_tape_record(const char *op, ct_backward_fn backward,
                         ct_tensor *out, int n_in, ct_tensor *const *in,
                         void *saved) {
  out->requires_grad = false;
  prof_attribute_op(op, false);
  if (!ct_tape_wants(n_in, in)) return CT_OK;
  if (n_in > CT_NODE_MAX_INPUTS)
    return ct_error(CT_ERR_ARG, "%s: %d inputs, a node holds at most %d", op,
                    n_in, CT_NODE_MAX_INPUTS);
  ct_node *node = ct_arena_calloc(sizeof *node);
  if (!node) return CT_ERR_NOMEM;
  node->op = op;
  node->backward = backward;
  node->out = out;
  node->n_in = n_in;
  for (int i = 0; i < n_in; i++) node->in[i] = in[i];
  node->saved = saved;
  ct_session *s = ct_session_current();
  node->prev = s->tape_head;
  s->tape_head = node;
  s->tape_count++;
  out->node = node;
  out->requires_grad = true;
  return CT_OK;
}

int ct_tape_size(void) { return ct_session_current()->tape_count; }

const ct_node *ct_tape_first_nonfinite(void) {
  const ct_node *first = NULL;
  for (const ct_node *n = ct_session_current()->tape_head; n; n = n->prev)
    if (n->out && n->out->dtype == CT_F32 &&
        ct_vmath_first_nonfinite(ct_f32(n->out), n->out->numel) >= 0)
      first = n;
  return first;
}

void ct_tape_clear(void) {
  ct_session *s = ct_session_current();
  s->tape_head = NULL;
  s->tape_count = 0;
}

// ---- gradient buffers ---------------------------------------------------------
//
// The gradient of an op's output is dead once that op's backward has run:
// every consumer of the output was recorded later, so its backward ran
// earlier. Such buffers go to a small pool and are handed, zeroed, to later
// ct_grad_of calls (the smallest that fits). The backward pass then cycles
// through a few recently used buffers, warm in cache, instead of a fresh
// arena block per tensor, and the step's arena peak loses most of the
// intermediate gradients. Leaves (parameters, ct_requires_grad tensors) and
// the tensor backward starts from keep theirs. The pool is the session's
// (it holds arena memory, so an arena reset empties it).

// Zeroes n floats; big buffers on all threads (each float is written once,
// so the split cannot change anything).
enum { ZERO_PAR_MIN = 1 << 16, ZERO_CHUNK = 1 << 14 };
static void zero_floats(float *buf, int64_t n) {
  const int64_t chunks = (n + ZERO_CHUNK - 1) / ZERO_CHUNK;
#pragma omp parallel for schedule(static) if (n >= ZERO_PAR_MIN)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t lo = c * ZERO_CHUNK;
    const int64_t len = n - lo < ZERO_CHUNK ? n - lo : ZERO_CHUNK;
    memset(buf + lo, 0, (size_t)len * sizeof(float));
  }
}

// A buffer for numel floats from the pool (contents undefined), or NULL:
// the smallest that fits, unless even that is more than twice the size. A
// small gradient that took a big buffer would hold it while the big
// gradients that come next (a transformer block's MLP after the residual
// stream's) each needed new memory; a new small buffer costs less.
static float *grad_pool_take(int64_t numel) {
  ct_session *s = ct_session_current();
  ct_pooled_grad *pool = s->grad_pool;
  int best = -1;
  for (int i = 0; i < s->grad_pool_n; i++)
    if (pool[i].numel >= numel &&
        (best < 0 || pool[i].numel < pool[best].numel))
      best = i;
  if (best < 0 || pool[best].numel > 2 * numel) return NULL;
  float *buf = pool[best].buf;
  pool[best] = pool[--s->grad_pool_n];
  return buf;
}

// A gradient buffer from the arena carries its size in floats in the 64
// bytes before it, so that the pool offers it whole again after a smaller
// tensor has used it (without that, a big buffer taken by a small gradient
// would come back at the small size, and the next big one need new memory).
enum { GRAD_HEADER_FLOATS = 16 };

static float *grad_alloc(int64_t numel) {
  float *p =
      ct_arena_alloc((size_t)(numel + GRAD_HEADER_FLOATS) * sizeof(float));
  if (!p) return NULL;
  memcpy(p, &numel, sizeof numel);
  return p + GRAD_HEADER_FLOATS;
}

static int64_t grad_capacity(const float *buf) {
  int64_t numel;
  memcpy(&numel, buf - GRAD_HEADER_FLOATS, sizeof numel);
  return numel;
}

// A gradient buffer for t with undefined contents, or NULL when out of
// memory.
static float *grad_uninit(const ct_tensor *t) {
  float *buf = grad_pool_take(t->numel);
  return buf ? buf : grad_alloc(t->numel);
}

// Gives the gradient buffer of an op's output to the pool; t->grad becomes
// NULL.
static void grad_pool_put(ct_tensor *t) {
  if (!t->grad || t->persistent || !t->node) return;
  ct_session *s = ct_session_current();
  if (s->grad_pool_n < CT_GRAD_POOL_MAX)
    s->grad_pool[s->grad_pool_n++] =
        (ct_pooled_grad){t->grad, grad_capacity(t->grad)};
  t->grad = NULL;
}

float *ct_grad_of(ct_tensor *t) {
  if (!t->grad) {
    t->grad = grad_uninit(t);
    if (t->grad) zero_floats(t->grad, t->numel);
  }
  return t->grad;
}

// Whether n lists x in another slot than i.
static bool listed_twice(const ct_node *n, int i, const ct_tensor *x) {
  for (int j = 0; j < n->n_in; j++)
    if (j != i && n->in[j] == x) return true;
  return false;
}

// The input of n that takes over the output's gradient buffer after n's
// backward (CT_NODE_GRAD_PASS), or -1. Not from the tensor backward started
// from, which keeps its gradient.
static int pass_input(const ct_node *n, const ct_tensor *root) {
  const ct_tensor *y = n->out;
  if (y == root || y->persistent) return -1;
  for (int i = 0; i < n->n_in; i++) {
    const ct_tensor *x = n->in[i];
    if ((n->flags & CT_NODE_GRAD_PASS(i)) && x && x->requires_grad &&
        !x->grad && !x->persistent && x->numel == y->numel &&
        !listed_twice(n, i, x))
      return i;
  }
  return -1;
}

// Gives the inputs of n that require grad a gradient buffer before n's
// backward runs (all but `pass`, the input that takes over the output's
// after it, or -1): zeroed, or, for an input whose gradient the backward
// assigns (CT_NODE_FRESH_INPUT), as it comes (marked in n->fresh). An input
// listed twice is always zeroed: the backward's writes to its two slots must
// add up. False when out of memory.
static bool grads_for_inputs(ct_node *n, int pass) {
  n->fresh = 0;
  for (int i = 0; i < n->n_in; i++) {
    ct_tensor *x = n->in[i];
    if (!x || !x->requires_grad || x->grad || i == pass) continue;
    if ((n->flags & CT_NODE_FRESH_INPUT(i)) && !listed_twice(n, i, x)) {
      x->grad = grad_uninit(x);
      n->fresh |= 1u << i;
    }
    if (!ct_grad_of(x)) return false;
  }
  return true;
}

// For a CT_NODE_GRAD_IDENTITY node whose input has no gradient yet: the
// input takes the output's buffer (it would be a copy of it). Not for the
// tensor backward started from, which keeps its gradient.
static bool grad_handed_over(ct_node *n, const ct_tensor *root) {
  ct_tensor *x = n->in[0], *y = n->out;
  if (!(n->flags & CT_NODE_GRAD_IDENTITY) || n->n_in != 1 || y == root || !x ||
      !x->requires_grad || x->grad || y->persistent || x->numel != y->numel)
    return false;
  x->grad = y->grad;
  y->grad = NULL;
  return true;
}

void ct_tensor_zero_grad(ct_tensor *t) {
  if (t && t->grad) memset(t->grad, 0, (size_t)t->numel * sizeof(float));
}

// Adds the seed (ones when NULL) to out's gradient. A gradient not there
// yet is written as 0 + seed in one pass, on all threads when big: the
// values of zeroing it and adding (+0 for a -0 seed too), without the
// zeroing pass.
static bool seed_grad(ct_tensor *out, const float *seed) {
  const bool fresh = !out->grad;
  if (fresh && !(out->grad = grad_uninit(out))) return false;
  float *restrict g = out->grad;
  const int64_t n = out->numel;
#pragma omp parallel for schedule(static) if (n >= ZERO_PAR_MIN)
  for (int64_t i = 0; i < n; i++)
    g[i] = (fresh ? 0.0f : g[i]) + (seed ? seed[i] : 1.0f);
  return true;
}

static ct_status check_scalar_loss(const ct_tensor *loss) {
  if (loss && loss->numel != 1) {
    char s[128];
    return ct_error(CT_ERR_SHAPE,
                    "backward: the loss must have one element, got %s (reduce "
                    "it with ct_sum or ct_mean, or use ct_backward_seeded)",
                    ct_shape_str(loss->ndim, loss->shape, s, sizeof s));
  }
  return CT_OK;
}

// Backward from `out` with a seed gradient, calling hook (when not NULL)
// after every node walked.
static ct_status backward_walk(ct_tensor *out, const float *seed,
                               ct_backward_hook hook, void *arg) {
  if (!out) return ct_last_status() ? ct_last_status() : CT_ERR_ARG;
  if (out->dtype != CT_F32)
    return ct_error(CT_ERR_DTYPE, "backward: the loss must be f32, not %s",
                    ct_dtype_name(out->dtype));
  if (!out->requires_grad)
    return ct_error(CT_ERR_STATE,
                    "backward: the loss does not require grad: no parameter "
                    "or input that requires grad reached it (was recording "
                    "off, or did you forget ct_requires_grad?)");
  ct_prof_attribute(CT_PROF_OTHER);  // since the last op, and the seed
  if (!seed_grad(out, seed)) return CT_ERR_NOMEM;

  // Walk newest to oldest. A node whose output received no gradient is not
  // on a path to the loss and is skipped.
  bool was = ct_grad_set_enabled(false);
  int64_t index = 0;
  for (ct_node *n = ct_session_current()->tape_head; n; n = n->prev, index++) {
    if (n->out->grad && !grad_handed_over(n, out)) {
      const int pass = pass_input(n, out);
      if (!grads_for_inputs(n, pass)) {
        ct_grad_set_enabled(was);
        ct_tape_clear();
        return CT_ERR_NOMEM;
      }
      n->backward(n);
      n->fresh = 0;
      if (pass >= 0) {  // the output's gradient, now in[pass]'s
        n->in[pass]->grad = n->out->grad;
        n->out->grad = NULL;
      }
      if (n->out != out) grad_pool_put(n->out);
      prof_attribute_op(n->op, true);
    }
    if (hook) hook(arg, n, index);
  }
  ct_grad_set_enabled(was);
  ct_tape_clear();
  return CT_OK;
}

ct_status ct_backward_seeded(ct_tensor *out, const float *seed) {
  return backward_walk(out, seed, NULL, NULL);
}

ct_status ct_backward_with_hook(ct_tensor *loss, ct_backward_hook hook,
                                void *arg) {
  ct_status st = check_scalar_loss(loss);
  return st == CT_OK ? backward_walk(loss, NULL, hook, arg) : st;
}

const ct_node *ct_tape_newest(void) { return ct_session_current()->tape_head; }

ct_status ct_backward(ct_tensor *loss) {
  ct_status st = check_scalar_loss(loss);
  return st == CT_OK ? ct_backward_seeded(loss, NULL) : st;
}
