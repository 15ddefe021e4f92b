// The tensor index of a Hugging Face safetensors model, single-file or sharded.
//
// File format (safetensors), per shard:
//   shard  := header_len:u64le  header:json[header_len]  data
//   header := { "__metadata__"?: {str: str}, name: {"dtype": str, "shape": [u64...],
//               "data_offsets": [begin, end]}, ... }
// Offsets are relative to the start of `data`. A sharded model adds
//   model.safetensors.index.json := { "metadata": {...}, "weight_map": {name: shard_file} }
//
// Opening reads headers only. Every tensor's extent is checked against its file and its
// shape x dtype size; the weight map is checked against the shards. The released K3 (94
// shards, 497k tensors, 135 MB of JSON) indexes in a fraction of a second, in parallel.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/dtype.h"
#include "engine/util/prefault_allocator.h"
#include "engine/util/status.h"

namespace nj {

// Language models use at most 3; more is refused with a message.
inline constexpr int kMaxTensorDims = 4;

// 56 bytes: the K3 index holds half a million of these.
struct TensorInfo {
  std::string_view name;  // points into the index's name arena; valid while the index lives
  uint64_t offset = 0;    // absolute byte offset in the file
  uint64_t nbytes = 0;
  std::array<uint32_t, kMaxTensorDims> shape{};
  uint32_t file = 0;      // index into TensorIndex::files()
  DType dtype = DType::kF32;
  uint8_t ndim = 0;

  uint64_t numel() const;
  std::string shape_string() const;  // "[64, 128]"
};

struct ShardFile {
  std::string path;
  uint64_t size = 0;
  uint64_t data_start = 0;  // 8 + header_len
};

class TensorIndex {
 public:
  // Indexes `model_dir`: model.safetensors.index.json with its shards if present, else
  // model.safetensors. NotFound when neither exists; Corruption naming the file and tensor
  // for anything inconsistent. `threads` parses shard headers in parallel (0 = all cores).
  static Result<TensorIndex> open(const std::string& model_dir, int threads = 0);

  // Indexes explicit safetensors files (tests and tools).
  static Result<TensorIndex> open_files(const std::vector<std::string>& paths, int threads = 0);

  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;

  using TensorVector = std::vector<TensorInfo, PrefaultAllocator<TensorInfo>>;
  const TensorVector& tensors() const { return tensors_; }
  const std::vector<ShardFile>& files() const { return files_; }
  const std::string& dir() const { return dir_; }
  uint64_t total_tensor_bytes() const;

  // Order-independent hash of every tensor's name, dtype and shape: equal for the same
  // weights however they are sharded, different for another model or quantization.
  uint64_t layout_fingerprint() const;

  TensorIndex(TensorIndex&&) noexcept = default;
  TensorIndex& operator=(TensorIndex&&) noexcept = default;

 private:
  TensorIndex() = default;
  Status build_lookup();

  std::string dir_;
  std::vector<ShardFile> files_;
  TensorVector tensors_;
  std::vector<std::unique_ptr<char[]>> name_arenas_;  // one per shard; names point here
  // Open addressing: per slot, tensor index + 1 (0 = empty) and the high 32 bits of the
  // name's hash, so that a probe rarely touches a tensor or its name it does not want.
  struct Slot {
    uint32_t index_plus_one = 0;
    uint32_t tag = 0;
  };
  std::vector<Slot, PrefaultAllocator<Slot>> slots_;
};

}  // namespace nj
