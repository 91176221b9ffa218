// Vectorized erf, exp, exact GELU, tanh and sigmoid over arrays (see
// vmath.h).
//
// erf(|x|) on [0, 4): 16 intervals [k/4, (k+1)/4), on each a degree-7
// polynomial in s = 4|x| - k (exact in float), least-squares fitted to the
// double erf at 400 Chebyshev nodes and rounded to float; interval 0 has no
// constant term, so small x keep their relative accuracy. Measured max
// error 6e-8 absolute (about 1 ulp below 1), 1.3e-7 relative near 0; erf
// is 1 from 4 on (erf(4) = 1 - 1.5e-8). A vector reads its 16 coefficients
// of one degree with one permute (AVX-512 vpermps; AVX2: two 8-entry
// permutes and a blend), so the table costs no gathers.
//
// exp: Cephes expf, as core/attention_kernel.c's attn_exp: x = n ln2 + r, degree-6
// polynomial, 2^n from the exponent bits.
//
// exp in double (the cross-entropy's softmax): x = n ln2 + r with |r| <=
// ln2 / 2 (ln2 in two parts, fdlibm's ln2_hi with 32 trailing zero bits and
// the rest), exp(r) by its Taylor series to r^13 (the next term is below
// 5e-18 of the result), times 2^n as two factors 2^floor(n/2) and
// 2^(n - floor(n/2)), each a normal double, so that a subnormal or
// overflowing result is rounded once. x is clamped to [-746, 710] first:
// beyond it the result is 0 or +inf anyway.
//
// tanh: Cephes tanhf: for |x| < 0.625 the odd polynomial x + x^3 P(x^2)
// (small x keep their relative accuracy), beyond it 1 - 2 / (exp(2|x|) + 1)
// with the sign of x. sigmoid: 1 / (1 + exp(-x)).
//
// Three builds of the same formulas: AVX-512 and AVX2/FMA via target
// attributes (chosen at run time with __builtin_cpu_supports, as
// core/gemm.c does) and plain C. The vector builds use FMA and agree bit for
// bit; the plain C one (CPUs without AVX2) rounds the products separately.
#include "core/vmath.h"

#include <math.h>
#include <string.h>

enum { ERF_DEG = 7 };

// ERF_C[j][k]: coefficient of s^j on interval k.
static const float ERF_C[ERF_DEG + 1][16] __attribute__((aligned(64))) = {
    {0.000000000e+00f, 2.763263881e-01f, 5.204998851e-01f, 7.111556530e-01f,
     8.427007794e-01f, 9.229001403e-01f, 9.661051631e-01f, 9.866716862e-01f,
     9.953222871e-01f, 9.985373020e-01f, 9.995930195e-01f, 9.998993874e-01f,
     9.999778867e-01f, 9.999957085e-01f, 9.999992847e-01f, 9.999998808e-01f},
    {2.820948064e-01f, 2.650035322e-01f, 2.196956426e-01f, 1.607327610e-01f,
     1.037768722e-01f, 5.913028121e-02f, 2.973257191e-02f, 1.319374889e-02f,
     5.166746210e-03f, 1.785579836e-03f, 5.445710849e-04f, 1.465693058e-04f,
     3.481325621e-05f, 7.297252978e-06f, 1.349855438e-06f, 2.203576628e-07f},
    {-5.396451730e-09f, -1.656273380e-02f, -2.746196464e-02f, -3.013739176e-02f,
     -2.594421059e-02f, -1.847820729e-02f, -1.114971377e-02f, -5.772267003e-03f,
     -2.583374968e-03f, -1.004389371e-03f, -3.403569863e-04f, -1.007662358e-04f,
     -2.610980482e-05f, -5.928949122e-06f, -1.181097900e-06f,
     -2.065777096e-07f},
    {-5.876929965e-03f, -4.830682185e-03f, -2.288425108e-03f, 4.185611033e-04f,
     2.161958953e-03f, 2.617702354e-03f, 2.167992294e-03f, 1.408721204e-03f,
     7.534979959e-04f, 3.394525556e-04f, 1.304707403e-04f, 4.312975580e-05f,
     1.232855266e-05f, 3.058947868e-06f, 6.606506986e-07f, 1.244607546e-07f},
    {-1.765701256e-07f, 4.955824115e-04f, 7.148701116e-04f, 5.886699073e-04f,
     2.704841609e-04f, -2.388303619e-05f, -1.741814049e-04f, -1.879521151e-04f,
     -1.346066711e-04f, -7.457019819e-05f, -3.368371836e-05f, -1.272186819e-05f,
     -4.075145625e-06f, -1.117101760e-06f, -2.636549539e-07f,
     -5.380840307e-08f},
    {1.105554984e-04f, 7.910442946e-05f, 7.776236089e-06f, -5.208167568e-05f,
     -6.805403973e-05f, -4.646032176e-05f, -1.459557643e-05f, 6.579377896e-06f,
     1.290296223e-05f, 1.046454872e-05f, 5.980336482e-06f, 2.680401622e-06f,
     9.829333294e-07f, 3.014014851e-07f, 7.828446513e-08f, 1.736848354e-08f},
    {-3.879485178e-07f, -1.098238954e-05f, -1.298739608e-05f, -6.493217825e-06f,
     1.697833682e-06f, 5.669359780e-06f, 4.825305950e-06f, 2.063178272e-06f,
     -3.267075499e-08f, -7.795331385e-07f, -6.925671983e-07f, -3.921565792e-07f,
     -1.683929440e-07f, -5.815279280e-08f, -1.661154236e-08f,
     -3.988193775e-09f},
    {-1.457629310e-06f, -3.329124638e-07f, 8.412374655e-07f, 1.128024337e-06f,
     5.855762879e-07f, -8.324474265e-08f, -3.744372350e-07f, -3.000247375e-07f,
     -1.147075821e-07f, 6.800541907e-09f, 4.122872355e-08f, 3.222548273e-08f,
     1.631892310e-08f, 6.282631304e-09f, 1.944871153e-09f, 4.973929602e-10f},
};

static const float SQRT_HALF = 0.70710678118654752f;
static const float INV_SQRT_2PI = 0.39894228040143268f;

// Cephes expf constants.
static const float EXP_LO = -87.3365447504f, EXP_HI = 88.0f;
static const float LOG2E = 1.44269504088896341f;
static const float ROUND_MAGIC = 12582912.0f;  // 1.5 * 2^23
static const float LN2_HI = 0.693359375f, LN2_LO = -2.12194440e-4f;
static const float EXP_P[6] = {1.9875691500e-4f, 1.3981999507e-3f,
                               8.3334519073e-3f, 4.1665795894e-2f,
                               1.6666665459e-1f, 5.0000001201e-1f};

// exp in double.
static const double EXPD_LO = -746.0, EXPD_HI = 710.0;
static const double LOG2E_D = 1.4426950408889634;
static const double ROUND_MAGIC_D = 6755399441055744.0;  // 1.5 * 2^52
static const double LN2_HI_D = 6.93147180369123816490e-01;
static const double LN2_LO_D = 1.90821492927058770002e-10;
enum { EXPD_DEG = 13 };
// 1 / k!, highest degree first.
static const double EXPD_C[EXPD_DEG + 1] = {1.6059043836821613e-10,
                                            2.08767569878681e-09,
                                            2.505210838544172e-08,
                                            2.755731922398589e-07,
                                            2.7557319223985893e-06,
                                            2.48015873015873e-05,
                                            1.984126984126984e-04,
                                            1.388888888888889e-03,
                                            8.333333333333333e-03,
                                            4.1666666666666664e-02,
                                            1.6666666666666666e-01,
                                            0.5,
                                            1.0,
                                            1.0};

// Cephes tanhf: the polynomial's coefficients (highest first) and where the
// exp form takes over.
static const float TANH_P[5] = {-5.70498872745e-3f, 2.06390887954e-2f,
                                -5.37397155531e-2f, 1.33314422036e-1f,
                                -3.33332819422e-1f};
static const float TANH_SMALL = 0.625f;

typedef enum {
  VM_ERF,
  VM_EXP,
  VM_GELU,
  VM_GELU_BWD,
  VM_GELU_BWD_ADD,
  VM_TANH,
  VM_SIGMOID
} vm_op;

// ---- plain C -------------------------------------------------------------------

static float erf_scalar(float x) {
  const float ax = fabsf(x);
  if (ax >= 4.0f) return copysignf(1.0f, x);
  if (ax != ax) return x;
  const int k = (int)(ax * 4.0f);
  const float s = ax * 4.0f - (float)k;
  float r = ERF_C[ERF_DEG][k];
  for (int j = ERF_DEG - 1; j >= 0; j--) r = r * s + ERF_C[j][k];
  return copysignf(r, x);
}

static float exp_scalar(float x) {
  if (x != x) return x;  // NaN (converting it to an integer below is UB)
  float xc = x < EXP_LO ? EXP_LO : (x > EXP_HI ? EXP_HI : x);
  const float t = xc * LOG2E + ROUND_MAGIC, n = t - ROUND_MAGIC;
  float r = xc - n * LN2_HI;
  r = r - n * LN2_LO;
  float y = EXP_P[0];
  for (int j = 1; j < 6; j++) y = y * r + EXP_P[j];
  y = y * (r * r) + r + 1.0f;
  // 2^n from t's low mantissa bits, as unsigned bits: no float-to-int cast,
  // which NaN would make undefined (NaN comes out as NaN through y).
  uint32_t tb;
  memcpy(&tb, &t, sizeof tb);
  const uint32_t bits = (tb - 0x4B400000u + 127u) << 23;
  float pow2n;
  memcpy(&pow2n, &bits, sizeof pow2n);
  return x < EXP_LO ? 0.0f : y * pow2n;
}

static float tanh_scalar(float x) {
  const float ax = fabsf(x);
  float r;
  if (ax < TANH_SMALL) {
    const float z = x * x;
    float p = TANH_P[0];
    for (int j = 1; j < 5; j++) p = p * z + TANH_P[j];
    r = p * z * ax + ax;
  } else {
    r = 1.0f - 2.0f / (exp_scalar(2.0f * ax) + 1.0f);
  }
  return copysignf(r, x);
}

static float sigmoid_scalar(float x) { return 1.0f / (1.0f + exp_scalar(-x)); }

// 2^k for an integer-valued double k in [-1022, 1023].
static double pow2_scalar(double k) {
  double t = k + ROUND_MAGIC_D, m = ROUND_MAGIC_D;
  uint64_t tb, mb;
  memcpy(&tb, &t, sizeof tb);
  memcpy(&mb, &m, sizeof mb);
  const uint64_t bits = (tb - mb + 1023u) << 52;
  double r;
  memcpy(&r, &bits, sizeof r);
  return r;
}

static double expd_scalar(double x) {
  if (x != x) return x;
  const double xc = x < EXPD_LO ? EXPD_LO : (x > EXPD_HI ? EXPD_HI : x);
  const double n = (xc * LOG2E_D + ROUND_MAGIC_D) - ROUND_MAGIC_D;
  double r = xc - n * LN2_HI_D;
  r = r - n * LN2_LO_D;
  double y = EXPD_C[0];
  for (int j = 1; j <= EXPD_DEG; j++) y = y * r + EXPD_C[j];
  const double n1 = floor(n * 0.5);
  return y * pow2_scalar(n1) * pow2_scalar(n - n1);
}

static void expd_rows_scalar(const float *x, double shift, double *y,
                             int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = expd_scalar((double)x[i] - shift);
}

// n a multiple of 8; lanes[8] the partial sums, updated.
static void expd_sum_scalar(const float *x, double shift, int64_t n,
                            double *lanes) {
  for (int64_t i = 0; i < n; i++)
    lanes[i % 8] += expd_scalar((double)x[i] - shift);
}

static void run_scalar(vm_op op, const float *x, const float *g, float *y,
                       int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i];
    switch (op) {
    case VM_ERF: y[i] = erf_scalar(v); break;
    case VM_EXP: y[i] = exp_scalar(v); break;
    case VM_TANH: y[i] = tanh_scalar(v); break;
    case VM_SIGMOID: y[i] = sigmoid_scalar(v); break;
    case VM_GELU: y[i] = 0.5f * v * (1.0f + erf_scalar(v * SQRT_HALF)); break;
    case VM_GELU_BWD:
    case VM_GELU_BWD_ADD: {
      const float cdf = 0.5f * (1.0f + erf_scalar(v * SQRT_HALF));
      const float d = v * INV_SQRT_2PI * exp_scalar(-0.5f * v * v) + cdf;
      y[i] = op == VM_GELU_BWD ? g[i] * d : y[i] + g[i] * d;
      break;
    }
    }
  }
}

#if defined(__x86_64__) || defined(__i386__)
#define VM_X86 1
#include <immintrin.h>

#define T512 __attribute__((target("avx512f")))
#define T256 __attribute__((target("avx2,fma")))
#define VM_INLINE static inline __attribute__((always_inline))

// ---- AVX-512 -------------------------------------------------------------------

VM_INLINE T512 __m512 erf512(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 x4 = _mm512_mul_ps(ax, _mm512_set1_ps(4.0f));
  // NaN and huge |x| convert to INT_MIN, clamped to 0; the blend below
  // gives huge |x| 1, and NaN stays NaN through the polynomial.
  __m512i k = _mm512_cvttps_epi32(x4);
  k = _mm512_min_epi32(_mm512_max_epi32(k, _mm512_setzero_si512()),
                       _mm512_set1_epi32(15));
  const __m512 s = _mm512_sub_ps(x4, _mm512_cvtepi32_ps(k));
  __m512 r = _mm512_permutexvar_ps(k, _mm512_load_ps(ERF_C[ERF_DEG]));
  for (int j = ERF_DEG - 1; j >= 0; j--)
    r = _mm512_fmadd_ps(r, s,
                        _mm512_permutexvar_ps(k, _mm512_load_ps(ERF_C[j])));
  const __mmask16 big =
      _mm512_cmp_ps_mask(ax, _mm512_set1_ps(4.0f), _CMP_GE_OQ);
  r = _mm512_mask_mov_ps(r, big, _mm512_set1_ps(1.0f));
  const __m512i sign =
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

VM_INLINE T512 __m512 exp512(__m512 x) {
  // max/min return their second operand for NaN: NaN stays NaN.
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(EXP_HI),
                                  _mm512_max_ps(_mm512_set1_ps(EXP_LO), x));
  const __m512 magic = _mm512_set1_ps(ROUND_MAGIC);
  const __m512 n =
      _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(LOG2E), magic), magic);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
  __m512 y = _mm512_set1_ps(EXP_P[0]);
  for (int j = 1; j < 6; j++)
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(EXP_P[j]));
  y = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r),
                    _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
  const __mmask16 tiny =
      _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_LO), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(y, tiny, _mm512_setzero_ps());
}

VM_INLINE T512 __m512 tanh512(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(TANH_P[0]);
  for (int j = 1; j < 5; j++)
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(TANH_P[j]));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), ax, ax);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp512(_mm512_add_ps(ax, ax));
  __m512 r = _mm512_sub_ps(
      one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
  const __mmask16 is_small =
      _mm512_cmp_ps_mask(ax, _mm512_set1_ps(TANH_SMALL), _CMP_LT_OQ);
  r = _mm512_mask_mov_ps(r, is_small, small);
  const __m512i sign =
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

VM_INLINE T512 __m512 sigmoid512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(one, _mm512_add_ps(one, e));
}

VM_INLINE T512 __m512 gelu_deriv512(__m512 v) {
  const __m512 half = _mm512_set1_ps(0.5f);
  const __m512 e = erf512(_mm512_mul_ps(v, _mm512_set1_ps(SQRT_HALF)));
  const __m512 cdf =
      _mm512_mul_ps(half, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  const __m512 q = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), v), v);
  return _mm512_fmadd_ps(_mm512_mul_ps(v, _mm512_set1_ps(INV_SQRT_2PI)),
                         exp512(q), cdf);
}

VM_INLINE T512 __m512d pow2_512(__m512d k) {
  const __m512d m = _mm512_set1_pd(ROUND_MAGIC_D);
  const __m512i bits = _mm512_slli_epi64(
      _mm512_add_epi64(
          _mm512_sub_epi64(_mm512_castpd_si512(_mm512_add_pd(k, m)),
                           _mm512_castpd_si512(m)),
          _mm512_set1_epi64(1023)),
      52);
  return _mm512_castsi512_pd(bits);
}

VM_INLINE T512 __m512d expd512(__m512d x) {
  // max/min return their second operand for NaN: NaN stays NaN.
  const __m512d xc = _mm512_min_pd(_mm512_set1_pd(EXPD_HI),
                                   _mm512_max_pd(_mm512_set1_pd(EXPD_LO), x));
  const __m512d magic = _mm512_set1_pd(ROUND_MAGIC_D);
  const __m512d n =
      _mm512_sub_pd(_mm512_fmadd_pd(xc, _mm512_set1_pd(LOG2E_D), magic), magic);
  __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(LN2_HI_D), xc);
  r = _mm512_fnmadd_pd(n, _mm512_set1_pd(LN2_LO_D), r);
  __m512d y = _mm512_set1_pd(EXPD_C[0]);
  for (int j = 1; j <= EXPD_DEG; j++)
    y = _mm512_fmadd_pd(y, r, _mm512_set1_pd(EXPD_C[j]));
  const __m512d n1 =
      _mm512_roundscale_pd(_mm512_mul_pd(n, _mm512_set1_pd(0.5)),
                           _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  return _mm512_mul_pd(_mm512_mul_pd(y, pow2_512(n1)),
                       pow2_512(_mm512_sub_pd(n, n1)));
}

VM_INLINE T512 __m512d expd_at512(const float *x, __m512d shift) {
  return expd512(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x)), shift));
}

// n a multiple of 8.
static T512 void expd_rows_avx512(const float *x, double shift, double *y,
                                  int64_t n) {
  const __m512d sh = _mm512_set1_pd(shift);
  for (int64_t i = 0; i < n; i += 8)
    _mm512_storeu_pd(y + i, expd_at512(x + i, sh));
}

static T512 void expd_sum_avx512(const float *x, double shift, int64_t n,
                                 double *lanes) {
  const __m512d sh = _mm512_set1_pd(shift);
  __m512d acc = _mm512_loadu_pd(lanes);
  for (int64_t i = 0; i < n; i += 8)
    acc = _mm512_add_pd(acc, expd_at512(x + i, sh));
  _mm512_storeu_pd(lanes, acc);
}

// n a multiple of 16.
static T512 void run_avx512(vm_op op, const float *x, const float *g, float *y,
                            int64_t n) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512 rs2 = _mm512_set1_ps(SQRT_HALF);
  switch (op) {
  case VM_ERF:
    for (int64_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(y + i, erf512(_mm512_loadu_ps(x + i)));
    break;
  case VM_EXP:
    for (int64_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(y + i, exp512(_mm512_loadu_ps(x + i)));
    break;
  case VM_TANH:
    for (int64_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(y + i, tanh512(_mm512_loadu_ps(x + i)));
    break;
  case VM_SIGMOID:
    for (int64_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(y + i, sigmoid512(_mm512_loadu_ps(x + i)));
    break;
  case VM_GELU:
    for (int64_t i = 0; i < n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      const __m512 e = erf512(_mm512_mul_ps(v, rs2));
      _mm512_storeu_ps(
          y + i, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, e)));
    }
    break;
  case VM_GELU_BWD:
    for (int64_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(y + i,
                       _mm512_mul_ps(_mm512_loadu_ps(g + i),
                                     gelu_deriv512(_mm512_loadu_ps(x + i))));
    break;
  case VM_GELU_BWD_ADD:
    for (int64_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(y + i,
                       _mm512_fmadd_ps(_mm512_loadu_ps(g + i),
                                       gelu_deriv512(_mm512_loadu_ps(x + i)),
                                       _mm512_loadu_ps(y + i)));
    break;
  }
}

// ---- AVX2 ----------------------------------------------------------------------

// tab[k] for k in [0, 16): two 8-entry permutes, blended on k >= 8.
VM_INLINE T256 __m256 lookup16_256(const float *tab, __m256i k, __m256 hi) {
  const __m256 a = _mm256_permutevar8x32_ps(_mm256_load_ps(tab), k);
  const __m256 b = _mm256_permutevar8x32_ps(_mm256_load_ps(tab + 8), k);
  return _mm256_blendv_ps(a, b, hi);
}

VM_INLINE T256 __m256 erf256(__m256 x) {
  const __m256 sign_bit = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  const __m256 ax = _mm256_andnot_ps(sign_bit, x);
  const __m256 x4 = _mm256_mul_ps(ax, _mm256_set1_ps(4.0f));
  __m256i k = _mm256_cvttps_epi32(x4);
  k = _mm256_min_epi32(_mm256_max_epi32(k, _mm256_setzero_si256()),
                       _mm256_set1_epi32(15));
  const __m256 hi =
      _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, _mm256_set1_epi32(7)));
  const __m256 s = _mm256_sub_ps(x4, _mm256_cvtepi32_ps(k));
  __m256 r = lookup16_256(ERF_C[ERF_DEG], k, hi);
  for (int j = ERF_DEG - 1; j >= 0; j--)
    r = _mm256_fmadd_ps(r, s, lookup16_256(ERF_C[j], k, hi));
  const __m256 big = _mm256_cmp_ps(ax, _mm256_set1_ps(4.0f), _CMP_GE_OQ);
  r = _mm256_blendv_ps(r, _mm256_set1_ps(1.0f), big);
  return _mm256_or_ps(r, _mm256_and_ps(x, sign_bit));
}

VM_INLINE T256 __m256 exp256(__m256 x) {
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(EXP_HI),
                                  _mm256_max_ps(_mm256_set1_ps(EXP_LO), x));
  const __m256 magic = _mm256_set1_ps(ROUND_MAGIC);
  const __m256 n =
      _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(LOG2E), magic), magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
  __m256 y = _mm256_set1_ps(EXP_P[0]);
  for (int j = 1; j < 6; j++)
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(EXP_P[j]));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r),
                    _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_LT_OQ);
  return _mm256_andnot_ps(tiny, y);
}

VM_INLINE T256 __m256 tanh256(__m256 x) {
  const __m256 sign_bit = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  const __m256 ax = _mm256_andnot_ps(sign_bit, x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(TANH_P[0]);
  for (int j = 1; j < 5; j++)
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TANH_P[j]));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), ax, ax);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp256(_mm256_add_ps(ax, ax));
  __m256 r = _mm256_sub_ps(
      one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  const __m256 is_small =
      _mm256_cmp_ps(ax, _mm256_set1_ps(TANH_SMALL), _CMP_LT_OQ);
  r = _mm256_blendv_ps(r, small, is_small);
  return _mm256_or_ps(r, _mm256_and_ps(x, sign_bit));
}

VM_INLINE T256 __m256 sigmoid256(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

VM_INLINE T256 __m256 gelu_deriv256(__m256 v) {
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 e = erf256(_mm256_mul_ps(v, _mm256_set1_ps(SQRT_HALF)));
  const __m256 cdf =
      _mm256_mul_ps(half, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 q = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), v), v);
  return _mm256_fmadd_ps(_mm256_mul_ps(v, _mm256_set1_ps(INV_SQRT_2PI)),
                         exp256(q), cdf);
}

VM_INLINE T256 __m256d pow2_256(__m256d k) {
  const __m256d m = _mm256_set1_pd(ROUND_MAGIC_D);
  const __m256i bits = _mm256_slli_epi64(
      _mm256_add_epi64(
          _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(k, m)),
                           _mm256_castpd_si256(m)),
          _mm256_set1_epi64x(1023)),
      52);
  return _mm256_castsi256_pd(bits);
}

VM_INLINE T256 __m256d expd256(__m256d x) {
  const __m256d xc = _mm256_min_pd(_mm256_set1_pd(EXPD_HI),
                                   _mm256_max_pd(_mm256_set1_pd(EXPD_LO), x));
  const __m256d magic = _mm256_set1_pd(ROUND_MAGIC_D);
  const __m256d n =
      _mm256_sub_pd(_mm256_fmadd_pd(xc, _mm256_set1_pd(LOG2E_D), magic), magic);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(LN2_HI_D), xc);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(LN2_LO_D), r);
  __m256d y = _mm256_set1_pd(EXPD_C[0]);
  for (int j = 1; j <= EXPD_DEG; j++)
    y = _mm256_fmadd_pd(y, r, _mm256_set1_pd(EXPD_C[j]));
  const __m256d n1 = _mm256_floor_pd(_mm256_mul_pd(n, _mm256_set1_pd(0.5)));
  return _mm256_mul_pd(_mm256_mul_pd(y, pow2_256(n1)),
                       pow2_256(_mm256_sub_pd(n, n1)));
}

VM_INLINE T256 __m256d expd_at256(const float *x, __m256d shift) {
  return expd256(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x)), shift));
}

// n a multiple of 8.
static T256 void expd_rows_avx2(const float *x, double shift, double *y,
                                int64_t n) {
  const __m256d sh = _mm256_set1_pd(shift);
  for (int64_t i = 0; i < n; i += 4)
    _mm256_storeu_pd(y + i, expd_at256(x + i, sh));
}

static T256 void expd_sum_avx2(const float *x, double shift, int64_t n,
                               double *lanes) {
  const __m256d sh = _mm256_set1_pd(shift);
  __m256d lo = _mm256_loadu_pd(lanes), hi = _mm256_loadu_pd(lanes + 4);
  for (int64_t i = 0; i < n; i += 8) {
    lo = _mm256_add_pd(lo, expd_at256(x + i, sh));
    hi = _mm256_add_pd(hi, expd_at256(x + i + 4, sh));
  }
  _mm256_storeu_pd(lanes, lo);
  _mm256_storeu_pd(lanes + 4, hi);
}

// n a multiple of 8.
static T256 void run_avx2(vm_op op, const float *x, const float *g, float *y,
                          int64_t n) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 rs2 = _mm256_set1_ps(SQRT_HALF);
  switch (op) {
  case VM_ERF:
    for (int64_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(y + i, erf256(_mm256_loadu_ps(x + i)));
    break;
  case VM_EXP:
    for (int64_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(y + i, exp256(_mm256_loadu_ps(x + i)));
    break;
  case VM_TANH:
    for (int64_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(y + i, tanh256(_mm256_loadu_ps(x + i)));
    break;
  case VM_SIGMOID:
    for (int64_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(y + i, sigmoid256(_mm256_loadu_ps(x + i)));
    break;
  case VM_GELU:
    for (int64_t i = 0; i < n; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      const __m256 e = erf256(_mm256_mul_ps(v, rs2));
      _mm256_storeu_ps(
          y + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e)));
    }
    break;
  case VM_GELU_BWD:
    for (int64_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(y + i,
                       _mm256_mul_ps(_mm256_loadu_ps(g + i),
                                     gelu_deriv256(_mm256_loadu_ps(x + i))));
    break;
  case VM_GELU_BWD_ADD:
    for (int64_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(y + i,
                       _mm256_fmadd_ps(_mm256_loadu_ps(g + i),
                                       gelu_deriv256(_mm256_loadu_ps(x + i)),
                                       _mm256_loadu_ps(y + i)));
    break;
  }
}
#endif

// ---- dispatch ------------------------------------------------------------------

typedef void (*vm_kernel)(vm_op, const float *, const float *, float *,
                          int64_t);

// The kernel for this CPU and its vector width.
static vm_kernel pick_kernel(int *width) {
#ifdef VM_X86
  if (__builtin_cpu_supports("avx512f")) {
    *width = 16;
    return run_avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *width = 8;
    return run_avx2;
  }
#endif
  *width = 1;
  return run_scalar;
}

// Whole vectors in place; the last partial one through padded copies, so
// an element's result never depends on where the array ends.
static void run(vm_op op, const float *x, const float *g, float *y, int64_t n) {
  int w;
  const vm_kernel k = pick_kernel(&w);
  const int64_t body = n - n % w;
  if (body > 0) k(op, x, g, y, body);
  const int64_t rest = n - body;
  if (rest == 0) return;
  float xb[16] = {0}, gb[16] = {0}, yb[16] = {0};
  memcpy(xb, x + body, (size_t)rest * sizeof(float));
  if (g) memcpy(gb, g + body, (size_t)rest * sizeof(float));
  if (op == VM_GELU_BWD_ADD) memcpy(yb, y + body, (size_t)rest * sizeof(float));
  k(op, xb, gb, yb, w);
  memcpy(y + body, yb, (size_t)rest * sizeof(float));
}

void ct_vmath_erf(const float *x, float *y, int64_t n) {
  run(VM_ERF, x, NULL, y, n);
}

void ct_vmath_exp(const float *x, float *y, int64_t n) {
  run(VM_EXP, x, NULL, y, n);
}

void ct_vmath_gelu(const float *x, float *y, int64_t n) {
  run(VM_GELU, x, NULL, y, n);
}

void ct_vmath_gelu_backward(const float *x, const float *g, float *gx,
                            int64_t n, bool accumulate) {
  run(accumulate ? VM_GELU_BWD_ADD : VM_GELU_BWD, x, g, gx, n);
}

void ct_vmath_tanh(const float *x, float *y, int64_t n) {
  run(VM_TANH, x, NULL, y, n);
}

void ct_vmath_sigmoid(const float *x, float *y, int64_t n) {
  run(VM_SIGMOID, x, NULL, y, n);
}

typedef void (*expd_rows_fn)(const float *, double, double *, int64_t);
typedef void (*expd_sum_fn)(const float *, double, int64_t, double *);

// The exp-in-double kernels for this CPU (each takes a multiple of 8).
static void pick_expd(expd_rows_fn *rows, expd_sum_fn *sum) {
  *rows = expd_rows_scalar;
  *sum = expd_sum_scalar;
#ifdef VM_X86
  if (__builtin_cpu_supports("avx512f")) {
    *rows = expd_rows_avx512;
    *sum = expd_sum_avx512;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *rows = expd_rows_avx2;
    *sum = expd_sum_avx2;
  }
#endif
}

void ct_vmath_exp_shifted_f64(const float *x, double shift, double *y,
                              int64_t n) {
  expd_rows_fn rows;
  expd_sum_fn sum;
  pick_expd(&rows, &sum);
  const int64_t body = n - n % 8, rest = n - body;
  if (body > 0) rows(x, shift, y, body);
  if (rest == 0) return;
  float xb[8] = {0};
  double yb[8];
  memcpy(xb, x + body, (size_t)rest * sizeof(float));
  rows(xb, shift, yb, 8);
  memcpy(y + body, yb, (size_t)rest * sizeof(double));
}

double ct_vmath_sum_exp_shifted_f64(const float *x, double shift, int64_t n) {
  expd_rows_fn rows;
  expd_sum_fn sum;
  pick_expd(&rows, &sum);
  double lanes[8] = {0};
  const int64_t body = n - n % 8, rest = n - body;
  if (body > 0) sum(x, shift, body, lanes);
  if (rest > 0) {
    // The last elements go to lanes 0..rest-1, as in a whole vector.
    float xb[8] = {0};
    double yb[8];
    memcpy(xb, x + body, (size_t)rest * sizeof(float));
    rows(xb, shift, yb, 8);
    for (int64_t j = 0; j < rest; j++) lanes[j] += yb[j];
  }
  return ct_vmath_total8(lanes);
}

double ct_vmath_logsumexp_f64(const float *x, int64_t n) {
  double m, se = 0.0;
  if (n < CT_VMATH_ROW_MIN) {
    m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = fmax(m, x[i]);
    for (int64_t i = 0; i < n; i++) se += exp(x[i] - m);
  } else {
    float mf = -INFINITY;
#pragma omp simd reduction(max : mf)
    for (int64_t i = 0; i < n; i++) mf = x[i] > mf ? x[i] : mf;
    m = mf;
    se = ct_vmath_sum_exp_shifted_f64(x, m, n);
  }
  return m + log(se);
}

int64_t ct_vmath_first_nonfinite(const float *x, int64_t n) {
  enum { CHUNK = 1 << 15 };
  const int64_t chunks = (n + CHUNK - 1) / CHUNK;
  int64_t first = -1;
  // Chunks in order; within the parallel loop each chunk only answers
  // whether it holds one, then the first such chunk is searched.
  for (int64_t c0 = 0; c0 < chunks && first < 0; c0 += 64) {
    const int64_t c1 = c0 + 64 < chunks ? c0 + 64 : chunks;
    int64_t bad = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(min : bad) if (n > CHUNK)
    for (int64_t c = c0; c < c1; c++) {
      const int64_t lo = c * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
      bool any = false;
      for (int64_t i = lo; i < hi; i++) any |= !isfinite(x[i]);
      if (any && c < bad) bad = c;
    }
    if (bad == INT64_MAX) continue;
    for (int64_t i = bad * CHUNK;; i++)
      if (!isfinite(x[i])) {
        first = i;
        break;
      }
  }
  return first;
}
