// The bf16 decode loop with AVX2: the lanes are registers of 8 states. AVX2 permutes read
// 8 entries, so a 16-entry table is two permutes and a blend on index bit 3, a 32-entry
// one two of those and a blend on bit 4; each slot's frequency, rank offset and symbol come
// packed in one 32-entry table, so a value costs two such lookups (its bucket's divider,
// then its piece). Gathers would do it in one instruction but run ~10x slower here. The
// renormalizing words are spread to the lanes that need them by a permute chosen by the
// lane mask.
#include <immintrin.h>

#include <array>
#include <cstring>

#include "engine/codec/bf16_kernels.h"

namespace nj {
namespace {

// [mask]: for each of 8 lanes, the index of its word among the set lanes below it.
constexpr std::array<uint64_t, 256> make_spread() {
  std::array<uint64_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    uint64_t v = 0;
    unsigned k = 0;
    for (unsigned j = 0; j < 8; ++j)
      if (m >> j & 1) v |= uint64_t{k++} << (8 * j);
    t[m] = v;
  }
  return t;
}
constexpr std::array<uint64_t, 256> kSpread = make_spread();

// Alias tables as AVX2 registers. A piece's entry: (freq - 1) | (delta + 4096) << 12 | symbol
// << 25.
struct Tables {
  __m256i divider_lo, divider_hi;  // divider_end[0..7], [8..15]
  __m256i entry[4];                // entries [0..7], [8..15], [16..23], [24..31]
};

Tables make_tables(const AliasTable& at) {
  alignas(32) uint32_t e[32];
  for (int k = 0; k < 32; ++k)
    e[k] = (at.freq[k] - 1) | static_cast<uint32_t>(at.delta[k] + 4096) << 12 | at.symbol[k] << 25;
  Tables t;
  t.divider_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.divider_end));
  t.divider_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.divider_end + 8));
  for (int k = 0; k < 4; ++k)
    t.entry[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(e + 8 * k));
  return t;
}

// 16-entry lookup; `bit3` holds index bit 3 in each lane's sign bit.
inline __m256i lookup16(__m256i lo, __m256i hi, __m256i idx, __m256 bit3) {
  return _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_permutevar8x32_epi32(lo, idx)),
                       _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(hi, idx)), bit3));
}

// One value of 8 lanes. REQUIRES: at least 8 words left (16 bytes are loaded).
inline void decode8(const Tables& t, __m256i& x, __m256i& sym, const uint8_t*& words) {
  const __m256i slot = _mm256_and_si256(x, _mm256_set1_epi32(kProbScale - 1));
  const __m256i bucket = _mm256_srli_epi32(slot, 8);
  const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(bucket, 28));
  const __m256i divider_end = lookup16(t.divider_lo, t.divider_hi, bucket, bit3);
  // slot >= divider_end (both below 2^13, so a signed compare is exact)
  const __m256i upper =
      _mm256_cmpgt_epi32(slot, _mm256_sub_epi32(divider_end, _mm256_set1_epi32(1)));
  const __m256i k = _mm256_add_epi32(bucket, _mm256_and_si256(upper, _mm256_set1_epi32(16)));
  const __m256 bit4 = _mm256_castsi256_ps(_mm256_slli_epi32(k, 27));
  const __m256i e = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(lookup16(t.entry[0], t.entry[1], k, bit3)),
                       _mm256_castsi256_ps(lookup16(t.entry[2], t.entry[3], k, bit3)), bit4));
  const __m256i f =
      _mm256_add_epi32(_mm256_and_si256(e, _mm256_set1_epi32(0xFFF)), _mm256_set1_epi32(1));
  const __m256i delta = _mm256_and_si256(_mm256_srli_epi32(e, 12), _mm256_set1_epi32(0x1FFF));
  sym = _mm256_srli_epi32(e, 25);
  __m256i nx = _mm256_mullo_epi32(f, _mm256_srli_epi32(x, kProbBits));
  nx = _mm256_add_epi32(nx,
                        _mm256_add_epi32(_mm256_sub_epi32(slot, _mm256_set1_epi32(4096)), delta));
  const __m256i need = _mm256_cmpeq_epi32(_mm256_srli_epi32(nx, 16), _mm256_setzero_si256());
  const unsigned m = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(need)));
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words)));
  const __m256i idx = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kSpread[m])));
  const __m256i wide = _mm256_permutevar8x32_epi32(w, idx);
  x = _mm256_blendv_epi8(nx, _mm256_or_si256(_mm256_slli_epi32(nx, 16), wide), need);
  words += 2 * static_cast<unsigned>(__builtin_popcount(m));
}

}  // namespace

Bf16Fault decode_bf16_avx2(const BlockView& b, const AliasTable& at, Bf16Cursor* c, uint8_t* dst) {
  static_assert(kLanes % 32 == 0);
  constexpr int kGroups = kLanes / 8;
  const Tables t = make_tables(at);
  const __m256i exponent =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.exponent)));
  // packus leaves dword 4k+m holding register m's lanes 4k..4k+3; this puts them in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i escape = _mm256_set1_epi8(kEscapeSymbol);

  __m256i x[kGroups];
  for (int g = 0; g < kGroups; ++g)
    x[g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c->state + 8 * g));
  const uint8_t* words = b.words + 2 * c->word;
  const uint8_t* const words_end = b.words + 2 * b.word_count;
  size_t i = c->value;
  Bf16Fault fault = Bf16Fault::kNone;
  // A step takes at most kLanes words; the last steps before the words run low go scalar.
  for (; i + kLanes <= b.values && words_end - words >= 2 * (kLanes + 8); i += kLanes) {
    for (int h = 0; h < kGroups / 4; ++h) {  // 32 values at a time
      __m256i q[4];
      for (int g = 0; g < 4; ++g) decode8(t, x[4 * h + g], q[g], words);
      const __m256i syms = _mm256_permutevar8x32_epi32(
          _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3])),
          order);
      __m256i ex = _mm256_shuffle_epi8(exponent, syms);
      if (const unsigned esc =
              static_cast<unsigned>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(syms, escape)))) {
        const size_t n = static_cast<size_t>(__builtin_popcount(esc));
        if (n > b.escape_count - c->escape) {
          fault = Bf16Fault::kEscapesExhausted;
          break;
        }
        alignas(32) uint8_t bytes[32];
        _mm256_store_si256(reinterpret_cast<__m256i*>(bytes), ex);
        for (unsigned m = esc, k = 0; m; m &= m - 1, ++k)
          bytes[__builtin_ctz(m)] = b.escapes[c->escape + k];
        ex = _mm256_load_si256(reinterpret_cast<const __m256i*>(bytes));
        c->escape += n;
      }
      const size_t v = i + 32 * static_cast<size_t>(h);
      const __m256i sm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.sign_mantissa + v));
      const __m256i lo = _mm256_unpacklo_epi8(sm, ex), hi = _mm256_unpackhi_epi8(sm, ex);
      const __m256i r0 = _mm256_permute2x128_si256(lo, hi, 0x20),
                    r1 = _mm256_permute2x128_si256(lo, hi, 0x31);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * v),
                          _mm256_or_si256(_mm256_srli_epi16(r0, 1), _mm256_slli_epi16(r0, 15)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * v + 32),
                          _mm256_or_si256(_mm256_srli_epi16(r1, 1), _mm256_slli_epi16(r1, 15)));
    }
    if (fault != Bf16Fault::kNone) break;
  }
  for (int g = 0; g < kGroups; ++g)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c->state + 8 * g), x[g]);
  c->word = static_cast<size_t>(words - b.words) / 2;
  c->value = i;
  if (fault != Bf16Fault::kNone) return fault;
  return decode_bf16_scalar(b, at, c, dst);
}

}  // namespace nj
