// Mixed-precision matrix multiply: bf16 inputs, fp32 accumulation and output.
//
//   C (M,N) = alpha * op(bf16(A)) (M,K) * op(bf16(B)) (K,N) + beta * C
//
// Same contract as ct_gemm (core/gemm.h: row-major, trans flags, leading
// dimensions, beta == 0 does not read C), except that every element of A and
// B is rounded to bfloat16 (round to nearest, ties to even; NaN stays NaN,
// +-Inf stays Inf, finite values past the bf16 range round to Inf) while the
// operands are packed. The products are then exact in fp32 and are summed
// in fp32. Inputs and outputs stay fp32 arrays: nothing changes for callers
// but the precision of A and B.
//
//   float A[2 * 3], B[3 * 4], C[2 * 4];
//   ...
//   ct_gemm_bf16(false, false, 2, 4, 3, 1.0f, A, 3, B, 4, 0.0f, C, 4);
//   printf("%s\n", ct_gemm_bf16_path_name(ct_gemm_bf16_active_path()));
//
// Paths, chosen at run time from cpuid: AMX tiles (tdpbf16ps), AVX512-BF16
// dot products (vdpbf16ps), or an emulation that computes the same rounded
// inputs with fp32 FMAs. Hardware paths follow the instructions' rules:
// they round with vcvtne2ps2bf16, which reads subnormal fp32 inputs as zero
// (so the largest subnormals, which round up to 2^-126 above, give 0), and
// flush subnormal products; the emulated path does neither, and gives the
// same bits on every x86-64 CPU.
//
// Determinism: for a given path every output element is one fixed sequence
// of fp32 operations over K (K is never split across threads), so results
// are bit-identical for any thread count. Different paths may differ in the
// last bits (they group the sum differently).
//
// bf16 storage of activations (CT_BF16 tensors, core/tensor.h) rounds with
// ct_bf16_store, which is the packing's rounding on the session's bf16
// path: a bf16 product of the stored values, widened back by
// ct_bf16_load, gives the same bits as one of the fp32 values.
#ifndef CT_CORE_GEMM_BF16_H
#define CT_CORE_GEMM_BF16_H

#include <stdbool.h>
#include <stdint.h>

void ct_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                  float alpha, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float beta, float *C, int64_t ldc);

// `batch` independent products, as ct_gemm_batched: matrix i reads
// A + i*stride_a, B + i*stride_b and writes C + i*stride_c; a stride of 0
// shares one matrix (stride_c == 0 accumulates the products in batch order).
void ct_gemm_bf16_batched(bool trans_a, bool trans_b, int64_t M, int64_t N,
                          int64_t K, float alpha, const float *A, int64_t lda,
                          int64_t stride_a, const float *B, int64_t ldb,
                          int64_t stride_b, float beta, float *C, int64_t ldc,
                          int64_t stride_c, int64_t batch);

// C (M,N) = op(bf16(A)) op(bf16(B)) + bias, bias (N) added to every row:
// the same bits as filling C with the bias rows and calling ct_gemm_bf16
// with alpha 1, beta 1, but C is never read (ct_gemm_bias's contract).
void ct_gemm_bf16_bias(bool trans_a, bool trans_b, int64_t M, int64_t N,
                       int64_t K, const float *A, int64_t lda, const float *B,
                       int64_t ldb, const float *bias, float *C, int64_t ldc);

// Kernel selection, a setting of the calling thread's session. AUTO picks
// the best the CPU (and, for AMX, the kernel's permission to use tile state)
// allows; the others force a path, and a path the CPU lacks falls back to
// the best supported one below it.
typedef enum ct_gemm_bf16_path {
  CT_GEMM_BF16_AUTO,
  CT_GEMM_BF16_EMULATED,
  CT_GEMM_BF16_AVX512BF16,
  CT_GEMM_BF16_AMX,
} ct_gemm_bf16_path;

void ct_gemm_bf16_force_path(ct_gemm_bf16_path path);
// The path ct_gemm_bf16 uses now (never CT_GEMM_BF16_AUTO).
ct_gemm_bf16_path ct_gemm_bf16_active_path(void);
// "auto", "emulated", "avx512bf16", "amx".
const char *ct_gemm_bf16_path_name(ct_gemm_bf16_path path);

// The rounding the packing applies, one value at a time: the bf16 bit
// pattern of x (round to nearest even, NaN kept as a quiet NaN), and back
// (exact).
uint16_t ct_bf16_from_f32(float x);
float ct_bf16_to_f32(uint16_t h);
// An operand of ct_gemm_bf16_stored: fp32 values (f), or, when f is NULL,
// bf16 bits (h), with leading dimension ld in elements.
typedef struct ct_gemm_src {
  const float *f;
  const uint16_t *h;
  int64_t ld;
} ct_gemm_src;
// ct_gemm_bf16 with the bias of ct_gemm_bf16_bias (or NULL) and the row
// sums of ct_gemm_sum_a (or NULL; A must then be fp32), where an operand may
// be bf16 storage: its bits are packed as they are, which gives the bits
// of the same product of the widened values, without widening them. With
// C16 (not NULL) the output is bf16 storage instead of C: each value is
// the fp32 result rounded as ct_bf16_store rounds (beta reads C16's values
// widened).
void ct_gemm_bf16_stored(bool trans_a, bool trans_b, int64_t M, int64_t N,
                         int64_t K, float alpha, const ct_gemm_src *A,
                         const ct_gemm_src *B, float beta, const float *bias,
                         float *C, uint16_t *C16, int64_t ldc, float *a_sums);
// n values rounded as the calling session's bf16 products round them while
// packing (on the AVX512-BF16 and AMX paths the conversion instruction,
// which reads subnormal inputs as zero), and widened back (exact).
void ct_bf16_store(const float *src, int64_t n, uint16_t *dst);
void ct_bf16_load(const uint16_t *src, int64_t n, float *dst);

#endif
