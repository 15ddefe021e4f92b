// Decode speed of a RAM-resident model, as tokens/s and as weight bytes streamed per second
// against a memory-bandwidth probe taken in the same run.
//   decode_bench --model DIR [--tokens N] [--threads N] [--prompt N]
// Each decoded token reads every trunk layer, top_k experts per MoE layer, the head and one
// embedding row; that sum over the median seconds per token is the achieved weight GB/s.
// tests/bench/run_engine_bench.sh generates a ~1 GB K3-shaped model and runs this and
// kernel_bench.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/ops/cpu.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "engine/util/process.h"
#include "engine/io/sysinfo.h"
#include "engine/util/units.h"
#include "tests/bench/bench_util.h"

using namespace nj;

int main(int argc, char** argv) {
  reexec_with_passive_omp_wait(argv);
  std::string dir;
  int tokens = 32, threads = 2, prompt_len = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--prompt")) prompt_len = std::atoi(argv[i + 1]);
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: decode_bench --model DIR [--tokens N] [--threads N] [--prompt N]\n");
    return 2;
  }
  omp_set_num_threads(threads);
  const double t_open = bench::now_s();
  auto model = Model::open(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 1;
  }
  const double open_s = bench::now_s() - t_open;
  const ModelConfig& c = (*model)->config();
  const ModelLayout& lay = (*model)->layout();
  uint64_t per_token = lay.head_bytes() + lay.embedding_row_bytes();
  for (int l = 0; l < c.layers; ++l) {
    per_token += lay.trunk_bytes(l);
    if (!c.is_dense(l)) per_token += static_cast<uint64_t>(c.top_k) * lay.expert_bytes();
  }
  std::printf("decode_bench: %s (%s of weights, loaded in %.1f s), simd %s, %d threads\n", dir.c_str(),
              format_bytes((*model)->index().total_tensor_bytes()).c_str(), open_s,
              simd_level_name(active_simd_level()), threads);
  std::printf("  weight bytes read per decoded token: %s\n", format_bytes(per_token).c_str());

  Session session(**model);
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_len; ++i) prompt.push_back((i * 7919 + 13) % c.vocab);
  const double t_prefill = bench::now_s();
  if (!session.feed(prompt).ok()) return 1;
  const double prefill_s = bench::now_s() - t_prefill;
  MemoryProbe probe(512ull << 20, threads);
  std::vector<double> step_s, probe_gbps;
  for (int i = 0; i < tokens; ++i) {
    const int32_t next[1] = {argmax(session.last_logits())};
    if (i % 4 == 0) probe_gbps.push_back(probe.measure_once());  // interleaved with decoding
    const double t0 = bench::now_s();
    if (!session.feed(next).ok()) return 1;
    step_s.push_back(bench::now_s() - t0);
  }
  const double s = bench::median(step_s), p = bench::median(probe_gbps);
  const double gbps = static_cast<double>(per_token) / s / 1e9;
  std::printf("  prefill: %d tokens in %.3f s (%.1f tokens/s)\n", prompt_len, prefill_s, prompt_len / prefill_s);
  std::printf("  decode:  median %.2f ms/token = %.2f tokens/s over %d tokens\n", s * 1e3, 1.0 / s, tokens);
  std::printf("  weights streamed: %.2f GB/s vs memory probe %.2f GB/s (median, same run) = %.0f%%\n", gbps, p,
              100.0 * gbps / p);
  return 0;
}
