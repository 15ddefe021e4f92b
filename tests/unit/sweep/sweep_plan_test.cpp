// Sizing a sweep's window (engine/plan/sweep_plan.h): a ring of one trunk unit is taken when,
// and only when, it holds more documents than the usual two slots.
#include <catch2/catch.hpp>

#include "engine/model/layout.h"
#include "engine/plan/sweep_plan.h"
#include "tests/unit/model/test_models.h"
#include "tests/unit/model/test_options.h"

namespace nj {
namespace {

SweepWork work_of(int documents) {
  SweepWork w;
  w.documents = documents;
  w.document_rows = 24;
  w.branch_rows = 2;
  w.branches = 2;
  w.logits_rows = 3;
  return w;
}

}  // namespace

TEST_CASE("a sweep takes a ring of one trunk unit only when it holds more documents",
          "[sweep][planner]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const testing::LoadedLayout loaded = testing::load_layout(dir);
  const ModelLayout& layout = loaded.layout;
  const SweepWork work = work_of(6);
  PlanOptions two;  // the default: two slots
  REQUIRE(two.ring_slots == 2);
  PlanOptions one = two;
  one.ring_slots = 1;

  auto least = plan_sweep_window(layout, 0, work, two);
  REQUIRE(least.ok());
  const uint64_t min = least->min_memory_bytes;
  auto below = plan_sweep_window(layout, min - 1, work, two);
  CHECK(below.status().code() == StatusCode::kResourceExhausted);

  bool took_one = false, kept_two = false;
  for (uint64_t budget = min; budget < 16 * min; budget += min / 8) {
    INFO("budget " << budget << " (the least " << min << ")");
    auto p = plan_sweep_window(layout, budget, work, two);
    auto q = plan_sweep_window(layout, budget, work, one);
    REQUIRE(p.ok());
    REQUIRE(q.ok());
    CHECK(q->residency.ring_slots <= 1);
    CHECK(p->documents >= q->documents);  // never fewer than one slot would hold
    if (p->residency.ring_slots == 1) {
      took_one = true;
      CHECK(p->documents == q->documents);
      CHECK(p->options.ring_slots == 1);
    } else if (p->residency.ring_slots == 2) {
      kept_two = true;
    }
    CHECK(p->residency.total_bytes() + p->activation_bytes + p->state_bytes <= budget);
  }
  CHECK(took_one);  // at the least budget, one slot is what makes a document fit
  CHECK(kept_two);  // with room to spare, reading ahead costs no document
}

}  // namespace nj
