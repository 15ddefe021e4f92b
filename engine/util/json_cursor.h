// A strict, allocation-free JSON reader for large machine-written documents.
//
// nlohmann::json builds a tree; the released K3 checkpoint has 135 MB of JSON in its
// safetensors headers and index (497k tensors), which must index in well under a second.
// JsonCursor walks the text in place instead: the caller drives it with the structure it
// expects, and every error says at which byte and what was expected. Small documents
// (config.json) still use nlohmann.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace nj {

class JsonCursor {
 public:
  // `name` prefixes error messages (normally the file path).
  JsonCursor(std::string_view text, std::string name) : text_(text), name_(std::move(name)) {}

  // Skips whitespace, then consumes `c` if it is next. Returns whether it did.
  bool consume(char c);
  // Like consume, but a different character is a Corruption error.
  Status expect(char c);
  // True when only whitespace remains.
  bool at_end();

  // Reads a string. `out` receives the decoded text (escapes resolved, \u to UTF-8).
  Status read_string(std::string* out);
  // Reads a string without escapes as a view into the text (fast path for keys and
  // names); falls back to decoding into `scratch` (and points `out` at it) if it has any.
  Status read_string_view(std::string_view* out, std::string* scratch);
  // Reads a non-negative integer without sign, fraction or exponent.
  Status read_uint64(uint64_t* out);
  // Reads any number.
  Status read_double(double* out);
  // Skips one value of any type.
  Status skip_value();

  // Iterates an object: call `begin_object`, then `next_member(&key)` until it returns
  // false (it consumes the separating commas and the closing brace).
  Status begin_object();
  Result<bool> next_member(std::string_view* key, std::string* scratch);
  Status begin_array();
  Result<bool> next_element();

  // "<name>: byte <pos>: <what>" as Corruption.
  Status error(const std::string& what) const;
  size_t pos() const { return pos_; }

 private:
  void skip_ws();
  Status decode_string_from(size_t start, std::string* out);

  std::string_view text_;
  std::string name_;
  size_t pos_ = 0;
  bool first_ = true;  // first member/element of the innermost container being iterated
};

}  // namespace nj
