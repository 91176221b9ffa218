// bf16 storage of activations (core/tensor.h, ct_nn_activation_dtype):
// (a) ct_bf16_store rounds as the packing does: on every bf16 path, a bf16
//     product of stored-and-widened operands has the bits of the product of
//     the fp32 ones, subnormals, ties, NaN and Inf included; products that
//     read stored operands in place (ct_gemm_bf16_stored) give those bits,
//     and its bf16 output is the fp32 output rounded;
// (b) the ops that take a bf16 input read it as the floats it widens to:
//     output and every gradient equal, bit for bit, those of the same graph
//     fed the widened values as an f32 tensor (linear, linear_fused with
//     and without the GELU, with its gradient written first by another op
//     or not, attention_qkv plain and causal);
// (c) in bf16 precision a layer norm's bf16 output before a linear, and a
//     bf16 qkv before the attention, give the bits of the f32 graph; so
//     does the attention kernel itself on a bf16 qkv, on multi-block
//     shapes with every option;
// (d) ops that do not take bf16 say so; the dtype's basics;
// (e) a ViT training step in bf16 precision keeps less (arena peak) with
//     bf16 activations than without, and its loss and gradients stay close.
#include "autograd/ops.h"
#include "autograd/ops_attention.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/attention_kernel.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "core/session.h"
#include "nn/vit.h"
#include "tests/harness.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static ct_rng rng = {.seed = 99, .stream = 5, .offset = 0};

static ct_tensor *leaf(int ndim, const int64_t *shape, float scale) {
  ct_tensor *t = ct_tensor_randn(&rng, 0.0f, scale, ndim, shape);
  return ct_requires_grad(t);
}

static bool same_bits(const void *a, const void *b, int64_t n) {
  return a && b && memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

static float *copy_floats(const float *src, int64_t n) {
  float *d = malloc((size_t)n * sizeof(float));
  if (d && src) memcpy(d, src, (size_t)n * sizeof(float));
  if (d && !src) memset(d, 0xff, (size_t)n * sizeof(float));
  return d;
}

// ---- (a) the storage's rounding is the packing's ---------------------------------

static void test_store_matches_packing(void) {
  enum { M = 37, K = 71, N = 29 };  // K odd: a pair with one row
  static float A[M * K], B[K * N], A2[M * K], A3[M * K], B2[K * N], C1[M * N],
      C2[M * N];
  static uint16_t s[M * K > K * N ? M * K : K * N];
  ct_rng r = ct_rng_make(3, 1);
  ct_rng_fill_normal(&r, A, M * K, 0.0f, 1.0f);
  ct_rng_fill_normal(&r, B, K * N, 0.0f, 1.0f);
  // Subnormals (the hardware paths read them as zero; 1.1754942e-38 is the
  // largest, which rounds up to 2^-126 in software), a tie, a value past
  // the bf16 range, signed zero; NaN and Inf in the last rows only.
  const float special[] = {1e-39f,      -3e-39f, 1.1754942e-38f, 1.00390625f,
                           1.01171875f, 3.4e38f, -0.0f,          1.17549e-38f};
  for (int i = 0; i < (int)(sizeof special / sizeof special[0]); i++) {
    A[i * 3] = special[i];
    B[i * 5 + 1] = special[i];
  }
  A[(M - 1) * K + 4] = NAN;
  A[(M - 2) * K + 9] = INFINITY;
  // Rows where nothing else hides a subnormal's contribution: only that
  // value in the row, times 2^100 in B.
  const float alone[] = {1.1754942e-38f, 1e-39f, 1.17549e-38f};
  for (int i = 0; i < 3; i++) {
    float *row = A + (10 + i) * K;
    memset(row, 0, K * sizeof(float));
    row[2] = alone[i];
  }
  for (int j = 0; j < N; j++) B[2 * N + j] = 0x1p100f * (1.0f + (float)j / N);
  const ct_gemm_bf16_path paths[] = {CT_GEMM_BF16_EMULATED,
                                     CT_GEMM_BF16_AVX512BF16, CT_GEMM_BF16_AMX};
  ct_gemm_set_precision(CT_GEMM_BF16);
  for (int p = 0; p < 3; p++) {
    ct_gemm_bf16_force_path(paths[p]);
    ct_bf16_store(A, M * K, s);
    ct_bf16_load(s, M * K, A2);
    ct_bf16_store(B, K * N, s);
    ct_bf16_load(s, K * N, B2);
    ct_gemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
    ct_gemm(false, false, M, N, K, 1.0f, A2, K, B2, N, 0.0f, C2, N);
    CHECK(memcmp(C1, C2, sizeof C1) == 0,
          "path %s: the product of the stored operands differs",
          ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()));
    // The product with one operand given as the stored bits (packed as
    // they are) has the bits of the product of the widened values, for
    // either operand, transposed or not, with a bias and row sums.
    static uint16_t a16[M * K], b16[K * N];
    static float bias[N], C3[M * N], sums1[M], sums2[M];
    for (int j = 0; j < N; j++) bias[j] = 0.25f * (float)j;
    ct_bf16_store(A, M * K, a16);
    ct_bf16_store(B, K * N, b16);
    for (int t = 0; t < 4; t++) {
      const bool ta = t & 1, tb = t & 2;
      // The same memory read as (M,K) or (K,M), (K,N) or (N,K).
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      for (int which = 0; which < 2; which++) {
        const ct_gemm_src as = {.f = which ? A2 : NULL, .h = a16, .ld = lda};
        const ct_gemm_src bs = {.f = which ? NULL : B2, .h = b16, .ld = ldb};
        for (int i = 0; i < M * N; i++) C1[i] = 0.0f;
        ct_gemm_bf16(ta, tb, M, N, K, 1.0f, A2, lda, B2, ldb, 0.0f, C1, N);
        for (int i = 0; i < M * N; i++) C3[i] = -1.0f;
        ct_gemm_bf16_stored(ta, tb, M, N, K, 1.0f, &as, &bs, 0.0f, NULL, C3,
                            NULL, N, NULL);
        CHECK(memcmp(C1, C3, sizeof C1) == 0,
              "path %s, trans %d%d, %s stored: differs from the widened "
              "product",
              ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()), ta, tb,
              which ? "B" : "A");
        for (int i = 0; i < M * N; i++) C3[i] = -1.0f;
        ct_gemm_bf16_stored(ta, tb, M, N, K, 1.0f, &as, &bs, 1.0f, bias, C3,
                            NULL, N, NULL);
        ct_gemm_bf16_bias(ta, tb, M, N, K, A2, lda, B2, ldb, bias, C2, N);
        CHECK(memcmp(C2, C3, sizeof C2) == 0,
              "path %s, trans %d%d, %s stored, bias: differs",
              ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()), ta, tb,
              which ? "B" : "A");
        if (which) {  // row sums of an fp32 A, beside a stored B
          memset(sums1, 0, sizeof sums1);
          memset(sums2, 0, sizeof sums2);
          for (int i = 0; i < M * N; i++) C2[i] = C3[i] = 1.0f;
          ct_gemm_sum_a(ta, tb, M, N, K, 1.0f, A2, lda, B2, ldb, 1.0f, C2, N,
                        sums1);
          ct_gemm_bf16_stored(ta, tb, M, N, K, 1.0f, &as, &bs, 1.0f, NULL, C3,
                              NULL, N, sums2);
          CHECK(memcmp(C2, C3, sizeof C2) == 0 &&
                    memcmp(sums1, sums2, sizeof sums1) == 0,
                "path %s, trans %d%d: row sums beside a stored B differ",
                ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()), ta, tb);
        }
      }
    }
    // Stored once more, the widened values do not move.
    ct_bf16_store(A2, M * K, s);
    ct_bf16_load(s, M * K, A3);
    CHECK(memcmp(A3, A2, sizeof A2) == 0,
          "path %s: rounding twice moves a value",
          ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()));
  }
  ct_gemm_bf16_force_path(CT_GEMM_BF16_AUTO);
  ct_gemm_set_precision(CT_GEMM_FP32);
  // Away from the hardware rules, the storage is ct_bf16_from_f32.
  ct_bf16_store(B, K * N, s);
  bool same = true;
  for (int i = 0; i < K * N; i++)
    if (fabsf(B[i]) >= 1.2e-38f || B[i] == 0.0f)
      same = same && s[i] == ct_bf16_from_f32(B[i]);
  CHECK(same, "stored bits differ from ct_bf16_from_f32 on normal values");
}

// A bf16 output (C16) is the fp32 output rounded by ct_bf16_store, on every
// path: K in one block (rounded from the kernel's strips) and K past the
// block depth (through scratch), with beta 0, a bias, or beta 1 reading the
// old bf16 values.
static void test_stored_output(void) {
  enum { M = 70, N = 45, KMAX = 1100 };
  static float A[M * KMAX], B[KMAX * N], bias[N], C[M * N];
  static uint16_t C16[M * N], want[M * N];
  ct_rng r = ct_rng_make(8, 2);
  ct_rng_fill_normal(&r, A, M * KMAX, 0.0f, 1.0f);
  ct_rng_fill_normal(&r, B, KMAX * N, 0.0f, 1.0f);
  ct_rng_fill_normal(&r, bias, N, 0.0f, 1.0f);
  const ct_gemm_bf16_path paths[] = {CT_GEMM_BF16_EMULATED,
                                     CT_GEMM_BF16_AVX512BF16, CT_GEMM_BF16_AMX};
  const int64_t Ks[] = {71, KMAX};
  for (int p = 0; p < 3; p++) {
    ct_gemm_bf16_force_path(paths[p]);
    const char *name = ct_gemm_bf16_path_name(ct_gemm_bf16_active_path());
    for (int k = 0; k < 2; k++) {
      const int64_t K = Ks[k];
      const ct_gemm_src as = {.f = A, .ld = K}, bs = {.f = B, .ld = N};
      for (int mode = 0; mode < 3; mode++) {  // beta 0, bias, beta 1
        const float beta = mode ? 1.0f : 0.0f;
        const float *b = mode == 1 ? bias : NULL;
        for (int i = 0; i < M * N; i++) {
          C16[i] = ct_bf16_from_f32(0.5f * (float)(i % 13));
          C[i] = ct_bf16_to_f32(C16[i]);
        }
        ct_gemm_bf16_stored(false, false, M, N, K, 1.0f, &as, &bs, beta, b, C,
                            NULL, N, NULL);
        ct_bf16_store(C, M * N, want);
        ct_gemm_bf16_stored(false, false, M, N, K, 1.0f, &as, &bs, beta, b,
                            NULL, C16, N, NULL);
        CHECK(memcmp(C16, want, sizeof want) == 0,
              "path %s, K %lld, %s: bf16 output is not the rounded fp32 one",
              name, (long long)K,
              mode == 0   ? "beta 0"
              : mode == 1 ? "bias"
                          : "beta 1");
      }
    }
  }
  ct_gemm_bf16_force_path(CT_GEMM_BF16_AUTO);
}

// ---- (b) bf16 inputs read as their widened floats ------------------------------

// The producer of the stored tensor: u = x w1^T + b1 (N, MID), kept as
// out_dtype.
// N rows: more than one chunk of the ops' row loops (about 1 MiB of floats).
enum { BATCH = 120, T = 50, N = BATCH * T, IN = 24, MID = 96, OUT = 40 };

typedef struct graph {
  ct_tensor *x, *w1, *b1;  // producer
  ct_tensor *w2, *b2, *r;  // consumer parameters and residual
  ct_tensor *w3;           // a second reader of u (recorded after)
  ct_tensor *s, *s3;       // loss weights
} graph;

typedef enum consumer {
  C_LINEAR,       // ct_linear(u, w2, b2)
  C_FUSED,        // ct_linear_fused(u, w2, b2, residual r)
  C_FUSED_GELU,   // ct_linear_fused(gelu(u), w2, b2, residual r)
  C_ATTN,         // ct_attention_qkv(u as (B,T,3,NH,Dh))
  C_ATTN_CAUSAL,  // the same, causal
} consumer;
static const char *const consumer_names[] = {
    "linear", "linear_fused", "linear_fused gelu", "attention_qkv",
    "attention_qkv causal"};

// NH=2, Dh=16: u (N, 96) = (BATCH, T, 3, 2, 16).
static ct_tensor *consume(const graph *g, consumer c, ct_tensor *u,
                          bool twice) {
  ct_tensor *y;
  if (c == C_ATTN || c == C_ATTN_CAUSAL) {
    ct_attention_opts o = ct_attention_defaults();
    o.causal = c == C_ATTN_CAUSAL;
    y = ct_reshape(
        ct_attention_qkv(ct_reshape(u, CT_SHAPE(BATCH, T, 3, 2, 16)), &o),
        CT_SHAPE(N, 32));
    y = ct_linear(y, g->w2, g->b2);
  } else if (c == C_LINEAR) {
    y = ct_linear(u, g->w2, g->b2);
  } else {
    ct_linear_fusion f = {.gelu_input = c == C_FUSED_GELU, .residual = g->r};
    y = ct_linear_fused(u, g->w2, g->b2, &f);
  }
  ct_tensor *loss = ct_sum(ct_mul(y, g->s));
  if (twice)
    loss = ct_add(loss, ct_sum(ct_mul(ct_linear(u, g->w3, NULL), g->s3)));
  return loss;
}

static void clear_grads(const graph *g) {
  ct_tensor *const all[] = {g->x, g->w1, g->b1, g->w2, g->b2, g->r, g->w3};
  for (int i = 0; i < 7; i++) all[i]->grad = NULL;
}

enum { N_GRADS = 7 };  // x, w1, b1, w2, b2, r, w3

static void grads_of(const graph *g, float **out) {
  ct_tensor *const all[] = {g->x, g->w1, g->b1, g->w2, g->b2, g->r, g->w3};
  for (int i = 0; i < N_GRADS; i++)
    out[i] = copy_floats(all[i]->grad, all[i]->numel);
}

static void check_consumer(consumer c, bool twice, bool bf16_precision) {
  ct_gemm_set_precision(bf16_precision ? CT_GEMM_BF16 : CT_GEMM_FP32);
  const int64_t w2_in = c >= C_ATTN ? 32 : MID;
  graph g = {.x = leaf(CT_SHAPE(N, IN), 1.0f),
             .w1 = leaf(CT_SHAPE(MID, IN), 0.3f),
             .b1 = leaf(CT_SHAPE(MID), 0.3f),
             .w2 = leaf(CT_SHAPE(OUT, w2_in), 0.2f),
             .b2 = leaf(CT_SHAPE(OUT), 0.2f),
             .r = leaf(CT_SHAPE(N, OUT), 1.0f),
             .w3 = leaf(CT_SHAPE(7, MID), 0.2f),
             .s = ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(N, OUT)),
             .s3 = ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(N, 7))};
  char what[96];
  snprintf(what, sizeof what, "%s%s, %s precision", consumer_names[c],
           twice ? " (gradient written first by another op)" : "",
           bf16_precision ? "bf16" : "fp32");

  // The graph under test: u stored in bf16.
  clear_grads(&g);
  ct_tensor *u16 = ct_linear_as(g.x, g.w1, g.b1, CT_BF16);
  CHECK(u16 && u16->dtype == CT_BF16, "%s: linear_as: %s", what,
        ct_last_error());
  if (!u16) return;
  uint16_t *u_bits = malloc((size_t)u16->numel * sizeof(uint16_t));
  memcpy(u_bits, ct_bf16(u16), (size_t)u16->numel * sizeof(uint16_t));
  ct_tensor *loss = consume(&g, c, u16, twice);
  CHECK(loss && ct_backward(loss) == CT_OK, "%s: %s", what, ct_last_error());
  if (!loss) return;
  const float got_loss = ct_f32(loss)[0];
  float *got[N_GRADS];
  grads_of(&g, got);

  // The stored bits are the f32 output's, rounded by ct_bf16_store.
  clear_grads(&g);
  ct_tensor *u32 = ct_linear(g.x, g.w1, g.b1);
  uint16_t *want_bits = malloc((size_t)u32->numel * sizeof(uint16_t));
  ct_bf16_store(ct_f32(u32), u32->numel, want_bits);
  CHECK(memcmp(u_bits, want_bits, (size_t)u32->numel * sizeof(uint16_t)) == 0,
        "%s: stored u differs from the rounded f32 output", what);

  // Reference A: the widened values as an f32 leaf into the same consumer.
  ct_tape_clear();
  clear_grads(&g);
  ct_tensor *uw = ct_tensor_empty(CT_F32, CT_SHAPE(N, MID));
  ct_bf16_load(u_bits, uw->numel, ct_f32(uw));
  ct_requires_grad(uw);
  ct_tensor *ref = consume(&g, c, uw, twice);
  CHECK(ref && ct_backward(ref) == CT_OK, "%s: ref: %s", what, ct_last_error());
  float *want[N_GRADS];
  grads_of(&g, want);
  float *du = copy_floats(uw->grad, uw->numel);
  // Reference B: the producer's backward from that gradient.
  clear_grads(&g);
  ct_tensor *v = ct_linear(g.x, g.w1, g.b1);
  CHECK(ct_backward_seeded(v, du) == CT_OK, "%s: seeded: %s", what,
        ct_last_error());
  free(want[0]);
  free(want[1]);
  free(want[2]);
  want[0] = copy_floats(g.x->grad, g.x->numel);
  want[1] = copy_floats(g.w1->grad, g.w1->numel);
  want[2] = copy_floats(g.b1->grad, g.b1->numel);

  CHECK(memcmp(&got_loss, ct_f32(ref), sizeof got_loss) == 0,
        "%s: loss %.9g, widened %.9g", what, (double)got_loss,
        (double)ct_f32(ref)[0]);
  static const char *const names[N_GRADS] = {"dx",  "dw1", "db1", "dw2",
                                             "db2", "dr",  "dw3"};
  ct_tensor *const all[] = {g.x, g.w1, g.b1, g.w2, g.b2, g.r, g.w3};
  for (int i = 0; i < N_GRADS; i++) {
    const bool used =
        (i != 5 || (c == C_FUSED || c == C_FUSED_GELU)) && (i != 6 || twice);
    if (used)
      CHECK(same_bits(got[i], want[i], all[i]->numel), "%s: %s differs", what,
            names[i]);
    free(got[i]);
    free(want[i]);
  }
  free(du);
  free(u_bits);
  free(want_bits);
  ct_arena_reset();
  ct_gemm_set_precision(CT_GEMM_FP32);
}

// ---- (c) same bits as f32 storage in bf16 precision -----------------------------

// loss = sum(linear(layernorm(x) stored as `store`) * s).
static void test_layernorm_before_linear(void) {
  ct_gemm_set_precision(CT_GEMM_BF16);
  ct_tensor *x = leaf(CT_SHAPE(N, MID), 2.0f), *w = leaf(CT_SHAPE(MID), 1.0f),
            *b = leaf(CT_SHAPE(MID), 1.0f),
            *w2 = leaf(CT_SHAPE(OUT, MID), 0.2f),
            *b2 = leaf(CT_SHAPE(OUT), 0.2f);
  ct_tensor *s = ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(N, OUT));
  ct_tensor *const all[] = {x, w, b, w2, b2};
  float *res[2][6];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 5; i++) all[i]->grad = NULL;
    ct_tensor *h = ct_layernorm_as(x, w, b, 1e-5f, k ? CT_BF16 : CT_F32);
    ct_tensor *y = ct_linear(h, w2, b2);
    ct_tensor *loss = ct_sum(ct_mul(y, s));
    CHECK(loss && ct_backward(loss) == CT_OK, "layernorm: %s", ct_last_error());
    if (k && h) {  // the stored output is the f32 one rounded
      ct_tensor *h32 = ct_layernorm(x, w, b, 1e-5f);
      uint16_t *bits = malloc((size_t)h32->numel * sizeof(uint16_t));
      ct_bf16_store(ct_f32(h32), h32->numel, bits);
      CHECK(h->dtype == CT_BF16 &&
                memcmp(bits, ct_bf16(h), (size_t)h->numel * 2) == 0,
            "layernorm_as: the bf16 output is not the rounded f32 output");
      free(bits);
      ct_tape_clear();
    }
    res[k][0] = copy_floats(y ? ct_f32(y) : NULL, N * OUT);
    for (int i = 0; i < 5; i++)
      res[k][i + 1] = copy_floats(all[i]->grad, all[i]->numel);
  }
  static const char *const names[6] = {"y", "dx", "dw", "db", "dw2", "db2"};
  const int64_t sizes[6] = {N * OUT, N * MID, MID, MID, OUT * MID, OUT};
  for (int i = 0; i < 6; i++) {
    CHECK(same_bits(res[0][i], res[1][i], sizes[i]),
          "layernorm (bf16 output) -> linear, bf16 precision: %s differs",
          names[i]);
    free(res[0][i]);
    free(res[1][i]);
  }
  ct_arena_reset();
  ct_gemm_set_precision(CT_GEMM_FP32);
}

// loss = sum(attention_qkv(linear_as(x, store)) * s).
static void test_qkv_storage(bool causal) {
  ct_gemm_set_precision(CT_GEMM_BF16);
  ct_tensor *x = leaf(CT_SHAPE(3, 50, IN), 1.0f),
            *w = leaf(CT_SHAPE(MID, IN), 0.4f), *b = leaf(CT_SHAPE(MID), 0.2f);
  ct_tensor *s = ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(3, 50, 2, 16));
  ct_tensor *const all[] = {x, w, b};
  float *res[2][4];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 3; i++) all[i]->grad = NULL;
    ct_tensor *qkv = ct_linear_as(x, w, b, k ? CT_BF16 : CT_F32);
    ct_attention_opts o = ct_attention_defaults();
    o.causal = causal;
    ct_tensor *y =
        ct_attention_qkv(ct_reshape(qkv, CT_SHAPE(3, 50, 3, 2, 16)), &o);
    ct_tensor *loss = ct_sum(ct_mul(y, s));
    CHECK(loss && ct_backward(loss) == CT_OK, "qkv: %s", ct_last_error());
    res[k][0] = copy_floats(y ? ct_f32(y) : NULL, y ? y->numel : 1);
    for (int i = 0; i < 3; i++)
      res[k][i + 1] = copy_floats(all[i]->grad, all[i]->numel);
  }
  static const char *const names[4] = {"out", "dx", "dw", "db"};
  const int64_t sizes[4] = {3 * 50 * 32, 3 * 50 * IN, MID * IN, MID};
  for (int i = 0; i < 4; i++) {
    CHECK(same_bits(res[0][i], res[1][i], sizes[i]),
          "qkv stored in bf16%s, bf16 precision: %s differs",
          causal ? " (causal)" : "", names[i]);
    free(res[0][i]);
    free(res[1][i]);
  }
  ct_arena_reset();
  ct_gemm_set_precision(CT_GEMM_FP32);
}

// The fused attention kernel reading a bf16 qkv (ct_attn_params.q16),
// called directly, against the same kernel fed the widened floats, bf16
// precision: out, lse and every gradient the same bits. Where the CPU has
// the kernel's own AVX512-BF16 block products, non-causal problems make
// their operands from the stored bits (core/attention_kernel.c, "Operands
// straight from bf16 storage"), so the shapes have several query and key
// blocks with odd last blocks (T = 141: 64 + 64 + 13 queries, 128 + 13
// keys), odd key lengths, a key mask, a bias with its gradient, a window
// mask, dropout, assigned and added gradients; the causal case keeps the
// widening path.
typedef struct kcase {
  int64_t B, T, NH, Dh;
  bool causal, lengths, key_mask, bias, window, dropout, assign;
} kcase;

static void check_kernel_case(const kcase *kc) {
  const int64_t B = kc->B, T = kc->T, NH = kc->NH, Dh = kc->Dh;
  const int64_t n_qkv = B * T * 3 * NH * Dh, n_out = B * T * NH * Dh;
  uint16_t *qkv16 = malloc((size_t)n_qkv * sizeof(uint16_t));
  float *qkv = malloc((size_t)n_qkv * sizeof(float));
  float *dout = malloc((size_t)n_out * sizeof(float));
  float *bias = malloc((size_t)(NH * T * T) * sizeof(float));
  float *wmask = malloc((size_t)(2 * T * T) * sizeof(float));
  int32_t *lengths = malloc((size_t)B * sizeof(int32_t));
  uint8_t *kmask = malloc((size_t)(B * T));
  ct_rng_fill_normal(&rng, qkv, n_qkv, 0.0f, 1.0f);
  ct_bf16_store(qkv, n_qkv, qkv16);
  ct_bf16_load(qkv16, n_qkv, qkv);  // the widened values
  ct_rng_fill_uniform(&rng, dout, n_out, -1.0f, 1.0f);
  ct_rng_fill_normal(&rng, bias, NH * T * T, 0.0f, 0.5f);
  for (int64_t i = 0; i < 2 * T * T; i++)
    wmask[i] = (i * 7919) % 5 == 0 ? -INFINITY : 0.0f;
  for (int64_t b = 0; b < B; b++) lengths[b] = (int32_t)(T - 2 * b - 1);
  for (int64_t i = 0; i < B * T; i++) kmask[i] = (uint8_t)(i % 11 == 3);

  ct_attn_params p = ct_attn_params_make(B, T, T, NH, Dh);
  p.q = p.k = p.v = ct_attn_layout_qkv(T, NH, Dh);
  p.causal = kc->causal;
  p.key_lengths = kc->lengths ? lengths : NULL;
  p.key_mask = kc->key_mask ? kmask : NULL;
  p.bias = kc->bias ? bias : NULL;
  p.window_mask = kc->window ? wmask : NULL;
  p.n_windows = kc->window ? 2 : 0;
  p.dropout_p = kc->dropout ? 0.2f : 0.0f;
  p.dropout_seed = 7;
  p.dropout_stream = 3;
  float *res[2][4];  // out, lse, dqkv, dbias
  const int64_t sizes[4] = {n_out, B * NH * T, n_qkv, NH * T * T};
  for (int k = 0; k < 2; k++) {  // 0: stored, 1: widened floats
    ct_attn_params pk = p;
    const float *q = NULL, *kk = NULL, *v = NULL;
    if (k == 0) {
      pk.q16 = qkv16;
      pk.k16 = qkv16 + NH * Dh;
      pk.v16 = qkv16 + 2 * NH * Dh;
    } else {
      q = qkv;
      kk = qkv + NH * Dh;
      v = qkv + 2 * NH * Dh;
    }
    float *out = malloc((size_t)n_out * sizeof(float));
    float *lse = malloc((size_t)(B * NH * T) * sizeof(float));
    float *dqkv = malloc((size_t)n_qkv * sizeof(float));
    float *dbias = calloc((size_t)(NH * T * T), sizeof(float));
    // Added gradients start from values; assigned ones from garbage.
    for (int64_t i = 0; i < n_qkv; i++)
      dqkv[i] = kc->assign ? NAN : 0.25f * (float)(i % 7);
    pk.assign_grads =
        kc->assign ? CT_ATTN_ASSIGN_DQ | CT_ATTN_ASSIGN_DK | CT_ATTN_ASSIGN_DV
                   : 0u;
    CHECK(ct_attention_forward(&pk, q, kk, v, out, lse) == CT_OK,
          "kernel forward: %s", ct_last_error());
    CHECK(ct_attention_backward(&pk, q, kk, v, out, lse, dout, dqkv,
                                dqkv + NH * Dh, dqkv + 2 * NH * Dh,
                                kc->bias ? dbias : NULL) == CT_OK,
          "kernel backward: %s", ct_last_error());
    res[k][0] = out;
    res[k][1] = lse;
    res[k][2] = dqkv;
    res[k][3] = dbias;
    ct_arena_reset();
  }
  static const char *const names[4] = {"out", "lse", "dqkv", "dbias"};
  for (int i = 0; i < 4; i++) {
    CHECK(same_bits(res[0][i], res[1][i], sizes[i]),
          "kernel from storage, T=%lld Dh=%lld causal %d lengths %d mask %d "
          "bias %d window %d dropout %d assign %d: %s differs from the "
          "widened floats'",
          (long long)T, (long long)Dh, kc->causal, kc->lengths, kc->key_mask,
          kc->bias, kc->window, kc->dropout, kc->assign, names[i]);
    free(res[0][i]);
    free(res[1][i]);
  }
  free(qkv16);
  free(qkv);
  free(dout);
  free(bias);
  free(wmask);
  free(lengths);
  free(kmask);
}

static void test_kernel_from_storage(void) {
  ct_gemm_set_precision(CT_GEMM_BF16);
  const kcase cases[] = {
      {4, 141, 2, 16, false, false, false, false, false, false, true},
      {4, 141, 2, 16, false, false, false, false, false, false, false},
      {3, 141, 3, 8, false, true, true, true, false, true, true},
      {4, 65, 2, 32, false, true, false, false, true, false, true},
      {2, 50, 4, 32, false, false, false, true, false, true, false},
      {4, 141, 2, 16, true, true, false, true, false, false, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_kernel_case(&cases[i]);
  ct_gemm_set_precision(CT_GEMM_FP32);
}

// ---- (d) refusals and basics -----------------------------------------------------

static bool error_names_bf16(void) {
  return strstr(ct_last_error(), "bf16") != NULL;
}

static void test_refusals(void) {
  CHECK(ct_dtype_size(CT_BF16) == 2, "bf16 element size %zu",
        ct_dtype_size(CT_BF16));
  CHECK(strcmp(ct_dtype_name(CT_BF16), "bf16") == 0, "name %s",
        ct_dtype_name(CT_BF16));
  ct_tensor *f = ct_tensor_full(CT_BF16, 1.5, CT_SHAPE(3));
  CHECK(f && ct_bf16(f)[2] == 0x3fc0, "full(1.5) bits %#x",
        f ? ct_bf16(f)[2] : 0);
  ct_tensor *a = ct_tensor_arange(CT_BF16, 1.0, 1.0, 4);
  CHECK(a && ct_bf16_to_f32(ct_bf16(a)[3]) == 4.0f, "arange");

  ct_tensor *x = leaf(CT_SHAPE(4, 8), 1.0f), *w = leaf(CT_SHAPE(6, 8), 1.0f);
  ct_tensor *h = ct_linear_as(x, w, NULL, CT_BF16);
  CHECK(h && ct_relu(h) == NULL && error_names_bf16(),
        "relu of bf16 storage: %s", ct_last_error());
  CHECK(ct_gelu(h, CT_GELU_ERF) == NULL && error_names_bf16(),
        "gelu of bf16 storage: %s", ct_last_error());
  CHECK(ct_layernorm(h, NULL, NULL, 1e-5f) == NULL && error_names_bf16(),
        "layernorm of bf16 storage: %s", ct_last_error());
  CHECK(ct_add(h, h) == NULL && error_names_bf16(), "add: %s", ct_last_error());
  CHECK(ct_requires_grad(ct_tensor_zeros(CT_BF16, CT_SHAPE(2))) == NULL,
        "requires_grad accepted a bf16 tensor");
  CHECK(ct_linear_as(x, w, NULL, CT_I32) == NULL, "linear_as to i32");
  CHECK(ct_layernorm_as(x, NULL, NULL, 1e-5f, CT_I32) == NULL,
        "layernorm_as to i32");
  ct_tensor *q = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 3, 1, 4));
  ct_attention_opts o = ct_attention_defaults();
  o.key_mask = ct_tensor_zeros(CT_BF16, CT_SHAPE(2, 3));
  CHECK(ct_attention(q, q, q, &o) == NULL && error_names_bf16(),
        "key_mask in bf16: %s", ct_last_error());
  ct_arena_reset();
}

// ---- (e) a ViT step ----------------------------------------------------------------

typedef struct vit_step {
  double loss;
  size_t peak;
  float *grad;
  size_t n_grad;
} vit_step;

// One forward and backward of a small ViT in its own session (so that the
// arena's high-water mark is this step's), bf16 precision.
static vit_step vit_run(bool bf16_activations) {
  vit_step out = {0};
  ct_session *s = ct_session_new();
  ct_session *was = ct_session_bind(s);
  ct_gemm_set_precision(CT_GEMM_BF16);
  ct_gemm_set_bf16_activations(bf16_activations);
  CHECK(ct_nn_activation_dtype() == (bf16_activations ? CT_BF16 : CT_F32),
        "activation dtype");
  ct_nn_vit_config c = {.image_h = 16,
                        .image_w = 16,
                        .in_channels = 3,
                        .patch = 2,
                        .dim = 64,
                        .depth = 3,
                        .heads = 4,
                        .mlp_dim = 256,
                        .num_classes = 5};
  ct_params p;
  ct_params_init(&p);
  ct_rng init = ct_rng_make(1, 0), data = ct_rng_make(2, 0);
  ct_nn_vit m;
  CHECK(ct_nn_vit_init(&m, &p, "", &c, &init) == CT_OK, "vit init: %s",
        ct_last_error());
  enum { B = 32 };
  static float images[B * 3 * 16 * 16];
  static int32_t labels[B];
  ct_rng_fill_normal(&data, images, B * 3 * 16 * 16, 0.0f, 1.0f);
  for (int i = 0; i < B; i++) labels[i] = i % 5;
  ct_nn_ctx ctx = ct_nn_train_ctx(1, 0);
  ct_tensor *x = ct_tensor_from(CT_F32, images, CT_SHAPE(B, 3, 16, 16));
  ct_tensor *y = ct_tensor_from(CT_I32, labels, CT_SHAPE(B));
  ct_ce_opts ce = ct_ce_defaults();
  ct_params_zero_grad(&p);
  ct_tensor *loss =
      ct_cross_entropy(ct_nn_vit_forward(&m, &ctx, x, NULL, NULL), y, &ce);
  CHECK(loss && ct_backward(loss) == CT_OK, "vit step: %s", ct_last_error());
  out.loss = loss ? ct_f32(loss)[0] : NAN;
  out.peak = ct_arena_peak_bytes();
  out.n_grad = p.count;
  out.grad = copy_floats(p.grad, (int64_t)p.count);
  ct_nn_vit_free(&m);
  ct_params_free(&p);
  ct_arena_release();
  ct_session_bind(was);
  ct_session_free(s);
  return out;
}

static void test_vit_step(void) {
  vit_step off = vit_run(false), on = vit_run(true);
  printf(
      "vit step, bf16 precision: arena peak %.2f MB with bf16 "
      "activations, %.2f MB without; loss %.7f / %.7f\n",
      on.peak / 1e6, off.peak / 1e6, on.loss, off.loss);
  // Norm outputs, qkv and fc1's output in half the bytes: the forward
  // pass keeps about a third less.
  CHECK(on.peak < 0.8 * off.peak, "peak %zu with bf16 activations, %zu without",
        on.peak, off.peak);
  CHECK(fabs(on.loss - off.loss) < 1e-2 * fabs(off.loss), "loss %.7f vs %.7f",
        on.loss, off.loss);
  double dot = 0, n_on = 0, n_off = 0;
  for (size_t i = 0; i < on.n_grad; i++) {
    dot += (double)on.grad[i] * off.grad[i];
    n_on += (double)on.grad[i] * on.grad[i];
    n_off += (double)off.grad[i] * off.grad[i];
  }
  const double cosine = dot / sqrt(n_on * n_off);
  printf("gradient cosine %.6f\n", cosine);
  CHECK(cosine > 0.99, "gradients with and without bf16 activations: cosine %f",
        cosine);
  free(on.grad);
  free(off.grad);
}

int main(void) {
  test_store_matches_packing();
  test_stored_output();
  for (int c = C_LINEAR; c <= C_ATTN_CAUSAL; c++)
    for (int twice = 0; twice < 2; twice++) {
      check_consumer((consumer)c, twice, false);
      check_consumer((consumer)c, twice, true);
    }
  test_layernorm_before_linear();
  test_qkv_storage(false);
  test_qkv_storage(true);
  test_kernel_from_storage();
  test_refusals();
  test_vit_step();
  return test_summary("bf16_storage");
}
