// JsonCursor: strict RFC 8259 reading without a document tree.
#include "engine/util/json_cursor.h"

#include <emmintrin.h>

#include <cstdlib>
#include <cstring>

namespace nj {

void JsonCursor::skip_ws() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    ++pos_;
  }
}

bool JsonCursor::at_end() {
  skip_ws();
  return pos_ == text_.size();
}

bool JsonCursor::consume(char c) {
  skip_ws();
  if (pos_ < text_.size() && text_[pos_] == c) {
    ++pos_;
    return true;
  }
  return false;
}

Status JsonCursor::expect(char c) {
  if (consume(c)) return Status();
  if (pos_ >= text_.size()) return error(std::string("expected '") + c + "', found the end");
  return error(std::string("expected '") + c + "', found '" + text_[pos_] + "'");
}

Status JsonCursor::error(const std::string& what) const {
  return corruption(name_ + ": JSON at byte " + std::to_string(pos_) + ": " + what);
}

namespace {

// Position of the first '"', '\\' or control character at or after p (or end). Sixteen bytes
// at a time with SSE2, which every x86-64 has: names in the K3 index average ~70 bytes.
const char* find_string_stop(const char* p, const char* end) {
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  const __m128i below_space = _mm_set1_epi8(0x20 - 128);  // unsigned c < 0x20 via a signed compare
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                     _mm_cmplt_epi8(_mm_xor_si128(v, flip), below_space));
    const int mask = _mm_movemask_epi8(hit);
    if (mask) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
  for (; p < end; ++p)
    if (*p == '"' || *p == '\\' || static_cast<unsigned char>(*p) < 0x20) return p;
  return end;
}

}  // namespace

Status JsonCursor::read_string_view(std::string_view* out, std::string* scratch) {
  NJ_RETURN_IF_ERROR(expect('"'));
  const size_t start = pos_;
  const char* base = text_.data();
  const char* stop = find_string_stop(base + pos_, base + text_.size());
  if (stop == base + text_.size()) {
    pos_ = text_.size();
    return error("unterminated string");
  }
  if (*stop == '"') {
    *out = std::string_view(base + start, static_cast<size_t>(stop - (base + start)));
    pos_ = static_cast<size_t>(stop - base) + 1;
    return Status();
  }
  if (*stop == '\\') {  // has escapes: decode the whole string
    NJ_RETURN_IF_ERROR(decode_string_from(start, scratch));
    *out = *scratch;
    return Status();
  }
  pos_ = static_cast<size_t>(stop - base);
  return error("control character in string");
}

Status JsonCursor::read_string(std::string* out) {
  std::string_view v;
  std::string scratch;
  NJ_RETURN_IF_ERROR(read_string_view(&v, &scratch));
  out->assign(v);
  return Status();
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
void append_utf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}
}  // namespace

Status JsonCursor::decode_string_from(size_t start, std::string* out) {
  out->clear();
  pos_ = start;
  auto read_hex4 = [&](uint32_t* v) -> Status {
    if (pos_ + 4 > text_.size()) return error("truncated \\u escape");
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
      int h = hex_value(text_[pos_ + static_cast<size_t>(i)]);
      if (h < 0) return error("bad \\u escape");
      r = r * 16 + static_cast<uint32_t>(h);
    }
    pos_ += 4;
    *v = r;
    return Status();
  };
  while (pos_ < text_.size()) {
    char c = text_[pos_++];
    if (c == '"') return Status();
    if (static_cast<unsigned char>(c) < 0x20) return error("control character in string");
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    if (pos_ >= text_.size()) break;
    char e = text_[pos_++];
    switch (e) {
      case '"': out->push_back('"'); break;
      case '\\': out->push_back('\\'); break;
      case '/': out->push_back('/'); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        uint32_t cp = 0;
        NJ_RETURN_IF_ERROR(read_hex4(&cp));
        if (cp >= 0xD800 && cp < 0xDC00) {
          uint32_t lo = 0;
          if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u')
            return error("unpaired surrogate");
          pos_ += 2;
          NJ_RETURN_IF_ERROR(read_hex4(&lo));
          if (lo < 0xDC00 || lo > 0xDFFF) return error("unpaired surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return error("unpaired surrogate");
        }
        append_utf8(out, cp);
        break;
      }
      default: return error(std::string("bad escape '\\") + e + "'");
    }
  }
  return error("unterminated string");
}

Status JsonCursor::read_uint64(uint64_t* out) {
  skip_ws();
  size_t start = pos_;
  uint64_t v = 0;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    uint64_t d = static_cast<uint64_t>(text_[pos_] - '0');
    if (v > (UINT64_MAX - d) / 10) return error("integer too large");
    v = v * 10 + d;
    ++pos_;
  }
  if (pos_ == start) return error("expected a non-negative integer");
  if (pos_ - start > 1 && text_[start] == '0') return error("leading zero in integer");
  if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E'))
    return error("expected an integer, found a fraction");
  *out = v;
  return Status();
}

Status JsonCursor::read_double(double* out) {
  skip_ws();
  size_t start = pos_;
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  auto digits = [&] {
    size_t s = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ - s;
  };
  if (digits() == 0) return error("expected a number");
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    if (digits() == 0) return error("expected digits after '.'");
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (digits() == 0) return error("expected digits in exponent");
  }
  std::string num(text_.substr(start, pos_ - start));
  *out = std::strtod(num.c_str(), nullptr);
  return Status();
}

Status JsonCursor::skip_value() {
  skip_ws();
  if (pos_ >= text_.size()) return error("expected a value, found the end");
  char c = text_[pos_];
  if (c == '"') {
    std::string_view v;
    std::string scratch;
    return read_string_view(&v, &scratch);
  }
  if (c == '{') {
    NJ_RETURN_IF_ERROR(begin_object());
    std::string_view key;
    std::string scratch;
    while (true) {
      NJ_ASSIGN_OR_RETURN(bool more, next_member(&key, &scratch));
      if (!more) return Status();
      NJ_RETURN_IF_ERROR(skip_value());
    }
  }
  if (c == '[') {
    NJ_RETURN_IF_ERROR(begin_array());
    while (true) {
      NJ_ASSIGN_OR_RETURN(bool more, next_element());
      if (!more) return Status();
      NJ_RETURN_IF_ERROR(skip_value());
    }
  }
  for (const char* lit : {"true", "false", "null"}) {
    size_t n = std::strlen(lit);
    if (text_.substr(pos_, n) == lit) {
      pos_ += n;
      return Status();
    }
  }
  double d;
  return read_double(&d);
}

Status JsonCursor::begin_object() {
  NJ_RETURN_IF_ERROR(expect('{'));
  first_ = true;
  return Status();
}

Result<bool> JsonCursor::next_member(std::string_view* key, std::string* scratch) {
  if (consume('}')) {
    first_ = false;
    return false;
  }
  if (!first_) NJ_RETURN_IF_ERROR(expect(','));
  first_ = false;
  NJ_RETURN_IF_ERROR(read_string_view(key, scratch));
  NJ_RETURN_IF_ERROR(expect(':'));
  return true;
}

Status JsonCursor::begin_array() {
  NJ_RETURN_IF_ERROR(expect('['));
  first_ = true;
  return Status();
}

Result<bool> JsonCursor::next_element() {
  if (consume(']')) {
    first_ = false;
    return false;
  }
  if (!first_) NJ_RETURN_IF_ERROR(expect(','));
  first_ = false;
  return true;
}

}  // namespace nj
