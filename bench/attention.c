// bench_attention: the fused attention op against the same attention
// composed from autograd ops (ct_matmul with trans_b, ct_scale, a causal
// additive mask through ct_add, ct_softmax, ct_matmul), forward and backward
// through the tape, in the same run.
//
//   bench_attention [--threads N] [--quick] [--models]
//
// One line per config: shape=generic (B=64, NH=4, Dh=32, T in
// {50,128,256,512}, causal 0/1), then the self-attention of bench_step's
// image models, without a mask: shape=vit_fmnist (B=128, T=50: 49 patches
// of a 28x28 image at patch 4 and the class token, NH=4, Dh=32),
// shape=vit_cifar (B=64, T=65: 64 patches of 32x32 and the class token,
// NH=3, Dh=64) and shape=deit_cifar (T=66: and the distillation token):
//   attention shape=.. B=.. NH=.. Dh=.. T=.. causal=.. threads=..
//     fused_fwd_ms=.. fused_fwdbwd_ms=.. composed_fwdbwd_ms=.. speedup=..
//     flops=.. fused_gflops=.. fused_extra_mb=.. composed_extra_mb=..
//     mem_ratio=.. fused_ws_mb=.. composed_ws_mb=.. ws_ratio=..
// speedup = composed / fused forward+backward time (medians of repeats;
// fused_fwd_ms is the forward alone, recording on, as in training). flops
// is the fused forward+backward's products as core/flops.h counts them,
// fused_gflops their rate over fused_fwdbwd_ms. --models runs only the
// image models' shapes; --quick skips T=512 and takes fewer samples.
//
// The composed version gets q, k, v already in (B,NH,T,Dh): the permutes a
// model would need from (B,T,NH,Dh) are left out, in its favour.
//
// Memory: the arena's high-water mark never goes down (ct_arena_reset keeps
// the peak), so before each measured pass we pad the arena with an untouched
// allocation up to the old peak; then peak - used_before is exactly the
// high-water extra memory of that forward + backward. "extra" is everything
// allocated from the forward call to the end of backward (output, saved
// state, temporaries, the gradients of output and inputs); "ws" (workspace)
// is extra minus the tensors both versions must produce: out, dout, dq, dk,
// dv (5 * B*T*NH*Dh floats).
#include "autograd/ops_attention.h"
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/flops.h"
#include "core/rng.h"
#include "core/threads.h"
#include "bench/bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Host copies of the inputs; each pass makes fresh arena tensors from them.
typedef struct problem {
  const char *shape;
  int64_t B, NH, DH, T;
  bool causal;
  float *q, *k, *v, *dout;      // (B,T,NH,Dh) for fused; permuted copies below
  float *qh, *kh, *vh, *douth;  // (B,NH,T,Dh) for composed
} problem;

static void to_bhtd(const problem *p, const float *src, float *dst) {
  const int64_t B = p->B, T = p->T, NH = p->NH, DH = p->DH;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < NH; h++)
        memcpy(dst + ((b * NH + h) * T + t) * DH,
               src + ((b * T + t) * NH + h) * DH, DH * sizeof(float));
}

static problem problem_make(const char *shape, int64_t B, int64_t NH,
                            int64_t DH, int64_t T, bool causal) {
  problem p = {
      .shape = shape, .B = B, .NH = NH, .DH = DH, .T = T, .causal = causal};
  size_t n = (size_t)(B * T * NH * DH);
  float **bufs[] = {&p.q, &p.k, &p.v, &p.dout, &p.qh, &p.kh, &p.vh, &p.douth};
  for (int i = 0; i < 8; i++) *bufs[i] = malloc(n * sizeof(float));
  ct_rng r = ct_rng_make(1, (uint64_t)T);
  ct_rng_fill_normal(&r, p.q, (int64_t)n, 0.0f, 1.0f);
  ct_rng_fill_normal(&r, p.k, (int64_t)n, 0.0f, 1.0f);
  ct_rng_fill_normal(&r, p.v, (int64_t)n, 0.0f, 1.0f);
  ct_rng_fill_uniform(&r, p.dout, (int64_t)n, -1.0f, 1.0f);
  to_bhtd(&p, p.q, p.qh);
  to_bhtd(&p, p.k, p.kh);
  to_bhtd(&p, p.v, p.vh);
  to_bhtd(&p, p.dout, p.douth);
  return p;
}

static void problem_free(problem *p) {
  float *bufs[] = {p->q, p->k, p->v, p->dout, p->qh, p->kh, p->vh, p->douth};
  for (int i = 0; i < 8; i++) free(bufs[i]);
}

static ct_tensor *leaf(const problem *p, const float *src, int64_t d1,
                       int64_t d2) {
  return ct_requires_grad(
      ct_tensor_from(CT_F32, src, CT_SHAPE(p->B, d1, d2, p->DH)));
}

typedef enum mode { FUSED_FWD, FUSED_FWDBWD, COMPOSED_FWDBWD } mode;

typedef struct pass_inputs {
  ct_tensor *q, *k, *v, *mask;
  const float *dout;
} pass_inputs;

static pass_inputs pass_setup(const problem *p, mode m) {
  pass_inputs in = {0};
  const int64_t T = p->T, NH = p->NH;
  if (m == COMPOSED_FWDBWD) {
    in.q = leaf(p, p->qh, NH, T);
    in.k = leaf(p, p->kh, NH, T);
    in.v = leaf(p, p->vh, NH, T);
    in.dout = p->douth;
    if (p->causal) {
      in.mask = ct_tensor_zeros(CT_F32, CT_SHAPE(T, T));
      for (int64_t i = 0; i < T; i++)
        for (int64_t j = i + 1; j < T; j++)
          ct_f32(in.mask)[i * T + j] = -INFINITY;
    }
  } else {
    in.q = leaf(p, p->q, T, NH);
    in.k = leaf(p, p->k, T, NH);
    in.v = leaf(p, p->v, T, NH);
    in.dout = p->dout;
  }
  return in;
}

// The measured part: forward (and backward). Returns false on an error.
static bool pass_run(const problem *p, mode m, const pass_inputs *in) {
  ct_tensor *y;
  if (m == COMPOSED_FWDBWD) {
    ct_tensor *s = ct_matmul(in->q, in->k, false, true);  // (B,NH,T,T)
    s = ct_scale(s, 1.0f / sqrtf((float)p->DH));
    if (in->mask) s = ct_add(s, in->mask);
    y = ct_matmul(ct_softmax(s), in->v, false, false);  // (B,NH,T,Dh)
  } else {
    ct_attention_opts o = ct_attention_defaults();
    o.causal = p->causal;
    y = ct_attention(in->q, in->k, in->v, &o);
  }
  if (!y) return false;
  if (m == FUSED_FWD) return true;
  return ct_backward_seeded(y, in->dout) == CT_OK;
}

static double time_pass(const problem *p, mode m) {
  ct_arena_reset();
  pass_inputs in = pass_setup(p, m);
  double t0 = bench_now_s();
  bool ok = pass_run(p, m, &in);
  double t = bench_now_s() - t0;
  if (!ok) {
    fprintf(stderr, "bench_attention: %s\n", ct_last_error());
    exit(1);
  }
  return t;
}

// High-water bytes of one pass (see the top of the file for the padding).
static double extra_mb(const problem *p, mode m) {
  ct_arena_reset();
  pass_inputs in = pass_setup(p, m);
  size_t used = ct_arena_used_bytes(), peak = ct_arena_peak_bytes();
  if (peak > used && !ct_arena_alloc(peak - used)) exit(1);
  size_t base = ct_arena_used_bytes();
  if (!pass_run(p, m, &in)) {
    fprintf(stderr, "bench_attention: %s\n", ct_last_error());
    exit(1);
  }
  size_t hw = ct_arena_peak_bytes() - base;
  ct_arena_reset();
  return (double)hw / 1048576.0;
}

// Times the three modes in `reps` interleaved samples, measures memory and
// prints the config's line; frees p.
static void measure(problem *p, int reps) {
  double tf[16], tfb[16], tc[16];
  // Warm-up (arena growth, thread start), then interleaved samples so
  // that drifting clocks hit all three alike.
  time_pass(p, FUSED_FWDBWD);
  time_pass(p, COMPOSED_FWDBWD);
  ct_flops_reset();
  time_pass(p, FUSED_FWDBWD);
  const ct_flops f = ct_flops_get();
  const double flops = (double)f.fp32 + (double)f.bf16;
  for (int r = 0; r < reps; r++) {
    tf[r] = time_pass(p, FUSED_FWD);
    tfb[r] = time_pass(p, FUSED_FWDBWD);
    tc[r] = time_pass(p, COMPOSED_FWDBWD);
  }
  double mf = bench_median(tf, reps) * 1e3, mfb = bench_median(tfb, reps) * 1e3,
         mc = bench_median(tc, reps) * 1e3;
  double ef = extra_mb(p, FUSED_FWDBWD);
  double ec = extra_mb(p, COMPOSED_FWDBWD);
  double must = 5.0 * (double)(p->B * p->T * p->NH * p->DH) * 4.0 / 1048576.0;
  printf(
      "attention shape=%s B=%lld NH=%lld Dh=%lld T=%lld causal=%d "
      "threads=%d fused_fwd_ms=%.2f fused_fwdbwd_ms=%.2f "
      "composed_fwdbwd_ms=%.2f speedup=%.2f flops=%.4g fused_gflops=%.1f "
      "fused_extra_mb=%.1f composed_extra_mb=%.1f mem_ratio=%.1f "
      "fused_ws_mb=%.2f composed_ws_mb=%.1f ws_ratio=%.0f\n",
      p->shape, (long long)p->B, (long long)p->NH, (long long)p->DH,
      (long long)p->T, p->causal, ct_get_threads(), mf, mfb, mc, mc / mfb,
      flops, flops / (mfb * 1e6), ef, ec, ec / ef, ef - must, ec - must,
      (ec - must) / (ef - must));
  fflush(stdout);
  problem_free(p);
}

int main(int argc, char **argv) {
  int threads = 2;
  bool quick = false, models_only = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!strcmp(argv[i], "--models")) {
      models_only = true;
    } else {
      fprintf(stderr,
              "usage: bench_attention [--threads N] [--quick] [--models]\n");
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  ct_set_threads(threads);

  const int64_t Ts[] = {50, 128, 256, 512};
  for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
    for (int causal = 0; causal < 2; causal++) {
      if (models_only || (quick && Ts[ti] > 256)) continue;
      problem p = problem_make("generic", 64, 4, 32, Ts[ti], causal);
      measure(&p, quick ? 3 : (Ts[ti] >= 512 ? 5 : 9));
    }
  // The image models of bench_step (bench/step.c's table).
  problem models[] = {problem_make("vit_fmnist", 128, 4, 32, 50, false),
                      problem_make("vit_cifar", 64, 3, 64, 65, false),
                      problem_make("deit_cifar", 64, 3, 64, 66, false)};
  for (size_t i = 0; i < sizeof models / sizeof *models; i++)
    measure(&models[i], quick ? 3 : 9);
  ct_arena_release();
  return 0;
}
