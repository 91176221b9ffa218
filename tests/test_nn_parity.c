// nn modules against PyTorch 1.13: nn.MultiheadAttention (each mask kind,
// cross-attention, need_weights), nn.TransformerEncoderLayer and
// nn.TransformerDecoderLayer (post- and pre-norm) and a 3+3-layer
// nn.Transformer, from tests/ref/nn_fixtures.h (tests/ref/gen_nn_fixtures.py,
// torch in float64 on the same float32 values).
//
// PyTorch's parameters are copied into the ct_params store by state_dict
// name, which also checks that the modules register exactly PyTorch's names.
// The metric, per tensor (output, weights, each input and parameter
// gradient): max |ctrain - torch| / max |torch|, tolerance 1e-5.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/params.h"
#include "harness.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "ref/nn_fixtures.h"

#include <math.h>
#include <string.h>

static const double TOL = 1e-5;

// Copies each named array of the fixture into the store; every store entry
// must be named by the fixture and vice versa.
static bool load_params(ct_params *p, const nn_fixture *f) {
  bool ok = p->n == f->n_params;
  CHECK(ok, "%s: ctrain registers %d parameters, torch has %d", f->name, p->n,
        f->n_params);
  for (int i = 0; i < f->n_params; i++) {
    const nn_fixture_param *fp = &f->params[i];
    ct_param *cp = ct_params_find(p, fp->name);
    CHECK(cp != NULL, "%s: no parameter named '%s'", f->name, fp->name);
    if (!cp) {
      ok = false;
      continue;
    }
    CHECK(cp->tensor->numel == fp->numel, "%s: '%s' has %lld values, torch %lld",
          f->name, fp->name, (long long)cp->tensor->numel,
          (long long)fp->numel);
    if (cp->tensor->numel != fp->numel) {
      ok = false;
      continue;
    }
    memcpy(ct_f32(cp->tensor), fp->value, (size_t)fp->numel * sizeof(float));
  }
  return ok;
}

// max |got - want| / max |want|
static double rel_err(const float *got, const double *want, int64_t n) {
  double diff = 0.0, scale = 0.0;
  for (int64_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)got[i] - want[i]));
    scale = fmax(scale, fabs(want[i]));
  }
  return diff / fmax(scale, 1e-30);
}

typedef struct errors {
  double out, weights, grad_in, grad_param;
  const char *worst_param;
} errors;

static void check_err(const nn_fixture *f, const char *what, double err) {
  CHECK(err <= TOL, "%s: %s rel err %.2e > %.0e", f->name, what, err, TOL);
}

// Builds the case's module under prefix "" (PyTorch's bare names) and runs
// it; *weights is set for need_weights cases.
typedef struct model {
  ct_nn_mha mha;
  ct_nn_encoder_layer enc;
  ct_nn_decoder_layer dec;
  ct_nn_transformer tr;
} model;

static ct_status build(model *m, ct_params *p, const nn_fixture *f) {
  ct_rng rng = ct_rng_make(1, 0);
  ct_nn_transformer_config cfg = ct_nn_transformer_defaults(f->E, f->H);
  cfg.dim_feedforward = f->ff;
  cfg.dropout = 0.0f;
  cfg.activation = f->gelu ? CT_NN_GELU : CT_NN_RELU;
  cfg.norm_first = f->norm_first;
  if (!strcmp(f->kind, "mha"))
    return ct_nn_mha_init(&m->mha, p, "", f->E, f->H, 0.0f, true, &rng);
  if (!strcmp(f->kind, "encoder_layer"))
    return ct_nn_encoder_layer_init(&m->enc, p, "", &cfg, &rng);
  if (!strcmp(f->kind, "decoder_layer"))
    return ct_nn_decoder_layer_init(&m->dec, p, "", &cfg, &rng);
  return ct_nn_transformer_init(&m->tr, p, "", &cfg, f->layers, f->layers,
                                &rng);
}

static ct_tensor *forward(const model *m, const nn_fixture *f, ct_tensor *x,
                          ct_tensor *mem, ct_tensor **weights) {
  const int64_t B = f->B, T = f->Tq, Tk = f->Tk, H = f->H;
  const int64_t keys = strcmp(f->kind, "mha") ? T : Tk;  // self-attn keys
  ct_nn_attn_masks self = {.causal = f->causal}, memory = {0};
  if (f->attn_mask_ndim == 3) {
    self.attn_mask = f->attn_mask_bool
        ? ct_tensor_from(CT_I32, f->attn_mask_bool, CT_SHAPE(B * H, T, keys))
        : ct_tensor_from(CT_F32, f->attn_mask_float, CT_SHAPE(B * H, T, keys));
  } else if (f->attn_mask_ndim == 2) {
    self.attn_mask = f->attn_mask_bool
        ? ct_tensor_from(CT_I32, f->attn_mask_bool, CT_SHAPE(T, keys))
        : ct_tensor_from(CT_F32, f->attn_mask_float, CT_SHAPE(T, keys));
  }
  if (f->key_padding)
    self.key_padding_mask =
        ct_tensor_from(CT_I32, f->key_padding, CT_SHAPE(B, keys));
  if (f->memory_padding)
    memory.key_padding_mask =
        ct_tensor_from(CT_I32, f->memory_padding, CT_SHAPE(B, Tk));
  ct_nn_ctx ctx = ct_nn_train_ctx(5, 0);  // dropout 0: same as eval
  if (!strcmp(f->kind, "mha")) {
    ct_tensor *kv = mem ? mem : x;
    return ct_nn_mha_forward(&m->mha, &ctx, x, kv, kv, &self,
                             f->need_weights ? weights : NULL);
  }
  if (!strcmp(f->kind, "encoder_layer"))
    return ct_nn_encoder_layer_forward(&m->enc, &ctx, x, &self);
  if (!strcmp(f->kind, "decoder_layer"))
    return ct_nn_decoder_layer_forward(&m->dec, &ctx, x, mem, &self, &memory);
  return ct_nn_transformer_forward(&m->tr, &ctx, mem, x, &memory, &self,
                                   &memory);
}

// sum(y * r)
static ct_tensor *contract(ct_tensor *y, const float *r) {
  if (!y) return NULL;
  return ct_sum(ct_mul(y, ct_tensor_from(CT_F32, r, y->ndim, y->shape)));
}

static void check_case(const nn_fixture *f, errors *worst) {
  ct_params p;
  ct_params_init(&p);
  model m = {0};
  ct_status st = build(&m, &p, f);
  CHECK(st == CT_OK, "%s: init: %s", f->name, ct_last_error());
  if (st != CT_OK || !load_params(&p, f)) goto done;

  const int64_t B = f->B, Tq = f->Tq, Tk = f->Tk, E = f->E;
  ct_tensor *x = ct_requires_grad(
      ct_tensor_from(CT_F32, f->x, CT_SHAPE(B, Tq, E)));
  ct_tensor *mem = f->mem ? ct_requires_grad(ct_tensor_from(
                                CT_F32, f->mem, CT_SHAPE(B, Tk, E)))
                          : NULL;
  ct_tensor *weights = NULL;
  ct_tensor *out = forward(&m, f, x, mem, &weights);
  ct_tensor *loss = contract(out, f->r_out);
  if (f->need_weights) loss = ct_add(loss, contract(weights, f->r_weights));
  CHECK(loss != NULL, "%s: forward: %s", f->name, ct_last_error());
  if (!loss) goto done;
  ct_params_zero_grad(&p);
  st = ct_backward(loss);
  CHECK(st == CT_OK, "%s: backward: %s", f->name, ct_last_error());
  if (st != CT_OK) goto done;

  errors e = {.out = rel_err(ct_f32(out), f->out, out->numel)};
  check_err(f, "output", e.out);
  if (f->need_weights) {
    e.weights = rel_err(ct_f32(weights), f->weights, weights->numel);
    check_err(f, "weights", e.weights);
  }
  e.grad_in = rel_err(x->grad, f->grad_x, x->numel);
  if (mem) e.grad_in = fmax(e.grad_in, rel_err(mem->grad, f->grad_mem,
                                               mem->numel));
  check_err(f, "input grad", e.grad_in);
  e.worst_param = "";
  for (int i = 0; i < f->n_params; i++) {
    const ct_tensor *t = ct_params_find(&p, f->params[i].name)->tensor;
    double err = rel_err(t->grad, f->params[i].grad, t->numel);
    check_err(f, f->params[i].name, err);
    if (err >= e.grad_param) {
      e.grad_param = err;
      e.worst_param = f->params[i].name;
    }
  }
  printf("  %-30s out %.1e  weights %.1e  grad in %.1e  param %.1e (%s)\n",
         f->name, e.out, e.weights, e.grad_in, e.grad_param, e.worst_param);
  worst->out = fmax(worst->out, e.out);
  worst->weights = fmax(worst->weights, e.weights);
  worst->grad_in = fmax(worst->grad_in, e.grad_in);
  worst->grad_param = fmax(worst->grad_param, e.grad_param);
done:
  ct_nn_transformer_free(&m.tr);
  ct_params_free(&p);
  ct_arena_reset();
}

int main(void) {
  printf("max |ctrain - torch| / max |torch| per tensor (tol %.0e):\n", TOL);
  errors worst = {0};
  for (int i = 0; i < nn_fixture_count; i++) check_case(&nn_fixtures[i], &worst);
  printf("nn parity: %d cases, worst: out %.2e, weights %.2e, input grads "
         "%.2e, param grads %.2e\n",
         nn_fixture_count, worst.out, worst.weights, worst.grad_in,
         worst.grad_param);
  ct_arena_release();
  return test_summary("nn_parity");
}
