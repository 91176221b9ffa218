// Internal interface between the bf16 gemm driver (core/gemm_bf16.c) and its
// kernels (core/gemm_amx.c, core/gemm_avx512bf16.c,
// core/gemm_bf16_emulated.c). Not installed.
//
// Packed operands are bf16 bit patterns (uint16_t), rounded from fp32 by the
// packing. One K block of kp values (kp a multiple of the path's kgran, the
// values past the block's depth are zeros):
//
//   pa (mr, kp): A micro-panel in rows, element (i, k) at pa[i * lda_p + k];
//                rows past m are zeros. AMX loads 16 of these rows as one
//                tile; the vector kernels broadcast the pair (k, k+1).
//   pb (kp, nr): B micro-panel in the pair-interleaved (VNNI) layout,
//                element (k, j) at pb[(k / 2 * nr + j) * 2 + k % 2]: each
//                32-bit word holds rows k and k+1 of one column, which is
//                what vdpbf16ps and tdpbf16ps multiply against a pair of A.
//                Columns past n are zeros.
//   c  (m, n) with row stride ldc: c = alpha * A B + beta * old, where
//      old (m, n) has row stride ldo: the old c itself (old == c, ldo ==
//      ldc), or a bias row read for every row (ldo == 0); beta == 0 does
//      not read old.
//
// Each output element is one accumulator summed over k in order, the same
// wherever it sits in a tile (padding is zeros and is not stored), so the
// split of C over threads never changes a bit.
#ifndef CT_CORE_GEMM_BF16_KERNELS_H
#define CT_CORE_GEMM_BF16_KERNELS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef void (*ct_gemm_bf16_kernel_fn)(int64_t kp, const uint16_t *pa,
                                       int64_t lda_p, const uint16_t *pb,
                                       float *c, int64_t ldc, const float *old,
                                       int64_t ldo, float alpha, float beta,
                                       int m, int n);

// Packing helpers: dst[j] = bf16(src[j]) for j < n; and the pair layout,
// dst[2j] = bf16(r0[j]), dst[2j+1] = bf16(r1[j]) (0 when r1 is NULL).
typedef void (*ct_bf16_round_fn)(const float *src, int64_t n, uint16_t *dst);
typedef void (*ct_bf16_pair_fn)(const float *r0, const float *r1, int64_t n,
                                uint16_t *dst);
// 32-bit words (bf16 pairs) transposed: dst[c * ldd + r] = src[r * lds + c]
// for r < rows, c < cols. The packing of transposed operands rounds into
// pair words first and then moves them with this.
typedef void (*ct_bf16_transpose_fn)(const uint32_t *src, int64_t lds,
                                     int64_t rows, int64_t cols, uint32_t *dst,
                                     int64_t ldd);

// A kernel and the blocking tuned for it. K blocks are padded to a multiple
// of kgran (the depth one instruction consumes); mc is a multiple of mr and
// nc of nr. begin/end (may be NULL) bracket each thread's run of kernel
// calls: AMX loads and releases its tile configuration there.
typedef struct ct_gemm_bf16_arch {
  int mr, nr, kgran;
  int mc, kc, nc;
  ct_gemm_bf16_kernel_fn kernel;
  void (*begin)(void), (*end)(void);
  ct_bf16_round_fn round_row;
  ct_bf16_pair_fn pair_rows;
  ct_bf16_transpose_fn transpose_words;
} ct_gemm_bf16_arch;

extern const ct_gemm_bf16_arch ct_gemm_bf16_arch_amx;
extern const ct_gemm_bf16_arch ct_gemm_bf16_arch_avx512bf16;
extern const ct_gemm_bf16_arch ct_gemm_bf16_arch_emulated;

// CPU support for each hardware path (cpuid and the OS's saved state); the
// AMX check also asks Linux, once, for permission to use tile data.
bool ct_gemm_bf16_cpu_has_avx512bf16(void);
bool ct_gemm_bf16_cpu_has_amx(void);

// The AVX-512 packing helpers, shared by the AMX and AVX512-BF16 paths.
void ct_bf16_round_row_avx512(const float *src, int64_t n, uint16_t *dst);
void ct_bf16_pair_rows_avx512(const float *r0, const float *r1, int64_t n,
                              uint16_t *dst);
// The AVX512-BF16 conversion instruction's packing (subnormal inputs to
// zero; see core/gemm_avx512bf16.c), used by the AMX and AVX512-BF16 paths.
void ct_bf16_round_row_cvt(const float *src, int64_t n, uint16_t *dst);
void ct_bf16_pair_rows_cvt(const float *r0, const float *r1, int64_t n,
                           uint16_t *dst);
// Two rows of bf16 storage as pair words: word j is (r0[j], r1[j]), r1[j]
// 0 when r1 is NULL (a stored operand's rows paired along K, as the
// packers pair rounded ones).
void ct_bf16_pair_stored_rows(const uint16_t *r0, const uint16_t *r1, int64_t n,
                              uint16_t *dst);
void ct_bf16_transpose_words_avx512(const uint32_t *src, int64_t lds,
                                    int64_t rows, int64_t cols, uint32_t *dst,
                                    int64_t ldd);

// fp32 -> bf16, round to nearest even. Adding 0x7fff plus the lowest kept
// bit carries into the kept half exactly when the dropped half is above the
// tie, or at the tie with an odd kept half; the carry out of the largest
// finite values lands on the Inf pattern. NaNs are excluded first (the add
// could carry them into Inf) and made quiet, so a NaN with only low payload
// bits stays a NaN. The vector packers compute the same bits.
static inline uint16_t ct_bf16_round_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float ct_bf16_bits_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

#endif
