// `nightjar doctor`: what this machine offers the engine. Measured, not assumed: the SIMD
// level the kernels will use, memory, free disk, O_DIRECT support and cold read
// bandwidth of the directory the model (or the store) lives in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/io/probe.h"
#include "engine/util/status.h"

namespace nj::runner {

struct DoctorOptions {
  std::string dir = ".";                // filesystem to measure
  uint64_t probe_bytes = 512ull << 20;  // temporary file size; ~1 s of reads on NVMe
  bool measure_memory = true;           // also time a RAM read (about a second)
};

struct DoctorReport {
  std::string version;
  std::string cpu_model;
  int cpus = 0;
  std::string simd_detected;  // "avx512", "avx2", "scalar"
  std::string simd_active;    // after NIGHTJAR_SIMD
  uint64_t ram_total_bytes = 0;
  uint64_t ram_available_bytes = 0;
  double memory_read_gbps = 0;  // 0 when not measured
  uint64_t disk_total_bytes = 0;
  uint64_t disk_free_bytes = 0;
  DiskProbe disk;
};

// Gathers the report. Errors name the directory (missing, unreadable, too full).
Result<DoctorReport> run_doctor(const DoctorOptions& options, const std::string& version);

nlohmann::json doctor_json(const DoctorReport& r);
std::string doctor_text(const DoctorReport& r);

// `nightjar doctor --model DIR`: whether a model directory is complete and readable (its
// config, every shard's header and tensor extents, the tokenizer and K3's chat control
// tokens), what it holds and the smallest memory budget it runs in; headers only, no
// weights read. Errors: the model's, naming the file, tensor and offset (a truncated or
// damaged shard is Corruption).
struct ModelCheck {
  std::string dir;
  int layers = 0, hidden = 0, vocab = 0, experts = 0, top_k = 0;
  size_t files = 0, tensors = 0;
  uint64_t weight_bytes = 0;
  std::optional<int64_t> max_context;  // the model's stated maximum, if any
  bool uses_pack = false;
  std::string pack_warning;  // why a pack present was not used
  bool tokenizer = false;
  std::string chat_format;  // "ok", or why chat requests cannot be rendered
  uint64_t min_memory_bytes = 0;
};
Result<ModelCheck> check_model(const std::string& dir);
nlohmann::json model_check_json(const ModelCheck& m);
std::string model_check_text(const ModelCheck& m);

}  // namespace nj::runner
