// AVX-512 kernels (F/BW/VL/DQ). Compiled with -mavx512* for this file only and selected at
// run time. The 16 lanes of one zmm register are the 16 canonical lanes of kernels.h; tails
// and the final tree run through the shared generic code, so results equal the scalar table.
#include <immintrin.h>

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

template <int R>
inline void mxfp4_rows(const uint8_t* const* rows, const uint8_t* const* scales, const float* xa,
                       int nblocks, float* out) {
  const __m512 lut = _mm512_loadu_ps(kE2M1);
  const __m512i low4 = _mm512_set1_epi32(15);
  __m512 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm512_setzero_ps();
  for (int b = 0; b < nblocks; ++b) {
    const __m512 xe = _mm512_loadu_ps(xa + 32 * static_cast<size_t>(b));
    const __m512 xo = _mm512_loadu_ps(xa + 32 * static_cast<size_t>(b) + 16);
    for (int k = 0; k < R; ++k) {
      const uint8_t sc = scales[k][b];
      if (sc == kE8M0Zero) continue;
      const __m512i v = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[k] + 16 * static_cast<size_t>(b))));
      const __m512 elo = _mm512_permutexvar_ps(_mm512_and_si512(v, low4), lut);
      const __m512 ehi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut);
      __m512 t = _mm512_mul_ps(elo, xe);
      t = _mm512_fmadd_ps(ehi, xo, t);
      acc[k] = _mm512_fmadd_ps(t, _mm512_set1_ps(e8m0_scale(sc)), acc[k]);
    }
  }
  for (int k = 0; k < R; ++k) {
    alignas(64) float s[16];
    _mm512_store_ps(s, acc[k]);
    out[k] = reduce16(s);
  }
}

template <MatFormat F>
void matmul_rows_dense(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys,
                       int r0, int r1) {
  const uint8_t* base = static_cast<const uint8_t*>(W.data);
  const size_t rb = W.row_bytes();
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t* rows[4] = {base + rb * static_cast<size_t>(r), base + rb * static_cast<size_t>(r + 1),
                              base + rb * static_cast<size_t>(r + 2), base + rb * static_cast<size_t>(r + 3)};
    for (int t = 0; t < T; ++t) {
      float out[4];
      dense_rows<F, 4>(rows, X + static_cast<size_t>(t) * xs, W.cols, out);
      for (int k = 0; k < 4; ++k) Y[static_cast<size_t>(t) * ys + static_cast<size_t>(r + k)] = out[k];
    }
  }
  for (; r < r1; ++r) {
    const uint8_t* rows[1] = {base + rb * static_cast<size_t>(r)};
    for (int t = 0; t < T; ++t)
      dense_rows<F, 1>(rows, X + static_cast<size_t>(t) * xs, W.cols,
                       &Y[static_cast<size_t>(t) * ys + static_cast<size_t>(r)]);
  }
}

void matmul_rows_mxfp4(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys,
                       int r0, int r1) {
  const uint8_t* base = static_cast<const uint8_t*>(W.data);
  const size_t rb = W.row_bytes();
  const int nb = W.cols / 32;
  auto row = [&](int r) { return base + rb * static_cast<size_t>(r); };
  auto srow = [&](int r) { return W.scales + static_cast<size_t>(nb) * static_cast<size_t>(r); };
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t* rows[4] = {row(r), row(r + 1), row(r + 2), row(r + 3)};
    const uint8_t* scs[4] = {srow(r), srow(r + 1), srow(r + 2), srow(r + 3)};
    for (int t = 0; t < T; ++t) {
      float out[4];
      mxfp4_rows<4>(rows, scs, X + static_cast<size_t>(t) * xs, nb, out);
      for (int k = 0; k < 4; ++k) Y[static_cast<size_t>(t) * ys + static_cast<size_t>(r + k)] = out[k];
    }
  }
  for (; r < r1; ++r) {
    const uint8_t* rows[1] = {row(r)};
    const uint8_t* scs[1] = {srow(r)};
    for (int t = 0; t < T; ++t)
      mxfp4_rows<1>(rows, scs, X + static_cast<size_t>(t) * xs, nb,
                    &Y[static_cast<size_t>(t) * ys + static_cast<size_t>(r)]);
  }
}

void matmul_rows(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys, int r0,
                 int r1) {
  switch (W.format) {
    case MatFormat::kF32: return matmul_rows_dense<MatFormat::kF32>(W, X, T, xs, Y, ys, r0, r1);
    case MatFormat::kBF16: return matmul_rows_dense<MatFormat::kBF16>(W, X, T, xs, Y, ys, r0, r1);
    case MatFormat::kF16: return matmul_rows_dense<MatFormat::kF16>(W, X, T, xs, Y, ys, r0, r1);
    case MatFormat::kMxfp4: return matmul_rows_mxfp4(W, X, T, xs, Y, ys, r0, r1);
  }
}

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
