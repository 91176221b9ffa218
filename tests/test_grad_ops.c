// Finite-difference gradient checks for the elementwise, matrix, reduction
// and shape ops (autograd/ops_{elementwise,matmul,reduce,shape}.c).
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/params.h"
#include "tests/grad_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct op_case {
  int op;
  bool ta, tb;
  int dim;
  int64_t start, len;
  int64_t padding;
  int n;  // concat: inputs (0 = 3)
  ct_gelu_kind gelu;
  float p;
} op_case;

enum {
  OP_ADD,
  OP_SUB,
  OP_MUL,
  OP_SCALE,
  OP_RELU,
  OP_GELU,
  OP_SIGMOID,
  OP_INV_SIGMOID,
  OP_TANH,
  OP_DROPOUT,
  OP_MATMUL,
  OP_LINEAR,
  OP_LINEAR_NOBIAS,
  OP_SUM,
  OP_MEAN,
  OP_SUM_LAST,
  OP_MEAN_LAST,
  OP_RESHAPE,
  OP_PERMUTE,
  OP_TRANSPOSE,
  OP_TRANSPOSE_LAST,
  OP_CONCAT,
  OP_SLICE,
  OP_EMBEDDING,
};

static ct_tensor *run(ct_tensor *const *in, void *ctx) {
  const op_case *c = ctx;
  switch (c->op) {
  case OP_ADD: return ct_add(in[0], in[1]);
  case OP_SUB: return ct_sub(in[0], in[1]);
  case OP_MUL: return ct_mul(in[0], in[1]);
  case OP_SCALE: return ct_scale(in[0], -1.7f);
  case OP_RELU: return ct_relu(in[0]);
  case OP_GELU: return ct_gelu(in[0], c->gelu);
  case OP_SIGMOID: return ct_sigmoid(in[0]);
  case OP_INV_SIGMOID: return ct_inverse_sigmoid(in[0], 1e-5f);
  case OP_TANH: return ct_tanh(in[0]);
  case OP_DROPOUT: return ct_dropout(in[0], c->p, 99, 3);
  case OP_MATMUL: return ct_matmul(in[0], in[1], c->ta, c->tb);
  case OP_LINEAR: return ct_linear(in[0], in[1], in[2]);
  case OP_LINEAR_NOBIAS: return ct_linear(in[0], in[1], NULL);
  case OP_SUM: return ct_sum(in[0]);
  case OP_MEAN: return ct_mean(in[0]);
  case OP_SUM_LAST: return ct_sum_last(in[0], c->dim);
  case OP_MEAN_LAST: return ct_mean_last(in[0], c->dim);
  case OP_RESHAPE: return ct_reshape(in[0], CT_SHAPE(-1, 3));
  case OP_PERMUTE: return ct_permute(in[0], (const int[]){2, 0, 3, 1});
  case OP_TRANSPOSE: return ct_transpose(in[0], 0, -1);
  case OP_TRANSPOSE_LAST: return ct_transpose(in[0], -2, -1);
  case OP_CONCAT: return ct_concat(in, c->n ? c->n : 3, c->dim);
  case OP_SLICE: return ct_slice(in[0], c->dim, c->start, c->len);
  case OP_EMBEDDING: return ct_embedding(in[0], in[1], c->padding);
  }
  return NULL;
}

#define GRAD(what, c, ...)                                                    \
  do {                                                                        \
    op_case c_ = c;                                                           \
    ct_tensor *in_[] = {__VA_ARGS__};                                         \
    grad_check(what, run, &c_, in_, (int)(sizeof in_ / sizeof in_[0]), NULL); \
  } while (0)

// Moves values away from 0 by at least `gap`, for ops with a kink there.
static ct_tensor *away_from_zero(ct_tensor *t, float gap) {
  for (int64_t i = 0; i < t->numel; i++) {
    float *v = &ct_f32(t)[i];
    *v = *v >= 0 ? *v + gap : *v - gap;
  }
  return t;
}

static void elementwise(void) {
  // Broadcasting: same shape, bias-like suffix, scalar, size-1 dims, both.
  GRAD("add same shape", ((op_case){.op = OP_ADD}), grad_input(CT_SHAPE(3, 7)),
       grad_input(CT_SHAPE(3, 7)));
  GRAD("add suffix (bias)", ((op_case){.op = OP_ADD}),
       grad_input(CT_SHAPE(2, 3, 7)), grad_input(CT_SHAPE(7)));
  GRAD("add suffix on the left", ((op_case){.op = OP_ADD}),
       grad_input(CT_SHAPE(1, 7)), grad_input(CT_SHAPE(4, 7)));
  GRAD("sub scalar", ((op_case){.op = OP_SUB}), grad_input(CT_SHAPE(5, 3)),
       grad_input(0, NULL));
  GRAD("sub general (4,1,3)-(5,1)", ((op_case){.op = OP_SUB}),
       grad_input(CT_SHAPE(4, 1, 3)), grad_input(CT_SHAPE(5, 1)));
  GRAD("mul row scale (2,3,1)*(2,3,7)", ((op_case){.op = OP_MUL}),
       grad_input(CT_SHAPE(2, 3, 1)), grad_input(CT_SHAPE(2, 3, 7)));
  GRAD("mul per-sample scale (3,4,5)*(3,1,1)", ((op_case){.op = OP_MUL}),
       grad_input(CT_SHAPE(3, 4, 5)), grad_input(CT_SHAPE(3, 1, 1)));
  GRAD("sub block first (4,1)-(3,4,5)", ((op_case){.op = OP_SUB}),
       grad_input(CT_SHAPE(4, 1)), grad_input(CT_SHAPE(3, 4, 5)));
  GRAD("add block second (3,4,5)+(1,4,1)", ((op_case){.op = OP_ADD}),
       grad_input(CT_SHAPE(3, 4, 5)), grad_input(CT_SHAPE(1, 4, 1)));
  GRAD("mul same shape 129", ((op_case){.op = OP_MUL}),
       grad_input(CT_SHAPE(129)), grad_input(CT_SHAPE(129)));
  GRAD("mul shared input", ((op_case){.op = OP_MUL}), grad_input(CT_SHAPE(1)),
       grad_input(CT_SHAPE(7)));
  GRAD("scale", ((op_case){.op = OP_SCALE}), grad_input(CT_SHAPE(2, 7)));
  GRAD("relu", ((op_case){.op = OP_RELU}),
       away_from_zero(grad_input(CT_SHAPE(3, 43)), 0.05f));
  GRAD("gelu erf", ((op_case){.op = OP_GELU, .gelu = CT_GELU_ERF}),
       grad_input(CT_SHAPE(129)));
  GRAD("gelu tanh", ((op_case){.op = OP_GELU, .gelu = CT_GELU_TANH}),
       grad_input(CT_SHAPE(129)));
  GRAD("gelu quick", ((op_case){.op = OP_GELU, .gelu = CT_GELU_QUICK}),
       grad_input(CT_SHAPE(129)));
  // Across its blocks of 1024 (ops_elementwise.c's quick_gelu_blocks).
  GRAD("gelu quick, 3 blocks",
       ((op_case){.op = OP_GELU, .gelu = CT_GELU_QUICK}),
       grad_input(CT_SHAPE(2, 1100)));
  GRAD("sigmoid", ((op_case){.op = OP_SIGMOID}), grad_input(CT_SHAPE(7, 7)));
  GRAD("tanh", ((op_case){.op = OP_TANH}), grad_input(CT_SHAPE(1, 129)));
  GRAD("dropout p=0.3", ((op_case){.op = OP_DROPOUT, .p = 0.3f}),
       grad_input(CT_SHAPE(4, 33)));
  GRAD("dropout p=0", ((op_case){.op = OP_DROPOUT, .p = 0.0f}),
       grad_input(CT_SHAPE(7)));
}

// Where output element i of a broadcast reads t, computed directly from the
// numpy rule (a dim of 1 repeats).
static int64_t broadcast_index(const ct_tensor *t, int nd, const int64_t *shape,
                               int64_t i) {
  int64_t idx = 0, stride = 1;
  for (int d = nd - 1; d >= 0; d--) {
    const int64_t coord = i % shape[d];
    i /= shape[d];
    const int td = d - (nd - t->ndim);
    if (td < 0) continue;
    if (t->shape[td] != 1) idx += coord * stride;
    stride *= t->shape[td];
  }
  return idx;
}

// add, sub and mul against that rule at sizes that take the threaded loops,
// for each way operands line up (same, suffix, block, general), with the
// backward of mul from a random seed gradient.
static void broadcast_values(void) {
  static const struct {
    int nda;
    int64_t a[3];
    int ndb;
    int64_t b[3];
  } cases[] = {
      {3, {64, 50, 16}, 3, {64, 1, 1}},    // per-sample scale (drop path)
      {3, {64, 1, 1}, 3, {64, 50, 16}},    // the same, block operand first
      {2, {50, 1}, 3, {64, 50, 16}},       // block in the middle
      {3, {64, 50, 16}, 3, {64, 50, 16}},  // same shapes
      {3, {64, 50, 16}, 1, {16}},          // suffix
      {3, {64, 1, 16}, 2, {50, 1}},        // general
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int op = OP_ADD; op <= OP_MUL; op++) {
      ct_tensor *a = grad_input(cases[c].nda, cases[c].a);
      ct_tensor *b = grad_input(cases[c].ndb, cases[c].b);
      op_case oc = {.op = op};
      ct_tensor *y = run((ct_tensor *[]){a, b}, &oc);
      CHECK(y && y->ndim == 3, "case %zu op %d: output", c, op);
      if (!y) continue;
      int bad = 0;
      for (int64_t i = 0; i < y->numel; i++) {
        const float x = ct_f32(a)[broadcast_index(a, 3, y->shape, i)];
        const float z = ct_f32(b)[broadcast_index(b, 3, y->shape, i)];
        const float want = op == OP_ADD ? x + z : op == OP_SUB ? x - z : x * z;
        bad += ct_f32(y)[i] != want;
      }
      CHECK(bad == 0, "case %zu op %d: %d values differ", c, op, bad);
      if (op != OP_MUL) {
        ct_tape_clear();
        continue;
      }
      ct_tensor *seed = grad_input(3, y->shape);
      CHECK(ct_backward_seeded(y, ct_f32(seed)) == CT_OK, "case %zu backward",
            c);
      // Reference sums in double; a float sum of many terms may differ by
      // rounding relative to the sum of the terms' magnitudes.
      double *wa = calloc((size_t)a->numel * 2, sizeof *wa);
      double *wb = calloc((size_t)b->numel * 2, sizeof *wb);
      for (int64_t i = 0; i < y->numel; i++) {
        const int64_t ia = broadcast_index(a, 3, y->shape, i);
        const int64_t ib = broadcast_index(b, 3, y->shape, i);
        const double ta = (double)ct_f32(seed)[i] * ct_f32(b)[ib];
        const double tb = (double)ct_f32(seed)[i] * ct_f32(a)[ia];
        wa[2 * ia] += ta;
        wa[2 * ia + 1] += fabs(ta);
        wb[2 * ib] += tb;
        wb[2 * ib + 1] += fabs(tb);
      }
      double err = 0;
      for (int64_t i = 0; i < a->numel; i++)
        err =
            fmax(err, fabs(a->grad[i] - wa[2 * i]) / fmax(1.0, wa[2 * i + 1]));
      for (int64_t i = 0; i < b->numel; i++)
        err =
            fmax(err, fabs(b->grad[i] - wb[2 * i]) / fmax(1.0, wb[2 * i + 1]));
      CHECK(err < 1e-6, "case %zu: mul gradient off by %g", c, err);
      free(wa);
      free(wb);
      ct_tape_clear();
    }
  }
}

static void matrix(void) {
  // op(a) is (M,K) = (7,5) and op(b) is (K,N) = (5,3), each stored
  // transposed when its flag is set; then batched (2,3,...) and shared-b.
  for (int ta = 0; ta < 2; ta++) {
    for (int tb = 0; tb < 2; tb++) {
      char what[64];
      op_case c = {.op = OP_MATMUL, .ta = ta, .tb = tb};
      const int64_t a2[2] = {ta ? 5 : 7, ta ? 7 : 5};
      const int64_t b2[2] = {tb ? 3 : 5, tb ? 5 : 3};
      snprintf(what, sizeof what, "matmul 2-D ta=%d tb=%d", ta, tb);
      GRAD(what, c, grad_input(2, a2), grad_input(2, b2));
      const int64_t a4[4] = {2, 3, ta ? 4 : 1, ta ? 1 : 4};
      const int64_t b4[4] = {2, 3, tb ? 7 : 4, tb ? 4 : 7};
      snprintf(what, sizeof what, "matmul batched ta=%d tb=%d", ta, tb);
      GRAD(what, c, grad_input(4, a4), grad_input(4, b4));
      const int64_t a3[3] = {3, ta ? 4 : 3, ta ? 3 : 4};
      const int64_t bs[2] = {tb ? 2 : 4, tb ? 4 : 2};
      snprintf(what, sizeof what, "matmul shared b ta=%d tb=%d", ta, tb);
      GRAD(what, c, grad_input(3, a3), grad_input(2, bs));
    }
  }
  GRAD("matmul K=129", ((op_case){.op = OP_MATMUL}),
       grad_input(CT_SHAPE(2, 129)), grad_input(CT_SHAPE(129, 2)));
  GRAD("linear (2,3,7)x(5,7)+b", ((op_case){.op = OP_LINEAR}),
       grad_input(CT_SHAPE(2, 3, 7)), grad_input(CT_SHAPE(5, 7)),
       grad_input(CT_SHAPE(5)));
  GRAD("linear one row, one output", ((op_case){.op = OP_LINEAR}),
       grad_input(CT_SHAPE(1, 129)), grad_input(CT_SHAPE(1, 129)),
       grad_input(CT_SHAPE(1)));
  GRAD("linear without bias", ((op_case){.op = OP_LINEAR_NOBIAS}),
       grad_input(CT_SHAPE(4, 7)), grad_input(CT_SHAPE(3, 7)));
}

static void reductions(void) {
  GRAD("sum", ((op_case){.op = OP_SUM}), grad_input(CT_SHAPE(3, 43)));
  GRAD("mean", ((op_case){.op = OP_MEAN}), grad_input(CT_SHAPE(2, 3, 7)));
  GRAD("mean of one", ((op_case){.op = OP_MEAN}), grad_input(CT_SHAPE(1)));
  GRAD("sum_last", ((op_case){.op = OP_SUM_LAST}),
       grad_input(CT_SHAPE(3, 129)));
  GRAD("mean_last keepdim", ((op_case){.op = OP_MEAN_LAST, .dim = 1}),
       grad_input(CT_SHAPE(2, 3, 7)));
}

static void shapes(void) {
  GRAD("reshape", ((op_case){.op = OP_RESHAPE}), grad_input(CT_SHAPE(2, 3, 7)));
  GRAD("permute", ((op_case){.op = OP_PERMUTE}),
       grad_input(CT_SHAPE(2, 3, 4, 5)));
  GRAD("transpose", ((op_case){.op = OP_TRANSPOSE}),
       grad_input(CT_SHAPE(3, 1, 7)));
  // The last two dims: the tiled path, tiles of 32 cut at 37 and 35.
  GRAD("transpose last two, 2x37x35", ((op_case){.op = OP_TRANSPOSE_LAST}),
       grad_input(CT_SHAPE(2, 37, 35)));
  GRAD("concat dim 1", ((op_case){.op = OP_CONCAT, .dim = 1}),
       grad_input(CT_SHAPE(2, 3, 4)), grad_input(CT_SHAPE(2, 1, 4)),
       grad_input(CT_SHAPE(2, 5, 4)));
  GRAD("concat last dim", ((op_case){.op = OP_CONCAT, .dim = -1}),
       grad_input(CT_SHAPE(3, 2)), grad_input(CT_SHAPE(3, 7)),
       grad_input(CT_SHAPE(3, 1)));
  // argmax over the last dim: i32 of the leading shape, first on ties.
  const float xs[8] = {1, 5, 5, 2, -3, -1, -7, -1};
  ct_tensor *am = ct_argmax_last(ct_tensor_from(CT_F32, xs, CT_SHAPE(2, 1, 4)));
  CHECK(am && am->dtype == CT_I32 && am->ndim == 2 && am->shape[0] == 2 &&
            am->shape[1] == 1 && ct_i32(am)[0] == 1 && ct_i32(am)[1] == 1,
        "argmax_last: %s", am ? "wrong values" : ct_last_error());
  // 14 inputs: more than a tape node holds, joined in groups.
  ct_tensor *many[14];
  for (int i = 0; i < 14; i++) many[i] = grad_input(CT_SHAPE(2, 1 + i % 3, 3));
  ct_tensor *joined = ct_concat(many, 14, 1);
  bool in_order = joined && joined->shape[1] == 27;
  for (int64_t b = 0, col = 0; in_order && b < 2; b++, col = 0)
    for (int i = 0; i < 14; i++)
      for (int64_t r = 0; r < many[i]->shape[1]; r++, col++)
        for (int64_t k = 0; k < 3; k++)
          in_order = in_order &&
                     ct_f32(joined)[(b * 27 + col) * 3 + k] ==
                         ct_f32(many[i])[(b * many[i]->shape[1] + r) * 3 + k];
  CHECK(in_order, "concat of 14 tensors: values out of order");
  op_case c14 = {.op = OP_CONCAT, .dim = 1, .n = 14};
  grad_check("concat of 14 tensors", run, &c14, many, 14, NULL);
  GRAD("slice dim 1",
       ((op_case){.op = OP_SLICE, .dim = 1, .start = 2, .len = 3}),
       grad_input(CT_SHAPE(2, 7, 3)));
  GRAD("slice dim 0",
       ((op_case){.op = OP_SLICE, .dim = 0, .start = 1, .len = 1}),
       grad_input(CT_SHAPE(3, 5)));
  // Embedding with repeated ids and a padding row.
  const int32_t ids[] = {3, 1, 3, 0, 6, 3, 1};
  GRAD("embedding (repeats)", ((op_case){.op = OP_EMBEDDING, .padding = -1}),
       grad_input(CT_SHAPE(7, 5)), ct_tensor_from(CT_I32, ids, CT_SHAPE(7)));
  // padding_idx 2 is absent from ids: every used row still gets its grad.
  // (A present padding row gets none, unlike its finite difference; that
  // case is checked exactly below.)
  GRAD("embedding (padding_idx unused)",
       ((op_case){.op = OP_EMBEDDING, .padding = 2}),
       grad_input(CT_SHAPE(7, 129)), ct_tensor_from(CT_I32, ids, CT_SHAPE(7)));
  // The padding row receives exactly nothing.
  {
    ct_tensor *table = grad_input(CT_SHAPE(7, 4));
    ct_tensor *id = ct_tensor_from(CT_I32, ids, CT_SHAPE(1, 7));
    ct_tensor *y = ct_embedding(table, id, 3);
    CHECK(y && y->ndim == 3 && y->shape[2] == 4, "embedding shape");
    ct_backward(ct_sum(y));
    CHECK(table->grad[3 * 4] == 0.0f && table->grad[1 * 4] == 2.0f,
          "padding row grad %g, row 1 grad %g", table->grad[12],
          table->grad[4]);
    ct_arena_reset();
  }
}

// ct_backward_with_hook: the gradients of ct_backward, and the hook sees
// every node once, newest first, in the order ct_tape_newest walks them
// (what the data-parallel step uses to send finished gradients early).
typedef struct hook_log {
  const ct_node *nodes[16];
  int64_t n;
  bool in_order;
} hook_log;

static void log_node(void *arg, const ct_node *node, int64_t index) {
  hook_log *h = arg;
  h->in_order &= index == h->n && h->n < 16;
  if (h->n < 16) h->nodes[h->n] = node;
  h->n++;
}

static void backward_hook(void) {
  ct_params p[2];
  ct_tensor *w[2], *b[2];
  for (int k = 0; k < 2; k++) {
    ct_params_init(&p[k]);
    w[k] = ct_params_add(&p[k], "w", CT_SHAPE(3, 4), 0);
    b[k] = ct_params_add(&p[k], "b", CT_SHAPE(3), 0);
    for (int i = 0; i < 12; i++) ct_f32(w[k])[i] = 0.1f * (float)(i - 5);
    for (int i = 0; i < 3; i++) ct_f32(b[k])[i] = 0.2f * (float)i;
  }
  float xs[8] = {1, -2, 0.5f, 3, -1, 0, 2, 1};
  hook_log h = {.in_order = true};
  const ct_node *walk[16];
  int64_t walked = 0;
  for (int k = 0; k < 2; k++) {
    ct_tensor *x = ct_tensor_from(CT_F32, xs, CT_SHAPE(2, 4));
    ct_tensor *loss = ct_mean(ct_tanh(ct_linear(x, w[k], b[k])));
    if (k == 0) {
      CHECK(ct_backward(loss) == CT_OK, "%s", ct_last_error());
    } else {
      for (const ct_node *n = ct_tape_newest(); n && walked < 16; n = n->prev)
        walk[walked++] = n;
      CHECK(walked == ct_tape_size(), "ct_tape_newest walks %lld of %d nodes",
            (long long)walked, ct_tape_size());
      CHECK(ct_backward_with_hook(loss, log_node, &h) == CT_OK, "%s",
            ct_last_error());
    }
  }
  CHECK(h.in_order && h.n == walked && h.n == 3,
        "the hook saw %lld nodes (in order: %d), the tape had %lld",
        (long long)h.n, h.in_order, (long long)walked);
  for (int64_t i = 0; i < h.n && i < walked; i++)
    CHECK(h.nodes[i] == walk[i], "node %lld differs", (long long)i);
  CHECK(!memcmp(p[0].grad, p[1].grad, p[0].count * sizeof(float)),
        "gradients with the hook differ from ct_backward's");
  CHECK(ct_tape_newest() == NULL, "backward left nodes on the tape");
  for (int k = 0; k < 2; k++) ct_params_free(&p[k]);
  ct_arena_reset();
}

// inverse_sigmoid: the gradient inside (0, 1), away from the clamps; values
// and gradients at and past them (zero gradient outside [0, 1]).
static void inverse_sigmoid(void) {
  ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(5, 9));
  for (int64_t i = 0; i < x->numel; i++)
    ct_f32(x)[i] = 0.05f + 0.9f * (float)ct_rng_next_double(&grad_test_rng);
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.eps = 1e-3;
  grad_check("inverse_sigmoid", run, &(op_case){.op = OP_INV_SIGMOID},
             (ct_tensor *[]){ct_requires_grad(x)}, 1, &o);
  const float v[5] = {-0.5f, 0.0f, 0.3f, 1.0f, 1.5f};
  ct_tensor *t = ct_requires_grad(ct_tensor_from(CT_F32, v, CT_SHAPE(5)));
  ct_tensor *y = ct_inverse_sigmoid(t, 1e-5f);
  const double want[5] = {log(1e-5), log(1e-5), log(0.3 / 0.7), -log(1e-5),
                          -log(1e-5)};
  for (int i = 0; i < 5; i++)
    CHECK(y && fabs(ct_f32(y)[i] - want[i]) < 1e-4 * fabs(want[i]),
          "inverse_sigmoid(%g) = %g, want %g", (double)v[i],
          y ? (double)ct_f32(y)[i] : NAN, want[i]);
  CHECK(ct_backward(ct_sum(y)) == CT_OK, "%s", ct_last_error());
  // At 0: only the 1 - c term (c = 0 < eps is clamped): 1; at 1: 1.
  const double gwant[5] = {0, 1, 1 / 0.3 + 1 / 0.7, 1, 0};
  for (int i = 0; i < 5; i++)
    CHECK(fabs(t->grad[i] - gwant[i]) < 1e-5 * (1 + gwant[i]),
          "inverse_sigmoid'(%g) = %g, want %g", (double)v[i],
          (double)t->grad[i], gwant[i]);
  ct_arena_reset();
}

// ct_backward_seeded: the output's new gradient is 0 + seed (a -0 seed
// gives +0, as zeroing and adding did), on the parallel path too (more
// elements than the tape's ZERO_PAR_MIN); NULL seeds ones; a gradient
// already there has the seed added to it.
static void seeded_backward(void) {
  enum { N = 70001 };
  float *seed = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++)
    seed[i] = i % 5 == 0 ? -0.0f : (float)((i % 11) - 5) * 0.375f;
  ct_tensor *x = ct_requires_grad(ct_tensor_zeros(CT_F32, CT_SHAPE(N)));
  ct_tensor *y = ct_scale(x, 2.0f);
  CHECK(y && ct_backward_seeded(y, seed) == CT_OK, "seeded backward: %s",
        ct_last_error());
  int64_t bad_y = 0, bad_x = 0;
  for (int i = 0; i < N; i++) {
    const float want = 0.0f + seed[i];
    bad_y += memcmp(&y->grad[i], &want, sizeof want) != 0;
    bad_x += x->grad[i] != 2.0f * seed[i];
  }
  CHECK(bad_y == 0, "seed gradient: %lld of %d elements not 0 + seed",
        (long long)bad_y, N);
  CHECK(signbit(y->grad[0]) == 0, "a -0 seed left -0 in the gradient");
  CHECK(bad_x == 0, "input gradient: %lld of %d elements not 2 * seed",
        (long long)bad_x, N);
  // Again from y, whose gradient is kept: the seed is added to it.
  CHECK(ct_backward_seeded(y, seed) == CT_OK, "second seeded backward: %s",
        ct_last_error());
  bad_y = 0;
  for (int i = 0; i < N; i++) bad_y += y->grad[i] != 2.0f * seed[i];
  CHECK(bad_y == 0, "seed added to a kept gradient: %lld of %d differ",
        (long long)bad_y, N);
  ct_tensor *z =
      ct_scale(ct_requires_grad(ct_tensor_zeros(CT_F32, CT_SHAPE(3))), 1.0f);
  CHECK(z && ct_backward_seeded(z, NULL) == CT_OK && z->grad[0] == 1.0f &&
            z->grad[2] == 1.0f,
        "a NULL seed is ones");
  free(seed);
  ct_arena_reset();
}

int main(void) {
  backward_hook();
  elementwise();
  inverse_sigmoid();
  broadcast_values();
  matrix();
  reductions();
  shapes();
  seeded_backward();
  ct_arena_release();
  return test_summary("grad_ops");
}
