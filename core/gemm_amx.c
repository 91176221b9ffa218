// AMX gemm kernel: a 32 x 32 tile of C in four 16 x 16 fp32 tile registers
// (tmm0-3), two 16-row A tiles (tmm4-5, 16 rows x 32 bf16) and two B tiles
// (tmm6-7, 16 pair rows x 16 columns of bf16 pairs, the VNNI layout of the
// packed B panel). Per 32 values of k: 4 tile loads, 4 tdpbf16ps, each
// 16 x 16 x 32 multiply-adds. Tiles are loaded straight from the packed
// panels (gemm_bf16_internal.h): A rows lda_p apart, and one B tile is half
// of each 32-column pair row, 128 bytes apart.
//
// The accumulators are stored to a small buffer at the end of the block and
// combined with C (alpha, beta) by AVX-512, masked at the edges.
//
// Linux keeps AMX tile data off until a process asks for it
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)): the check below asks
// once and the path is unavailable if the kernel refuses. Each thread loads
// the tile configuration before its kernel calls and releases the tiles
// after (begin/end), so threads that never use AMX carry no tile state.
//
// Compiled with function target attributes (no global -march).
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE  // syscall()
#endif
#include "core/gemm_bf16_kernels.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MR 32
#define NR 32
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILECFG 17
#define XFEATURE_XTILEDATA 18

#define TARGET __attribute__((target("amx-tile,amx-bf16,avx512f")))

static bool amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t)hi << 32 | lo;
}

// CPUID.(EAX=7,ECX=0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE; the OS must
// have enabled XSAVE and both tile state components in XCR0; avx512f is
// needed for the epilogue. Then Linux's permission for tile data.
static void amx_probe(void) {
  unsigned a, b, c, d;
  if (!__builtin_cpu_supports("avx512f") || __get_cpuid_max(0, NULL) < 7)
    return;
  __cpuid(1, a, b, c, d);
  if (!((c >> 27) & 1u)) return;  // OSXSAVE
  __cpuid_count(7, 0, a, b, c, d);
  if (!((d >> 22) & 1u) || !((d >> 24) & 1u)) return;
  uint64_t xcr0 = xgetbv0();
  if (!((xcr0 >> XFEATURE_XTILECFG) & 1u) ||
      !((xcr0 >> XFEATURE_XTILEDATA) & 1u))
    return;
  amx_ok =
      syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

bool ct_gemm_bf16_cpu_has_amx(void) {
  pthread_once(&amx_once, amx_probe);
  return amx_ok;
}

// Palette 1: every tile 16 rows of 64 bytes (16 fp32, or 32 bf16, or 16
// bf16 pairs).
typedef struct tile_config {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

// A constant in memory, not a local: gcc 12 does not see _tile_loadconfig
// read its operand and drops the stores that would fill a local one.
static const tile_config amx_config = {
    .palette_id = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

static TARGET void amx_begin(void) { _tile_loadconfig(&amx_config); }

static TARGET void amx_end(void) { _tile_release(); }

// The whole tile; `two` (a compile-time constant at each call) says whether
// rows 16..31 of A are used. Blocks of at most 16 rows skip them; the other
// rows' arithmetic is the same either way.
static inline __attribute__((always_inline)) TARGET void tile(
    int64_t kp, const uint16_t *pa, int64_t lda_p, const uint16_t *pb,
    float *acc, int two) {
  const int64_t sa = lda_p * 2, sb = NR * 4;  // bytes between rows
  // gcc's _tile_loadd does not tell the compiler that it reads memory: the
  // barrier keeps every store to the panels before the loads.
  __asm__ volatile("" ::: "memory");
  _tile_zero(0);
  _tile_zero(1);
  if (two) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k = 0; k < kp; k += 32) {
    // Pair row k/2 of the panel starts at k * NR; its columns 16..31 at +32.
    _tile_loadd(6, pb + k * NR, sb);
    _tile_loadd(7, pb + k * NR + 32, sb);
    _tile_loadd(4, pa + k, sa);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (two) {
      _tile_loadd(5, pa + 16 * lda_p + k, sa);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, acc, NR * 4);
  _tile_stored(1, acc + 16, NR * 4);
  if (two) {
    _tile_stored(2, acc + 16 * NR, NR * 4);
    _tile_stored(3, acc + 16 * NR + 16, NR * 4);
  }
}

static TARGET void kernel(int64_t kp, const uint16_t *pa, int64_t lda_p,
                          const uint16_t *pb, float *c, int64_t ldc,
                          const float *old, int64_t ldo, float alpha,
                          float beta, int m, int n) {
  _Alignas(64) float acc[MR * NR];
  if (m > 16)
    tile(kp, pa, lda_p, pb, acc, 1);
  else
    tile(kp, pa, lda_p, pb, acc, 0);

  __mmask16 mask0 = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
  __mmask16 mask1 = n >= 32  ? (__mmask16)0xffff
                    : n > 16 ? (__mmask16)((1u << (n - 16)) - 1)
                             : (__mmask16)0;
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < m; i++) {
    float *row = c + i * ldc;
    const float *prev = old + i * ldo;
    __m512 r0 = _mm512_mul_ps(va, _mm512_load_ps(acc + i * NR));
    __m512 r1 = _mm512_mul_ps(va, _mm512_load_ps(acc + i * NR + 16));
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(
          va, _mm512_load_ps(acc + i * NR),
          _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(mask0, prev)));
      r1 = _mm512_fmadd_ps(
          va, _mm512_load_ps(acc + i * NR + 16),
          _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(mask1, prev + 16)));
    }
    _mm512_mask_storeu_ps(row, mask0, r0);
    _mm512_mask_storeu_ps(row + 16, mask1, r1);
  }
}

// Blocking: the A panel (32 x KC bf16, 32 KiB) stays in L1 and the packed B
// block (KC x NC bf16, 1 MiB) in L2: NC 1024 covers the widest linears of
// the models here (N 576..1024) in one block, so A is packed once.
const ct_gemm_bf16_arch ct_gemm_bf16_arch_amx = {
    .mr = MR,
    .nr = NR,
    .kgran = 32,
    .mc = MR * 4,
    .kc = 512,
    .nc = 1024,
    .kernel = kernel,
    .begin = amx_begin,
    .end = amx_end,
    .round_row = ct_bf16_round_row_cvt,
    .pair_rows = ct_bf16_pair_rows_cvt,
    .transpose_words = ct_bf16_transpose_words_avx512};

#else
bool ct_gemm_bf16_cpu_has_amx(void) { return false; }
const ct_gemm_bf16_arch ct_gemm_bf16_arch_amx = {0};
#endif
