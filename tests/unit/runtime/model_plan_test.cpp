// Deciding a job's model once (engine/runtime/model_plan.h): the batch, the drafts and the
// residency plan are decided by plan_model, and opening the model plans nothing again.
#include <catch2/catch.hpp>

#include "engine/runtime/model.h"
#include "engine/runtime/model_plan.h"
#include "tests/unit/model/test_models.h"

namespace nj {
namespace {

std::string tiny() { return testing::golden_dir("tiny-mxfp4"); }

// The smallest budget that holds `batch` sequences of a job of this kind and context.
uint64_t minimum(const ModelLayout& layout, bool classify, int64_t context, int batch) {
  const PlanOptions o = plan_options_for(classify, context, kDefaultPrefillChunk, kDefaultIoThreads);
  return min_memory_for_batch(layout, o, batch);
}

TEST_CASE("opening a job's model plans its residency once", "[runtime][plan]") {
  std::string warning;
  auto headers = open_model_headers(tiny(), true, &warning);
  REQUIRE(headers.ok());
  for (const bool classify : {false, true}) {
    for (const Speculation s : {Speculation::kOff, Speculation::kNgram}) {
      INFO("classify " << classify << ", speculation " << static_cast<int>(s));
      const uint64_t budget = 2 * minimum(*headers->layout, classify, 96, 1);
      auto again = open_model_headers(tiny(), true, &warning);
      REQUIRE(again.ok());
      const uint64_t before = plan_residency_calls();
      ModelRequest r;
      r.memory_bytes = budget;
      r.classify = classify;
      r.context = 96;
      r.items = 5;
      r.speculation = classify ? Speculation::kOff : s;
      auto plan = plan_model(*again->layout, r);
      REQUIRE(plan.ok());
      auto model = Model::open(tiny(), std::move(*again), *plan, budget);
      REQUIRE(model.ok());
      CHECK(plan_residency_calls() - before == 1);
      // The model runs under exactly the plan that was decided.
      CHECK((*model)->plan_options().batch == plan->batch);
      CHECK((*model)->plan().budget_bytes == budget);
      CHECK((*model)->plan().draft_tokens == plan->residency.draft_tokens);
      CHECK((*model)->model_plan().forward_options().max_rows == plan->activation_shape().rows);
    }
  }
}

TEST_CASE("the decided batch is what the budget holds, at most the items", "[runtime][plan]") {
  std::string warning;
  auto headers = open_model_headers(tiny(), true, &warning);
  REQUIRE(headers.ok());
  const ModelLayout& layout = *headers->layout;
  const uint64_t three = minimum(layout, true, 64, 3);
  ModelRequest r;
  r.memory_bytes = three;
  r.classify = true;
  r.context = 64;
  r.items = 100;
  auto plan = plan_model(layout, r);
  REQUIRE(plan.ok());
  CHECK(plan->max_batch >= 3);
  CHECK(plan->batch == plan->max_batch);
  CHECK(plan->residency.max_batch == plan->max_batch);
  r.items = 2;  // fewer items than the budget holds: the batch is the items
  plan = plan_model(layout, r);
  REQUIRE(plan.ok());
  CHECK(plan->batch == 2);
  r.batch = 1;  // asked for
  plan = plan_model(layout, r);
  REQUIRE(plan.ok());
  CHECK(plan->batch == 1);
  r.batch = 0;
  r.memory_bytes = 0;  // resident: min(items, kDefaultResidentBatch)
  r.items = 100;
  plan = plan_model(layout, r);
  REQUIRE(plan.ok());
  CHECK(plan->batch == kDefaultResidentBatch);
  CHECK(plan->max_batch == 0);
}

TEST_CASE("below one sequence's minimum the plan names the minimum", "[runtime][plan]") {
  std::string warning;
  auto headers = open_model_headers(tiny(), true, &warning);
  REQUIRE(headers.ok());
  const uint64_t one = minimum(*headers->layout, true, 64, 1);
  ModelRequest r;
  r.memory_bytes = one - 1;
  r.classify = true;
  r.context = 64;
  auto plan = plan_model(*headers->layout, r);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == StatusCode::kResourceExhausted);
  r.memory_bytes = one;
  CHECK(plan_model(*headers->layout, r).ok());
}

}  // namespace
}  // namespace nj
