// AVX-512 kernels (F/BW/VL/DQ). Compiled with -mavx512* for this file only and selected at
// run time. The 16 lanes of one zmm register are the 16 canonical lanes of kernels.h; tails
// and the final tree run through the shared generic code, so results equal the scalar table.
#include <immintrin.h>

#include <algorithm>
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
// dwords are the even elements, the high halves the odd ones).
template <int R>
inline void bf16_rows(const uint8_t* const* rows, const float* xa, int n, float* out) {
  const int chunks = n / 32;
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm512_setzero_ps();
  for (int c = 0; c < chunks; ++c) {
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

// The block factors of 16 consecutive blocks (fewer at the end of a row) as floats:
// 2^(s-127), the subnormal 2^-127 for s = 0, and 0 for the zero-block code 255.
inline __m512 mxfp4_factors16(const uint8_t* scales, int count) {
  const __mmask16 live = count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
  const __m512i s = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(live, scales));
  __m512i bits = _mm512_slli_epi32(s, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_set1_epi32(255)), _mm512_setzero_si512());
  return _mm512_castsi512_ps(bits);
}

// t for one block of 32 codes (k3-model.md §8; the canonical order in kernels.h). vpermps
// reads only the low 4 bits of each index, so the zero-extended byte itself selects the
// low nibble. (Measured here: two vpermps beat one vpermw into BF16 plus widening.)
inline __m512 mxfp4_block(const uint8_t* p, const float* x, __m512 lut) {
  const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512 elo = _mm512_permutexvar_ps(v, lut);
  const __m512 ehi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut);
  const __m512 t = _mm512_mul_ps(elo, _mm512_loadu_ps(x));
  return _mm512_fmadd_ps(ehi, _mm512_loadu_ps(x + 16), t);
}

// One MXFP4 row; four accumulators by block number mod 4 (the canonical order, kernels.h),
// unrolled so that each stays in a register.
inline float mxfp4_row(const uint8_t* row, const uint8_t* scales, const float* xa, int nblocks) {
  const __m512 lut = _mm512_loadu_ps(kE2M1);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  alignas(64) float f[16];
  for (int b0 = 0; b0 < nblocks; b0 += 16) {
    const int count = std::min(16, nblocks - b0);
    _mm512_store_ps(f, mxfp4_factors16(scales + b0, count));
    const uint8_t* p = row + 16 * static_cast<size_t>(b0);
    const float* x = xa + 32 * static_cast<size_t>(b0);
    int i = 0;
    for (; i + 4 <= count; i += 4) {  // b0 is a multiple of 16, so block b0+i+k has k ≡ b mod 4
      _mm_prefetch(reinterpret_cast<const char*>(p + 16 * i + 2048), _MM_HINT_T0);
      a0 = _mm512_fmadd_ps(mxfp4_block(p + 16 * i, x + 32 * i, lut), _mm512_set1_ps(f[i]), a0);
      a1 = _mm512_fmadd_ps(mxfp4_block(p + 16 * (i + 1), x + 32 * (i + 1), lut), _mm512_set1_ps(f[i + 1]), a1);
      a2 = _mm512_fmadd_ps(mxfp4_block(p + 16 * (i + 2), x + 32 * (i + 2), lut), _mm512_set1_ps(f[i + 2]), a2);
      a3 = _mm512_fmadd_ps(mxfp4_block(p + 16 * (i + 3), x + 32 * (i + 3), lut), _mm512_set1_ps(f[i + 3]), a3);
    }
    if (i < count) a0 = _mm512_fmadd_ps(mxfp4_block(p + 16 * i, x + 32 * i, lut), _mm512_set1_ps(f[i]), a0);
    if (i + 1 < count) a1 = _mm512_fmadd_ps(mxfp4_block(p + 16 * (i + 1), x + 32 * (i + 1), lut), _mm512_set1_ps(f[i + 1]), a1);
    if (i + 2 < count) a2 = _mm512_fmadd_ps(mxfp4_block(p + 16 * (i + 2), x + 32 * (i + 2), lut), _mm512_set1_ps(f[i + 2]), a2);
  }
  alignas(64) float s[4][16];
  _mm512_store_ps(s[0], a0);
  _mm512_store_ps(s[1], a1);
  _mm512_store_ps(s[2], a2);
  _mm512_store_ps(s[3], a3);
  return mxfp4_finish(s);
}

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
