// The bf16 decode loop with AVX-512 F/BW/VL: the lanes are registers of 16 states. Per
// register and value the alias lookup is one compare and three two-table permutes (no
// gathers); the renormalizing words come from one load, expanded into the lanes that need
// them in lane order. The symbols of 64 lanes are then packed to bytes, mapped to exponents
// with one shuffle, joined to the sign and mantissa bytes and rotated back.
#include <immintrin.h>

#include <cstring>

#include "engine/codec/bf16_kernels.h"

namespace nj {
namespace {

constexpr int kGroups = kLanes / 16;

struct Tables {
  __m512i divider_end, f0, f1, d0, d1, s0, s1;
};

// Decodes one value in each of 16 lanes and renormalizes them. Returns the words taken.
// kBounded, for the last steps of a block: loads only the words taken, and returns
// kNoWords (leaving x as it was) when that is more than `words_left`. Otherwise REQUIRES
// 16 words readable at `words`.
constexpr unsigned kNoWords = ~0u;
template <bool kBounded>
inline unsigned decode16(const Tables& t, __m512i& x, __m512i& sym, const uint8_t* words,
                         size_t words_left = 0) {
  const __m512i slot = _mm512_and_si512(x, _mm512_set1_epi32(kProbScale - 1));
  const __m512i bucket = _mm512_srli_epi32(slot, 8);
  const __mmask16 upper =
      _mm512_cmpge_epu32_mask(slot, _mm512_permutexvar_epi32(bucket, t.divider_end));
  const __m512i k = _mm512_mask_add_epi32(bucket, upper, bucket, _mm512_set1_epi32(16));
  const __m512i f = _mm512_permutex2var_epi32(t.f0, k, t.f1);
  const __m512i d = _mm512_permutex2var_epi32(t.d0, k, t.d1);
  sym = _mm512_permutex2var_epi32(t.s0, k, t.s1);
  __m512i nx = _mm512_mullo_epi32(f, _mm512_srli_epi32(x, kProbBits));
  nx = _mm512_add_epi32(_mm512_add_epi32(nx, slot), d);
  const __mmask16 need = _mm512_cmplt_epu32_mask(nx, _mm512_set1_epi32(kStateLow));
  const unsigned n = static_cast<unsigned>(__builtin_popcount(need));
  __m256i w;
  if constexpr (kBounded) {
    if (n > words_left) return kNoWords;
    w = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), words);
  } else {
    w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words));
  }
  const __m512i wide = _mm512_maskz_expand_epi32(need, _mm512_cvtepu16_epi32(w));
  x = _mm512_or_si512(_mm512_mask_slli_epi32(nx, need, nx, 16), wide);
  return n;
}

struct Output {
  __m512i exponent, order, first_half, second_half, escape;
};

// Writes 64 values from the symbols of four registers. Returns false when the escapes run
// out.
inline bool write64(const Output& o, const BlockView& b, const __m512i* s, size_t v, size_t* escape,
                    uint8_t* dst) {
  const __m512i syms = _mm512_permutexvar_epi32(
      o.order,
      _mm512_packus_epi16(_mm512_packus_epi32(s[0], s[1]), _mm512_packus_epi32(s[2], s[3])));
  __m512i ex = _mm512_shuffle_epi8(o.exponent, syms);
  if (const __mmask64 esc = _mm512_cmpeq_epi8_mask(syms, o.escape)) {
    const size_t n = static_cast<size_t>(__builtin_popcountll(esc));
    if (n > b.escape_count - *escape) return false;
    // Rare (escapes are the exponents outside the block's 15): patched one by one.
    alignas(64) uint8_t bytes[64];
    _mm512_store_si512(bytes, ex);
    for (uint64_t m = esc, k = 0; m; m &= m - 1, ++k)
      bytes[__builtin_ctzll(m)] = b.escapes[*escape + k];
    ex = _mm512_load_si512(bytes);
    *escape += n;
  }
  const __m512i sm = _mm512_loadu_si512(b.sign_mantissa + v);
  const __m512i lo = _mm512_unpacklo_epi8(sm, ex), hi = _mm512_unpackhi_epi8(sm, ex);
  const __m512i r0 = _mm512_permutex2var_epi64(lo, o.first_half, hi);
  const __m512i r1 = _mm512_permutex2var_epi64(lo, o.second_half, hi);
  _mm512_storeu_si512(dst + 2 * v,
                      _mm512_or_si512(_mm512_srli_epi16(r0, 1), _mm512_slli_epi16(r0, 15)));
  _mm512_storeu_si512(dst + 2 * v + 64,
                      _mm512_or_si512(_mm512_srli_epi16(r1, 1), _mm512_slli_epi16(r1, 15)));
  return true;
}

}  // namespace

Bf16Fault decode_bf16_avx512(const BlockView& b, const AliasTable& at, Bf16Cursor* c,
                             uint8_t* dst) {
  static_assert(kLanes % 64 == 0);
  const Tables t{_mm512_loadu_si512(at.divider_end), _mm512_loadu_si512(at.freq),
                 _mm512_loadu_si512(at.freq + 16),   _mm512_loadu_si512(at.delta),
                 _mm512_loadu_si512(at.delta + 16),  _mm512_loadu_si512(at.symbol),
                 _mm512_loadu_si512(at.symbol + 16)};
  alignas(64) uint8_t exponents[64];  // the 16-byte table in each 128-bit lane, for vpshufb
  for (int k = 0; k < 4; ++k) std::memcpy(exponents + 16 * k, b.exponent, 16);
  const Output o{_mm512_load_si512(exponents),
                 // packus leaves dword 4k+m holding register m's lanes 4k..4k+3; this orders them
                 _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                 _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                 _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), _mm512_set1_epi8(kEscapeSymbol)};
  const uint8_t* words = b.words + 2 * c->word;
  const uint8_t* const words_end = b.words + 2 * b.word_count;
  size_t i = c->value;

  // While a whole step's words (at most kLanes) remain: states in registers, plain loads.
  {
    __m512i x[kGroups];
#pragma GCC unroll 16
    for (int g = 0; g < kGroups; ++g) x[g] = _mm512_loadu_si512(c->state + 16 * g);
    bool ok = true;
    while (ok && i + kLanes <= b.values && words_end - words >= 2 * kLanes) {
#pragma GCC unroll 4
      for (int h = 0; h < kGroups / 4; ++h) {
        __m512i s[4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) words += 2 * decode16<false>(t, x[4 * h + g], s[g], words);
        ok = ok && write64(o, b, s, i + 64 * static_cast<size_t>(h), &c->escape, dst);
      }
      if (ok) i += kLanes;
    }
#pragma GCC unroll 16
    for (int g = 0; g < kGroups; ++g) _mm512_storeu_si512(c->state + 16 * g, x[g]);
    c->word = static_cast<size_t>(words - b.words) / 2;
    c->value = i;
    if (!ok) return Bf16Fault::kEscapesExhausted;
  }
  // The last steps: every load bounded by the words left.
  while (i + kLanes <= b.values) {
    for (int h = 0; h < kGroups / 4; ++h) {
      __m512i x[4], s[4];
      for (int g = 0; g < 4; ++g) {
        x[g] = _mm512_loadu_si512(c->state + 64 * h + 16 * g);
        const unsigned n =
            decode16<true>(t, x[g], s[g], words, static_cast<size_t>(words_end - words) / 2);
        if (n == kNoWords) return Bf16Fault::kWordsExhausted;
        words += 2 * n;
        c->word += n;
        _mm512_storeu_si512(c->state + 64 * h + 16 * g, x[g]);
      }
      if (!write64(o, b, s, i + 64 * static_cast<size_t>(h), &c->escape, dst))
        return Bf16Fault::kEscapesExhausted;
    }
    i += kLanes;
    c->value = i;
  }
  return decode_bf16_scalar(b, at, c, dst);
}

}  // namespace nj
