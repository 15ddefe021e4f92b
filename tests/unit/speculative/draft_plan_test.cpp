// The planner gives speculative decoding's drafts only the memory plain decoding's plan
// leaves over (planner.h, step 4): at every budget the trunk and the plain step's expert
// buffers are planned exactly as without drafts, so a pass with nothing drafted reads what
// plain decoding's does.
#include <catch2/catch.hpp>

#include "engine/model/layout.h"
#include "engine/plan/planner.h"
#include "tests/unit/model/test_models.h"
#include "tests/unit/model/test_options.h"

namespace nj {
namespace {

TEST_CASE("drafts take only the memory plain decoding's plan leaves over", "[engine][spec][plan]") {
  const std::string dir = testing::golden_dir("tiny-bf16-flat");
  const testing::LoadedLayout loaded = testing::load_layout(dir);
  const ModelLayout& layout = loaded.layout;
  for (KdaRollback rollback : {KdaRollback::kReplay, KdaRollback::kSnapshots}) {
    PlanOptions plain;
    plain.prefill_chunk = 4;
    plain.max_context = 32;
    PlanOptions spec = plain;
    spec.draft_tokens = 8;
    spec.kda_rollback = rollback;
    const uint64_t min = min_memory_for_batch(layout, plain, 1);
    CHECK(min_memory_for_batch(layout, spec, 1) == min);  // drafts never raise the minimum
    int most = 0;
    bool some_below_max = false;
    for (int i = 0; i <= 40; ++i) {
      const uint64_t budget = min + min * static_cast<uint64_t>(i) / 10;  // 1x .. 5x
      INFO("budget " << budget << " (" << i << "/10 over the minimum), rollback "
                     << (rollback == KdaRollback::kReplay ? "replay" : "snapshots"));
      auto p0 = plan_residency(layout, budget, plain);
      auto p8 = plan_residency(layout, budget, spec);
      REQUIRE(p0.ok());
      REQUIRE(p8.ok());
      CHECK(p0->draft_tokens == 0);
      CHECK(p8->pinned == p0->pinned);
      CHECK(p8->held == p0->held);
      CHECK(p8->ring_slot_bytes == p0->ring_slot_bytes);
      CHECK(p8->predicted_trunk_bytes_per_step == p0->predicted_trunk_bytes_per_step);
      CHECK(p8->total_bytes() <= budget);
      // (Not monotone in the budget: a budget that pins one more trunk unit may leave less
      // over for drafts than a slightly smaller one.)
      CHECK(p8->draft_tokens <= 8);
      CHECK(p8->rows_per_pass >= 1 + p8->draft_tokens);
      most = std::max(most, p8->draft_tokens);
      some_below_max = some_below_max || (p8->draft_tokens < 8 && !p8->everything_resident);
    }
    CHECK(most == 8);
    CHECK(some_below_max);  // the test covers budgets too small for every draft
    auto resident = plan_residency(layout, 0, spec);
    REQUIRE(resident.ok());
    CHECK(resident->draft_tokens == 8);
  }
}

}  // namespace
}  // namespace nj
