// The reference bf16 decode loop: one value at a time, exactly as block_format.h says.
#include <cstring>

#include "engine/codec/bf16_kernels.h"

namespace nj {

Bf16Fault decode_bf16_scalar(const BlockView& b, const AliasTable& t, Bf16Cursor* c, uint8_t* dst) {
  for (size_t i = c->value; i < b.values; ++i) {
    uint32_t& x = c->state[i % kLanes];
    const uint32_t slot = x & (kProbScale - 1);
    const uint32_t k = alias_index(t, slot);
    const uint32_t s = t.symbol[k];
    x = t.freq[k] * (x >> kProbBits) +
        static_cast<uint32_t>(static_cast<int32_t>(slot) + t.delta[k]);
    if (x < kStateLow) {
      if (c->word == b.word_count) {
        c->value = i;
        return Bf16Fault::kWordsExhausted;
      }
      uint16_t w;
      std::memcpy(&w, b.words + 2 * c->word++, 2);
      x = x << 16 | w;
    }
    uint8_t e = b.exponent[s];
    if (s == kEscapeSymbol) {
      if (c->escape == b.escape_count) {
        c->value = i;
        return Bf16Fault::kEscapesExhausted;
      }
      e = b.escapes[c->escape++];
    }
    const uint16_t r = static_cast<uint16_t>(e << 8 | b.sign_mantissa[i]);
    const uint16_t v = static_cast<uint16_t>(r >> 1 | r << 15);
    std::memcpy(dst + 2 * i, &v, 2);
  }
  c->value = b.values;
  return Bf16Fault::kNone;
}

}  // namespace nj
