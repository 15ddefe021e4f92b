// The lossless block codec (engine/codec): every block type round-trips on every SIMD
// level, on random bytes, on the reference generator's BF16 weights and on adversarial
// patterns; malformed blocks are refused as Corruption, and no decoder reads or writes
// outside its block or its destination (both end at a page with no access rights).
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "engine/codec/block_decoder.h"
#include "engine/codec/block_encoder.h"
#include "engine/codec/block_format.h"
#include "engine/model/tensor_index.h"
#include "tests/unit/model/test_models.h"

namespace nj {
namespace {

std::vector<SimdLevel> levels() {
  std::vector<SimdLevel> v;
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (l <= detect_simd_level()) v.push_back(l);
  return v;
}

// Bytes placed so that the first byte past them is on a page mapped with no access: a read
// or write past the end faults.
class Guarded {
 public:
  explicit Guarded(size_t n) : n_(n) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    span_ = (n + page - 1) / page * page + page;
    base_ = static_cast<uint8_t*>(
        ::mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base_ != MAP_FAILED);
    REQUIRE(::mprotect(base_ + span_ - page, page, PROT_NONE) == 0);
    data_ = base_ + span_ - page - n;
  }
  ~Guarded() { ::munmap(base_, span_); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  uint8_t* data() { return data_; }
  std::span<uint8_t> span() { return {data_, n_}; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t n_ = 0, span_ = 0;
};

// Decodes `stored` (copied to the end of a guarded page) into a guarded destination of
// `raw_bytes`, at `level`.
Status decode_guarded(const std::vector<uint8_t>& stored, size_t raw_bytes, SimdLevel level,
                      std::vector<uint8_t>* out = nullptr) {
  Guarded in(stored.size()), dst(raw_bytes);
  if (!stored.empty()) std::memcpy(in.data(), stored.data(), stored.size());
  Status s = decode_block(std::span<const uint8_t>(in.data(), stored.size()), dst.span(), level);
  if (out) out->assign(dst.data(), dst.data() + raw_bytes);
  return s;
}

std::vector<uint8_t> as_bytes(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

uint16_t bf16_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

// The BF16 tensors of the reference generator's golden model (tests/reference/make_model.py).
std::vector<uint8_t> reference_bf16_weights() {
  const std::string dir = testing::golden_dir("tiny-bf16-flat");
  auto index = TensorIndex::open(dir);
  REQUIRE(index.ok());
  const std::string bytes = testing::read_all(dir + "/model.safetensors");
  std::vector<uint8_t> out;
  for (const TensorInfo& t : index->tensors())
    if (t.dtype == DType::kBF16)
      out.insert(out.end(), bytes.begin() + static_cast<long>(t.offset),
                 bytes.begin() + static_cast<long>(t.offset + t.nbytes));
  REQUIRE(out.size() > 1000000);
  return out;
}

struct Case {
  std::string name;
  std::vector<uint8_t> bytes;
};

std::vector<Case> cases() {
  std::mt19937_64 rng(7);
  std::vector<Case> c;
  auto random_bytes = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
  };
  c.push_back({"random bytes, 1 MiB", random_bytes(1u << 20)});
  c.push_back({"random bytes, 130 (less than one step)", random_bytes(130)});
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{128}, size_t{129}, size_t{1000},
                   size_t{300001}}) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = bf16_of(normal(rng));
    c.push_back({"gaussian BF16, " + std::to_string(n) + " values", as_bytes(v)});
  }
  const std::vector<uint8_t> ref = reference_bf16_weights();
  c.push_back({"the reference generator's BF16 weights", ref});
  c.push_back({"the reference generator's weights, 1 MiB + 6",
               std::vector<uint8_t>(ref.begin(), ref.begin() + (1 << 20) + 6)});
  {
    std::vector<uint16_t> v(200000);  // every exponent, uniformly: most values escape
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(rng());
    c.push_back({"all escapes (every exponent)", as_bytes(v)});
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<uint16_t>((i * 0x80 + 0x0F00 * (i % 7)) ^ 0x5A5A);
    c.push_back({"a stride pattern over many exponents", as_bytes(v)});
  }
  c.push_back({"one value", as_bytes(std::vector<uint16_t>(100000, bf16_of(0.015625f)))});
  c.push_back({"zeros", std::vector<uint8_t>(65536, 0)});
  {
    std::vector<uint16_t> v(100000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_of(i % 2 ? 1.0f : -3.0e-20f);
    c.push_back({"alternating two values far apart", as_bytes(v)});
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_of(i % 2 ? 0.01f : -0.01f);
    c.push_back({"alternating sign", as_bytes(v)});
  }
  {
    std::vector<uint16_t> v(50000);  // 16 exponents: one more than the dictionary holds
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<uint16_t>(((100 + i % 16) << 7) | (i & 0x7F));
    c.push_back({"sixteen exponents", as_bytes(v)});
  }
  c.push_back({"largest block of gaussian BF16", [&] {
                 std::vector<uint16_t> v(kMaxBlockRawBytes / 2);
                 for (auto& x : v) x = bf16_of(normal(rng));
                 return as_bytes(v);
               }()});
  return c;
}

TEST_CASE("every block type round-trips on every SIMD level", "[codec]") {
  for (const Case& c : cases()) {
    INFO(c.name << " (" << c.bytes.size() << " bytes)");
    std::vector<std::pair<std::string, BlockEncodeOptions>> encodings = {{"raw", {false, true}},
                                                                         {"best", {}}};
    if (!c.bytes.empty() && c.bytes.size() % 2 == 0)
      encodings.push_back({"bf16 forced", {true, false}});
    for (const auto& [label, options] : encodings) {
      INFO("encoding: " << label);
      std::vector<uint8_t> stored;
      const BlockType type = encode_block(c.bytes, options, &stored);
      if (label == "raw") CHECK(type == BlockType::kRaw);
      if (label == "bf16 forced") CHECK(type == BlockType::kBf16);
      if (label == "best")
        CHECK(stored.size() <= c.bytes.size() + kBlockHeaderBytes);  // never grows past raw
      for (SimdLevel level : levels()) {
        INFO("level " << simd_level_name(level));
        std::vector<uint8_t> out;
        const Status s = decode_guarded(stored, c.bytes.size(), level, &out);
        INFO(s.to_string());
        REQUIRE(s.ok());
        CHECK(out == c.bytes);
      }
    }
  }
}

TEST_CASE("BF16 weights compress to about two thirds and random bytes stay raw", "[codec]") {
  std::vector<uint8_t> stored;
  const std::vector<uint8_t> ref = reference_bf16_weights();
  REQUIRE(encode_block(std::span<const uint8_t>(ref.data(), 1u << 20), {}, &stored) ==
          BlockType::kBf16);
  const double ratio = static_cast<double>(stored.size()) / (1u << 20);
  CHECK(ratio < 0.70);
  CHECK(ratio > 0.60);  // ~2.6 bits of exponent entropy + 8 raw bits per 16
  std::mt19937_64 rng(1);
  std::vector<uint8_t> noise(1u << 16);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  stored.clear();
  CHECK(encode_block(noise, {}, &stored) == BlockType::kRaw);
  CHECK(stored.size() == noise.size() + kBlockHeaderBytes);
}

// A valid bf16 block, and its field offsets, for building malformed ones.
struct Bf16Block {
  std::vector<uint8_t> raw, stored;
  size_t values = 0, words = 0, escapes = 0;
  static constexpr size_t kFreq = kBlockHeaderBytes, kExp = kFreq + 32, kState = kExp + 16,
                          kCounts = kState + 4 * kLanes, kPlanes = kCounts + 8;
  size_t words_at() const { return kPlanes + values; }
  size_t escapes_at() const { return words_at() + 2 * words; }
  void set_u32(size_t at, uint32_t v) { std::memcpy(stored.data() + at, &v, 4); }
  uint32_t u32(size_t at) const {
    uint32_t v;
    std::memcpy(&v, stored.data() + at, 4);
    return v;
  }
};

Bf16Block valid_block() {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<uint16_t> v(20000);
  for (auto& x : v) x = bf16_of(normal(rng));
  for (size_t i = 0; i < v.size(); i += 97) v[i] = static_cast<uint16_t>(rng());  // some escapes
  Bf16Block b;
  b.raw = as_bytes(v);
  REQUIRE(encode_block(b.raw, {true, false}, &b.stored) == BlockType::kBf16);
  b.values = v.size();
  b.words = b.u32(Bf16Block::kCounts);
  b.escapes = b.u32(Bf16Block::kCounts + 4);
  REQUIRE(b.escapes > 0);
  REQUIRE(b.words > 2 * kLanes);
  REQUIRE(b.stored.size() == b.escapes_at() + b.escapes);
  return b;
}

TEST_CASE("malformed blocks are refused as Corruption on every SIMD level", "[codec][errors]") {
  const Bf16Block good = valid_block();
  struct Bad {
    std::string name;
    std::vector<uint8_t> stored;
    size_t raw_bytes;
    std::string says;  // part of the message
  };
  std::vector<Bad> corpus;
  auto with = [&](const std::string& name, const std::string& says, auto&& edit,
                  size_t raw_bytes = 0) {
    Bf16Block b = good;
    edit(b);
    corpus.push_back({name, b.stored, raw_bytes ? raw_bytes : b.raw.size(), says});
  };
  corpus.push_back({"empty", {}, 16, "shorter than its"});
  corpus.push_back({"a header cut short", {0, 0, 0}, 16, "shorter than its"});
  with("an unknown type", "unknown block type", [](Bf16Block& b) { b.stored[0] = 7; });
  with("reserved bytes set", "reserved", [](Bf16Block& b) { b.stored[2] = 1; });
  with("raw size past the limit", "limit",
       [](Bf16Block& b) { b.set_u32(4, kMaxBlockRawBytes + 2); });
  with(
      "raw size that is not the destination's", "its place holds", [](Bf16Block&) {},
      good.raw.size() - 2);
  with("an odd bf16 size", "must be even",
       [](Bf16Block& b) { b.set_u32(4, static_cast<uint32_t>(b.raw.size() - 1)); });
  with("a raw block with a short payload", "raw block holds", [](Bf16Block& b) {
    b.stored[0] = 0;
    b.stored.resize(100);
  });
  with("tables cut short", "shorter than its",
       [](Bf16Block& b) { b.stored.resize(kBlockHeaderBytes + 40); });
  with("frequencies that do not sum to 4096", "sum to",
       [](Bf16Block& b) { b.stored[Bf16Block::kFreq] ^= 1; });
  with("a dictionary entry for the escape", "escape entry",
       [](Bf16Block& b) { b.stored[Bf16Block::kExp + 15] = 9; });
  with("a state below 2^16", "below 2^16",
       [](Bf16Block& b) { b.set_u32(Bf16Block::kState + 4 * 5, 7); });
  with("a word count past the end", "counts",
       [](Bf16Block& b) { b.set_u32(Bf16Block::kCounts, b.u32(Bf16Block::kCounts) + 1); });
  with("a huge word count", "counts",
       [](Bf16Block& b) { b.set_u32(Bf16Block::kCounts, 0xFFFFFFFFu); });
  with("more escapes than values", "escapes for", [](Bf16Block& b) {
    const uint32_t e = static_cast<uint32_t>(b.values + 1);
    b.set_u32(Bf16Block::kCounts + 4, e);
    b.stored.resize(b.escapes_at() + e);
  });
  with("one byte missing", "counts", [](Bf16Block& b) { b.stored.pop_back(); });
  with("one byte too many", "counts", [](Bf16Block& b) { b.stored.push_back(0); });
  with("codes past the end of the words", "runs out of coded words", [](Bf16Block& b) {
    // The last 100 words are gone (and the count says so): the lanes need more than there are.
    b.stored.erase(b.stored.begin() + static_cast<long>(b.escapes_at() - 200),
                   b.stored.begin() + static_cast<long>(b.escapes_at()));
    b.set_u32(Bf16Block::kCounts, static_cast<uint32_t>(b.words - 100));
  });
  with("no words at all", "runs out of coded words", [](Bf16Block& b) {
    b.stored.erase(b.stored.begin() + static_cast<long>(b.words_at()),
                   b.stored.begin() + static_cast<long>(b.escapes_at()));
    b.set_u32(Bf16Block::kCounts, 0);
  });
  with("words left over", "unused", [](Bf16Block& b) {
    b.stored.insert(b.stored.begin() + static_cast<long>(b.escapes_at()), {1, 2, 3, 4});
    b.set_u32(Bf16Block::kCounts, static_cast<uint32_t>(b.words + 2));
  });
  with("escapes past the end", "runs out of escape bytes", [](Bf16Block& b) {
    b.stored.resize(b.stored.size() - b.escapes);
    b.set_u32(Bf16Block::kCounts + 4, 0);
  });
  with("escapes left over", "escape bytes unused", [](Bf16Block& b) {
    b.stored.push_back(0x42);
    b.set_u32(Bf16Block::kCounts + 4, static_cast<uint32_t>(b.escapes + 1));
  });
  with("a damaged start state", "",
       [](Bf16Block& b) { b.set_u32(Bf16Block::kState, b.u32(Bf16Block::kState) ^ 0x100); });
  with("a damaged word", "",
       [](Bf16Block& b) { b.stored[b.words_at() + 2 * (b.words / 2)] ^= 0x10; });

  for (const Bad& bad : corpus) {
    INFO(bad.name);
    for (SimdLevel level : levels()) {
      INFO("level " << simd_level_name(level));
      const Status s = decode_guarded(bad.stored, bad.raw_bytes, level);
      INFO(s.to_string());
      CHECK(s.code() == StatusCode::kCorruption);
      CHECK(s.message().find(bad.says) != std::string::npos);
    }
  }
}

TEST_CASE("a block with any byte flipped decodes or is refused, never out of bounds",
          "[codec][errors]") {
  const Bf16Block good = valid_block();
  std::mt19937_64 rng(5);
  int refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> bad = good.stored;
    const size_t at = rng() % bad.size();
    bad[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    for (SimdLevel level : levels()) {
      const Status s = decode_guarded(bad, good.raw.size(), level);
      if (!s.ok()) CHECK(s.code() == StatusCode::kCorruption);
      refused += !s.ok();
    }
  }
  CHECK(refused >
        0);  // flips in the coded parts are caught; those in the plain bytes are the checksum's job
}

}  // namespace
}  // namespace nj
