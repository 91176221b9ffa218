// Floating-point work counted where it is issued: every matrix product that
// goes through the gemm dispatcher (core/gemm.h) adds 2*M*N*K per product to
// the calling thread's session, in the counter of the precision it ran in;
// kernels that multiply outside it (additive attention) add their own
// products. The fused attention kernel's block products (S = Q K^T, O += P V
// and the five of its backward) go through the dispatcher, so their count
// follows the blocks the kernel really issues (masked blocks skipped).
//
// A counter is an integer sum, so the total does not depend on the order in
// which threads add to it: the same count at any thread count. The OpenMP
// workers of a kernel add to the session that called the kernel (the gemm
// mode they multiply in names it), with a relaxed atomic add: one add per
// product, never per element, and nothing numeric depends on it.
//
// Not here: element-wise work (exp, norms, the optimizer) is not counted;
// the count is of the products a step's gemm-rate floor is made of.
#ifndef CT_CORE_FLOPS_H
#define CT_CORE_FLOPS_H

#include <stdint.h>

#include "core/gemm.h"

typedef struct ct_flops {
  uint64_t fp32;  // products with fp32 inputs
  uint64_t bf16;  // products with inputs rounded to bfloat16
} ct_flops;

// The calling thread's session's counts since its last ct_flops_reset.
ct_flops ct_flops_get(void);
void ct_flops_reset(void);
// Adds n floating-point operations of products in `precision` to the calling
// thread's session, for kernels that multiply without ct_gemm.
void ct_flops_add(ct_gemm_precision precision, uint64_t n);

#endif
