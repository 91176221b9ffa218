// The work counter (core/flops.h) counts known products exactly: gemm calls
// in both precisions, batched and shared-C batches, and the fused
// attention's block products forward and backward (one block, several
// blocks, causal), the same at 1 and 2 threads. The profiler
// (core/profile.h) changes no bit of a ViT step's loss and gradients, its
// kinds add up to the wall time it covered, its op table is sorted and
// within it, and one busy thread of two shows as idle time.
#include "autograd/ops.h"
#include "autograd/ops_attention.h"
#include "autograd/tape.h"
#include "bench/bench_util.h"
#include "core/arena.h"
#include "core/flops.h"
#include "core/gemm.h"
#include "core/profile.h"
#include "core/threads.h"
#include "nn/vit.h"
#include "tests/harness.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void check_counts(const char *what, uint64_t fp32, uint64_t bf16) {
  ct_flops f = ct_flops_get();
  printf("%s: fp32 %" PRIu64 " (want %" PRIu64 "), bf16 %" PRIu64
         " (want %" PRIu64 ")\n",
         what, f.fp32, fp32, f.bf16, bf16);
  CHECK(f.fp32 == fp32 && f.bf16 == bf16, "%s: counts differ", what);
}

static void check_gemm(void) {
  enum { M = 37, N = 19, K = 23, BATCH = 3 };
  float *a = calloc(BATCH * M * K, sizeof(float));
  float *b = calloc(BATCH * K * N, sizeof(float));
  float *c = calloc(BATCH * M * N, sizeof(float));
  float bias[N] = {0};
  const uint64_t one = 2ull * M * N * K;

  ct_flops_reset();
  ct_gemm(false, false, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  check_counts("gemm", one, 0);
  ct_gemm(true, true, M, N, K, 1.0f, a, M, b, K, 1.0f, c, N);
  ct_gemm_bias(false, false, M, N, K, a, K, b, N, bias, c, N);
  check_counts("gemm, trans, bias", 3 * one, 0);
  ct_flops_reset();
  ct_gemm_batched(false, false, M, N, K, 1.0f, a, K, M * K, b, N, K * N, 0.0f,
                  c, N, M * N, BATCH);
  check_counts("batched", BATCH * one, 0);
  ct_flops_reset();
  ct_gemm_batched(false, false, M, N, K, 1.0f, a, K, M * K, b, N, K * N, 0.0f,
                  c, N, 0, BATCH);  // one shared C
  check_counts("batched into one C", BATCH * one, 0);
  ct_flops_reset();
  ct_gemm(false, false, M, N, 0, 1.0f, a, 1, b, N, 0.0f, c, N);
  ct_gemm(false, false, 0, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  check_counts("empty products", 0, 0);

  ct_gemm_set_precision(CT_GEMM_BF16);
  ct_gemm(false, false, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  ct_gemm_set_precision(CT_GEMM_FP32);
  ct_gemm_bf16(false, false, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  ct_gemm(false, false, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  check_counts("bf16 session and entry point", one, 2 * one);
  free(a);
  free(b);
  free(c);
}

// One ct_attention forward and backward (q, k, v all wanting gradients) of
// B, T, NH, Dh: the forward's S = Q K^T and O = P V, then backward's S
// again, dP = dO V^T, dV, dQ and dK, each 2 * Dh per visible (query, key)
// pair of the blocks the kernel issues. `pairs` is the number of those
// pairs per (b, h).
static void check_attention(const char *what, int64_t B, int64_t T, int64_t NH,
                            int64_t Dh, bool causal, uint64_t pairs) {
  const int64_t n = B * T * NH * Dh;
  ct_rng r = ct_rng_make(3, 0);
  ct_tensor *qkv[3];
  for (int i = 0; i < 3; i++) {
    qkv[i] = ct_requires_grad(ct_tensor_empty(CT_F32, CT_SHAPE(B, T, NH, Dh)));
    ct_rng_fill_normal(&r, ct_f32(qkv[i]), n, 0.0f, 1.0f);
  }
  ct_attention_opts o = ct_attention_defaults();
  o.causal = causal;
  const uint64_t per_product = 2ull * (uint64_t)(B * NH * Dh) * pairs;
  char name[128];
  for (int threads = 1; threads <= 2; threads++) {
    ct_set_threads(threads);
    ct_flops_reset();
    ct_tensor *y = ct_attention(qkv[0], qkv[1], qkv[2], &o);
    CHECK(y != NULL, "%s: %s", what, ct_last_error());
    if (!y) return;
    snprintf(name, sizeof name, "%s forward, %d threads", what, threads);
    check_counts(name, 2 * per_product, 0);
    ct_flops_reset();
    CHECK(ct_backward(ct_sum(y)) == CT_OK, "%s: %s", what, ct_last_error());
    snprintf(name, sizeof name, "%s backward, %d threads", what, threads);
    check_counts(name, 5 * per_product, 0);
  }
  ct_arena_reset();
}

// ---- the profiler changes no bits ----------------------------------------------

enum { VB = 8, VK = 10 };

static float vit_step(const ct_nn_vit *m, ct_params *p, const float *images,
                      const int32_t *labels) {
  const ct_nn_vit_config *c = &m->cfg;
  ct_params_zero_grad(p);
  ct_nn_ctx ctx = ct_nn_train_ctx(7, 3);
  ct_tensor *x = ct_tensor_from(
      CT_F32, images, CT_SHAPE(VB, c->in_channels, c->image_h, c->image_w));
  ct_tensor *y = ct_tensor_from(CT_I32, labels, CT_SHAPE(VB));
  ct_ce_opts ce = ct_ce_defaults();
  ce.label_smoothing = 0.1f;
  ct_tensor *loss =
      ct_cross_entropy(ct_nn_vit_forward(m, &ctx, x, NULL, NULL), y, &ce);
  CHECK(loss && ct_backward(loss) == CT_OK, "step: %s", ct_last_error());
  float v = loss ? ct_f32(loss)[0] : 0.0f;
  ct_arena_reset();
  return v;
}

static void check_profiler(void) {
  ct_nn_vit_config c = {.image_h = 16,
                        .image_w = 16,
                        .in_channels = 3,
                        .patch = 4,
                        .dim = 32,
                        .depth = 2,
                        .heads = 2,
                        .mlp_dim = 64,
                        .num_classes = VK,
                        .dropout = 0.1f,
                        .attn_dropout = 0.1f};
  ct_params p;
  ct_params_init(&p);
  ct_nn_vit m;
  ct_rng init = ct_rng_make(5, 0), data = ct_rng_make(6, 0);
  CHECK(ct_nn_vit_init(&m, &p, "", &c, &init) == CT_OK, "init: %s",
        ct_last_error());
  const int64_t pixels = VB * 3 * 16 * 16;
  float *images = malloc((size_t)pixels * sizeof *images);
  int32_t labels[VB];
  ct_rng_fill_normal(&data, images, pixels, 0.0f, 1.0f);
  for (int b = 0; b < VB; b++)
    labels[b] = (int32_t)ct_rng_next_below(&data, VK);

  CHECK(!ct_prof_enabled(), "the profiler starts off");
  ct_prof_reset();
  float loss_off = vit_step(&m, &p, images, labels);
  for (int k = 0; k < CT_PROF_KINDS; k++)
    CHECK(ct_prof_seconds(k) == 0.0, "%s: %g s with the profiler off",
          ct_prof_kind_name(k), ct_prof_seconds(k));
  float *grad_off = malloc(p.count * sizeof *grad_off);
  memcpy(grad_off, p.grad, p.count * sizeof *grad_off);

  // Turning the profiler on reads the team's CPU clocks in a parallel
  // region (milliseconds where a worker sleeps): the stretch starts at the
  // mark after it.
  ct_prof_set_enabled(true);
  const double t0 = bench_now_s();
  ct_prof_mark();
  float loss_on = vit_step(&m, &p, images, labels);
  ct_prof_attribute(CT_PROF_OTHER);
  const double wall = bench_now_s() - t0;
  ct_prof_set_enabled(false);
  size_t differ = 0;
  for (size_t i = 0; i < p.count; i++)
    differ += memcmp(&grad_off[i], &p.grad[i], sizeof(float)) != 0;
  printf("profiler: loss %.9g off, %.9g on; %zu of %zu grads differ\n",
         loss_off, loss_on, differ, p.count);
  CHECK(memcmp(&loss_off, &loss_on, sizeof loss_on) == 0, "loss differs");
  CHECK(differ == 0, "%zu gradient values differ", differ);

  double sum = 0.0;
  for (int k = 0; k < CT_PROF_KINDS; k++) {
    printf("  %s %.3f ms\n", ct_prof_kind_name(k), 1e3 * ct_prof_seconds(k));
    CHECK(ct_prof_seconds(k) >= 0.0, "%s: negative time", ct_prof_kind_name(k));
    sum += ct_prof_seconds(k);
  }
  CHECK(ct_prof_seconds(CT_PROF_GEMM) > 0.0 &&
            ct_prof_seconds(CT_PROF_ATTENTION) > 0.0 &&
            ct_prof_seconds(CT_PROF_NORM) > 0.0 &&
            ct_prof_seconds(CT_PROF_LOSS) > 0.0,
        "a ViT step has products, attention, norms and a loss");
  // The kinds cover the stretch from the mark to the last attribution,
  // which the wall clock here brackets.
  CHECK(sum <= wall && sum >= 0.5 * wall,
        "the kinds add up to %.6f s of a %.6f s stretch", sum, wall);
  // The linears' weights are stored transposed: their products pack them.
  CHECK(ct_prof_seconds(CT_PROF_PACKING) > 0.0, "no packing time");

  // The op table: every recorded op by name, forward and backward apart,
  // largest first, each row's idle part within its time, and all rows
  // within the stretch.
  ct_prof_op rows[64];
  const int n = ct_prof_ops(rows, 64);
  double op_sum = 0.0;
  bool linear_fwd = false, linear_bwd = false;
  for (int i = 0; i < n && i < 64; i++) {
    const ct_prof_op *r = &rows[i];
    printf("  op %s.%s %.3f ms (idle %.3f), %lld calls\n", r->op,
           r->backward ? "bwd" : "fwd", 1e3 * r->seconds, 1e3 * r->idle,
           (long long)r->calls);
    CHECK(r->calls > 0 && r->idle >= 0.0 && r->idle <= r->seconds + 1e-9,
          "op %s: %lld calls, %g s of which %g s idle", r->op,
          (long long)r->calls, r->seconds, r->idle);
    CHECK(i == 0 || r->seconds <= rows[i - 1].seconds, "op rows not sorted");
    linear_fwd = linear_fwd || (!strcmp(r->op, "linear") && !r->backward);
    linear_bwd = linear_bwd || (!strcmp(r->op, "linear") && r->backward);
    op_sum += r->seconds;
  }
  CHECK(linear_fwd && linear_bwd, "no linear rows, forward and backward");
  CHECK(op_sum <= wall, "the op rows add up to %.6f s of %.6f s", op_sum, wall);
  ct_prof_reset();
  CHECK(ct_prof_ops(rows, 64) == 0, "a reset keeps op rows");
  free(grad_off);
  free(images);
  ct_nn_vit_free(&m);
  ct_params_free(&p);
}

// Idle threads: one thread busy for a stretch while the rest of a team of
// two waits gives about half of the stretch to idle (at least a quarter:
// more where the machine deschedules the busy thread). Not with workers
// that spin (OMP_WAIT_POLICY=active), whose waiting is CPU time.
static void check_idle(void) {
  const char *policy = getenv("OMP_WAIT_POLICY");
  if (policy && (!strcmp(policy, "active") || !strcmp(policy, "ACTIVE"))) {
    printf("idle: skipped (OMP_WAIT_POLICY=active)\n");
    return;
  }
  ct_set_threads(2);
#pragma omp parallel num_threads(2)
  { (void)0; }  // the team exists
  ct_prof_reset();
  const double t0 = bench_now_s();  // brackets the profiled stretch
  ct_prof_set_enabled(true);
  volatile double x = 1.0;
  while (bench_now_s() - t0 < 0.05) x = x * 1.0000001 + 1e-9;
  ct_prof_attribute(CT_PROF_OTHER);
  const double wall = bench_now_s() - t0;
  ct_prof_set_enabled(false);
  const double idle = ct_prof_seconds(CT_PROF_IDLE);
  const double other = ct_prof_seconds(CT_PROF_OTHER);
  printf(
      "idle: one of two threads busy for %.4f s: other %.4f s, idle "
      "%.4f s\n",
      wall, other, idle);
  CHECK(idle >= 0.25 * wall && other + idle <= wall + 1e-6,
        "one busy thread of two for %.3f s: idle %.3f s, other %.3f s", wall,
        idle, other);
}

int main(void) {
  check_idle();
  check_gemm();
  // One block (T <= 64 queries, 128 keys): every (query, key) pair.
  check_attention("attention T=50", 3, 50, 2, 16, false, 50 * 50);
  // Several blocks of queries and keys: still every pair once.
  check_attention("attention T=150", 2, 150, 2, 8, false, 150 * 150);
  // Causal: query block i0 of mq rows sees keys [0, i0 + mq): blocks at 0,
  // 64 and 128 (of 64, 64 and 22 rows).
  check_attention("causal attention T=150", 2, 150, 2, 8, true,
                  64 * 64 + 64 * 128 + 22 * 150);
  check_profiler();
  ct_arena_release();
  return test_summary("flops");
}
