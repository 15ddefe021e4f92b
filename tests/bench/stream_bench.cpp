// One budget's decode run for tests/bench/run_stream_bench.sh (which drops the page cache
// before each run, measures the device, and prints the table). Prints one JSON object:
//   stream_bench --model DIR --memory SIZE|min|all [--tokens N] [--prompt N] [--bandwidth GBps]
//                [--routing-profile F] [--save-routing-profile F]
//                [--pack DIR | --no-pack] [--pin-compressed auto|yes|no] [--decode-gbps X]
//                [--threads N]      compute threads (default: calibrated, as nightjar)
//                [--timeline FILE]  the decoded tokens' pipeline events, one JSON line each
//                                   (timeline_summary.py reads them)
//   stream_bench --model DIR --seq-probe     sequential O_DIRECT read of every model file
//   stream_bench --seq-probe-file F          the same, of one file (a pack)
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/model.h"
#include "engine/io/file.h"
#include "engine/io/probe.h"
#include "engine/io/timeline.h"

#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "engine/util/process.h"
#include "engine/io/sysinfo.h"
#include "engine/util/units.h"
#include "tests/bench/bench_util.h"

using namespace nj;

int main(int argc, char** argv) {
  reexec_with_passive_omp_wait(argv);
  std::string dir, memory = "all", profile_in, profile_out, pack_dir, pin = "auto", probe_file,
                   timeline_out;
  bool seq_probe = false, no_pack = false;
  double decode_gbps = 0;
  int chunk_kib = 0, io_threads = 0, ring_slots = 2, min_experts = 2;
  int tokens = 12, prompt_len = 4, threads = 0;
  double bandwidth = 2.6;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--seq-probe") {
      seq_probe = true;
      continue;
    }
    if (flag == "--no-pack") {
      no_pack = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "stream_bench: %s needs a value\n", flag.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (flag == "--model")
      dir = v;
    else if (flag == "--memory")
      memory = v;
    else if (flag == "--tokens")
      tokens = std::atoi(v);
    else if (flag == "--prompt")
      prompt_len = std::atoi(v);
    else if (flag == "--bandwidth")
      bandwidth = std::atof(v);
    else if (flag == "--routing-profile")
      profile_in = v;
    else if (flag == "--save-routing-profile")
      profile_out = v;
    else if (flag == "--chunk-kib")
      chunk_kib = std::atoi(v);
    else if (flag == "--io-threads")
      io_threads = std::atoi(v);
    else if (flag == "--ring-slots")
      ring_slots = std::atoi(v);
    else if (flag == "--min-experts")
      min_experts = std::atoi(v);
    else if (flag == "--pack")
      pack_dir = v;
    else if (flag == "--pin-compressed")
      pin = v;
    else if (flag == "--decode-gbps")
      decode_gbps = std::atof(v);
    else if (flag == "--seq-probe-file")
      probe_file = v;
    else if (flag == "--timeline")
      timeline_out = v;
    else if (flag == "--threads")
      threads = std::atoi(v);
    else {
      std::fprintf(stderr, "stream_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  // As the nightjar program does: --threads, or one thread unless two measure >= 1.6x as fast
  // (on a loaded host the measurement varies from run to run; comparisons should fix it).
  omp_set_num_threads(threads > 0 ? threads : calibrate_compute_threads());
  if (!probe_file.empty()) {  // the device as a pack file sees it: O_DIRECT, cold
    auto f = open_random_access(probe_file, IoMode::kBuffered);
    if (!f.ok()) return 1;
    const uint64_t size = (*f)->size();
    auto g = measure_file_read_gbps(probe_file, /*direct=*/true, /*drop_cache=*/true, size);
    if (!g.ok()) {
      std::fprintf(stderr, "%s\n", g.status().to_string().c_str());
      return 1;
    }
    std::printf("{\"seq_direct_gbps\": %.4f, \"bytes\": %llu}\n", *g,
                static_cast<unsigned long long>(size));
    return 0;
  }
  ModelOptions o;
  o.use_pack = !no_pack;
  o.pack_dir = pack_dir;
  o.plan.pin_compressed = pin == "yes"  ? PinCompressed::kAlways
                          : pin == "no" ? PinCompressed::kNever
                                        : PinCompressed::kAuto;
  if (decode_gbps > 0) o.plan.decode_gbps = decode_gbps;
  if (!timeline_out.empty()) o.streaming.timeline = std::make_shared<Timeline>();
  if (chunk_kib > 0) o.streaming.chunk_bytes = static_cast<size_t>(chunk_kib) << 10;
  if (io_threads > 0) o.streaming.io_threads = io_threads;
  o.plan.prefill_chunk = prompt_len;
  o.plan.ring_slots = ring_slots;
  o.plan.min_expert_buffers = min_experts;
  o.plan.max_context = prompt_len + tokens;
  o.plan.bandwidth_gbps = bandwidth;
  if (memory != "all" && memory != "min") {
    auto b = parse_bytes(memory);
    if (!b.ok()) {
      std::fprintf(stderr, "%s\n", b.status().to_string().c_str());
      return 2;
    }
    o.memory_bytes = *b;
  }
  auto config = load_model_config(dir);
  auto index = TensorIndex::open(dir);
  if (!config.ok() || !index.ok()) return 1;
  if (seq_probe) {  // the device as the model's own files see it: whole files, O_DIRECT, cold
    uint64_t bytes = 0;
    double secs = 0;
    for (const auto& f : index->files()) {
      auto g = measure_file_read_gbps(f.path, /*direct=*/true, /*drop_cache=*/true, f.size);
      if (!g.ok()) {
        std::fprintf(stderr, "%s\n", g.status().to_string().c_str());
        return 1;
      }
      bytes += f.size;
      secs += static_cast<double>(f.size) / (*g * 1e9);
    }
    std::printf("{\"seq_direct_gbps\": %.4f, \"bytes\": %llu}\n",
                static_cast<double>(bytes) / secs / 1e9, static_cast<unsigned long long>(bytes));
    return 0;
  }
  RoutingProfile routing;
  if (!profile_in.empty()) {
    auto text = read_small_file(profile_in);
    auto parsed = text.ok()
                      ? RoutingProfile::parse(*text, profile_in, model_fingerprint(*config, *index))
                      : Result<RoutingProfile>(text.status());
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.status().to_string().c_str());
      return 1;
    }
    routing = std::move(parsed).value();
    o.plan.routing = &routing;
  }
  if (memory == "min") {
    std::string warning;
    auto headers = open_model_headers(dir, o.use_pack, &warning, pack_dir);
    if (!headers.ok()) return 1;
    PlanOptions po = o.plan;
    po.io_threads = o.streaming.io_threads;
    auto plan = plan_residency(*headers->layout, 0, po);
    if (!plan.ok()) return 1;
    o.memory_bytes = plan->min_memory_bytes;
  }
  const double t_open = bench::now_s();
  auto model = Model::open(dir, o);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 1;
  }
  const double open_s = bench::now_s() - t_open;
  const int vocab = (*model)->config().vocab;
  SessionOptions so;
  so.prefill_chunk = prompt_len;
  so.record_routing = !profile_out.empty();
  Session s(**model, so);
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_len; ++i) prompt.push_back((i * 7919 + 13) % vocab);
  if (!s.feed(prompt).ok()) return 1;
  std::vector<double> step_s, step_bytes, step_trunk;
  uint64_t bytes0 = weight_bytes_read((*model)->weights().stats());
  const WeightStats w0 = (*model)->weights().stats();
  uint64_t trunk0 = w0.trunk_bytes_read + w0.head_bytes_read;
  const double wait0 = s.stats().wait_s;
  std::vector<double> token_start_s;  // steady clock, as the timeline's
  const double cpu0 = bench::cpu_s();
  if (o.streaming.timeline) o.streaming.timeline->clear();
  for (int i = 0; i < tokens; ++i) {
    const int32_t next[1] = {argmax(s.last_logits())};
    const double t0 = bench::now_s();
    token_start_s.push_back(t0);
    Status st = s.feed(next);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
    step_s.push_back(bench::now_s() - t0);
    const uint64_t b = weight_bytes_read((*model)->weights().stats());
    step_bytes.push_back(static_cast<double>(b - bytes0));
    bytes0 = b;
    const WeightStats w = (*model)->weights().stats();
    const uint64_t trunk = w.trunk_bytes_read + w.head_bytes_read;
    step_trunk.push_back(static_cast<double>(trunk - trunk0));
    trunk0 = trunk;
  }
  const double t_end = bench::now_s();
  const double cpu_s = bench::cpu_s() - cpu0;  // all threads: compute, I/O and decoding
  const WeightStats w1 = (*model)->weights().stats();
  if (o.streaming.timeline) {
    std::FILE* f = std::fopen(timeline_out.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "stream_bench: cannot write %s\n", timeline_out.c_str());
      return 1;
    }
    for (size_t i = 0; i < token_start_s.size(); ++i)
      std::fprintf(f, "{\"t\": %.6f, \"kind\": \"token\", \"token\": %zu}\n", token_start_s[i], i);
    std::fprintf(f, "{\"t\": %.6f, \"kind\": \"end\"}\n", t_end);
    for (const TimelineEvent& e : o.streaming.timeline->events())
      std::fprintf(f, "{\"t\": %.6f, \"kind\": \"%s\", \"unit\": %d, \"block\": %d, \"arg\": %d}\n",
                   e.t_s, timeline_kind_name(e.kind), e.unit, e.block, e.arg);
    std::fclose(f);
  }
  const ResidencyPlan& plan = (*model)->plan();
  double decode_s = 0, decode_bytes = 0;
  for (size_t i = 0; i < step_s.size(); ++i) {
    decode_s += step_s[i];
    decode_bytes += step_bytes[i];
  }
  const uint64_t lookups =
      (w1.expert_hits - w0.expert_hits) + (w1.expert_misses - w0.expert_misses);
  nlohmann::json j;
  j["memory"] = memory;
  j["budget_bytes"] = plan.budget_bytes;
  j["min_memory_bytes"] = plan.min_memory_bytes;
  j["open_s"] = open_s;
  j["median_s_per_token"] = bench::median(step_s);
  j["mean_s_per_token"] = decode_s / tokens;
  j["bytes_per_token"] = decode_bytes / tokens;
  j["median_bytes_per_token"] = bench::median(step_bytes);
  j["predicted_bytes_per_token"] = plan.predicted_bytes_per_token();
  // The trunk (layers and head) alone, and lossless decoding (issue 15).
  double trunk_sum = 0;
  for (double t : step_trunk) trunk_sum += t;
  j["trunk_bytes_per_token"] = trunk_sum / tokens;
  j["median_trunk_bytes_per_token"] = bench::median(step_trunk);
  j["predicted_trunk_bytes_per_token"] = plan.predicted_trunk_bytes_per_token;
  j["trunk_raw_bytes_per_token"] =
      static_cast<double>(w1.trunk_raw_bytes - w0.trunk_raw_bytes) / tokens;
  j["decoded_bytes_per_token"] = static_cast<double>(w1.decoded_bytes - w0.decoded_bytes) / tokens;
  j["decode_s_per_token"] = (w1.decode_s - w0.decode_s) / tokens;
  j["cpu_s_per_token"] = cpu_s / tokens;
  j["io_wait_s_per_token"] = (s.stats().wait_s - wait0) / tokens;
  j["uses_pack"] = (*model)->uses_pack();
  j["held_bytes"] = plan.held_bytes;
  j["pinned_bytes"] = plan.pinned_bytes;
  j["staging_bytes"] = plan.staging_bytes;
  j["read_busy_s"] = w1.read_s - w0.read_s;
  j["io_wait_s"] = s.stats().wait_s - wait0;
  j["hit_rate"] =
      lookups ? static_cast<double>(w1.expert_hits - w0.expert_hits) / static_cast<double>(lookups)
              : 0.0;
  j["peak_rss_bytes"] = peak_rss_bytes();
  j["planned_bytes"] = plan.total_bytes();
  j["tokens"] = tokens;
  j["compute_threads"] = omp_get_max_threads();
  j["hit_rate_model"] = plan.routing_profile_used ? "routing profile" : "uniform routing";
  std::printf("%s\n", j.dump().c_str());
  if (!profile_out.empty()) {
    std::FILE* f = std::fopen(profile_out.c_str(), "w");
    if (!f) return 1;
    const std::string text = s.routing_profile().to_json((*model)->fingerprint());
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  return 0;
}
