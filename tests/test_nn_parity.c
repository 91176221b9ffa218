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
//
// Also PyTorch semantics that need no fixture: parameter names and
// weight-decay flags, init distributions and bounds, the sinusoidal table,
// the causal mask, and the dropout context (keyed, eval = identity, the
// fused and composed attention paths drawing the same mask).
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/params.h"
#include "harness.h"
#include "nn/multihead_attention.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/mlp.h"
#include "nn/position.h"
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
    CHECK(cp->tensor->numel == fp->numel,
          "%s: '%s' has %lld values, torch %lld", f->name, fp->name,
          (long long)cp->tensor->numel, (long long)fp->numel);
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
  ct_nn_transformer_config cfg = ct_nn_transformer_defaults(f->E, f->NH);
  cfg.dim_feedforward = f->ff;
  cfg.dropout = 0.0f;
  cfg.activation = f->gelu ? CT_NN_GELU : CT_NN_RELU;
  cfg.norm_first = f->norm_first;
  if (!strcmp(f->kind, "mha"))
    return ct_nn_mha_init(&m->mha, p, "", f->E, f->NH, 0.0f, true, &rng);
  if (!strcmp(f->kind, "encoder_layer"))
    return ct_nn_encoder_layer_init(&m->enc, p, "", &cfg, &rng);
  if (!strcmp(f->kind, "decoder_layer"))
    return ct_nn_decoder_layer_init(&m->dec, p, "", &cfg, &rng);
  return ct_nn_transformer_init(&m->tr, p, "", &cfg, f->layers, f->layers,
                                &rng);
}

static ct_tensor *forward(const model *m, const nn_fixture *f, ct_tensor *x,
                          ct_tensor *mem, ct_tensor **weights) {
  const int64_t B = f->B, T = f->Tq, Tk = f->Tk, NH = f->NH;
  const int64_t keys = strcmp(f->kind, "mha") ? T : Tk;  // self-attn keys
  ct_nn_attn_masks self = {.causal = f->causal}, memory = {0};
  if (f->attn_mask_ndim == 3) {
    self.attn_mask = f->attn_mask_bool
                         ? ct_tensor_from(CT_I32, f->attn_mask_bool,
                                          CT_SHAPE(B * NH, T, keys))
                         : ct_tensor_from(CT_F32, f->attn_mask_float,
                                          CT_SHAPE(B * NH, T, keys));
  } else if (f->attn_mask_ndim == 2) {
    self.attn_mask =
        f->attn_mask_bool
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
  ct_tensor *x =
      ct_requires_grad(ct_tensor_from(CT_F32, f->x, CT_SHAPE(B, Tq, E)));
  ct_tensor *mem =
      f->mem
          ? ct_requires_grad(ct_tensor_from(CT_F32, f->mem, CT_SHAPE(B, Tk, E)))
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
  if (mem)
    e.grad_in = fmax(e.grad_in, rel_err(mem->grad, f->grad_mem, mem->numel));
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
  char weights_err[16] = "   -   ";
  if (f->need_weights)
    snprintf(weights_err, sizeof weights_err, "%.1e", e.weights);
  printf("  %-30s out %.1e  weights %s  grad in %.1e  param %.1e (%s)\n",
         f->name, e.out, weights_err, e.grad_in, e.grad_param, e.worst_param);
  worst->out = fmax(worst->out, e.out);
  worst->weights = fmax(worst->weights, e.weights);
  worst->grad_in = fmax(worst->grad_in, e.grad_in);
  worst->grad_param = fmax(worst->grad_param, e.grad_param);
done:
  ct_nn_transformer_free(&m.tr);
  ct_params_free(&p);
  ct_arena_reset();
}

// ---- semantics without fixtures ---------------------------------------------

static unsigned flags_of(const ct_params *p, const char *name) {
  const ct_param *cp = ct_params_find(p, name);
  CHECK(cp != NULL, "no parameter '%s'", name);
  return cp ? cp->flags : ~0u;
}

// All values of t within [lo, hi], and not all equal (they were drawn).
static void check_range(const ct_tensor *t, double lo, double hi) {
  float mn = INFINITY, mx = -INFINITY;
  for (int64_t i = 0; i < t->numel; i++) {
    mn = fminf(mn, ct_f32(t)[i]);
    mx = fmaxf(mx, ct_f32(t)[i]);
  }
  CHECK(mn >= lo && mx <= hi && mn < mx,
        "%s: values in [%g, %g], want [%g, %g]", t->name, (double)mn,
        (double)mx, lo, hi);
}

static void check_constant(const ct_tensor *t, float v) {
  bool ok = true;
  for (int64_t i = 0; i < t->numel; i++) ok = ok && ct_f32(t)[i] == v;
  CHECK(ok, "%s: want all %g", t->name, (double)v);
}

static void test_names_flags_init(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(3, 0);
  ct_nn_transformer_config cfg = ct_nn_transformer_defaults(16, 4);
  cfg.dim_feedforward = 64;
  ct_nn_encoder enc;
  ct_nn_mha mha;
  ct_nn_mlp mlp;
  ct_nn_embedding emb;
  ct_nn_pos_embedding pos;
  ct_status st = ct_nn_encoder_init(&enc, &p, "encoder", &cfg, 2, true, &rng);
  if (st == CT_OK)
    st = ct_nn_mha_init(&mha, &p, "attn", 16, 4, 0.0f, true, &rng);
  if (st == CT_OK)
    st = ct_nn_mlp_init(&mlp, &p, "blocks.0.mlp", 16, 64, 16, CT_NN_GELU, 0.0f,
                        &rng);
  if (st == CT_OK)
    st = ct_nn_embedding_init(&emb, &p, "embed", 50, 16, 1, &rng);
  if (st == CT_OK)
    st = ct_nn_pos_embedding_init(&pos, &p, "pos_embed", 10, 16, &rng);
  CHECK(st == CT_OK, "init: %s", ct_last_error());
  if (st != CT_OK) return;

  CHECK(flags_of(&p, "encoder.layers.1.self_attn.in_proj_weight") == 0,
        "attention weights decay");
  CHECK(flags_of(&p, "encoder.layers.0.linear2.weight") == 0, "linear decays");
  const char *no_decay[] = {"encoder.layers.0.self_attn.in_proj_bias",
                            "encoder.layers.0.self_attn.out_proj.bias",
                            "encoder.layers.1.norm2.weight",
                            "encoder.norm.bias",
                            "blocks.0.mlp.fc1.bias",
                            "embed.weight",
                            "pos_embed"};
  for (size_t i = 0; i < sizeof no_decay / sizeof *no_decay; i++)
    CHECK(flags_of(&p, no_decay[i]) == CT_PARAM_NO_DECAY, "%s: NO_DECAY",
          no_decay[i]);

  // PyTorch's inits: xavier for in_proj, kaiming(a=sqrt 5) for Linear
  // (bound 1/sqrt(fan_in), the bias too), zero attention biases, unit norms,
  // N(0,1) embeddings with the padding row zero, trunc_normal(.02) pos_embed.
  const double xavier = sqrt(6.0 / (16 + 48));  // fan_in 16, fan_out 48
  check_range(mha.in_proj_weight, -xavier, xavier);
  check_constant(mha.in_proj_bias, 0.0f);
  check_constant(mha.out_proj.bias, 0.0f);
  check_range(mha.out_proj.weight, -0.25, 0.25);
  check_range(mlp.fc2.weight, -0.125, 0.125);
  check_range(mlp.fc2.bias, -0.125, 0.125);
  check_constant(enc.layers[1].norm1.weight, 1.0f);
  check_constant(enc.norm.bias, 0.0f);
  check_range(emb.weight, -6.0, 6.0);
  ct_tensor *pad_row = ct_tensor_slice0(emb.weight, 1, 1);
  pad_row->name = "embed.weight[padding_idx]";
  check_constant(pad_row, 0.0f);
  check_range(pos.weight, -0.12, 0.12);
  ct_tensor *t = ct_tensor_zeros(CT_F32, CT_SHAPE(4000));
  t->name = "trunc_normal_std";
  CHECK(ct_nn_init_trunc_normal_std(t, &rng, 0.5f) == CT_OK, "%s",
        ct_last_error());
  check_range(t, -1.0, 1.0);
  ct_nn_encoder_free(&enc);
  ct_params_free(&p);
  ct_arena_reset();
}

static void test_tables(void) {
  ct_tensor *pe = ct_nn_sinusoidal_table(6, 10);
  double worst = 0.0;
  for (int pos = 0; pos < 6; pos++)
    for (int i = 0; i < 5; i++) {
      double angle = pos / pow(10000.0, 2.0 * i / 10.0);
      worst = fmax(worst, fabs(ct_f32(pe)[pos * 10 + 2 * i] - sin(angle)));
      worst = fmax(worst, fabs(ct_f32(pe)[pos * 10 + 2 * i + 1] - cos(angle)));
    }
  CHECK(worst < 1e-7, "sinusoidal table off by %.2e", worst);
  // Tq=2, Tk=4: query i sees keys j <= i + 2.
  ct_tensor *m = ct_nn_causal_mask(2, 4, CT_I32);
  const int32_t want[8] = {0, 0, 0, 1, 0, 0, 0, 0};
  CHECK(!memcmp(ct_i32(m), want, sizeof want), "causal mask (2,4)");
  ct_tensor *f = ct_nn_causal_mask(3, 3, CT_F32);
  CHECK(isinf(ct_f32(f)[1]) && ct_f32(f)[3] == 0.0f, "additive causal mask");
  ct_arena_reset();
}

// max |a - b| over two same-size tensors
static double max_diff(const ct_tensor *a, const ct_tensor *b) {
  double d = 0.0;
  for (int64_t i = 0; i < a->numel; i++)
    d = fmax(d, fabs((double)ct_f32(a)[i] - ct_f32(b)[i]));
  return d;
}

static void test_dropout_context(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(4, 0);
  ct_nn_mha mha;
  CHECK(ct_nn_mha_init(&mha, &p, "attn", 8, 2, 0.3f, true, &rng) == CT_OK, "%s",
        ct_last_error());
  ct_rng data = ct_rng_make(8, 1);
  ct_tensor *x = ct_tensor_randn(&data, 0.0f, 1.0f, CT_SHAPE(2, 5, 8));
  ct_nn_attn_masks causal = {.causal = true};

  ct_nn_ctx a = ct_nn_train_ctx(42, 7), b = ct_nn_train_ctx(42, 7),
            c = ct_nn_train_ctx(42, 8), ev = ct_nn_eval_ctx();
  ct_tensor *w = NULL;
  ct_tensor *fused = ct_nn_mha_forward(&mha, &a, x, x, x, &causal, NULL);
  ct_tensor *composed = ct_nn_mha_forward(&mha, &b, x, x, x, &causal, &w);
  ct_tensor *next_step = ct_nn_mha_forward(&mha, &c, x, x, x, &causal, NULL);
  ct_tensor *eval = ct_nn_mha_forward(&mha, &ev, x, x, x, &causal, NULL);
  ct_tensor *no_ctx = ct_nn_mha_forward(&mha, NULL, x, x, x, &causal, NULL);
  if (!fused || !composed || !next_step || !eval || !no_ctx) {
    CHECK(false, "mha forward: %s", ct_last_error());
    return;
  }
  double paths = max_diff(fused, composed);
  printf("  attention dropout 0.3: fused vs composed path max diff %.2e\n",
         paths);
  CHECK(paths < 1e-5, "fused and composed paths differ by %.2e", paths);
  CHECK(a.site == 1 && b.site == 1, "one dropout site per attention call");
  CHECK(max_diff(fused, next_step) > 1e-3, "step 8 drew step 7's mask");
  CHECK(max_diff(fused, eval) > 1e-3, "training dropped nothing");
  CHECK(max_diff(eval, no_ctx) == 0.0, "eval ctx and NULL ctx differ");

  ct_nn_ctx d = ct_nn_train_ctx(42, 7);
  ct_tensor *y1 = ct_nn_dropout(&d, x, 0.5f), *y2 = ct_nn_dropout(&d, x, 0.5f);
  CHECK(d.site == 2 && max_diff(y1, y2) > 0.0, "dropout sites draw new masks");
  ct_nn_ctx e = ct_nn_eval_ctx();
  CHECK(max_diff(ct_nn_dropout(&e, x, 0.5f), x) == 0.0, "eval dropout");
  ct_params_free(&p);
  ct_arena_reset();
}

int main(void) {
  test_names_flags_init();
  test_tables();
  test_dropout_context();
  printf("max |ctrain - torch| / max |torch| per tensor (tol %.0e):\n", TOL);
  errors worst = {0};
  for (int i = 0; i < nn_fixture_count; i++)
    check_case(&nn_fixtures[i], &worst);
  printf(
      "nn parity: %d cases, worst: out %.2e, weights %.2e, input grads "
      "%.2e, param grads %.2e\n",
      nn_fixture_count, worst.out, worst.weights, worst.grad_in,
      worst.grad_param);
  ct_arena_release();
  return test_summary("nn_parity");
}
