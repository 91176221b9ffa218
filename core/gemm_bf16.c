// The bf16 gemm driver (core/gemm_bf16.h): the packing that rounds fp32 to
// bf16 into the kernels' layouts (core/gemm_bf16_kernels.h), the cache
// blocking, and the OpenMP split over C. The kernels live in gemm_amx.c,
// gemm_avx512bf16.c and gemm_bf16_emulated.c; which one runs is the
// dispatcher's choice (core/gemm.c), handed in as a ct_gemm_bf16_arch.
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
// of a batch), each with its own packing buffers. A small C over a long K
// (a weight gradient: K is the batch's tokens) is instead cut along its K
// blocks: each block's product goes to its own buffer, and the blocks are
// then added into C in order with the kernels' own formula, so every
// element is the same fixed sequence of fp32 operations either way.
//
// An operand may also come as bf16 storage (ct_gemm_bf16_stored: CT_BF16
// activations, core/tensor.h): its packing then copies the bits instead of
// rounding, which gives the bits the rounding of the widened values would.
// Weights are rounded on every call, so a weight used many times is
// rounded each time; caching packed weights is a later step.
#include "core/gemm_bf16.h"

#include "core/gemm_internal.h"
#include "core/target_clones.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

uint16_t ct_bf16_from_f32(float x) { return ct_bf16_round_bits(x); }

float ct_bf16_to_f32(uint16_t h) { return ct_bf16_bits_to_f32(h); }

// ---------------------------------------------------------------------------
// Packing: the one place where fp32 becomes bf16.

// An operand: fp32 values to round (f), or bf16 bits to copy (h); exactly
// one is set.
typedef struct operand {
  const float *f;
  const uint16_t *h;
} operand;

static operand operand_at(operand o, int64_t offset) {
  return (operand){o.f ? o.f + offset : NULL, o.h ? o.h + offset : NULL};
}

static float operand_value(operand o, int64_t i) {
  return o.f ? ct_bf16_bits_to_f32(ct_bf16_round_bits(o.f[i]))
             : ct_bf16_bits_to_f32(o.h[i]);
}

// Row (or pair of rows) of a stored operand into the packing layouts.
static void copy_row(const uint16_t *src, int64_t n, uint16_t *dst) {
  memcpy(dst, src, (size_t)n * sizeof *dst);
}

void ct_bf16_pair_stored_rows(const uint16_t *r0, const uint16_t *r1, int64_t n,
                              uint16_t *dst) {
  for (int64_t j = 0; j < n; j++) {
    dst[2 * j] = r0[j];
    dst[2 * j + 1] = r1 ? r1[j] : 0;
  }
}

// The packing buffers of the calls this thread makes (for its whole team),
// and the K blocks' products of a call cut along K.
static _Thread_local ct_gemm_scratch tls_bufs, tls_parts, tls_out;

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

// One row of an operand rounded (or copied) into the packing.
static void row_of(const ct_gemm_bf16_arch *arch, operand o, int64_t n,
                   uint16_t *dst) {
  if (o.f)
    rounder(arch)(o.f, n, dst);
  else
    copy_row(o.h, n, dst);
}

// Rows r0 and r0 + ld (when has_r1) interleaved.
static void pair_of(const ct_gemm_bf16_arch *arch, operand r0, bool has_r1,
                    int64_t ld, int64_t n, uint16_t *dst) {
  if (r0.f)
    pairer(arch)(r0.f, has_r1 ? r0.f + ld : NULL, n, dst);
  else
    ct_bf16_pair_stored_rows(r0.h, has_r1 ? r0.h + ld : NULL, n, dst);
}

// A block: rows i0..i0+mc, depth k0..k0+kc of op(A), as micro-panels of mr
// rows (mr * lda_p values each), depth zero-padded to kp. A stored (M,K) is
// rounded row by row. A stored (K,M) is rounded two k-rows at a time into
// rows of pair words (tmp: kc/2 rows of mc words), which one transpose of
// words then turns into the panel rows.
static void pack_a(const ct_gemm_bf16_arch *arch, bool trans, operand A,
                   int64_t lda, int64_t i0, int64_t k0, int64_t mc, int64_t kc,
                   int64_t kp, int64_t lda_p, uint16_t *dst, uint16_t *tmp) {
  const int mr = arch->mr;
  const int64_t panels = (mc + mr - 1) / mr;
  if (!trans) {
    for (int64_t i = 0; i < panels * mr; i++) {
      uint16_t *d = dst + i * lda_p;
      if (i < mc) {
        row_of(arch, operand_at(A, (i0 + i) * lda + k0), kc, d);
        memset(d + kc, 0, (size_t)(kp - kc) * sizeof *d);
      } else {
        memset(d, 0, (size_t)kp * sizeof *d);
      }
    }
    return;
  }
  const int64_t kc2 = ct_gemm_round_up(kc, 2);
  for (int64_t k = 0; k < kc; k += 2)
    pair_of(arch, operand_at(A, (k0 + k) * lda + i0), k + 1 < kc, lda, mc,
            tmp + k * mc);
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
static void pack_b(const ct_gemm_bf16_arch *arch, bool trans, operand B,
                   int64_t ldb, int64_t k0, int64_t j0, int64_t kc, int64_t nc,
                   int64_t kp, uint16_t *dst, uint16_t *tmp) {
  const int nr = arch->nr;
  const int64_t panels = (nc + nr - 1) / nr, panel = kp * nr;
  if (!trans) {
    for (int64_t p = 0; p < kp / 2; p++) {
      const int64_t k = 2 * p;
      for (int64_t jp = 0; jp < panels; jp++) {
        uint16_t *d = dst + jp * panel + p * 2 * nr;
        int64_t cols = nc - jp * nr < nr ? nc - jp * nr : nr;
        if (k < kc) {
          pair_of(arch, operand_at(B, (k0 + k) * ldb + j0 + jp * nr),
                  k + 1 < kc, ldb, cols, d);
          memset(d + 2 * cols, 0, (size_t)(2 * (nr - cols)) * sizeof *d);
        } else {
          memset(d, 0, (size_t)(2 * nr) * sizeof *d);
        }
      }
    }
    return;
  }
  const ct_bf16_transpose_fn transpose = transposer(arch);
  for (int64_t jp = 0; jp < panels; jp++) {
    for (int64_t j = 0; j < nr; j++) {
      uint16_t *t = tmp + j * kp;
      int64_t col = jp * nr + j;
      int64_t from = col < nc ? kc : 0;
      if (col < nc) row_of(arch, operand_at(B, (j0 + col) * ldb + k0), kc, t);
      memset(t + from, 0, (size_t)(kp - from) * sizeof *t);
    }
    transpose((const uint32_t *)tmp, kp / 2, nr, kp / 2,
              (uint32_t *)(dst + jp * panel), nr);
  }
}

// ---------------------------------------------------------------------------
// One product on one thread.

// The call's arguments; a task's sub-problem passes its own pointers.
typedef ct_gemm_call operands;

// Depth of the K blocks: as even as possible, at most arch->kc, a multiple
// of kgran. Depends on K and the path only, so the sum order is the same for
// any split of C.
static int64_t k_block(const ct_gemm_bf16_arch *arch, int64_t K) {
  int64_t nblocks = (K + arch->kc - 1) / arch->kc;
  return ct_gemm_round_up((K + nblocks - 1) / nblocks, arch->kgran);
}

// Per-thread packing buffers for one call, sized for the largest blocks.
typedef struct buffers {
  int64_t kb, lda_p, mc_max, nc_max;
  // uint16_t counts; slot = all four, 64 B aligned. strip: mr rows of
  // nc_max floats, where a bf16 output's rows are made before rounding.
  size_t pa, pb, tmp, strip, slot;
} buffers;

static buffers buffer_sizes(const ct_gemm_bf16_arch *arch, int64_t M, int64_t N,
                            int64_t K) {
  buffers b;
  b.kb = k_block(arch, K);
  // Rows of A start 64-byte aligned and are not 4 KiB apart, so the rows of
  // one AMX tile load do not share L1 sets.
  b.lda_p = ct_gemm_round_up(b.kb, 32) + 32;
  b.mc_max = ct_gemm_round_up(M < arch->mc ? M : arch->mc, arch->mr);
  b.nc_max = ct_gemm_round_up(N < arch->nc ? N : arch->nc, arch->nr);
  b.pa = (size_t)(b.mc_max * b.lda_p);
  b.pb = (size_t)(b.kb * b.nc_max);
  // tmp: a transposed A block as pair words (kb x mc_max values), or one
  // transposed B panel (nr x kb).
  int64_t tmp_a = b.kb * b.mc_max, tmp_b = (int64_t)arch->nr * b.kb;
  b.tmp = (size_t)ct_gemm_round_up(tmp_a > tmp_b ? tmp_a : tmp_b, 32);
  b.strip = (size_t)(2 * arch->mr * b.nc_max);
  b.slot =
      (size_t)ct_gemm_round_up((int64_t)(b.pa + b.pb + b.tmp + b.strip), 32);
  return b;
}

// C (m, n) = alpha * op(A) op(B) + beta * C (or beta * the bias rows),
// where A, B, C and bias already point at the sub-problem's first
// row/column; buf is one thread's slot. With C16 instead of C (bf16
// output, K in one block, beta 0 or the bias rows), each strip of mr rows
// is made in the slot's strip and rounded into C16 while in cache.
static void gemm_block(const ct_gemm_bf16_arch *arch, const operands *op,
                       const buffers *bs, int64_t m, int64_t n, operand A,
                       operand B, const float *bias, float *C, uint16_t *C16,
                       uint16_t *buf) {
  const int mr = arch->mr, nr = arch->nr;
  const int64_t K = op->K, kb = bs->kb, lda_p = bs->lda_p;
  uint16_t *pa = buf, *pb = buf + bs->pa, *tmp = pb + bs->pb;
  float *strip = (float *)(tmp + bs->tmp);
  const int64_t ldc = C16 ? bs->nc_max : op->ldc;

  if (arch->begin) arch->begin();
  for (int64_t jc = 0; jc < n; jc += arch->nc) {
    int64_t nc = n - jc < arch->nc ? n - jc : arch->nc;
    for (int64_t pc = 0; pc < K; pc += kb) {
      int64_t kc = K - pc < kb ? K - pc : kb;
      int64_t kp = ct_gemm_round_up(kc, arch->kgran);
      float beta = pc == 0 ? op->beta : 1.0f;
      uint64_t t0 = ct_gemm_pack_clock(op);
      pack_b(arch, op->trans_b, B, op->ldb, pc, jc, kc, nc, kp, pb, tmp);
      ct_gemm_pack_done(op, t0);
      for (int64_t ic = 0; ic < m; ic += arch->mc) {
        int64_t mc = m - ic < arch->mc ? m - ic : arch->mc;
        t0 = ct_gemm_pack_clock(op);
        pack_a(arch, op->trans_a, A, op->lda, ic, pc, mc, kc, kp, lda_p, pa,
               tmp);
        ct_gemm_pack_done(op, t0);
        for (int64_t ir = 0; ir < mc; ir += mr) {
          int mt = mc - ir < mr ? (int)(mc - ir) : mr;
          const uint16_t *a = pa + ir * lda_p;
          float *c = C16 ? strip : C + (ic + ir) * op->ldc + jc;
          // The first K block reads the bias rows instead of C.
          const bool from_bias = bias && pc == 0;
          const float *old = from_bias ? bias + jc : c;
          const int64_t ldo = from_bias ? 0 : ldc;
          for (int64_t jr = 0; jr < nc; jr += nr) {
            int nt = nc - jr < nr ? (int)(nc - jr) : nr;
            arch->kernel(kp, a, lda_p, pb + jr / nr * (kp * nr), c + jr, ldc,
                         old + jr, ldo, op->alpha, beta, mt, nt);
          }
          for (int r = 0; C16 && r < mt; r++)
            rounder(arch)(strip + r * ldc, nc,
                          C16 + (ic + ir + r) * op->ldc + jc);
        }
      }
    }
  }
  if (arch->end) arch->end();
}

// Out of memory for the packing buffers (of any thread; the call then takes
// this path for the whole of C, so threads never mix paths): the emulated
// arithmetic in plain loops.
static void gemm_unpacked(const operands *op, int64_t m, int64_t n, operand A,
                          operand B, const float *bias, float *C) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < op->K; k++) {
        float a =
            operand_value(A, op->trans_a ? k * op->lda + i : i * op->lda + k);
        float b =
            operand_value(B, op->trans_b ? j * op->ldb + k : k * op->ldb + j);
        acc = fmaf(a, b, acc);
      }
      float *c = C + i * op->ldc + j;
      float old = bias ? bias[j] : *c;
      *c = op->beta == 0.0f ? op->alpha * acc
                            : fmaf(op->alpha, acc, op->beta * old);
    }
}

// ---------------------------------------------------------------------------
// Splitting the work over threads.

// Task t of the grid (one rectangle of one matrix) on thread `thread`,
// which packs into its own slot of bufs (NULL: out of memory, unpacked).
static void run_task(const ct_gemm_bf16_arch *arch, const operands *op,
                     const ct_gemm_grid *g, const buffers *bs, uint16_t *bufs,
                     int64_t t, int thread) {
  const ct_gemm_rect r = ct_gemm_grid_rect(g, op, t);
  const int64_t m = r.i1 - r.i0, n = r.j1 - r.j0;
  const int64_t c_at = r.b * op->stride_c + r.i0 * op->ldc + r.j0;
  float *c = op->C ? op->C + c_at : NULL;
  uint16_t *c16 = op->C16 ? op->C16 + c_at : NULL;
  const float *bias = op->bias ? op->bias + r.j0 : NULL;
  if (op->K <= 0 || op->alpha == 0.0f) {
    ct_gemm_scale_c(m, n, op->beta, bias, c, op->ldc);
    return;
  }
  const operand a =
      operand_at((operand){op->A, op->A16},
                 r.b * op->stride_a + (op->trans_a ? r.i0 : r.i0 * op->lda));
  const operand b =
      operand_at((operand){op->B, op->B16},
                 r.b * op->stride_b + (op->trans_b ? r.j0 * op->ldb : r.j0));
  if (bufs)
    gemm_block(arch, op, bs, m, n, a, b, bias, c, c16,
               bufs + (size_t)thread * bs->slot);
  else
    gemm_unpacked(op, m, n, a, b, bias, c);
}

// ---------------------------------------------------------------------------
// Cutting one product along K.

// Rows i0..i1 of C from the K blocks' products parts (nblocks of (M,N)),
// as gemm_block would have stored them block by block: the first is
// alpha * P (beta 0) or fma(alpha, P, beta * old), old the bias row or C;
// every later one fma(alpha, P, c) (beta' = 1). The kernels compute exactly
// this (core/gemm_avx512_store.h, gemm_bf16_emulated.c); fmaf is one
// rounding on every ISA the clones target.
CT_TARGET_CLONES static void add_blocks(const ct_gemm_call *c,
                                        const float *parts, int64_t nblocks,
                                        int64_t i0, int64_t i1) {
  const int64_t N = c->N, mn = c->M * N;
  const float alpha = c->alpha, beta = c->beta;
  for (int64_t i = i0; i < i1; i++) {
    float *restrict row = c->C + i * c->ldc;
    const float *p = parts + i * N;
    const float *old = c->bias ? c->bias : row;
    if (beta == 0.0f)
      for (int64_t j = 0; j < N; j++) row[j] = alpha * p[j];
    else
      for (int64_t j = 0; j < N; j++) row[j] = fmaf(alpha, p[j], beta * old[j]);
    for (int64_t b = 1; b < nblocks; b++) {
      const float *restrict q = p + b * mn;
      for (int64_t j = 0; j < N; j++) row[j] = fmaf(alpha, q[j], row[j]);
    }
  }
}

// Packing words each thread reads for the product, cut over C (threads
// rectangles, along M: each packs its rows of A and all of B) or along K
// (each packs its share of the blocks of A and B, then adds its share of
// the blocks' products into C, reading each product and C's rows).
static bool cut_along_k(const ct_gemm_call *c, int threads, int64_t nblocks) {
  if (c->batch != 1 || threads < 2 || nblocks < 2 * threads) return false;
  const double M = (double)c->M, N = (double)c->N, K = (double)c->K;
  const double over_c = K * (M / threads + N);
  const double over_k = (K * (M + N) + 2.0 * (double)nblocks * M * N) / threads;
  return over_k < over_c;
}

// The product cut along K: block b of op(A) and op(B) multiplied into
// parts + b M N (alpha 1, beta 0: the kernel's sum itself), then added into
// C. False, before touching C, when the buffers cannot be had.
// kb is k_block's depth, nblocks the number of blocks of K.
static bool run_along_k(const ct_gemm_bf16_arch *arch, const ct_gemm_call *c,
                        int threads, int64_t kb, int64_t nblocks) {
  const buffers bs = buffer_sizes(arch, c->M, c->N, kb);
  uint16_t *bufs = (uint16_t *)ct_gemm_scratch_get(
      &tls_bufs, (bs.slot * (size_t)threads + 1) / 2);
  float *parts =
      bufs ? ct_gemm_scratch_get(&tls_parts, (size_t)(nblocks * c->M * c->N))
           : NULL;
  if (!parts) return false;
#pragma omp parallel num_threads(threads)
  {
    uint16_t *buf = bufs + (size_t)omp_get_thread_num() * bs.slot;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < nblocks; b++) {
      const int64_t k0 = b * kb;
      operands op = *c;
      op.K = c->K - k0 < kb ? c->K - k0 : kb;
      const operand ao =
          operand_at((operand){c->A, c->A16}, c->trans_a ? k0 * c->lda : k0);
      const operand bo =
          operand_at((operand){c->B, c->B16}, c->trans_b ? k0 : k0 * c->ldb);
      op.alpha = 1.0f;
      op.beta = 0.0f;
      op.bias = NULL;
      op.ldc = c->N;
      gemm_block(arch, &op, &bs, c->M, c->N, ao, bo, NULL,
                 parts + b * c->M * c->N, NULL, buf);
    }
#pragma omp for schedule(static)
    for (int t = 0; t < threads; t++)
      add_blocks(c, parts, nblocks, t * c->M / threads,
                 (t + 1) * c->M / threads);
  }
  return true;
}

// A bf16 output the strips cannot make (K in several blocks, beta reading
// C, no K, out of memory for the packing): the product into fp32 scratch,
// C's old values widened into it first where beta reads them, then
// rounded into C16.
static void run_via_scratch(const ct_gemm_bf16_arch *arch,
                            const ct_gemm_call *c) {
  const int64_t M = c->M, N = c->N;
  float *out = ct_gemm_scratch_get(&tls_out, (size_t)(M * N));
  ct_gemm_call f = *c;
  f.C16 = NULL;
  f.C = out;
  f.ldc = N;
  if (out && c->beta != 0.0f)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++)
        out[i * N + j] = ct_bf16_bits_to_f32(c->C16[i * c->ldc + j]);
  if (out) ct_gemm_bf16_run(arch, &f);
  for (int64_t i = 0; i < M; i++) {
    if (out) {
      rounder(arch)(out + i * N, N, c->C16 + i * c->ldc);
      continue;
    }
    // No scratch either: element by element.
    for (int64_t j = 0; j < N; j++) {
      float v = 0.0f;
      f.C = &v;
      f.ldc = 1;
      f.M = f.N = 1;
      f.A = c->A ? c->A + (c->trans_a ? i : i * c->lda) : NULL;
      f.A16 = c->A16 ? c->A16 + (c->trans_a ? i : i * c->lda) : NULL;
      f.B = c->B ? c->B + (c->trans_b ? j * c->ldb : j) : NULL;
      f.B16 = c->B16 ? c->B16 + (c->trans_b ? j * c->ldb : j) : NULL;
      f.bias = c->bias ? c->bias + j : NULL;
      if (c->beta != 0.0f) v = ct_bf16_bits_to_f32(c->C16[i * c->ldc + j]);
      gemm_unpacked(&f, 1, 1, (operand){f.A, f.A16}, (operand){f.B, f.B16},
                    f.bias, &v);
      rounder(arch)(&v, 1, c->C16 + i * c->ldc + j);
    }
  }
}

void ct_gemm_bf16_run(const ct_gemm_bf16_arch *arch, const ct_gemm_call *c) {
  if (c->C16 && (c->batch != 1 || c->K <= 0 || c->K > arch->kc ||
                 c->alpha == 0.0f || (c->beta != 0.0f && !c->bias))) {
    run_via_scratch(arch, c);
    return;
  }
  int threads = ct_gemm_threads(c);
  if (c->K > 0 && c->alpha != 0.0f) {
    const int64_t kb = k_block(arch, c->K), nblocks = (c->K + kb - 1) / kb;
    if (cut_along_k(c, threads, nblocks) &&
        run_along_k(arch, c, threads, kb, nblocks))
      return;
  }
  // Whole matrices per thread when the batch divides evenly or is large;
  // otherwise each matrix is cut in `threads` rectangles, across M first
  // (each thread then packs its own rows of A and all of B; measured no
  // slower on the step benchmarks than fp32's least-packing split).
  const int64_t parts = ct_gemm_whole_matrices(threads, c->batch) ? 1 : threads;
  const int64_t mtiles = (c->M + arch->mr - 1) / arch->mr;
  const int64_t mt = parts < mtiles ? parts : mtiles;
  const ct_gemm_grid g =
      ct_gemm_grid_new(c, arch->mr, arch->nr, mt, (parts + mt - 1) / mt);
  if (threads > g.tasks) threads = (int)g.tasks;

  // One slot of packing buffers per thread, taken up front from the calling
  // thread's scratch: either all threads pack or none does.
  const buffers bs = buffer_sizes(arch, c->M, c->N, c->K > 0 ? c->K : 1);
  uint16_t *bufs = NULL;
  if (c->K > 0 && c->alpha != 0.0f)
    bufs = (uint16_t *)ct_gemm_scratch_get(&tls_bufs,
                                           (bs.slot * (size_t)threads + 1) / 2);
  if (c->C16 && !bufs) {
    run_via_scratch(arch, c);
    return;
  }
  if (threads <= 1) {
    for (int64_t t = 0; t < g.tasks; t++)
      run_task(arch, c, &g, &bs, bufs, t, 0);
    return;
  }
  // Dynamic: results do not depend on which thread computes which task.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t t = 0; t < g.tasks; t++)
    run_task(arch, c, &g, &bs, bufs, t, omp_get_thread_num());
}
