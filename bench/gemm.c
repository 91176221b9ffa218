// bench_gemm: ctrain's sgemm on squares and on the model's shapes, and, when
// built against OpenBLAS, OpenBLAS on the same shapes in the same run.
//
//   bench_gemm [--threads N] [--quick] [--bf16 all|none|PATH]
//
// One line per shape:
//   gemm M=.. N=.. K=.. ta=.. tb=.. threads=.. gflops=..
//        [blas_gflops=.. ratio=..] [batch=..]   (ratio = ctrain / blas)
// and a thread-scaling line for the 1024 square:
//   scaling M=1024 t1_gflops=.. t2_gflops=.. speedup=..
// After each gemm line, one line per bf16 path (core/gemm_bf16.h: all the
// CPU has, or the one --bf16 names):
//   gemm_bf16 M=.. N=.. K=.. ta=.. tb=.. threads=.. path=.. gflops=..
//        ratio=.. [batch=..]   (ratio = bf16 / the fp32 line above)
//
// Each figure is the median of several timed samples; ctrain and BLAS
// samples alternate so that drifting clocks and noisy neighbours hit both.
// Between the two the program sleeps long enough for the idle side's worker
// threads to stop spinning (OpenBLAS's spin for ~2^28 cycles, libgomp's for
// GOMP_SPINCOUNT); otherwise they steal the cores the other side is timed on.
// Batched shapes call cblas_sgemm once per matrix (OpenBLAS has no strided
// batch call), as a framework without a batched gemm would.
#include "core/gemm.h"
#include "core/gemm_bf16.h"
#include "core/threads.h"
#include "bench/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif

typedef struct shape {
  int64_t M, N, K;
  bool ta, tb;
  int64_t batch;
} shape;

static void fill(float *x, size_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((s >> 8) * (1.0 / 16777216.0)) - 0.5f;
  }
}

typedef struct problem {
  shape s;
  float *A, *B, *C;
  int64_t lda, ldb, ldc, sa, sb, sc;
} problem;

static void run_ctrain(const problem *p) {
  const shape *s = &p->s;
  ct_gemm_batched(s->ta, s->tb, s->M, s->N, s->K, 1.0f, p->A, p->lda, p->sa,
                  p->B, p->ldb, p->sb, 0.0f, p->C, p->ldc, p->sc, s->batch);
}

static void run_bf16(const problem *p) {
  const shape *s = &p->s;
  ct_gemm_bf16_batched(s->ta, s->tb, s->M, s->N, s->K, 1.0f, p->A, p->lda,
                       p->sa, p->B, p->ldb, p->sb, 0.0f, p->C, p->ldc, p->sc,
                       s->batch);
}

#ifdef CT_HAVE_OPENBLAS
static void run_blas(const problem *p) {
  const shape *s = &p->s;
  for (int64_t b = 0; b < s->batch; b++)
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                s->tb ? CblasTrans : CblasNoTrans, (int)s->M, (int)s->N,
                (int)s->K, 1.0f, p->A + b * p->sa, (int)p->lda,
                p->B + b * p->sb, (int)p->ldb, 0.0f, p->C + b * p->sc,
                (int)p->ldc);
}
#endif

static void settle(bool quick) {
  struct timespec ts = {0, quick ? 100000000L : 200000000L};
  nanosleep(&ts, NULL);
}

// Seconds per call of fn, timing `iters` calls per sample.
static double sample(void (*fn)(const problem *), const problem *p, int iters) {
  double t0 = bench_now_s();
  for (int i = 0; i < iters; i++) fn(p);
  return (bench_now_s() - t0) / iters;
}

// Median GFLOP/s of ctrain (`run`: fp32 or bf16) and, for fp32 and if built
// with it, BLAS, interleaved.
static void measure(const problem *p, bool quick, void (*run)(const problem *),
                    double *ct_gflops, double *blas_gflops) {
  const shape *s = &p->s;
  double flops = 2.0 * (double)s->M * s->N * s->K * s->batch;
  double min_sample = quick ? 0.02 : 0.05;
  int nsamples = quick ? 3 : 5;

  run(p);  // warm up: packing buffers, threads, caches
  double t = sample(run, p, 1);
  int iters = t >= min_sample ? 1 : (int)(min_sample / t) + 1;

  double ct[16], bl[16];
  *blas_gflops = 0.0;
  for (int i = 0; i < nsamples; i++) {
    ct[i] = flops / sample(run, p, iters) * 1e-9;
#ifdef CT_HAVE_OPENBLAS
    if (run != run_ctrain) {
      bl[i] = 0.0;
      continue;
    }
    settle(quick);
    run_blas(p);
    bl[i] = flops / sample(run_blas, p, iters) * 1e-9;
    settle(quick);
    run_ctrain(p);
#else
    bl[i] = 0.0;
#endif
  }
  *ct_gflops = bench_median(ct, nsamples);
  *blas_gflops = bench_median(bl, nsamples);
}

// Runs small products on all threads for a while before anything is timed:
// on a virtual machine the first few hundred milliseconds of short parallel
// regions are much slower (spin-waiting vCPUs are still being descheduled by
// the host), which would otherwise land on whichever shape comes first.
static void warm_up(int threads, double seconds);

static void set_threads(int n) {
  ct_set_threads(n);
#ifdef CT_HAVE_OPENBLAS
  openblas_set_num_threads(n);
#endif
}

static problem problem_new(shape s) {
  problem p = {.s = s};
  p.lda = s.ta ? s.M : s.K;
  p.ldb = s.tb ? s.K : s.N;
  p.ldc = s.N;
  p.sa = s.M * s.K;
  p.sb = s.K * s.N;
  p.sc = s.M * s.N;
  size_t na = (size_t)(p.sa * s.batch), nb = (size_t)(p.sb * s.batch),
         nc = (size_t)(p.sc * s.batch);
  p.A = malloc(na * sizeof(float));
  p.B = malloc(nb * sizeof(float));
  p.C = malloc(nc * sizeof(float));
  if (!p.A || !p.B || !p.C) {
    fprintf(stderr, "bench_gemm: out of memory\n");
    exit(1);
  }
  fill(p.A, na, 1);
  fill(p.B, nb, 2);
  memset(p.C, 0, nc * sizeof(float));
  return p;
}

static void problem_free(problem *p) {
  free(p->A);
  free(p->B);
  free(p->C);
}

// bf16 paths to time after each fp32 line.
static ct_gemm_bf16_path bf16_paths[3];
static int n_bf16_paths;

// Runs one shape and prints its line, then its bf16 lines.
static void bench_shape(shape s, int threads, bool quick) {
  problem p = problem_new(s);
  set_threads(threads);
  double g, bg;
  measure(&p, quick, run_ctrain, &g, &bg);
  printf("gemm M=%lld N=%lld K=%lld ta=%d tb=%d threads=%d gflops=%.1f",
         (long long)s.M, (long long)s.N, (long long)s.K, s.ta, s.tb, threads,
         g);
#ifdef CT_HAVE_OPENBLAS
  printf(" blas_gflops=%.1f ratio=%.2f", bg, g / bg);
#endif
  if (s.batch > 1) printf(" batch=%lld", (long long)s.batch);
  printf("\n");
  fflush(stdout);
  for (int i = 0; i < n_bf16_paths; i++) {
    double g16, unused;
    ct_gemm_bf16_force_path(bf16_paths[i]);
    measure(&p, quick, run_bf16, &g16, &unused);
    printf(
        "gemm_bf16 M=%lld N=%lld K=%lld ta=%d tb=%d threads=%d path=%s "
        "gflops=%.1f ratio=%.2f",
        (long long)s.M, (long long)s.N, (long long)s.K, s.ta, s.tb, threads,
        ct_gemm_bf16_path_name(bf16_paths[i]), g16, g16 / g);
    if (s.batch > 1) printf(" batch=%lld", (long long)s.batch);
    printf("\n");
    fflush(stdout);
  }
  ct_gemm_bf16_force_path(CT_GEMM_BF16_AUTO);
  problem_free(&p);
}

// ctrain at 1 thread and at `threads`, samples alternating, so that the
// speedup is not skewed by load that comes and goes between the two.
static void bench_scaling(shape s, int threads, bool quick) {
  problem p = problem_new(s);
  double flops = 2.0 * (double)s.M * s.N * s.K * s.batch;
  int nsamples = quick ? 3 : 5;
  double t1[16], tn[16];
  for (int i = 0; i < nsamples; i++) {
    ct_set_threads(1);
    run_ctrain(&p);
    t1[i] = flops / sample(run_ctrain, &p, 2) * 1e-9;
    ct_set_threads(threads);
    run_ctrain(&p);
    tn[i] = flops / sample(run_ctrain, &p, 4) * 1e-9;
  }
  double g1 = bench_median(t1, nsamples), gn = bench_median(tn, nsamples);
  printf("scaling M=%lld t1_gflops=%.1f t%d_gflops=%.1f speedup=%.2f\n",
         (long long)s.M, g1, threads, gn, gn / g1);
  problem_free(&p);
}

static void warm_up(int threads, double seconds) {
  shape s = {128, 128, 128, 0, 0, 4};
  problem p = {.s = s,
               .lda = 128,
               .ldb = 128,
               .ldc = 128,
               .sa = 128 * 128,
               .sb = 128 * 128,
               .sc = 128 * 128};
  size_t n = (size_t)(4 * 128 * 128);
  p.A = calloc(n, sizeof(float));
  p.B = calloc(n, sizeof(float));
  p.C = calloc(n, sizeof(float));
  if (!p.A || !p.B || !p.C) {
    fprintf(stderr, "bench_gemm: out of memory\n");
    exit(1);
  }
  set_threads(threads);
  for (int side = 0; side < 2; side++) {
    void (*fn)(const problem *) = run_ctrain;
#ifdef CT_HAVE_OPENBLAS
    if (side == 1) fn = run_blas;
#else
    if (side == 1) break;
#endif
    double t0 = bench_now_s();
    while (bench_now_s() - t0 < seconds / 2) fn(&p);
    settle(false);
  }
  free(p.A);
  free(p.B);
  free(p.C);
}

int main(int argc, char **argv) {
  int threads = 2;
  bool quick = false;
  const char *bf16 = "all";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1) {
        fprintf(stderr, "bench_gemm: --threads needs a number >= 1\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!strcmp(argv[i], "--bf16") && i + 1 < argc) {
      bf16 = argv[++i];
    } else {
      fprintf(stderr,
              "usage: bench_gemm [--threads N] [--quick] "
              "[--bf16 all|none|amx|avx512bf16|emulated]\n");
      return 2;
    }
  }
  // The bf16 paths this CPU has (a forced path it lacks falls back to
  // another), best first, filtered by --bf16.
  static const ct_gemm_bf16_path all16[] = {
      CT_GEMM_BF16_AMX, CT_GEMM_BF16_AVX512BF16, CT_GEMM_BF16_EMULATED};
  for (int i = 0; i < 3; i++) {
    ct_gemm_bf16_force_path(all16[i]);
    bool has = ct_gemm_bf16_active_path() == all16[i];
    if (has && (!strcmp(bf16, "all") ||
                !strcmp(bf16, ct_gemm_bf16_path_name(all16[i]))))
      bf16_paths[n_bf16_paths++] = all16[i];
  }
  ct_gemm_bf16_force_path(CT_GEMM_BF16_AUTO);
  if (!n_bf16_paths && strcmp(bf16, "none")) {
    fprintf(stderr, "bench_gemm: --bf16 %s: not a path this CPU has\n", bf16);
    return 2;
  }
  printf("# gemm path=%s\n", ct_gemm_path_name(ct_gemm_active_path()));
  warm_up(threads, quick ? 0.3 : 1.0);

  static const shape shapes[] = {
      // squares
      {128, 128, 128, 0, 0, 1},
      {256, 256, 256, 0, 0, 1},
      {512, 512, 512, 0, 0, 1},
      {1024, 1024, 1024, 0, 0, 1},
      {2048, 2048, 2048, 0, 0, 1},
      // linear layers, tokens x features: forward y = x W^T and dx = dy W
      {6400, 384, 128, 0, 1, 1},
      {6400, 128, 128, 0, 1, 1},
      {6400, 512, 128, 0, 1, 1},
      {6400, 128, 512, 0, 1, 1},
      {6400, 384, 128, 0, 0, 1},
      {6400, 128, 512, 0, 0, 1},
      // weight gradients dW = dy^T x over 6400 tokens
      {128, 512, 6400, 1, 0, 1},
      {512, 128, 6400, 1, 0, 1},
      // Swin on Fashion-MNIST (swin_fmnist.ini), 64 images: weight gradients
      // over 12544 tokens (stage 1, width 64) and 3136 (stage 2, 128)
      {64, 64, 12544, 1, 0, 1},
      {192, 64, 12544, 1, 0, 1},
      {128, 128, 3136, 1, 0, 1},
      {128, 256, 3136, 1, 0, 1},
      // attention per (batch, head): scores q k^T and context p v
      {50, 50, 32, 0, 1, 512},
      {50, 32, 50, 0, 0, 512},
  };
  int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  for (int i = 0; i < nshapes; i++) {
    if (quick && shapes[i].M * shapes[i].N * shapes[i].K > 1024LL * 1024 * 1024)
      continue;
    bench_shape(shapes[i], threads, quick);
  }

  shape sq = {1024, 1024, 1024, 0, 0, 1};
  bench_shape(sq, 1, quick);
  bench_scaling(sq, threads, quick);
  return 0;
}
