// Writing and adopting the packed trunk (format and guarantees in pack.h).
#include "engine/model/pack.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "engine/io/durable.h"
#include "engine/model/model.h"
#include "engine/model/resident_source.h"

namespace nj {
namespace {

constexpr uint64_t kTensorAlign = 64;

std::string hex64(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

struct SourceFile {
  std::string name;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

Result<SourceFile> describe(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return io_error(path + ": cannot stat");
  SourceFile f;
  f.name = base_name(path);
  f.size = static_cast<uint64_t>(st.st_size);
  f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return f;
}

// The trunk units in pack order: layers, then the head.
std::vector<std::vector<TensorSlot*>> units_of(ModelLayout& layout) {
  std::vector<std::vector<TensorSlot*>> units;
  for (int l = 0; l < layout.config().layers; ++l) units.push_back(trunk_slots(layout.mutable_layer(l)));
  units.push_back(head_slots(layout.mutable_head()));
  for (auto& u : units) u.erase(std::remove_if(u.begin(), u.end(), [](TensorSlot* s) { return !s->info; }), u.end());
  return units;
}

UnitLayout& unit_of(ModelLayout& layout, int u) {
  return u == layout.config().layers ? layout.mutable_head().unit : layout.mutable_layer(u).unit;
}

}  // namespace

Result<PackStats> write_trunk_pack(Env& env, const TensorIndex& index, const ModelLayout& layout_in,
                                   const std::string& out_dir) {
  const auto t0 = std::chrono::steady_clock::now();
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
  nlohmann::json units_json = nlohmann::json::array();
  auto units = units_of(layout);
  uint64_t written = 0;
  auto fill = [&](WritableFile& out) -> Status {
    const std::string zeros(kDirectAlign, '\0');
    for (size_t u = 0; u < units.size(); ++u) {
      const UnitLayout& ul = unit_of(layout, static_cast<int>(u));
      AlignedBuffer in(ul.buffer_bytes);
      NJ_RETURN_IF_ERROR(read_unit(files, ul, in.data()));
      // Tensors in file order, each at a 64-byte boundary of the run.
      std::vector<TensorSlot*> slots = units[u];
      std::sort(slots.begin(), slots.end(), [](const TensorSlot* a, const TensorSlot* b) {
        return a->info->file != b->info->file ? a->info->file < b->info->file : a->info->offset < b->info->offset;
      });
      std::string run;
      nlohmann::json tensors = nlohmann::json::array();
      for (TensorSlot* s : slots) {
        run.resize(align_up(run.size(), kTensorAlign), '\0');
        tensors.push_back({{"name", std::string(s->info->name)}, {"offset", run.size()}});
        run.append(reinterpret_cast<const char*>(in.data() + s->buffer_offset), s->info->nbytes);
      }
      units_json.push_back({{"unit", u}, {"offset", written}, {"length", run.size()},
                            {"xxh3", hex64(XXH3_64bits(run.data(), run.size()))}, {"tensors", tensors}});
      NJ_RETURN_IF_ERROR(out.append(run));
      written += run.size();
      const uint64_t pad = align_up(written, kDirectAlign) - written;
      if (pad) NJ_RETURN_IF_ERROR(out.append(std::string_view(zeros.data(), pad)));
      written += pad;
    }
    return Status();
  };
  NJ_RETURN_IF_ERROR(write_file_durably(env, pack_path, fill));

  nlohmann::json m;
  m["format"] = "nightjar-trunk-pack";
  m["version"] = 1;
  m["model_fingerprint"] = hex64(model_fingerprint(layout.config(), index));
  m["source_files"] = nlohmann::json::array();
  for (const auto& f : index.files()) {
    NJ_ASSIGN_OR_RETURN(SourceFile sf, describe(f.path));
    m["source_files"].push_back({{"name", sf.name}, {"size", sf.size}, {"mtime_ns", sf.mtime_ns}});
  }
  m["pack_file"] = kPackFile;
  m["pack_bytes"] = written;
  m["units"] = units_json;
  NJ_RETURN_IF_ERROR(write_file_durably(env, manifest_path, m.dump(1) + "\n"));
  PackStats stats;
  stats.units = units.size();
  stats.pack_bytes = written;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

Result<bool> use_trunk_pack(Env& env, const std::string& dir, const TensorIndex& index, ModelLayout* layout,
                            uint32_t pack_file_id, std::string* reason) {
  const std::string manifest_path = dir + "/" + kPackManifest;
  if (!env.exists(manifest_path)) return false;
  auto refuse = [&](const std::string& why) -> Result<bool> {
    *reason = manifest_path + ": " + why;
    return false;
  };
  auto text = read_small_file(manifest_path, 256u << 20);
  if (!text.ok()) return refuse(text.status().message());
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return refuse(std::string("damaged (not JSON: ") + e.what() + ")");
  }
  try {
    if (m.value("format", "") != "nightjar-trunk-pack") return refuse("not a nightjar trunk pack manifest");
    if (m.value("version", 0) != 1) return refuse("version " + std::to_string(m.value("version", 0)) + " is not 1");
    const std::string fp = hex64(model_fingerprint(layout->config(), index));
    if (m.at("model_fingerprint").get<std::string>() != fp)
      return refuse("built for another model (fingerprint " + m.at("model_fingerprint").get<std::string>() +
                    ", this model " + fp + ")");
    std::map<std::string, SourceFile> now;
    for (const auto& f : index.files()) {
      auto sf = describe(f.path);
      if (!sf.ok()) return refuse(sf.status().message());
      now[sf->name] = *sf;
    }
    if (m.at("source_files").size() != now.size()) return refuse("stale: built from a different set of shards");
    for (const auto& f : m.at("source_files")) {
      auto it = now.find(f.at("name").get<std::string>());
      if (it == now.end()) return refuse("stale: built from " + f.at("name").get<std::string>() + ", not in the model");
      if (it->second.size != f.at("size").get<uint64_t>() || it->second.mtime_ns != f.at("mtime_ns").get<int64_t>())
        return refuse("stale: " + it->first + " changed since the pack was built (size or modification time)");
    }
    const std::string pack_path = dir + "/" + m.at("pack_file").get<std::string>();
    if (m.at("pack_file").get<std::string>().find('/') != std::string::npos) return refuse("bad pack_file name");
    auto pack = open_random_access(pack_path, IoMode::kBuffered);
    if (!pack.ok()) return refuse(pack.status().message());
    const uint64_t pack_bytes = m.at("pack_bytes").get<uint64_t>();
    if ((*pack)->size() != pack_bytes)
      return refuse("damaged: " + pack_path + " is " + std::to_string((*pack)->size()) + " bytes, the manifest says " +
                    std::to_string(pack_bytes));
    // Every unit's tensors must be exactly the layout's; then switch the units over.
    auto units = units_of(*layout);
    const auto& mu = m.at("units");
    if (mu.size() != units.size()) return refuse("has " + std::to_string(mu.size()) + " units, the model " + std::to_string(units.size()));
    std::vector<UnitLayout> new_units(units.size());
    std::vector<std::vector<uint64_t>> offsets(units.size());
    for (size_t u = 0; u < units.size(); ++u) {
      const auto& ju = mu[u];
      const uint64_t off = ju.at("offset").get<uint64_t>(), len = ju.at("length").get<uint64_t>();
      // Written so that no sum can wrap (offsets are any u64 in a damaged manifest).
      if (off % kDirectAlign || off > pack_bytes || len > pack_bytes - off)
        return refuse("damaged: unit " + std::to_string(u) + " lies outside the pack");
      std::map<std::string, uint64_t> by_name;
      for (const auto& t : ju.at("tensors")) by_name[t.at("name").get<std::string>()] = t.at("offset").get<uint64_t>();
      if (by_name.size() != units[u].size()) return refuse("stale: unit " + std::to_string(u) + " holds other tensors");
      for (TensorSlot* s : units[u]) {
        auto it = by_name.find(std::string(s->info->name));
        if (it == by_name.end()) return refuse("stale: tensor '" + std::string(s->info->name) + "' is not in the pack");
        if (it->second > len || s->info->nbytes > len - it->second)
          return refuse("damaged: tensor '" + it->first + "' runs past its unit");
        offsets[u].push_back(it->second);
      }
      UnitLayout& nu = new_units[u];
      nu.extents.push_back(Extent{pack_file_id, off, std::min<uint64_t>(align_up(len, kDirectAlign), pack_bytes - off), 0});
      nu.buffer_bytes = align_up(len, kDirectAlign);
      nu.tensor_bytes = unit_of(*layout, static_cast<int>(u)).tensor_bytes;
      nu.verify = true;
      nu.checksum = std::stoull(ju.at("xxh3").get<std::string>(), nullptr, 16);
      nu.checksum_bytes = len;
    }
    for (size_t u = 0; u < units.size(); ++u) {
      for (size_t i = 0; i < units[u].size(); ++i) units[u][i]->buffer_offset = offsets[u][i];
      unit_of(*layout, static_cast<int>(u)) = new_units[u];
    }
    layout->add_file(pack_path);
    return true;
  } catch (const std::exception& e) {
    return refuse(std::string("damaged: ") + e.what());
  }
}

}  // namespace nj
