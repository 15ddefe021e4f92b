// Where every K3 tensor lives, validated, and grouped into the units that are read together.
//
// The forward pass reads weights in units: the trunk of a layer (all its non-expert
// tensors), one routed expert (its six tensors, or three unquantized), the head (final
// norms and lm_head), and single rows of the embedding. ModelLayout resolves each unit's
// tensors in the tensor index, checks their dtypes and shapes against the config, and
// plans how the unit's bytes are read: a few extents, each widened to 4 KiB alignment so
// that O_DIRECT can read them straight into an aligned buffer. A view (weights.h) is then
// built over such a buffer by `materialize_*`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/tensor_index.h"
#include "engine/util/status.h"
#include "engine/model/weights.h"

namespace nj {

// A byte range of one file, and where it lands in the unit's buffer.
struct Extent {
  uint32_t file = 0;
  uint64_t file_offset = 0;    // aligned down to kDirectAlign
  uint64_t length = 0;         // aligned up to kDirectAlign (or to the end of the file)
  uint64_t buffer_offset = 0;  // multiple of kDirectAlign
};

// One lossless block of a packed unit (engine/codec/block_format.h).
struct StoredBlock {
  uint64_t stored_offset =
      0;  // from the start of the unit's stored run; a multiple of kDirectAlign
  uint32_t stored_bytes = 0;
  uint32_t raw_bytes = 0;  // it decodes to buffer [raw_offset, raw_offset + raw_bytes)
  uint64_t raw_offset = 0;
  uint64_t xxh3 = 0;  // of its stored bytes
};

struct UnitLayout {
  std::vector<Extent> extents;
  uint64_t buffer_bytes = 0;  // what a buffer for this unit must hold
  uint64_t tensor_bytes = 0;  // the bytes of the tensors themselves (what the model needs)
  // Packed units (pack.h) are one run whose xxh3 is checked when first read.
  bool verify = false;
  uint64_t checksum = 0;
  uint64_t checksum_bytes = 0;  // the run's length (the checksum covers buffer [0, n))
  // Units of a lossless pack: the one extent holds the stored run, these blocks, each
  // checked against its xxh3 when first read in a process and decoded into the buffer.
  // Empty for every other unit.
  std::vector<StoredBlock> blocks;
  int pack_unit = -1;  // its number in the pack, for messages
};

// One tensor inside its unit's buffer.
struct TensorSlot {
  const TensorInfo* info = nullptr;  // nullptr for an absent optional tensor
  uint64_t buffer_offset = 0;
  int rows = 0;  // 2-D view: first dimension (1 for vectors)
  int cols = 0;  // product of the other dimensions
};

struct KdaSlots {
  TensorSlot q, k, v, g, o, f_a, f_b, b, q_conv, k_conv, v_conv, a_log, dt_bias, o_norm;
};
struct MlaSlots {
  TensorSlot q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, o, g;
};
struct FfnSlots {
  TensorSlot gate, up, down;
};
struct MoeSlots {
  TensorSlot router, bias, down, up, norm;
  FfnSlots shared;
};

struct LayerLayout {
  int layer = 0;
  UnitLayout unit;
  TensorSlot input_norm, post_norm, attn_res_norm, attn_res_proj, mlp_res_norm, mlp_res_proj;
  bool is_mla = false;
  KdaSlots kda;
  MlaSlots mla;
  bool is_dense = false;
  FfnSlots dense;
  MoeSlots moe;
};

struct ExpertLayout {
  UnitLayout unit;
  bool mxfp4 = false;
  TensorSlot w1, w2, w3;                    // unquantized: the matrices; MXFP4: packed nibbles
  TensorSlot w1_scale, w2_scale, w3_scale;  // MXFP4 only
};

struct HeadLayout {
  UnitLayout unit;
  TensorSlot norm, out_res_norm, out_res_proj, lm_head;
};

class ModelLayout {
 public:
  // Resolves and validates every tensor. Errors name the tensor, its file and what was
  // expected ("...: tensor 'x' has shape [64, 128], expected [64, 256]").
  static Result<ModelLayout> build(const ModelConfig& config, const TensorIndex& index);

  const ModelConfig& config() const { return config_; }
  const LayerLayout& layer(int l) const { return layers_[static_cast<size_t>(l)]; }
  // REQUIRES: layer is not dense.
  const ExpertLayout& expert(int layer, int e) const;
  const HeadLayout& head() const { return head_; }
  const TensorSlot& embedding() const { return embed_; }  // buffer_offset unused (read by rows)

  // Total bytes per unit kind, for planning.
  uint64_t trunk_bytes(int l) const { return layer(l).unit.tensor_bytes; }
  uint64_t expert_bytes() const { return expert_bytes_; }  // one expert (all experts are equal)

  // For switching trunk units to the packed trunk (pack.h).
  LayerLayout& mutable_layer(int l) { return layers_[static_cast<size_t>(l)]; }
  HeadLayout& mutable_head() { return head_; }
  // Files beyond the index's (the pack): their ids follow the index's files in order.
  void add_file(std::string path) { extra_files_.push_back(std::move(path)); }
  // Every file an extent may name, by file id.
  std::vector<std::string> file_paths(const TensorIndex& index) const;
  uint64_t head_bytes() const { return head_.unit.tensor_bytes; }
  uint64_t embedding_row_bytes() const;

 private:
  ModelConfig config_;
  std::vector<LayerLayout> layers_;
  std::vector<std::vector<ExpertLayout>> experts_;  // [layer][expert]; empty for dense layers
  HeadLayout head_;
  TensorSlot embed_;
  uint64_t expert_bytes_ = 0;
  std::vector<std::string> extra_files_;
};

// A part of the head read on its own: lm_head's rows [first_row, first_row + rows) as a unit,
// part 0 with the final norms. A streamed head larger than a ring slot (a layer) is read in
// parts (planner.h), so that the ring's slots need only hold a layer.
struct HeadPart {
  HeadLayout layout;  // absent slots (info nullptr) for the norms of parts after the first
  int first_row = 0;
  int rows = 0;
  std::shared_ptr<const TensorInfo> lm_head;  // the part's rows of lm_head (layout points here)
};

// The head in `parts` parts of near-equal rows (1: the whole head, as one part).
// REQUIRES: 1 <= parts <= vocab; a head read from its tensors (no lossless blocks).
std::vector<HeadPart> split_head(const HeadLayout& head, const TensorIndex& index, int parts);

// A bound on the buffer of each part of split_head(head, ., parts), for the planner.
uint64_t head_part_buffer_bound(const HeadLayout& head, int parts);

// The tensor slots of a trunk unit (present and absent optional ones alike).
std::vector<TensorSlot*> trunk_slots(LayerLayout& l);
std::vector<TensorSlot*> head_slots(HeadLayout& h);

// Views over a unit's buffer. `buffer` holds the unit's bytes laid out as its UnitLayout
// says and must outlive the view.
LayerWeights materialize_layer(const ModelConfig& c, const LayerLayout& l, const uint8_t* buffer);
ExpertWeights materialize_expert(const ExpertLayout& l, const uint8_t* buffer);
HeadWeights materialize_head(const ModelConfig& c, const HeadLayout& l, const uint8_t* buffer);

}  // namespace nj
