// ModelOptions for the engine tests' small models, a model's layout, and the minimum budget of
// a plan: one place for the settings that make a small model exercise the streaming paths.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <utility>

#include "engine/model/config.h"
#include "engine/model/layout.h"
#include "engine/runtime/model.h"
#include "engine/model/tensor_index.h"
#include "engine/plan/planner.h"

namespace nj::testing {

struct SmallModelOptions {
  uint64_t budget = 0;  // 0: resident
  int batch = 1;
  int context = 0;
  int prefill_chunk = 4;
  bool all_logits = true;
  int drafts = 0;
  int io_threads = 4;
};

// A small model's units are a few hundred KB: reads of 64 KiB make each of them many chunks
// over several I/O threads, so that the read pool's paths run as they do at real sizes.
inline ModelOptions small_model_options(const SmallModelOptions& s) {
  ModelOptions o;
  o.memory_bytes = s.budget;
  o.plan.prefill_chunk = s.prefill_chunk;
  o.plan.batch = s.batch;
  o.plan.max_context = s.context;
  o.plan.all_logits = s.all_logits;
  o.plan.draft_tokens = s.drafts;
  o.streaming.io_threads = s.io_threads;
  o.streaming.chunk_bytes = 64u << 10;
  return o;
}

// A model directory's config, tensor index and layout, loaded (the layout refers into the
// index: keep them together).
struct LoadedLayout {
  ModelConfig config;
  TensorIndex index;
  ModelLayout layout;
};

inline LoadedLayout load_layout(const std::string& dir) {
  auto config = load_model_config(dir);
  REQUIRE(config.ok());
  auto index = TensorIndex::open(dir);
  REQUIRE(index.ok());
  auto layout = ModelLayout::build(*config, *index);
  REQUIRE(layout.ok());
  return LoadedLayout{*config, std::move(*index), std::move(*layout)};
}

// The least budget that runs o's plan at its batch on the model in `dir`.
inline uint64_t plan_minimum(const std::string& dir, const ModelOptions& o) {
  return min_memory_for_batch(load_layout(dir).layout, o.plan, o.plan.batch);
}

}  // namespace nj::testing
