// AVX2 + FMA + F16C kernels. Compiled with -mavx2 -mfma -mf16c for this file only and
// selected at run time. The 16 canonical lanes of kernels.h are two ymm registers (lanes
// 0-7 and 8-15); tails and the final tree run through the shared generic code, so results
// equal the scalar table bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/ops/kernels.h"
#include "engine/util/status.h"

namespace nj::ops::avx2 {
namespace {
#include "engine/ops/kernels_generic.inc"

template <MatFormat F>
inline __m256 load8(const uint8_t* row, int i) {
  if constexpr (F == MatFormat::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (F == MatFormat::kBF16) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * static_cast<size_t>(i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * static_cast<size_t>(i)));
    return _mm256_cvtph_ps(h);
  }
}

template <MatFormat F>
float load_one(const uint8_t* p) {
  if constexpr (F == MatFormat::kF32)
    return load_f32(p);
  else if constexpr (F == MatFormat::kBF16)
    return load_bf16(p);
  else
    return load_f16(p);
}

template <MatFormat F, int R>
inline void dense_rows(const uint8_t* const* rows, const float* x, int n, float* out) {
  constexpr size_t kElem = F == MatFormat::kF32 ? 4 : 2;
  const int nv = n / 16 * 16;
  __m256 lo[R], hi[R];
  for (int k = 0; k < R; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
  for (int i = 0; i < nv; i += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + i);
    const __m256 x1 = _mm256_loadu_ps(x + i + 8);
    for (int k = 0; k < R; ++k) {
      lo[k] = _mm256_fmadd_ps(load8<F>(rows[k], i), x0, lo[k]);
      hi[k] = _mm256_fmadd_ps(load8<F>(rows[k], i + 8), x1, hi[k]);
    }
  }
  for (int k = 0; k < R; ++k) {
    alignas(32) float s[16];
    _mm256_store_ps(s, lo[k]);
    _mm256_store_ps(s + 8, hi[k]);
    dot_lanes(rows[k], kElem, x, nv, n, s, load_one<F>);
    out[k] = reduce16(s);
  }
}

// E2M1 magnitude table (codes 0-7); bit 3 of a code is the sign.
inline __m256 e2m1_decode(__m256i nib, __m256 lut8) {
  const __m256 mag = _mm256_permutevar8x32_ps(lut8, nib);  // uses the low 3 bits
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(8)), 28);
  return _mm256_xor_ps(mag, _mm256_castsi256_ps(sign));
}

// BF16 rows in the paired order: each 32-byte load widens 16 elements (the low halves of
// the dwords are the even elements, the high halves the odd ones).
template <int R>
inline void bf16_rows(const uint8_t* const* rows, const float* xa, int n, const uint8_t* ahead,
                      float* out) {
  const int chunks = n / 32;
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 lo[R], hi[R];
  for (int k = 0; k < R; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
  for (int c = 0; c < chunks; ++c) {  // the next pass is prefetched as on AVX-512
    for (int k = 0; k < R; ++k)
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * static_cast<size_t>(R * c + k)),
                   _MM_HINT_T0);
    const float* x = xa + 32 * static_cast<size_t>(c);
    const __m256 xe0 = _mm256_loadu_ps(x), xe1 = _mm256_loadu_ps(x + 8);
    const __m256 xo0 = _mm256_loadu_ps(x + 16), xo1 = _mm256_loadu_ps(x + 24);
    for (int k = 0; k < R; ++k) {
      const uint8_t* w = rows[k] + 64 * static_cast<size_t>(c);
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32));
      lo[k] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), xe0, lo[k]);
      hi[k] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w1, 16)), xe1, hi[k]);
      lo[k] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w0, hi_mask)), xo0, lo[k]);
      hi[k] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w1, hi_mask)), xo1, hi[k]);
    }
  }
  for (int k = 0; k < R; ++k) {
    alignas(32) float s[16];
    _mm256_store_ps(s, lo[k]);
    _mm256_store_ps(s + 8, hi[k]);
    bf16_pair_lanes(rows[k], xa, chunks, n, s);
    out[k] = reduce16(s);
  }
}

// Eight lanes of one MXFP4 chunk (kernels.h): `d` holds their eight 32-bit words, x their
// activations (x_n at 16n, as arranged for a full chunk); returns t0 + t1.
inline __m256 mxfp4_half(__m256i d, const float* x, __m256 lut8) {
  auto w = [&](int n) { return e2m1_decode(_mm256_srli_epi32(d, 4 * n), lut8); };
  auto xn = [&](int n) { return _mm256_loadu_ps(x + 16 * n); };
  __m256 t0 = _mm256_mul_ps(e2m1_decode(d, lut8), xn(0));
  __m256 t1 = _mm256_mul_ps(w(1), xn(1));
  t0 = _mm256_fmadd_ps(w(2), xn(2), t0);
  t1 = _mm256_fmadd_ps(w(3), xn(3), t1);
  t0 = _mm256_fmadd_ps(w(4), xn(4), t0);
  t1 = _mm256_fmadd_ps(w(5), xn(5), t1);
  t0 = _mm256_fmadd_ps(w(6), xn(6), t0);
  t1 = _mm256_fmadd_ps(w(7), xn(7), t1);
  return _mm256_add_ps(t0, t1);
}

// One MXFP4 row in the canonical chunk order: lanes 0-7 and 8-15 in two ymm accumulators;
// a partial last chunk goes through the shared scalar code.
inline float mxfp4_row(const uint8_t* row, const uint8_t* scales, const float* xa, int nblocks) {
  const __m256 lut8 = _mm256_loadu_ps(kE2M1);
  const __m256i first = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i second = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  const int chunks = nblocks / 4;
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int c = 0; c < chunks; ++c) {
    const uint8_t* chunk = row + 64 * static_cast<size_t>(c);
    const uint8_t* sc = scales + 4 * static_cast<size_t>(c);
    const float* x = xa + 128 * static_cast<size_t>(c);
    _mm_prefetch(reinterpret_cast<const char*>(chunk + 2048), _MM_HINT_T0);
    const __m256 f4 = _mm256_castps128_ps256(_mm_setr_ps(
        kMxfp4Factors[sc[0]], kMxfp4Factors[sc[1]], kMxfp4Factors[sc[2]], kMxfp4Factors[sc[3]]));
    const __m256i d0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk));
    const __m256i d1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32));
    lo = _mm256_fmadd_ps(mxfp4_half(d0, x, lut8), _mm256_permutevar8x32_ps(f4, first), lo);
    hi = _mm256_fmadd_ps(mxfp4_half(d1, x + 8, lut8), _mm256_permutevar8x32_ps(f4, second), hi);
  }
  alignas(32) float s[16];
  _mm256_store_ps(s, lo);
  _mm256_store_ps(s + 8, hi);
  mxfp4_chunk_lanes(row, scales, xa, chunks, nblocks, s);
  return reduce16(s);
}

// One row per pass: two accumulators and the chunk's temporaries fit the 16 ymm registers.
constexpr int kMxfp4Rows = 1;
// Each token row decodes its chunks itself: from 2 token rows on the tiles run (kTileMinTokens).
constexpr int kMxfp4Tokens = 1;
constexpr int kMxfp4TokenRows = 1;
constexpr size_t kMxfp4GroupBytes = 0;
template <int R>
inline void mxfp4_rows(const uint8_t* const* rows, const uint8_t* const* scales, const float* xa,
                       int nblocks, const uint8_t* /*ahead*/, float* out) {
  for (int k = 0; k < R; ++k) out[k] = mxfp4_row(rows[k], scales[k], xa, nblocks);
}

// --- Tiles: many token rows per pass (kernels_tiles.inc) ---
// A pair's 16 lanes are two ymm halves, which are independent accumulations: the tile kernels
// run the lanes 0-7 and then the lanes 8-15, so that a tile fits the 16 ymm registers.

// reduce16 (kernels_generic.inc) in registers: the same pairs added in the same order.
inline float reduce_lanes(const float* s) {
  const __m256 a = _mm256_add_ps(_mm256_load_ps(s), _mm256_load_ps(s + 8));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

// Tile shapes and thresholds, measured as on AVX-512: dense 4 x 3 (4 x 2 equal for BF16, 13
// points slower for F32; 2 x 4 slower), MXFP4 4 x 1 (8 x 1 and 2 x 2 slower). The tiles beat
// the row kernels from T = 2 for BF16, F16 and MXFP4, from T = 16 for F32.
template <MatFormat F>
inline constexpr int kTileRows = 4;
template <MatFormat F>
inline constexpr int kTileTokens = F == MatFormat::kMxfp4 ? 1 : 3;
template <MatFormat F>
inline constexpr int kTileMinTokens = F == MatFormat::kF32 ? 16 : 2;

template <MatFormat F, int R, int TT>
inline void dense_tile(const uint8_t* const* rows, const float* x, size_t xs, int nc, float* acc,
                       size_t acc_stride, bool first) {
#pragma GCC unroll 16
  for (int h = 0; h < 2; ++h) {
    __m256 a[R][TT];
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        a[k][t] = first
                      ? _mm256_setzero_ps()
                      : _mm256_load_ps(acc + acc_stride * static_cast<size_t>(k) + 16 * t + 8 * h);
    for (int c = 0; c < nc; ++c) {
      if constexpr (F == MatFormat::kBF16) {
        const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
        __m256i w[R];
#pragma GCC unroll 16
        for (int k = 0; k < R; ++k)
          w[k] = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(rows[k] + 64 * static_cast<size_t>(c) + 32 * h));
#pragma GCC unroll 16
        for (int t = 0; t < TT; ++t) {
          const float* xc = x + xs * static_cast<size_t>(t) + 32 * static_cast<size_t>(c) + 8 * h;
          const __m256 xe = _mm256_loadu_ps(xc);
#pragma GCC unroll 16
          for (int k = 0; k < R; ++k)
            a[k][t] =
                _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w[k], 16)), xe, a[k][t]);
          const __m256 xo = _mm256_loadu_ps(xc + 16);
#pragma GCC unroll 16
          for (int k = 0; k < R; ++k)
            a[k][t] =
                _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w[k], hi_mask)), xo, a[k][t]);
        }
      } else {
        __m256 w[R];
#pragma GCC unroll 16
        for (int k = 0; k < R; ++k) w[k] = load8<F>(rows[k], 16 * c + 8 * h);
#pragma GCC unroll 16
        for (int t = 0; t < TT; ++t) {
          const __m256 xv = _mm256_loadu_ps(x + xs * static_cast<size_t>(t) +
                                            16 * static_cast<size_t>(c) + 8 * h);
#pragma GCC unroll 16
          for (int k = 0; k < R; ++k) a[k][t] = _mm256_fmadd_ps(w[k], xv, a[k][t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        _mm256_store_ps(acc + acc_stride * static_cast<size_t>(k) + 16 * t + 8 * h, a[k][t]);
  }
}

template <int R>
inline void mxfp4_decode(const uint8_t* const* rows, const uint8_t* const* scales, int nc,
                         Mxfp4DecodedChunk* panel) {
  const __m256 lut8 = _mm256_loadu_ps(kE2M1);
#pragma GCC unroll 16
  for (int k = 0; k < R; ++k)
    for (int c = 0; c < nc; ++c) {
      Mxfp4DecodedChunk& out = panel[k * nc + c];
#pragma GCC unroll 16
      for (int h = 0; h < 2; ++h) {
        const __m256i d = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(rows[k] + 64 * static_cast<size_t>(c) + 32 * h));
#pragma GCC unroll 16
        for (int n = 0; n < 8; ++n)
          _mm256_store_ps(out.w[n] + 8 * h, e2m1_decode(_mm256_srli_epi32(d, 4 * n), lut8));
      }
      for (int j = 0; j < 16; ++j) out.f[j] = kMxfp4Factors[scales[k][4 * c + j / 4]];
    }
}

template <int R, int TT>
inline void mxfp4_tile(const Mxfp4DecodedChunk* panel, const float* x, size_t xs, int nc,
                       float* acc, size_t acc_stride, bool first) {
  for (int h = 0; h < 2; ++h) {
    __m256 a[R][TT];
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        a[k][t] = first
                      ? _mm256_setzero_ps()
                      : _mm256_load_ps(acc + acc_stride * static_cast<size_t>(k) + 16 * t + 8 * h);
    for (int c = 0; c < nc; ++c) {
      __m256 s[2][R][TT];
#pragma GCC unroll 16
      for (int n = 0; n < 8; ++n) {
        __m256 w[R];
#pragma GCC unroll 16
        for (int k = 0; k < R; ++k) w[k] = _mm256_load_ps(panel[k * nc + c].w[n] + 8 * h);
#pragma GCC unroll 16
        for (int t = 0; t < TT; ++t) {
          const __m256 xv = _mm256_loadu_ps(x + xs * static_cast<size_t>(t) +
                                            128 * static_cast<size_t>(c) + 16 * n + 8 * h);
#pragma GCC unroll 16
          for (int k = 0; k < R; ++k)
            s[n % 2][k][t] =
                n < 2 ? _mm256_mul_ps(w[k], xv) : _mm256_fmadd_ps(w[k], xv, s[n % 2][k][t]);
        }
      }
#pragma GCC unroll 16
      for (int k = 0; k < R; ++k) {
        const __m256 f = _mm256_load_ps(panel[k * nc + c].f + 8 * h);
#pragma GCC unroll 16
        for (int t = 0; t < TT; ++t)
          a[k][t] = _mm256_fmadd_ps(_mm256_add_ps(s[0][k][t], s[1][k][t]), f, a[k][t]);
      }
    }
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k)
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        _mm256_store_ps(acc + acc_stride * static_cast<size_t>(k) + 16 * t + 8 * h, a[k][t]);
  }
}

#include "engine/ops/kernels_avx2_packed.inc"

#include "engine/ops/kernels_blocks.inc"

#include "engine/ops/kernels_tiles.inc"

#include "engine/ops/kernels_packed.inc"

#include "engine/ops/kernels_rows.inc"

float dot(const float* a, const float* b, int n) {
  const int nv = n / 16 * 16;
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int i = 0; i < nv; i += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), hi);
  }
  alignas(32) float s[16];
  _mm256_store_ps(s, lo);
  _mm256_store_ps(s + 8, hi);
  for (int j = 0; nv + j < n; ++j) s[j] = std::fma(a[nv + j], b[nv + j], s[j]);
  return reduce16(s);
}

// The operations of kernels_math.inc on 8 floats.
struct Avx2Lanes {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V splat(float f) { return _mm256_set1_ps(f); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V abs(V a) { return _mm256_and_ps(a, mask(0x7fffffff)); }
  static V neg(V a) { return _mm256_xor_ps(a, mask(INT32_MIN)); }
  static V with_sign(V mag, V s) { return _mm256_or_ps(mag, _mm256_and_ps(s, mask(INT32_MIN))); }
  static V select_lt(V a, V b, V x, V y) {
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
  }
  static V pow2_of_rounded(V t) {
    const __m256i n = _mm256_sub_epi32(
        _mm256_castps_si256(t), _mm256_set1_epi32(std::bit_cast<int32_t>(canon::kRoundMagic)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  }

 private:
  static V mask(int32_t m) { return _mm256_castsi256_ps(_mm256_set1_epi32(m)); }
};

}  // namespace

const KernelTable& table() {
  static const KernelTable t{SimdLevel::kAvx2,
                             matmul_rows,
                             packed_scratch_bytes,
                             dot,
                             generic_matvec_t,
                             generic_kda_head,
                             generic_axpy,
                             situ_glu_lanes<Avx2Lanes>,
                             sigmoid_lanes<Avx2Lanes>,
                             sigmoid_gate_lanes<Avx2Lanes>,
                             generic_short_conv};
  return t;
}

}  // namespace nj::ops::avx2
