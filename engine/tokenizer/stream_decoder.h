// Streaming detokenization for live output: token ids in, text out, never splitting a
// UTF-8 character across two outputs.
#pragma once

#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace nj {

// Feeds ids one at a time. Each push returns the bytes that are ready: everything so
// far except a trailing incomplete UTF-8 sequence, which is held until a later token
// completes it (a character often spans two byte-level tokens). Bytes that no
// continuation could make valid are passed on as they are, not held.
// Invariant: the concatenation of every push() and the final finish() equals
// tokenizer.decode(all ids).
// Not thread-safe; one per output stream. The tokenizer must outlive it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // Returns the newly complete bytes (possibly empty). Ids outside the vocabulary
  // contribute nothing, as in Tokenizer::decode.
  std::string push(int32_t id);

  // Returns the held bytes (an incomplete sequence, as they are) and resets.
  std::string finish();

  // Bytes currently held back (0..3).
  size_t held_bytes() const { return held_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string held_;
};

}  // namespace nj
