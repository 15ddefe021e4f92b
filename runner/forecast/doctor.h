// `nightjar doctor`: what this machine offers the engine. Measured, not assumed: the SIMD
// level the kernels will use, memory, free disk, O_DIRECT support and cold read
// bandwidth of the directory the model (or the store) lives in.
#pragma once

#include <cstdint>
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

}  // namespace nj::runner
