// Writing the packed trunk (format and guarantees in pack.h).
#include <algorithm>
#include <chrono>

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include "engine/codec/block_encoder.h"
#include "engine/io/durable.h"
#include "engine/model/fingerprint.h"
#include "engine/weights/pack.h"
#include "engine/weights/pack_manifest.h"
#include "engine/weights/resident_source.h"

namespace nj {
namespace {

// A unit's run: its tensors, BF16 first (so that BF16 blocks rarely hold anything else),
// then in file order, each at a 64-byte boundary.
std::string build_run(std::vector<TensorSlot*> slots, const uint8_t* unit_bytes,
                      nlohmann::json* tensors) {
  std::stable_sort(slots.begin(), slots.end(), [](const TensorSlot* a, const TensorSlot* b) {
    const bool abf = a->info->dtype == DType::kBF16, bbf = b->info->dtype == DType::kBF16;
    if (abf != bbf) return abf;
    return a->info->file != b->info->file ? a->info->file < b->info->file
                                          : a->info->offset < b->info->offset;
  });
  std::string run;
  *tensors = nlohmann::json::array();
  for (TensorSlot* s : slots) {
    run.resize(align_up(run.size(), kPackTensorAlign), '\0');
    tensors->push_back({{"name", std::string(s->info->name)}, {"offset", run.size()}});
    run.append(reinterpret_cast<const char*>(unit_bytes + s->buffer_offset), s->info->nbytes);
  }
  return run;
}

// Encodes `run` as blocks of `block_raw` bytes (in parallel; each block on its own).
std::vector<std::vector<uint8_t>> encode_run(const std::string& run, size_t block_raw) {
  const size_t n = (run.size() + block_raw - 1) / block_raw;
  std::vector<std::vector<uint8_t>> blocks(n);
  const auto* bytes = reinterpret_cast<const uint8_t*>(run.data());
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t k = 0; k < n; ++k) {
    const size_t at = k * block_raw;
    encode_block(std::span<const uint8_t>(bytes + at, std::min(block_raw, run.size() - at)), {},
                 &blocks[k]);
  }
  return blocks;
}

}  // namespace

Result<PackStats> write_trunk_pack(Env& env, const TensorIndex& index, const ModelLayout& layout_in,
                                   const std::string& out_dir, const PackOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.block_raw_bytes == 0 || options.block_raw_bytes > kMaxBlockRawBytes ||
      options.block_raw_bytes % 2)
    return invalid_argument("pack block size " + std::to_string(options.block_raw_bytes) +
                            " must be even, above 0 and at most " +
                            std::to_string(kMaxBlockRawBytes));
  ModelLayout layout = layout_in;  // slots are read through; nothing here changes the caller's
  const std::string pack_path = out_dir + "/" + kPackFile;
  const std::string manifest_path = out_dir + "/" + kPackManifest;
  // An older manifest goes first: from here until the new one lands, no pack is usable.
  if (env.exists(manifest_path)) {
    NJ_RETURN_IF_ERROR(env.remove(manifest_path));
    NJ_RETURN_IF_ERROR(env.sync_dir(out_dir));
  }
  std::vector<std::unique_ptr<RandomAccessFile>> files;
  for (const auto& path : layout.file_paths(index)) {
    NJ_ASSIGN_OR_RETURN(auto f, open_random_access(path, IoMode::kBuffered));
    files.push_back(std::move(f));
  }
  const bool lossless = options.codec == PackCodec::kLossless;
  PackStats stats;
  stats.codec = options.codec;
  nlohmann::json units_json = nlohmann::json::array();
  auto units = pack_units(layout);
  uint64_t written = 0;
  auto fill = [&](WritableFile& out) -> Status {
    const std::string zeros(kDirectAlign, '\0');
    auto pad = [&]() -> Status {
      const uint64_t n = align_up(written, kDirectAlign) - written;
      written += n;
      return n ? out.append(std::string_view(zeros.data(), n)) : Status();
    };
    for (size_t u = 0; u < units.size(); ++u) {
      const UnitLayout& ul = pack_unit_layout(layout, static_cast<int>(u));
      AlignedBuffer in(ul.buffer_bytes);
      NJ_RETURN_IF_ERROR(read_unit(files, ul, in.data()));
      nlohmann::json tensors;
      const std::string run = build_run(units[u], in.data(), &tensors);
      nlohmann::json ju = {{"unit", u}, {"offset", written}, {"tensors", tensors}};
      stats.raw_bytes += run.size();
      const uint64_t unit_start = written;
      if (!lossless) {
        ju["length"] = run.size();
        ju["xxh3"] = hex64(XXH3_64bits(run.data(), run.size()));
        NJ_RETURN_IF_ERROR(out.append(run));
        written += run.size();
      } else {
        std::vector<StoredBlock> blocks;
        nlohmann::json jb = nlohmann::json::array();
        uint64_t raw_at = 0;
        for (const std::vector<uint8_t>& block : encode_run(run, options.block_raw_bytes)) {
          StoredBlock b;
          b.stored_offset = written - unit_start;
          b.stored_bytes = static_cast<uint32_t>(block.size());
          b.raw_bytes = static_cast<uint32_t>(
              std::min<uint64_t>(options.block_raw_bytes, run.size() - raw_at));
          b.raw_offset = raw_at;
          b.xxh3 = XXH3_64bits(block.data(), block.size());
          raw_at += b.raw_bytes;
          stats.raw_blocks += block[0] == static_cast<uint8_t>(BlockType::kRaw);
          jb.push_back({b.stored_offset, b.stored_bytes, b.raw_bytes, hex64(b.xxh3)});
          blocks.push_back(b);
          NJ_RETURN_IF_ERROR(out.append(
              std::string_view(reinterpret_cast<const char*>(block.data()), block.size())));
          written += block.size();
          NJ_RETURN_IF_ERROR(pad());
        }
        // The unit's run ends with its last block (its padding belongs to no block).
        ju["length"] =
            blocks.empty() ? 0 : blocks.back().stored_offset + blocks.back().stored_bytes;
        ju["raw_length"] = run.size();
        ju["xxh3"] = hex64(unit_hash_of_blocks(blocks));
        ju["blocks"] = jb;
        stats.blocks += blocks.size();
      }
      units_json.push_back(ju);
      NJ_RETURN_IF_ERROR(pad());
    }
    return Status();
  };
  NJ_RETURN_IF_ERROR(write_file_durably(env, pack_path, fill));

  nlohmann::json m;
  m["format"] = kPackFormat;
  m["version"] = kPackVersion;
  m["codec"] = pack_codec_name(options.codec);
  m["model_fingerprint"] = hex64(model_fingerprint(layout.config(), index));
  m["source_files"] = nlohmann::json::array();
  for (const auto& f : index.files()) {
    NJ_ASSIGN_OR_RETURN(SourceFile sf, describe_source_file(f.path));
    m["source_files"].push_back({{"name", sf.name}, {"size", sf.size}, {"mtime_ns", sf.mtime_ns}});
  }
  m["pack_file"] = kPackFile;
  m["pack_bytes"] = written;
  m["raw_bytes"] = stats.raw_bytes;
  m["units"] = units_json;
  NJ_RETURN_IF_ERROR(write_file_durably(env, manifest_path, m.dump(1) + "\n"));
  stats.units = units.size();
  stats.pack_bytes = written;
  stats.stored_bytes = written;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace nj
