// Damaged, truncated and foreign state checkpoints are refused with a reason, never loaded
// as a wrong state and never a crash: a flipped byte anywhere, truncation at any offset,
// another model, a config that does not match the recorded shapes, crafted lengths (with
// valid checksums) that would otherwise allocate without bound.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <map>

#include "engine/runtime/model.h"
#include "engine/state/state_file.h"
#include "engine/state/state_format.h"
#include "tests/unit/sanitized.h"
#include "tests/unit/state/state_test_util.h"

namespace nj::state_testing {
namespace {

using namespace state_format;

const std::vector<int32_t> kPrompt = {3, 7, 11};
const SamplingParams kSampled{0.8f, 0, 0.9f, 42};

// Serves chosen paths from memory (so that thousands of damaged variants are not each
// written to disk) and everything else from the real file system.
class OverlayEnv final : public EnvWrapper {
 public:
  OverlayEnv() : EnvWrapper(Env::posix()) {}
  void set(const std::string& path, std::string bytes) { files_[path] = std::move(bytes); }
  void clear() { files_.clear(); }
  Result<std::unique_ptr<RandomAccessFile>> open_read(const std::string& path) override {
    auto it = files_.find(path);
    if (it == files_.end()) return target()->open_read(path);
    return std::unique_ptr<RandomAccessFile>(new MemFile(path, it->second));
  }

 private:
  class MemFile final : public RandomAccessFile {
   public:
    MemFile(std::string path, const std::string& bytes) : path_(std::move(path)), bytes_(bytes) {}
    Status read_at(uint64_t offset, void* dst, size_t n) override {
      if (offset > bytes_.size() || n > bytes_.size() - offset)
        return io_error(path_ + ": short read");
      std::memcpy(dst, bytes_.data() + offset, n);
      return Status();
    }
    uint64_t size() const override { return bytes_.size(); }
    const std::string& path() const override { return path_; }
    bool direct() const override { return false; }

   private:
    std::string path_;
    const std::string& bytes_;
  };
  std::map<std::string, std::string> files_;
};

// A checkpoint with two segment records, the files' pristine bytes, and a model to load it.
// Damaged variants are served from memory through `env`; the files on disk stay pristine
// unless a test changes them.
struct Fixture {
  Fixture() : model(open_test_model(generated_model("tiny"))) {
    Generation g(*model, kPrompt, kSampled);
    g.step(4);
    StateFileWriter w(*Env::posix(), head_path());
    REQUIRE(w.save(*model, g.session.state(), {g.sampler.params(), g.sampler.rng()}).ok());
    g.step(5);
    expected = g.checkpoint();
    REQUIRE(w.save(*model, expected.state, expected.sampler).ok());
    REQUIRE_FALSE(w.last_save().full);
    for (const auto& n : dir.names())
      if (is_segment_name_of(n, "state")) segment = dir.file(n);
    head = read_bytes(head_path());
    seg = read_bytes(segment);
  }
  std::string head_path() const { return dir.file("state"); }
  Result<StateCheckpoint> load() { return load_state_file(env, head_path(), *model); }
  void set_head(std::string bytes) { env.set(head_path(), std::move(bytes)); }
  void set_segment(std::string bytes) { env.set(segment, std::move(bytes)); }
  void restore() { env.clear(); }

  TempDir dir;
  OverlayEnv env;
  std::unique_ptr<Model> model;
  StateCheckpoint expected;
  std::string segment, head, seg;
};

// A part of a file: a header or a payload.
struct Region {
  std::string name;
  size_t offset, length;
  std::string reason;  // what a flip inside must be reported as; empty = any refusal
};

std::vector<Region> head_regions(const std::string& head) {
  std::vector<Region> r = {
      {"head magic", 0, 8, "bad magic"},
      {"head version", 8, 4, "unsupported format version"},
      {"head header", 12, kHeadHeaderBytes - 12, "checksum mismatch in the header"}};
  size_t off = kHeadHeaderBytes;
  while (off < head.size()) {
    const std::string tag = tag_name(get_u32(head.data() + off));
    const std::string name =
        "section " + tag + " index " + std::to_string(get_u32(head.data() + off + 4));
    const size_t len = static_cast<size_t>(get_u64(head.data() + off + 8));
    r.push_back({name + " header", off, kSectionHeaderBytes, ""});
    if (len > 0)
      r.push_back({name + " payload", off + kSectionHeaderBytes, len,
                   "checksum mismatch in section " + tag});
    off += kSectionHeaderBytes + len;
  }
  REQUIRE(off == head.size());
  return r;
}

std::vector<Region> segment_regions(const std::string& seg) {
  std::vector<Region> r = {{"segment header", 0, kSegmentHeaderBytes, ""}};
  size_t off = kSegmentHeaderBytes;
  for (int i = 0; off < seg.size(); ++i) {
    const size_t len = static_cast<size_t>(get_u64(seg.data() + off + 16));
    const std::string name = "record " + std::to_string(i);
    r.push_back({name + " header", off, kRecordHeaderBytes, ""});
    r.push_back({name + " payload", off + kRecordHeaderBytes, len, "checksum mismatch in " + name});
    off += kRecordHeaderBytes + len;
  }
  REQUIRE(off == seg.size());
  return r;
}

void check_refused(const Result<StateCheckpoint>& r, const std::string& reason) {
  INFO(r.status().to_string());
  REQUIRE_FALSE(r.ok());
  CHECK((r.status().code() == StatusCode::kCorruption ||
         r.status().code() == StatusCode::kFailedPrecondition));
  CHECK(r.status().message().find("state") != std::string::npos);  // names the file
  if (!reason.empty()) CHECK(r.status().message().find(reason) != std::string::npos);
}

TEST_CASE("the pristine fixture loads (so the refusals below are caused by the damage)",
          "[state][corruption]") {
  Fixture f;
  auto r = f.load();
  REQUIRE(r.ok());
  CHECK(checkpoint_difference(*r, f.expected) == "");
}

// Offsets [0, n) a test damages: all of them in the normal build; in the sanitizer build
// (tests/unit/sanitized.h, 10-30x slower, where these two tests took 93 s of CPU on
// 2026-12-02) every 4th and the last, which still reach every field's parser.
std::vector<size_t> offsets(size_t n) {
  const size_t stride = testing::kSanitized ? 4 : 1;
  std::vector<size_t> r;
  for (size_t i = 0; i < n; i += stride) r.push_back(i);
  if (n > 0 && r.back() != n - 1) r.push_back(n - 1);
  return r;
}

TEST_CASE("a flipped byte anywhere in either file is refused, naming the damaged section",
          "[state][corruption]") {
  Fixture f;
  int flips = 0;
  for (bool in_head : {true, false}) {
    const std::string& pristine = in_head ? f.head : f.seg;
    for (const Region& reg : in_head ? head_regions(f.head) : segment_regions(f.seg)) {
      for (size_t i : offsets(reg.length)) {
        std::string bytes = pristine;
        bytes[reg.offset + i] = static_cast<char>(bytes[reg.offset + i] ^ 0x5a);
        in_head ? f.set_head(bytes) : f.set_segment(bytes);
        INFO(reg.name << ", byte " << i << " (file offset " << reg.offset + i << ")");
        check_refused(f.load(), reg.reason);
        ++flips;
      }
      f.restore();
    }
  }
  if (!testing::kSanitized) CHECK(flips == static_cast<int>(f.head.size() + f.seg.size()));
}

TEST_CASE("a checkpoint truncated at any offset is refused as truncated", "[state][corruption]") {
  Fixture f;
  for (size_t c : offsets(f.head.size())) {
    f.set_head(f.head.substr(0, c));
    INFO("head cut at " << c << " of " << f.head.size());
    check_refused(f.load(), "truncated");
  }
  f.restore();
  for (size_t c : offsets(f.seg.size())) {
    f.set_segment(f.seg.substr(0, c));
    INFO("segment cut at " << c << " of " << f.seg.size());
    check_refused(f.load(), "truncated");
  }
}

TEST_CASE("bytes after the committed part of the segment (an interrupted append) are ignored",
          "[state][corruption]") {
  Fixture f;
  f.set_segment(f.seg + std::string(1000, '\x7f'));
  auto r = f.load();
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  CHECK(checkpoint_difference(*r, f.expected) == "");
}

TEST_CASE("a checkpoint of another model is refused naming the fingerprints",
          "[state][corruption]") {
  Fixture f;
  auto other = open_test_model(generated_model("tiny-bf16"));  // same shapes, BF16 experts
  REQUIRE(other->fingerprint() != f.model->fingerprint());
  auto r = load_state_file(*Env::posix(), f.head_path(), *other);
  check_refused(r, "another model");
  CHECK(r.status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("shapes that disagree with the model's config are refused even under its fingerprint",
          "[state][corruption]") {
  Fixture f;
  const ModelConfig base = f.model->config();
  struct Variant {
    const char* name;
    void (*edit)(ModelConfig&);
  };
  const Variant variants[] = {
      {"vocab", [](ModelConfig& c) { c.vocab -= 1; }},
      {"kda heads", [](ModelConfig& c) { c.kda_heads /= 2; }},
      {"conv kernel", [](ModelConfig& c) { c.conv_kernel -= 1; }},
      {"kv_lora_rank", [](ModelConfig& c) { c.kv_lora_rank -= 1; }},
      {"qk_rope", [](ModelConfig& c) { c.qk_rope += 1; }},
      {"layer 0 made MLA", [](ModelConfig& c) { c.attention[0] = AttentionKind::kMla; }},
      {"layers 2 and 3 swapped", [](ModelConfig& c) { std::swap(c.attention[2], c.attention[3]); }},
      {"one more MLA layer",
       [](ModelConfig& c) {
         c.layers += 1;
         c.attention.push_back(AttentionKind::kMla);
       }},
  };
  for (const Variant& v : variants) {
    ModelConfig c = base;
    v.edit(c);
    INFO(v.name);
    auto r = load_state_file(*Env::posix(), f.head_path(), c, f.model->fingerprint());
    REQUIRE_FALSE(r.ok());
    const std::string& m = r.status().message();
    CHECK(r.status().code() == StatusCode::kCorruption);
    CHECK((m.find("inconsistent lengths") != std::string::npos ||
           m.find("expected section") != std::string::npos));
  }
}

// Rewrites a head field and the checksum that covers it, so that only the length checks
// stand between the value and an allocation.
void patch_head_u64(std::string& head, size_t field, uint64_t value) {
  std::memcpy(head.data() + field, &value, 8);
  if (field < kHeadHeaderBytes) {
    const uint64_t h = hash64(head.data(), 48);
    std::memcpy(head.data() + 48, &h, 8);
    return;
  }
  // Within the last section ('SEGM'): recompute its checksum.
  size_t off = kHeadHeaderBytes, last = 0;
  while (off < head.size()) {
    last = off;
    off += kSectionHeaderBytes + get_u64(head.data() + off + 8);
  }
  Hasher h;
  h.update(head.data() + last, 16);
  h.update(head.data() + last + kSectionHeaderBytes, head.size() - last - kSectionHeaderBytes);
  const uint64_t d = h.digest();
  std::memcpy(head.data() + last + 16, &d, 8);
}

TEST_CASE("crafted lengths with valid checksums are refused before anything is allocated",
          "[state][corruption]") {
  Fixture f;
  const size_t segm_payload =
      f.head.size() - (kSegmentRefFixedBytes + f.segment.size() - f.dir.path().size() - 1);
  struct Case {
    const char* name;
    size_t field;
    uint64_t value;
    const char* reason;
  };
  const Case cases[] = {
      {"position 2^60", 24, uint64_t{1} << 60, "inconsistent lengths"},
      {"position + 1", 24, kPrompt.size() + 9 + 1, "inconsistent lengths"},
      {"committed bytes 2^62", segm_payload, uint64_t{1} << 62, "truncated"},
      {"committed bytes - 1", segm_payload, f.seg.size() - 1, "inconsistent lengths"},
      {"record count 2^61", segm_payload + 8, uint64_t{1} << 61, "inconsistent lengths"},
      {"record count 3", segm_payload + 8, 3, "inconsistent lengths"},
      {"chain hash", segm_payload + 16, 12345, "do not match the head"},
  };
  for (const Case& c : cases) {
    std::string head = f.head;
    patch_head_u64(head, c.field, c.value);
    f.set_head(head);
    INFO(c.name);
    check_refused(f.load(), c.reason);
  }
  f.restore();
  // A length field is compared with the config before its checksum is even computed.
  std::string head = f.head;
  const size_t lgts_len = kHeadHeaderBytes + kSectionHeaderBytes + kSamplerBytes + 8;
  REQUIRE(get_u64(head.data() + lgts_len) == f.model->config().vocab * 4u);
  const uint64_t huge = uint64_t{1} << 62;
  std::memcpy(head.data() + lgts_len, &huge, 8);
  f.set_head(head);
  check_refused(f.load(), "inconsistent lengths");
  f.restore();
  std::string seg = f.seg;
  const uint32_t count = 1u << 31;
  std::memcpy(seg.data() + kSegmentHeaderBytes + 4, &count, 4);
  f.set_segment(seg);
  check_refused(f.load(), "inconsistent lengths: record 0");
}

TEST_CASE("a missing or foreign segment is refused", "[state][corruption]") {
  Fixture f;
  std::filesystem::remove(f.segment);
  check_refused(f.load(), "is missing");
  // The segment of another checkpoint (another generation) under this one's name.
  Fixture other;
  f.set_segment(other.seg);
  check_refused(f.load(), "belongs to another checkpoint");
}

TEST_CASE("a head that is not a checkpoint, or from a newer format, is refused",
          "[state][corruption]") {
  Fixture f;
  f.set_head("{\"not\": \"a checkpoint\"}\n" + std::string(100, ' '));
  check_refused(f.load(), "bad magic");
  std::string head = f.head;
  head[8] = 3;
  f.set_head(head);
  auto r = f.load();
  check_refused(r, "unsupported format version 3");
  CHECK(r.status().code() == StatusCode::kFailedPrecondition);
  f.restore();
  std::filesystem::remove(f.head_path());
  CHECK(f.load().status().code() == StatusCode::kNotFound);
}

TEST_CASE("a token outside the vocabulary is refused", "[state][corruption]") {
  Fixture f;
  StateCheckpoint cp = f.expected;
  cp.state.tokens[1] = f.model->config().vocab;
  StateFileWriter w(*Env::posix(), f.head_path());
  REQUIRE(w.save(*f.model, cp.state, cp.sampler).ok());
  check_refused(f.load(), "outside the vocabulary");
}

}  // namespace
}  // namespace nj::state_testing
