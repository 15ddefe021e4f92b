// What one forward pass costs, by what it carries: the engine's one cost model. Its byte
// half (PassCost) decides speculation (engine/speculative/); the whole of it (PassCostModel)
// predicts a whole job (`nightjar plan SPEC`, the ETA in `status`).
//
// PassCost, bytes only:
//   What a pass over the weights costs as a function of the rows it carries, relative to
//   another pass, as the residency plan predicts it (planner.h): every streamed trunk unit
//   once, whatever the rows, and per MoE layer the experts the rows route to, E·(1 − (1 −
//   k/E)^rows) under uniform routing, less the cache's hits. A drafted token adds a row: it
//   shares the trunk read and adds only its own experts. With every weight resident, the
//   bytes a pass touches in memory stand in for bytes read (a pass of a few rows streams its
//   weights from RAM); the model counts bytes only, not the compute of the extra rows.
//
//   The same model decides whether speculation is worth turning on at a budget
//   (speculation_pays): its gain depends on acceptance, its cost on this ratio.
//
// PassCostModel, bytes and seconds:
//
// Bytes read from disk (as the residency plan predicts them, planner.h):
//   every streamed trunk unit once, whatever the rows; an embedding row per row; and per
//   MoE layer the experts the pass's rows route to, E·(1 − (1 − k/E)^rows) under uniform
//   routing (with a routing profile, Σ_e 1 − (1 − p_e)^rows by the frequency p_e of rows that
//   chose expert e), less the expert cache's hits.
// Compute (kernel_rates.h, measured on this machine):
//   matrix products: every trunk matrix once over all rows; the LM head over the rows whose
//   logits are wanted; at the probed kernels' rate for that many rows.
//   routed experts: per MoE layer each distinct expert over its share of the rows (rows·k /
//   distinct, on average), at the expert probe's time per expert for that many rows
//   (KernelRates::ExpertRates: the engine's expert path on the model's expert shape, SiTU
//   included), "grouped" when the plan reads no expert during a pass (a layer's experts
//   share one parallel region), else "alone" (a streaming pass computes each expert as its
//   read arrives). Without that probe: the matrix ladder for 3·latent·moe_inter elements,
//   and the experts' SiTU as element work.
//   the rest of the pass, per row, counted from the layers' code (forward.cpp, attention_kda,
//   attention_mla, attn_res, moe_layer, expert_group) in elements of the probed element
//   functions (KernelRates::ElementRates):
//     every layer   2 RMSNorms of hidden; attn_res over its n sources (2n dots and n + 1
//                   axpys of hidden); the residual stream's copies and sums (4 hidden)
//     KDA layer     conv 3·P·K + copies 3·P, SiLU 3·P, l2norm 2·P, β H, decay P sigmoids
//                   and P exps, o_norm P, gate P + P; the recurrence H·D² (kda,
//                   split over the threads)
//     MLA layer     norms q_lora + kv_lora, gate 2·heads·v_dim, per row and head the
//                   absorbed kv_b products (matvec, heads·(nope + v_dim)·kv_lora, split
//                   over the threads); per attended position and head a score (dot of
//                   kv_lora + rope), its exp and an axpy of kv_lora (split over the threads)
//     MoE layer     router σ and top-k over E; gather, scatter and combine 3·k·latent + latent;
//                   latent norm; SiTU k·moe_inter (in the experts' parallel region, split
//                   over the threads; part of the expert probe when it ran); the shared
//                   expert's SiTU shared_inter and its sum hidden
//     dense layer   SiTU dense_inter
//     logits row    the head's norm of hidden, the finiteness scan and a softmax of vocab
//   softmaxes (attn_res's sources, MLA's positions, the vocabulary) count at the exp rate.
//   SiTU, norms and copies outside the parallel regions run on one thread, as the engine
//   runs them.
// Opening the model reads what the plan keeps in memory once: pinned and held trunk units,
// and with everything resident every expert (load_bytes).
// Time: the trunk's reads overlap compute (the ring reads the next unit while one
// computes), but a layer's missing experts are read only once its router has chosen them,
// and the layer waits for them: a pass takes its expert reads plus the larger of its trunk
// reads and its compute. (Measured on bench-8g, tests/bench/run_night_bench.sh: a run's
// time blocked on weights plus its time in kernels made up its wall time.)
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/layout.h"
#include "engine/plan/kernel_rates.h"
#include "engine/plan/planner.h"

namespace nj {

struct PassCost {
  double fixed_bytes = 0;   // per pass: the streamed trunk (or, resident, the whole trunk)
  double expert_bytes = 0;  // per distinct expert a pass needs, summed over the MoE layers
  int num_experts = 0, top_k = 0;

  // Bytes of a pass of `rows` rows. REQUIRES: rows >= 1.
  double bytes(int rows) const;
  // bytes(rows) / bytes(base_rows); 1 when both are 0 (a model with nothing to read).
  double relative(int rows, int base_rows = 1) const;
};

// Where a pass's bytes come from: read from disk as `plan` predicts them, or, with every
// weight resident, touched in memory (a pass of a few rows streams its weights from RAM).
enum class PassBytesSource {
  kPlan,    // memory when the plan holds everything, else disk (what speculation weighs)
  kDisk,    // the plan's disk reads (0 trunk bytes when everything is resident)
  kMemory,  // every trunk byte and every needed expert, as bytes touched in memory
};

// The byte cost of passes under `plan` (made for `layout`).
PassCost pass_cost(const ModelLayout& layout, const ResidencyPlan& plan,
                   PassBytesSource source = PassBytesSource::kPlan);

// The acceptance rate at which one drafted token per pass breaks even: the relative cost
// of a second row, less one. Drafts accepted more often than this make a pass emit more
// tokens per byte read.
double break_even_acceptance(const PassCost& cost);

// The planner's default for `speculative:` in generate jobs: on when the plan streams
// weights (the run is disk-bound, so an extra row costs bytes, which this model predicts,
// rather than compute, which it does not) and one drafted token breaks even below 50 %
// acceptance, the acceptance prompt-lookup drafts reach on extraction-like text.
bool speculation_pays(const PassCost& cost, const ResidencyPlan& plan);

// What a pass carries.
struct PassShape {
  int rows = 1;         // token rows over all its sequences
  int logits_rows = 1;  // rows whose logits it computes
  double attended = 0;  // Σ over its rows of the positions each attends over (position + 1)
};

struct PassPrediction {
  double disk_bytes = 0;
  double flops = 0;
  double io_seconds = 0;         // disk_bytes at the bandwidth
  double expert_io_seconds = 0;  // the experts' share of it
  double compute_seconds = 0;    // products plus element work, at the measured rates
  double element_seconds = 0;    // the element work's share of compute_seconds
  double expert_seconds = 0;     // the routed experts' share of compute_seconds
  double seconds = 0;            // expert reads + max(trunk reads, compute); with a ring of one
                                 // slot (no read ahead): expert reads + trunk reads + compute
};

class PassCostModel {
 public:
  // For passes under `plan` (made for `layout`), reading at `bandwidth_gbps`. Keeps a
  // reference to `rates`, which must outlive it. With `routing` (which must outlive it too),
  // a pass's distinct experts follow its recorded choices (RoutingProfile::expected_distinct)
  // instead of uniform routing.
  PassCostModel(const ModelLayout& layout, const ResidencyPlan& plan, const KernelRates& rates,
                double bandwidth_gbps, const RoutingProfile* routing = nullptr);

  PassPrediction predict(const PassShape& pass) const;

  double distinct_experts(int rows) const;  // per MoE layer (their mean)
  double load_bytes() const { return load_bytes_; }
  double load_seconds() const { return bandwidth_ > 0 ? load_bytes_ / bandwidth_ : 0.0; }

 private:
  const KernelRates& rates_;
  const RoutingProfile* routing_ = nullptr;
  int num_experts_ = 0, top_k_ = 0, moe_layers_ = 0;
  std::vector<int> moe_layer_ids_;
  double bandwidth_ = 0;  // bytes per second
  bool trunk_overlaps_ = true;  // a trunk unit is read while the previous one computes
  // Disk.
  double trunk_read_ = 0;     // streamed trunk units, per pass
  double embedding_row_ = 0;  // per row
  double expert_miss_ = 0;    // per distinct expert, summed over MoE layers (cache hits off)
  double load_bytes_ = 0;     // read once when the model opens
  // Compute.
  double trunk_elements_ = 0;   // the trunk's matrices (excluding the LM head and MLA's kv_b)
  double kv_b_elements_ = 0;    // MLA's kv_b (element work: per row and head)
  double head_elements_ = 0;    // the LM head, per logits row
  double expert_elements_ = 0;  // one routed expert's three matrices
  ops::MatFormat expert_format_ = ops::MatFormat::kBF16;
  double kda_flops_per_row_ = 0;       // all KDA layers
  double mla_flops_per_position_ = 0;  // all MLA layers
  // Element work (see the top): seconds per row on one thread, per row over the threads,
  // per attended position over the threads, and per logits row.
  double element_row_serial_ = 0, element_row_parallel_ = 0, element_position_ = 0,
         element_logits_row_ = 0;
  // Experts from the expert probe (KernelRates::ExpertRates) rather than the matrix ladder,
  // and as one group per layer (no expert read during a pass) or each alone.
  bool use_expert_probe_ = false, experts_grouped_ = false;
};

}  // namespace nj
