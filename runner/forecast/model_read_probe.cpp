// The model read probe (see model_read_probe.h).
#include "runner/forecast/model_read_probe.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include "engine/io/probe.h"

namespace nj::runner {

Result<ModelReadProbe> probe_model_reads(const std::string& model_dir, double seconds,
                                         int io_threads) {
  namespace fs = std::filesystem;
  struct Slice {
    std::string path;
    uint64_t offset, bytes;
  };
  constexpr uint64_t kSlice = 1ull << 30;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec))
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
  if (ec) return not_found(model_dir + ": cannot list the model directory: " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<Slice> slices;
  for (const std::string& f : files) {
    const uint64_t size = fs::file_size(f, ec);
    if (ec) return not_found(f + ": " + ec.message());
    for (uint64_t at = 0; at < size; at += kSlice)
      slices.push_back({f, at, std::min(kSlice, size - at)});
  }
  if (slices.empty()) return not_found(model_dir + ": no *.safetensors weight file to read");

  DiskProbeOptions options;
  options.threads = io_threads;
  ModelReadProbe p;
  double first_bytes = 0, first_s = 0, second_bytes = 0, second_s = 0;
  for (size_t i = 0; p.seconds < seconds; i = (i + 1) % slices.size()) {
    const Slice& s = slices[i];
    NJ_ASSIGN_OR_RETURN(
        double gbps, measure_file_read_gbps(s.path, /*direct=*/true, /*drop_cache=*/true, s.bytes,
                                            options, s.offset));
    const double took = static_cast<double>(s.bytes) / (std::max(gbps, 1e-9) * 1e9);
    (p.seconds < seconds / 2 ? first_bytes : second_bytes) += static_cast<double>(s.bytes);
    (p.seconds < seconds / 2 ? first_s : second_s) += took;
    p.seconds += took;
    p.bytes += s.bytes;
    if (i + 1 == slices.size()) ++p.passes;
  }
  p.first_gbps = first_s > 0 ? first_bytes / first_s / 1e9 : 0.0;
  p.gbps = second_s > 0 ? second_bytes / second_s / 1e9 : p.first_gbps;
  return p;
}

}  // namespace nj::runner
