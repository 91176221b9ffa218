// Single-precision matrix multiply, row-major, the BLAS sgemm contract.
//
//   C (M,N) = alpha * op(A) (M,K) * op(B) (K,N) + beta * C
//
// op(A) is A stored (M,K) with row stride lda >= K, or with trans_a A stored
// (K,M) with lda >= M; likewise op(B) is (K,N), or (N,K) stored with trans_b.
// beta == 0 overwrites C without reading it (NaN in C is not propagated).
//
// Determinism: every output element is a dot product over K accumulated in one
// fixed order, whatever the thread count; K is never split across threads.
//
// The precision of the products and the forced kernel paths are settings of
// the calling thread's session (core/session.h): two threads in two sessions
// may multiply in different precisions at once.
#ifndef CT_CORE_GEMM_H
#define CT_CORE_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/gemm_bf16.h"
#include "core/session.h"

void ct_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
             float alpha, const float *A, int64_t lda, const float *B,
             int64_t ldb, float beta, float *C, int64_t ldc);

// `batch` independent products; matrix i reads A + i*stride_a, B + i*stride_b
// and writes C + i*stride_c. A stride of 0 shares one matrix across the batch.
void ct_gemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N,
                     int64_t K, float alpha, const float *A, int64_t lda,
                     int64_t stride_a, const float *B, int64_t ldb,
                     int64_t stride_b, float beta, float *C, int64_t ldc,
                     int64_t stride_c, int64_t batch);

// C (M,N) = op(A) op(B) + bias, bias (N) added to every row: the same bits
// as filling C with the bias rows and calling ct_gemm with alpha 1, beta 1
// (each element is bias + its first K block, then the later blocks), but C
// is never read: the micro-kernel takes the bias where it would load C.
void ct_gemm_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  const float *bias, float *C, int64_t ldc);

// ct_gemm, and a_sums (M) += the row sums of op(A): a_sums[i] += the sum
// over k of op(A)[i][k], taken in float from 0 with k in order (so for A
// stored transposed, the column sums of A (K,M) as the bias gradient of a
// linear wants them). A stored transposed is summed from the panels the
// product packs anyway, instead of being read again.
void ct_gemm_sum_a(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                   float alpha, const float *A, int64_t lda, const float *B,
                   int64_t ldb, float beta, float *C, int64_t ldc,
                   float *a_sums);

// Micro-kernel selection. AUTO picks the best the CPU supports at run time;
// the others force a path (tests use this to cover the fallbacks). Forcing a
// path the CPU lacks falls back to the best supported one below it.
typedef enum ct_gemm_path {
  CT_GEMM_AUTO,
  CT_GEMM_SCALAR,
  CT_GEMM_AVX2,
  CT_GEMM_AVX512,
} ct_gemm_path;

void ct_gemm_force_path(ct_gemm_path path);
// The path ct_gemm uses now (never CT_GEMM_AUTO).
ct_gemm_path ct_gemm_active_path(void);
const char *ct_gemm_path_name(ct_gemm_path path);

// Precision of the products, a setting of the calling thread's session.
// With CT_GEMM_BF16 every call above rounds the elements of A and B to
// bfloat16 while packing and accumulates in fp32 (ct_gemm_bf16,
// core/gemm_bf16.h); C, the bias and the row sums of ct_gemm_sum_a stay fp32
// (the sums are of the unrounded A). Meant to be set once before a run's
// first product (`[train] precision`), never while a product is running.
typedef enum ct_gemm_precision { CT_GEMM_FP32, CT_GEMM_BF16 } ct_gemm_precision;

void ct_gemm_set_precision(ct_gemm_precision precision);
ct_gemm_precision ct_gemm_get_precision(void);
// Whether models keep, in CT_GEMM_BF16 precision, the activations whose
// readers are bf16 products in bf16 storage (ct_nn_activation_dtype,
// nn/module.h): on by default; a setting of the calling thread's session.
void ct_gemm_set_bf16_activations(bool on);
bool ct_gemm_bf16_activations(void);

// All of a session's gemm settings at once: what a kernel captures in the
// calling thread before it multiplies from its own OpenMP workers, which
// are bound to no session (core/attention_kernel.c).
typedef struct ct_gemm_mode {
  ct_gemm_precision precision;
  ct_gemm_path path;            // forced fp32 path (AUTO: the best)
  ct_gemm_bf16_path bf16_path;  // forced bf16 path (AUTO: the best)
  // The session whose work counters (core/flops.h) the products add to
  // (NULL: none).
  ct_session *session;
} ct_gemm_mode;

ct_gemm_mode ct_gemm_current_mode(void);
// ct_bf16_store (core/gemm_bf16.h) with the rounding of `mode`'s bf16 path,
// on the calling thread only: for kernels' OpenMP workers.
void ct_bf16_store_in_mode(const ct_gemm_mode *mode, const float *src,
                           int64_t n, uint16_t *dst);
// ct_gemm with the settings of `mode` instead of the session's.
void ct_gemm_in_mode(const ct_gemm_mode *mode, bool trans_a, bool trans_b,
                     int64_t M, int64_t N, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb,
                     float beta, float *C, int64_t ldc);

#endif
