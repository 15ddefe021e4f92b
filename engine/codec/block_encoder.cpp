// The block encoder: sign and mantissa bytes as they are, exponents by interleaved rANS
// over the alias layout (block_format.h, alias_table.h).
#include "engine/codec/block_encoder.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "engine/codec/alias_table.h"

namespace nj {
namespace {

void put_u32(std::vector<uint8_t>* out, uint32_t v) {
  const size_t at = out->size();
  out->resize(at + 4);
  std::memcpy(out->data() + at, &v, 4);
}

void put_header(std::vector<uint8_t>* out, BlockType type, uint32_t raw_bytes) {
  out->push_back(static_cast<uint8_t>(type));
  out->insert(out->end(), 3, 0);
  put_u32(out, raw_bytes);
}

// Scales symbol counts (summing to n > 0) to frequencies summing to kProbScale, keeping
// every used symbol at 1 or more. The rounding error goes to or comes from the most
// frequent symbols, which it costs least.
std::array<uint16_t, kSymbols> normalize(const std::array<uint64_t, kSymbols>& count, uint64_t n) {
  std::array<uint16_t, kSymbols> f{};
  int64_t sum = 0;
  for (int s = 0; s < kSymbols; ++s) {
    if (!count[s]) continue;
    f[s] = static_cast<uint16_t>(std::max<uint64_t>(1, (count[s] * kProbScale + n / 2) / n));
    sum += f[s];
  }
  std::array<int, kSymbols> order{};
  for (int s = 0; s < kSymbols; ++s) order[s] = s;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count[a] > count[b]; });
  for (int k = 0; sum != kProbScale; k = (k + 1) % kSymbols) {
    const int s = order[k];
    if (!count[s]) {
      k = -1;  // back to the most frequent
      continue;
    }
    if (sum < kProbScale) {
      ++f[s];
      ++sum;
    } else if (f[s] > 1) {
      --f[s];
      --sum;
    }
  }
  return f;
}

void encode_bf16(std::span<const uint8_t> raw, std::vector<uint8_t>* out) {
  const size_t n = raw.size() / 2;
  std::vector<uint8_t> sm(n), ex(n);
  std::array<uint64_t, 256> hist{};
  for (size_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, raw.data() + 2 * i, 2);
    const uint16_t r = static_cast<uint16_t>(v << 1 | v >> 15);
    sm[i] = static_cast<uint8_t>(r);
    ex[i] = static_cast<uint8_t>(r >> 8);
    hist[ex[i]]++;
  }
  // The 15 most frequent exponents get symbols (ties: the smaller exponent); the rest escape.
  std::array<int, 256> by_count{};
  for (int e = 0; e < 256; ++e) by_count[e] = e;
  std::stable_sort(by_count.begin(), by_count.end(),
                   [&](int a, int b) { return hist[a] > hist[b]; });
  std::array<uint8_t, kSymbols> exponent{};
  std::array<uint8_t, 256> symbol_of;
  symbol_of.fill(kEscapeSymbol);
  std::array<uint64_t, kSymbols> count{};
  for (int s = 0; s < kEscapeSymbol && hist[by_count[s]]; ++s) {
    exponent[s] = static_cast<uint8_t>(by_count[s]);
    symbol_of[by_count[s]] = static_cast<uint8_t>(s);
  }
  for (int e = 0; e < 256; ++e) count[symbol_of[e]] += hist[e];
  const std::array<uint16_t, kSymbols> freq = normalize(count, n);
  const AliasTable table = build_alias_table(freq.data());
  std::vector<uint16_t> slot_of(kProbScale);
  alias_slots(table, freq.data(), slot_of.data());
  std::array<uint32_t, kSymbols> cum{};
  for (int s = 1; s < kSymbols; ++s) cum[s] = cum[s - 1] + freq[s - 1];

  // Encode backwards, so that the decoder reads forwards; words come out reversed.
  std::array<uint32_t, kLanes> state;
  state.fill(kStateLow);
  std::vector<uint16_t> words;
  words.reserve(n / 4 + kLanes);
  for (size_t i = n; i-- > 0;) {
    uint32_t& x = state[i % kLanes];
    const int s = symbol_of[ex[i]];
    const uint32_t f = freq[s];
    if (uint64_t{x} >= uint64_t{f} << (32 - kProbBits)) {
      words.push_back(static_cast<uint16_t>(x));
      x >>= 16;
    }
    const uint32_t q = x / f, rank = x - q * f;
    x = (q << kProbBits) + slot_of[cum[s] + rank];
  }
  std::reverse(words.begin(), words.end());
  std::vector<uint8_t> escapes;
  for (size_t i = 0; i < n; ++i)
    if (symbol_of[ex[i]] == kEscapeSymbol) escapes.push_back(ex[i]);

  put_header(out, BlockType::kBf16, static_cast<uint32_t>(raw.size()));
  for (uint16_t f : freq)
    out->insert(out->end(), {static_cast<uint8_t>(f), static_cast<uint8_t>(f >> 8)});
  out->insert(out->end(), exponent.begin(), exponent.end());
  for (uint32_t x : state) put_u32(out, x);
  put_u32(out, static_cast<uint32_t>(words.size()));
  put_u32(out, static_cast<uint32_t>(escapes.size()));
  out->insert(out->end(), sm.begin(), sm.end());
  const size_t at = out->size();
  out->resize(at + 2 * words.size());
  std::memcpy(out->data() + at, words.data(), 2 * words.size());
  out->insert(out->end(), escapes.begin(), escapes.end());
}

}  // namespace

BlockType encode_block(std::span<const uint8_t> raw, const BlockEncodeOptions& options,
                       std::vector<uint8_t>* out) {
  NJ_CHECK(raw.size() <= kMaxBlockRawBytes);
  const size_t start = out->size();
  if (options.try_bf16 && !raw.empty() && raw.size() % 2 == 0) {
    encode_bf16(raw, out);
    if (!options.raw_if_smaller || out->size() - start < kBlockHeaderBytes + raw.size())
      return BlockType::kBf16;
    out->resize(start);
  }
  NJ_CHECK(options.raw_if_smaller || !options.try_bf16);
  put_header(out, BlockType::kRaw, static_cast<uint32_t>(raw.size()));
  out->insert(out->end(), raw.begin(), raw.end());
  return BlockType::kRaw;
}

}  // namespace nj
