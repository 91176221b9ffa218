// The autograd tape: define-by-run, reverse mode.
//
// Each differentiable op, when recording is on and one of its inputs requires
// grad, appends a node {backward fn, inputs, output, saved state}. The output
// then requires grad too. ct_backward(loss) seeds d(loss)/d(loss) = 1, walks
// the nodes newest to oldest, and each node's backward ADDS (+=) into the
// grads of those inputs that require grad. Parameter grads live in the
// persistent grad buffer (core/params.h), so several backward passes before
// one optimizer step accumulate, as gradient accumulation needs.
//
// A backward pass consumes the tape: nodes recorded before it are not walked
// again. Gradients of op outputs are scratch: once an op's backward has run,
// its output's buffer is reused for later gradients of the same pass and
// t->grad goes back to NULL, so after backward only leaves (parameters,
// ct_requires_grad tensors) and the tensor backward started from hold one.
// Nodes live in the step arena, so ct_arena_reset() also empties the tape.
//
// The tape, its recording switch and its gradient buffers belong to the
// calling thread's session (core/session.h): threads in different sessions
// record and differentiate independently, and a no-grad scope in one
// thread does not touch another's recording. Within a session, ops are
// called from one thread (the kernels inside an op are what run in
// parallel).
#ifndef CT_AUTOGRAD_TAPE_H
#define CT_AUTOGRAD_TAPE_H

#include "core/error.h"
#include "core/tensor.h"

enum { CT_NODE_MAX_INPUTS = 6 };

struct ct_node;
typedef void (*ct_backward_fn)(struct ct_node *node);

typedef struct ct_node {
  const char *op;  // op name, for messages
  ct_backward_fn backward;
  ct_tensor *out;
  ct_tensor *in[CT_NODE_MAX_INPUTS];  // unused slots are NULL
  int n_in;
  void *saved;           // op-specific state (arena memory)
  struct ct_node *prev;  // the node recorded before this one
  unsigned flags;        // CT_NODE_* below, set by the op
  // During backward only: bit i is set when in[i]'s gradient buffer was
  // just handed out uninitialized, so this backward must overwrite every
  // element of it instead of adding. Only inputs marked with
  // CT_NODE_FRESH_INPUT get such bits.
  unsigned fresh;
} ct_node;

// Node flags: promises an op makes about its backward, which let the
// backward pass skip work. Set after recording, on out->node (see
// ct_node_set_flags).
enum {
  // One input whose gradient equals the output's elementwise (reshape): an
  // input without a gradient yet takes over the output's buffer, and the
  // backward does not run.
  CT_NODE_GRAD_IDENTITY = 1u << 0,
};
// The backward honours fresh bit i (assigns to in[i]'s gradient where it
// would add), so the first gradient in[i] receives skips zeroing its buffer.
#define CT_NODE_FRESH_INPUT(i) (1u << (8 + (i)))
// in[i]'s gradient is the output's, element for element (a residual added
// to the output). When in[i] has no gradient yet as the node's backward
// runs, it gets none (its grad stays NULL, and the backward leaves it
// alone) and takes over the output's buffer afterwards, instead of a copy;
// otherwise the backward adds to it as usual. Not for the tensor backward
// started from, a persistent tensor, or an input listed twice.
#define CT_NODE_GRAD_PASS(i) (1u << (16 + (i)))

// Adds flags to the node that produced out, if it was recorded.
static inline void ct_node_set_flags(ct_tensor *out, unsigned flags) {
  if (out && out->node) out->node->flags |= flags;
}

// Recording switch of the calling thread's session; eval and inference run
// with it off (no tape, no saved state). ct_grad_set_enabled returns the
// previous setting, so a no-grad scope is:
//   bool was = ct_grad_set_enabled(false); ...; ct_grad_set_enabled(was);
bool ct_grad_enabled(void);
bool ct_grad_set_enabled(bool on);

// Marks an arena tensor as a leaf that wants its gradient (tests, inputs).
// Returns t, or NULL (with an error) for a non-f32 tensor.
ct_tensor *ct_requires_grad(ct_tensor *t);

// True when an op with these inputs must record (recording on and some input
// requires grad). Ops test this before saving state for backward.
bool ct_tape_wants(int n_in, ct_tensor *const *in);
// Appends a node for `out`, if ct_tape_wants; sets out->requires_grad. NULL
// inputs are allowed (optional inputs such as a missing bias). Returns CT_OK,
// or CT_ERR_NOMEM.
ct_status ct_tape_record(const char *op, ct_backward_fn backward,
                         ct_tensor *out, int n_in, ct_tensor *const *in,
                         void *saved);
// Nodes recorded and not yet consumed.
int ct_tape_size(void);
// The oldest recorded node (not yet consumed) whose f32 output holds a NaN
// or Inf, or NULL when none does: where a forward pass first went
// non-finite, for the message that stops a training run.
const ct_node *ct_tape_first_nonfinite(void);
// Forgets all recorded nodes.
void ct_tape_clear(void);

// Backward from a scalar loss (seed 1). Errors: loss not a scalar, not f32,
// or not connected to anything that requires grad.
ct_status ct_backward(ct_tensor *loss);
// Backward from any tensor with an explicit seed gradient (out->numel
// floats; NULL means all ones).
ct_status ct_backward_seeded(ct_tensor *out, const float *seed);

// Called after every node that ct_backward_with_hook walks, run or skipped
// (newest first), with its index in that order (0: the newest node). A
// data-parallel step uses it to send gradients backward has finished while
// backward goes on: a parameter's gradient is complete once the oldest
// node that has it as an input has been walked.
typedef void (*ct_backward_hook)(void *arg, const ct_node *node, int64_t index);
// ct_backward(loss), calling hook(arg, node, index) after each node.
ct_status ct_backward_with_hook(ct_tensor *loss, ct_backward_hook hook,
                                void *arg);
// The newest node of the tape (older ones through ->prev), NULL when it is
// empty: the order in which backward will walk them.
const ct_node *ct_tape_newest(void);

// The gradient buffer of t, allocated zeroed in the arena on first use
// (parameters already have theirs). Backward functions accumulate into it.
float *ct_grad_of(ct_tensor *t);
// Zeroes t's gradient, if it has one.
void ct_tensor_zero_grad(ct_tensor *t);

#endif
