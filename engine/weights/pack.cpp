// Adopting the packed trunk: the manifest's checks and the switch of the layout's units
// (format and guarantees in pack.h; the writer is pack_writer.cpp).
#include "engine/weights/pack.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include "engine/codec/block_format.h"
#include "engine/model/fingerprint.h"
#include "engine/weights/pack_manifest.h"

namespace nj {

std::string hex64(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

Result<SourceFile> describe_source_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return io_error(path + ": cannot stat");
  SourceFile f;
  f.name = base_name(path);
  f.size = static_cast<uint64_t>(st.st_size);
  f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return f;
}

uint64_t unit_hash_of_blocks(std::span<const StoredBlock> blocks) {
  std::vector<uint64_t> hashes;  // little-endian on every host Nightjar runs on (x86-64)
  for (const StoredBlock& b : blocks) hashes.push_back(b.xxh3);
  return XXH3_64bits(hashes.data(), hashes.size() * sizeof(uint64_t));
}

const char* pack_codec_name(PackCodec codec) {
  return codec == PackCodec::kRaw ? "raw" : "lossless";
}

Result<PackCodec> parse_pack_codec(const std::string& name) {
  if (name == "raw") return PackCodec::kRaw;
  if (name == "lossless") return PackCodec::kLossless;
  return invalid_argument("unknown pack codec '" + name + "' (expected raw or lossless)");
}

std::vector<std::vector<TensorSlot*>> pack_units(ModelLayout& layout) {
  std::vector<std::vector<TensorSlot*>> units;
  for (int l = 0; l < layout.config().layers; ++l)
    units.push_back(trunk_slots(layout.mutable_layer(l)));
  units.push_back(head_slots(layout.mutable_head()));
  for (auto& u : units)
    u.erase(std::remove_if(u.begin(), u.end(), [](TensorSlot* s) { return !s->info; }), u.end());
  return units;
}

UnitLayout& pack_unit_layout(ModelLayout& layout, int u) {
  return u == layout.config().layers ? layout.mutable_head().unit : layout.mutable_layer(u).unit;
}

namespace {

// A lossless unit's blocks, checked against each other and the unit. Returns the reason
// they are unusable, or "" when they are fine.
std::string read_blocks(const nlohmann::json& jblocks, uint64_t length, uint64_t raw_length,
                        std::vector<StoredBlock>* out) {
  uint64_t next_stored = 0, raw_at = 0;
  for (const auto& jb : jblocks) {
    if (!jb.is_array() || jb.size() != 4)
      return "a block entry is not [stored_offset, stored_bytes, raw_bytes, xxh3]";
    StoredBlock b;
    b.stored_offset = jb[0].get<uint64_t>();
    const uint64_t stored = jb[1].get<uint64_t>(), raw = jb[2].get<uint64_t>();
    b.xxh3 = std::stoull(jb[3].get<std::string>(), nullptr, 16);
    const std::string which = "block " + std::to_string(out->size());
    if (b.stored_offset > length) return which + " runs past its unit";  // (no sum wraps)
    if (b.stored_offset % kDirectAlign || b.stored_offset < next_stored)
      return which + " starts at " + std::to_string(b.stored_offset) +
             " (not 4096-aligned, or overlapping)";
    if (raw > kMaxBlockRawBytes || stored < kBlockHeaderBytes ||
        stored > kBlockHeaderBytes + kMaxBlockRawBytes)
      return which + " has impossible sizes (" + std::to_string(stored) + " stored, " +
             std::to_string(raw) + " raw)";
    b.stored_bytes = static_cast<uint32_t>(stored);
    b.raw_bytes = static_cast<uint32_t>(raw);
    b.raw_offset = raw_at;
    raw_at += raw;
    next_stored = b.stored_offset + stored;
    if (next_stored > length) return which + " runs past its unit";
    out->push_back(b);
  }
  if (raw_at != raw_length)
    return "its blocks decode to " + std::to_string(raw_at) + " bytes, the unit holds " +
           std::to_string(raw_length);
  if (next_stored != length)
    return "its blocks end at " + std::to_string(next_stored) + ", not at its length";
  return "";
}

}  // namespace

Result<bool> use_trunk_pack(Env& env, const std::string& dir, const TensorIndex& index,
                            ModelLayout* layout, uint32_t pack_file_id, std::string* reason) {
  const std::string manifest_path = dir + "/" + kPackManifest;
  if (!env.exists(manifest_path)) return false;
  auto refuse = [&](const std::string& why) -> Result<bool> {
    *reason = manifest_path + ": " + why;
    return false;
  };
  auto text = read_small_file(manifest_path, 1u << 30);
  if (!text.ok()) return refuse(text.status().message());
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return refuse(std::string("damaged (not JSON: ") + e.what() + ")");
  }
  try {
    if (m.value("format", "") != kPackFormat) return refuse("not a nightjar trunk pack manifest");
    const int version = m.value("version", 0);
    if (version != 1 && version != kPackVersion)
      return refuse("version " + std::to_string(version) + " is not one this build reads (1 or " +
                    std::to_string(kPackVersion) + "): rerun `nightjar pack`");
    PackCodec codec = PackCodec::kRaw;
    if (version >= 2) {
      auto c = parse_pack_codec(m.at("codec").get<std::string>());
      if (!c.ok()) return refuse("damaged: " + c.status().message());
      codec = *c;
    }
    const std::string fp = hex64(model_fingerprint(layout->config(), index));
    if (m.at("model_fingerprint").get<std::string>() != fp)
      return refuse("built for another model (fingerprint " +
                    m.at("model_fingerprint").get<std::string>() + ", this model " + fp + ")");
    std::map<std::string, SourceFile> now;
    for (const auto& f : index.files()) {
      auto sf = describe_source_file(f.path);
      if (!sf.ok()) return refuse(sf.status().message());
      now[sf->name] = *sf;
    }
    if (m.at("source_files").size() != now.size())
      return refuse("stale: built from a different set of shards");
    for (const auto& f : m.at("source_files")) {
      auto it = now.find(f.at("name").get<std::string>());
      if (it == now.end())
        return refuse("stale: built from " + f.at("name").get<std::string>() +
                      ", not in the model");
      if (it->second.size != f.at("size").get<uint64_t>() ||
          it->second.mtime_ns != f.at("mtime_ns").get<int64_t>())
        return refuse("stale: " + it->first +
                      " changed since the pack was built (size or modification time)");
    }
    const std::string pack_path = dir + "/" + m.at("pack_file").get<std::string>();
    if (m.at("pack_file").get<std::string>().find('/') != std::string::npos)
      return refuse("bad pack_file name");
    auto pack = open_random_access(pack_path, IoMode::kBuffered);
    if (!pack.ok()) return refuse(pack.status().message());
    const uint64_t pack_bytes = m.at("pack_bytes").get<uint64_t>();
    if ((*pack)->size() != pack_bytes)
      return refuse("damaged: " + pack_path + " is " + std::to_string((*pack)->size()) +
                    " bytes, the manifest says " + std::to_string(pack_bytes));
    // Every unit's tensors must be exactly the layout's; then switch the units over.
    auto units = pack_units(*layout);
    const auto& mu = m.at("units");
    if (mu.size() != units.size())
      return refuse("has " + std::to_string(mu.size()) + " units, the model " +
                    std::to_string(units.size()));
    std::vector<UnitLayout> new_units(units.size());
    std::vector<std::vector<uint64_t>> offsets(units.size());
    for (size_t u = 0; u < units.size(); ++u) {
      const auto& ju = mu[u];
      const std::string unit_name = "unit " + std::to_string(u);
      const uint64_t off = ju.at("offset").get<uint64_t>(), len = ju.at("length").get<uint64_t>();
      // Written so that no sum can wrap (offsets are any u64 in a damaged manifest).
      if (off % kDirectAlign || off > pack_bytes || len > pack_bytes - off ||
          align_up(len, kDirectAlign) > pack_bytes - off)
        return refuse("damaged: " + unit_name + " lies outside the pack");
      UnitLayout& nu = new_units[u];
      uint64_t run_length = len;
      if (codec == PackCodec::kLossless) {
        run_length = ju.at("raw_length").get<uint64_t>();
        const std::string why = read_blocks(ju.at("blocks"), len, run_length, &nu.blocks);
        if (!why.empty()) return refuse("damaged: " + unit_name + ": " + why);
        if (hex64(unit_hash_of_blocks(nu.blocks)) != ju.at("xxh3").get<std::string>())
          return refuse("damaged: " + unit_name + "'s xxh3 is not its blocks' hash");
      } else {
        nu.verify = true;
        nu.checksum = std::stoull(ju.at("xxh3").get<std::string>(), nullptr, 16);
        nu.checksum_bytes = len;
      }
      std::map<std::string, uint64_t> by_name;
      for (const auto& t : ju.at("tensors"))
        by_name[t.at("name").get<std::string>()] = t.at("offset").get<uint64_t>();
      if (by_name.size() != units[u].size())
        return refuse("stale: " + unit_name + " holds other tensors");
      for (TensorSlot* s : units[u]) {
        auto it = by_name.find(std::string(s->info->name));
        if (it == by_name.end())
          return refuse("stale: tensor '" + std::string(s->info->name) + "' is not in the pack");
        if (it->second > run_length || s->info->nbytes > run_length - it->second)
          return refuse("damaged: tensor '" + it->first + "' runs past its unit");
        offsets[u].push_back(it->second);
      }
      nu.extents.push_back(Extent{pack_file_id, off, align_up(len, kDirectAlign), 0});
      nu.buffer_bytes = align_up(run_length, kDirectAlign);
      nu.tensor_bytes = pack_unit_layout(*layout, static_cast<int>(u)).tensor_bytes;
      nu.pack_unit = static_cast<int>(u);
    }
    for (size_t u = 0; u < units.size(); ++u) {
      for (size_t i = 0; i < units[u].size(); ++i) units[u][i]->buffer_offset = offsets[u][i];
      pack_unit_layout(*layout, static_cast<int>(u)) = new_units[u];
    }
    layout->add_file(pack_path);
    return true;
  } catch (const std::exception& e) {
    return refuse(std::string("damaged: ") + e.what());
  }
}

}  // namespace nj
