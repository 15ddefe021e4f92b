// Safetensors header indexing (format grammar in tensor_index.h).
#include "engine/model/tensor_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include <xxhash.h>

#include "engine/io/file.h"
#include "engine/io/mapped_file.h"
#include "engine/util/json_cursor.h"

namespace nj {
namespace {

// Headers above this are not safetensors (the K3 shards' are under 1 MB).
constexpr uint64_t kMaxHeaderBytes = 512ull << 20;

struct ShardResult {
  ShardFile file;
  TensorIndex::TensorVector tensors;
  std::unique_ptr<char[]> arena;
  Status status;
};

Status parse_tensor_entry(JsonCursor& cur, std::string_view name, const std::string& path,
                          uint64_t data_size, TensorInfo* t) {
  auto bad = [&](const std::string& what) {
    return corruption(path + ": tensor '" + std::string(name) + "': " + what);
  };
  NJ_RETURN_IF_ERROR(cur.begin_object());
  bool have_dtype = false, have_shape = false, have_offsets = false;
  uint64_t begin = 0, end = 0;
  std::string_view key, sval;
  std::string scratch, scratch2;
  while (true) {
    NJ_ASSIGN_OR_RETURN(bool more, cur.next_member(&key, &scratch));
    if (!more) break;
    if (key == "dtype") {
      NJ_RETURN_IF_ERROR(cur.read_string_view(&sval, &scratch2));
      if (!parse_dtype(sval, &t->dtype)) return bad("unknown dtype '" + std::string(sval) + "'");
      have_dtype = true;
    } else if (key == "shape") {
      NJ_RETURN_IF_ERROR(cur.begin_array());
      t->ndim = 0;
      while (true) {
        NJ_ASSIGN_OR_RETURN(bool el, cur.next_element());
        if (!el) break;
        if (t->ndim == kMaxTensorDims) return bad("more than 4 dimensions");
        uint64_t dim = 0;
        NJ_RETURN_IF_ERROR(cur.read_uint64(&dim));
        if (dim > UINT32_MAX) return bad("dimension " + std::to_string(dim) + " is too large");
        t->shape[t->ndim++] = static_cast<uint32_t>(dim);
      }
      have_shape = true;
    } else if (key == "data_offsets") {
      NJ_RETURN_IF_ERROR(cur.begin_array());
      uint64_t v[2];
      int n = 0;
      while (true) {
        NJ_ASSIGN_OR_RETURN(bool el, cur.next_element());
        if (!el) break;
        if (n == 2) return bad("data_offsets has more than two entries");
        NJ_RETURN_IF_ERROR(cur.read_uint64(&v[n++]));
      }
      if (n != 2) return bad("data_offsets needs two entries");
      begin = v[0];
      end = v[1];
      have_offsets = true;
    } else {
      NJ_RETURN_IF_ERROR(cur.skip_value());
    }
  }
  if (!have_dtype) return bad("no dtype");
  if (!have_shape) return bad("no shape");
  if (!have_offsets) return bad("no data_offsets");
  if (end < begin) return bad("data_offsets end before they begin");
  if (end > data_size)
    return bad("ends past the file (data offsets " + std::to_string(begin) + ".." +
               std::to_string(end) + ", data section is " + std::to_string(data_size) +
               " bytes)");
  // shape x dtype size must equal the extent; guard the product against overflow.
  uint64_t expect = dtype_size(t->dtype);
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] != 0 && expect > UINT64_MAX / t->shape[i]) return bad("shape overflows");
    expect *= t->shape[i];
  }
  if (expect != end - begin)
    return bad("shape " + t->shape_string() + " x " + dtype_name(t->dtype) + " needs " +
               std::to_string(expect) + " bytes but data_offsets span " +
               std::to_string(end - begin));
  t->nbytes = end - begin;
  t->offset = begin;  // made absolute by the caller
  return Status();
}

void parse_shard(const std::string& path, uint32_t file_index, ShardResult* out) {
  auto fail = [&](Status s) { out->status = std::move(s); };
  auto opened = open_random_access(path, IoMode::kBuffered);
  if (!opened.ok()) return fail(opened.status());
  RandomAccessFile& f = **opened;
  out->file.path = path;
  out->file.size = f.size();
  if (f.size() < 8) return fail(corruption(path + ": truncated: " + std::to_string(f.size()) +
                                           " bytes, not even a safetensors header length"));
  uint8_t len_bytes[8];
  if (Status s = f.read_at(0, len_bytes, 8); !s.ok()) return fail(s);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > f.size() - 8)
    return fail(corruption(path + ": header length " + std::to_string(header_len) +
                           " runs past the file (" + std::to_string(f.size()) +
                           " bytes): truncated or not safetensors"));
  // Parsed in place from the page cache (K3: ~800 KB per shard, 80 MB in all).
  auto mapped = MappedFile::map(path, 8, header_len);
  if (!mapped.ok()) return fail(mapped.status());
  const std::string_view header = mapped->bytes();
  out->file.data_start = 8 + header_len;
  const uint64_t data_size = f.size() - out->file.data_start;

  // Names are copied into an arena no larger than the header, so views stay valid.
  out->arena.reset(new char[header_len + 1]);
  size_t arena_used = 0;
  JsonCursor cur(header, path);
  out->tensors.reserve(header_len / 120);  // a K3 entry is ~150 bytes of JSON
  auto run = [&]() -> Status {
    NJ_RETURN_IF_ERROR(cur.begin_object());
    std::string_view key;
    std::string scratch;
    while (true) {
      NJ_ASSIGN_OR_RETURN(bool more, cur.next_member(&key, &scratch));
      if (!more) break;
      if (key == "__metadata__") {
        NJ_RETURN_IF_ERROR(cur.skip_value());
        continue;
      }
      char* dst = out->arena.get() + arena_used;
      std::memcpy(dst, key.data(), key.size());
      arena_used += key.size();
      TensorInfo t;
      t.name = std::string_view(dst, key.size());
      t.file = file_index;
      NJ_RETURN_IF_ERROR(parse_tensor_entry(cur, t.name, path, data_size, &t));
      t.offset += out->file.data_start;
      out->tensors.push_back(t);
    }
    if (!cur.at_end()) return cur.error("trailing bytes after the header object");
    return Status();
  };
  out->status = run();
}

uint64_t name_hash(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

bool file_exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<TensorIndex> TensorIndex::open_files(const std::vector<std::string>& paths,
                                                    int threads) {
  if (paths.empty()) return invalid_argument("no safetensors files to index");
  std::vector<ShardResult> shards(paths.size());
  int n_threads = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  n_threads = std::clamp(n_threads, 1, static_cast<int>(paths.size()));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < paths.size();)
      parse_shard(paths[i], static_cast<uint32_t>(i), &shards[i]);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < n_threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // the threads started (and this one) index every shard all the same
    }
  }
  worker();
  for (auto& th : pool) th.join();

  TensorIndex index;
  size_t total = 0;
  for (auto& s : shards) {
    if (!s.status.ok()) return s.status;
    total += s.tensors.size();
  }
  index.tensors_.reserve(total);
  for (auto& s : shards) {
    index.files_.push_back(std::move(s.file));
    index.tensors_.insert(index.tensors_.end(), s.tensors.begin(), s.tensors.end());
    index.name_arenas_.push_back(std::move(s.arena));
  }
  NJ_RETURN_IF_ERROR(index.build_lookup());
  return index;
}

Status TensorIndex::build_lookup() {
  size_t cap = 16;
  while (cap < tensors_.size() * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  for (uint32_t i = 0; i < tensors_.size(); ++i) {
    std::string_view name = tensors_[i].name;
    const uint64_t hash = name_hash(name);
    const uint32_t tag = static_cast<uint32_t>(hash >> 32);
    size_t h = static_cast<size_t>(hash) & (cap - 1);
    while (slots_[h].index_plus_one != 0) {
      if (slots_[h].tag == tag) {
        const TensorInfo& other = tensors_[slots_[h].index_plus_one - 1];
        if (other.name == name)
          return corruption("tensor '" + std::string(name) + "' appears twice: in " +
                            files_[other.file].path + " and " + files_[tensors_[i].file].path);
      }
      h = (h + 1) & (cap - 1);
    }
    slots_[h] = Slot{i + 1, tag};
  }
  return Status();
}

const TensorInfo* TensorIndex::find(std::string_view name) const {
  if (slots_.empty()) return nullptr;
  const size_t cap = slots_.size();
  const uint64_t hash = name_hash(name);
  const uint32_t tag = static_cast<uint32_t>(hash >> 32);
  size_t h = static_cast<size_t>(hash) & (cap - 1);
  while (slots_[h].index_plus_one != 0) {
    if (slots_[h].tag == tag) {
      const TensorInfo& t = tensors_[slots_[h].index_plus_one - 1];
      if (t.name == name) return &t;
    }
    h = (h + 1) & (cap - 1);
  }
  return nullptr;
}

uint64_t TensorIndex::total_tensor_bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += t.nbytes;
  return n;
}

uint64_t TensorIndex::layout_fingerprint() const {
  // A sum of per-tensor hashes does not depend on order or sharding.
  uint64_t acc = 0x6e696768746a6172ull;  // "nightjar"
  std::string buf;
  for (const auto& t : tensors_) {
    buf.assign(t.name);
    buf.push_back('\0');
    buf += dtype_name(t.dtype);
    for (int i = 0; i < t.ndim; ++i) buf += "," + std::to_string(t.shape[i]);
    acc += XXH3_64bits(buf.data(), buf.size());
  }
  return acc;
}

Result<TensorIndex> TensorIndex::open(const std::string& model_dir, int threads) {
  const std::string index_path = model_dir + "/model.safetensors.index.json";
  const std::string single_path = model_dir + "/model.safetensors";
  if (!file_exists(index_path)) {
    if (!file_exists(single_path))
      return not_found(model_dir + ": no model.safetensors or model.safetensors.index.json");
    NJ_ASSIGN_OR_RETURN(TensorIndex index, open_files({single_path}, threads));
    index.dir_ = model_dir;
    return index;
  }

  // Sharded: read the weight map, index the shards it names, and check it against them.
  NJ_ASSIGN_OR_RETURN(auto index_file, open_random_access(index_path, IoMode::kBuffered));
  NJ_ASSIGN_OR_RETURN(MappedFile mapped_index, MappedFile::map(index_path, 0, index_file->size()));
  index_file.reset();
  const std::string_view text = mapped_index.bytes();  // K3: 57 MB, parsed in place
  JsonCursor cur(text, index_path);
  std::vector<std::pair<std::string_view, uint32_t>> mapped;  // tensor name, shard number
  std::vector<std::string> shard_names;
  std::unordered_map<std::string, uint32_t> shard_number;
  std::vector<std::string> decoded;  // keeps escaped names alive (rare)
  bool have_map = false;
  {
    NJ_RETURN_IF_ERROR(cur.begin_object());
    std::string_view key, name, shard;
    std::string s1, s2, s3;
    while (true) {
      NJ_ASSIGN_OR_RETURN(bool more, cur.next_member(&key, &s1));
      if (!more) break;
      if (key != "weight_map") {
        NJ_RETURN_IF_ERROR(cur.skip_value());
        continue;
      }
      have_map = true;
      NJ_RETURN_IF_ERROR(cur.begin_object());
      std::string_view last_shard;
      uint32_t last_number = 0;
      while (true) {
        NJ_ASSIGN_OR_RETURN(bool m, cur.next_member(&name, &s2));
        if (!m) break;
        if (name.data() == s2.data()) name = decoded.emplace_back(s2);
        NJ_RETURN_IF_ERROR(cur.read_string_view(&shard, &s3));
        if (shard != last_shard || mapped.empty()) {  // consecutive entries share a shard
          std::string sname(shard);
          if (sname.empty() || sname.find('/') != std::string::npos || sname == "..")
            return corruption(index_path + ": tensor '" + std::string(name) +
                              "' maps to an invalid shard name '" + sname + "'");
          auto [it, inserted] = shard_number.emplace(sname, static_cast<uint32_t>(shard_names.size()));
          if (inserted) shard_names.push_back(sname);
          last_number = it->second;
          last_shard = shard.data() == s3.data() ? std::string_view() : shard;
        }
        mapped.emplace_back(name, last_number);
      }
    }
    if (!cur.at_end()) return cur.error("trailing bytes after the index object");
  }
  if (!have_map) return corruption(index_path + ": no weight_map");
  if (shard_names.empty()) return corruption(index_path + ": weight_map is empty");

  std::vector<std::string> paths;
  for (const auto& s : shard_names) {
    paths.push_back(model_dir + "/" + s);
    if (!file_exists(paths.back()))
      return not_found(index_path + ": names shard '" + s + "', which does not exist");
  }
  NJ_ASSIGN_OR_RETURN(TensorIndex index, open_files(paths, threads));
  index.dir_ = model_dir;
  // The weight map must name exactly the tensors of each shard. Checking every name costs
  // half a million lookups at K3 scale, so the counts per shard are compared first and the
  // names only when a count differs (to name the culprit). A map that swaps two names
  // between shards passes: harmless, as every read uses the shard headers themselves.
  std::vector<size_t> mapped_per_shard(shard_names.size(), 0), found_per_shard(shard_names.size(), 0);
  for (const auto& m : mapped) ++mapped_per_shard[m.second];
  for (const auto& t : index.tensors_) ++found_per_shard[t.file];
  if (mapped_per_shard != found_per_shard || mapped.size() != index.tensors_.size()) {
    for (const auto& [name, shard] : mapped) {
      const TensorInfo* t = index.find(name);
      if (!t)
        return not_found(index_path + ": tensor '" + std::string(name) + "' is mapped to " +
                         shard_names[shard] + " but is not in its header");
      if (t->file != shard)
        return corruption(index_path + ": tensor '" + std::string(name) + "' is mapped to " +
                          shard_names[shard] + " but found in " + index.files_[t->file].path);
    }
    for (size_t s = 0; s < shard_names.size(); ++s)
      if (mapped_per_shard[s] != found_per_shard[s])
        return corruption(index_path + ": maps " + std::to_string(mapped_per_shard[s]) + " tensors to " +
                          shard_names[s] + ", whose header holds " + std::to_string(found_per_shard[s]) +
                          " (a name is listed twice, or the shard has tensors the map omits)");
  }
  return index;
}

}  // namespace nj
