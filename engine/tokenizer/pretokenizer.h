// The K3 pre-tokenizer (k3-model.md §9): text → the pieces that BPE encodes one by one.
//
// Two stages, as in the reference tokenizer:
//  1. Run splitting: the text is cut so that no segment holds more than 25,000
//     consecutive whitespace or non-whitespace characters ("whitespace" in the sense of
//     Python's str.isspace(), which the reference uses).
//  2. Within each segment, the leftmost-first matches of this pattern, in order:
//
//       [\p{Han}]+
//      |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*
//                         [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//      |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+
//                         [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//      |\p{N}{1,3}
//      | ?[^\s\p{L}\p{N}]+[\r\n]*
//      |\s*[\r\n]+
//      |\s+(?!\S)
//      |\s+
//
// The pattern is not run through a regex engine: PieceScanner is a hand-written
// matcher for exactly this pattern, with the backtracking outcomes worked out per
// alternative (see pretokenizer.cpp). Every character starts a match of some
// alternative and none matches empty, so the pieces tile the segment: concatenated,
// they are the input, byte for byte.
//
// Invalid UTF-8 is taken one byte at a time, each byte a character of no class (like
// an unassigned code point: not a letter, number or space), so it ends up in the
// punctuation alternative and its bytes are encoded as bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace nj::tok {

// Longest run of consecutive whitespace or non-whitespace characters in one segment.
inline constexpr size_t kMaxRunChars = 25000;

// Yields the segments of the run splitting, left to right; they tile the text.
// An empty text yields one empty segment. Holds a view of the text, which must
// outlive it.
class RunSplitter {
 public:
  explicit RunSplitter(std::string_view text, size_t max_run_chars = kMaxRunChars);
  // Stores the next segment in *segment and returns true, or returns false at the end.
  bool next(std::string_view* segment);

 private:
  const uint8_t* pos_;
  const uint8_t* end_;
  size_t max_run_chars_;
  bool done_ = false;
};

// Yields the pattern's matches in one segment, left to right; they tile the segment.
// Holds a view of the segment, which must outlive it.
class PieceScanner {
 public:
  explicit PieceScanner(std::string_view segment);
  // Stores the next piece in *piece and returns true, or returns false at the end.
  bool next(std::string_view* piece);

 private:
  const uint8_t* pos_;
  const uint8_t* end_;
};

// All pieces of `text`, both stages. Views into `text`. For tests and tools; the
// encoder streams the pieces instead.
std::vector<std::string_view> pre_tokenize(std::string_view text,
                                           size_t max_run_chars = kMaxRunChars);

}  // namespace nj::tok
