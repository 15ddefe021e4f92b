// Indexing speed at real scale: the released K3 layout (497k tensors in ~100 shards) must
// index in well under a second.
//   index_bench DIR [--repeats N]
// DIR is a checkpoint directory, e.g. one written by
//   /usr/bin/python3 tests/reference/make_model.py --out build/k3-layout --preset k3
//       --sparse --shard-bytes 17000000000
// (sparse files: the real headers and sizes in ~130 MB of disk). Prints the median time to
// index (headers + weight map), to validate the layout against config.json, and RSS.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/model/tensor_index.h"
#include "engine/model/config.h"
#include "engine/model/layout.h"
#include "engine/io/sysinfo.h"
#include "engine/util/units.h"
#include "tests/bench/bench_util.h"

using namespace nj;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: index_bench DIR [--repeats N]\n");
    return 2;
  }
  const std::string dir = argv[1];
  int repeats = 5;
  for (int i = 2; i + 1 < argc; i += 2)
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
  auto config = load_model_config(dir);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().to_string().c_str());
    return 1;
  }
  std::vector<double> t_index, t_layout;
  size_t tensors = 0, files = 0;
  uint64_t bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = bench::now_s();
    auto index = TensorIndex::open(dir);
    const double t1 = bench::now_s();
    if (!index.ok()) {
      std::fprintf(stderr, "%s\n", index.status().to_string().c_str());
      return 1;
    }
    auto layout = ModelLayout::build(*config, *index);
    const double t2 = bench::now_s();
    if (!layout.ok()) {
      std::fprintf(stderr, "%s\n", layout.status().to_string().c_str());
      return 1;
    }
    t_index.push_back(t1 - t0);
    t_layout.push_back(t2 - t1);
    tensors = index->tensors().size();
    files = index->files().size();
    bytes = index->total_tensor_bytes();
  }
  std::printf("index_bench: %s\n", dir.c_str());
  std::printf("  %zu tensors in %zu files, %s of tensor data\n", tensors, files, format_bytes(bytes).c_str());
  std::printf("  index (headers + weight map): median %.3f s over %d runs (warm page cache after the first)\n",
              bench::median(t_index), repeats);
  std::printf("  layout validation:            median %.3f s\n", bench::median(t_layout));
  std::printf("  peak RSS:                     %s\n", format_bytes(peak_rss_bytes()).c_str());
  return 0;
}
