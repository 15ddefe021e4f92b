// UTF-8 decoding that never fails, and the test the streaming decoder needs: does a
// byte string end inside a sequence that the next bytes could still complete?
//
// Well-formed means Unicode's Table 3-7 (no overlongs, no surrogates, nothing past
// U+10FFFF). Anything else is taken one byte at a time, so every byte string splits
// into characters and invalid bytes, and nothing is ever skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nj::tok {

inline constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

struct Utf8Char {
  uint32_t cp;   // the code point, or kInvalidCodePoint for a stray byte
  uint32_t len;  // bytes consumed: 1..4 (1 for a stray byte)
};

// The range the second byte of a sequence must fall in, given its lead byte.
// REQUIRES: lead is 0xC2..0xF4.
inline constexpr void utf8_second_byte_range(uint8_t lead, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead == 0xE0) *lo = 0xA0;  // no overlong 3-byte forms
  if (lead == 0xED) *hi = 0x9F;  // no surrogates
  if (lead == 0xF0) *lo = 0x90;  // no overlong 4-byte forms
  if (lead == 0xF4) *hi = 0x8F;  // nothing past U+10FFFF
}

// Sequence length announced by a lead byte; 0 when the byte cannot start a sequence.
inline constexpr uint32_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Decodes the character starting at p.
// REQUIRES: p < end.
inline Utf8Char decode_utf8(const uint8_t* p, const uint8_t* end) {
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {b0, 1};
  const uint32_t n = utf8_sequence_length(b0);
  if (n == 0 || static_cast<size_t>(end - p) < n) return {kInvalidCodePoint, 1};
  uint8_t lo, hi;
  utf8_second_byte_range(b0, &lo, &hi);
  if (p[1] < lo || p[1] > hi) return {kInvalidCodePoint, 1};
  if (n == 2) return {(uint32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F), 2};
  if ((p[2] & 0xC0) != 0x80) return {kInvalidCodePoint, 1};
  if (n == 3)
    return {(uint32_t(b0 & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F), 3};
  if ((p[3] & 0xC0) != 0x80) return {kInvalidCodePoint, 1};
  return {(uint32_t(b0 & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) |
              (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F),
          4};
}

// Length of the longest suffix of `bytes` that is a proper prefix of a well-formed
// sequence (0..3): the bytes a streaming decoder holds back until the next token.
// A suffix that no continuation could make well-formed is not held (0).
size_t incomplete_utf8_suffix(std::string_view bytes);

// True when `bytes` is entirely well-formed UTF-8.
bool is_valid_utf8(std::string_view bytes);

}  // namespace nj::tok
