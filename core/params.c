// The parameter store: one buffer each for values, grads and optimizer
// state, and a registry naming the pieces.
#include "core/params.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

enum { PARAM_ALIGN_FLOATS = 16 };  // 64 bytes

void ct_params_init(ct_params *p) { memset(p, 0, sizeof *p); }

void ct_params_free(ct_params *p) {
  for (int i = 0; i < p->n; i++) {
    free(p->items[i].name);
    free(p->items[i].tensor);
  }
  free(p->items);
  free(p->data);
  free(p->grad);
  for (int s = 0; s < CT_PARAM_STATE_SLOTS; s++) free(p->state[s]);
  memset(p, 0, sizeof *p);
}

// Grows one buffer to `cap` floats, zeroing the new part. On failure the old
// buffer is left as it was.
static float *grow(float *buf, size_t old_cap, size_t cap) {
  float *b = realloc(buf, cap * sizeof(float));
  if (b) memset(b + old_cap, 0, (cap - old_cap) * sizeof(float));
  return b;
}

static void rebase_tensors(ct_params *p) {
  for (int i = 0; i < p->n; i++) {
    ct_param *it = &p->items[i];
    it->tensor->data = p->data + it->offset;
    it->tensor->grad = p->grad + it->offset;
  }
}

static ct_status reserve(ct_params *p, size_t floats) {
  if (floats <= p->capacity) return CT_OK;
  size_t cap = p->capacity ? p->capacity : 4096;
  while (cap < floats) cap *= 2;
  float *d = grow(p->data, p->capacity, cap);
  if (d) p->data = d;
  float *g = d ? grow(p->grad, p->capacity, cap) : NULL;
  if (g) p->grad = g;
  bool ok = d && g;
  for (int s = 0; ok && s < CT_PARAM_STATE_SLOTS; s++) {
    if (!p->state[s]) continue;
    float *st = grow(p->state[s], p->capacity, cap);
    if (st) p->state[s] = st;
    ok = st != NULL;
  }
  if (!ok) {
    // Buffers that did grow keep their old contents; only capacity stays.
    if (d) rebase_tensors(p);
    return ct_error(CT_ERR_NOMEM, "params: out of memory growing to %zu floats",
                    floats);
  }
  // Grown buffers are all at least `cap` now; record it only when all are.
  p->capacity = cap;
  rebase_tensors(p);
  return CT_OK;
}

ct_param *ct_params_find(const ct_params *p, const char *name) {
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->items[i].name, name) == 0) return &p->items[i];
  return NULL;
}

ct_tensor *ct_params_add(ct_params *p, const char *name, int ndim,
                         const int64_t *shape, unsigned flags) {
  if (!name || !*name) {
    ct_error(CT_ERR_ARG, "params: a parameter needs a name");
    return NULL;
  }
  if (ct_params_find(p, name)) {
    ct_error(CT_ERR_ARG, "params: '%s' is already registered", name);
    return NULL;
  }
  int64_t numel = ct_shape_numel(ndim, shape);
  if (numel < 0) return NULL;
  size_t offset = (p->count + PARAM_ALIGN_FLOATS - 1) / PARAM_ALIGN_FLOATS *
                  PARAM_ALIGN_FLOATS;
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 32;
    ct_param *items = realloc(p->items, (size_t)cap * sizeof *items);
    if (!items) {
      ct_error(CT_ERR_NOMEM, "params: out of memory registering '%s'", name);
      return NULL;
    }
    p->items = items;
    p->cap = cap;
  }
  if (reserve(p, offset + (size_t)numel) != CT_OK) return NULL;
  ct_tensor *t = calloc(1, sizeof *t);
  char *copy = malloc(strlen(name) + 1);
  if (!t || !copy) {
    free(t);
    free(copy);
    ct_error(CT_ERR_NOMEM, "params: out of memory registering '%s'", name);
    return NULL;
  }
  strcpy(copy, name);
  t->dtype = CT_F32;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->numel = numel;
  t->requires_grad = !(flags & CT_PARAM_FROZEN);
  t->persistent = true;
  t->name = copy;
  p->items[p->n++] =
      (ct_param){.name = copy, .tensor = t, .offset = offset, .flags = flags};
  p->count = offset + (size_t)numel;
  rebase_tensors(p);
  return t;
}

size_t ct_params_numel(const ct_params *p) {
  size_t n = 0;
  for (int i = 0; i < p->n; i++) n += (size_t)p->items[i].tensor->numel;
  return n;
}

// Chunks of the gradient buffer zeroed by one thread each: the store is
// tens of megabytes, one memset on one core is a visible part of a step.
enum { ZERO_CHUNK = 1 << 16 };

void ct_params_zero_grad(ct_params *p) {
  if (!p->grad) return;
  float *g = p->grad;
  const size_t n = p->count, chunks = (n + ZERO_CHUNK - 1) / ZERO_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (size_t c = 0; c < chunks; c++) {
    const size_t lo = c * ZERO_CHUNK;
    memset(g + lo, 0,
           (n - lo < ZERO_CHUNK ? n - lo : ZERO_CHUNK) * sizeof(float));
  }
}

float *ct_params_state(ct_params *p, int slot) {
  if (slot < 0 || slot >= CT_PARAM_STATE_SLOTS) {
    ct_error(CT_ERR_ARG, "params: state slot %d outside 0..%d", slot,
             CT_PARAM_STATE_SLOTS - 1);
    return NULL;
  }
  if (!p->state[slot]) {
    p->state[slot] = calloc(p->capacity ? p->capacity : 1, sizeof(float));
    if (!p->state[slot])
      ct_error(CT_ERR_NOMEM, "params: out of memory for optimizer state");
  }
  return p->state[slot];
}

void ct_params_state_release(ct_params *p, int slot) {
  if (slot < 0 || slot >= CT_PARAM_STATE_SLOTS) return;
  free(p->state[slot]);
  p->state[slot] = NULL;
}

size_t ct_params_bytes(const ct_params *p) {
  size_t buffers = 2;
  for (int s = 0; s < CT_PARAM_STATE_SLOTS; s++) buffers += p->state[s] != NULL;
  return buffers * p->capacity * sizeof(float);
}
