// The bf16 gemm driver (core/gemm_bf16.h): path selection, the packing that
// rounds fp32 to bf16 into the kernels' layouts (core/gemm_bf16_internal.h),
// the cache blocking, and the OpenMP split over C.
// The kernels live in gemm_amx.c, gemm_avx512bf16.c, gemm_bf16_emulated.c.
//
// Loop nest for one product, the GotoBLAS structure of core/gemm.c:
//
//   for jc in N by NC:          B block (KC,NC) rounded and packed in pairs
//     for pc in K by KC:        fixed K-block boundaries (depend on K only)
//       for ic in M by MC:      A block (MC,KC) rounded and packed in rows
//         for ir, jr:           kernel: C tile = alpha * A B + beta' * C tile
//
// beta' is beta for the first K block and 1 afterwards, so every element of C
// is one fixed sequence of fp32 operations over K. Unlike the fp32 path, A
// and B are always packed: rounding needs a copy anyway.
//
// Threads take independent rectangles of whole tiles of C (or whole matrices
// of a batch), each with its own packing buffers; K is never split.
//
// Not here: a bf16 tensor type. Inputs are rounded on every call, so a weight
// used many times is rounded each time; caching packed weights is a later
// step.
#include "core/gemm_bf16.h"

#include "core/gemm_bf16_internal.h"
#include "core/gemm_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

uint16_t ct_bf16_from_f32(float x) { return ct_bf16_round_bits(x); }

float ct_bf16_to_f32(uint16_t h) { return ct_bf16_bits_to_f32(h); }

// ---------------------------------------------------------------------------
// Path selection.

static ct_gemm_bf16_path forced = CT_GEMM_BF16_AUTO;

void ct_gemm_bf16_force_path(ct_gemm_bf16_path path) { forced = path; }

ct_gemm_bf16_path ct_gemm_bf16_active_path(void) {
  ct_gemm_bf16_path p = forced == CT_GEMM_BF16_AUTO ? CT_GEMM_BF16_AMX : forced;
  // The AMX path packs with the AVX512-BF16 conversions.
  if (p == CT_GEMM_BF16_AMX &&
      !(ct_gemm_bf16_cpu_has_amx() && ct_gemm_bf16_cpu_has_avx512bf16()))
    p = CT_GEMM_BF16_AVX512BF16;
  if (p == CT_GEMM_BF16_AVX512BF16 && !ct_gemm_bf16_cpu_has_avx512bf16())
    p = CT_GEMM_BF16_EMULATED;
  return p;
}

const char *ct_gemm_bf16_path_name(ct_gemm_bf16_path path) {
  switch (path) {
  case CT_GEMM_BF16_AUTO: return "auto";
  case CT_GEMM_BF16_EMULATED: return "emulated";
  case CT_GEMM_BF16_AVX512BF16: return "avx512bf16";
  case CT_GEMM_BF16_AMX: return "amx";
  }
  return "unknown";
}

static const ct_gemm_bf16_arch *active_arch(void) {
  switch (ct_gemm_bf16_active_path()) {
  case CT_GEMM_BF16_AMX: return &ct_gemm_bf16_arch_amx;
  case CT_GEMM_BF16_AVX512BF16: return &ct_gemm_bf16_arch_avx512bf16;
  default: return &ct_gemm_bf16_arch_emulated;
  }
}

// ---------------------------------------------------------------------------
// Packing: the one place where fp32 becomes bf16.

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The packing buffers of the calls this thread makes (for its whole team).
static _Thread_local ct_gemm_scratch tls_bufs;

// Portable helpers (ct_bf16_round_fn, ct_bf16_pair_fn); the AVX-512 ones
// compute the same bits.
static void round_row(const float *src, int64_t n, uint16_t *dst) {
  for (int64_t j = 0; j < n; j++) dst[j] = ct_bf16_round_bits(src[j]);
}

static void pair_rows(const float *r0, const float *r1, int64_t n,
                      uint16_t *dst) {
  for (int64_t j = 0; j < n; j++) {
    dst[2 * j] = ct_bf16_round_bits(r0[j]);
    dst[2 * j + 1] = r1 ? ct_bf16_round_bits(r1[j]) : 0;
  }
}

static void transpose_words(const uint32_t *src, int64_t lds, int64_t rows,
                            int64_t cols, uint32_t *dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * ldd + r] = src[r * lds + c];
}

static ct_bf16_transpose_fn transposer(const ct_gemm_bf16_arch *arch) {
  return arch->transpose_words ? arch->transpose_words : transpose_words;
}

static ct_bf16_round_fn rounder(const ct_gemm_bf16_arch *arch) {
  return arch->round_row ? arch->round_row : round_row;
}

static ct_bf16_pair_fn pairer(const ct_gemm_bf16_arch *arch) {
  return arch->pair_rows ? arch->pair_rows : pair_rows;
}

// A block: rows i0..i0+mc, depth k0..k0+kc of op(A), as micro-panels of mr
// rows (mr * lda_p values each), depth zero-padded to kp. A stored (M,K) is
// rounded row by row. A stored (K,M) is rounded two k-rows at a time into
// rows of pair words (tmp: kc/2 rows of mc words), which one transpose of
// words then turns into the panel rows.
static void pack_a(const ct_gemm_bf16_arch *arch, bool trans, const float *A,
                   int64_t lda, int64_t i0, int64_t k0, int64_t mc,
                   int64_t kc, int64_t kp, int64_t lda_p, uint16_t *dst,
                   uint16_t *tmp) {
  const int mr = arch->mr;
  const int64_t panels = (mc + mr - 1) / mr;
  if (!trans) {
    const ct_bf16_round_fn round = rounder(arch);
    for (int64_t i = 0; i < panels * mr; i++) {
      uint16_t *d = dst + i * lda_p;
      if (i < mc) {
        round(A + (i0 + i) * lda + k0, kc, d);
        memset(d + kc, 0, (size_t)(kp - kc) * sizeof *d);
      } else {
        memset(d, 0, (size_t)kp * sizeof *d);
      }
    }
    return;
  }
  const ct_bf16_pair_fn pair = pairer(arch);
  const int64_t kc2 = round_up(kc, 2);
  for (int64_t k = 0; k < kc; k += 2) {
    const float *r0 = A + (k0 + k) * lda + i0;
    pair(r0, k + 1 < kc ? r0 + lda : NULL, mc, tmp + k * mc);
  }
  transposer(arch)((const uint32_t *)tmp, mc, kc2 / 2, mc, (uint32_t *)dst,
                   lda_p / 2);
  for (int64_t i = 0; i < panels * mr; i++) {
    uint16_t *d = dst + i * lda_p;
    int64_t from = i < mc ? kc2 : 0;
    memset(d + from, 0, (size_t)(kp - from) * sizeof *d);
  }
}

// B block: depth k0..k0+kc, columns j0..j0+nc of op(B), as micro-panels of
// nr columns (kp * nr values each) in the pair layout. B stored (K,N) pairs
// two rows directly. B stored (N,K) has each pair adjacent in a row: the nr
// rows of a panel are rounded (tmp: nr rows of kp values, zero rows past
// nc), and a transpose of words makes them the panel's columns.
static void pack_b(const ct_gemm_bf16_arch *arch, bool trans, const float *B,
                   int64_t ldb, int64_t k0, int64_t j0, int64_t kc,
                   int64_t nc, int64_t kp, uint16_t *dst, uint16_t *tmp) {
  const int nr = arch->nr;
  const int64_t panels = (nc + nr - 1) / nr, panel = kp * nr;
  if (!trans) {
    const ct_bf16_pair_fn pair = pairer(arch);
    for (int64_t p = 0; p < kp / 2; p++) {
      const int64_t k = 2 * p;
      const float *r0 = B + (k0 + k) * ldb + j0;
      for (int64_t jp = 0; jp < panels; jp++) {
        uint16_t *d = dst + jp * panel + p * 2 * nr;
        int64_t cols = nc - jp * nr < nr ? nc - jp * nr : nr;
        if (k < kc) {
          pair(r0 + jp * nr, k + 1 < kc ? r0 + ldb + jp * nr : NULL, cols, d);
          memset(d + 2 * cols, 0, (size_t)(2 * (nr - cols)) * sizeof *d);
        } else {
          memset(d, 0, (size_t)(2 * nr) * sizeof *d);
        }
      }
    }
    return;
  }
  const ct_bf16_round_fn round = rounder(arch);
  const ct_bf16_transpose_fn transpose = transposer(arch);
  for (int64_t jp = 0; jp < panels; jp++) {
    for (int64_t j = 0; j < nr; j++) {
      uint16_t *t = tmp + j * kp;
      int64_t col = jp * nr + j;
      int64_t from = col < nc ? kc : 0;
      if (col < nc) round(B + (j0 + col) * ldb + k0, kc, t);
      memset(t + from, 0, (size_t)(kp - from) * sizeof *t);
    }
    transpose((const uint32_t *)tmp, kp / 2, nr, kp / 2,
              (uint32_t *)(dst + jp * panel), nr);
  }
}

// ---------------------------------------------------------------------------
// One product on one thread.

typedef struct operands {
  bool trans_a, trans_b;
  int64_t K;
  float alpha, beta;
  int64_t lda, ldb, ldc;
  const float *bias; // (N) or NULL: the old C is this row in every row
} operands;

// Depth of the K blocks: as even as possible, at most arch->kc, a multiple
// of kgran. Depends on K and the path only, so the sum order is the same for
// any split of C.
static int64_t k_block(const ct_gemm_bf16_arch *arch, int64_t K) {
  int64_t nblocks = (K + arch->kc - 1) / arch->kc;
  return round_up((K + nblocks - 1) / nblocks, arch->kgran);
}

// Per-thread packing buffers for one call, sized for the largest blocks.
typedef struct buffers {
  int64_t kb, lda_p, mc_max, nc_max;
  size_t pa, pb, tmp, slot; // uint16_t counts; slot = all three, 64 B aligned
} buffers;

static buffers buffer_sizes(const ct_gemm_bf16_arch *arch, int64_t M,
                            int64_t N, int64_t K) {
  buffers b;
  b.kb = k_block(arch, K);
  // Rows of A start 64-byte aligned and are not 4 KiB apart, so the rows of
  // one AMX tile load do not share L1 sets.
  b.lda_p = round_up(b.kb, 32) + 32;
  b.mc_max = round_up(M < arch->mc ? M : arch->mc, arch->mr);
  b.nc_max = round_up(N < arch->nc ? N : arch->nc, arch->nr);
  b.pa = (size_t)(b.mc_max * b.lda_p);
  b.pb = (size_t)(b.kb * b.nc_max);
  // tmp: a transposed A block as pair words (kb x mc_max values), or one
  // transposed B panel (nr x kb).
  int64_t tmp_a = b.kb * b.mc_max, tmp_b = (int64_t)arch->nr * b.kb;
  b.tmp = (size_t)round_up(tmp_a > tmp_b ? tmp_a : tmp_b, 32);
  b.slot = (size_t)round_up((int64_t)(b.pa + b.pb + b.tmp), 32);
  return b;
}

// C (m, n) = alpha * op(A) op(B) + beta * C (or beta * the bias rows),
// where A, B, C and bias already point at the sub-problem's first
// row/column; buf is one thread's slot.
static void gemm_block(const ct_gemm_bf16_arch *arch, const operands *op,
                       const buffers *bs, int64_t m, int64_t n,
                       const float *A, const float *B, const float *bias,
                       float *C, uint16_t *buf) {
  const int mr = arch->mr, nr = arch->nr;
  const int64_t K = op->K, kb = bs->kb, lda_p = bs->lda_p;
  uint16_t *pa = buf, *pb = buf + bs->pa, *tmp = pb + bs->pb;

  if (arch->begin) arch->begin();
  for (int64_t jc = 0; jc < n; jc += arch->nc) {
    int64_t nc = n - jc < arch->nc ? n - jc : arch->nc;
    for (int64_t pc = 0; pc < K; pc += kb) {
      int64_t kc = K - pc < kb ? K - pc : kb;
      int64_t kp = round_up(kc, arch->kgran);
      float beta = pc == 0 ? op->beta : 1.0f;
      pack_b(arch, op->trans_b, B, op->ldb, pc, jc, kc, nc, kp, pb, tmp);
      for (int64_t ic = 0; ic < m; ic += arch->mc) {
        int64_t mc = m - ic < arch->mc ? m - ic : arch->mc;
        pack_a(arch, op->trans_a, A, op->lda, ic, pc, mc, kc, kp, lda_p, pa,
               tmp);
        for (int64_t ir = 0; ir < mc; ir += mr) {
          int mt = mc - ir < mr ? (int)(mc - ir) : mr;
          const uint16_t *a = pa + ir * lda_p;
          float *c = C + (ic + ir) * op->ldc + jc;
          // The first K block reads the bias rows instead of C.
          const bool from_bias = bias && pc == 0;
          const float *old = from_bias ? bias + jc : c;
          const int64_t ldo = from_bias ? 0 : op->ldc;
          for (int64_t jr = 0; jr < nc; jr += nr) {
            int nt = nc - jr < nr ? (int)(nc - jr) : nr;
            arch->kernel(kp, a, lda_p, pb + jr / nr * (kp * nr), c + jr,
                         op->ldc, old + jr, ldo, op->alpha, beta, mt, nt);
          }
        }
      }
    }
  }
  if (arch->end) arch->end();
}

// Out of memory for the packing buffers (of any thread; the call then takes
// this path for the whole of C, so threads never mix paths): the emulated
// arithmetic in plain loops.
static void gemm_unpacked(const operands *op, int64_t m, int64_t n,
                          const float *A, const float *B, const float *bias,
                          float *C) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < op->K; k++) {
        float a = op->trans_a ? A[k * op->lda + i] : A[i * op->lda + k];
        float b = op->trans_b ? B[j * op->ldb + k] : B[k * op->ldb + j];
        acc = fmaf(ct_bf16_bits_to_f32(ct_bf16_round_bits(a)),
                   ct_bf16_bits_to_f32(ct_bf16_round_bits(b)), acc);
      }
      float *c = C + i * op->ldc + j;
      float old = bias ? bias[j] : *c;
      *c = op->beta == 0.0f ? op->alpha * acc
                            : fmaf(op->alpha, acc, op->beta * old);
    }
}

// C = beta * C (or beta * the bias rows) for K == 0 or alpha == 0 (A and B
// are not read).
static void scale_c(int64_t M, int64_t N, float beta, const float *bias,
                    float *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    float *row = C + i * ldc;
    if (beta == 0.0f)
      memset(row, 0, (size_t)N * sizeof(float));
    else if (bias)
      for (int64_t j = 0; j < N; j++) row[j] = beta * bias[j];
    else if (beta != 1.0f)
      for (int64_t j = 0; j < N; j++) row[j] *= beta;
  }
}

// ---------------------------------------------------------------------------
// Splitting the work over threads: matrix b of the batch, rectangle (im, in)
// of an mt x nt grid of whole tiles.

typedef struct split {
  const ct_gemm_bf16_arch *arch;
  const operands *op;
  const buffers *bs;
  uint16_t *bufs; // NULL: out of memory, gemm_unpacked
  int64_t M, N, mt, nt, mtiles, ntiles;
  const float *A;
  int64_t stride_a;
  const float *B;
  int64_t stride_b;
  float *C;
  int64_t stride_c;
} split;

static void run_task(const split *sp, int64_t t, int thread) {
  const ct_gemm_bf16_arch *arch = sp->arch;
  const operands *op = sp->op;
  int64_t b = t / (sp->mt * sp->nt), r = t % (sp->mt * sp->nt);
  int64_t im = r / sp->nt, in = r % sp->nt;
  int64_t i0 = im * sp->mtiles / sp->mt * arch->mr;
  int64_t i1 = (im + 1) * sp->mtiles / sp->mt * arch->mr;
  int64_t j0 = in * sp->ntiles / sp->nt * arch->nr;
  int64_t j1 = (in + 1) * sp->ntiles / sp->nt * arch->nr;
  if (i1 > sp->M) i1 = sp->M;
  if (j1 > sp->N) j1 = sp->N;
  float *c = sp->C + b * sp->stride_c + i0 * op->ldc + j0;
  const float *bias = op->bias ? op->bias + j0 : NULL;
  if (op->K <= 0 || op->alpha == 0.0f) {
    scale_c(i1 - i0, j1 - j0, op->beta, bias, c, op->ldc);
    return;
  }
  const float *a =
      sp->A + b * sp->stride_a + (op->trans_a ? i0 : i0 * op->lda);
  const float *bm =
      sp->B + b * sp->stride_b + (op->trans_b ? j0 * op->ldb : j0);
  if (sp->bufs)
    gemm_block(arch, op, sp->bs, i1 - i0, j1 - j0, a, bm, bias, c,
               sp->bufs + (size_t)thread * sp->bs->slot);
  else
    gemm_unpacked(op, i1 - i0, j1 - j0, a, bm, bias, c);
}

// ct_gemm_bf16_batched, and ct_gemm_bf16_bias when bias is not NULL
// (batch 1).
static void gemm_run(bool trans_a, bool trans_b, int64_t M, int64_t N,
                     int64_t K, float alpha, const float *A, int64_t lda,
                     int64_t stride_a, const float *B, int64_t ldb,
                     int64_t stride_b, float beta, float *C, int64_t ldc,
                     int64_t stride_c, int64_t batch, const float *bias) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  // Several products into one shared C accumulate in batch order.
  if (stride_c == 0 && batch > 1) {
    for (int64_t b = 0; b < batch; b++)
      ct_gemm_bf16_batched(trans_a, trans_b, M, N, K, alpha, A + b * stride_a,
                           lda, 0, B + b * stride_b, ldb, 0,
                           b == 0 ? beta : 1.0f, C, ldc, 0, 1);
    return;
  }

  const ct_gemm_bf16_arch *arch = active_arch();
  const operands op = {trans_a, trans_b, K,   alpha, beta,
                       lda,     ldb,     ldc, bias};

  int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  double work = (double)M * N * (K > 0 ? K : 1) * batch;
  if (work < 32768.0) threads = 1;

  // Whole matrices per thread when the batch divides evenly or is large;
  // otherwise each matrix is cut in `threads` rectangles, across M first
  // (each thread then packs its own rows of A and all of B; measured no
  // slower on the step benchmarks than fp32's least-packing split).
  int64_t parts = 1;
  if (threads > 1 && !(batch % threads == 0 || batch >= 8 * threads))
    parts = threads;
  int64_t mtiles = (M + arch->mr - 1) / arch->mr;
  int64_t ntiles = (N + arch->nr - 1) / arch->nr;
  int64_t mt = parts < mtiles ? parts : mtiles;
  int64_t nt = (parts + mt - 1) / mt;
  if (nt > ntiles) nt = ntiles;
  int64_t tasks = batch * mt * nt;
  if (threads > tasks) threads = tasks;

  // One slot of packing buffers per thread, taken up front from the calling
  // thread's scratch: either all threads pack or none does.
  const buffers bs = buffer_sizes(arch, M, N, K > 0 ? K : 1);
  uint16_t *bufs = NULL;
  if (K > 0 && alpha != 0.0f)
    bufs = (uint16_t *)ct_gemm_scratch_get(&tls_bufs,
                                           (bs.slot * (size_t)threads + 1) / 2);

  const split sp = {arch, &op, &bs, bufs, M, N, mt, nt, mtiles, ntiles,
                   A, stride_a, B, stride_b, C, stride_c};
  if (threads <= 1) {
    for (int64_t t = 0; t < tasks; t++) run_task(&sp, t, 0);
  } else {
    // Dynamic: results do not depend on which thread computes which task.
#pragma omp parallel for schedule(dynamic, 1) num_threads((int)threads)
    for (int64_t t = 0; t < tasks; t++)
      run_task(&sp, t, omp_get_thread_num());
  }
}

void ct_gemm_bf16_batched(bool trans_a, bool trans_b, int64_t M, int64_t N,
                          int64_t K, float alpha, const float *A, int64_t lda,
                          int64_t stride_a, const float *B, int64_t ldb,
                          int64_t stride_b, float beta, float *C, int64_t ldc,
                          int64_t stride_c, int64_t batch) {
  gemm_run(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb,
           stride_b, beta, C, ldc, stride_c, batch, NULL);
}

void ct_gemm_bf16_bias(bool trans_a, bool trans_b, int64_t M, int64_t N,
                       int64_t K, const float *A, int64_t lda, const float *B,
                       int64_t ldb, const float *bias, float *C, int64_t ldc) {
  gemm_run(trans_a, trans_b, M, N, K, 1.0f, A, lda, 0, B, ldb, 0, 1.0f, C,
           ldc, 0, 1, bias);
}

void ct_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                  float alpha, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float beta, float *C, int64_t ldc) {
  ct_gemm_bf16_batched(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0,
                       beta, C, ldc, 0, 1);
}
