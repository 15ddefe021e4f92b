// Fuzzes model.safetensors.index.json (engine/model/tensor_index.h): the input is the
// index file of a model directory that holds two small valid shards. The index must refuse
// what is malformed or inconsistent with the shards, naming a file; what it accepts must
// index only tensors of the shards it names, each inside its file.
#include <cstring>
#include <string>

#include "engine/model/tensor_index.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// A safetensors file of F32 tensors, each {name, numel}, with 8-byte-aligned data.
std::string shard(std::initializer_list<std::pair<const char*, int>> tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const auto& [name, n] : tensors) {
    const uint64_t end = offset + 4 * static_cast<uint64_t>(n);
    header += ",\"" + std::string(name) + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(n) +
              "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  return file + header + std::string(offset, '\x3f');
}

const std::string& model_dir() {
  static const std::string dir = [] {
    nj::fuzz::write_scratch("model/model-00001-of-00002.safetensors",
                            shard({{"model.embed_tokens.weight", 6}, {"model.norm.weight", 2}}));
    nj::fuzz::write_scratch("model/model-00002-of-00002.safetensors",
                            shard({{"lm_head.weight", 4}}));
    return nj::fuzz::scratch_dir() + "/model";
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  const std::string& dir = model_dir();
  nj::fuzz::write_scratch("model/model.safetensors.index.json", fuzz::bytes(data, size));
  auto index = TensorIndex::open(dir, 1);
  if (!index.ok()) {
    fuzz::note(index.status().message());
    fuzz::check(index.status().message().find(".safetensors") != std::string::npos,
                "the error names no file: " + index.status().message());
    return 0;
  }
  for (const TensorInfo& t : index->tensors()) {
    const ShardFile& f = index->files().at(t.file);
    fuzz::check(t.offset >= f.data_start && t.offset <= f.size && t.nbytes <= f.size - t.offset,
                "tensor '" + std::string(t.name) + "' accepted outside its file");
    fuzz::check(index->find(t.name) == &t, "tensor '" + std::string(t.name) + "' not found");
  }
  fuzz::note("accepted");
  return 0;
}
