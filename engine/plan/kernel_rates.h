// How fast this machine's kernels multiply, measured: the compute side of the cost model
// (pass_cost.h). A probe times ops::matmul, as the engine calls it (every OpenMP thread),
// on a BF16 and an MXFP4 matrix too large for the caches, at a ladder of token-row counts.
// Few rows are bound by reading the weights from memory, many by arithmetic; the ladder
// holds both, so the model needs no separate memory-bandwidth or FLOP-rate figure.
// The rest of a pass (SiTU, norms, sigmoids, KDA's recurrence, MLA's scores, routing, the
// copies between them) is probed too, each on the engine's own function, per element
// (ElementRates): in a classification window of thousands of rows it took about half the
// compute (tests/bench/run_night_bench.sh), which the products alone had left out.
// The routed experts are probed on their own (ExpertRates, measure_experts): the model's
// expert shape through the engine's expert path, alone and grouped, since a pass of a few
// rows spends most of its time there at costs the large probe matrix does not show.
#pragma once

#include <array>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/ops/mat.h"

namespace nj {

struct ModelConfig;

class KernelRates {
 public:
  // The token-row counts the probe times; between them time is interpolated linearly, and
  // beyond the last it grows in proportion to the rows (the kernels' many-row throughput).
  static constexpr std::array<int, 7> kRows = {1, 2, 4, 8, 16, 32, 64};

  // Times the kernels on this machine: the fastest of `repeats` calls at each rung of the
  // ladder, after one untimed call (about a second in all with 2 threads here).
  static KernelRates measure(int repeats = 3);

  // Seconds for one product of a matrix of `elements` weights in `format` with `rows` token
  // rows (rows may be fractional: an expert's average share of a pass). F32 and F16 are
  // costed as BF16 (the trunk's format; a model with F32 matrices is predicted optimistic).
  double seconds(ops::MatFormat format, double elements, double rows) const;

  // Multiply-adds per second at `rows` rows (2 FLOPs each): what the ladder measured.
  double gflops(ops::MatFormat format, double rows) const;

  // {"bf16_gflops": {"1": GFLOP/s, ...}, "mxfp4_gflops": {...}, "element_ns": {...},
  //  "threads": N}; with measured experts also "expert_us": {"latent", "moe_inter",
  //  "alone": {"1": µs per expert, ...}, "grouped": {...}}
  nlohmann::json to_json() const;

  // Seconds per weight element of one product at each rung, [format][rung]: set by
  // measure(), or by hand (tests).
  std::array<std::array<double, kRows.size()>, 2> per_element{};

  // Seconds per element of the work outside the matrix products, each timed on the engine's
  // own function on one thread, over vectors that stay in the caches (as a pass's rows do
  // between its products): the fastest of a few runs of ~2 ms each.
  struct ElementRates {
    double situ = 0;     // ops::situ_glu, per output element
    double sigmoid = 0;  // ops::sigmoid_inplace, per element (also SiLU and gates)
    double exp = 0;      // ops::exp_inplace, per element (KDA's decay, softmax)
    double norm = 0;     // ops::rmsnorm, per element (also l2norm)
    double axpy = 0;     // ops::axpy, per element (also copies, sums, zeroing, the conv)
    double dot = 0;      // the kernels' dot, per element (MLA's scores, attn_res)
    double matvec = 0;   // the kernels' matvec_t on a small BF16 matrix, per weight element
    double kda = 0;      // the kernels' kda_head, per row and D² of one head
    double top_k = 0;    // route_top_k, per expert scored (E = 256, k = 8)
  } element;
  int threads = 1;  // the engine's threads when measured: its parallel parts split over them

  // The token-row counts of the expert probe (ExpertRates): a pass's experts serve a few rows
  // each one document at a time (64 rows over 256 experts top-8: ~2.3) and up to a few
  // hundred in a window.
  static constexpr std::array<int, 9> kExpertRows = {1, 2, 3, 4, 8, 16, 32, 64, 128};

  // One routed expert of the model's shape through the engine's own expert path
  // (run_expert_group: W1 and W3, SiTU, W2, in parallel regions as moe_forward opens them),
  // per expert, at each rung of kExpertRows, over experts too many for the caches as a pass
  // meets them. Two ways a pass's experts reach the kernels (moe_layer.cpp's grouping):
  //   alone    each expert in its own group (its own parallel region and barrier): a
  //            streaming pass computes its experts as their reads arrive, one by one while
  //            it waits on the disk;
  //   grouped  one group for many experts (one region for all): experts already in memory
  //            (everything resident).
  // The matrix ladder above probes one large matrix per call; experts are small matrices,
  // split over the threads per expert, and their per-call and per-region costs are what the
  // large matrix hides (tests/bench/pass_cost_bench.cpp). Not measured (all zero) unless
  // measure_experts() ran: then the cost model costs experts from the matrix ladder.
  struct ExpertRates {
    int latent = 0, moe_inter = 0;
    bool mxfp4 = false;
    std::array<double, kExpertRows.size()> alone{}, grouped{};  // seconds per expert
    bool measured() const { return alone.back() > 0 && grouped.back() > 0; }
    // Seconds for one expert over `rows` rows (fractional: an expert's average share of a
    // pass), interpolated linearly between rungs, in proportion to the rows past the last.
    double seconds(bool grouped_experts, double rows) const;
  } experts;

  // Probes ExpertRates for `c`'s routed experts (nothing for a model without them).
  void measure_experts(const ModelConfig& c, int repeats = 3);

 private:
  static size_t index(ops::MatFormat format) { return format == ops::MatFormat::kMxfp4 ? 1 : 0; }
};

}  // namespace nj
