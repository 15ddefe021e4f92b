// `nightjar doctor`: gather, then render as text or JSON.
#include "runner/forecast/doctor.h"

#include <cstdio>
#include <sstream>

#include "engine/ops/cpu.h"
#include "engine/io/sysinfo.h"
#include "engine/util/units.h"

namespace nj::runner {

Result<DoctorReport> run_doctor(const DoctorOptions& options, const std::string& version) {
  DoctorReport r;
  r.version = version;
  r.cpu_model = cpu_model_name();
  r.cpus = cpu_count();
  r.simd_detected = simd_level_name(detect_simd_level());
  r.simd_active = simd_level_name(active_simd_level());
  NJ_ASSIGN_OR_RETURN(MemoryInfo mem, memory_info());
  r.ram_total_bytes = mem.total_bytes;
  r.ram_available_bytes = mem.available_bytes;
  // The directory is checked by probe_disk first so that a missing one fails with its name.
  DiskProbeOptions probe_options;
  probe_options.probe_bytes = options.probe_bytes;
  NJ_ASSIGN_OR_RETURN(r.disk, probe_disk(options.dir, probe_options));
  NJ_ASSIGN_OR_RETURN(DiskSpace space, disk_space(options.dir));
  r.disk_total_bytes = space.total_bytes;
  r.disk_free_bytes = space.free_bytes;
  if (options.measure_memory) r.memory_read_gbps = measure_memory_read_gbps(256ull << 20, r.cpus);
  return r;
}

nlohmann::json doctor_json(const DoctorReport& r) {
  nlohmann::json j;
  j["version"] = r.version;
  j["cpu"] = {{"model", r.cpu_model}, {"cpus", r.cpus}};
  j["simd_level"] = r.simd_active;
  j["simd_detected"] = r.simd_detected;
  j["ram_total_bytes"] = r.ram_total_bytes;
  j["ram_available_bytes"] = r.ram_available_bytes;
  if (r.memory_read_gbps > 0) j["memory_read_gbps"] = r.memory_read_gbps;
  j["dir"] = r.disk.dir;
  j["disk_total_bytes"] = r.disk_total_bytes;
  j["disk_free_bytes"] = r.disk_free_bytes;
  j["odirect_supported"] = r.disk.odirect_supported;
  j["probe_bytes"] = r.disk.probe_bytes;
  j["direct_read_gbps"] = r.disk.odirect_supported ? nlohmann::json(r.disk.direct_read_gbps)
                                                   : nlohmann::json(nullptr);
  j["buffered_read_gbps"] = r.disk.buffered_read_gbps;
  j["write_gbps"] = r.disk.write_gbps;
  return j;
}

std::string doctor_text(const DoctorReport& r) {
  std::ostringstream o;
  char buf[64];
  auto gbps = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.2f GB/s", v);
    return std::string(buf);
  };
  o << "nightjar " << r.version << "\n";
  o << "cpu            " << r.cpu_model << " (" << r.cpus << " cpus)\n";
  o << "simd           " << r.simd_active;
  if (r.simd_active != r.simd_detected) o << " (forced; detected " << r.simd_detected << ")";
  o << "\n";
  o << "memory         " << format_bytes(r.ram_total_bytes) << " total, "
    << format_bytes(r.ram_available_bytes) << " available";
  if (r.memory_read_gbps > 0) o << ", reads at " << gbps(r.memory_read_gbps);
  o << "\n";
  o << "disk           " << r.disk.dir << ": " << format_bytes(r.disk_free_bytes) << " free of "
    << format_bytes(r.disk_total_bytes) << "\n";
  o << "O_DIRECT       " << (r.disk.odirect_supported ? "supported" : "NOT supported (reads will go through the page cache)") << "\n";
  o << "cold reads     ";
  if (r.disk.odirect_supported) o << gbps(r.disk.direct_read_gbps) << " O_DIRECT, ";
  o << gbps(r.disk.buffered_read_gbps) << " buffered (" << format_bytes(r.disk.probe_bytes)
    << " probe file)\n";
  o << "writes         " << gbps(r.disk.write_gbps) << " (with fsync)\n";
  return o.str();
}

}  // namespace nj::runner
