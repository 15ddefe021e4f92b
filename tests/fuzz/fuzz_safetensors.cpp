// Fuzzes the safetensors reader (engine/model/tensor_index.h): the input is a whole
// shard, header length, JSON header and data. The index must refuse what is malformed with
// an error naming the file, and what it accepts must keep its promise: every tensor lies in
// its file, after the header, with exactly shape x dtype bytes, and is found by its name.
#include <string>

#include "engine/model/tensor_index.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  const std::string path = fuzz::write_scratch("model.safetensors", fuzz::bytes(data, size));
  auto index = TensorIndex::open_files({path}, 1);
  if (!index.ok()) {
    fuzz::note(index.status().message());
    fuzz::check(index.status().message().find(path) != std::string::npos,
                "the error does not name the file: " + index.status().message());
    return 0;
  }
  for (const TensorInfo& t : index->tensors()) {
    const ShardFile& f = index->files().at(t.file);
    fuzz::check(t.offset >= f.data_start && t.offset <= f.size && t.nbytes <= f.size - t.offset,
                "tensor '" + std::string(t.name) + "' accepted outside its file");
    fuzz::check(t.nbytes == t.numel() * dtype_size(t.dtype),
                "tensor '" + std::string(t.name) + "' accepted with a size unlike its shape");
    fuzz::check(index->find(t.name) == &t, "tensor '" + std::string(t.name) + "' not found");
  }
  fuzz::note("accepted");
  return 0;
}
