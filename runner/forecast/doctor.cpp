// `nightjar doctor`: gather, then render as text or JSON.
#include "runner/forecast/doctor.h"

#include <cstdio>
#include <sstream>

#include "engine/io/sysinfo.h"
#include "engine/ops/cpu.h"
#include "engine/plan/planner.h"
#include "engine/runtime/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/units.h"
#include "jobs/chat/chat_format.h"
#include "jobs/spec/spec_model.h"

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

Result<ModelCheck> check_model(const std::string& dir) {
  ModelCheck m;
  m.dir = dir;
  NJ_ASSIGN_OR_RETURN(ModelHeaders h, open_model_headers(dir, /*use_pack=*/true, &m.pack_warning));
  m.layers = h.config.layers;
  m.hidden = h.config.hidden;
  m.vocab = h.config.vocab;
  m.experts = h.config.num_experts;
  m.top_k = h.config.top_k;
  m.files = h.index->files().size();
  m.tensors = h.index->tensors().size();
  m.weight_bytes = h.index->total_tensor_bytes();
  m.uses_pack = h.uses_pack;
  if (auto limit = jobs::model_max_context(dir)) m.max_context = limit->first;
  NJ_ASSIGN_OR_RETURN(ResidencyPlan plan, plan_residency(*h.layout, 0, PlanOptions{}));
  m.min_memory_bytes = plan.min_memory_bytes;
  m.tokenizer = Tokenizer::exists_in(dir);
  if (!m.tokenizer) {
    m.chat_format = "no tokenizer (text prompts, documents and chat requests need one)";
  } else {
    auto tok = Tokenizer::load(dir);
    if (!tok.ok()) return tok.status();  // a tokenizer that is there must read
    auto controls = jobs::chat_controls(*tok);
    m.chat_format = controls.ok() ? "ok" : controls.status().message();
  }
  return m;
}

nlohmann::json model_check_json(const ModelCheck& m) {
  return {{"dir", m.dir},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"vocab", m.vocab},
          {"experts", m.experts},
          {"top_k", m.top_k},
          {"files", m.files},
          {"tensors", m.tensors},
          {"weight_bytes", m.weight_bytes},
          {"max_context", m.max_context ? nlohmann::json(*m.max_context) : nlohmann::json()},
          {"uses_pack", m.uses_pack},
          {"pack_warning", m.pack_warning.empty() ? nlohmann::json() : nlohmann::json(m.pack_warning)},
          {"tokenizer", m.tokenizer},
          {"chat_format", m.chat_format},
          {"min_memory_bytes", m.min_memory_bytes}};
}

std::string model_check_text(const ModelCheck& m) {
  std::string out = "model " + m.dir + ": ok\n";
  out += "  layers " + std::to_string(m.layers) + ", hidden " + std::to_string(m.hidden) +
         ", vocabulary " + std::to_string(m.vocab) + ", " + std::to_string(m.experts) +
         " experts (top " + std::to_string(m.top_k) + ")\n";
  out += "  " + std::to_string(m.tensors) + " tensors in " + std::to_string(m.files) + " file" +
         (m.files == 1 ? "" : "s") + ", " + format_bytes(m.weight_bytes) + " of weights" +
         (m.uses_pack ? " (trunk from its pack)" : "") + "\n";
  if (!m.pack_warning.empty()) out += "  pack not used: " + m.pack_warning + "\n";
  out += "  context: " + (m.max_context ? std::to_string(*m.max_context) + " tokens" : "not stated") +
         "\n";
  out += std::string("  tokenizer: ") + (m.tokenizer ? "yes" : "no") + "; chat format: " +
         m.chat_format + "\n";
  out += "  smallest memory budget: " + format_bytes(m.min_memory_bytes) + " (one sequence)\n";
  return out;
}

}  // namespace nj::runner
