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

namespace nj {

TEST_CASE("a sweep's window fills with documents by their rows, as many as its bytes hold",
          "[sweep][planner]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const testing::LoadedLayout loaded = testing::load_layout(dir);
  const ModelLayout& layout = loaded.layout;
  const ModelConfig& c = layout.config();
  SweepWork work = work_of(40);
  work.start_rows = 5;  // a template prefix: the window's root
  PlanOptions options;
  const uint64_t min = plan_sweep_window(layout, 0, work, options)->min_memory_bytes;
  for (uint64_t budget : {min, min + min / 4, 2 * min}) {
    INFO("budget " << budget);
    auto p = plan_sweep_window(layout, budget, work, options);
    REQUIRE(p.ok());
    REQUIRE(p->documents < work.documents);  // the budget, not the job, bounds the window
    // The window gets every byte the weights' least leaves.
    CHECK(p->residency.total_bytes() + p->window_bytes <= budget);
    CHECK(p->window_bytes >= p->activation_bytes + p->state_bytes);
    const SweepWindowFill empty(c, work, p->window_bytes, 1000);
    // Documents as long as the longest: exactly the plan's window.
    SweepWindowFill longest = empty;
    while (longest.fits(work.document_rows)) longest.add(work.document_rows);
    CHECK(longest.documents() == p->documents);
    // Documents of a quarter of it: more of them, and each fill within the window's bytes.
    SweepWindowFill quarter = empty;
    while (quarter.fits(work.document_rows / 4)) quarter.add(work.document_rows / 4);
    CHECK(quarter.documents() > p->documents);
    CHECK(sweep_window_bytes(c, work, quarter.documents(), quarter.document_rows(),
                             work.document_rows / 4) <= p->window_bytes);
    CHECK(sweep_window_bytes(c, work, quarter.documents() + 1,
                             quarter.document_rows() + work.document_rows / 4,
                             work.document_rows / 4) > p->window_bytes);
    // room() is the most rows that fit beside the documents held, and 0 once none does.
    SweepWindowFill some = empty;
    for (int64_t rows : {3, 17, 1, 24}) {
      const int64_t room = some.room();
      if (some.documents() == 0)
        CHECK(room > work.document_rows);  // the first always joins
      else if (room > 0)
        CHECK((some.fits(room) && !some.fits(room + 1)));
      else
        CHECK(!some.fits(1));
      if (some.fits(rows)) some.add(rows);
    }
    // A cap on the documents (--batch) holds however short they are.
    SweepWindowFill capped(c, work, p->window_bytes, 2);
    for (int k = 0; k < 5; ++k)
      if (capped.fits(1)) capped.add(1);
    CHECK(capped.documents() == 2);
    CHECK(capped.room() == 0);
  }
  // When every document of the job fits at the longest's size, the weights keep the rest.
  auto all = plan_sweep_window(layout, 64 * min, work_of(3), options);
  REQUIRE(all.ok());
  CHECK(all->documents == 3);
  CHECK(all->window_bytes == all->activation_bytes + all->state_bytes);
}

}  // namespace nj
