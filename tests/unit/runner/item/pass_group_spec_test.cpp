// Speculation in the runner's batch: items of a PassGroup feed through the same speculative
// step as `generate` (SpeculativeDecoder over an ItemSession), their tentative steps share
// passes with plain items' decode steps and prefill chunks, and every item emits exactly the
// tokens it emits alone with plain decoding, whatever its drafts (all right, right then
// wrong, all wrong, prompt lookup) and whatever shares its passes, resident and at the
// budget's minimum, greedy and seeded sampling.
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/runtime/model.h"
#include "engine/plan/planner.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "engine/speculative/decode.h"
#include "runner/item/pass_group.h"
#include "tests/unit/model/test_models.h"
#include "tests/unit/model/test_options.h"

namespace nj::runner {
namespace {

ModelOptions options(uint64_t budget, int batch, int context, int drafts) {
  return testing::small_model_options(
      {.budget = budget, .batch = batch, .context = context, .drafts = drafts});
}

// Plain decoding alone, as `generate` does it.
std::vector<int32_t> solo(Model& model, const std::vector<int32_t>& prompt, SamplingParams sp,
                          int max_tokens) {
  Session session(model, SessionOptions{4});
  Sampler sampler(sp);
  REQUIRE(session.feed(prompt).ok());
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < max_tokens) {
    out.push_back(sampler.sample(session.last_logits()));
    if (static_cast<int>(out.size()) == max_tokens) break;
    REQUIRE(session.feed(std::span<const int32_t>(&out.back(), 1)).ok());
  }
  return out;
}

enum class Drafts { kNone, kRight, kRightThenWrong, kWrong, kNgram };

struct Item {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_tokens;
  Drafts drafts;
  // Filled by the item's thread, checked by the test's.
  std::vector<int32_t> out;
  std::string error;
  SpeculationStats stats;
};

// One item's logic, as ItemRun's token loop runs it (runner/item/item_runner.cpp).
void run_item(PassGroup& group, Item& it, const std::vector<int32_t>& truth, int drafts,
              const PassCost& cost) {
  ItemSession session(group, 4);
  Sampler sampler(it.sampling);
  if (Status s = session.feed(it.prompt); !s.ok()) {
    it.error = s.to_string();
    return;
  }
  std::optional<SpeculativeDecoder<ItemSession>> spec;
  if (it.drafts != Drafts::kNone && drafts > 0) {  // else the plan holds none: plain
    DraftLengthOptions dl;
    dl.max_draft_tokens = drafts;
    std::unique_ptr<Drafter> drafter;
    if (it.drafts == Drafts::kNgram) {
      drafter = std::make_unique<NgramDrafter>();
    } else {
      dl.adaptive = false;  // forced drafts: always the most the plan holds
      std::vector<int32_t> script = truth;
      const int vocab = group.forward().config().vocab;
      for (size_t i = 0; i < script.size(); ++i)
        if (it.drafts == Drafts::kWrong || (it.drafts == Drafts::kRightThenWrong && i % 3 == 2))
          script[i] = (script[i] + 1) % vocab;
      drafter = std::make_unique<ScriptedDrafter>(it.prompt.size(), std::move(script));
    }
    spec.emplace(session, Speculator(std::move(drafter), dl), cost);
  }
  auto finishes = [&](int32_t) { return static_cast<int>(it.out.size()) == it.max_tokens; };
  while (static_cast<int>(it.out.size()) < it.max_tokens) {
    const int32_t id = sampler.sample(session.last_logits());
    it.out.push_back(id);
    if (static_cast<int>(it.out.size()) == it.max_tokens) break;
    Status s;
    if (spec) {
      const int room = it.max_tokens - static_cast<int>(it.out.size()) - 1;
      s = spec->feed(sampler, id, room, finishes, &it.out).status();
    } else {
      s = session.feed(std::span<const int32_t>(&id, 1));
    }
    if (!s.ok()) {
      it.error = s.to_string();
      return;
    }
  }
  if (spec) it.stats = spec->stats();
}

TEST_CASE("speculating and plain items sharing a pass group each emit their solo tokens",
          "[runner][spec][batch]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const int context = 48, k = 4;
  const SamplingParams greedy{}, seeded{0.9f, 0, 1.0f, 77};
  auto make_items = [&] {
    return std::vector<Item>{
        {{1, 2, 3}, greedy, 18, Drafts::kRight},
        {{250, 4, 4, 4, 9, 12, 60, 7, 7}, seeded, 14, Drafts::kRightThenWrong},
        {{77}, greedy, 9, Drafts::kNone},
        {{8, 8, 8, 8, 8, 8}, seeded, 20, Drafts::kWrong},
        {{5, 6, 5, 6, 5, 6, 5}, greedy, 16, Drafts::kNgram},
        {{30, 31}, seeded, 11, Drafts::kNone},
    };
  };
  const int batch = static_cast<int>(make_items().size());
  auto resident = Model::open(dir, options(0, 1, context, 0));
  REQUIRE(resident.ok());
  std::vector<std::vector<int32_t>> truth;
  for (const Item& it : make_items())
    truth.push_back(solo(**resident, it.prompt, it.sampling, it.max_tokens));

  const uint64_t min = testing::plan_minimum(dir, options(0, batch, context, k));
  for (uint64_t budget : {uint64_t{0}, min, 2 * min}) {
    INFO("budget " << budget);
    auto model = Model::open(dir, options(budget, batch, context, k));
    REQUIRE(model.ok());
    // The runner's Forward and group for this plan (scheduler.cpp).
    PlanOptions po = (*model)->plan_options();
    po.draft_tokens = (*model)->plan().draft_tokens;
    const ActivationShape shape = planned_activation_shape(po);
    ForwardOptions fo{shape.rows, batch, context, false};
    if (po.draft_tokens > 0) {
      fo.tentative_rows = 1 + po.draft_tokens;
      fo.tentative_sequences = batch;
    }
    Forward forward((*model)->config(), (*model)->weights(), fo);
    PassGroup group(forward, shape.rows);
    const PassCost cost = pass_cost((*model)->layout(), (*model)->plan());
    std::vector<Item> items = make_items();
    for (size_t i = 0; i < items.size(); ++i)
      group.spawn([&, i] { run_item(group, items[i], truth[i], po.draft_tokens, cost); });
    for (int left = batch; left > 0;) {
      left -= group.wait_for_members();
      if (group.anyone_waiting()) group.run_pass();
    }
    uint64_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      INFO("item " << i << ": " << items[i].error);
      CHECK(items[i].error.empty());
      CHECK(items[i].out == truth[i]);
      drafted += items[i].stats.drafted;
      accepted += items[i].stats.accepted;
    }
    CHECK(group.totals().max_sequences == batch);  // they shared passes
    if (po.draft_tokens > 0) {
      CHECK(accepted > 0);
      CHECK(drafted > accepted);  // the wrong drafts were fed too
    }
  }
}

}  // namespace
}  // namespace nj::runner
