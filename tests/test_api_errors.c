// Bad input to the op API returns NULL with a clear message and the right
// status: one case per kind (shape mismatch, wrong dtype, index out of
// range, bad argument), and errors pass through chained calls.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/error.h"
#include "tests/harness.h"

#include <string.h>

#define EXPECT_ERROR(call, status, text)                                  \
  do {                                                                    \
    ct_clear_error();                                                     \
    ct_tensor *r_ = (call);                                               \
    CHECK(r_ == NULL, "%s should fail", #call);                           \
    CHECK(ct_last_status() == (status), "%s: status %s, want %s", #call,  \
          ct_status_name(ct_last_status()), ct_status_name(status));      \
    CHECK(strstr(ct_last_error(), (text)) != NULL,                        \
          "%s: message '%s' lacks '%s'", #call, ct_last_error(), (text)); \
  } while (0)

int main(void) {
  ct_tensor *a = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3));
  ct_tensor *b = ct_tensor_zeros(CT_F32, CT_SHAPE(4, 5));
  ct_tensor *ids = ct_tensor_zeros(CT_I32, CT_SHAPE(3));
  ct_tensor *table = ct_tensor_zeros(CT_F32, CT_SHAPE(10, 4));

  // Shape mismatch.
  EXPECT_ERROR(ct_add(a, b), CT_ERR_SHAPE,
               "add: shapes [2, 3] and [4, 5] do not broadcast");
  EXPECT_ERROR(ct_matmul(a, b, false, false), CT_ERR_SHAPE,
               "matmul: inner dims differ");
  EXPECT_ERROR(
      ct_matmul(ct_tensor_zeros(CT_F32, CT_SHAPE(2, 2, 3)),
                ct_tensor_zeros(CT_F32, CT_SHAPE(3, 3, 4)), false, false),
      CT_ERR_SHAPE, "batch dims");
  EXPECT_ERROR(ct_linear(a, b, NULL), CT_ERR_SHAPE,
               "linear: weight [4, 5] does not fit input [2, 3]");
  EXPECT_ERROR(ct_linear(a, ct_tensor_zeros(CT_F32, CT_SHAPE(4, 3)), a),
               CT_ERR_SHAPE, "linear: bias [2, 3]");
  EXPECT_ERROR(ct_reshape(a, CT_SHAPE(4, -1)), CT_ERR_SHAPE, "cannot infer");
  EXPECT_ERROR(ct_concat((ct_tensor *[]){a, b}, 2, 0), CT_ERR_SHAPE,
               "concat: input 1 [4, 5] does not match");

  // Wrong dtype.
  EXPECT_ERROR(ct_relu(ids), CT_ERR_DTYPE, "relu: input must be f32, got i32");
  EXPECT_ERROR(ct_embedding(table, a, -1), CT_ERR_DTYPE,
               "embedding: ids must be i32");
  EXPECT_ERROR(ct_matmul(ids, a, false, false), CT_ERR_DTYPE, "matmul: a");

  // Index out of range.
  ct_i32(ids)[1] = 10;
  EXPECT_ERROR(ct_embedding(table, ids, -1), CT_ERR_INDEX,
               "embedding: id 10 at position 1 is outside the table's 10 rows");
  ct_i32(ids)[1] = -1;
  EXPECT_ERROR(ct_embedding(table, ids, -1), CT_ERR_INDEX, "id -1");
  EXPECT_ERROR(ct_slice(a, 1, 2, 2), CT_ERR_INDEX, "slice: [2, 4) is outside");
  EXPECT_ERROR(ct_transpose(a, 0, 2), CT_ERR_INDEX, "dim 2 out of range");

  // Bad arguments.
  EXPECT_ERROR(ct_dropout(a, 1.5f, 0, 0), CT_ERR_ARG, "dropout: p = 1.5");
  EXPECT_ERROR(ct_permute(a, (const int[]){0, 0}), CT_ERR_ARG,
               "not a permutation");

  // An error early in a chain reaches the end of it unchanged.
  ct_clear_error();
  ct_tensor *chain = ct_sum(ct_gelu(ct_add(a, b), CT_GELU_ERF));
  CHECK(chain == NULL && strstr(ct_last_error(), "add: shapes"),
        "chained error: '%s'", ct_last_error());
  CHECK(ct_backward(chain) == CT_ERR_SHAPE, "backward(NULL) keeps the error");

  ct_arena_release();
  return test_summary("api_errors");
}
