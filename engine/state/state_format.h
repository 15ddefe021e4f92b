// Constants and helpers of the state checkpoint format (version 2), shared by its writer
// (state_file_writer.cpp) and reader (state_file_reader.cpp). The format itself is
// documented as a grammar at the top of state_file_reader.cpp.
//
// Internal to engine/state and its tests: nothing outside them should depend on the bytes.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/config.h"
#include "engine/state/sequence_state.h"
#include "engine/util/status.h"

namespace nj::state_format {

static_assert(std::endian::native == std::endian::little,
              "the state format stores integers and floats little-endian, as the host does");

inline constexpr uint32_t kVersion = 2;          // the head's format, as written
inline constexpr uint32_t kPreviousVersion = 1;  // still read: no numerics version recorded
inline constexpr uint32_t kSegmentVersion = 1;   // the segment's format (unchanged in 2)
inline constexpr char kHeadMagic[8] = {'N', 'J', 'S', 'T', 'H', 'E', 'A', 'D'};
inline constexpr char kSegmentMagic[8] = {'N', 'J', 'S', 'T', 'S', 'E', 'G', 'M'};
inline constexpr size_t kHeadHeaderBytes = 56;
inline constexpr size_t kSectionHeaderBytes = 24;
inline constexpr size_t kSegmentHeaderBytes = 48;
inline constexpr size_t kRecordHeaderBytes = 32;
inline constexpr size_t kSamplerBytes = 32;
inline constexpr size_t kSegmentRefFixedBytes = 28;  // before the segment's name
inline constexpr size_t kMaxSegmentNameBytes = 255;

constexpr uint32_t fourcc(const char (&s)[5]) {
  return static_cast<uint32_t>(static_cast<uint8_t>(s[0])) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[3])) << 24;
}
inline constexpr uint32_t kTagSampler = fourcc("SMPL");
inline constexpr uint32_t kTagLogits = fourcc("LGTS");
inline constexpr uint32_t kTagKda = fourcc("KDAS");
inline constexpr uint32_t kTagSegment = fourcc("SEGM");
inline constexpr uint32_t kRecordMagic = fourcc("NJRC");

// "'KDAS'" for a tag, or "0x…" when it is not printable.
std::string tag_name(uint32_t tag);

// The sizes the model's config implies for every part of a state.
struct StateShape {
  int layers = 0;
  size_t vocab = 0;
  std::vector<int> kda_layers;  // zero-based, ascending
  std::vector<int> mla_layers;  // zero-based, ascending
  size_t s_floats = 0;          // per KDA layer: H·D·D
  size_t conv_floats = 0;       // per KDA layer: (K−1)·3·P
  size_t kv_lora = 0;           // latent floats per MLA row
  size_t rope = 0;              // rope floats per MLA row
  // Segment bytes per position: the token plus one latent and rope row per MLA layer.
  uint64_t position_bytes() const { return 4 + mla_layers.size() * (kv_lora + rope) * 4; }
};
StateShape shape_of(const ModelConfig& config);

// OK when `s` has exactly the sizes `shape` implies at its position; InvalidArgument
// naming the first part that does not (a caller bug, reported rather than written).
Status check_state_shape(const StateShape& shape, const SequenceState& s);

// Streaming XXH3-64 (the checksum of every section and record).
class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0);
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void update(const void* p, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  uint64_t digest() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
uint64_t hash64(const void* p, size_t n, uint64_t seed = 0);

// Little-endian encoding into a byte string, and decoding from bytes.
inline void put_u32(std::string& out, uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), 4);
}
inline void put_u64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), 8);
}
inline void put_f32(std::string& out, float v) {
  out.append(reinterpret_cast<const char*>(&v), 4);
}
inline uint32_t get_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t get_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline float get_f32(const char* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

template <typename T>
std::string_view bytes_of(const T* p, size_t count) {
  return {reinterpret_cast<const char*>(p), count * sizeof(T)};
}

// The segment of generation `generation` for the head named `head_base`:
// "<head_base>.seg-<16 lowercase hex digits>".
std::string segment_name(const std::string& head_base, uint64_t generation);
// True for a name segment_name(head_base, g) could produce for some g, or the temp file
// of one (the writer removes these when they are not the committed segment).
bool is_segment_name_of(const std::string& name, const std::string& head_base);

}  // namespace nj::state_format
