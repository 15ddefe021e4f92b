// AVX-512 kernels (F/BW/VL/DQ). Compiled with -mavx512* for this file only and selected at
// run time. The 16 lanes of one zmm register are the 16 canonical lanes of kernels.h; tails
// and the final tree run through the shared generic code, so results equal the scalar table.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "engine/ops/kernels.h"
#include "engine/util/status.h"

namespace nj::ops::avx512 {
namespace {
#include "engine/ops/kernels_generic.inc"

template <MatFormat F>
inline __m512 load16(const uint8_t* row, int i) {
  if constexpr (F == MatFormat::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (F == MatFormat::kBF16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * static_cast<size_t>(i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * static_cast<size_t>(i)));
    return _mm512_cvtph_ps(h);
  }
}

template <MatFormat F>
float load_one(const uint8_t* p) {
  if constexpr (F == MatFormat::kF32) return load_f32(p);
  else if constexpr (F == MatFormat::kBF16) return load_bf16(p);
  else return load_f16(p);
}

// R rows at once against one activation vector: the rows share every x load.
template <MatFormat F, int R>
inline void dense_rows(const uint8_t* const* rows, const float* x, int n, float* out) {
  constexpr size_t kElem = F == MatFormat::kF32 ? 4 : 2;
  const int nv = n / 16 * 16;
  __m512 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm512_setzero_ps();
  for (int i = 0; i < nv; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
    for (int k = 0; k < R; ++k) acc[k] = _mm512_fmadd_ps(load16<F>(rows[k], i), xv, acc[k]);
  }
  for (int k = 0; k < R; ++k) {
    alignas(64) float s[16];
    _mm512_store_ps(s, acc[k]);
    dot_lanes(rows[k], kElem, x, nv, n, s, load_one<F>);
    out[k] = reduce16(s);
  }
}

// BF16 rows in the paired order: one 64-byte load widens 32 elements (the low halves of the
// dwords are the even elements, the high halves the odd ones). `ahead` is where the next
// pass's R rows start (contiguous, R * 2n bytes); they are prefetched evenly during this
// pass, as for MXFP4 below (measured: without it every pass starts its R streams cold).
template <int R>
inline void bf16_rows(const uint8_t* const* rows, const float* xa, int n, const uint8_t* ahead,
                      float* out) {
  const int chunks = n / 32;
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm512_setzero_ps();
  for (int c = 0; c < chunks; ++c) {  // reads R cache lines, prefetches R lines of `ahead`
    for (int k = 0; k < R; ++k)
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * static_cast<size_t>(R * c + k)),
                   _MM_HINT_T0);
    const __m512 xe = _mm512_loadu_ps(xa + 32 * static_cast<size_t>(c));
    const __m512 xo = _mm512_loadu_ps(xa + 32 * static_cast<size_t>(c) + 16);
    for (int k = 0; k < R; ++k) {
      const __m512i w = _mm512_loadu_si512(rows[k] + 64 * static_cast<size_t>(c));
      acc[k] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), xe, acc[k]);
      acc[k] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, hi_mask)), xo, acc[k]);
    }
  }
  for (int k = 0; k < R; ++k) {
    alignas(64) float s[16];
    _mm512_store_ps(s, acc[k]);
    bf16_pair_lanes(rows[k], xa, chunks, n, s);
    out[k] = reduce16(s);
  }
}

// R MXFP4 rows against one activation vector, each row with its own four accumulator sets
// by block number mod 4 (the canonical order, kernels.h), so sharing changes no bit.
// `ahead` is the memory the next pass reads (R rows' worth of packed bytes, 16 * R * nblocks),
// prefetched evenly during this pass. Measured on Zen 5 (tests/bench/kernel_bench):
//  * four rows per pass share the two activation loads of each block, and the rows of a
//    pass are contiguous, so prefetching the next pass linearly, one pass ahead, keeps the
//    whole stream in flight (a fixed distance ahead of each row let the four rows of every
//    pass start cold, which made interleaving rows slower than one row at a time);
//  * the block factor comes from kMxfp4Factors[scale] as a memory operand that the fma
//    broadcasts itself ({1to16}), instead of being built in a register and extracted
//    lane by lane (two shuffles per block);
//  * vpermps reads only the low 4 bits of each index, so the zero-extended byte itself
//    selects the low nibble. (Two vpermps beat one vpermw into BF16 plus widening.)
template <int R>
inline void mxfp4_rows(const uint8_t* const* rows, const uint8_t* const* scales, const float* xa,
                       int nblocks, const uint8_t* ahead, float* out) {
  const __m512 lut = _mm512_loadu_ps(kE2M1);
  __m512 acc[R][4];
  for (int k = 0; k < R; ++k)
    for (int q = 0; q < 4; ++q) acc[k][q] = _mm512_setzero_ps();
  // Block b into accumulator set q = b % 4, for every row.
  auto step = [&](int b, int q) {
    const __m512 xe = _mm512_loadu_ps(xa + 32 * static_cast<size_t>(b));
    const __m512 xo = _mm512_loadu_ps(xa + 32 * static_cast<size_t>(b) + 16);
    for (int k = 0; k < R; ++k) {
      const __m512i v = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[k] + 16 * static_cast<size_t>(b))));
      __m512 t = _mm512_mul_ps(_mm512_permutexvar_ps(v, lut), xe);
      t = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut), xo, t);
      acc[k][q] = _mm512_fmadd_ps(t, _mm512_set1_ps(kMxfp4Factors[scales[k][b]]), acc[k][q]);
    }
  };
  int b = 0;
  for (; b + 4 <= nblocks; b += 4) {  // reads R cache lines, prefetches R lines of `ahead`
    for (int k = 0; k < R; ++k)
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 16 * static_cast<size_t>(R * b + 4 * k)),
                   _MM_HINT_T0);
    step(b, 0);
    step(b + 1, 1);
    step(b + 2, 2);
    step(b + 3, 3);
  }
  for (int q = 0; b + q < nblocks; ++q) step(b + q, q);
  for (int k = 0; k < R; ++k) {
    alignas(64) float s[4][16];
    for (int q = 0; q < 4; ++q) _mm512_store_ps(s[q], acc[k][q]);
    out[k] = mxfp4_finish(s);
  }
}

// Rows per pass: their 16 accumulators and the temporaries fit in the 32 zmm registers.
constexpr int kMxfp4Rows = 4;

#include "engine/ops/kernels_rows.inc"

float dot(const float* a, const float* b, int n) {
  const int nv = n / 16 * 16;
  __m512 acc = _mm512_setzero_ps();
  for (int i = 0; i < nv; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  alignas(64) float s[16];
  _mm512_store_ps(s, acc);
  for (int j = 0; nv + j < n; ++j) s[j] = std::fma(a[nv + j], b[nv + j], s[j]);
  return reduce16(s);
}

}  // namespace

const KernelTable& table() {
  static const KernelTable t{SimdLevel::kAvx512, matmul_rows, dot, generic_matvec_t,
                             generic_kda_head, generic_axpy};
  return t;
}

}  // namespace nj::ops::avx512
