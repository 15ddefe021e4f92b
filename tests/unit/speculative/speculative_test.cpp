// Speculation never changes a token: with forced drafts that are all right, all wrong or
// right then wrong, for k = 1..8, greedy and seeded sampling, resident and under budgets,
// alone and in batches, every emitted token, every RNG draw and the sequence state after
// every pass (memcmp) are those of plain decoding at the same position. Both KDA rollback
// modes give the same bits; a checkpoint taken mid-generation with speculation on
// continues exactly like the uninterrupted plain run.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>

#include "engine/runtime/model.h"
#include "engine/forward/forward.h"
#include "engine/io/env.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "engine/speculative/decode.h"
#include "engine/state/state_file.h"
#include "tests/unit/model/test_models.h"
#include "tests/unit/model/test_options.h"

namespace nj {
namespace {

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Every byte a sequence carries between passes.
bool same_state(const SequenceState& a, const SequenceState& b) {
  if (a.position != b.position || a.tokens != b.tokens || a.layers.size() != b.layers.size() ||
      !same_floats(a.last_logits, b.last_logits))
    return false;
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const LayerState &x = a.layers[l], &y = b.layers[l];
    if (!same_floats(x.S, y.S) || !same_floats(x.conv, y.conv) ||
        !same_floats(x.latent, y.latent) || !same_floats(x.rope, y.rope))
      return false;
  }
  return true;
}

// Plain decoding, as `generate` does it: sample, emit, feed (the last token is not fed).
// states[p] is the sequence state at position p (from the prompt's end on), rngs[p] the
// sampler's RNG there.
struct PlainRun {
  std::vector<int32_t> out;
  std::vector<SequenceState> states;
  std::vector<RngState> rngs;
  size_t first_position = 0;
  const SequenceState& at(int64_t position) const {
    return states.at(static_cast<size_t>(position) - first_position);
  }
  RngState rng_at(int64_t position) const {
    return rngs.at(static_cast<size_t>(position) - first_position);
  }
};

PlainRun plain(Model& model, const std::vector<int32_t>& prompt, SamplingParams sp,
               int max_tokens) {
  PlainRun r;
  Session session(model, SessionOptions{4});
  Sampler sampler(sp);
  REQUIRE(session.feed(prompt).ok());
  r.first_position = prompt.size();
  r.states.push_back(session.state());
  r.rngs.push_back(sampler.rng());
  for (int i = 0; i < max_tokens; ++i) {
    const int32_t id = sampler.sample(session.last_logits());
    r.out.push_back(id);
    if (i + 1 == max_tokens) break;
    const int32_t one[1] = {id};
    REQUIRE(session.feed(one).ok());
    r.states.push_back(session.state());
    r.rngs.push_back(sampler.rng());
  }
  return r;
}

enum class Drafts { kRight, kWrong, kRightThenWrong };
const char* name(Drafts d) {
  return d == Drafts::kRight ? "all right" : d == Drafts::kWrong ? "all wrong" : "right then wrong";
}

// The script of forced drafts for plain output `truth`: the truth, every token off by one,
// or the truth with every fourth token off (so passes accept 0..3 drafts and then fail).
std::vector<int32_t> script(const std::vector<int32_t>& truth, Drafts d, int vocab) {
  std::vector<int32_t> s = truth;
  for (size_t i = 0; i < s.size(); ++i)
    if (d == Drafts::kWrong || (d == Drafts::kRightThenWrong && i % 4 == 3))
      s[i] = (s[i] + 1) % vocab;
  return s;
}

Speculator forced(size_t prompt_length, std::vector<int32_t> drafts, int k) {
  DraftLengthOptions o;
  o.max_draft_tokens = k;
  o.adaptive = false;
  return Speculator(std::make_unique<ScriptedDrafter>(prompt_length, std::move(drafts)), o);
}

// Speculative decoding checked against `truth` after every pass: the emitted tokens so far,
// the state and the sampler's RNG equal plain decoding's at the same position.
SpeculationStats speculative(Model& model, const std::vector<int32_t>& prompt, SamplingParams sp,
                             int max_tokens, Speculator speculator, int k, const PlainRun& truth,
                             KdaRollback rollback) {
  SessionOptions so{4};
  so.tentative_rows = 1 + k;
  so.kda_rollback = rollback;
  Session session(model, so);
  Sampler sampler(sp);
  REQUIRE(session.feed(prompt).ok());
  SpeculativeDecoder decoder(session, std::move(speculator), PassCost{});
  std::vector<int32_t> out;
  auto finishes = [&](int32_t) { return static_cast<int>(out.size()) == max_tokens; };
  while (static_cast<int>(out.size()) < max_tokens) {
    const int32_t id = sampler.sample(session.last_logits());
    out.push_back(id);
    if (static_cast<int>(out.size()) == max_tokens) break;
    const int room = max_tokens - static_cast<int>(out.size()) - 1;
    auto a = decoder.feed(sampler, id, room, finishes, &out);
    INFO(a.status().to_string());
    REQUIRE(a.ok());
    REQUIRE(static_cast<int>(out.size()) <= max_tokens);
    CHECK(std::equal(out.begin(), out.end(), truth.out.begin()));
    INFO("position " << session.position() << " after " << out.size() << " tokens");
    REQUIRE(same_state(session.state(), truth.at(session.position())));
    CHECK(sampler.rng().s == truth.rng_at(session.position()).s);
  }
  CHECK(out == truth.out);
  return decoder.stats();
}

ModelOptions options(uint64_t budget, int batch, int context, int drafts) {
  return testing::small_model_options({.budget = budget,
                                       .batch = batch,
                                       .context = context,
                                       .all_logits = false,
                                       .drafts = drafts});
}

const SamplingParams kGreedy{};
const SamplingParams kSampled{0.9f, 0, 1.0f, 1234};

TEST_CASE(
    "speculation emits plain decoding's tokens, RNG draws and states for forced drafts and k = "
    "1..8",
    "[engine][spec]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const std::vector<int32_t> prompt = {5, 17, 99, 3, 42, 7};
  const int max_tokens = 24, context = 40;
  auto resident = Model::open(dir, options(0, 1, context, 8));
  REQUIRE(resident.ok());
  const int vocab = (*resident)->config().vocab;
  for (const SamplingParams& sp : {kGreedy, kSampled}) {
    const PlainRun truth = plain(**resident, prompt, sp, max_tokens);
    for (Drafts d : {Drafts::kRight, Drafts::kWrong, Drafts::kRightThenWrong}) {
      for (int k = 1; k <= 8; ++k) {
        INFO("temperature " << sp.temperature << ", drafts " << name(d) << ", k " << k);
        const SpeculationStats st = speculative(
            **resident, prompt, sp, max_tokens,
            forced(prompt.size(), script(truth.out, d, vocab), k), k, truth, kDefaultKdaRollback);
        CHECK(st.drafted > 0);
        if (d == Drafts::kRight) CHECK(st.accepted == st.drafted);
        if (d == Drafts::kWrong) CHECK(st.accepted == 0);
        if (d == Drafts::kRightThenWrong) {
          CHECK(st.accepted > 0);
          CHECK(st.accepted < st.drafted);
        }
        // Every token is emitted by a pass or accepted from a draft (the first needs none).
        CHECK(st.passes + st.accepted + 1 == static_cast<uint64_t>(max_tokens));
      }
    }
  }
}

TEST_CASE(
    "speculation under memory budgets gives plain decoding's tokens and states (both KDA "
    "rollbacks)",
    "[engine][spec]") {
  const std::string dir = testing::golden_dir("tiny-bf16-flat");
  const std::vector<int32_t> prompt = {9, 1, 200, 31, 31, 8, 77};
  const int max_tokens = 20, context = 32;
  auto resident = Model::open(dir, options(0, 1, context, 8));
  REQUIRE(resident.ok());
  const int vocab = (*resident)->config().vocab;
  for (int k : {1, 3, 8}) {
    const uint64_t min = testing::plan_minimum(dir, options(1, 1, context, k));
    for (double m : {1.0, 2.0}) {
      auto model = Model::open(
          dir, options(static_cast<uint64_t>(static_cast<double>(min) * m), 1, context, k));
      INFO(model.status().to_string());
      REQUIRE(model.ok());
      REQUIRE_FALSE((*model)->plan().everything_resident);
      for (const SamplingParams& sp : {kGreedy, kSampled}) {
        const PlainRun truth = plain(**resident, prompt, sp, max_tokens);
        for (KdaRollback rb : {KdaRollback::kReplay, KdaRollback::kSnapshots}) {
          INFO("k " << k << ", budget " << m << " x the minimum, temperature " << sp.temperature
                    << ", rollback " << (rb == KdaRollback::kReplay ? "replay" : "snapshots"));
          speculative(**model, prompt, sp, max_tokens,
                      forced(prompt.size(), script(truth.out, Drafts::kRightThenWrong, vocab), k),
                      k, truth, rb);
        }
      }
    }
  }
}

// A batch of sequences, each with its own drafts, sampler and speculator, decoded in shared
// passes with Forward directly (what a batch decode loop calls): each sequence's tokens
// and final state equal its plain run alone.
TEST_CASE("speculating sequences in one batch each emit what they emit alone",
          "[engine][spec][batch]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const int max_tokens = 18, context = 40, k = 4;
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 2, 3}, {250, 4, 4, 4, 9, 12, 60}, {77}, {8, 8, 8, 8, 8}};
  const std::vector<SamplingParams> sampling = {kGreedy, kSampled,
                                                SamplingParams{0.7f, 20, 0.9f, 5}, kGreedy};
  auto resident = Model::open(dir, options(0, 1, context, k));
  REQUIRE(resident.ok());
  const int vocab = (*resident)->config().vocab;
  const size_t V = static_cast<size_t>(vocab);
  const int batch = static_cast<int>(prompts.size());
  const uint64_t min = testing::plan_minimum(dir, options(1, batch, context, k));
  for (uint64_t budget : {uint64_t{0}, min}) {
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      INFO("budget " << budget << ", threads " << threads);
      auto model = Model::open(dir, options(budget, batch, context, k));
      REQUIRE(model.ok());
      struct Seq {
        SequenceState state;
        Sampler sampler;
        Speculator spec;
        PlainRun truth;
        std::vector<int32_t> out;
        std::vector<float> logits;
        bool done = false;
      };
      std::vector<Seq> seqs;
      for (size_t i = 0; i < prompts.size(); ++i) {
        PlainRun truth = plain(**resident, prompts[i], sampling[i], max_tokens);
        const Drafts d = i % 3 == 0   ? Drafts::kRightThenWrong
                         : i % 3 == 1 ? Drafts::kRight
                                      : Drafts::kWrong;
        Speculator spec = forced(prompts[i].size(), script(truth.out, d, vocab), k);
        seqs.push_back(Seq{SequenceState::empty((*model)->config()), Sampler(sampling[i]),
                           std::move(spec), std::move(truth)});
      }
      Forward forward((*model)->config(), (*model)->weights(), ForwardOptions{8, batch, context, false, 1 + k});
      {  // the prompts, in one pass
        std::vector<SeqStep> steps;
        for (size_t i = 0; i < seqs.size(); ++i)
          steps.push_back(SeqStep{&seqs[i].state, prompts[i]});
        REQUIRE(forward.run(steps).ok());
      }
      for (int pass = 0; pass < 2 * max_tokens; ++pass) {
        std::vector<SeqStep> steps;
        std::vector<Seq*> in_pass;
        PassLoad load;
        for (Seq& s : seqs) {
          if (s.done) continue;
          const int32_t id = s.sampler.sample(s.state.last_logits);
          s.out.push_back(id);
          if (static_cast<int>(s.out.size()) == max_tokens) {
            s.done = true;
            continue;
          }
          const int room = max_tokens - static_cast<int>(s.out.size()) - 1;
          const std::span<const int32_t> fed =
              s.spec.feed(s.state.tokens, id, room, PassCost{}, &load);
          s.logits.resize(fed.size() * V);
          SeqStep step{&s.state, fed, LogitsWanted::kAll, s.logits.data()};
          step.tentative = fed.size() > 1;
          steps.push_back(step);
          in_pass.push_back(&s);
        }
        if (steps.empty()) break;
        REQUIRE(forward.run(steps).ok());
        for (size_t j = 0; j < in_pass.size(); ++j) {
          Seq& s = *in_pass[j];
          auto finishes = [&](int32_t) { return static_cast<int>(s.out.size()) == max_tokens; };
          const Acceptance a = s.spec.verify(s.sampler, s.logits, vocab, finishes, &s.out);
          if (steps[j].tentative) REQUIRE(forward.keep(s.state, a.rows_to_keep()).ok());
          REQUIRE(same_state(s.state, s.truth.at(s.state.position)));
          CHECK(s.sampler.rng().s == s.truth.rng_at(s.state.position).s);
        }
      }
      for (size_t i = 0; i < seqs.size(); ++i) {
        INFO("sequence " << i);
        CHECK(seqs[i].done);
        CHECK(seqs[i].out == seqs[i].truth.out);
      }
    }
  }
  omp_set_num_threads(2);
}

TEST_CASE(
    "a checkpoint saved mid-generation with speculation on continues like the uninterrupted plain "
    "run",
    "[engine][spec][state]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  const int max_tokens = 30, context = 48, k = 5;
  auto model = Model::open(dir, options(0, 1, context, k));
  REQUIRE(model.ok());
  const int vocab = (*model)->config().vocab;
  const PlainRun truth = plain(**model, prompt, kSampled, max_tokens);
  testing::TempDir tmp;
  const std::string file = tmp.file("mid.njstate");
  std::vector<int32_t> out;
  int64_t saved_at = 0;
  {  // speculate until past the middle, then save (as a job's checkpoint does) and stop
    SessionOptions so{4};
    so.tentative_rows = 1 + k;
    Session session(**model, so);
    Sampler sampler(kSampled);
    REQUIRE(session.feed(prompt).ok());
    SpeculativeDecoder decoder(
        session, forced(prompt.size(), script(truth.out, Drafts::kRightThenWrong, vocab), k),
        PassCost{});
    auto finishes = [&](int32_t) { return static_cast<int>(out.size()) == max_tokens; };
    while (static_cast<int>(out.size()) < max_tokens / 2) {
      const int32_t id = sampler.sample(session.last_logits());
      out.push_back(id);
      REQUIRE(
          decoder.feed(sampler, id, max_tokens - static_cast<int>(out.size()) - 1, finishes, &out)
              .ok());
    }
    CHECK(decoder.stats().accepted > 0);
    StateFileWriter writer(*Env::posix(), file);
    REQUIRE(writer.save(**model, session.state(), {sampler.params(), sampler.rng()}).ok());
    saved_at = session.position();
  }
  // A new process would do this: load, then go on speculating with fresh drafts.
  auto cp = load_state_file(*Env::posix(), file, **model);
  REQUIRE(cp.ok());
  REQUIRE(cp->state.position == saved_at);
  REQUIRE(same_state(cp->state, truth.at(saved_at)));
  SessionOptions so{4};
  so.tentative_rows = 1 + k;
  Session session(**model, so);
  session.set_state(std::move(cp->state));
  Sampler sampler(cp->sampler.params);
  sampler.set_rng(cp->sampler.rng);
  SpeculativeDecoder decoder(session, Speculator(std::make_unique<NgramDrafter>()), PassCost{});
  auto finishes = [&](int32_t) { return static_cast<int>(out.size()) == max_tokens; };
  while (static_cast<int>(out.size()) < max_tokens) {
    const int32_t id = sampler.sample(session.last_logits());
    out.push_back(id);
    if (static_cast<int>(out.size()) == max_tokens) break;
    REQUIRE(decoder.feed(sampler, id, max_tokens - static_cast<int>(out.size()) - 1, finishes, &out)
                .ok());
    REQUIRE(same_state(session.state(), truth.at(session.position())));
  }
  CHECK(out == truth.out);
}

TEST_CASE("a tentative pass refuses misuse and consumes nothing", "[engine][spec]") {
  auto model = Model::open(testing::golden_dir("tiny-mxfp4"));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  Forward forward((*model)->config(), (*model)->weights(), ForwardOptions{4, 1, 16, false, 4});
  SequenceState a = SequenceState::empty(c), b = SequenceState::empty(c);
  const std::vector<int32_t> ids = {3, 7, 9};
  std::vector<float> logits(ids.size() * static_cast<size_t>(c.vocab));

  SeqStep last{&a, ids};
  last.tentative = true;
  CHECK(forward.run(std::span<SeqStep>(&last, 1)).code() == StatusCode::kInvalidArgument);
  CHECK(a.position == 0);

  SeqStep plain_step{&b, ids};
  REQUIRE(forward.run(std::span<SeqStep>(&plain_step, 1)).ok());
  CHECK(forward.keep(b, 1).code() == StatusCode::kInvalidArgument);  // not tentative

  SeqStep t{&a, ids, LogitsWanted::kAll, logits.data()};
  t.tentative = true;
  REQUIRE(forward.run(std::span<SeqStep>(&t, 1)).ok());
  CHECK(forward.keep(a, 0).code() == StatusCode::kInvalidArgument);
  CHECK(forward.keep(a, 4).code() == StatusCode::kInvalidArgument);
  const int64_t b_position = b.position;
  CHECK(forward.run(std::span<SeqStep>(&plain_step, 1)).code() == StatusCode::kFailedPrecondition);
  CHECK(b.position == b_position);
  REQUIRE(forward.keep(a, 2).ok());
  CHECK(a.position == 2);
  CHECK(a.tokens == std::vector<int32_t>{3, 7});
  CHECK(forward.keep(a, 2).code() == StatusCode::kInvalidArgument);  // already settled
  REQUIRE(forward.run(std::span<SeqStep>(&plain_step, 1)).ok());
}

}  // namespace
}  // namespace nj
