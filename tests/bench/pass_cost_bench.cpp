// The cost model's compute side against the engine, pass shape by pass shape: what
// PassCostModel (engine/plan/pass_cost.h) predicts for a pass's compute, and what
// Forward::run took for the same pass (its compute_s: the pass's time less its waits for
// weights), with the kernel probes measured in the same run: the model with the expert probe
// (KernelRates::ExpertRates, what `plan SPEC` uses) and, for comparison, with the matrix
// ladder alone (ladder_*).
//   pass_cost_bench --model DIR [--memory SIZE] [--threads N] [--repeats R]
//                   [--shapes S:N:P[,S:N:P...]]
// A shape is S sequences each feeding N rows after P positions of context (each sequence's
// last row takes logits): 1:64:20 is one document's prefill chunk, 1:1:220 a label-trie step,
// 16:64:20 a window's pass. Each shape runs R + 1 times from the same states (the first
// untimed); the median is printed, one JSON object per shape, beside the model's terms.
// Resident (no --memory) nothing waits for weights, so compute_s is the whole pass.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/model.h"
#include "engine/forward/forward.h"
#include "engine/plan/kernel_rates.h"
#include "engine/plan/pass_cost.h"
#include "engine/util/process.h"
#include "engine/util/units.h"
#include "tests/bench/bench_util.h"

using namespace nj;

namespace {

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "pass_cost_bench: %s\n", m.c_str());
  std::exit(1);
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (name == argv[i]) return argv[i + 1];
  return fallback;
}

struct Shape {
  int sequences = 1, rows = 1, context = 0;
};

std::vector<Shape> parse_shapes(const std::string& list) {
  std::vector<Shape> out;
  size_t i = 0;
  while (i < list.size()) {
    size_t j = list.find(',', i);
    if (j == std::string::npos) j = list.size();
    Shape s;
    if (std::sscanf(list.substr(i, j - i).c_str(), "%d:%d:%d", &s.sequences, &s.rows, &s.context) !=
            3 ||
        s.sequences < 1 || s.rows < 1 || s.context < 0)
      die("a shape is S:N:P (S >= 1 sequences of N >= 1 rows after P >= 0 positions)");
    out.push_back(s);
    i = j + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_passive_omp_wait(argv);
  const std::string dir = arg(argc, argv, "--model", "");
  if (dir.empty()) die("--model DIR is required");
  const int threads = std::atoi(arg(argc, argv, "--threads", "0").c_str());
  if (threads > 0) omp_set_num_threads(threads);
  const int repeats = std::max(1, std::atoi(arg(argc, argv, "--repeats", "5").c_str()));
  const std::vector<Shape> shapes =
      parse_shapes(arg(argc, argv, "--shapes", "1:64:20,1:1:220,16:64:20"));
  int max_rows = 1, max_seqs = 1, max_context = 1;
  for (const Shape& s : shapes) {
    max_rows = std::max(max_rows, s.sequences * s.rows);
    max_seqs = std::max(max_seqs, s.sequences);
    max_context = std::max(max_context, s.context + s.rows);
  }
  ModelOptions o;
  const std::string memory = arg(argc, argv, "--memory", "");
  if (!memory.empty()) {
    auto b = parse_bytes(memory);
    if (!b.ok()) die(b.status().to_string());
    o.memory_bytes = *b;
  }
  o.plan.batch = max_seqs;
  o.plan.prefill_chunk = max_rows;
  o.plan.max_context = max_context;
  auto opened = Model::open(dir, o);
  if (!opened.ok()) die(opened.status().to_string());
  Model& m = **opened;
  const ModelConfig& c = m.config();
  // The matrix ladder alone, and with the expert probe (the model `plan SPEC` uses).
  const KernelRates ladder = KernelRates::measure();
  KernelRates rates = ladder;
  rates.measure_experts(c);
  const PassCostModel cost(m.layout(), m.plan(), rates, 1.0),
      ladder_cost(m.layout(), m.plan(), ladder, 1.0);
  Forward forward(m.config(), m.weights(), ForwardOptions{max_rows, max_seqs, max_context, false});

  for (const Shape& s : shapes) {
    // S sequences, each with P positions of context already in its state.
    std::vector<SequenceState> ready(static_cast<size_t>(s.sequences), SequenceState::empty(c));
    std::vector<std::vector<int32_t>> ids(static_cast<size_t>(s.sequences));
    for (int i = 0; i < s.sequences; ++i) {
      std::vector<int32_t> prompt;
      for (int t = 0; t < s.context; ++t) prompt.push_back((i * 131 + t * 17 + 3) % c.vocab);
      if (!prompt.empty()) {
        Status st = feed_in_chunks(ready[static_cast<size_t>(i)], prompt, 64, c.vocab, nullptr,
                                   nullptr, [&](SeqStep& step) {
                                     SeqStep one[] = {step};
                                     return forward.run(one);
                                   });
        if (!st.ok()) die(st.to_string());
      }
      for (int t = 0; t < s.rows; ++t)
        ids[static_cast<size_t>(i)].push_back((i * 71 + (s.context + t) * 29 + 5) % c.vocab);
    }
    std::vector<double> compute, wall, distinct;
    for (int r = 0; r <= repeats; ++r) {
      std::vector<SequenceState> states = ready;
      std::vector<SeqStep> pass;
      for (int i = 0; i < s.sequences; ++i)
        pass.push_back(SeqStep{&states[static_cast<size_t>(i)], ids[static_cast<size_t>(i)]});
      const double t0 = bench::now_s();
      if (Status st = forward.run(pass); !st.ok()) die(st.to_string());
      const double dt = bench::now_s() - t0;
      if (r == 0) continue;
      const PassStats& ps = forward.last_pass();
      compute.push_back(ps.compute_s);
      wall.push_back(dt);
      double d = 0;
      int moe = 0;
      for (int l = 0; l < c.layers; ++l)
        if (!c.is_dense(l)) d += ps.distinct_experts[static_cast<size_t>(l)], ++moe;
      distinct.push_back(moe ? d / moe : 0.0);
    }
    const double rows = static_cast<double>(s.sequences) * s.rows;
    // Σ (position + 1) over the pass's rows (job_plan.cpp's count).
    const double attended = s.sequences * s.rows * (2.0 * s.context + s.rows + 1.0) / 2.0;
    const PassShape shape{static_cast<int>(rows), s.sequences, attended};
    const PassPrediction p = cost.predict(shape), old = ladder_cost.predict(shape);
    const double measured = bench::median(compute);
    nlohmann::json j = {
        {"sequences", s.sequences},
        {"rows_each", s.rows},
        {"context", s.context},
        {"rows", rows},
        {"threads", omp_get_max_threads()},
        {"resident", m.plan().everything_resident},
        {"compute_s", measured},
        {"wall_s", bench::median(wall)},
        {"predicted_compute_s", p.compute_seconds},
        {"predicted_element_s", p.element_seconds},
        {"predicted_expert_s", p.expert_seconds},
        {"predicted_product_s", p.compute_seconds - p.element_seconds},
        {"ladder_predicted_compute_s", old.compute_seconds},
        {"ladder_predicted_expert_s", old.expert_seconds},
        {"measured_over_predicted", p.compute_seconds > 0 ? measured / p.compute_seconds : 0.0},
        {"distinct_experts", bench::median(distinct)},
        {"distinct_experts_predicted", cost.distinct_experts(static_cast<int>(rows))}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  std::printf("%s\n", nlohmann::json{{"kernel_rates", rates.to_json()}}.dump().c_str());
  return 0;
}
