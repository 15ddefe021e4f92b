// The scalar kernel table: the portable reference every SIMD level must match bit for bit.
// Many token rows go through the packed panels (kernels_packed.inc) with portable
// micro-kernels, so that the blocking itself is tested on every level.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/ops/kernels.h"
#include "engine/util/status.h"

namespace nj::ops::scalar {
namespace {
#include "engine/ops/kernels_generic.inc"

inline float reduce_lanes(const float* s) {
  float t[16];
  std::copy(s, s + 16, t);
  return reduce16(t);
}

// The tile shapes only set the loops' order here (scalar code keeps nothing in registers);
// small blocks make the tests cross every boundary of the packed loops.
template <MatFormat F>
inline constexpr int kPackRows = F == MatFormat::kMxfp4 ? 2 : 4;
template <MatFormat F>
inline constexpr int kPackTokens = 2;
template <MatFormat F>
inline constexpr int kPackGroupTiles = 2;
template <MatFormat F>
inline constexpr int kPackBlockChunks = 2;
template <MatFormat F>
inline constexpr int kPackMinTokens = 8;
// Small panels and token blocks: the tests cross their boundaries at small sizes.
inline constexpr size_t kPackPanelBytes = 8 << 10;
inline constexpr int kPackMaxPanelRows = 8;
inline constexpr size_t kPackBlockXBytes = 64 << 10;
inline constexpr int kPackMxfp4PanelRows = 8;

constexpr int kPackDenseRows = 4;

// R MXFP4 rows' chunks against TT token rows, element by element in the canonical order.
template <int R, int TT>
inline void mxfp4_packed_tile(const uint8_t* const* rows, const uint8_t* const* scales, int c0,
                              const float* x, size_t xs, size_t xc, int nc, float* acc,
                              size_t acc_stride, bool first) {
  for (int k = 0; k < R; ++k)
    for (int t = 0; t < TT; ++t) {
      const uint8_t* row = rows[k] + 64 * static_cast<size_t>(c0);
      const uint8_t* sc = scales[k] + 4 * static_cast<size_t>(c0);
      float* a = acc + acc_stride * static_cast<size_t>(k) + 16 * t;
      if (first) std::fill(a, a + 16, 0.0f);
      for (int c = 0; c < nc; ++c) {
        const float* xa = x + xs * static_cast<size_t>(t) + xc * static_cast<size_t>(c);
        for (int j = 0; j < 16; ++j) {
          const uint8_t* d = row + 64 * static_cast<size_t>(c) + 4 * j;
          float t0 = kE2M1[d[0] & 15] * xa[j], t1 = kE2M1[d[0] >> 4] * xa[16 + j];
          for (int n = 2; n < 8; n += 2) {
            t0 = std::fma(kE2M1[d[n / 2] & 15], xa[16 * n + j], t0);
            t1 = std::fma(kE2M1[d[n / 2] >> 4], xa[16 * (n + 1) + j], t1);
          }
          a[j] = std::fma(t0 + t1, kMxfp4Factors[sc[4 * c + j / 4]], a[j]);
        }
      }
    }
}

// wp[c][k][64 bytes]: F32 and BF16 as stored, F16 widened to F32.
template <MatFormat F>
inline constexpr size_t kPackedChunkBytes = 64;

template <MatFormat F>
inline void pack_dense(const uint8_t* const* rows, int nc, uint8_t* wp) {
  constexpr int R = kPackDenseRows;
  for (int c = 0; c < nc; ++c)
    for (int k = 0; k < R; ++k) {
      uint8_t* out = wp + 64 * static_cast<size_t>(c * R + k);
      if constexpr (F == MatFormat::kF16)
        for (int j = 0; j < 16; ++j) {
          const float v = load_f16(rows[k] + 2 * static_cast<size_t>(16 * c + j));
          std::memcpy(out + 4 * j, &v, 4);
        }
      else
        std::memcpy(out, rows[k] + 64 * static_cast<size_t>(c), 64);
    }
}

template <MatFormat F, int TT>
inline void packed_dense_tile(const uint8_t* wp, const float* x, size_t xs, int nc, float* acc,
                              size_t acc_stride, bool first) {
  constexpr int R = kPackDenseRows;
  for (int k = 0; k < R; ++k)
    for (int t = 0; t < TT; ++t) {
      float* a = acc + acc_stride * static_cast<size_t>(k) + 16 * t;
      if (first) std::fill(a, a + 16, 0.0f);
      for (int c = 0; c < nc; ++c) {
        const uint8_t* w = wp + 64 * static_cast<size_t>(c * R + k);
        if constexpr (F == MatFormat::kBF16) {  // lane j: elements 32c + 2j, then 32c + 2j + 1
          const float* xc = x + xs * static_cast<size_t>(t) + 32 * static_cast<size_t>(c);
          for (int j = 0; j < 16; ++j) {
            a[j] = std::fma(load_bf16(w + 4 * j), xc[j], a[j]);
            a[j] = std::fma(load_bf16(w + 4 * j + 2), xc[16 + j], a[j]);
          }
        } else {
          const float* xc = x + xs * static_cast<size_t>(t) + 16 * static_cast<size_t>(c);
          for (int j = 0; j < 16; ++j) a[j] = std::fma(load_f32(w + 4 * j), xc[j], a[j]);
        }
      }
    }
}

#include "engine/ops/kernels_blocks.inc"

#include "engine/ops/kernels_packed.inc"

template <MatFormat F>
void matmul_rows_format(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys,
                        int r0, int r1) {
  if (T >= kPackMinTokens<F>) return matmul_packed<F>(W, X, T, xs, Y, ys, r0, r1);
  generic_matmul_rows(W, X, T, xs, Y, ys, r0, r1);
}

void matmul_rows(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys, int r0,
                 int r1) {
  switch (W.format) {
    case MatFormat::kF32:
      return matmul_rows_format<MatFormat::kF32>(W, X, T, xs, Y, ys, r0, r1);
    case MatFormat::kBF16:
      return matmul_rows_format<MatFormat::kBF16>(W, X, T, xs, Y, ys, r0, r1);
    case MatFormat::kF16:
      return matmul_rows_format<MatFormat::kF16>(W, X, T, xs, Y, ys, r0, r1);
    case MatFormat::kMxfp4:
      return matmul_rows_format<MatFormat::kMxfp4>(W, X, T, xs, Y, ys, r0, r1);
  }
}

}  // namespace

const KernelTable& table() {
  static const KernelTable t{SimdLevel::kScalar,
                             matmul_rows,
                             packed_scratch_bytes,
                             generic_dot,
                             generic_matvec_t,
                             generic_kda_head,
                             generic_axpy,
                             situ_glu_lanes<ScalarLanes>,
                             sigmoid_lanes<ScalarLanes>,
                             sigmoid_gate_lanes<ScalarLanes>,
                             generic_short_conv};
  return t;
}

}  // namespace nj::ops::scalar
