// Memory is a latency dial, not a quality dial: under any budget from the minimum up, the
// streamed model computes exactly the bits of the all-resident one. And a failed read fails
// the run with the file and offset, never zeros.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/model/layout.h"
#include "engine/plan/planner.h"
#include "engine/runtime/model.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "tests/unit/model/test_models.h"
#include "tests/unit/model/test_options.h"
#include "tests/unit/state/state_test_util.h"

namespace nj {
namespace {

struct Run {
  std::vector<float> logits;    // every position of prompt + continuation
  std::vector<int32_t> greedy;  // decoded one token at a time
  WeightStats stats;
};

ModelOptions options_for(uint64_t budget, const std::vector<int32_t>& prompt, int steps) {
  ModelOptions o;
  o.memory_bytes = budget;
  o.plan.prefill_chunk = 16;
  o.plan.max_context = static_cast<int>(prompt.size()) + steps;
  o.plan.all_logits = true;
  o.streaming.io_threads = 4;
  o.streaming.chunk_bytes = 64u << 10;  // many chunks per unit, to exercise the pool
  return o;
}

Run run(const std::string& dir, const ModelOptions& o, const std::vector<int32_t>& prompt,
        int steps) {
  auto model = Model::open(dir, o);
  INFO(model.status().to_string());
  REQUIRE(model.ok());
  Run r;
  {
    Session s(**model, SessionOptions{16});
    REQUIRE(s.feed(prompt, &r.logits).ok());
    for (int i = 0; i < steps; ++i) {
      const int32_t next[1] = {argmax(s.last_logits())};
      r.greedy.push_back(next[0]);
      std::vector<float> row;
      REQUIRE(s.feed(next, &row).ok());
      r.logits.insert(r.logits.end(), row.begin(), row.end());
    }
  }
  r.stats = (*model)->weights().stats();
  return r;
}

uint64_t minimum(const std::string& dir, const ModelOptions& o) {
  auto config = load_model_config(dir);
  auto index = TensorIndex::open(dir);
  REQUIRE(index.ok());
  auto layout = ModelLayout::build(*config, *index);
  REQUIRE(layout.ok());
  auto plan = plan_residency(*layout, 0, o.plan);
  REQUIRE(plan.ok());
  return plan->min_memory_bytes;
}

void check_invariance(const std::string& dir, const std::vector<int32_t>& prompt, int steps,
                      const std::vector<double>& multiples_of_min) {
  const ModelOptions base = options_for(0, prompt, steps);
  const Run resident = run(dir, base, prompt, steps);
  const uint64_t min = minimum(dir, base);
  for (double m : multiples_of_min) {
    const uint64_t budget = static_cast<uint64_t>(static_cast<double>(min) * m);
    INFO("budget " << budget << " bytes (" << m << " x the minimum " << min << ")");
    const Run streamed = run(dir, options_for(budget, prompt, steps), prompt, steps);
    CHECK(streamed.greedy == resident.greedy);
    REQUIRE(streamed.logits.size() == resident.logits.size());
    CHECK(std::memcmp(streamed.logits.data(), resident.logits.data(),
                      resident.logits.size() * sizeof(float)) == 0);
    CHECK(streamed.stats.expert_bytes_read > 0);
  }
}

TEST_CASE("tokens and logits are bit-identical under every budget (golden fixtures)",
          "[engine][streaming]") {
  const std::vector<int32_t> prompt = {3, 7, 11, 5, 9, 100, 200, 42};
  for (const char* name : {"tiny-mxfp4", "tiny-sharded", "tiny-bf16-flat"}) {
    INFO("fixture " << name);
    check_invariance(testing::golden_dir(name), prompt, 8, {1.0, 1.3, 2.0, 3.0, 5.0, 20.0});
  }
}

TEST_CASE("tokens and logits are bit-identical under every budget (a 230 MB model)",
          "[engine][streaming][model-small]") {
  const std::string dir =
      std::string(NJ_TEST_MODELS_DIR) + "/small";  // ctest fixture make_model_small
  REQUIRE(std::filesystem::exists(dir + "/config.json"));
  const std::vector<int32_t> prompt = {1, 2, 3, 500, 1000, 4000, 7, 9, 11, 13, 4095, 17};
  check_invariance(dir, prompt, 6, {1.0, 1.5, 2.0, 3.0, 6.0});
}

TEST_CASE("a streamed head larger than a layer is read in parts: the same bits, its bytes once a pass",
          "[engine][streaming]") {
  // The tiny shape with a vocabulary of 4,096: its lm_head (4,096 x 128 BF16, 1 MB) is 4.5x
  // its largest layer, as K3's is 1.9x (2.35 GB against 1.27 GB). Streamed, the head is read
  // in parts no larger than a layer, so that the ring's slots hold a layer and not the head.
  const std::string dir = state_testing::generated_model("tiny", 1, 4096);
  const std::vector<int32_t> prompt = {3, 7, 11, 5, 9, 100, 200, 42};
  const int steps = 4;
  const ModelOptions base = options_for(0, prompt, steps);
  const testing::LoadedLayout loaded = testing::load_layout(dir);
  const ModelConfig& config = loaded.config;
  const ModelLayout& layout = loaded.layout;
  const HeadLayout& head = layout.head();
  uint64_t largest_layer = 0;
  for (int l = 0; l < config.layers; ++l)
    largest_layer = std::max(largest_layer, layout.layer(l).unit.buffer_bytes);
  REQUIRE(head.unit.buffer_bytes > largest_layer);

  const int parts = streamed_head_parts(layout);
  CHECK(parts > 1);
  const std::vector<HeadPart> split = split_head(head, loaded.index, parts);
  int next_row = 0;
  uint64_t tensor_bytes = 0;
  for (const HeadPart& p : split) {  // contiguous rows, each part within a layer's buffer
    CHECK(p.first_row == next_row);
    next_row += p.rows;
    CHECK(p.layout.unit.buffer_bytes <= largest_layer);
    CHECK(p.layout.unit.buffer_bytes <= head_part_buffer_bound(head, parts));
    CHECK((p.layout.norm.info != nullptr) == (p.first_row == 0));
    tensor_bytes += p.layout.unit.tensor_bytes;
  }
  CHECK(next_row == config.vocab);
  CHECK(tensor_bytes == head.unit.tensor_bytes);

  const uint64_t min = minimum(dir, base);
  auto plan = plan_residency(layout, min, base.plan);
  REQUIRE(plan.ok());
  REQUIRE_FALSE(plan->pinned.back());
  CHECK(plan->head_parts == parts);
  CHECK(plan->ring_slot_bytes == largest_layer);
  CHECK(plan->to_json()["head_parts"] == parts);

  const Run resident = run(dir, base, prompt, steps);
  const Run streamed = run(dir, options_for(min, prompt, steps), prompt, steps);
  CHECK(streamed.greedy == resident.greedy);
  REQUIRE(streamed.logits.size() == resident.logits.size());
  CHECK(std::memcmp(streamed.logits.data(), resident.logits.data(),
                    resident.logits.size() * sizeof(float)) == 0);
  // One prefill pass and a pass per decoded token: the whole head once each.
  CHECK(streamed.stats.head_bytes_read == static_cast<uint64_t>(1 + steps) * head.unit.tensor_bytes);
}

TEST_CASE("a ring of one trunk unit (no read ahead) computes the same bits", "[engine][streaming]") {
  // What a layer sweep may take to hold more documents (sweep_plan.h); here through the
  // token-major passes, which ask for the next unit while holding none.
  const std::string dir = state_testing::generated_model("tiny", 1, 4096);  // its head in parts
  const std::vector<int32_t> prompt = {3, 7, 11, 5, 9, 100, 200, 42};
  const int steps = 4;
  const Run resident = run(dir, options_for(0, prompt, steps), prompt, steps);
  ModelOptions o = options_for(0, prompt, steps);
  o.plan.ring_slots = 1;
  const uint64_t min = minimum(dir, o);
  CHECK(min < minimum(dir, options_for(0, prompt, steps)));
  for (uint64_t budget : {min, min + min / 3}) {
    INFO("budget " << budget << " (the one-slot minimum " << min << ")");
    o.memory_bytes = budget;
    const Run streamed = run(dir, o, prompt, steps);
    CHECK(streamed.greedy == resident.greedy);
    REQUIRE(streamed.logits.size() == resident.logits.size());
    CHECK(std::memcmp(streamed.logits.data(), resident.logits.data(),
                      resident.logits.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("each extra sequence state held at once raises the minimum by one state",
          "[engine][streaming]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const std::vector<int32_t> prompt = {3, 7, 11};
  ModelOptions o = options_for(0, prompt, 4);
  const uint64_t one = minimum(dir, o);
  o.plan.sequence_states = 2;
  const uint64_t two = minimum(dir, o);
  auto config = load_model_config(dir);
  REQUIRE(config.ok());
  CHECK(two == one + sequence_state_bytes(*config, o.plan.max_context));
}

TEST_CASE("a budget below the minimum is refused, stating the minimum", "[engine][streaming]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const std::vector<int32_t> prompt = {3, 7, 11};
  ModelOptions o = options_for(0, prompt, 4);
  const uint64_t min = minimum(dir, o);
  o.memory_bytes = min - 1;
  auto m = Model::open(dir, o);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == StatusCode::kResourceExhausted);
  CHECK(m.status().message().find(std::to_string(min) + " bytes") != std::string::npos);
  o.memory_bytes = min;
  CHECK(Model::open(dir, o).ok());
}

// Fails every read that covers `bad_offset` of files whose name contains `needle`.
class FailingFile final : public RandomAccessFile {
 public:
  FailingFile(std::unique_ptr<RandomAccessFile> inner, uint64_t bad_offset)
      : inner_(std::move(inner)), bad_(bad_offset) {}
  Status read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset <= bad_ && bad_ < offset + n)
      return io_error(inner_->path() + ": injected read error at offset " + std::to_string(offset));
    return inner_->read_at(offset, dst, n);
  }
  uint64_t size() const override { return inner_->size(); }
  const std::string& path() const override { return inner_->path(); }
  bool direct() const override { return inner_->direct(); }

 private:
  std::unique_ptr<RandomAccessFile> inner_;
  uint64_t bad_;
};

TEST_CASE("an I/O error while streaming fails the run with the file and offset",
          "[engine][streaming][errors]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const std::vector<int32_t> prompt = {3, 7, 11};
  ModelOptions o = options_for(0, prompt, 2);
  const uint64_t min = minimum(dir, o);
  // An expert of layer 2, and a trunk tensor of layer 5: both streamed at the minimum.
  auto index = TensorIndex::open(dir);
  REQUIRE(index.ok());
  for (const char* tensor :
       {"language_model.model.layers.2.block_sparse_moe.experts.3.w2.weight_packed",
        "language_model.model.layers.5.self_attn.q_proj.weight"}) {
    INFO("failing " << tensor);
    const uint64_t bad = index->find(tensor)->offset + 10;
    o.memory_bytes = min;
    o.streaming.chunk_bytes = 4096;
    o.streaming.open_file =
        [bad](const std::string& path) -> Result<std::unique_ptr<RandomAccessFile>> {
      NJ_ASSIGN_OR_RETURN(auto f, open_random_access(path, IoMode::kBuffered));
      return std::unique_ptr<RandomAccessFile>(new FailingFile(std::move(f), bad));
    };
    auto model = Model::open(dir, o);
    REQUIRE(model.ok());
    Session s(**model);
    // Route through every expert of every layer until the bad one is needed.
    Status st;
    for (int32_t t = 0; t < 256 && st.ok(); ++t) {
      const int32_t one[1] = {t};
      st = s.feed(one);
    }
    REQUIRE_FALSE(st.ok());
    CHECK(st.code() == StatusCode::kIOError);
    CHECK(st.message().find(dir + "/model.safetensors") != std::string::npos);
    CHECK(st.message().find("offset " + std::to_string(align_down(bad, 4096))) !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace nj
