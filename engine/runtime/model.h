// An opened K3 model directory: config, tensor index, validated layout and a weight source.
// Immutable once open; sessions share it (one session computes at a time, see Session).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/model/config.h"
#include "engine/model/fingerprint.h"
#include "engine/model/layout.h"
#include "engine/model/tensor_index.h"
#include "engine/plan/planner.h"
#include "engine/runtime/model_plan.h"
#include "engine/weights/streaming_source.h"
#include "engine/weights/weight_source.h"

namespace nj {

struct ModelOptions {
  int index_threads = 0;       // threads parsing shard headers; 0 = all cores
  uint64_t memory_bytes = 0;   // budget; 0 = read everything into RAM (no streaming)
  PlanOptions plan;            // what the budget must also hold (scratch, state)
  StreamingOptions streaming;  // I/O threads, file opener, cache policy
  // A packed trunk (pack.h) is used when valid; it is looked for in pack_dir, or in the
  // model directory when pack_dir is empty. use_pack = false reads the shards only.
  bool use_pack = true;
  std::string pack_dir;
};

// A model directory's config, index and layout, without reading any weights (for `plan`
// and `pack`). With `use_pack`, a valid packed trunk in `dir` is adopted as Model::open does
// (a stale one is reported in `*pack_warning`).
struct ModelHeaders {
  ModelConfig config;
  std::unique_ptr<TensorIndex> index;
  std::unique_ptr<ModelLayout> layout;
  bool uses_pack = false;  // the layout reads trunk units from a packed trunk
};
// The pack is looked for in `pack_dir`, or in `dir` when it is empty. `index_threads` parse
// the shard headers (0 = all cores).
Result<ModelHeaders> open_model_headers(const std::string& dir, bool use_pack,
                                        std::string* pack_warning,
                                        const std::string& pack_dir = "", int index_threads = 0);

class Model {
 public:
  // Opens `dir`. Without a budget every weight is read into RAM; with one the weights stream
  // from disk as the residency plan says. Errors name the file and tensor or key, or state
  // the minimum budget.
  // Reads the headers and plans `options.plan` as it is (one-shot commands and tests; a job's
  // model is planned by plan_model and opened by the overload below).
  static Result<std::unique_ptr<Model>> open(const std::string& dir,
                                             const ModelOptions& options = {});
  // Opens from headers already read and a plan already made (plan_model): reads no header
  // again and plans nothing. `memory_bytes` as the plan's budget (0: everything resident).
  static Result<std::unique_ptr<Model>> open(const std::string& dir, ModelHeaders headers,
                                             const ModelPlan& plan, uint64_t memory_bytes,
                                             const StreamingOptions& streaming = {});

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const TensorIndex& index() const { return *index_; }
  const ModelLayout& layout() const { return *layout_; }
  WeightSource& weights() { return *source_; }
  // The residency plan in force (everything resident without a budget), and what it was
  // planned for (batch, rows per pass, context).
  const ResidencyPlan& plan() const { return plan_.residency; }
  const PlanOptions& plan_options() const { return plan_.options; }
  // The decisions it was opened with (batch, drafts, the pass cost speculation weighs).
  const ModelPlan& model_plan() const { return plan_; }
  // Whether trunk units are read from a packed trunk file.
  bool uses_pack() const { return uses_pack_; }

  // Identifies the weights: a hash of the parsed config and of every tensor's name, dtype
  // and shape. A state checkpoint records it so it is never restored into another model.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  Model() = default;
  std::string dir_;
  ModelConfig config_;
  std::unique_ptr<TensorIndex> index_;
  std::unique_ptr<ModelLayout> layout_;
  ModelPlan plan_;
  bool uses_pack_ = false;
  std::unique_ptr<WeightSource> source_;
  uint64_t fingerprint_ = 0;
};

}  // namespace nj
