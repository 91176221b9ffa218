// The recurrent modules against PyTorch 1.13, from tests/ref/rnn_fixtures.h
// (tests/ref/gen_rnn_fixtures.py, torch in float64 on the same float32
// values): nn.GRU and nn.LSTM (several layers, bidirectional, both layouts,
// no biases, initial states, uneven lengths through packed sequences), the
// tutorial's additive attention with padding, and the whole attention GRU
// translator (bench/ref/rnn_model.py). Outputs, final states, attention
// weights, and the gradients of the inputs and of every parameter; metric
// max |ctrain - torch| / max |torch| per tensor, tolerance 1e-5. (The
// worst is the attention's bias gradient, a sum over keys of terms that
// cancel, since softmax gradients sum to 0: torch's own float32 backward is
// 8.7e-6 off there.)
//
// Also PyTorch semantics that need no fixture: parameter names, order,
// weight-decay flags and init bounds; dropout between layers (training
// only, keyed by the step); teacher forcing drawn per step from the seed;
// a sentence translated alone and in a padded batch gets the same logits.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "harness.h"
#include "nn/rnn.h"
#include "nn/rnn_seq2seq.h"
#include "parity_util.h"
#include "ref/rnn_fixtures.h"

#include <math.h>
#include <string.h>

static const double TOL = 1e-5;
static double worst_out, worst_grad;

static bool load_params(ct_params *p, const char *what,
                        const rnn_fixture_param *params, int n) {
  bool ok = parity_count(p, what, n);
  for (int i = 0; i < n; i++)
    ok = parity_load(p, what, params[i].name, params[i].numel,
                     params[i].value) &&
         ok;
  // The store registers in PyTorch's order too (init draws in that order).
  for (int i = 0; ok && i < n; i++)
    CHECK(!strcmp(p->items[i].name, params[i].name),
          "%s: parameter %d is '%s', torch's '%s'", what, i, p->items[i].name,
          params[i].name);
  return ok;
}

// Checks got against want and keeps the worst error of its kind.
static void compare(const char *what, const char *name, const float *got,
                    const double *want, int64_t n, bool grad) {
  double e = parity_rel_err(got, want, n);
  CHECK(e <= TOL, "%s: %s rel err %.2e > %.0e", what, name, e, TOL);
  double *worst = grad ? &worst_grad : &worst_out;
  *worst = fmax(*worst, e);
}

static void compare_params(const char *what, const ct_params *p,
                           const rnn_fixture_param *params, int n) {
  double worst = 0.0;
  const char *worst_name = "";
  for (int i = 0; i < n; i++) {
    const ct_tensor *t = ct_params_find(p, params[i].name)->tensor;
    compare(what, params[i].name, t->grad, params[i].grad, t->numel, true);
    double e = parity_rel_err(t->grad, params[i].grad, t->numel);
    if (e >= worst) {
      worst = e;
      worst_name = params[i].name;
    }
  }
  printf("  %-36s param grads %.1e (%s)\n", what, worst, worst_name);
}

static ct_tensor *input(const float *v, int ndim, const int64_t *shape) {
  return v ? ct_requires_grad(ct_tensor_from(CT_F32, v, ndim, shape)) : NULL;
}

static void check_layer(const rnn_layer_fixture *f) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(1, 0);
  ct_nn_rnn_config cfg = ct_nn_rnn_defaults(f->I, f->H);
  cfg.num_layers = f->layers;
  cfg.bidirectional = f->bidirectional;
  cfg.batch_first = f->batch_first;
  cfg.bias = f->bias;
  ct_nn_rnn m;
  ct_status st = f->lstm ? ct_nn_lstm_init(&m, &p, "", &cfg, &rng)
                         : ct_nn_gru_init(&m, &p, "", &cfg, &rng);
  CHECK(st == CT_OK, "%s: init: %s", f->name, ct_last_error());
  if (st != CT_OK || !load_params(&p, f->name, f->params, f->n_params))
    goto done;
  const int64_t B = f->B, T = f->T, LD = f->layers * (f->bidirectional ? 2 : 1);
  ct_tensor *x = f->batch_first ? input(f->x, CT_SHAPE(B, T, f->I))
                                : input(f->x, CT_SHAPE(T, B, f->I));
  ct_tensor *h0 = input(f->h0, CT_SHAPE(LD, B, f->H));
  ct_tensor *c0 = input(f->c0, CT_SHAPE(LD, B, f->H));
  ct_tensor *lengths =
      f->lengths ? ct_tensor_from(CT_I32, f->lengths, CT_SHAPE(B)) : NULL;
  ct_nn_ctx ctx = ct_nn_train_ctx(9, 0);  // dropout 0: the same as eval
  ct_tensor *h_n = NULL, *c_n = NULL;
  ct_tensor *out =
      f->lstm ? ct_nn_lstm_forward(&m, &ctx, x, lengths, h0, c0, &h_n, &c_n)
              : ct_nn_gru_forward(&m, &ctx, x, lengths, h0, &h_n);
  ct_tensor *loss =
      ct_add(parity_contract(out, f->r_out), parity_contract(h_n, f->r_h));
  if (f->lstm) loss = ct_add(loss, parity_contract(c_n, f->r_c));
  CHECK(loss != NULL, "%s: forward: %s", f->name, ct_last_error());
  if (!loss) goto done;
  st = ct_backward(loss);
  CHECK(st == CT_OK, "%s: backward: %s", f->name, ct_last_error());
  if (st != CT_OK) goto done;
  compare(f->name, "output", ct_f32(out), f->out, out->numel, false);
  compare(f->name, "h_n", ct_f32(h_n), f->h_n, h_n->numel, false);
  if (f->lstm) compare(f->name, "c_n", ct_f32(c_n), f->c_n, c_n->numel, false);
  compare(f->name, "input grad", x->grad, f->grad_x, x->numel, true);
  if (h0) compare(f->name, "h0 grad", h0->grad, f->grad_h0, h0->numel, true);
  if (c0) compare(f->name, "c0 grad", c0->grad, f->grad_c0, c0->numel, true);
  compare_params(f->name, &p, f->params, f->n_params);
done:
  ct_nn_rnn_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

static void check_attention(const rnn_attention_fixture *f) {
  const char *what = "additive_attention";
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(2, 0);
  ct_nn_additive_attention m;
  ct_status st =
      ct_nn_additive_attention_init(&m, &p, "", f->Dq, f->Dk, f->Dq, &rng);
  CHECK(st == CT_OK, "%s: init: %s", what, ct_last_error());
  if (st != CT_OK || !load_params(&p, what, f->params, f->n_params)) goto done;
  ct_tensor *q = input(f->q, CT_SHAPE(f->B, f->Dq));
  ct_tensor *k = input(f->k, CT_SHAPE(f->B, f->S, f->Dk));
  ct_tensor *mask = ct_tensor_from(CT_I32, f->mask, CT_SHAPE(f->B, f->S));
  ct_nn_additive_memory mem;
  ct_tensor *w = NULL, *ctx = NULL;
  if (ct_nn_additive_attention_prepare(&m, k, k, mask, &mem) == CT_OK)
    ctx = ct_nn_additive_attention_forward(&mem, q, &w);
  ct_tensor *loss = parity_contract(ctx, f->r);
  st = loss ? ct_backward(loss) : ct_last_status();
  CHECK(st == CT_OK, "%s: %s", what, ct_last_error());
  if (st != CT_OK) goto done;
  compare(what, "context", ct_f32(ctx), f->context, ctx->numel, false);
  compare(what, "weights", ct_f32(w), f->weights, w->numel, false);
  compare(what, "query grad", q->grad, f->grad_q, q->numel, true);
  compare(what, "keys grad", k->grad, f->grad_k, k->numel, true);
  compare_params(what, &p, f->params, f->n_params);
done:
  ct_params_free(&p);
  ct_arena_reset();
}

static ct_nn_rnn_seq2seq_config translator_config(
    const rnn_translator_fixture *f) {
  return (ct_nn_rnn_seq2seq_config){.src_vocab = f->src_vocab,
                                    .tgt_vocab = f->tgt_vocab,
                                    .emb_dim = f->E,
                                    .enc_hidden = f->He,
                                    .dec_hidden = f->Hd,
                                    .dropout = 0.0f};
}

static void check_translator(const rnn_translator_fixture *f) {
  const char *what = "rnn_seq2seq";
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(3, 0);
  ct_nn_rnn_seq2seq m;
  ct_nn_rnn_seq2seq_config cfg = translator_config(f);
  ct_status st = ct_nn_rnn_seq2seq_init(&m, &p, &cfg, &rng);
  CHECK(st == CT_OK, "%s: init: %s", what, ct_last_error());
  if (st != CT_OK || !load_params(&p, what, f->params, f->n_params)) goto done;
  ct_tensor *src = ct_tensor_from(CT_I32, f->src, CT_SHAPE(f->B, f->S));
  ct_tensor *tgt = ct_tensor_from(CT_I32, f->tgt_in, CT_SHAPE(f->B, f->T));
  ct_nn_ctx ctx = ct_nn_train_ctx(4, 0);
  ct_tensor *align = NULL;
  ct_tensor *logits =
      ct_nn_rnn_seq2seq_forward(&m, &ctx, src, tgt, 1.0f, &align);
  ct_tensor *loss = parity_contract(logits, f->r);
  st = loss ? ct_backward(loss) : ct_last_status();
  CHECK(st == CT_OK, "%s: %s", what, ct_last_error());
  if (st != CT_OK) goto done;
  compare(what, "logits", ct_f32(logits), f->logits, logits->numel, false);
  compare(what, "attention weights", ct_f32(align), f->align, align->numel,
          false);
  compare_params(what, &p, f->params, f->n_params);
done:
  ct_nn_rnn_seq2seq_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

// ---- semantics without fixtures ---------------------------------------------

static void test_init_and_flags(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(5, 0);
  ct_nn_rnn_config cfg = ct_nn_rnn_defaults(7, 16);
  cfg.num_layers = 2;
  cfg.bidirectional = true;
  ct_nn_lstm m;
  CHECK(ct_nn_lstm_init(&m, &p, "rnn", &cfg, &rng) == CT_OK, "%s",
        ct_last_error());
  CHECK(p.n == 16, "2 layers x 2 directions x 4 tensors: %d", p.n);
  // U(-1/sqrt(H), 1/sqrt(H)) everywhere; biases NO_DECAY.
  for (int i = 0; i < p.n; i++) {
    parity_check_range(p.items[i].tensor, -0.25, 0.25);
    const bool bias = p.items[i].tensor->ndim == 1;
    CHECK((p.items[i].flags == CT_PARAM_NO_DECAY) == bias, "%s: flags %u",
          p.items[i].name, p.items[i].flags);
  }
  const ct_param *w = ct_params_find(&p, "rnn.weight_ih_l1_reverse");
  CHECK(w && w->tensor->shape[0] == 64 && w->tensor->shape[1] == 32,
        "rnn.weight_ih_l1_reverse is (4H, 2H)");
  ct_nn_rnn_free(&m);
  ct_params_free(&p);
}

static bool same_bits(const ct_tensor *a, const ct_tensor *b) {
  return a && b && a->numel == b->numel &&
         !memcmp(a->data, b->data, ct_tensor_bytes(a));
}

// Dropout between layers: off in eval, the same mask for the same (seed,
// step), another for another step; a one-layer GRU has no dropout site.
static void test_dropout_between_layers(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng rng = ct_rng_make(6, 0);
  ct_nn_rnn_config cfg = ct_nn_rnn_defaults(4, 8);
  cfg.num_layers = 2;
  cfg.batch_first = true;
  cfg.dropout = 0.5f;
  ct_nn_gru m;
  CHECK(ct_nn_gru_init(&m, &p, "", &cfg, &rng) == CT_OK, "%s", ct_last_error());
  ct_tensor *x = ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(3, 5, 4));
  ct_nn_ctx eval = ct_nn_eval_ctx(), a = ct_nn_train_ctx(1, 7),
            b = ct_nn_train_ctx(1, 7), c = ct_nn_train_ctx(1, 8);
  ct_tensor *ye = ct_nn_gru_forward(&m, &eval, x, NULL, NULL, NULL);
  ct_tensor *ya = ct_nn_gru_forward(&m, &a, x, NULL, NULL, NULL);
  ct_tensor *yb = ct_nn_gru_forward(&m, &b, x, NULL, NULL, NULL);
  ct_tensor *yc = ct_nn_gru_forward(&m, &c, x, NULL, NULL, NULL);
  CHECK(same_bits(ya, yb), "same seed and step: same dropout");
  CHECK(!same_bits(ya, ye) && !same_bits(ya, yc),
        "training differs from eval and from another step");
  CHECK(a.site == 1, "two layers: one dropout site (got %u)", a.site);
  ct_nn_rnn_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

// A translator of the fixture's sizes with its own init (drawn from seed).
static bool fixture_sized(const rnn_translator_fixture *f, uint64_t seed,
                          ct_params *p, ct_nn_rnn_seq2seq *m) {
  ct_params_init(p);
  ct_rng rng = ct_rng_make(seed, 0);
  ct_nn_rnn_seq2seq_config cfg = translator_config(f);
  const bool ok = ct_nn_rnn_seq2seq_init(m, p, &cfg, &rng) == CT_OK;
  CHECK(ok, "%s", ct_last_error());
  return ok;
}

// Teacher forcing 0.5: the decisions come from (seed, step), so the same
// pass repeats exactly; ratio 1 and eval are the fully forced pass; a
// ratio of 0 feeds predictions from step 1 on.
static void test_teacher_forcing(const rnn_translator_fixture *f) {
  ct_params p;
  ct_nn_rnn_seq2seq m;
  if (!fixture_sized(f, 7, &p, &m)) return;
  ct_tensor *src = ct_tensor_from(CT_I32, f->src, CT_SHAPE(f->B, f->S));
  ct_tensor *tgt = ct_tensor_from(CT_I32, f->tgt_in, CT_SHAPE(f->B, f->T));
  ct_nn_ctx t1 = ct_nn_train_ctx(3, 11), t2 = ct_nn_train_ctx(3, 11),
            ev = ct_nn_eval_ctx(), t0 = ct_nn_train_ctx(3, 11),
            full = ct_nn_train_ctx(3, 11);
  ct_tensor *a = ct_nn_rnn_seq2seq_forward(&m, &t1, src, tgt, 0.5f, NULL);
  ct_tensor *b = ct_nn_rnn_seq2seq_forward(&m, &t2, src, tgt, 0.5f, NULL);
  ct_tensor *e = ct_nn_rnn_seq2seq_forward(&m, &ev, src, tgt, 0.5f, NULL);
  ct_tensor *forced =
      ct_nn_rnn_seq2seq_forward(&m, &full, src, tgt, 1.0f, NULL);
  ct_tensor *free_run =
      ct_nn_rnn_seq2seq_forward(&m, &t0, src, tgt, 0.0f, NULL);
  CHECK(same_bits(a, b), "teacher forcing 0.5 repeats for the same step");
  CHECK(same_bits(e, forced), "eval is teacher-forced");
  CHECK(!same_bits(free_run, forced), "ratio 0 feeds the model's own tokens");
  ct_nn_rnn_seq2seq_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

// Padding never changes a result: each sentence of a padded batch (source
// and target padding) gets, at its real positions, the same bits as alone.
static void test_padding_invariance(const rnn_translator_fixture *f) {
  ct_params p;
  ct_nn_rnn_seq2seq m;
  if (!fixture_sized(f, 9, &p, &m)) return;
  const int64_t B = f->B, S = f->S, T = f->T, V = f->tgt_vocab;
  ct_tensor *all = ct_nn_rnn_seq2seq_forward(
      &m, NULL, ct_tensor_from(CT_I32, f->src, CT_SHAPE(B, S)),
      ct_tensor_from(CT_I32, f->tgt_in, CT_SHAPE(B, T)), 1.0f, NULL);
  bool same = all != NULL;
  for (int64_t b = 0; b < B && same; b++) {
    int64_t s_len = 0, t_len = 0;
    while (s_len < S && f->src[b * S + s_len]) s_len++;
    while (t_len < T && f->tgt_in[b * T + t_len]) t_len++;
    ct_tensor *one = ct_nn_rnn_seq2seq_forward(
        &m, NULL, ct_tensor_from(CT_I32, f->src + b * S, CT_SHAPE(1, s_len)),
        ct_tensor_from(CT_I32, f->tgt_in + b * T, CT_SHAPE(1, t_len)), 1.0f,
        NULL);
    same = one && !memcmp(ct_f32(one), ct_f32(all) + b * T * V,
                          (size_t)(t_len * V) * sizeof(float));
  }
  CHECK(same, "a padded batch changes a sentence's logits: %s",
        all ? "bits differ" : ct_last_error());
  ct_nn_rnn_seq2seq_free(&m);
  ct_params_free(&p);
  ct_arena_reset();
}

int main(void) {
  for (int i = 0; i < rnn_layer_fixture_count; i++)
    check_layer(&rnn_layer_fixtures[i]);
  check_attention(&rnn_attention_fixture_case);
  check_translator(&rnn_translator_fixture_case);
  printf("rnn parity: worst out %.2e, grads %.2e (tolerance %.0e)\n", worst_out,
         worst_grad, TOL);
  test_init_and_flags();
  test_dropout_between_layers();
  test_teacher_forcing(&rnn_translator_fixture_case);
  test_padding_invariance(&rnn_translator_fixture_case);
  return test_summary("rnn_parity");
}
