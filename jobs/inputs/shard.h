// Shards of a job: which array task of `nightjar slurm` runs which item. An item's shard is a
// function of its custom_id alone, so every item belongs to exactly one task whatever the
// order of the inputs, and a re-run or a requeued task picks the same items again.
//
// The function (a format: changing it would move items between the tasks of an array that
// is already running, so it never changes):
//
//   shard_of(custom_id, N) = XXH64(the custom_id's bytes, seed 0) mod N
//
// XXH64 is xxHash's 64-bit hash (specified byte for byte, the same on every platform).
//
// A shard on the command line (`nightjar submit SPEC --shard I/N`):
//
//   shard := index "/" count      index, count: decimal, no sign; 0 <= index < count <= 100000
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace nj::jobs {

// The most tasks an array may have (Slurm's own MaxArraySize default is 1001).
inline constexpr int kMaxShards = 100000;

struct Shard {
  int index = 0;  // 0 <= index < count
  int count = 1;

  std::string to_string() const { return std::to_string(index) + "/" + std::to_string(count); }
  bool operator==(const Shard&) const = default;
};

// Parses "I/N" (above). InvalidArgument naming the text for anything else.
Result<Shard> parse_shard(std::string_view text);

// XXH64 of the bytes of `custom_id`, seed 0.
uint64_t custom_id_hash(std::string_view custom_id);

// The shard (0..count-1) that owns the item `custom_id`.
// REQUIRES: count >= 1.
int shard_of(std::string_view custom_id, int count);

}  // namespace nj::jobs
