// Persistent storage for a model: parameters, their gradients and optimizer
// state, each in one contiguous float buffer, with a registry of
// {name, shape, offset, flags}.
//
// Because everything is one buffer, an optimizer step, gradient clipping, a
// gradient norm and checkpoint I/O are flat loops over `count` floats, and
// names (PyTorch/timm state_dict style, "blocks.0.attn.qkv.weight") are how
// checkpoints and export find tensors.
//
// Each parameter starts at a 64-byte aligned offset; the gaps between
// parameters are zero in every buffer and stay zero under any elementwise
// update whose zero input gives zero output.
#ifndef CT_CORE_PARAMS_H
#define CT_CORE_PARAMS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/tensor.h"

enum {
  CT_PARAM_NO_DECAY = 1u << 0,  // excluded from weight decay (biases, norms)
  CT_PARAM_FROZEN = 1u << 1,    // no gradient (e.g. a teacher's weights)
};

enum { CT_PARAM_STATE_SLOTS = 4 };  // optimizer buffers (Adam uses two)

typedef struct ct_param {
  char *name;
  ct_tensor *tensor;  // data and grad point into the store's buffers
  size_t offset;      // in floats, into data, grad and each state buffer
  unsigned flags;
} ct_param;

// The floats [*a, *b) of parameter `it` that lie in [lo, hi) of the store
// (a rank's or a shard's range); false when none do.
static inline bool ct_param_part(const ct_param *it, size_t lo, size_t hi,
                                 size_t *a, size_t *b) {
  *a = it->offset > lo ? it->offset : lo;
  *b = it->offset + (size_t)it->tensor->numel;
  if (*b > hi) *b = hi;
  return *a < *b;
}

typedef struct ct_params {
  float *data;                         // all parameter values
  float *grad;                         // all gradients (same layout)
  float *state[CT_PARAM_STATE_SLOTS];  // optimizer state, NULL until asked for
  size_t count;     // floats in use per buffer (including alignment gaps)
  size_t capacity;  // floats allocated per buffer
  ct_param *items;
  int n, cap;
} ct_params;

void ct_params_init(ct_params *p);
void ct_params_free(ct_params *p);

// Registers a zero-initialized parameter and returns its tensor (owned by the
// store, valid until ct_params_free). NULL with an error for a duplicate name,
// a bad shape or no memory. Adding may move the buffers: tensors returned
// earlier are updated, raw pointers into the buffers are not.
ct_tensor *ct_params_add(ct_params *p, const char *name, int ndim,
                         const int64_t *shape, unsigned flags);
// The parameter called `name`, or NULL.
ct_param *ct_params_find(const ct_params *p, const char *name);
// Number of parameter values (without the alignment gaps).
size_t ct_params_numel(const ct_params *p);
void ct_params_zero_grad(ct_params *p);
// Optimizer state buffer `slot` (count floats, zero on first use), or NULL
// with an error when out of memory.
float *ct_params_state(ct_params *p, int slot);
// Frees state buffer `slot` (NULL again): a ZeRO-1 data-parallel rank keeps
// only its shard of the moments, outside the store.
void ct_params_state_release(ct_params *p, int slot);
// Bytes held by the store (values, grads and state): its peak, since it only
// grows.
size_t ct_params_bytes(const ct_params *p);

#endif
