// Character classes of the K3 pre-tokenizer (k3-model.md §9): for each code point,
// the handful of Unicode properties the pattern asks about, as one byte of bits.
//
// The table is generated (unicode_tables.inc, by gen_unicode_tables.mjs) from the
// Unicode version that tiktoken's regex engine uses, so that `\p{L}`, `\p{Han}`, `\s`
// and the `&&` intersections mean here exactly what they mean there.
#pragma once

#include <cstdint>

namespace nj::tok {

enum CharClass : uint8_t {
  kUpperish = 1 << 0,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
  kLowerish = 1 << 1,   // [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
  kLetter = 1 << 2,     // \p{L}
  kNumber = 1 << 3,     // \p{N}
  kHan = 1 << 4,        // \p{Han} (the Script property, as the regex crate resolves it)
  kSpace = 1 << 5,      // \s (the White_Space property)
  kPySpace = 1 << 6,    // Python's str.isspace(): the 25,000-character run splitting
  kLineBreak = 1 << 7,  // \r or \n
};

namespace detail {
// kUnicodeVersion, kCharClassBlock[cp >> 8] (a block number) and
// kCharClassBlocks[block][cp & 0xFF] (the class bits): 36 KiB in all.
#include "engine/tokenizer/unicode_tables.inc"
}  // namespace detail

// Unicode version the tables were generated from ("16.0.0").
inline const char* unicode_tables_version() {
  return detail::kUnicodeVersion;
}

// The class bits of a code point. Unassigned code points, and kInvalidCodePoint (a
// stray byte), have none: like a symbol, they are neither letter, number nor space.
inline uint8_t char_class(uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return detail::kCharClassBlocks[detail::kCharClassBlock[cp >> 8]][cp & 0xFF];
}

}  // namespace nj::tok
