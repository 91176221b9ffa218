// bench_deform_attn: multi-scale deformable attention (ct_ms_deform_attn)
// forward and backward through the tape, against the memory bandwidth of
// the same machine measured in the same run (a parallel stream copy).
//
//   bench_deform_attn [--threads N] [--quick]
//
// Sampling is memory-bound: per point it reads 4 neighbours of D floats and
// does 2 flops per float read. Two byte counts are reported per pass:
//   gather: what the op asks of the memory system. Forward: 4 neighbour
//     rows of D floats, the point's location (2 floats) and weight per
//     point, plus the output. Backward: the 4 neighbour rows read, the 4
//     value-gradient rows read and written, location and weight read and
//     their gradients written per point, plus the output gradient and the
//     zeroing of the value gradient. Mostly cache hits (the value map of
//     one image and head is small), so its rate may exceed DRAM bandwidth.
//   once: every input read once and every result written once (value,
//     locations, weights, output; backward: also the output gradient and
//     the three input gradients): the least any implementation must move.
// Each is given in GB/s and as a fraction of the stream copy's rate
// (bytes read + written per second, copy of 2 x 64 MiB).
//
// One line per shape:
//   deform_attn shape=.. N=.. M=.. D=.. Lq=.. L=.. P=.. S=.. threads=..
//     fwd_ms=.. bwd_ms=.. fwd_cpu_ms=.. bwd_cpu_ms=.. fwd_gather_gbs=.. fwd_once_gbs=.. bwd_gather_gbs=..
//     bwd_once_gbs=.. stream_gbs=.. fwd_gather_frac=.. bwd_gather_frac=..
// Locations are each query's reference point plus offsets of up to 2
// pixels per level, as a trained model's are. Shapes: the Deformable DETR encoder (queries = all pixels of the 4
// levels of a 256x256 image at strides 8..64) and decoder (300 queries) at
// d_model 256, 8 heads, 4 points, batch 2; a toy detector batch of 32 on
// (8,8) .. (1,1) maps. Times are medians of repeats; this machine is
// shared and noisy (figures move by 20% or more between runs).
#include "autograd/ops_deform_attn.h"
#include "autograd/tape.h"
#include "bench/bench_util.h"
#include "core/arena.h"
#include "core/rng.h"
#include "core/threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// CPU seconds of the whole process (all threads): on a loaded machine,
// steadier than wall time for comparing versions.
static double cpu_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct shape {
  const char *name;
  int64_t N, M, D, Lq, L, P;
  int64_t levels[8];
  bool encoder;  // Lq = S
} shape;

// Bytes read + written per second by a parallel copy of two big buffers.
static double stream_gbs(int reps) {
  const int64_t n = 16 << 20;  // floats per buffer: 64 MiB
  float *a = malloc((size_t)n * sizeof(float));
  float *b = malloc((size_t)n * sizeof(float));
  if (!a || !b) {
    free(a);
    free(b);
    return 0.0;
  }
  const int64_t chunk = 1 << 16, chunks = n / chunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; c++)
    for (int64_t i = c * chunk; i < (c + 1) * chunk; i++) {
      a[i] = (float)i;
      b[i] = 0.0f;
    }
  double t[16];
  for (int r = 0; r < reps; r++) {
    const double t0 = bench_now_s();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; c++)
      memcpy(b + c * chunk, a + c * chunk, (size_t)chunk * sizeof(float));
    t[r] = bench_now_s() - t0;
  }
  volatile float sink = b[n - 1];
  (void)sink;
  free(a);
  free(b);
  return 2.0 * (double)n * sizeof(float) / bench_median(t, reps) / 1e9;
}

// Locations (N, Lq, M, L*P, 2) as the model's: each query's reference point
// (an encoder query's own pixel centre, a decoder query's anywhere) plus
// offsets of up to 2 pixels of each level.
static void reference_points(const shape *sh, int64_t S, int64_t Lq,
                             ct_rng *rng, float *loc) {
  const int64_t M = sh->M, L = sh->L, P = sh->P;
  for (int64_t n = 0; n < sh->N; n++)
    for (int64_t q = 0; q < Lq; q++) {
      float rx = (float)ct_rng_next_double(rng),
            ry = (float)ct_rng_next_double(rng);
      if (sh->encoder) {
        int64_t l = 0, row = q;
        while (row >= sh->levels[2 * l] * sh->levels[2 * l + 1] && l + 1 < L)
          row -= sh->levels[2 * l] * sh->levels[2 * l + 1], l++;
        const int64_t W = sh->levels[2 * l + 1], H = sh->levels[2 * l];
        rx = ((float)(row % W) + 0.5f) / (float)W;
        ry = ((float)(row / W) + 0.5f) / (float)H;
      }
      for (int64_t m = 0; m < M; m++)
        for (int64_t l = 0; l < L; l++)
          for (int64_t p = 0; p < P; p++) {
            float *xy = loc + ((((n * Lq + q) * M + m) * L + l) * P + p) * 2;
            const double ox = 4.0 * ct_rng_next_double(rng) - 2.0;
            const double oy = 4.0 * ct_rng_next_double(rng) - 2.0;
            xy[0] = rx + (float)(ox / (double)sh->levels[2 * l + 1]);
            xy[1] = ry + (float)(oy / (double)sh->levels[2 * l]);
          }
    }
  (void)S;
}

static void run(const shape *sh, int reps, double stream) {
  const int64_t N = sh->N, M = sh->M, D = sh->D, L = sh->L, P = sh->P;
  int64_t S = 0;
  for (int64_t l = 0; l < L; l++)
    S += sh->levels[2 * l] * sh->levels[2 * l + 1];
  const int64_t Lq = sh->encoder ? S : sh->Lq;
  ct_rng rng = ct_rng_make(3, 0);
  double tf[16], tb[16], cf[16], cb[16];
  for (int r = 0; r < reps; r++) {
    ct_tensor *value = ct_requires_grad(
        ct_tensor_randn(&rng, 0.0f, 1.0f, CT_SHAPE(N, S, M, D)));
    ct_tensor *loc =
        ct_requires_grad(ct_tensor_empty(CT_F32, CT_SHAPE(N, Lq, M, L * P, 2)));
    ct_tensor *w =
        ct_requires_grad(ct_tensor_empty(CT_F32, CT_SHAPE(N, Lq, M, L, P)));
    ct_tensor *g = ct_tensor_empty(CT_F32, CT_SHAPE(N, Lq, M * D));
    if (!value || !loc || !w || !g) {
      fprintf(stderr, "bench_deform_attn: %s\n", ct_last_error());
      exit(1);
    }
    reference_points(sh, S, Lq, &rng, ct_f32(loc));
    ct_rng_fill_uniform(&rng, ct_f32(w), w->numel, 0.0f, 2.0f / (float)(L * P));
    ct_rng_fill_uniform(&rng, ct_f32(g), g->numel, -1.0f, 1.0f);
    const double t0 = bench_now_s(), c0 = cpu_now_s();
    ct_tensor *y = ct_ms_deform_attn(value, sh->levels, L, loc, w);
    const double t1 = bench_now_s(), c1 = cpu_now_s();
    if (!y || ct_backward_seeded(y, ct_f32(g)) != CT_OK) {
      fprintf(stderr, "bench_deform_attn: %s\n", ct_last_error());
      exit(1);
    }
    tb[r] = bench_now_s() - t1;
    cb[r] = cpu_now_s() - c1;
    tf[r] = t1 - t0;
    cf[r] = c1 - c0;
    ct_arena_reset();
  }
  const double fwd = bench_median(tf, reps), bwd = bench_median(tb, reps);
  const double fwd_cpu = bench_median(cf, reps),
               bwd_cpu = bench_median(cb, reps);
  const double points = (double)(N * Lq * M * L * P), f = sizeof(float);
  const double vbytes = (double)(N * S * M * D) * f;
  const double obytes = (double)(N * Lq * M * D) * f;
  const double fwd_gather = points * (4 * D + 3) * f + obytes;
  const double fwd_once = vbytes + points * 3 * f + obytes;
  const double bwd_gather =
      points * (12 * D + 6) * f + obytes + vbytes;  // + zeroing dvalue
  const double bwd_once = 2 * vbytes + points * 6 * f + obytes;
  printf(
      "deform_attn shape=%s N=%lld M=%lld D=%lld Lq=%lld L=%lld P=%lld "
      "S=%lld threads=%d fwd_ms=%.3f bwd_ms=%.3f fwd_cpu_ms=%.3f "
      "bwd_cpu_ms=%.3f fwd_gather_gbs=%.2f "
      "fwd_once_gbs=%.2f bwd_gather_gbs=%.2f bwd_once_gbs=%.2f "
      "stream_gbs=%.2f fwd_gather_frac=%.2f bwd_gather_frac=%.2f\n",
      sh->name, (long long)N, (long long)M, (long long)D, (long long)Lq,
      (long long)L, (long long)P, (long long)S, ct_get_threads(), fwd * 1e3,
      bwd * 1e3, fwd_cpu * 1e3, bwd_cpu * 1e3, fwd_gather / fwd / 1e9,
      fwd_once / fwd / 1e9, bwd_gather / bwd / 1e9, bwd_once / bwd / 1e9,
      stream, fwd_gather / fwd / 1e9 / stream, bwd_gather / bwd / 1e9 / stream);
  fflush(stdout);
}

int main(int argc, char **argv) {
  ct_threads_from_env();
  bool quick = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      ct_set_threads(atoi(argv[++i]));
    } else if (!strcmp(argv[i], "--quick")) {
      quick = true;
    } else {
      fprintf(stderr, "usage: bench_deform_attn [--threads N] [--quick]\n");
      return 2;
    }
  }
  const int reps = quick ? 3 : 9;
  static const shape shapes[] = {
      {"encoder", 2, 8, 32, 0, 4, 4, {32, 32, 16, 16, 8, 8, 4, 4}, true},
      {"decoder", 2, 8, 32, 300, 4, 4, {32, 32, 16, 16, 8, 8, 4, 4}, false},
      {"toy_b32", 32, 8, 32, 0, 4, 4, {8, 8, 4, 4, 2, 2, 1, 1}, true},
  };
  const double stream = stream_gbs(reps);
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    run(&shapes[i], reps, stream);
  return 0;
}
