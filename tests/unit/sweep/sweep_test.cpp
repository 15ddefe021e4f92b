// The layer sweep (engine/sweep/sweep.h) is another schedule of the same computation: every
// sequence of a window, and every branch continuing one, gets bit for bit (memcmp) the logits
// and the final state Forward::run gives it alone, under every budget, chunk size, thread
// count and SIMD level; and a window reads each trunk layer once and each expert at most
// once per layer.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "engine/forward/forward.h"
#include "engine/ops/cpu.h"
#include "engine/runtime/model.h"
#include "engine/session/session.h"
#include "engine/sweep/layer_chunks.h"
#include "engine/sweep/sweep.h"
#include "tests/unit/model/test_models.h"
#include "tests/unit/model/test_options.h"
#include "tests/unit/ops/simd_levels.h"
#include "tests/unit/sanitized.h"
#include "tests/unit/split_every_loop.h"

namespace nj {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool same_state(const SequenceState& a, const SequenceState& b) {
  if (a.position != b.position || a.tokens != b.tokens || a.layers.size() != b.layers.size() ||
      !same_bits(a.last_logits, b.last_logits))
    return false;
  for (size_t l = 0; l < a.layers.size(); ++l)
    if (!same_bits(a.layers[l].S, b.layers[l].S) || !same_bits(a.layers[l].conv, b.layers[l].conv) ||
        !same_bits(a.layers[l].latent, b.layers[l].latent) || !same_bits(a.layers[l].rope, b.layers[l].rope))
      return false;
  return true;
}

// A window: a shared start (a "template prefix"), documents after it or from nothing, and
// short branches continuing documents from their ends (a label trie's feed paths).
struct Window {
  std::vector<int32_t> prefix;
  std::vector<std::vector<int32_t>> docs;
  std::vector<bool> after_prefix;
  std::vector<std::pair<int, std::vector<int32_t>>> branches;  // (parent, tokens): a document
                                                               // (0..) or a branch (docs.size()..)
};

Window window(int vocab) {
  Window w;
  for (int t = 0; t < 6; ++t) w.prefix.push_back((t * 37 + 5) % vocab);
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> d;
    const int len = 1 + (i * 7) % 13;
    for (int t = 0; t < len; ++t) d.push_back((i * 131 + t * 17 + 3) % vocab);
    w.docs.push_back(d);
    w.after_prefix.push_back(i % 2 == 0);
  }
  w.branches = {{0, {7 % vocab}}, {0, {9 % vocab, 11 % vocab}}, {3, {2 % vocab, 4 % vocab, 6 % vocab}}};
  return w;
}

// The window with a branch of a branch (a generation deeper).
Window nested(int vocab) {
  Window w = window(vocab);
  w.branches.push_back({static_cast<int>(w.docs.size()) + 1, {5 % vocab, 8 % vocab}});
  return w;
}

struct Expected {
  std::vector<std::vector<float>> doc_logits;     // each document's every row
  std::vector<SequenceState> doc_states;
  std::vector<std::vector<float>> branch_logits;  // each branch's every row
  std::vector<SequenceState> branch_states;
};

// Each sequence alone, through Forward::run in chunks of 3 (any chunking gives the same bits).
Expected alone(Model& model, const Window& w, const SequenceState& prefix) {
  Expected e;
  const int vocab = model.config().vocab;
  Forward forward(model.config(), model.weights(), ForwardOptions{3, 1, 64, false});
  auto feed = [&](SequenceState& st, const std::vector<int32_t>& ids) {
    std::vector<float> rows;
    REQUIRE(feed_in_chunks(st, ids, 3, vocab, &rows, nullptr, [&](SeqStep& s) {
              return forward.run(std::span<SeqStep>(&s, 1));
            }).ok());
    return rows;
  };
  for (size_t i = 0; i < w.docs.size(); ++i) {
    SequenceState st = w.after_prefix[i] ? prefix : SequenceState::empty(model.config());
    e.doc_logits.push_back(feed(st, w.docs[i]));
    e.doc_states.push_back(st);
  }
  for (const auto& [parent, ids] : w.branches) {
    const auto p = static_cast<size_t>(parent);
    SequenceState st = p < w.docs.size() ? e.doc_states[p] : e.branch_states[p - w.docs.size()];
    e.branch_logits.push_back(feed(st, ids));
    e.branch_states.push_back(st);
  }
  return e;
}

// doc_finals false: the documents ask for no final state, so a last branch takes its
// document's layer state rather than a copy.
void check_sweep(Model& model, const Window& w, const SequenceState& prefix, const Expected& e,
                 SweepOptions options, bool doc_finals = true) {
  const size_t vocab = static_cast<size_t>(model.config().vocab);
  const size_t D = w.docs.size(), B = w.branches.size();
  std::vector<SweepSequence> seqs(D + B);
  std::vector<std::vector<float>> logits(D + B), last(D + B);
  std::vector<SequenceState> finals(D + B);
  for (size_t i = 0; i < D; ++i) {
    logits[i].resize(w.docs[i].size() * vocab);
    seqs[i] = SweepSequence{
        w.docs[i], w.after_prefix[i] ? &prefix : nullptr, -1, LogitsWanted::kAll, logits[i].data(),
        &last[i],  doc_finals ? &finals[i] : nullptr};
  }
  for (size_t b = 0; b < B; ++b) {
    const auto& [doc, ids] = w.branches[b];
    logits[D + b].resize(ids.size() * vocab);
    seqs[D + b] = SweepSequence{ids, nullptr, doc, LogitsWanted::kAll, logits[D + b].data(), &last[D + b],
                                &finals[D + b]};
  }
  Sweep sweep(model.config(), model.weights(), options);
  const Status st = sweep.run(seqs);
  INFO(st.to_string());
  REQUIRE(st.ok());
  CHECK(sweep.last().peak_states <=
        LayerChunks::bound(options.chunk_sequences, options.waiting_parents, 2));
  for (size_t i = 0; i < D; ++i) {
    INFO("document " << i);
    CHECK(same_bits(logits[i], e.doc_logits[i]));
    if (doc_finals) CHECK(same_state(finals[i], e.doc_states[i]));
  }
  for (size_t b = 0; b < B; ++b) {
    INFO("branch " << b);
    CHECK(same_bits(logits[D + b], e.branch_logits[b]));
    CHECK(same_state(finals[D + b], e.branch_states[b]));
  }
}

void check_model(const std::string& dir) {
  const SimdLevel best = detect_simd_level();
  REQUIRE(force_simd_level(SimdLevel::kScalar).ok());
  omp_set_num_threads(1);
  auto resident = Model::open(dir, testing::small_model_options({.context = 64}));
  REQUIRE(resident.ok());
  const Window w = nested((*resident)->config().vocab);
  SequenceState prefix = SequenceState::empty((*resident)->config());
  {
    Session s(**resident, SessionOptions{4});
    REQUIRE(s.feed(w.prefix).ok());
    prefix = s.state();
  }
  const Expected e = alone(**resident, w, prefix);
  for (SimdLevel level : testing::levels()) {
    REQUIRE(force_simd_level(level).ok());
    for (int threads : testing::kSanitized ? std::vector<int>{2} : std::vector<int>{1, 2}) {
      omp_set_num_threads(threads);
      const testing::SplitEveryLoop split;  // (with 1 thread, no loop splits anyway)
      // (the kernels' scratch, part of the minimum, is per thread)
      const uint64_t min = testing::plan_minimum(dir, testing::small_model_options({.context = 64}));
      for (double m : {0.0, 1.0, 2.0}) {
        const uint64_t budget = static_cast<uint64_t>(static_cast<double>(min) * m);
        auto model = Model::open(dir, testing::small_model_options({.budget = budget, .context = 64}));
        INFO(dir << " at " << budget << ": " << model.status().to_string());
        REQUIRE(model.ok());
        // Chunks of rows and of starting sequences, and parents let wait for their branches.
        for (SweepOptions o : {SweepOptions{1}, SweepOptions{4}, SweepOptions{256},
                               SweepOptions{4, 1, 1}, SweepOptions{256, 2, 1}}) {
          INFO("simd " << simd_level_name(level) << ", threads " << threads << ", budget " << budget
                       << ", chunk " << o.chunk_rows << "/" << o.chunk_sequences << "/"
                       << o.waiting_parents);
          check_sweep(**model, w, prefix, e, o);
          if (o.chunk_rows == 256) check_sweep(**model, w, prefix, e, o, /*doc_finals=*/false);
        }
      }
    }
  }
  omp_set_num_threads(2);
  REQUIRE(force_simd_level(best).ok());
}

TEST_CASE("a sweep computes each sequence's and each branch's bits as it alone (MXFP4)",
          "[engine][sweep]") {
  check_model(testing::golden_dir("tiny-mxfp4"));
}

TEST_CASE("a sweep computes each sequence's and each branch's bits as it alone (BF16, sharded)",
          "[engine][sweep]") {
  check_model(testing::golden_dir("tiny-bf16-flat"));
  check_model(testing::golden_dir("tiny-sharded"));
}

// Issue 34: a classify item's max_batch (results' engine.max_batch, the report's batch) is the
// documents that shared its sweep; it counted every branch, so a window of 5 documents with
// 3 label paths read as a batch of 8.
TEST_CASE("a sweep's usage counts the window's documents as the batch, not their branches",
          "[engine][sweep]") {
  auto model = Model::open(testing::golden_dir("tiny-mxfp4"),
                           testing::small_model_options({.context = 64}));
  REQUIRE(model.ok());
  const Window w = window((*model)->config().vocab);
  const size_t D = w.docs.size(), B = w.branches.size();
  std::vector<SweepSequence> seqs(D + B);
  std::vector<SequenceUsage> usage(D);  // a document's branches are charged to it
  for (size_t i = 0; i < D; ++i) seqs[i] = SweepSequence{w.docs[i]};
  for (size_t b = 0; b < B; ++b)
    seqs[D + b] = SweepSequence{w.branches[b].second, nullptr, w.branches[b].first};
  for (size_t i = 0; i < D + B; ++i)
    seqs[i].usage = &usage[static_cast<size_t>(i < D ? static_cast<int>(i) : seqs[i].parent)];
  Sweep sweep((*model)->config(), (*model)->weights(), SweepOptions{});
  REQUIRE(sweep.run(seqs).ok());
  CHECK(sweep.last().sequences == static_cast<int>(D + B));
  CHECK(sweep.last().roots == static_cast<int>(D));
  for (const SequenceUsage& u : usage) CHECK(u.max_batch == static_cast<int>(D));
}

TEST_CASE("a sweep reads each trunk layer once and each expert at most once per layer",
          "[engine][sweep]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const ModelOptions o = testing::small_model_options({.context = 64});
  const uint64_t min = testing::plan_minimum(dir, o);
  auto open = [&] {
    auto m = Model::open(dir, testing::small_model_options({.budget = min, .context = 64}));
    REQUIRE(m.ok());
    return std::move(*m);
  };
  // One read of every streamed trunk unit: what a one-row pass of a fresh open reads.
  uint64_t one_pass = 0;
  {
    auto model = open();
    Forward forward(model->config(), model->weights(), ForwardOptions{1, 1, 64, false});
    SequenceState st = SequenceState::empty(model->config());
    const int32_t id[1] = {1};
    SeqStep step{&st, id};
    REQUIRE(forward.run(std::span<SeqStep>(&step, 1)).ok());
    one_pass = forward.last_pass().trunk_bytes_read;
  }
  auto model = open();
  const ModelConfig& c = model->config();
  const Window w = window(c.vocab);
  std::vector<SweepSequence> seqs;
  for (const auto& d : w.docs) seqs.push_back(SweepSequence{d});
  for (const auto& [doc, ids] : w.branches) seqs.push_back(SweepSequence{ids, nullptr, doc});
  const WeightStats before = model->weights().stats();
  Sweep sweep(c, model->weights(), SweepOptions{4});
  REQUIRE(sweep.run(seqs).ok());
  const WeightStats after = model->weights().stats();
  CHECK(sweep.last().trunk_bytes_read == one_pass);  // 19 rows, 8 sequences: the trunk once
  uint64_t distinct = 0;
  for (int l = 0; l < c.layers; ++l) distinct += static_cast<uint64_t>(sweep.last().distinct_experts[static_cast<size_t>(l)]);
  const uint64_t requests = (after.expert_hits + after.expert_misses) - (before.expert_hits + before.expert_misses);
  CHECK(requests == distinct);  // each needed expert asked for once per layer
  CHECK(after.expert_misses - before.expert_misses <= distinct);
  CHECK(after.expert_misses - before.expert_misses > 0);
}

// Keeps boundaries in memory: stops the sweep at `stop_at` after copying it, and hands the
// copy to the next sweep's resume.
struct MemoryProgress : SweepProgress {
  int stop_at = 0;
  std::vector<int> seen;  // the boundaries offered, in order
  int saved_layer = 0, saved_banked = 0;
  std::vector<float> h, bank;
  Status resume(SweepBoundary& b) override {
    if (saved_layer == 0) return Status();
    b.layer = saved_layer;
    b.banked = saved_banked;
    std::copy(h.begin(), h.end(), b.h);
    const size_t n = h.size();
    for (int j = 0; j < saved_banked; ++j)
      std::copy_n(bank.begin() + static_cast<long>(j * n), n, b.blocks + static_cast<size_t>(j) * b.block_stride);
    return Status();
  }
  bool at_boundary(const SweepBoundary& b) override {
    seen.push_back(b.layer);
    if (b.layer != stop_at) return false;
    const size_t n = static_cast<size_t>(b.rows) * static_cast<size_t>(b.hidden);
    h.assign(b.h, b.h + n);
    bank.clear();
    for (int j = 0; j < b.banked; ++j) {
      const float* e = b.blocks + static_cast<size_t>(j) * b.block_stride;
      bank.insert(bank.end(), e, e + n);
    }
    saved_layer = b.layer;
    saved_banked = b.banked;
    return true;
  }
};

TEST_CASE("a sweep stopped at any layer boundary and resumed there computes the same bits",
          "[engine][sweep]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  const uint64_t min = testing::plan_minimum(dir, testing::small_model_options({.context = 64}));
  auto model = Model::open(dir, testing::small_model_options({.budget = min, .context = 64}));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  const size_t vocab = static_cast<size_t>(c.vocab);
  const Window w = window(c.vocab);
  SequenceState prefix = SequenceState::empty(c);
  {
    Session s(**model, SessionOptions{4});
    REQUIRE(s.feed(w.prefix).ok());
    prefix = s.state();
  }
  // Every document and branch with all its logits; no final states (a resumed sweep has none).
  struct Run {
    std::vector<SweepSequence> seqs;
    std::vector<std::vector<float>> logits;
  };
  auto make = [&] {
    Run r;
    r.logits.resize(w.docs.size() + w.branches.size());
    for (size_t i = 0; i < w.docs.size(); ++i) {
      r.logits[i].resize(w.docs[i].size() * vocab);
      r.seqs.push_back(SweepSequence{w.docs[i], w.after_prefix[i] ? &prefix : nullptr, -1, LogitsWanted::kAll,
                                     r.logits[i].data()});
    }
    for (size_t b = 0; b < w.branches.size(); ++b) {
      const auto& [doc, ids] = w.branches[b];
      auto& out = r.logits[w.docs.size() + b];
      out.resize(ids.size() * vocab);
      r.seqs.push_back(SweepSequence{ids, nullptr, doc, LogitsWanted::kAll, out.data()});
    }
    return r;
  };
  Run whole = make();
  Sweep plain(c, (*model)->weights(), SweepOptions{4});
  REQUIRE(plain.run(whole.seqs).ok());
  for (int layer = 1; layer < c.layers; ++layer) {
    INFO("stopped before layer " << layer);
    MemoryProgress progress;
    progress.stop_at = layer;
    Run first = make();
    Sweep sweep(c, (*model)->weights(), SweepOptions{4});
    const Status stopped = sweep.run(first.seqs, &progress);
    CHECK(stopped.code() == StatusCode::kCancelled);
    std::vector<int> offered;
    for (int l = 1; l <= layer; ++l) offered.push_back(l);
    CHECK(progress.seen == offered);
    progress.stop_at = 0;
    progress.seen.clear();
    Run second = make();
    REQUIRE(sweep.run(second.seqs, &progress).ok());
    CHECK(progress.seen.size() == static_cast<size_t>(c.layers - 1 - layer));
    for (size_t i = 0; i < whole.logits.size(); ++i) CHECK(same_bits(second.logits[i], whole.logits[i]));
  }
  // A resume that does not match the model's boundaries, and a final state with progress.
  struct Wrong : MemoryProgress {
    Status resume(SweepBoundary& b) override {
      b.layer = 1;
      b.banked = 7;
      return Status();
    }
  } wrong;
  Run bad = make();
  Sweep sweep(c, (*model)->weights());
  CHECK(sweep.run(bad.seqs, &wrong).code() == StatusCode::kInvalidArgument);
  SequenceState final_state;
  Run with_final = make();
  with_final.seqs[0].final_state = &final_state;
  MemoryProgress none;
  CHECK(sweep.run(with_final.seqs, &none).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a sweep refuses a malformed window and does nothing", "[engine][sweep]") {
  auto model = Model::open(testing::golden_dir("tiny-mxfp4"));
  REQUIRE(model.ok());
  Sweep sweep((*model)->config(), (*model)->weights());
  const std::vector<int32_t> ids = {1, 2};
  std::vector<SweepSequence> none;
  CHECK(sweep.run(none).code() == StatusCode::kInvalidArgument);
  std::vector<SweepSequence> later = {SweepSequence{ids, nullptr, 1}, SweepSequence{ids}};
  CHECK(sweep.run(later).code() == StatusCode::kInvalidArgument);
  const std::vector<int32_t> outside = {(*model)->config().vocab};
  std::vector<SweepSequence> bad = {SweepSequence{outside}};
  CHECK(sweep.run(bad).code() == StatusCode::kInvalidArgument);
  std::vector<SweepSequence> no_dest = {SweepSequence{ids, nullptr, -1, LogitsWanted::kAll}};
  CHECK(sweep.run(no_dest).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace nj
