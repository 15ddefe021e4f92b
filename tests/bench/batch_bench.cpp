// Batched decode: B sequences decoding together through one Forward, timed per pass.
//   batch_bench probes [--threads N] [--disk-file PATH]
//       the same-run reference rates: FMA throughput (GFLOP/s, the active SIMD level's
//       widest FMA on N threads), memory read bandwidth (GB/s), and the disk's cold
//       O_DIRECT read rate on PATH (a model shard), as one JSON object
//   batch_bench run --model DIR --batch B[,B...] [--memory SIZE] [--steps N] [--prompt-len P]
//                   [--probe-steps 1]
//       one configuration per batch size (the model opened once, planned for the largest), each
//       as one JSON object on its own line: the plan's prediction for the batch, and the
//       measured median time per decode step (wall, and CPU time of the process), aggregate
//       tokens/s, bytes read per token, distinct experts per layer per pass, plus the step's
//       FLOPs and the bytes its kernels touch (for a roofline against the probes). With
//       --probe-steps 1, one FMA probe pass and one memory probe pass run before every timed
//       step, and `step_probes` gives their medians, as wall rates and as rates per CPU-second
//       of the process: on a host whose other processes take CPU time from the run, the ratio
//       of a step's CPU time to the CPU time the probes would need for its work says what the
//       threads did while they ran, where wall-clock ratios follow the scheduling.
// tests/bench/run_batch_bench.sh runs the configurations of issue 13 and prints the table.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/model.h"
#include "engine/forward/forward.h"
#include "engine/io/probe.h"
#include "engine/ops/cpu.h"
#include "engine/session/sampler.h"
#include "engine/util/process.h"
#include "engine/io/sysinfo.h"
#include "engine/util/units.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/fma_probe.h"

using namespace nj;

namespace {

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "batch_bench: %s\n", m.c_str());
  std::exit(1);
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 2; i + 1 < argc; ++i)
    if (name == argv[i]) return argv[i + 1];
  return fallback;
}

int probes(int threads, const std::string& disk_file) {
  const SimdLevel level = detect_simd_level();
  nlohmann::json j;
  j["simd"] = simd_level_name(level);
  j["threads"] = threads;
  if (level >= SimdLevel::kAvx2) {
    bench::FmaProbe fma(level, threads);
    std::vector<double> g;
    for (int i = 0; i < 7; ++i) g.push_back(fma.measure_once());
    j["fma_gflops"] = bench::median(g);
  }
  j["mem_gbps"] = measure_memory_read_gbps(1ull << 30, threads, 5);
  if (!disk_file.empty()) {
    auto d = measure_file_read_gbps(disk_file, /*direct=*/true, /*drop_cache=*/true, 1ull << 30);
    if (!d.ok()) die(d.status().to_string());
    j["disk_gbps"] = *d;
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

// FLOPs per row of the trunk (every matrix, once per row), per routed expert and per
// logits row; attention over the context is left out (short contexts here).
struct Flops {
  double trunk_per_row = 0, expert_per_row = 0, head_per_logits_row = 0;
};

Flops count_flops(const ModelLayout& layout) {
  const ModelConfig& c = layout.config();
  Flops f;
  for (int l = 0; l < c.layers; ++l) {
    LayerLayout copy = layout.layer(l);
    for (TensorSlot* s : trunk_slots(copy))
      if (s->info && s->rows > 1 && s->cols > 1) f.trunk_per_row += 2.0 * s->rows * s->cols;
  }
  f.expert_per_row = 2.0 * 3.0 * c.moe_inter * c.latent;  // w1, w3: [mi][lat]; w2: [lat][mi]
  f.head_per_logits_row = 2.0 * c.vocab * c.hidden;
  return f;
}

// Prefills `batch` sequences in one pass, then times `steps` - 1 decode steps (greedy) and
// prints one JSON object.
void measure(Model& m, const ModelOptions& o, int batch, int steps, int prompt_len,
             bool probe_steps, double open_s) {
  const ModelConfig& c = m.config();
  const ResidencyPlan& plan = m.plan();
  const ActivationShape shape = planned_activation_shape(m.plan_options());
  Forward forward(m.config(), m.weights(), ForwardOptions{std::max(shape.rows, batch * prompt_len), batch,
                                    o.plan.max_context, false});

  // Prompts: one pass prefills them all; then decode steps, greedy.
  std::vector<SequenceState> states(static_cast<size_t>(batch), SequenceState::empty(c));
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(batch));
  std::vector<SeqStep> pass(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i) {
    for (int t = 0; t < prompt_len; ++t)
      ids[static_cast<size_t>(i)].push_back((i * 131 + t * 17 + 3) % c.vocab);
    pass[static_cast<size_t>(i)] =
        SeqStep{&states[static_cast<size_t>(i)], ids[static_cast<size_t>(i)]};
  }
  if (Status s = forward.run(pass); !s.ok()) die(s.to_string());
  std::vector<double> step_s, step_cpu_s, distinct;
  std::vector<double> fma_wall, fma_cpu, mem_wall, mem_cpu;  // probe rates per step
  const SimdLevel level = active_simd_level();
  const int threads = omp_get_max_threads();
  std::unique_ptr<bench::FmaProbe> fma;
  std::unique_ptr<MemoryProbe> mem;
  if (probe_steps) {
    if (level < SimdLevel::kAvx2) die("--probe-steps needs AVX2 or AVX-512 for the FMA probe");
    fma = std::make_unique<bench::FmaProbe>(level, threads);
    mem = std::make_unique<MemoryProbe>(256ull << 20, threads);
  }
  // One pass of a probe: its wall rate, and its rate per CPU-second of the process.
  auto probe_pass = [](auto&& measure, std::vector<double>& wall, std::vector<double>& cpu) {
    const double c0 = bench::cpu_s(), w0 = bench::now_s();
    const double rate = measure();
    const double dc = bench::cpu_s() - c0, dw = bench::now_s() - w0;
    wall.push_back(rate);
    cpu.push_back(rate * dw / dc);
  };
  double bytes = 0, tokens = 0;
  for (int k = 0; k < steps; ++k) {
    for (int i = 0; i < batch; ++i) {
      ids[static_cast<size_t>(i)] = {argmax(states[static_cast<size_t>(i)].last_logits)};
      pass[static_cast<size_t>(i)].ids = ids[static_cast<size_t>(i)];
    }
    if (probe_steps && k > 0) {
      probe_pass([&] { return fma->measure_once(); }, fma_wall, fma_cpu);
      probe_pass([&] { return mem->measure_once(); }, mem_wall, mem_cpu);
    }
    const double c0 = bench::cpu_s(), t0 = bench::now_s();
    if (Status s = forward.run(pass); !s.ok()) die(s.to_string());
    const double dt = bench::now_s() - t0, dc = bench::cpu_s() - c0;
    const PassStats& p = forward.last_pass();
    if (k == 0) continue;  // the first step after the prefill warms the ring and the cache
    step_s.push_back(dt);
    step_cpu_s.push_back(dc);
    bytes += static_cast<double>(p.bytes_read());
    tokens += batch;
    double d = 0;
    int moe_layers = 0;
    for (int l = 0; l < c.layers; ++l)
      if (!c.is_dense(l)) d += p.distinct_experts[static_cast<size_t>(l)], ++moe_layers;
    distinct.push_back(moe_layers ? d / moe_layers : 0);
  }
  if (step_s.empty()) die("--steps must be at least 2");
  const Flops f = count_flops(m.layout());
  const double dist = bench::median(distinct);
  int moe_layers = 0;
  uint64_t trunk_bytes = m.layout().head_bytes();
  for (int l = 0; l < c.layers; ++l) {
    trunk_bytes += m.layout().trunk_bytes(l);
    moe_layers += !c.is_dense(l);
  }
  const double step = bench::median(step_s);
  nlohmann::json j;
  j["batch"] = batch;
  j["plan_batch"] = o.plan.batch;  // the batch the model was opened and planned for
  j["memory_bytes"] = o.memory_bytes;
  j["threads"] = threads;
  j["simd"] = simd_level_name(level);
  j["open_s"] = open_s;
  j["plan"] = {{"min_memory_bytes", plan.min_memory_bytes},
               {"max_batch", plan.max_batch},
               {"predicted_bytes_per_step", plan.predicted_bytes_per_step()},
               {"predicted_bytes_per_token", plan.predicted_bytes_per_token()},
               {"predicted_seconds_per_step", plan.predicted_seconds_per_step},
               {"predicted_tokens_per_second", plan.predicted_tokens_per_second},
               {"predicted_distinct_experts", plan.predicted_distinct_experts},
               {"bandwidth_gbps", plan.bandwidth_gbps}};
  j["step_s"] = step;
  j["step_cpu_s"] = bench::median(step_cpu_s);
  j["steps_timed"] = step_s.size();
  if (probe_steps)
    j["step_probes"] = {{"fma_gflops", bench::median(fma_wall)},
                        {"fma_gflops_per_cpu_s", bench::median(fma_cpu)},
                        {"mem_gbps", bench::median(mem_wall)},
                        {"mem_gbps_per_cpu_s", bench::median(mem_cpu)}};
  j["tokens_per_s"] = batch / step;
  j["bytes_per_token"] = tokens > 0 ? bytes / tokens : 0.0;
  j["bytes_per_step"] = bytes / static_cast<double>(step_s.size());
  j["distinct_experts_per_layer"] = dist;
  j["flops_per_step"] =
      batch * (f.trunk_per_row + static_cast<double>(c.top_k) * f.expert_per_row * moe_layers +
               f.head_per_logits_row);
  j["bytes_touched_per_step"] = static_cast<double>(trunk_bytes) +
                                dist * moe_layers * static_cast<double>(m.layout().expert_bytes());
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  const std::string dir = arg(argc, argv, "--model", "");
  if (dir.empty()) die("--model DIR is required");
  // --batch B or a list B,B,...: the model is opened once, planned for the largest.
  std::vector<int> batches;
  const std::string list = arg(argc, argv, "--batch", "1");
  for (size_t i = 0; i < list.size();) {
    batches.push_back(std::atoi(list.c_str() + i));
    i = list.find(',', i);
    if (i == std::string::npos) break;
    ++i;
  }
  if (*std::min_element(batches.begin(), batches.end()) < 1) die("--batch takes counts >= 1");
  const int steps = std::atoi(arg(argc, argv, "--steps", "8").c_str());
  const int prompt_len = std::atoi(arg(argc, argv, "--prompt-len", "4").c_str());
  const std::string memory = arg(argc, argv, "--memory", "");
  const bool probe_steps = arg(argc, argv, "--probe-steps", "0") == "1";
  ModelOptions o;
  if (!memory.empty()) {
    auto b = parse_bytes(memory);
    if (!b.ok()) die(b.status().to_string());
    o.memory_bytes = *b;
  }
  o.plan.batch = *std::max_element(batches.begin(), batches.end());
  o.plan.prefill_chunk = std::max(1, prompt_len);
  o.plan.max_context = prompt_len + steps + 1;
  const double t_open = bench::now_s();
  auto model = Model::open(dir, o);
  if (!model.ok()) die(model.status().to_string());
  const double open_s = bench::now_s() - t_open;
  for (int batch : batches) measure(**model, o, batch, steps, prompt_len, probe_steps, open_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_passive_omp_wait(argv);
  if (argc < 2) die("usage: batch_bench probes|run [options] (see the top of batch_bench.cpp)");
  const int threads = std::atoi(arg(argc, argv, "--threads", "0").c_str());
  if (threads > 0) omp_set_num_threads(threads);
  const std::string mode = argv[1];
  if (mode == "probes") return probes(omp_get_max_threads(), arg(argc, argv, "--disk-file", ""));
  if (mode == "run") return run(argc, argv);
  die("unknown mode " + mode);
}
