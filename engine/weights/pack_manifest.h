// What the pack's writer and reader share about its manifest (format in pack.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/model/layout.h"
#include "engine/util/status.h"

namespace nj {

inline constexpr const char* kPackFormat = "nightjar-trunk-pack";
inline constexpr int kPackVersion = 2;
inline constexpr uint64_t kPackTensorAlign = 64;  // tensors inside a unit's run

// A source shard as the manifest records it, to tell when the pack went stale.
struct SourceFile {
  std::string name;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};
Result<SourceFile> describe_source_file(const std::string& path);

std::string hex64(uint64_t v);  // 16 lowercase hex digits

// A lossless unit's hash: XXH3 of its blocks' hashes as little-endian u64s.
uint64_t unit_hash_of_blocks(std::span<const StoredBlock> blocks);

}  // namespace nj
