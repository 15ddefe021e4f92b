// What one forward pass costs, by what it carries: the engine's cost model, used to predict
// a whole job (`nightjar plan SPEC`, the ETA in `status`).
//
// Bytes read from disk (as the residency plan predicts them, planner.h):
//   every streamed trunk unit once, whatever the rows; an embedding row per row; and per
//   MoE layer the experts the pass's rows route to, E·(1 − (1 − k/E)^rows) under uniform
//   routing, less the expert cache's hits.
// Compute (kernel_rates.h, measured on this machine):
//   every trunk matrix once over all rows; per MoE layer each distinct expert over its
//   share of the rows (rows·k / distinct, on average); the LM head over the rows whose
//   logits are wanted; and the attention itself: KDA's recurrence (≈ 6·H·D² per row and
//   layer) and MLA's scores and context over the positions each row attends (≈ 4·heads·
//   (kv_lora_rank + rope) per position and layer), at the BF16 kernels' many-row rate.
// Opening the model reads what the plan keeps in memory once: pinned and held trunk units,
// and with everything resident every expert (load_bytes).
// Time: the trunk's reads overlap compute (the ring reads the next unit while one
// computes), but a layer's missing experts are read only once its router has chosen them,
// and the layer waits for them: a pass takes its expert reads plus the larger of its trunk
// reads and its compute. (Measured on bench-8g, tests/bench/run_night_bench.sh: a run's
// time blocked on weights plus its time in kernels made up its wall time.) Neither the router nor norms and element-wise work
// are counted; they are small beside the products.
#pragma once

#include <cstdint>

#include "engine/model/kernel_rates.h"
#include "engine/model/layout.h"
#include "engine/model/planner.h"

namespace nj {

// What a pass carries.
struct PassShape {
  int rows = 1;         // token rows over all its sequences
  int logits_rows = 1;  // rows whose logits it computes
  double attended = 0;  // Σ over its rows of the positions each attends over (position + 1)
};

struct PassPrediction {
  double disk_bytes = 0;
  double flops = 0;
  double io_seconds = 0;        // disk_bytes at the bandwidth
  double expert_io_seconds = 0; // the experts' share of it
  double compute_seconds = 0;   // the products at the measured kernel rates
  double seconds = 0;           // expert reads + max(trunk reads, compute)
};

class PassCostModel {
 public:
  // For passes under `plan` (made for `layout`), reading at `bandwidth_gbps`.
  PassCostModel(const ModelLayout& layout, const ResidencyPlan& plan, const KernelRates& rates,
                double bandwidth_gbps);

  PassPrediction predict(const PassShape& pass) const;

  double distinct_experts(int rows) const;  // per MoE layer
  double load_bytes() const { return load_bytes_; }
  double load_seconds() const { return bandwidth_ > 0 ? load_bytes_ / bandwidth_ : 0.0; }

 private:
  const KernelRates& rates_;
  double bandwidth_ = 0;  // bytes per second
  int num_experts_ = 0, top_k_ = 0, moe_layers_ = 0;
  // Disk.
  double trunk_read_ = 0;     // streamed trunk units, per pass
  double embedding_row_ = 0;  // per row
  double expert_miss_ = 0;    // per distinct expert, summed over MoE layers (cache hits off)
  double load_bytes_ = 0;     // read once when the model opens
  // Compute.
  double trunk_elements_ = 0;   // the trunk's matrices (excluding the LM head)
  double head_elements_ = 0;    // the LM head, per logits row
  double expert_elements_ = 0;  // one routed expert's three matrices
  ops::MatFormat expert_format_ = ops::MatFormat::kBF16;
  double kda_flops_per_row_ = 0;       // all KDA layers
  double mla_flops_per_position_ = 0;  // all MLA layers
};

}  // namespace nj
