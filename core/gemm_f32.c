// Packed, cache-blocked single-precision gemm (GotoBLAS/BLIS structure):
// the fp32 driver, its packing routines, the portable scalar micro-kernel,
// and the OpenMP split of the work. The vector micro-kernels live in
// gemm_avx512.c and gemm_avx2.c; which one runs is the dispatcher's choice
// (core/gemm.c), handed in as a ct_gemm_arch.
//
// Loop nest for one product, C (M,N) += op(A) (M,K) op(B) (K,N):
//
//   for jc in N by NC:            B block  (KC,NC) packed once, stays in L2
//     for pc in K by KC:          fixed K-block boundaries (depend on K only)
//       pack B(pc, jc)
//       for ic in M by MC:        A block  (MC,KC) packed
//         pack A(ic, pc)
//         for ir in MC by MR:     A micro-panel (KC,MR) stays in L1
//           for jr in NC by NR:   B micro-panels stream from L2
//             micro-kernel: C tile (MR,NR) = alpha * A B + beta' * C tile
//
// beta' is beta for the first K block and 1 afterwards, so every element of
// C is one fixed sequence of FMAs over K, whatever the thread count.
//
// Two neighbouring passes of a linear layer ride along (same bits as doing
// them apart): ct_gemm_bias hands the micro-kernel the bias row where the
// first K block would load the old C (no fill pass over C), and
// ct_gemm_sum_a sums the rows of a stored-transposed A block by block just
// before the kernels read the block (after packing it, where it is packed),
// so it is in cache for them (a bias gradient without another pass over
// dy).
//
// Packing copies without transposing where the kernel allows it: AVX-512
// reads A in place, by rows when A is row-major (kernel_rows) and k-major
// when it is stored transposed (kernel_cols), and products of few rows or
// narrow rows read a row-major B in place. Only B stored transposed (and A,
// for kernels without a rows layout) is transposed while packing.
//
// Threads take independent rectangles of C (and whole matrices of a batch),
// each running the loop nest above with its own packing buffers; K is never
// split. The rectangles are unions of whole MR x NR tiles and a tile's
// arithmetic does not depend on where it sits, so results are bit-identical
// for any thread count.
//
// Not here: mixed precision. Packing is kept apart from the micro-kernels
// because it is where a later bf16 path (AMX tiles or AVX512-BF16 dot
// products) rounds its inputs to bf16, in the layout its micro-kernel wants
// (such a path always packs B: the in-place B read is an fp32 shortcut);
// the micro-kernels stay pure compute on panels.
#include "core/gemm_internal.h"
#include "core/target_clones.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Portable scalar micro-kernel (4 x 16). Plain C: the compiler may vectorize
// it with the baseline ISA (SSE2), never with FMA (ISO C mode contracts
// nothing), so it runs on any CPU.

#define SCALAR_MR 4
#define SCALAR_NR 16

static void kernel_scalar(int64_t kc, const float *restrict pa, int64_t rsa,
                          const float *restrict pb, int64_t rsb,
                          float *restrict c, int64_t ldc, float alpha,
                          float beta, int m, int n, const float *bias) {
  (void)rsa;
  float acc[SCALAR_MR][SCALAR_NR] = {{0}};
  for (int64_t k = 0; k < kc; k++) {
    for (int i = 0; i < SCALAR_MR; i++)
      for (int j = 0; j < SCALAR_NR; j++) acc[i][j] += pa[i] * pb[j];
    pa += SCALAR_MR;
    pb += rsb;
  }
  for (int i = 0; i < m; i++) {
    float *row = c + i * ldc;
    const float *in = bias ? bias : row;  // the old values
    if (beta == 0.0f)
      for (int j = 0; j < n; j++) row[j] = alpha * acc[i][j];
    else
      for (int j = 0; j < n; j++) row[j] = alpha * acc[i][j] + beta * in[j];
  }
}

// Portable packing helper (ct_gemm_copy_fn).
static void copy_rows(const float *src, int64_t lds, int64_t rows, int w,
                      float *dst, int width) {
  for (int64_t r = 0; r < rows; r++, src += lds, dst += width) {
    memcpy(dst, src, (size_t)w * sizeof(float));
    for (int j = w; j < width; j++) dst[j] = 0.0f;
  }
}

// Portable transposing packing helper (ct_gemm_pack_bt_fn).
static void pack_bt(const float *src, int64_t ldb, int64_t kc, int cols,
                    float *dst, int width) {
  for (int j = 0; j < cols; j++) {
    const float *s = src + j * ldb;
    float *d = dst + j;
    for (int64_t k = 0; k < kc; k++) d[k * width] = s[k];
  }
  for (int j = cols; j < width; j++)
    for (int64_t k = 0; k < kc; k++) dst[k * width + j] = 0.0f;
}

static ct_gemm_copy_fn copier(const ct_gemm_arch *arch) {
  return arch->copy_rows ? arch->copy_rows : copy_rows;
}

const ct_gemm_arch ct_gemm_arch_scalar = {.mr = SCALAR_MR,
                                          .nr = SCALAR_NR,
                                          .mc = SCALAR_MR * 32,
                                          .kc = 256,
                                          .nc = 1024,
                                          .kernel = kernel_scalar,
                                          .copy_rows = copy_rows,
                                          .pack_bt = pack_bt};

// ---------------------------------------------------------------------------
// Packing. This is where a bf16 path would round its inputs (see top).

// Per-thread packing buffers (core/gemm_internal.h).
static _Thread_local ct_gemm_scratch tls_a, tls_b, tls_sums;

// A (kc, w) block with row stride ld into consecutive panels of `width`
// columns, each (kc, width) and zero-padded past w. Bands of 8 rows walk each
// source row front to back across all panels: the hardware prefetchers see
// a few long streams instead of one short run per row and panel.
static void copy_panels(const ct_gemm_arch *arch, const float *src, int64_t ld,
                        int64_t kc, int64_t w, int width, float *dst) {
  const ct_gemm_copy_fn copy = copier(arch);
  for (int64_t k = 0; k < kc; k += 8) {
    int64_t rows = kc - k < 8 ? kc - k : 8;
    float *d = dst + k * width;
    for (int64_t j = 0; j < w; j += width, d += kc * width) {
      int cols = w - j < width ? (int)(w - j) : width;
      copy(src + k * ld + j, ld, rows, cols, d, width);
    }
  }
}

// A block: rows i0..i0+mc, depth k0..k0+kc of op(A), in micro-panels of mr
// rows (rows past mc are 0), each in one of two layouts:
//   k-major (kernel):    (kc, mr), element (i, k) at k * mr + i
//   rows (kernel_rows):  (mr, lda_p), element (i, k) at i * lda_p + k
// Each layout is a plain copy from one storage order of A (rows from A
// (M,K), k-major from A^T stored (K,M)), so packing never transposes A.
static void pack_a(const ct_gemm_arch *arch, bool trans, bool rows_layout,
                   const float *A, int64_t lda, int64_t i0, int64_t k0,
                   int64_t mc, int64_t kc, int64_t lda_p, float *dst) {
  const int mr = arch->mr;
  if (trans) {  // A stored (K, M): each k is a contiguous run of rows
    copy_panels(arch, A + k0 * lda + i0, lda, kc, mc, mr, dst);
    return;
  }
  int64_t panel = rows_layout ? mr * lda_p : mr * kc;
  for (int64_t ip = 0; ip < mc; ip += mr, dst += panel) {
    int rows = mc - ip < mr ? (int)(mc - ip) : mr;
    if (rows_layout) {
      for (int i = 0; i < mr; i++) {
        float *d = dst + i * lda_p;
        if (i < rows)
          memcpy(d, A + (i0 + ip + i) * lda + k0, (size_t)kc * sizeof(float));
        else
          memset(d, 0, (size_t)kc * sizeof(float));
      }
    } else {  // A stored (M, K) for a kernel without a rows layout: transpose
      for (int i = 0; i < rows; i++) {
        const float *src = A + (i0 + ip + i) * lda + k0;
        float *d = dst + i;
        for (int64_t k = 0; k < kc; k++) d[k * mr] = src[k];
      }
      for (int i = rows; i < mr; i++)
        for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = 0.0f;
    }
  }
}

// B block: depth k0..k0+kc, columns j0..j0+nc of op(B) into micro-panels of
// nr columns, each (kc, nr) with element (k, j) at k * nr + j; columns past
// nc are 0.
static void pack_b(const ct_gemm_arch *arch, bool trans, const float *B,
                   int64_t ldb, int64_t k0, int64_t j0, int64_t kc, int64_t nc,
                   float *dst) {
  const int nr = arch->nr;
  if (!trans) {  // B stored (K, N): each k is a contiguous run of columns
    copy_panels(arch, B + k0 * ldb + j0, ldb, kc, nc, nr, dst);
    return;
  }
  // B stored (N, K): transpose columns into the panels.
  const ct_gemm_pack_bt_fn pack = arch->pack_bt ? arch->pack_bt : pack_bt;
  for (int64_t jp = 0; jp < nc; jp += nr, dst += nr * kc) {
    int cols = nc - jp < nr ? (int)(nc - jp) : nr;
    pack(B + (j0 + jp) * ldb + k0, ldb, kc, cols, dst, nr);
  }
}

// ---------------------------------------------------------------------------
// One product on one thread.

// The call's arguments; a task's sub-problem passes its own pointers.
typedef ct_gemm_call operands;

// acc[i] += sum over k < kc of src[k * lds + i], i < w, k in order: the
// block of a stored-transposed A the kernels are about to read (or that was
// just packed), so the reads warm the cache for them.
// Compiled per ISA: wider vectors across i, the same sums.
CT_TARGET_CLONES static void sum_block_a(const float *src, int64_t lds,
                                         int64_t kc, int64_t w,
                                         float *restrict acc) {
  for (int64_t k = 0; k < kc; k++) {
    const float *row = src + k * lds;
    for (int64_t i = 0; i < w; i++) acc[i] += row[i];
  }
}

// a_sums[i] += sum over k of op(A)[i][k] for the sub-problem's m rows,
// straight from A: each sum in float from 0, k in order (the order
// gemm_block keeps when it sums the packed panels instead). A stored
// transposed is read row by row into a zeroed buffer (the same sums).
static void add_a_sums(const operands *op, int64_t m, const float *A,
                       float *a_sums) {
  float *acc = op->trans_a ? calloc((size_t)m, sizeof *acc) : NULL;
  if (acc) {
    sum_block_a(A, op->lda, op->K, m, acc);
    for (int64_t i = 0; i < m; i++) a_sums[i] += acc[i];
    free(acc);
    return;
  }
  for (int64_t i = 0; i < m; i++) {
    float acc1 = 0.0f;
    for (int64_t k = 0; k < op->K; k++)
      acc1 += op->trans_a ? A[k * op->lda + i] : A[i * op->lda + k];
    a_sums[i] += acc1;
  }
}

// Depth of the K blocks: as even as possible, at most arch->kc. Depends on K
// and the path only, so the sum order is the same for any split of C.
static int64_t k_block(const ct_gemm_arch *arch, int64_t K) {
  int64_t nblocks = (K + arch->kc - 1) / arch->kc;
  return ct_gemm_round_up((K + nblocks - 1) / nblocks, 8);
}

// A row-major A is read in place by the rows kernel (no copy into the
// padded rows layout) unless its row stride is a multiple of 4 KiB, where
// the 14 rows of a panel, read side by side, all fall in one L1 set (1024²
// in place: 102 against 160 GFLOP/s on one thread). At 2 KiB they share two
// sets, which with the next panel prefetched (prefetch_a_panel) costs less
// than the copy when there are few column tiles to spread it over: 6400 x
// 128 x 512, two threads of the Zen 5, 252-295 -> 318-328 GFLOP/s (README
// "gemm"); 2 KiB strides were copied before the prefetch. An
// A stored transposed is read in place by the columns kernel at any stride:
// there each k is one run of 14 floats, lda apart, a panel streams from L2
// whatever the stride, and the copy cost more than the stride (a weight
// gradient 512 x 128 x 6400 with lda 512: 253 -> 318-345 GFLOP/s on 2
// threads of a Zen 5 EPYC, README "gemm"). Only a last, partial panel is
// still packed: the kernel reads all mr rows. The arithmetic is the same
// either way.
static bool a_in_place(int64_t lda, bool columns) {
  return columns || lda % 1024 != 0;
}

// Asks for the rows of the A micro-panel the kernels read next (in place,
// rows layout: mr rows of kc floats, lda apart) to be brought into L1 while
// the kernels work on this one. The hardware prefetchers do not follow 14
// interleaved row streams, so each panel's first tile otherwise waited on
// memory for its A lines (one tile in N / 32 of them: a quarter of the
// panel's work at N = 128). Measured on one thread of the Zen 5 EPYC:
// 6400 x 384 x 128 180-184 -> 190-192 GFLOP/s, 6400 x 128 x 384 163-166 ->
// 169-176 (README "gemm"). A hint: no value changes.
static void prefetch_a_panel(const float *a, int64_t lda, int mr, int64_t kc) {
  for (int i = 0; i < mr; i++) {
    const float *row = a + i * lda;
    for (int64_t k = 0; k < kc; k += 16) __builtin_prefetch(row + k, 0, 3);
    __builtin_prefetch(row + kc - 1, 0, 3);
  }
}

// Products with at most this many rows read a row-major B in place instead
// of packing it: each B panel is then used by too few A panels to repay the
// copy. So do products of any size whose B rows hold at most
// DIRECT_B_MAX_LD floats (the weight gradients' activations, the input
// gradients' weights): their k steps are at most 2 KiB apart, so a block
// stays in L2 and the prefetchers follow a panel's rows (measured faster
// than the copy, README "gemm"); longer rows put the steps on few L1 sets.
// The arithmetic is the same either way.
#define DIRECT_B_MAX_ROWS 64
#define DIRECT_B_MAX_LD 512

// C (m, n) = alpha * op(A) op(B) + beta * C, where A, B, C (and bias, when
// op->bias) already point at the sub-problem's first row/column; with a bias
// the first K block reads the old C from the bias row instead of C. With
// a_sums (m), the row sums of op(A) are added to it; a stored-transposed A
// is summed block by block just before the kernels read each block (after
// packing it, where it is packed), during the first column block. Returns
// false, before touching C or a_sums, if the buffers cannot be allocated.
static bool gemm_block(const ct_gemm_arch *arch, const operands *op, int64_t m,
                       int64_t n, const float *A, const float *B,
                       const float *bias, float *C, float *a_sums) {
  const int mr = arch->mr, nr = arch->nr;
  const int64_t K = op->K, kb = k_block(arch, K);
  const bool rows_a = arch->kernel_rows && !op->trans_a;
  const bool cols_a = arch->kernel_cols && op->trans_a;
  const bool inplace_a = (rows_a || cols_a) && a_in_place(op->lda, cols_a);
  const bool direct_b = arch->masked_b && !op->trans_b &&
                        (m <= DIRECT_B_MAX_ROWS || op->ldb <= DIRECT_B_MAX_LD);
  const ct_gemm_kernel_fn kernel =
      rows_a ? arch->kernel_rows : (cols_a ? arch->kernel_cols : arch->kernel);
  // Row stride of the rows layout: padded off a multiple of 4 KiB so the
  // 14 rows of a panel do not fight over the same L1 sets.
  const int64_t lda_p = ct_gemm_round_up(kb, 16) + 16;
  const int64_t nc_max = n < arch->nc ? ct_gemm_round_up(n, nr) : arch->nc;
  const int64_t mc_max = m < arch->mc ? ct_gemm_round_up(m, mr) : arch->mc;
  float *pb =
      direct_b ? NULL : ct_gemm_scratch_get(&tls_b, (size_t)(kb * nc_max));
  float *pa = ct_gemm_scratch_get(&tls_a, (size_t)(lda_p * mc_max));
  if (!pa || (!pb && !direct_b)) return false;
  // Row sums of a transposed A are taken block by block as it is packed:
  // acc holds them for all m rows.
  const bool sum_panels = a_sums && op->trans_a;
  float *acc = NULL;
  if (sum_panels) {
    acc = ct_gemm_scratch_get(&tls_sums, (size_t)m);
    if (!acc) return false;
    memset(acc, 0, (size_t)m * sizeof(float));
  } else if (a_sums) {
    add_a_sums(op, m, A, a_sums);
  }

  for (int64_t jc = 0; jc < n; jc += arch->nc) {
    int64_t nc = n - jc < arch->nc ? n - jc : arch->nc;
    for (int64_t pc = 0; pc < K; pc += kb) {
      int64_t kc = K - pc < kb ? K - pc : kb;
      float beta = pc == 0 ? op->beta : 1.0f;
      const float *bias_jc = pc == 0 && bias ? bias + jc : NULL;
      // B panel jr: rows of nr floats, rsb apart.
      const float *b0 = direct_b ? B + pc * op->ldb + jc : pb;
      int64_t rsb = direct_b ? op->ldb : nr;
      int64_t panel_b = direct_b ? nr : nr * kc;
      if (!direct_b) {
        const uint64_t t0 = ct_gemm_pack_clock(op);
        pack_b(arch, op->trans_b, B, op->ldb, pc, jc, kc, nc, pb);
        ct_gemm_pack_done(op, t0);
      }
      for (int64_t ic = 0; ic < m; ic += arch->mc) {
        int64_t mc = m - ic < arch->mc ? m - ic : arch->mc;
        const int64_t full = mc / mr * mr;  // rows in whole panels
        const uint64_t t0 = ct_gemm_pack_clock(op);
        if (!inplace_a)
          pack_a(arch, op->trans_a, rows_a, A, op->lda, ic, pc, mc, kc, lda_p,
                 pa);
        else if (full < mc)  // the partial panel, at pa
          pack_a(arch, op->trans_a, rows_a, A, op->lda, ic + full, pc,
                 mc - full, kc, lda_p, pa);
        ct_gemm_pack_done(op, t0);
        if (sum_panels && jc == 0)
          sum_block_a(A + pc * op->lda + ic, op->lda, kc, mc, acc + ic);
        int64_t panel_a = rows_a ? mr * lda_p : mr * kc;
        for (int64_t ir = 0; ir < mc; ir += mr) {
          int mt = mc - ir < mr ? (int)(mc - ir) : mr;
          const float *a = pa + ir / mr * panel_a;
          // Rows: lda_p apart; columns: a packed panel's mr (kernel_cols).
          int64_t rsa = rows_a ? lda_p : mr;
          if (inplace_a && ir < full) {
            a = A +
                (cols_a ? pc * op->lda + ic + ir : (ic + ir) * op->lda + pc);
            rsa = op->lda;
          } else if (inplace_a) {
            a = pa;
          }
          float *c = C + (ic + ir) * op->ldc + jc;
          if (inplace_a && rows_a && ic + ir + 2 * mr <= m)
            prefetch_a_panel(A + (ic + ir + mr) * op->lda + pc, op->lda, mr,
                             kc);
          for (int64_t jr = 0; jr < nc; jr += nr) {
            int nt = nc - jr < nr ? (int)(nc - jr) : nr;
            kernel(kc, a, rsa, b0 + jr / nr * panel_b, rsb, c + jr, op->ldc,
                   op->alpha, beta, mt, nt, bias_jc ? bias_jc + jr : NULL);
          }
        }
      }
    }
  }
  if (sum_panels)
    for (int64_t i = 0; i < m; i++) a_sums[i] += acc[i];
  return true;
}

// Out of memory for packing buffers: plain loops rather than a half-written
// C (gemm_block fails before it writes anything).
static void gemm_unpacked(const operands *op, int64_t m, int64_t n,
                          const float *A, const float *B, const float *bias,
                          float *C) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < op->K; k++)
        acc += (op->trans_a ? A[k * op->lda + i] : A[i * op->lda + k]) *
               (op->trans_b ? B[j * op->ldb + k] : B[k * op->ldb + j]);
      float *c = C + i * op->ldc + j;
      float old = bias ? bias[j] : *c;
      *c =
          op->beta == 0.0f ? op->alpha * acc : op->alpha * acc + op->beta * old;
    }
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Each sum is its own chain over k, so the rows of op(A) split over threads
// in any way give the same sums at any thread count. Each thread takes one
// run of whole blocks of 16 (a cache line of a stored-transposed A's rows):
// a stored-transposed A is then read in one pass per thread, each k's run
// of its columns contiguous (one pass per block of 16, each reading a line
// every lda floats, ran at about half the speed: 512 x 6400, 2 threads).
void ct_gemm_add_a_sums(bool trans_a, int64_t M, int64_t K, const float *A,
                        int64_t lda, float *a_sums) {
  const operands op = {.trans_a = trans_a, .K = K, .lda = lda};
  const int64_t blocks = (M + 15) / 16;
  const bool team =
      blocks > 1 && (double)M * K >= 262144.0 && !omp_in_parallel();
  const int64_t runs = team ? min64(blocks, omp_get_max_threads()) : 1;
#pragma omp parallel for schedule(static) if (team) num_threads(runs)
  for (int64_t r = 0; r < runs; r++) {
    const int64_t i0 = 16 * (blocks * r / runs);
    const int64_t i1 = min64(M, 16 * (blocks * (r + 1) / runs));
    add_a_sums(&op, i1 - i0, A + (trans_a ? i0 : i0 * lda), a_sums + i0);
  }
}

// ---------------------------------------------------------------------------
// Splitting the work over threads.

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Splits one matrix into mt x nt rectangles of whole tiles, mt * nt close to
// `parts`, preferring the split that packs the least (A rows + B columns per
// rectangle).
static void split_matrix(int64_t mtiles, int64_t ntiles, int64_t mr, int64_t nr,
                         int64_t parts, int64_t *mt, int64_t *nt) {
  double best = -1.0;
  *mt = *nt = 1;
  for (int64_t a = 1; a <= parts; a++) {
    if (parts % a) continue;
    int64_t b = parts / a;
    int64_t ma = a < mtiles ? a : mtiles, nb = b < ntiles ? b : ntiles;
    double cost = (double)mtiles * mr / ma + (double)ntiles * nr / nb;
    if (ma * nb < parts) cost *= 4.0 * parts / (ma * nb);  // lost threads
    if (best < 0 || cost < best) {
      best = cost;
      *mt = ma;
      *nt = nb;
    }
  }
}

// Task t of the grid: one rectangle of one matrix of the batch.
static void run_task(const ct_gemm_arch *arch, const operands *op,
                     const ct_gemm_grid *g, int64_t t) {
  const ct_gemm_rect r = ct_gemm_grid_rect(g, op, t);
  const int64_t m = r.i1 - r.i0, n = r.j1 - r.j0;
  float *c = op->C + r.b * op->stride_c + r.i0 * op->ldc + r.j0;
  const float *bias = op->bias ? op->bias + r.j0 : NULL;
  // The row sums of op(A) go with the rectangles of the first column.
  float *a_sums = op->a_sums && r.j0 == 0 ? op->a_sums + r.i0 : NULL;
  const float *a =
      op->A + r.b * op->stride_a + (op->trans_a ? r.i0 : r.i0 * op->lda);
  if (op->K <= 0 || op->alpha == 0.0f) {
    ct_gemm_scale_c(m, n, op->beta, bias, c, op->ldc);
    if (a_sums) add_a_sums(op, m, a, a_sums);
    return;
  }
  const float *b =
      op->B + r.b * op->stride_b + (op->trans_b ? r.j0 * op->ldb : r.j0);
  if (!gemm_block(arch, op, m, n, a, b, bias, c, a_sums)) {
    gemm_unpacked(op, m, n, a, b, bias, c);
    if (a_sums) add_a_sums(op, m, a, a_sums);
  }
}

void ct_gemm_f32_run(const ct_gemm_arch *arch, const ct_gemm_call *c) {
  int threads = ct_gemm_threads(c);
  // Parts per matrix: whole matrices per thread when the batch divides
  // evenly or is large; otherwise split each matrix too.
  int64_t parts = 1;
  if (!ct_gemm_whole_matrices(threads, c->batch))
    parts = threads / gcd64(c->batch % threads, threads);
  int64_t mt = 1, nt = 1;
  split_matrix((c->M + arch->mr - 1) / arch->mr,
               (c->N + arch->nr - 1) / arch->nr, arch->mr, arch->nr, parts, &mt,
               &nt);
  const ct_gemm_grid g = ct_gemm_grid_new(c, arch->mr, arch->nr, mt, nt);
  if (threads > g.tasks) threads = (int)g.tasks;
  // One thread (small products, and the calls from inside attention's own
  // parallel region, thousands per training step) skips the OpenMP runtime.
  if (threads <= 1) {
    for (int64_t t = 0; t < g.tasks; t++) run_task(arch, c, &g, t);
    return;
  }
  // Dynamic: a thread that is descheduled (a busy machine) does not hold
  // the others back. The results do not depend on who computes which task.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t t = 0; t < g.tasks; t++) run_task(arch, c, &g, t);
}
