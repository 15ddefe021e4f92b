// ResidentSource: everything read once, views built once.
#include "engine/weights/resident_source.h"

#include <algorithm>

#include <xxhash.h>

#include "engine/weights/stored_unit.h"
#include "engine/util/dtype.h"

namespace nj {

Status read_unit(std::span<const std::unique_ptr<RandomAccessFile>> files, const UnitLayout& unit,
                 uint8_t* buffer) {
  if (!unit.blocks.empty()) {  // a lossless unit: its stored run, then each block decoded
    const Extent& e = unit.extents[0];
    AlignedBuffer stored(e.length);
    NJ_RETURN_IF_ERROR(files[e.file]->read_at(e.file_offset, stored.data(), e.length));
    return decode_unit(unit, std::span<const uint8_t>(stored.data(), e.length), /*verify=*/true,
                       files[e.file]->path(), buffer);
  }
  for (const Extent& e : unit.extents)
    NJ_RETURN_IF_ERROR(files[e.file]->read_at(e.file_offset, buffer + e.buffer_offset, e.length));
  return verify_unit(unit, buffer, files[unit.extents.empty() ? 0 : unit.extents[0].file]->path());
}

Status verify_unit(const UnitLayout& unit, const uint8_t* buffer, const std::string& file) {
  if (!unit.verify) return Status();
  const uint64_t h = XXH3_64bits(buffer, static_cast<size_t>(unit.checksum_bytes));
  if (h == unit.checksum) return Status();
  // Named as a lossless pack's blocks are (stored_unit.cpp): the unit, then where it lies.
  return corruption(
      file + ": unit " + std::to_string(unit.pack_unit) + " (" +
      std::to_string(unit.checksum_bytes) + " bytes at offset " +
      std::to_string(unit.extents.empty() ? 0 : unit.extents[0].file_offset) +
      ") fails its checksum (the pack is damaged: rerun `nightjar pack`, or delete it to read the "
      "shards)");
}

Result<std::unique_ptr<ResidentSource>> ResidentSource::open(const TensorIndex& index,
                                                             const ModelLayout& layout) {
  std::unique_ptr<ResidentSource> src(new ResidentSource(layout));
  std::vector<std::unique_ptr<RandomAccessFile>> files;
  for (const auto& path : layout.file_paths(index)) {
    NJ_ASSIGN_OR_RETURN(auto file, open_random_access(path, IoMode::kBuffered));
    files.push_back(std::move(file));
  }
  const ModelConfig& c = layout.config();
  // Reads `units` into one slab, each at a 4 KiB-aligned offset; returns where each landed.
  // One slab per layer rather than a buffer per unit: a layer's experts are a few hundred MB
  // together, large enough for transparent huge pages (AlignedBuffer), where each MB-sized
  // expert alone would sit in 4 KiB pages and cost a TLB miss every 4 KiB of an expert
  // product (see ExpertCache's slab for the measurement).
  auto load = [&](std::span<const UnitLayout* const> units) -> Result<std::vector<const uint8_t*>> {
    std::vector<size_t> offsets;
    size_t total = 0;
    for (const UnitLayout* u : units) {
      offsets.push_back(total);
      total += align_up(u->buffer_bytes, kDirectAlign);
    }
    AlignedBuffer slab(total);
    std::vector<const uint8_t*> at;
    for (size_t i = 0; i < units.size(); ++i) {
      NJ_RETURN_IF_ERROR(read_unit(files, *units[i], slab.data() + offsets[i]));
      at.push_back(slab.data() + offsets[i]);
    }
    src->buffers_.push_back(std::move(slab));
    return at;
  };
  src->experts_.resize(static_cast<size_t>(c.layers));
  for (int l = 0; l < c.layers; ++l) {
    const LayerLayout& ll = layout.layer(l);
    std::vector<const UnitLayout*> units = {&ll.unit};
    if (!ll.is_dense)
      for (int e = 0; e < c.num_experts; ++e) units.push_back(&layout.expert(l, e).unit);
    NJ_ASSIGN_OR_RETURN(std::vector<const uint8_t*> at, load(units));
    src->layers_.push_back(std::make_shared<LayerWeights>(materialize_layer(c, ll, at[0])));
    src->stats_.trunk_bytes_read += unit_bytes_read(ll.unit);
    src->stats_.trunk_raw_bytes += ll.unit.tensor_bytes;
    if (ll.is_dense) continue;
    for (int e = 0; e < c.num_experts; ++e) {
      const ExpertLayout& el = layout.expert(l, e);
      src->experts_[static_cast<size_t>(l)].push_back(
          std::make_shared<ExpertWeights>(materialize_expert(el, at[static_cast<size_t>(e) + 1])));
      src->stats_.expert_bytes_read += el.unit.tensor_bytes;
    }
  }
  const UnitLayout* head_unit[] = {&layout.head().unit};
  NJ_ASSIGN_OR_RETURN(std::vector<const uint8_t*> hb, load(head_unit));
  src->head_ = std::make_shared<HeadWeights>(materialize_head(c, layout.head(), hb[0]));
  src->stats_.head_bytes_read += unit_bytes_read(layout.head().unit);
  src->stats_.trunk_raw_bytes += layout.head().unit.tensor_bytes;

  const TensorSlot& emb = layout.embedding();
  std::vector<uint8_t> raw(emb.info->nbytes);
  NJ_RETURN_IF_ERROR(files[emb.info->file]->read_at(emb.info->offset, raw.data(), raw.size()));
  src->embedding_.resize(static_cast<size_t>(c.vocab) * static_cast<size_t>(c.hidden));
  widen_to_f32(emb.info->dtype, raw.data(), src->embedding_.size(), src->embedding_.data());
  src->stats_.embedding_bytes_read += emb.info->nbytes;
  return src;
}

Result<std::shared_ptr<const LayerWeights>> ResidentSource::layer(int l) {
  return layers_[static_cast<size_t>(l)];
}

Result<std::shared_ptr<const ExpertWeights>> ResidentSource::expert(int l, int e) {
  return experts_[static_cast<size_t>(l)][static_cast<size_t>(e)];
}

Result<std::shared_ptr<const HeadWeights>> ResidentSource::head(int /*part*/) {
  return head_;
}

Status ResidentSource::embed(std::span<const int32_t> ids, float* out) {
  const ModelConfig& c = layout_.config();
  const size_t hid = static_cast<size_t>(c.hidden);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= c.vocab)
      return invalid_argument("token id " + std::to_string(ids[i]) +
                              " is outside the vocabulary (0.." + std::to_string(c.vocab - 1) +
                              ")");
    std::copy_n(&embedding_[static_cast<size_t>(ids[i]) * hid], hid, out + i * hid);
  }
  return Status();
}

}  // namespace nj
