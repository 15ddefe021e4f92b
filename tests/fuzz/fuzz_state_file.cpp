// Fuzzes the state checkpoint reader (engine/state/state_file.h) for the tiny-mxfp4 model's
// config. Every section and record of the format carries a checksum, so a mutated file would
// almost never get past the first one; the target therefore repairs the checksums (when the
// input's first byte is odd) before writing the files, and the reader's length and
// consistency checks behind them are fuzzed too.
//
// Input := mode u8, head_bytes u32le, head[head_bytes], segment (the rest)
//   mode bit 0: repair every checksum the bytes allow (header, sections, segment header,
//               record chain, the head's chain hash), as a writer with these lengths would
//   The segment is written under the name the head's SEGM section gives when that is a
//   plain file name, else not at all. The fingerprint the reader expects is the head's own
//   (bytes 16..23), so a fingerprint mismatch does not stop every input.
//
// A checkpoint is refused with an error naming the head's path, or accepted with a state
// whose position matches its token count.
#include <cstring>
#include <filesystem>
#include <string>

#include "engine/io/env.h"
#include "engine/model/config.h"
#include "engine/state/state_file.h"
#include "engine/state/state_format.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace nj::state_format;

const nj::ModelConfig& config() {
  static const nj::ModelConfig c = [] {
    auto r = nj::parse_model_config(
        nj::fuzz::read_file_or_die(nj::fuzz::source_path("tests/golden/tiny-mxfp4/config.json")),
        "config.json");
    if (!r.ok()) nj::fuzz::fail(r.status().message());
    return *r;
  }();
  return c;
}

void put_u64_at(std::string& s, size_t off, uint64_t v) {
  std::memcpy(&s[off], &v, 8);
}

// Repairs the segment's header hash and record chain (seeded with the head's generation);
// returns the last record's hash, or the generation when no record is whole.
uint64_t repair_segment(std::string& seg, uint64_t generation) {
  if (seg.size() < kSegmentHeaderBytes) return generation;
  put_u64_at(seg, 40, hash64(seg.data(), 40));
  uint64_t chain = generation;
  size_t off = kSegmentHeaderBytes;
  while (off + kRecordHeaderBytes <= seg.size()) {
    const uint64_t payload = get_u64(seg.data() + off + 16);
    if (payload > seg.size() - off - kRecordHeaderBytes) break;
    Hasher h(chain);
    h.update(seg.data() + off, 24);
    h.update(seg.data() + off + kRecordHeaderBytes, payload);
    chain = h.digest();
    put_u64_at(seg, off + 24, chain);
    off += kRecordHeaderBytes + payload;
  }
  return chain;
}

// Repairs the head's header hash and every whole section's hash; the SEGM section's chain
// hash becomes `chain` first. Returns the segment name the SEGM section gives (or "").
std::string repair_head(std::string& head, uint64_t chain) {
  if (head.size() < kHeadHeaderBytes) return "";
  put_u64_at(head, 48, hash64(head.data(), 48));
  std::string segment;
  size_t off = kHeadHeaderBytes;
  while (off + kSectionHeaderBytes <= head.size()) {
    const uint64_t len = get_u64(head.data() + off + 8);
    if (len > head.size() - off - kSectionHeaderBytes) break;
    char* payload = head.data() + off + kSectionHeaderBytes;
    if (get_u32(head.data() + off) == kTagSegment && len > kSegmentRefFixedBytes) {
      std::memcpy(payload + 16, &chain, 8);
      segment.assign(payload + kSegmentRefFixedBytes, len - kSegmentRefFixedBytes);
    }
    Hasher h;
    h.update(head.data() + off, 16);
    h.update(payload, len);
    put_u64_at(head, off + 16, h.digest());
    off += kSectionHeaderBytes + len;
  }
  return segment;
}

// The SEGM section's name without repairing anything.
std::string segment_name_in(const std::string& head) {
  size_t off = kHeadHeaderBytes;
  while (off + kSectionHeaderBytes <= head.size()) {
    const uint64_t len = get_u64(head.data() + off + 8);
    if (len > head.size() - off - kSectionHeaderBytes) break;
    if (get_u32(head.data() + off) == kTagSegment && len > kSegmentRefFixedBytes)
      return head.substr(off + kSectionHeaderBytes + kSegmentRefFixedBytes,
                         len - kSegmentRefFixedBytes);
    off += kSectionHeaderBytes + len;
  }
  return "";
}

bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  if (size < 5) return 0;
  const bool repair = data[0] & 1;
  uint32_t head_bytes = 0;
  std::memcpy(&head_bytes, data + 1, 4);
  if (head_bytes > size - 5) return 0;
  std::string head(reinterpret_cast<const char*>(data) + 5, head_bytes);
  std::string segment(reinterpret_cast<const char*>(data) + 5 + head_bytes, size - 5 - head_bytes);

  const uint64_t generation = head.size() >= 40 ? get_u64(head.data() + 32) : 0;
  std::string segment_file;
  if (repair) {
    segment_file = repair_head(head, repair_segment(segment, generation));
  } else {
    segment_file = segment_name_in(head);
  }
  // A fresh directory per input: no segment of an earlier input can be found.
  std::error_code ec;
  std::filesystem::remove_all(fuzz::scratch_dir() + "/state", ec);
  const std::string head_path = fuzz::write_scratch("state/state.bin", head);
  if (plain_file_name(segment_file)) fuzz::write_scratch("state/" + segment_file, segment);
  Env& env = *Env::posix();

  const uint64_t fingerprint = head.size() >= 24 ? get_u64(head.data() + 16) : 0;
  auto info = read_state_file_info(env, head_path);
  // Any numerics version: the seeds (format 1) and most mutants record another arithmetic
  // than this binary's, and the reader's checks behind that one are what is fuzzed.
  auto loaded = load_state_file(env, head_path, config(), fingerprint, nj::StateNumerics::kAny);
  if (!loaded.ok()) {
    fuzz::note(loaded.status().message());
    fuzz::check(loaded.status().message().find(head_path) != std::string::npos,
                "the error does not name the checkpoint: " + loaded.status().message());
    return 0;
  }
  fuzz::check(info.ok(), "a checkpoint loads whose head info does not: " + info.status().message());
  fuzz::check(info->position == loaded->state.position &&
                  static_cast<size_t>(loaded->state.position) == loaded->state.tokens.size(),
              "a checkpoint loads whose position differs from its tokens");
  fuzz::note("accepted");
  return 0;
}
