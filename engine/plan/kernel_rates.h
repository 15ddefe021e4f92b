// How fast this machine's kernels multiply, measured: the compute side of the cost model
// (pass_cost.h). A probe times ops::matmul, as the engine calls it (every OpenMP thread),
// on a BF16 and an MXFP4 matrix too large for the caches, at a ladder of token-row counts.
// Few rows are bound by reading the weights from memory, many by arithmetic; the ladder
// holds both, so the model needs no separate memory-bandwidth or FLOP-rate figure.
// The rest of a pass (SiTU, norms, sigmoids, KDA's recurrence, MLA's scores, routing, the
// copies between them) is probed too, each on the engine's own function, per element
// (ElementRates): in a classification window of thousands of rows it took about half the
// compute (tests/bench/run_night_bench.sh), which the products alone had left out.
#pragma once

#include <array>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/ops/mat.h"

namespace nj {

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
  //  "threads": N}
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

 private:
  static size_t index(ops::MatFormat format) { return format == ops::MatFormat::kMxfp4 ? 1 : 0; }
};

}  // namespace nj
