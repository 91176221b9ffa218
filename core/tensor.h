// Tensors: float32, int32 or bfloat16, row-major, contiguous, up to 5 dims.
//
// bf16 is a storage type only: activations that every reader rounds to bf16
// anyway (inputs of matrix products in bf16 precision) can be kept in half
// the memory (ct_nn_activation_dtype, nn/module.h). Ops read such a tensor
// as the fp32 values it widens to, and its gradient is fp32 like any other;
// the ops that accept one say so (the linear ops, layernorm's output,
// attention_qkv), the rest reject it.
//
// Dimension letters used across ctrain: B batch, T time (sequence), C channels,
// H W height and width, NH attention heads, Dh head size, V vocabulary, N rows,
// K classes.
//
// A tensor made by these functions (and every op output) lives in the step
// arena (core/arena.h) and is gone after ct_arena_reset(). Parameters live in
// a ct_params store (core/params.h) instead. Views (ct_tensor_view, and
// ct_tensor_slice0 of the first dim) share data with their source; any other
// layout change is an op that copies.
//
// What this file does not do: autograd. `grad`, `requires_grad` and `node`
// are fields the tape (autograd/) fills in.
#ifndef CT_CORE_TENSOR_H
#define CT_CORE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CT_MAX_DIMS 5

typedef enum ct_dtype { CT_F32, CT_I32, CT_BF16 } ct_dtype;

struct ct_node;
struct ct_rng;

typedef struct ct_tensor {
  ct_dtype dtype;
  int ndim;  // 0 (a scalar) .. CT_MAX_DIMS
  int64_t shape[CT_MAX_DIMS];
  int64_t numel;
  void *data;   // float*, int32_t* or uint16_t* (bf16 bits), per dtype
  float *grad;  // d(loss)/d(this), f32 only; NULL until needed
  bool requires_grad;
  bool persistent;       // data outside the arena (a parameter)
  struct ct_node *node;  // the tape node that made it; NULL for leaves
  const char *name;      // parameter name, or NULL
} ct_tensor;

// Spells a shape in place: ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3)).
#define CT_SHAPE(...)                                              \
  (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
      (const int64_t[]) {                                          \
    __VA_ARGS__                                                    \
  }

static inline float *ct_f32(const ct_tensor *t) { return (float *)t->data; }
static inline int32_t *ct_i32(const ct_tensor *t) { return (int32_t *)t->data; }
// The bf16 bit patterns (CT_BF16 tensors).
static inline uint16_t *ct_bf16(const ct_tensor *t) {
  return (uint16_t *)t->data;
}
static inline const char *ct_dtype_name(ct_dtype d) {
  return d == CT_F32 ? "f32" : d == CT_I32 ? "i32" : "bf16";
}

// Creation (arena). All return NULL with an error recorded on a bad shape
// (ndim outside 0..5, a negative dim) or when memory runs out.
ct_tensor *ct_tensor_empty(ct_dtype dtype, int ndim, const int64_t *shape);
ct_tensor *ct_tensor_zeros(ct_dtype dtype, int ndim, const int64_t *shape);
ct_tensor *ct_tensor_full(ct_dtype dtype, double value, int ndim,
                          const int64_t *shape);
// Copies numel elements of `dtype` from src.
ct_tensor *ct_tensor_from(ct_dtype dtype, const void *src, int ndim,
                          const int64_t *shape);
// 1-D: start, start+step, ... (n elements).
ct_tensor *ct_tensor_arange(ct_dtype dtype, double start, double step,
                            int64_t n);
// f32 filled from the generator (which advances): normal(mean, std) and
// uniform in [lo, hi).
ct_tensor *ct_tensor_randn(struct ct_rng *rng, float mean, float std, int ndim,
                           const int64_t *shape);
ct_tensor *ct_tensor_rand(struct ct_rng *rng, float lo, float hi, int ndim,
                          const int64_t *shape);

// Views: share data, no autograd (the tape's ct_reshape records one).
// A view with the same number of elements in another shape.
ct_tensor *ct_tensor_view(const ct_tensor *t, int ndim, const int64_t *shape);
// Rows [start, start+len) of the first dimension.
ct_tensor *ct_tensor_slice0(const ct_tensor *t, int64_t start, int64_t len);

// A new arena tensor holding a copy of t's data (not its grad).
ct_tensor *ct_tensor_copy(const ct_tensor *t);

// Size in bytes of one element / of the data.
size_t ct_dtype_size(ct_dtype dtype);
static inline size_t ct_tensor_bytes(const ct_tensor *t) {
  return (size_t)t->numel * ct_dtype_size(t->dtype);
}
bool ct_tensor_same_shape(const ct_tensor *a, const ct_tensor *b);
// Writes "[2, 3, 4]" into buf (for messages); returns buf.
char *ct_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);
// Prints shape, dtype and (up to `max_items`) values, for debugging.
void ct_tensor_print(const ct_tensor *t, const char *label, int max_items,
                     FILE *out);

// Validates a shape and returns its element count, or -1 with an error.
int64_t ct_shape_numel(int ndim, const int64_t *shape);

#endif
