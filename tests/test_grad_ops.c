// Finite-difference gradient checks for the elementwise, matrix, reduction
// and shape ops (autograd/ops_{elementwise,matmul,reduce,shape}.c).
#include "autograd/ops.h"
#include "tests/grad_util.h"

#include <string.h>

typedef struct op_case {
  int op;
  bool ta, tb;
  int dim;
  int64_t start, len;
  int64_t padding;
  ct_gelu_kind gelu;
  float p;
} op_case;

enum {
  OP_ADD, OP_SUB, OP_MUL, OP_SCALE, OP_RELU, OP_GELU, OP_SIGMOID, OP_TANH,
  OP_DROPOUT, OP_MATMUL, OP_LINEAR, OP_LINEAR_NOBIAS, OP_SUM, OP_MEAN,
  OP_SUM_LAST, OP_MEAN_LAST, OP_RESHAPE, OP_PERMUTE, OP_TRANSPOSE, OP_CONCAT,
  OP_SLICE, OP_EMBEDDING,
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
  case OP_CONCAT: return ct_concat(in, 3, c->dim);
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
  GRAD("mul same shape 129", ((op_case){.op = OP_MUL}),
       grad_input(CT_SHAPE(129)), grad_input(CT_SHAPE(129)));
  GRAD("mul shared input", ((op_case){.op = OP_MUL}),
       grad_input(CT_SHAPE(1)), grad_input(CT_SHAPE(7)));
  GRAD("scale", ((op_case){.op = OP_SCALE}), grad_input(CT_SHAPE(2, 7)));
  GRAD("relu", ((op_case){.op = OP_RELU}),
       away_from_zero(grad_input(CT_SHAPE(3, 43)), 0.05f));
  GRAD("gelu erf", ((op_case){.op = OP_GELU, .gelu = CT_GELU_ERF}),
       grad_input(CT_SHAPE(129)));
  GRAD("gelu tanh", ((op_case){.op = OP_GELU, .gelu = CT_GELU_TANH}),
       grad_input(CT_SHAPE(129)));
  GRAD("sigmoid", ((op_case){.op = OP_SIGMOID}), grad_input(CT_SHAPE(7, 7)));
  GRAD("tanh", ((op_case){.op = OP_TANH}), grad_input(CT_SHAPE(1, 129)));
  GRAD("dropout p=0.3", ((op_case){.op = OP_DROPOUT, .p = 0.3f}),
       grad_input(CT_SHAPE(4, 33)));
  GRAD("dropout p=0", ((op_case){.op = OP_DROPOUT, .p = 0.0f}),
       grad_input(CT_SHAPE(7)));
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
  GRAD("sum_last", ((op_case){.op = OP_SUM_LAST}), grad_input(CT_SHAPE(3, 129)));
  GRAD("mean_last keepdim", ((op_case){.op = OP_MEAN_LAST, .dim = 1}),
       grad_input(CT_SHAPE(2, 3, 7)));
}

static void shapes(void) {
  GRAD("reshape", ((op_case){.op = OP_RESHAPE}), grad_input(CT_SHAPE(2, 3, 7)));
  GRAD("permute", ((op_case){.op = OP_PERMUTE}),
       grad_input(CT_SHAPE(2, 3, 4, 5)));
  GRAD("transpose", ((op_case){.op = OP_TRANSPOSE}),
       grad_input(CT_SHAPE(3, 1, 7)));
  GRAD("concat dim 1", ((op_case){.op = OP_CONCAT, .dim = 1}),
       grad_input(CT_SHAPE(2, 3, 4)), grad_input(CT_SHAPE(2, 1, 4)),
       grad_input(CT_SHAPE(2, 5, 4)));
  GRAD("concat last dim", ((op_case){.op = OP_CONCAT, .dim = -1}),
       grad_input(CT_SHAPE(3, 2)), grad_input(CT_SHAPE(3, 7)),
       grad_input(CT_SHAPE(3, 1)));
  GRAD("slice dim 1", ((op_case){.op = OP_SLICE, .dim = 1, .start = 2, .len = 3}),
       grad_input(CT_SHAPE(2, 7, 3)));
  GRAD("slice dim 0", ((op_case){.op = OP_SLICE, .dim = 0, .start = 1, .len = 1}),
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
          "padding row grad %g, row 1 grad %g", table->grad[12], table->grad[4]);
    ct_arena_reset();
  }
}

int main(void) {
  elementwise();
  matrix();
  reductions();
  shapes();
  ct_arena_release();
  return test_summary("grad_ops");
}
