// A WeightSource that reads every weight into RAM when it opens: the behaviour
// without a memory budget, and the reference the streaming source must equal.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/io/file.h"
#include "engine/weights/weight_source.h"

namespace nj {

// Reads one unit's extents from `files` into `buffer` (at least unit.buffer_bytes), and
// verifies it when it is a packed unit.
Status read_unit(std::span<const std::unique_ptr<RandomAccessFile>> files, const UnitLayout& unit,
                 uint8_t* buffer);

// Checks a packed unit's bytes against its checksum (a no-op for other units). Corruption
// naming `file` on a mismatch.
Status verify_unit(const UnitLayout& unit, const uint8_t* buffer, const std::string& file);

class ResidentSource final : public WeightSource {
 public:
  // Opens the model's files and reads every unit. `layout` must outlive the source.
  static Result<std::unique_ptr<ResidentSource>> open(const TensorIndex& index,
                                                      const ModelLayout& layout);

  const ModelLayout& layout() const override { return layout_; }
  Result<std::shared_ptr<const LayerWeights>> layer(int l) override;
  Result<std::shared_ptr<const ExpertWeights>> expert(int l, int e) override;
  Result<std::shared_ptr<const HeadWeights>> head(int part) override;
  Status embed(std::span<const int32_t> ids, float* out) override;
  WeightStats stats() const override { return stats_; }

 private:
  explicit ResidentSource(const ModelLayout& layout) : layout_(layout) {}

  const ModelLayout& layout_;
  std::vector<AlignedBuffer> buffers_;  // one slab per layer (its trunk and experts), the head's
  std::vector<std::shared_ptr<const LayerWeights>> layers_;
  std::vector<std::vector<std::shared_ptr<const ExpertWeights>>> experts_;
  std::shared_ptr<const HeadWeights> head_;
  std::vector<float> embedding_;  // [vocab][hidden] F32
  WeightStats stats_;
};

}  // namespace nj
