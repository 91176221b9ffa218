// The AVX-512 epilogue both AVX-512 gemm kernels end a tile row with
// (core/gemm_avx512.c, core/gemm_avx512bf16.c). Not installed; include it
// after <immintrin.h> in a file compiled for x86.
#ifndef CT_CORE_GEMM_AVX512_STORE_H
#define CT_CORE_GEMM_AVX512_STORE_H

#include <immintrin.h>

// c = alpha * acc + beta * old for the columns in mask (old read at `old`:
// c itself, or the bias row); beta_zero stores alpha * acc without reading
// old (so a NaN there is not propagated).
static inline __attribute__((always_inline, target("avx512f"))) void
ct_avx512_store_row(float *c, const float *old, __m512 acc, __mmask16 mask,
                    __m512 alpha, __m512 beta, int beta_zero) {
  __m512 r = beta_zero
                 ? _mm512_mul_ps(alpha, acc)
                 : _mm512_fmadd_ps(
                       alpha, acc,
                       _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(mask, old)));
  _mm512_mask_storeu_ps(c, mask, r);
}

#endif
