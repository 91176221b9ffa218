// Internal interface between the fp32 gemm driver (core/gemm_f32.c) and the
// per-ISA micro-kernels (core/gemm_avx512.c, core/gemm_avx2.c). Not installed.
//
// A micro-kernel computes one MR x NR tile of C:
//
//   pa (kc, MR): A micro-panel, element (i, k) at pa[k * MR + i] (kernel),
//                or at pa[i * rsa + k] (kernel_rows: A rows read in place)
//                or at pa[k * rsa + i] (kernel_cols: A stored transposed,
//                read in place; rsa == MR is a packed panel)
//   pb (kc, NR): B rows, element (k, j) at pb[k * rsb + j]; rsb == NR for a
//                packed panel. Only with masked_b may pb be the caller's B
//                with n < NR columns (the kernel then reads just those).
//   c  (m, n) with row stride ldc, m <= MR, n <= NR:
//      c = alpha * A B + beta * c,  and beta == 0 does not read c;
//      with bias (n floats, not NULL) the old c is taken to be the bias row
//      in every row (c is then only written): c = alpha * A B + beta * bias,
//      the same bits as filling c with the bias rows first.
//
// Each output element is one accumulator summed over k = 0..kc-1 in order,
// independent of its position in the tile: padding rows/columns are zeros
// in the packed panels and are simply not stored.
#ifndef CT_CORE_GEMM_F32_KERNELS_H
#define CT_CORE_GEMM_F32_KERNELS_H

#include <stdint.h>

typedef void (*ct_gemm_kernel_fn)(int64_t kc, const float *pa, int64_t rsa,
                                  const float *pb, int64_t rsb, float *c,
                                  int64_t ldc, float alpha, float beta, int m,
                                  int n, const float *bias);

// Packing helper: copies `rows` rows of w floats (row stride lds) into rows
// of `width` floats at dst (consecutive), zero-filling columns w..width-1.
typedef void (*ct_gemm_copy_fn)(const float *src, int64_t lds, int64_t rows,
                                int w, float *dst, int width);

// Transposing packing helper: B stored (N, K) rows, `cols` of them (row
// stride ldb), each read over depth kc, into one micro-panel (kc, width)
// with element (k, j) at dst[k * width + j] = src[j * ldb + k]; columns
// cols..width-1 are zero-filled.
typedef void (*ct_gemm_pack_bt_fn)(const float *src, int64_t ldb, int64_t kc,
                                   int cols, float *dst, int width);

// Micro-kernels and the cache blocking tuned for them. mc is a multiple of
// mr and nc of nr; kc is the largest depth of one block. kernel_rows and
// kernel_cols may be NULL (A is then packed).
typedef struct ct_gemm_arch {
  int mr, nr;
  int mc, kc, nc;
  ct_gemm_kernel_fn kernel, kernel_rows, kernel_cols;
  int masked_b;
  ct_gemm_copy_fn copy_rows;   // NULL: the portable one in gemm.c
  ct_gemm_pack_bt_fn pack_bt;  // NULL: the portable one in gemm.c
} ct_gemm_arch;

extern const ct_gemm_arch ct_gemm_arch_avx512;
extern const ct_gemm_arch ct_gemm_arch_avx2;

#endif
