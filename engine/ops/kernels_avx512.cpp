// AVX-512 kernels (F/BW/VL/DQ). Compiled with -mavx512* for this file only and selected at
// run time. The 16 lanes of one zmm register are the 16 canonical lanes of kernels.h; tails
// and the final tree run through the shared generic code, so results equal the scalar table.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/ops/kernels.h"
#include "engine/util/status.h"

namespace nj::ops::avx512 {
namespace {
#include "engine/ops/kernels_generic.inc"

// reduce16 (kernels_generic.inc) on a register: the same pairs added in the same order, so
// the same bits, without a round trip through memory.
inline float reduce16(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

template <MatFormat F>
inline __m512 load16(const uint8_t* row, int i) {
  if constexpr (F == MatFormat::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (F == MatFormat::kBF16) {
    __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * static_cast<size_t>(i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * static_cast<size_t>(i)));
    return _mm512_cvtph_ps(h);
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

// The factors of 16 consecutive blocks' scale codes (kMxfp4Factors computed in-register:
// 2^(s-127) is s << 23, except 2^-127 for s == 0 and 0 for s == 255). Reads only `count`
// codes (at most 16); the other lanes are unspecified.
inline __m512 mxfp4_factors16(const uint8_t* scales, int count) {
  const __m128i codes =
      count >= 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales))
                  : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << count) - 1), scales);
  const __m512i s = _mm512_cvtepu8_epi32(codes);
  __m512i bits = _mm512_slli_epi32(s, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_setzero_si512()),
                               _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_set1_epi32(kE8M0Zero)),
                               _mm512_setzero_si512());
  return _mm512_castsi512_ps(bits);
}

// R MXFP4 rows against TT token rows (token t's arranged activations at xa + t * xs; out[t * R
// + k] is pair (row k, token t)) in the canonical chunk order (kernels.h):
//  * one 64-byte load holds a row's chunk, and shifting it right by 4n puts nibble n of
//    every lane in the low 4 bits that vpermps reads, so 16 elements cost a shift and a
//    permute (no widening);
//  * the factors of 16 blocks are built once per row (mxfp4_factors16), and each chunk
//    takes its four, one per four lanes, with one permute: one multiply-add per chunk
//    applies them, where the block-by-block order needed one multiply per block;
//  * the rows of a pass share the activation loads; `ahead` is the memory the next pass
//    reads (R rows' worth of packed bytes, 16 * R * nblocks), prefetched linearly during
//    this pass (the rows of a pass are contiguous; a fixed distance ahead of each row let
//    every pass start cold);
//  * a partial last chunk goes through the shared scalar code;
//  * each chunk is decoded once for the TT token rows (below: token groups).
// Measured (TT = 1) with tests/bench/kernel_bench (2 threads, 256 MB, alternating A/B runs in one
// session) on Zen 5: 6.9-7.2 ms per matvec against 7.3-7.9 for the block-by-block order
// this replaced, with the activations 64-byte aligned (prepare_x) and the final reduction
// in registers (each worth a few percent). Per chunk and row it issues 26 vector
// instructions (7 shifts, 9 permutes, 9 multiply-adds, 1 add); in cache one core issues
// about 3 of them per cycle, what a microbenchmark of that mix reached, so the kernel is
// bound by instruction throughput. 4 rows per pass beat 1, 2 and 8; prefetch variants (further
// ahead, into L2, non-temporal, in row order) measured no better.
template <int R, int TT>
inline void mxfp4_rows_tokens(const uint8_t* const* rows, const uint8_t* const* scales,
                              const float* xa, size_t xs, int nblocks, const uint8_t* ahead,
                              float* out) {
  const __m512 lut = _mm512_loadu_ps(kE2M1);
  const __m512i quad = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const int chunks = nblocks / 4;
  __m512 acc[R][TT], factors[R];
  const float* x[TT];  // each token's activations at the current chunk
#pragma GCC unroll 16
  for (int t = 0; t < TT; ++t) x[t] = xa + xs * static_cast<size_t>(t);
#pragma GCC unroll 16
  for (int k = 0; k < R; ++k)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[k][t] = _mm512_setzero_ps();
  for (int c = 0; c < chunks; ++c) {
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k)
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * static_cast<size_t>(R * c + k)),
                   _MM_HINT_T0);
    if (c % 4 == 0)
#pragma GCC unroll 16
      for (int k = 0; k < R; ++k) factors[k] = mxfp4_factors16(scales[k] + 4 * c, nblocks - 4 * c);
    const __m512i pick = _mm512_add_epi32(quad, _mm512_set1_epi32(4 * (c % 4)));
#pragma GCC unroll 16
    for (int k = 0; k < R; ++k) {
      const __m512i d = _mm512_loadu_si512(rows[k] + 64 * static_cast<size_t>(c));
      __m512 s[2][TT];
#pragma GCC unroll 8
      for (int n = 0; n < 8; ++n) {
        const __m512 w = _mm512_permutexvar_ps(n == 0 ? d : _mm512_srli_epi32(d, 4 * n), lut);
#pragma GCC unroll 16
        for (int t = 0; t < TT; ++t) {
          const __m512 xv = _mm512_loadu_ps(x[t] + 16 * n);
          s[n % 2][t] = n < 2 ? _mm512_mul_ps(w, xv) : _mm512_fmadd_ps(w, xv, s[n % 2][t]);
        }
      }
      const __m512 f = _mm512_permutexvar_ps(pick, factors[k]);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t)
        acc[k][t] = _mm512_fmadd_ps(_mm512_add_ps(s[0][t], s[1][t]), f, acc[k][t]);
    }
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) x[t] += 128;
  }
#pragma GCC unroll 16
  for (int k = 0; k < R; ++k)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      if (4 * chunks == nblocks) {
        out[t * R + k] = reduce16(acc[k][t]);
        continue;
      }
      alignas(64) float s[16];
      _mm512_store_ps(s, acc[k][t]);
      mxfp4_chunk_lanes(rows[k], scales[k], xa + xs * static_cast<size_t>(t), chunks, nblocks, s);
      out[t * R + k] = reduce16(s);
    }
}

// One token row: the same kernel (its activations once per chunk, shared by the R rows).
template <int R>
inline void mxfp4_rows(const uint8_t* const* rows, const uint8_t* const* scales, const float* xa,
                       int nblocks, const uint8_t* ahead, float* out) {
  mxfp4_rows_tokens<R, 1>(rows, scales, xa, 0, nblocks, ahead, out);
}

// Rows per pass (measured best; see mxfp4_rows).
constexpr int kMxfp4Rows = 4;

// Token groups (mxfp4_rows_tokens with TT > 1), the few rows an expert gets in a batch: each
// chunk's nibble vectors are decoded once for the group's token rows, all in registers.
// Measured (one thread, median thread CPU time, a [1024][1024] matrix as bench-8g's experts,
// activations 64-byte aligned as prepare_x leaves them, load ~9): T = 2 / 3 / 4 / 6 token rows
// 0.037 / 0.046 / 0.063-0.078 / 0.07-0.11 ms against 0.046 / 0.067-0.080 / 0.09-0.11 /
// 0.13-0.16 ms for mxfp4_rows<4> token row by token row. Groups of 3 or 5 at most measured no
// better than 4; 2 rows per pass slower (T = 3: 0.063 ms; 16 partial sums, 8 accumulators and
// the decoded vector outgrow the registers). With activations not aligned to a cache line
// (each of a chunk's 8 loads per token row then touches two lines) this kernel lost to
// mxfp4_rows (T = 3: 0.086 ms), which loads each activation vector once for 4 rows.
// Token rows decoded together by mxfp4_rows_tokens, and its rows per pass (measured best).
// A group's activations must stay in L1 while a row's chunks are walked: with one weight row
// per pass every chunk reads 512 bytes per token row, where mxfp4_rows shares each load among
// 4 rows. Wide rows therefore stay token row by token row: [4096][7168] (28 KB per token row)
// measured 2.2 / 3.4 ms at T = 2 / 3 in groups against 1.5 / 2.1 ms (`kernel_bench --only
// tokens --formats mxfp4 --threads 1`); the engine's expert probe at bench-8g's [1024][1024]
// (`pass_cost_bench`, KernelRates' grouped experts, 2 threads, three alternating runs at load
// 9-10): 3 / 4 token rows 122-123 / 147-181 us per expert against 150-155 / 192-257.
constexpr int kMxfp4Tokens = 4;
constexpr int kMxfp4TokenRows = 1;
constexpr size_t kMxfp4GroupBytes = 16 << 10;

// --- Tiles: many token rows per pass (kernels_tiles.inc) ---

inline float reduce_lanes(const float* s) {
  return reduce16(_mm512_load_ps(s));
}

// Dense tiles only: MXFP4 goes from the row kernels straight to the packed panels, which beat
// the MXFP4 tiles (8 x 1 on decoded chunks) from T = 8 on, the tiles' threshold. Tile shape,
// measured best among the shapes that fit the 32 zmm registers (one thread, a [1024][7168]
// matrix, T = 256): 4 x 6 (24 accumulators, the 4 rows' weights, one activation vector; 4 x 5
// equal, 8 x 3 and 6 x 4 slower).
template <MatFormat F>
inline constexpr int kTileRows = 4;
template <MatFormat F>
inline constexpr int kTileTokens = 6;
// From how many token rows on the tiles beat the row kernels (measured at T = 2..16 on a
// [4096][7168] matrix): BF16 and F16 from 3, F32 from 4. MXFP4's row kernels, which decode in
// registers (mxfp4_rows_tokens: groups of up to 4 token rows), matched the tiles at T = 8
// ([1024][1024]: T = 16 0.51 ms against 0.30), where the packed panels take over.
template <MatFormat F>
inline constexpr int kTileMinTokens = F == MatFormat::kMxfp4 ? 8
                                      : F == MatFormat::kF32 ? 4
                                                             : 3;

// F32, F16 and BF16 rows: each chunk's R weight vectors are loaded once and used by the TT
// token rows, each activation vector by the R weight rows.
template <MatFormat F, int R, int TT>
inline void dense_tile(const uint8_t* const* rows, const float* x, size_t xs, int nc, float* acc,
                       size_t acc_stride, bool first) {
  __m512 a[R][TT];
#pragma GCC unroll 16
  for (int k = 0; k < R; ++k)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t)
      a[k][t] = first ? _mm512_setzero_ps()
                      : _mm512_load_ps(acc + acc_stride * static_cast<size_t>(k) + 16 * t);
  for (int c = 0; c < nc; ++c) {
    if constexpr (F == MatFormat::kBF16) {
      // The paired order: every pair's even elements of the chunk, then its odd ones.
      const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
      __m512i w[R];
#pragma GCC unroll 16
      for (int k = 0; k < R; ++k) w[k] = _mm512_loadu_si512(rows[k] + 64 * static_cast<size_t>(c));
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512 xe =
            _mm512_loadu_ps(x + xs * static_cast<size_t>(t) + 32 * static_cast<size_t>(c));
#pragma GCC unroll 16
        for (int k = 0; k < R; ++k)
          a[k][t] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w[k], 16)), xe, a[k][t]);
      }
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512 xo =
            _mm512_loadu_ps(x + xs * static_cast<size_t>(t) + 32 * static_cast<size_t>(c) + 16);
#pragma GCC unroll 16
        for (int k = 0; k < R; ++k)
          a[k][t] =
              _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w[k], hi_mask)), xo, a[k][t]);
      }
    } else {
      __m512 w[R];
#pragma GCC unroll 16
      for (int k = 0; k < R; ++k) w[k] = load16<F>(rows[k], 16 * c);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512 xv =
            _mm512_loadu_ps(x + xs * static_cast<size_t>(t) + 16 * static_cast<size_t>(c));
#pragma GCC unroll 16
        for (int k = 0; k < R; ++k) a[k][t] = _mm512_fmadd_ps(w[k], xv, a[k][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < R; ++k)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t)
      _mm512_store_ps(acc + acc_stride * static_cast<size_t>(k) + 16 * t, a[k][t]);
}

#include "engine/ops/kernels_avx512_packed.inc"

#include "engine/ops/kernels_blocks.inc"

#include "engine/ops/kernels_tiles.inc"

#include "engine/ops/kernels_packed.inc"

#include "engine/ops/kernels_rows.inc"

float dot(const float* a, const float* b, int n) {
  const int nv = n / 16 * 16;
  __m512 acc = _mm512_setzero_ps();
  for (int i = 0; i < nv; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  alignas(64) float s[16];
  _mm512_store_ps(s, acc);
  for (int j = 0; nv + j < n; ++j) s[j] = std::fma(a[nv + j], b[nv + j], s[j]);
  return reduce16(s);
}

// The operations of kernels_math.inc on 16 floats.
struct Avx512Lanes {
  using V = __m512;
  static constexpr int kWidth = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V splat(float f) { return _mm512_set1_ps(f); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V abs(V a) { return bits_and(a, 0x7fffffff); }
  static V neg(V a) {
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
  }
  static V with_sign(V mag, V s) {
    return _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(mag), _mm512_castps_si512(bits_and(s, INT32_MIN))));
  }
  static V select_lt(V a, V b, V x, V y) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
  }
  static V pow2_of_rounded(V t) {
    const __m512i n = _mm512_sub_epi32(
        _mm512_castps_si512(t), _mm512_set1_epi32(std::bit_cast<int32_t>(canon::kRoundMagic)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  }

 private:
  static V bits_and(V a, int32_t m) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(m)));
  }
};

}  // namespace

const KernelTable& table() {
  static const KernelTable t{SimdLevel::kAvx512,
                             matmul_rows,
                             packed_scratch_bytes,
                             dot,
                             generic_matvec_t,
                             generic_kda_head,
                             generic_axpy,
                             situ_glu_lanes<Avx512Lanes>,
                             sigmoid_lanes<Avx512Lanes>,
                             sigmoid_gate_lanes<Avx512Lanes>,
                             generic_short_conv};
  return t;
}

}  // namespace nj::ops::avx512
