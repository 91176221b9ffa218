// The nn module convention, the forward context that drives dropout, and the
// helpers every module uses to name and register its parameters.
//
// A module is a plain struct holding ct_tensor* parameters that live in a
// ct_params store (core/params.h), plus its sizes. Each module has
//
//   ct_status  ct_nn_<module>_init(ct_nn_<module> *m, ct_params *p,
//                                  const char *prefix, <config>,
//                                  ct_rng *init_rng);
//   ct_tensor *ct_nn_<module>_forward(<const> ct_nn_<module> *m,
//                                     [ct_nn_ctx *ctx,] inputs...);
//
// init registers the parameters under dotted PyTorch/timm state_dict names
// built from `prefix` ("encoder.layers.0.self_attn" + ".in_proj_weight";
// an empty prefix gives bare names) and fills them by drawing from init_rng
// in registration order, as the PyTorch module's constructor does (the
// values differ from PyTorch's: the generators differ). A module made of
// modules passes "prefix.child" down. Walking a model's parameters by name
// (export, loading PyTorch weights, re-initialising) goes through the store's
// registry: p->items[i].name. Modules that own arrays (the stacks) have a
// _free; the others own nothing but registry entries.
//
// Weight decay flags (CT_PARAM_NO_DECAY), the rule of the PyTorch recipes
// (timm's param_groups_weight_decay: ndim <= 1 or in no_weight_decay();
// minGPT: biases, norm weights and embeddings): every 1-D parameter (biases,
// LayerNorm weight and bias), token embedding tables, position embeddings and
// learned tokens (cls/dist) are NO_DECAY. Matrices of Linear and attention
// projections decay.
//
// Dropout: a forward pass carries a ct_nn_ctx. Each dropout in the pass (a
// ct_nn_dropout call, or the attention-weight dropout inside attention)
// takes the next `site` number, whether or not it drops anything, and draws
// its mask from Philox at (seed, stream(site, step), element index). So the
// masks of step s are a pure function of (seed, s): reproducible, the same at
// any thread count, and a resumed run needs only the step. With
// training = false (or a NULL ctx) dropout is the identity.
#ifndef CT_NN_MODULE_H
#define CT_NN_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/tensor.h"

// Longest parameter name, terminator included.
enum { CT_NN_NAME_MAX = 256 };

// Attention weights recorded by a forward pass for analysis (`ctrain
// analyze`, attention rollout): when ctx->attention is set, every attention
// layer of a ViT, DeiT, Swin or CvT appends its per-head weights, in forward
// order, with where its tokens lie in the input image. Recording computes
// the weights beside the layer's own attention (composed or recomputed): it
// is for evaluation passes, not for training.
enum { CT_NN_ATTENTION_LOG_MAX = 128 };

typedef struct ct_nn_attention_layer {
  ct_tensor *weights;  // (B * groups, NH, Nq, Nk) after softmax, arena
  int64_t groups;      // groups per image: Swin's windows, 1 for ViT
  // The centres of the query and key tokens in input pixels, (y, x) pairs
  // per group: (groups, Nq, 2) and (groups, Nk, 2) f32, arena; NAN for a
  // token without a place (a class token). NULL until the model sets them.
  ct_tensor *query_yx, *key_yx;
} ct_nn_attention_layer;

typedef struct ct_nn_attention_log {
  ct_nn_attention_layer layers[CT_NN_ATTENTION_LOG_MAX];
  int count;
} ct_nn_attention_log;

typedef struct ct_nn_ctx {
  bool training;  // false: dropout is the identity
  uint64_t seed;  // the run's dropout key
  uint64_t step;  // the optimizer step the pass belongs to (the trainer
                  // gives each micro-batch of a step its own number)
  uint32_t site;  // the next dropout site; a pass starts at 0
  // Training BatchNorm: NULL updates the running statistics in place; a log
  // records the updates instead (autograd/ops_conv.h), for a data-parallel
  // step to apply in micro-batch order.
  struct ct_bn_update_log *bn_updates;
  // NULL, or where attention layers record their weights (see above).
  ct_nn_attention_log *attention;
} ct_nn_ctx;

// Appends a layer's weights to ctx's log (when ctx and its log are set):
// the new entry, or NULL (nothing to record, or CT_ERR_ARG past
// CT_NN_ATTENTION_LOG_MAX layers).
ct_nn_attention_layer *ct_nn_attention_record(ct_nn_ctx *ctx,
                                              ct_tensor *weights,
                                              int64_t groups);

// Where a layer's queries and keys lie, for ct_nn_attention_weights: token
// i of group g has head h's query at q + (g * Nq + i) * q_stride + h * Dh
// and head h's key at k + (g * Nk + j) * k_stride + h * Dh (fused qkv
// layouts and separate q, k tensors alike).
typedef struct ct_nn_attention_scores {
  const float *q, *k;
  int64_t q_stride, k_stride;  // floats from one token to the next
  int64_t groups, heads, Nq, Nk, Dh;
  double scale;
  const ct_tensor *bias;  // (heads, Nq, Nk) added to every group, or NULL
  const ct_tensor *mask;  // (nW, Nq, Nk), group g adding mask g % nW, or NULL
} ct_nn_attention_scores;

// The per-head weights softmax(scale q k^T + bias + mask) of s's groups,
// (groups, heads, Nq, Nk) in the arena, computed in double without dropout
// beside a layer's fused attention, for an attention log (evaluation
// only). NULL with an error.
ct_tensor *ct_nn_attention_weights(const ct_nn_attention_scores *s);

// A rollout row's n values into out, scaled so the largest is 1 (all 0
// when none is positive): the maps the attention rollouts draw.
void ct_nn_rollout_scale(const double *row, int64_t n, float *out);

// Contexts for a training pass at `step` and for evaluation.
ct_nn_ctx ct_nn_train_ctx(uint64_t seed, uint64_t step);
ct_nn_ctx ct_nn_eval_ctx(void);

// The rng purposes (core/rng.h) used by nn: dropout site s uses purpose
// CT_NN_RNG_DROPOUT + s (up to 2^20 sites per pass).
enum { CT_NN_RNG_DROPOUT = 0xD00000u, CT_NN_DROPOUT_SITES = 1u << 20 };

// Takes the next dropout site of ctx and returns its Philox stream.
uint64_t ct_nn_next_dropout_stream(ct_nn_ctx *ctx);

// The Dropout module (it has no parameters): x (any shape) -> same shape.
// Inverted dropout with probability p when ctx is training and p > 0;
// else x itself (no copy, nothing recorded). Takes a dropout site either way.
ct_tensor *ct_nn_dropout(ct_nn_ctx *ctx, ct_tensor *x, float p);
// True when ct_nn_dropout(ctx, x, p) drops anything (training, p != 0).
bool ct_nn_dropout_active(const ct_nn_ctx *ctx, float p);
// x + ct_nn_dropout(ctx, y, p) (a residual connection), the same bits and
// the same dropout site, as one op when dropping (ct_add_dropout: the
// dropped y is never stored).
ct_tensor *ct_nn_add_dropout(ct_nn_ctx *ctx, ct_tensor *x, ct_tensor *y,
                             float p);

// "prefix.leaf" into buf (or "leaf" when prefix is empty or NULL); `leaf` is
// a printf format. CT_ERR_ARG when the name does not fit CT_NN_NAME_MAX.
ct_status ct_nn_name(char buf[CT_NN_NAME_MAX], const char *prefix,
                     const char *leaf_fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Registers the zero-filled parameter "prefix.leaf". NULL with an error.
ct_tensor *ct_nn_param(ct_params *p, const char *prefix, const char *leaf,
                       int ndim, const int64_t *shape, unsigned flags);

// Activations used between linear layers.
typedef enum ct_nn_activation {
  CT_NN_RELU,
  CT_NN_GELU,        // exact (erf) GELU, PyTorch's F.gelu default
  CT_NN_GELU_TANH,   // the tanh approximation
  CT_NN_QUICK_GELU,  // x * sigmoid(1.702 x) (CLIP's and CvT's QuickGELU)
} ct_nn_activation;

ct_tensor *ct_nn_activate(ct_tensor *x, ct_nn_activation act);

// The storage of activations whose only readers are matrix products (a
// layer norm's output before a linear, the attention's qkv, the input of
// a GELU folded into the next linear): CT_BF16 when the session multiplies
// in bf16 and keeps bf16 activations (core/gemm.h), else CT_F32. Products
// round those inputs to bf16 anyway, so storing them rounded changes no
// product; the folded GELU then reads its rounded input (as PyTorch's
// autocast, whose linear outputs are bf16).
ct_dtype ct_nn_activation_dtype(void);

// Beam-search caches (nn/rnn_seq2seq, nn/captioner) start from t with each
// of its first dim's B row blocks `repeat` times in a row (a new tensor in
// the arena; NULL when t is NULL or out of memory).
ct_tensor *ct_nn_repeat_rows(const ct_tensor *t, int64_t repeat);
// The caches keep per-row attention weights of every step, rows of
// `stride` floats: ct_nn_rows_append copies row n of src (N rows of
// `width`) to row n of dst at offset step * width; ct_nn_rows_reorder makes
// row i the first `used` floats of old row parent[i] (swap: room for N rows
// of `stride`).
void ct_nn_rows_append(float *dst, int64_t stride, int64_t step,
                       const float *src, int64_t N, int64_t width);
void ct_nn_rows_reorder(float *buf, float *swap, int64_t N, int64_t stride,
                        int64_t used, const int64_t *parent);

#endif
