// UTF-8 helpers: the incomplete-suffix test of the streaming decoder, validation.
#include "engine/tokenizer/utf8.h"

namespace nj::tok {

size_t incomplete_utf8_suffix(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  // The lead byte is at most 3 bytes from the end (a 4-byte sequence missing one).
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const uint8_t b = s[n - k];
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const uint32_t need = utf8_sequence_length(b);
    if (need <= k) return 0;  // ASCII, a stray byte, or a sequence that is complete
    if (k >= 2) {
      uint8_t lo, hi;
      utf8_second_byte_range(b, &lo, &hi);
      if (s[n - k + 1] < lo || s[n - k + 1] > hi) return 0;
    }
    return k;  // later bytes are continuations (checked by the loop)
  }
  return 0;
}

bool is_valid_utf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const auto* end = p + bytes.size();
  while (p < end) {
    const Utf8Char c = decode_utf8(p, end);
    if (c.cp == kInvalidCodePoint) return false;
    p += c.len;
  }
  return true;
}

}  // namespace nj::tok
