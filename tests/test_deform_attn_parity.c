// Multi-scale deformable attention against PyTorch (tests/ref/
// gen_deform_attn_fixtures.py, the twin of the reference's
// ms_deform_attn_core_pytorch and MSDeformAttn in float64): the op's output
// and its gradients w.r.t. value, locations and weights on the reference's
// gradient-check shapes and on realistic ones (with points outside the
// maps), the same bits at 1, 2 and 3 threads, and the module's output and
// gradients (query, input, reference points, every parameter by name) with
// 2-d points, 4-d boxes and a padding mask, and its initialization.
#include <math.h>
#include <string.h>

#include "autograd/ops_deform_attn.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/threads.h"
#include "nn/deform_attn.h"
#include "tests/harness.h"
#include "tests/parity_util.h"
#include "tests/ref/deform_attn_fixtures.h"

// ---- the fixture script's hash --------------------------------------------------

static uint32_t deform_hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

static uint32_t hash_at(int stream, int64_t i) {
  return deform_hash(deform_hash((uint32_t)stream) + (uint32_t)i);
}

// u in [0, 1) exactly as the script: (h >> 8) / 2^24.
static double hash_uniform(int stream, int64_t i) {
  return (double)(hash_at(stream, i) >> 8) / 16777216.0;
}

// float(u * scale + shift), computed in double as the script.
static ct_tensor *hashed(int stream, double scale, double shift, int ndim,
                         const int64_t *shape) {
  ct_tensor *t = ct_tensor_empty(CT_F32, ndim, shape);
  for (int64_t i = 0; t && i < t->numel; i++)
    ct_f32(t)[i] = (float)(hash_uniform(stream, i) * scale + shift);
  return t;
}

// ---- the op ---------------------------------------------------------------------

typedef struct op_run {
  ct_tensor *value, *loc, *wts, *out;
} op_run;

// The fixture's inputs, the op, and the backward of sum(out * r).
static op_run run_op(const deform_op_fixture *f) {
  const int64_t N = f->N, M = f->M, D = f->D, Lq = f->Lq, L = f->L, P = f->P;
  int64_t S = 0;
  for (int l = 0; l < f->L; l++) S += f->levels[2 * l] * f->levels[2 * l + 1];
  op_run r = {0};
  r.value =
      ct_requires_grad(hashed(f->stream, 2.0, -1.0, CT_SHAPE(N, S, M, D)));
  r.loc = ct_requires_grad(
      hashed(f->stream + 1, 1.25, -0.125, CT_SHAPE(N, Lq, M, L * P, 2)));
  r.wts = ct_requires_grad(hashed(f->stream + 2, 1.0 / (double)(L * P), 0.0,
                                  CT_SHAPE(N, Lq, M, L, P)));
  ct_tensor *rr = hashed(f->stream + 3, 2.0, -1.0, CT_SHAPE(N, Lq, M * D));
  r.out = ct_ms_deform_attn(r.value, f->levels, L, r.loc, r.wts);
  CHECK(r.out && rr, "%s: %s", f->name, ct_last_error());
  if (!r.out || !rr) return (op_run){0};
  CHECK(ct_backward_seeded(r.out, ct_f32(rr)) == CT_OK, "%s backward: %s",
        f->name, ct_last_error());
  return r;
}

static const char *const part[4] = {"out", "grad value", "grad locations",
                                    "grad weights"};

static void test_op_full(const deform_op_fixture *f) {
  op_run r = run_op(f);
  if (!r.out) return;
  const float *got[4] = {ct_f32(r.out), r.value->grad, r.loc->grad,
                         r.wts->grad};
  const int64_t n[4] = {r.out->numel, r.value->numel, r.loc->numel,
                        r.wts->numel};
  printf("  op %-10s", f->name);
  for (int k = 0; k < 4; k++) {
    const double e = got[k] ? parity_rel_err(got[k], f->full[k], n[k]) : 1.0;
    printf("  %s %.1e", part[k], e);
    CHECK(e <= 1e-5, "%s %s: rel err %.2e", f->name, part[k], e);
  }
  printf("\n");
  ct_arena_reset();
}

// The sampled positions and the whole-tensor projections.
static void test_op_sampled(const deform_op_fixture *f) {
  op_run r = run_op(f);
  if (!r.out) return;
  const float *got[4] = {ct_f32(r.out), r.value->grad, r.loc->grad,
                         r.wts->grad};
  const int64_t n[4] = {r.out->numel, r.value->numel, r.loc->numel,
                        r.wts->numel};
  printf("  op %-10s", f->name);
  for (int k = 0; k < 4; k++) {
    if (!got[k]) continue;
    double diff = 0.0, scale = 0.0;
    for (int i = 0; i < DEFORM_SAMPLES; i++) {
      diff = fmax(diff, fabs(got[k][f->idx[k][i]] - f->at[k][i]));
      scale = fmax(scale, fabs(f->at[k][i]));
    }
    double proj = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n[k]; i++) {
      const double s = hash_uniform(f->stream + 8 + k, i) * 2.0 - 1.0;
      proj += got[k][i] * s;
      mag += fabs(got[k][i] * s);
    }
    const double e_at = diff / fmax(scale, 1e-30);
    const double e_proj = fabs(proj - f->proj[k]) / fmax(mag, 1e-30);
    printf("  %s %.1e/%.1e", part[k], e_at, e_proj);
    CHECK(scale > 0.0, "%s %s: the samples are all zero", f->name, part[k]);
    CHECK(e_at <= 1e-5, "%s %s: rel err %.2e at the samples", f->name, part[k],
          e_at);
    CHECK(e_proj <= 1e-6, "%s %s: projection %.9g, torch %.9g", f->name,
          part[k], proj, f->proj[k]);
  }
  printf("\n");
  ct_arena_reset();
}

// out and the three gradients of the realistic case into buf.
static int64_t op_bits(const deform_op_fixture *f, float *buf) {
  op_run r = run_op(f);
  if (!r.out) return 0;
  int64_t k = 0;
  memcpy(buf + k, ct_f32(r.out), (size_t)r.out->numel * sizeof(float));
  k += r.out->numel;
  memcpy(buf + k, r.value->grad, (size_t)r.value->numel * sizeof(float));
  k += r.value->numel;
  memcpy(buf + k, r.loc->grad, (size_t)r.loc->numel * sizeof(float));
  k += r.loc->numel;
  memcpy(buf + k, r.wts->grad, (size_t)r.wts->numel * sizeof(float));
  k += r.wts->numel;
  ct_arena_reset();
  return k;
}

static void test_op_threads(const deform_op_fixture *f) {
  enum { MAX = 1 << 19 };
  static float a[MAX], b[MAX];
  const int keep = ct_get_threads();
  ct_set_threads(1);
  const int64_t n = op_bits(f, a);
  CHECK(n > 0 && n <= MAX, "%s: %lld values", f->name, (long long)n);
  for (int t = 2; t <= 3; t++) {
    ct_set_threads(t);
    const int64_t m = op_bits(f, b);
    CHECK(m == n && memcmp(a, b, (size_t)n * sizeof(float)) == 0,
          "%s: output and gradients differ between 1 and %d threads", f->name,
          t);
  }
  printf("  op %-10s same bits at 1, 2, 3 threads (%lld values)\n", f->name,
         (long long)n);
  ct_set_threads(keep);
}

// ---- the module --------------------------------------------------------------------

static void test_module(const deform_module_fixture *f) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(5, 0);
  ct_nn_ms_deform_attn m;
  ct_status st =
      ct_nn_ms_deform_attn_init(&m, &p, "", f->C, f->L, f->M, f->P, &rng);
  CHECK(st == CT_OK, "%s init: %s", f->name, ct_last_error());
  if (st != CT_OK || !parity_count(&p, f->name, f->n_params)) {
    ct_params_free(&p);
    return;
  }
  bool loaded = true;
  for (int i = 0; i < f->n_params; i++)
    loaded &= parity_load(&p, f->name, f->params[i].name, f->params[i].numel,
                          f->params[i].value);
  int64_t S = 0;
  for (int l = 0; l < f->L; l++) S += f->levels[2 * l] * f->levels[2 * l + 1];
  const int64_t N = f->N, Lq = f->Lq, C = f->C;
  ct_tensor *q =
      ct_requires_grad(ct_tensor_from(CT_F32, f->query, CT_SHAPE(N, Lq, C)));
  ct_tensor *x =
      ct_requires_grad(ct_tensor_from(CT_F32, f->input, CT_SHAPE(N, S, C)));
  ct_tensor *ref = ct_requires_grad(
      ct_tensor_from(CT_F32, f->ref, CT_SHAPE(N, Lq, f->L, f->ref_dim)));
  ct_tensor *mask =
      f->mask ? ct_tensor_from(CT_I32, f->mask, CT_SHAPE(N, S)) : NULL;
  ct_tensor *out =
      loaded ? ct_nn_ms_deform_attn_forward(&m, q, ref, x, f->levels, mask)
             : NULL;
  ct_tensor *loss = parity_contract(out, f->r);
  ct_params_zero_grad(&p);
  CHECK(loss && ct_backward(loss) == CT_OK, "%s: %s", f->name, ct_last_error());
  if (loss && q->grad && x->grad && ref->grad) {
    const double e_out = parity_rel_err(ct_f32(out), f->out, out->numel);
    const double e_q = parity_rel_err(q->grad, f->grad_query, q->numel);
    const double e_x = parity_rel_err(x->grad, f->grad_input, x->numel);
    const double e_r = parity_rel_err(ref->grad, f->grad_ref, ref->numel);
    double e_p = 0.0;
    const char *worst = "";
    for (int i = 0; i < f->n_params; i++) {
      const ct_tensor *t = ct_params_find(&p, f->params[i].name)->tensor;
      const double e = parity_rel_err(t->grad, f->params[i].grad, t->numel);
      CHECK(e <= 1e-5, "%s %s grad: rel err %.2e", f->name, f->params[i].name,
            e);
      if (e >= e_p) {
        e_p = e;
        worst = f->params[i].name;
      }
    }
    printf(
        "  module %-13s out %.1e  grad query %.1e  input %.1e  ref %.1e  "
        "param %.1e (%s)\n",
        f->name, e_out, e_q, e_x, e_r, e_p, worst);
    CHECK(e_out <= 1e-5, "%s out: rel err %.2e", f->name, e_out);
    CHECK(e_q <= 1e-5, "%s grad query: rel err %.2e", f->name, e_q);
    CHECK(e_x <= 1e-5, "%s grad input: rel err %.2e", f->name, e_x);
    CHECK(e_r <= 1e-5, "%s grad reference points: rel err %.2e", f->name, e_r);
  }
  ct_arena_reset();
  ct_params_free(&p);
}

// The reference's _reset_parameters: directional offsets, uniform weights,
// Xavier projections with zero biases.
static void test_module_init(const deform_module_fixture *f) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(9, 0);
  ct_nn_ms_deform_attn m;
  CHECK(ct_nn_ms_deform_attn_init(&m, &p, "enc.attn", f->C, f->L, f->M, f->P,
                                  &rng) == CT_OK,
        "init: %s", ct_last_error());
  const char *names[8] = {
      "enc.attn.sampling_offsets.weight",  "enc.attn.sampling_offsets.bias",
      "enc.attn.attention_weights.weight", "enc.attn.attention_weights.bias",
      "enc.attn.value_proj.weight",        "enc.attn.value_proj.bias",
      "enc.attn.output_proj.weight",       "enc.attn.output_proj.bias"};
  CHECK(p.n == 8, "MSDeformAttn registers %d parameters, want 8", p.n);
  for (int i = 0; i < p.n && i < 8; i++)
    CHECK(strcmp(p.items[i].name, names[i]) == 0, "parameter %d is %s, want %s",
          i, p.items[i].name, names[i]);
  const ct_tensor *bias = m.sampling_offsets.bias;
  double worst = 0.0;
  for (int64_t i = 0; i < bias->numel; i++)
    worst = fmax(worst, fabs(ct_f32(bias)[i] - f->init_bias[i]));
  printf("  init: sampling_offsets.bias max |ctrain - torch| %.1e\n", worst);
  CHECK(worst <= 1e-6, "sampling_offsets.bias differs from torch's by %.2e",
        worst);
  const ct_tensor *zeros[] = {
      m.sampling_offsets.weight, m.attention_weights.weight,
      m.attention_weights.bias, m.value_proj.bias, m.output_proj.bias};
  for (size_t k = 0; k < sizeof zeros / sizeof zeros[0]; k++) {
    bool all = true;
    for (int64_t i = 0; i < zeros[k]->numel; i++)
      all &= ct_f32(zeros[k])[i] == 0.0f;
    CHECK(all, "%s must start at 0", zeros[k]->name);
  }
  const double bound = sqrt(6.0 / (double)(2 * f->C));
  parity_check_range(m.value_proj.weight, -bound, bound);
  parity_check_range(m.output_proj.weight, -bound, bound);
  ct_params_free(&p);
}

int main(void) {
  ct_threads_from_env();
  for (int i = 0; i < n_deform_op_fixtures; i++) {
    const deform_op_fixture *f = &deform_op_fixtures[i];
    if (f->sampled) {
      test_op_sampled(f);
      test_op_threads(f);
    } else {
      test_op_full(f);
    }
  }
  for (int i = 0; i < n_deform_module_fixtures; i++)
    test_module(&deform_module_fixtures[i]);
  test_module_init(&deform_module_fixtures[0]);
  return test_summary("deform_attn_parity");
}
