// Naming, registration, the dropout context and activations shared by all
// nn modules (the convention is in module.h).
#include "nn/module.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/gemm.h"

ct_nn_ctx ct_nn_train_ctx(uint64_t seed, uint64_t step) {
  return (ct_nn_ctx){.training = true, .seed = seed, .step = step, .site = 0};
}

ct_nn_ctx ct_nn_eval_ctx(void) { return (ct_nn_ctx){.training = false}; }

uint64_t ct_nn_next_dropout_stream(ct_nn_ctx *ctx) {
  uint32_t site = ctx->site++ % CT_NN_DROPOUT_SITES;
  return ct_rng_stream(CT_NN_RNG_DROPOUT + site, ctx->step);
}

// Without dropping, x itself: a copy would cost a pass over x and, since
// the step arena keeps everything until the step ends, its memory (the ViT
// calls this three times per block with p = 0). The site is taken anyway,
// so the numbering of later sites does not depend on p.
ct_tensor *ct_nn_dropout(ct_nn_ctx *ctx, ct_tensor *x, float p) {
  uint64_t stream = ctx ? ct_nn_next_dropout_stream(ctx) : 0;
  if (!x) return NULL;
  if (!ct_nn_dropout_active(ctx, p))
    return ct_check_f32("dropout", x, "input") ? x : NULL;
  return ct_dropout(x, p, ctx->seed, stream);
}

ct_tensor *ct_nn_add_dropout(ct_nn_ctx *ctx, ct_tensor *x, ct_tensor *y,
                             float p) {
  if (!ct_nn_dropout_active(ctx, p)) return ct_add(x, ct_nn_dropout(ctx, y, p));
  uint64_t stream = ct_nn_next_dropout_stream(ctx);
  return ct_add_dropout(x, y, p, ctx->seed, stream);
}

bool ct_nn_dropout_active(const ct_nn_ctx *ctx, float p) {
  return ctx && ctx->training && p != 0.0f;
}

ct_status ct_nn_name(char buf[CT_NN_NAME_MAX], const char *prefix,
                     const char *leaf_fmt, ...) {
  int used = 0;
  if (prefix && *prefix) used = snprintf(buf, CT_NN_NAME_MAX, "%s.", prefix);
  if (used < 0 || used >= CT_NN_NAME_MAX)
    return ct_error(CT_ERR_ARG, "nn: parameter prefix '%s' is too long",
                    prefix);
  va_list ap;
  va_start(ap, leaf_fmt);
  int n = vsnprintf(buf + used, (size_t)(CT_NN_NAME_MAX - used), leaf_fmt, ap);
  va_end(ap);
  if (n < 0 || used + n >= CT_NN_NAME_MAX)
    return ct_error(CT_ERR_ARG, "nn: parameter name '%s...' is longer than %d",
                    buf, CT_NN_NAME_MAX - 1);
  return CT_OK;
}

ct_tensor *ct_nn_param(ct_params *p, const char *prefix, const char *leaf,
                       int ndim, const int64_t *shape, unsigned flags) {
  char name[CT_NN_NAME_MAX];
  if (ct_nn_name(name, prefix, "%s", leaf) != CT_OK) return NULL;
  return ct_params_add(p, name, ndim, shape, flags);
}

ct_tensor *ct_nn_activate(ct_tensor *x, ct_nn_activation act) {
  switch (act) {
  case CT_NN_RELU: return ct_relu(x);
  case CT_NN_GELU: return ct_gelu(x, CT_GELU_ERF);
  case CT_NN_GELU_TANH: return ct_gelu(x, CT_GELU_TANH);
  case CT_NN_QUICK_GELU: return ct_gelu(x, CT_GELU_QUICK);
  }
  ct_error(CT_ERR_ARG, "nn: unknown activation %d", (int)act);
  return NULL;
}

ct_dtype ct_nn_activation_dtype(void) {
  return ct_gemm_get_precision() == CT_GEMM_BF16 && ct_gemm_bf16_activations()
             ? CT_BF16
             : CT_F32;
}

ct_nn_attention_layer *ct_nn_attention_record(ct_nn_ctx *ctx,
                                              ct_tensor *weights,
                                              int64_t groups) {
  if (!ctx || !ctx->attention || !weights) return NULL;
  ct_nn_attention_log *log = ctx->attention;
  if (log->count >= CT_NN_ATTENTION_LOG_MAX) {
    ct_error(CT_ERR_ARG,
             "attention log: more than %d attention layers to record",
             (int)CT_NN_ATTENTION_LOG_MAX);
    return NULL;
  }
  ct_nn_attention_layer *l = &log->layers[log->count++];
  *l = (ct_nn_attention_layer){.weights = weights, .groups = groups};
  return l;
}

ct_tensor *ct_nn_attention_weights(const ct_nn_attention_scores *s) {
  const int64_t G = s->groups, NH = s->heads, Nq = s->Nq, Nk = s->Nk,
                Dh = s->Dh;
  const int64_t nW = s->mask ? s->mask->shape[0] : 1;
  ct_tensor *w = ct_tensor_empty(CT_F32, CT_SHAPE(G, NH, Nq, Nk));
  if (!w) return NULL;
  const float *b = s->bias ? ct_f32(s->bias) : NULL;
  const float *mk = s->mask ? ct_f32(s->mask) : NULL;
  double *row = malloc((size_t)Nk * sizeof *row);
  if (!row) {
    ct_error(CT_ERR_NOMEM, "attention log: out of memory");
    return NULL;
  }
  for (int64_t g = 0; g < G; g++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t i = 0; i < Nq; i++) {
        const float *qi = s->q + (g * Nq + i) * s->q_stride + h * Dh;
        double max = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < Nk; j++) {
          const float *kj = s->k + (g * Nk + j) * s->k_stride + h * Dh;
          double dot = 0.0;
          for (int64_t d = 0; d < Dh; d++) dot += (double)qi[d] * kj[d];
          row[j] = dot * s->scale;
          if (b) row[j] += b[(h * Nq + i) * Nk + j];
          if (mk) row[j] += mk[((g % nW) * Nq + i) * Nk + j];
          if (row[j] > max) max = row[j];
        }
        for (int64_t j = 0; j < Nk; j++) sum += row[j] = exp(row[j] - max);
        float *out = ct_f32(w) + ((g * NH + h) * Nq + i) * Nk;
        for (int64_t j = 0; j < Nk; j++) out[j] = (float)(row[j] / sum);
      }
  free(row);
  return w;
}

void ct_nn_rows_append(float *dst, int64_t stride, int64_t step,
                       const float *src, int64_t N, int64_t width) {
  for (int64_t n = 0; n < N; n++)
    memcpy(dst + n * stride + step * width, src + n * width,
           (size_t)width * sizeof(float));
}

void ct_nn_rows_reorder(float *buf, float *swap, int64_t N, int64_t stride,
                        int64_t used, const int64_t *parent) {
  for (int64_t n = 0; n < N; n++)
    memcpy(swap + n * stride, buf + parent[n] * stride,
           (size_t)used * sizeof(float));
  for (int64_t n = 0; n < N; n++)
    memcpy(buf + n * stride, swap + n * stride, (size_t)used * sizeof(float));
}

ct_tensor *ct_nn_repeat_rows(const ct_tensor *t, int64_t repeat) {
  if (!t) return NULL;
  int64_t shape[CT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[0] *= repeat;
  ct_tensor *out = ct_tensor_empty(t->dtype, t->ndim, shape);
  if (!out) return NULL;
  const size_t block = ct_tensor_bytes(t) / (size_t)t->shape[0];
  for (int64_t b = 0; b < t->shape[0]; b++)
    for (int64_t r = 0; r < repeat; r++)
      memcpy((char *)out->data + (size_t)(b * repeat + r) * block,
             (const char *)t->data + (size_t)b * block, block);
  return out;
}

void ct_nn_rollout_scale(const double *row, int64_t n, float *out) {
  double max = 0.0;
  for (int64_t t = 0; t < n; t++)
    if (row[t] > max) max = row[t];
  for (int64_t t = 0; t < n; t++)
    out[t] = max > 0.0 ? (float)(row[t] / max) : 0.0f;
}
