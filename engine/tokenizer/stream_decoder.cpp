// StreamDecoder: holds back an incomplete UTF-8 suffix between tokens.
#include "engine/tokenizer/stream_decoder.h"

#include "engine/tokenizer/utf8.h"

namespace nj {

std::string StreamDecoder::push(int32_t id) {
  const auto bytes = tokenizer_->token_bytes(id);
  if (!bytes) return {};
  held_.append(*bytes);
  const size_t keep = tok::incomplete_utf8_suffix(held_);
  std::string ready = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return ready;
}

std::string StreamDecoder::finish() {
  std::string rest;
  rest.swap(held_);
  return rest;
}

}  // namespace nj
