// The tape: a linked list of nodes in the step arena, newest first.
#include "autograd/tape.h"
#include "core/arena.h"

#include <string.h>

static bool recording = true;
static ct_node *head;              // newest node, valid in head_generation
static unsigned head_generation;
static int head_count;

static ct_node *tape_head(void) {
  if (head_generation != ct_arena_generation()) {
    head = NULL;
    head_count = 0;
  }
  return head;
}

bool ct_grad_enabled(void) { return recording; }

bool ct_grad_set_enabled(bool on) {
  bool was = recording;
  recording = on;
  return was;
}

ct_tensor *ct_requires_grad(ct_tensor *t) {
  if (!t) return NULL;
  if (t->dtype != CT_F32) {
    ct_error(CT_ERR_DTYPE, "requires_grad: only f32 tensors have gradients "
                           "(got %s)", ct_dtype_name(t->dtype));
    return NULL;
  }
  t->requires_grad = true;
  return t;
}

bool ct_tape_wants(int n_in, ct_tensor *const *in) {
  if (!recording) return false;
  for (int i = 0; i < n_in; i++)
    if (in[i] && in[i]->requires_grad) return true;
  return false;
}

ct_status ct_tape_record(const char *op, ct_backward_fn backward, ct_tensor *out,
                         int n_in, ct_tensor *const *in, void *saved) {
  out->requires_grad = false;
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
  node->prev = tape_head();
  head = node;
  head_generation = ct_arena_generation();
  head_count++;
  out->node = node;
  out->requires_grad = true;
  return CT_OK;
}

int ct_tape_size(void) {
  tape_head();
  return head_count;
}

void ct_tape_clear(void) {
  head = NULL;
  head_count = 0;
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
// the tensor backward starts from keep theirs.
enum { GRAD_POOL_MAX = 64 };
typedef struct pooled_grad {
  float *buf;
  int64_t numel;
} pooled_grad;
static pooled_grad grad_pool[GRAD_POOL_MAX];
static int grad_pool_n;
static unsigned grad_pool_generation;

// Empties the pool when the arena was reset since it was filled.
static void grad_pool_sync(void) {
  if (grad_pool_generation == ct_arena_generation()) return;
  grad_pool_n = 0;
  grad_pool_generation = ct_arena_generation();
}

static float *grad_pool_take(int64_t numel) {
  grad_pool_sync();
  int best = -1;
  for (int i = 0; i < grad_pool_n; i++)
    if (grad_pool[i].numel >= numel &&
        (best < 0 || grad_pool[i].numel < grad_pool[best].numel))
      best = i;
  if (best < 0) return NULL;
  float *buf = grad_pool[best].buf;
  grad_pool[best] = grad_pool[--grad_pool_n];
  memset(buf, 0, (size_t)numel * sizeof(float));
  return buf;
}

// Gives the gradient buffer of an op's output to the pool; t->grad becomes
// NULL.
static void grad_pool_put(ct_tensor *t) {
  if (!t->grad || t->persistent || !t->node) return;
  grad_pool_sync();
  if (grad_pool_n < GRAD_POOL_MAX)
    grad_pool[grad_pool_n++] = (pooled_grad){t->grad, t->numel};
  t->grad = NULL;
}

float *ct_grad_of(ct_tensor *t) {
  if (!t->grad) t->grad = grad_pool_take(t->numel);
  if (!t->grad) t->grad = ct_arena_calloc((size_t)t->numel * sizeof(float));
  return t->grad;
}

void ct_tensor_zero_grad(ct_tensor *t) {
  if (t && t->grad) memset(t->grad, 0, (size_t)t->numel * sizeof(float));
}

ct_status ct_backward_seeded(ct_tensor *out, const float *seed) {
  if (!out) return ct_last_status() ? ct_last_status() : CT_ERR_ARG;
  if (out->dtype != CT_F32)
    return ct_error(CT_ERR_DTYPE, "backward: the loss must be f32, not %s",
                    ct_dtype_name(out->dtype));
  if (!out->requires_grad)
    return ct_error(CT_ERR_STATE,
                    "backward: the loss does not require grad: no parameter "
                    "or input that requires grad reached it (was recording "
                    "off, or did you forget ct_requires_grad?)");
  float *g = ct_grad_of(out);
  if (!g) return CT_ERR_NOMEM;
  for (int64_t i = 0; i < out->numel; i++) g[i] += seed ? seed[i] : 1.0f;

  // Walk newest to oldest. A node whose output received no gradient is not
  // on a path to the loss and is skipped.
  bool was = ct_grad_set_enabled(false);
  for (ct_node *n = tape_head(); n; n = n->prev) {
    if (!n->out->grad) continue;
    for (int i = 0; i < n->n_in; i++) {
      ct_tensor *x = n->in[i];
      if (x && x->requires_grad && !ct_grad_of(x)) {
        ct_grad_set_enabled(was);
        ct_tape_clear();
        return CT_ERR_NOMEM;
      }
    }
    n->backward(n);
    if (n->out != out) grad_pool_put(n->out);
  }
  ct_grad_set_enabled(was);
  ct_tape_clear();
  return CT_OK;
}

ct_status ct_backward(ct_tensor *loss) {
  if (loss && loss->numel != 1) {
    char s[128];
    return ct_error(CT_ERR_SHAPE,
                    "backward: the loss must have one element, got %s (reduce "
                    "it with ct_sum or ct_mean, or use ct_backward_seeded)",
                    ct_shape_str(loss->ndim, loss->shape, s, sizeof s));
  }
  return ct_backward_seeded(loss, NULL);
}
