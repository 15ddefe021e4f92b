// Drafts and the draft length: prompt lookup finds what followed the last tokens before,
// and k follows the acceptance so that drafts that are never accepted cost nearly nothing.
#include <catch2/catch.hpp>

#include "engine/speculative/draft_length.h"
#include "engine/speculative/drafter.h"

namespace nj {
namespace {

TEST_CASE("prompt lookup drafts what followed the longest matching suffix most recently",
          "[engine][spec]") {
  NgramDrafter d;
  std::vector<int32_t> out;
  // "1 2 3 4 ... 1 2" → 3 4 5; the later "9 1 2 7" loses to the longer match "8 1 2".
  d.propose(std::vector<int32_t>{8, 1, 2, 3, 4, 5, 9, 1, 2, 7, 6, 8, 1, 2}, 3, &out);
  CHECK(out == std::vector<int32_t>{3, 4, 5});
  // A repeating pattern is drafted through its own continuation.
  out.clear();
  d.propose(std::vector<int32_t>{4, 5, 4, 5, 4, 5}, 5, &out);
  CHECK(out == std::vector<int32_t>{4, 5, 4, 5, 4});
  // Nothing matches (a single token is not a match): no draft.
  out.clear();
  d.propose(std::vector<int32_t>{1, 2, 3, 1, 5}, 4, &out);
  CHECK(out.empty());
  d.propose(std::vector<int32_t>{1, 2, 3}, 0, &out);
  CHECK(out.empty());
}

TEST_CASE("scripted drafts follow the output position", "[engine][spec]") {
  ScriptedDrafter d(2, {10, 11, 12, 13});
  std::vector<int32_t> out;
  d.propose(std::vector<int32_t>{1, 2, 10}, 2, &out);  // output token 0 is being fed
  CHECK(out == std::vector<int32_t>{11, 12});
  out.clear();
  d.propose(std::vector<int32_t>{1, 2, 10, 11, 12, 13}, 3, &out);  // past the script
  CHECK(out.empty());
}

// A disk-bound pass: the trunk read once, each row adding a few percent of experts.
PassCost disk_bound() {
  PassCost c;
  c.fixed_bytes = 100;
  c.expert_bytes = 0.5;
  c.num_experts = 64;
  c.top_k = 4;
  return c;
}

TEST_CASE("the draft length grows with acceptance and backs off when drafts fail",
          "[engine][spec]") {
  const PassCost cost = disk_bound();
  SECTION("drafts always accepted: k reaches the cap") {
    DraftLength k;
    int last = 0;
    for (int i = 0; i < 20; ++i) {
      last = k.choose(cost, 8, PassLoad{1, 1});
      k.record(last, last);
    }
    CHECK(last == 8);
  }
  SECTION("drafts never accepted: one extra row every 64 passes at most, once backed off") {
    DraftLength k;
    int drafted_late = 0;
    for (int i = 0; i < 1000; ++i) {
      const int n = k.choose(cost, 8, PassLoad{1, 1});
      k.record(n, 0);
      if (i >= 500) drafted_late += n;
    }
    CHECK(drafted_late <= 500 / 64 + 1);
    CHECK(k.acceptance() < 0.1);
  }
  SECTION("a new sequence whose drafts are wrong from the start drafts one row per probe") {
    DraftLength k;
    CHECK(k.acceptance() == 0);
    int drafted = 0, passes_with_drafts = 0;
    for (int i = 0; i < 32; ++i) {
      const int n = k.choose(cost, 8, PassLoad{1, 1});
      CHECK(n <= 1);
      k.record(n, 0);
      drafted += n;
      passes_with_drafts += n > 0 ? 1 : 0;
    }
    CHECK(drafted == 5);  // probes after cool-downs of 0, 1, 2, 4, 8 passes
    CHECK(passes_with_drafts == 5);
  }
  SECTION("one accepted probe lets k grow") {
    DraftLength k;
    const int first = k.choose(cost, 8, PassLoad{1, 1});
    CHECK(first == 1);
    k.record(first, 1);
    CHECK(k.acceptance() > 0.5);
    CHECK(k.choose(cost, 8, PassLoad{1, 1}) > 1);
  }
  SECTION("a sequence that starts accepting again is drafted for again") {
    DraftLength k;
    for (int i = 0; i < 300; ++i) k.record(k.choose(cost, 8, PassLoad{1, 1}), 0);
    int n = 0;
    for (int i = 0; i < 200 && n < 4; ++i) {
      n = k.choose(cost, 8, PassLoad{1, 1});
      k.record(n, n);
    }
    CHECK(n >= 4);
  }
  SECTION("not adaptive: always the cap") {
    DraftLengthOptions o;
    o.adaptive = false;
    DraftLength k(o);
    k.record(8, 0);
    CHECK(k.choose(cost, 5, PassLoad{1, 1}) == 5);
    CHECK(k.choose(cost, 0, PassLoad{1, 1}) == 0);
  }
}

}  // namespace
}  // namespace nj
