// Vectorized float math over arrays: erf, exp, the exact (erf) GELU with
// its derivative, tanh and sigmoid, for the elementwise ops and the
// recurrent cells; exp in double over float inputs, for the cross-entropy.
// libm's erff, expf and exp are calls the vectorizer cannot use (without
// -ffast-math): erff per element was a fifth of a ViT training step, exp
// in the cross-entropy a sixth of a Multi30k one.
//
// Accuracy: erf within 7e-8 absolute of the exact erf (piecewise degree-7
// polynomials on 16 intervals of [0, 4), 1 beyond); exp within ~2 ulp
// (Cephes expf), exactly 0 below -87.34; tanh within a few ulp, relative
// accuracy kept near 0 (Cephes tanhf); sigmoid 1 / (1 + exp(-x)).
//
// Results depend only on the element's value and the CPU's instruction set
// (AVX-512, AVX2/FMA or plain C, chosen at run time), not on n, alignment
// or where a caller splits an array: tails run through the same vector code.
// Single-threaded; callers parallelize over blocks. (ct_tanh and
// ct_sigmoid, the generic elementwise ops, still use libm.)
#ifndef CT_CORE_VMATH_H
#define CT_CORE_VMATH_H

#include <stdbool.h>
#include <stdint.h>

// y[i] = erf(x[i]); y[i] = exp(x[i]). y may equal x.
void ct_vmath_erf(const float *x, float *y, int64_t n);
void ct_vmath_exp(const float *x, float *y, int64_t n);

// y[i] = tanh(x[i]); y[i] = 1 / (1 + exp(-x[i])). y may equal x.
void ct_vmath_tanh(const float *x, float *y, int64_t n);
void ct_vmath_sigmoid(const float *x, float *y, int64_t n);

// GELU, x Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2:
// y[i] = 0.5 x (1 + erf(x / sqrt 2)). y may equal x.
void ct_vmath_gelu(const float *x, float *y, int64_t n);
// Its backward: gx[i] = g[i] gelu'(x[i]) (or += when accumulate), where
// gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
void ct_vmath_gelu_backward(const float *x, const float *g, float *gx,
                            int64_t n, bool accumulate);

// Double precision, for a softmax over a row of float logits (the
// cross-entropy's): y[i] = exp((double)x[i] - shift), and the sum of those
// values. exp within 1 ulp of the exact value (measured against libm's exp
// in tests/test_vmath.c), 0 below -745.1, +inf above 709.8, NaN for NaN.
// The sum is taken in eight partial sums (element i into sum i % 8, each
// in index order), added as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 +
// s7)): a fixed order, whatever the vector width. y may not alias x.
// The fixed order in which eight partial sums s[0..8) are added:
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) (here, and in the
// layer norm's, convolutions' and cross-entropy's lane sums).
static inline __attribute__((always_inline)) double ct_vmath_total8(
    const double *s) {
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void ct_vmath_exp_shifted_f64(const float *x, double shift, double *y,
                              int64_t n);
double ct_vmath_sum_exp_shifted_f64(const float *x, double shift, int64_t n);

// Rows of at least this many values (vocabularies) take the functions
// above in a softmax; shorter rows (classes, a contrastive batch) keep
// libm's exp and one chain of adds in index order, as before those
// functions existed: there the exps cost little next to a step, and the
// recorded results of the classification, contrastive and captioning
// configs keep their bits.
enum { CT_VMATH_ROW_MIN = 512 };

// log sum_i exp(x[i]) of a row of n >= 1 floats, in double, after its
// largest value m (NaNs skipped, as fmax does): m + log sum exp(x - m).
// Rows of CT_VMATH_ROW_MIN or more values through
// ct_vmath_sum_exp_shifted_f64, shorter ones through libm.
double ct_vmath_logsumexp_f64(const float *x, int64_t n);

// The index of the first NaN or Inf in x[0..n), or -1 when all are finite
// (large arrays are scanned on all threads; the answer is the same).
int64_t ct_vmath_first_nonfinite(const float *x, int64_t n);

#endif
