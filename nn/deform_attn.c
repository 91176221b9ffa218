// MSDeformAttn (see deform_attn.h): the projections, the softmax and the
// sampling locations around the op of autograd/ops_deform_attn.h.
#include "nn/deform_attn.h"

#include <math.h>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "autograd/ops_deform_attn.h"
#include "core/arena.h"
#include "nn/init.h"

// The reference's grid_init as sampling_offsets.bias, laid out (M, L, P, 2):
// head m's direction at angle 2 pi m / M, scaled so that its largest
// coordinate is +-1, times (p + 1). In float, as the reference computes it.
static void direction_bias(float *bias, int64_t M, int64_t L, int64_t P) {
  const double pi = 3.14159265358979323846;
  const float step = (float)(2.0 * pi / (double)M);
  for (int64_t m = 0; m < M; m++) {
    const float theta = (float)m * step;
    const float c = cosf(theta), s = sinf(theta);
    const float mx = fmaxf(fabsf(c), fabsf(s));
    for (int64_t l = 0; l < L; l++)
      for (int64_t p = 0; p < P; p++) {
        float *b = bias + ((m * L + l) * P + p) * 2;
        b[0] = c / mx * (float)(p + 1);
        b[1] = s / mx * (float)(p + 1);
      }
  }
}

ct_status ct_nn_ms_deform_attn_init(ct_nn_ms_deform_attn *m, ct_params *p,
                                    const char *prefix, int64_t d_model,
                                    int64_t n_levels, int64_t n_heads,
                                    int64_t n_points, ct_rng *init_rng) {
  *m = (ct_nn_ms_deform_attn){.d_model = d_model,
                              .n_levels = n_levels,
                              .n_heads = n_heads,
                              .n_points = n_points};
  if (d_model < 1 || n_levels < 1 || n_heads < 1 || n_points < 1 ||
      d_model % n_heads)
    return ct_error(CT_ERR_ARG,
                    "MSDeformAttn '%s': d_model %lld, %lld levels, %lld heads, "
                    "%lld points: need sizes >= 1 and d_model divisible by "
                    "the heads",
                    prefix ? prefix : "", (long long)d_model,
                    (long long)n_levels, (long long)n_heads,
                    (long long)n_points);
  const int64_t MLP = n_heads * n_levels * n_points;
  struct {
    ct_nn_linear *lin;
    const char *name;
    int64_t out;
  } parts[] = {{&m->sampling_offsets, "sampling_offsets", 2 * MLP},
               {&m->attention_weights, "attention_weights", MLP},
               {&m->value_proj, "value_proj", d_model},
               {&m->output_proj, "output_proj", d_model}};
  char name[CT_NN_NAME_MAX];
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    ct_status st = ct_nn_name(name, prefix, "%s", parts[i].name);
    if (st == CT_OK)
      st = ct_nn_linear_init(parts[i].lin, p, name, d_model, parts[i].out, true,
                             init_rng);
    if (st != CT_OK) return st;
  }
  // _reset_parameters, over the nn.Linear defaults drawn above.
  direction_bias(ct_f32(m->sampling_offsets.bias), n_heads, n_levels, n_points);
  ct_status st = ct_nn_init_zeros(m->sampling_offsets.weight);
  if (st == CT_OK) st = ct_nn_init_zeros(m->attention_weights.weight);
  if (st == CT_OK) st = ct_nn_init_zeros(m->attention_weights.bias);
  if (st == CT_OK)
    st = ct_nn_init_xavier_uniform(m->value_proj.weight, init_rng, 1.0f);
  if (st == CT_OK) st = ct_nn_init_zeros(m->value_proj.bias);
  if (st == CT_OK)
    st = ct_nn_init_xavier_uniform(m->output_proj.weight, init_rng, 1.0f);
  if (st == CT_OK) st = ct_nn_init_zeros(m->output_proj.bias);
  return st;
}

// value (N, S, C) with padded rows zeroed: mask (N, S), nonzero = padding.
static ct_tensor *zero_padded(ct_tensor *value, const ct_tensor *mask) {
  const int64_t N = value->shape[0], S = value->shape[1];
  ct_tensor *keep = ct_tensor_empty(CT_F32, CT_SHAPE(N, S, 1));
  if (!keep) return NULL;
  for (int64_t i = 0; i < N * S; i++) {
    const bool pad =
        mask->dtype == CT_I32 ? ct_i32(mask)[i] != 0 : ct_f32(mask)[i] != 0.0f;
    ct_f32(keep)[i] = pad ? 0.0f : 1.0f;
  }
  return ct_mul(value, keep);
}

// The sampling locations (N, Lq, M, L*P, 2) from the offsets (N, Lq,
// M*L*P*2) and the reference points (N, Lq, L, 2 or 4).
static ct_tensor *sampling_locations(const ct_nn_ms_deform_attn *m,
                                     ct_tensor *offsets, ct_tensor *ref,
                                     const int64_t *shapes) {
  const int64_t N = ref->shape[0], Lq = ref->shape[1], M = m->n_heads,
                L = m->n_levels, P = m->n_points;
  ct_tensor *off = ct_reshape(offsets, CT_SHAPE(N * Lq, M, L, P, 2));
  ct_tensor *loc;
  if (ref->shape[3] == 2) {
    // offset / (W_l, H_l), x first
    ct_tensor *inv = ct_tensor_empty(CT_F32, CT_SHAPE(1, 1, L, 1, 2));
    if (!inv) return NULL;
    for (int64_t l = 0; l < L; l++) {
      ct_f32(inv)[2 * l] = 1.0f / (float)shapes[2 * l + 1];
      ct_f32(inv)[2 * l + 1] = 1.0f / (float)shapes[2 * l];
    }
    ct_tensor *xy = ct_reshape(ref, CT_SHAPE(N * Lq, 1, L, 1, 2));
    loc = ct_add(xy, ct_mul(off, inv));
  } else {
    // ref_xy + offset / P * ref_wh * 0.5
    ct_tensor *xy =
        ct_reshape(ct_slice(ref, 3, 0, 2), CT_SHAPE(N * Lq, 1, L, 1, 2));
    ct_tensor *wh =
        ct_reshape(ct_slice(ref, 3, 2, 2), CT_SHAPE(N * Lq, 1, L, 1, 2));
    loc =
        ct_add(xy, ct_scale(ct_mul(ct_scale(off, 1.0f / (float)P), wh), 0.5f));
  }
  return ct_reshape(loc, CT_SHAPE(N, Lq, M, L * P, 2));
}

// The inputs against the module: false with an error.
static bool check_inputs(const ct_nn_ms_deform_attn *m, const ct_tensor *query,
                         const ct_tensor *ref, const ct_tensor *input,
                         const int64_t *shapes, const ct_tensor *mask) {
  static const char *op = "MSDeformAttn";
  if (!ct_check_f32(op, query, "query") ||
      !ct_check_f32(op, ref, "reference_points") ||
      !ct_check_f32(op, input, "input_flatten"))
    return false;
  const int64_t C = m->d_model, L = m->n_levels;
  if (query->ndim != 3 || query->shape[2] != C || input->ndim != 3 ||
      input->shape[0] != query->shape[0] || input->shape[2] != C ||
      ref->ndim != 4 || ref->shape[0] != query->shape[0] ||
      ref->shape[1] != query->shape[1] || ref->shape[2] != L ||
      (ref->shape[3] != 2 && ref->shape[3] != 4)) {
    char si[96];  // ct_shape_of keeps two shapes at a time
    ct_error(CT_ERR_SHAPE,
             "%s: need query (N, Lq, %lld), reference_points (N, Lq, %lld, 2 "
             "or 4) and input_flatten (N, S, %lld); got query %s, "
             "reference_points %s, input_flatten %s",
             op, (long long)C, (long long)L, (long long)C, ct_shape_of(query),
             ct_shape_of(ref),
             ct_shape_str(input->ndim, input->shape, si, sizeof si));
    return false;
  }
  if (!shapes) {
    ct_error(CT_ERR_ARG, "%s: no level shapes", op);
    return false;
  }
  if (mask && !ct_check_mask_dtype(op, mask, "padding_mask")) return false;
  if (mask && (mask->ndim != 2 || mask->shape[0] != input->shape[0] ||
               mask->shape[1] != input->shape[1])) {
    ct_error(CT_ERR_SHAPE, "%s: padding_mask %s must be (N, S) as %s", op,
             ct_shape_of(mask), ct_shape_of(input));
    return false;
  }
  return true;
}

ct_tensor *ct_nn_ms_deform_attn_forward(const ct_nn_ms_deform_attn *m,
                                        ct_tensor *query,
                                        ct_tensor *reference_points,
                                        ct_tensor *input_flatten,
                                        const int64_t *shapes,
                                        const ct_tensor *padding_mask) {
  if (!query || !reference_points || !input_flatten) return NULL;
  if (!check_inputs(m, query, reference_points, input_flatten, shapes,
                    padding_mask))
    return NULL;
  const int64_t N = query->shape[0], Lq = query->shape[1],
                S = input_flatten->shape[1], C = m->d_model, M = m->n_heads,
                L = m->n_levels, P = m->n_points;
  ct_tensor *value = ct_nn_linear_forward(&m->value_proj, input_flatten);
  if (value && padding_mask) value = zero_padded(value, padding_mask);
  value = ct_reshape(value, CT_SHAPE(N, S, M, C / M));
  ct_tensor *offsets = ct_nn_linear_forward(&m->sampling_offsets, query);
  ct_tensor *logits = ct_nn_linear_forward(&m->attention_weights, query);
  ct_tensor *weights =
      ct_softmax(ct_reshape(logits, CT_SHAPE(N, Lq, M, L * P)));
  if (!offsets || !weights) return NULL;
  ct_tensor *loc = sampling_locations(m, offsets, reference_points, shapes);
  ct_tensor *out = ct_ms_deform_attn(value, shapes, L, loc, weights);
  return ct_nn_linear_forward(&m->output_proj, out);
}
