// A batch is a throughput dial, never a quality dial: every sequence's logits in a batched
// pass are bit-identical (memcmp) to running that sequence alone, whatever shares its
// passes (other prompts and positions, prefill chunks mixed with decode steps, sequences
// joining and leaving), under every memory budget, thread count and SIMD level. And the
// planner's activation and state estimate is what a pass really allocates.
#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <filesystem>

#include "engine/runtime/model.h"
#include "engine/forward/forward.h"
#include "engine/ops/cpu.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "tests/unit/model/test_models.h"
#include "tests/unit/model/test_options.h"
#include "tests/unit/sanitized.h"
#include "tests/unit/split_every_loop.h"

namespace nj {
namespace {

// One sequence of the workload: a prompt, then greedy decode steps.
struct Script {
  std::vector<int32_t> prompt;
  int decode = 0;
};

struct Trace {
  std::vector<float> logits;    // after every token fed, in order: [positions][vocab]
  std::vector<int32_t> greedy;  // the decoded tokens
};

// Sequences of different lengths (and so different positions when they meet in a pass).
std::vector<Script> workload(int n, int vocab) {
  std::vector<Script> s;
  for (int i = 0; i < n; ++i) {
    Script x;
    const int len = 1 + (i * 7) % 11;
    for (int t = 0; t < len; ++t) x.prompt.push_back((i * 131 + t * 17 + 3) % vocab);
    x.decode = 1 + (i * 5) % 4;
    s.push_back(x);
  }
  return s;
}

Trace solo(Model& model, const Script& s) {
  Trace r;
  Session session(model, SessionOptions{3});
  std::vector<float> rows;
  REQUIRE(session.feed(s.prompt, &rows).ok());
  r.logits = rows;
  for (int i = 0; i < s.decode; ++i) {
    const int32_t next[1] = {argmax(session.last_logits())};
    r.greedy.push_back(next[0]);
    REQUIRE(session.feed(next, &rows).ok());
    r.logits.insert(r.logits.end(), rows.begin(), rows.end());
  }
  return r;
}

// Runs the scripts through one Forward, at most `batch` sequences per pass; a sequence joins
// when another leaves. Sequences prefill in chunks of varying size (1..5 tokens), so passes
// mix prefill chunks of some sequences with decode steps of others.
std::vector<Trace> batched(Model& model, const std::vector<Script>& scripts, int batch,
                           const ForwardOptions& fo) {
  const size_t vocab = static_cast<size_t>(model.config().vocab);
  struct Live {
    size_t index;
    SequenceState state;
    size_t fed = 0;
    int decoded = 0;
  };
  std::vector<Trace> out(scripts.size());
  std::deque<size_t> queue;
  for (size_t i = 0; i < scripts.size(); ++i) queue.push_back(i);
  std::vector<Live> live;
  Forward forward(model.config(), model.weights(), fo);
  int pass = 0;
  while (!live.empty() || !queue.empty()) {
    while (static_cast<int>(live.size()) < batch && !queue.empty()) {
      live.push_back(Live{queue.front(), SequenceState::empty(model.config())});
      queue.pop_front();
    }
    std::vector<std::vector<int32_t>> ids(live.size());
    std::vector<std::vector<float>> logits(live.size());
    std::vector<SeqStep> steps(live.size());
    for (size_t k = 0; k < live.size(); ++k) {
      Live& l = live[k];
      const Script& s = scripts[l.index];
      if (l.fed < s.prompt.size()) {
        const size_t n = std::min(s.prompt.size() - l.fed, static_cast<size_t>(1 + (pass + k) % 5));
        ids[k].assign(s.prompt.begin() + static_cast<long>(l.fed),
                      s.prompt.begin() + static_cast<long>(l.fed + n));
      } else {
        ids[k] = {argmax(l.state.last_logits)};
        out[l.index].greedy.push_back(ids[k][0]);
      }
      logits[k].resize(ids[k].size() * vocab);
      steps[k] = SeqStep{&l.state, ids[k], LogitsWanted::kAll, logits[k].data()};
    }
    const Status st = forward.run(steps);
    INFO(st.to_string());
    REQUIRE(st.ok());
    CHECK(forward.last_pass().sequences == static_cast<int>(live.size()));
    for (size_t k = 0; k < live.size(); ++k) {
      Live& l = live[k];
      Trace& t = out[l.index];
      t.logits.insert(t.logits.end(), logits[k].begin(), logits[k].end());
      if (l.fed < scripts[l.index].prompt.size())
        l.fed += ids[k].size();
      else
        ++l.decoded;
    }
    std::erase_if(live, [&](const Live& l) { return l.decoded == scripts[l.index].decode; });
    ++pass;
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int longest(const std::vector<Script>& scripts) {
  int n = 0;
  for (const Script& s : scripts) n = std::max(n, static_cast<int>(s.prompt.size()) + s.decode);
  return n;
}

ModelOptions options(uint64_t budget, int batch, int context) {
  return testing::small_model_options(
      {.budget = budget, .batch = batch, .context = context, .prefill_chunk = 5});
}

// Every batch size, at every budget multiple, every SIMD level and both thread counts:
// each sequence's logits and tokens equal its solo run's.
void check_batches(const std::string& dir, const std::vector<int>& batches,
                   const std::vector<double>& multiples, int sequences, bool every_level = true) {
  auto resident = Model::open(dir, options(0, 1, 64));
  REQUIRE(resident.ok());
  const std::vector<Script> scripts = workload(sequences, (*resident)->config().vocab);
  const int context = longest(scripts);
  const SimdLevel best = detect_simd_level();
  REQUIRE(force_simd_level(SimdLevel::kScalar).ok());
  omp_set_num_threads(1);
  std::vector<Trace> alone;
  for (const Script& s : scripts) alone.push_back(solo(**resident, s));

  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (level > best || (!every_level && level != best)) continue;
    REQUIRE(force_simd_level(level).ok());
    // The sanitizers judge memory accesses, which one thread count (2: the split) covers; the
    // normal build checks that the bits do not depend on it.
    for (int threads : testing::kSanitized ? std::vector<int>{2} : std::vector<int>{1, 2}) {
      omp_set_num_threads(threads);
      const testing::SplitEveryLoop split;  // (with 1 thread, no loop splits anyway)
      for (int batch : batches) {
        const uint64_t min = testing::plan_minimum(dir, options(1, batch, context));
        for (double m : multiples) {
          const uint64_t budget = m == 0 ? 0 : static_cast<uint64_t>(static_cast<double>(min) * m);
          INFO("simd " << simd_level_name(level) << ", threads " << threads << ", batch " << batch
                       << ", budget " << budget << " (" << m << " x the batch minimum " << min
                       << ")");
          auto model = Model::open(dir, options(budget, batch, context));
          INFO(model.status().to_string());
          REQUIRE(model.ok());
          const ForwardOptions fo{std::max(5, batch), batch, context, false};
          const std::vector<Trace> got = batched(**model, scripts, batch, fo);
          for (size_t i = 0; i < scripts.size(); ++i) {
            INFO("sequence " << i);
            CHECK(got[i].greedy == alone[i].greedy);
            CHECK(same_bits(got[i].logits, alone[i].logits));
          }
        }
      }
    }
  }
  omp_set_num_threads(2);
  REQUIRE(force_simd_level(best).ok());
}

// Resident (0) and 1x, 2x, 6x the batch's minimum budget; batches of 1, 2, 3, 8 and 16.
TEST_CASE("every sequence of a batch computes the bits it computes alone (MXFP4 experts)",
          "[engine][batch]") {
  check_batches(testing::golden_dir("tiny-mxfp4"), {1, 2, 3, 8, 16}, {0, 1.0, 2.0, 6.0}, 19);
}

TEST_CASE(
    "every sequence of a batch computes the bits it computes alone (BF16 experts, flat config)",
    "[engine][batch]") {
  check_batches(testing::golden_dir("tiny-bf16-flat"), {1, 2, 3, 8, 16}, {0, 1.0, 2.0, 6.0}, 19);
}

TEST_CASE("every sequence of a batch computes the bits it computes alone (sharded model)",
          "[engine][batch]") {
  check_batches(testing::golden_dir("tiny-sharded"), {3, 16}, {0, 1.0, 6.0}, 19,
                /*every_level=*/false);
}

// The 230 MB model: the default suite runs one batch of 8 on the detected SIMD level (at 1x
// the minimum every pass streams the whole trunk); `-L large` every level and batch size.
TEST_CASE("every sequence of a batch computes the bits it computes alone (a 230 MB model)",
          "[engine][batch][model-small]") {
  const std::string dir =
      std::string(NJ_TEST_MODELS_DIR) + "/small";  // ctest fixture make_model_small
  REQUIRE(std::filesystem::exists(dir + "/config.json"));
  check_batches(dir, {8}, {0, 1.0, 6.0}, 8, /*every_level=*/false);
}

TEST_CASE(
    "every sequence of a batch computes the bits it computes alone (a 230 MB model, every level)",
    "[engine][batch][model-small-large]") {
  const std::string dir =
      std::string(NJ_TEST_MODELS_DIR) + "/small";  // ctest fixture make_model_small
  REQUIRE(std::filesystem::exists(dir + "/config.json"));
  check_batches(dir, {1, 2, 3, 8, 16}, {0, 1.0, 2.0, 6.0}, 17);
}

TEST_CASE("a pass refuses a malformed batch and consumes nothing", "[engine][batch]") {
  auto model = Model::open(testing::golden_dir("tiny-mxfp4"));
  REQUIRE(model.ok());
  Forward forward((*model)->config(), (*model)->weights());
  SequenceState a = SequenceState::empty((*model)->config());
  const std::vector<int32_t> ids = {3, 7};
  const std::vector<int32_t> bad = {3, (*model)->config().vocab};
  auto refused = [&](std::vector<SeqStep> steps, const char* what) {
    INFO(what);
    const Status s = forward.run(steps);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(a.position == 0);
    CHECK(a.tokens.empty());
  };
  refused({}, "no sequence");
  refused({SeqStep{&a, {}}}, "no tokens");
  refused({SeqStep{&a, ids}, SeqStep{&a, ids}}, "the same state twice");
  refused({SeqStep{&a, ids, LogitsWanted::kAll, nullptr}}, "all logits without a destination");
  refused({SeqStep{&a, bad}}, "an id outside the vocabulary");
  SequenceState other;  // shaped for no model
  refused({SeqStep{&a, ids}, SeqStep{&other, ids}}, "a state of another shape");
}

TEST_CASE("a pass's cost is shared by its sequences in proportion to their rows",
          "[engine][batch]") {
  auto model = Model::open(testing::golden_dir("tiny-mxfp4"), options(0, 3, 32));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  Forward forward((*model)->config(), (*model)->weights(), ForwardOptions{8, 3, 32, false});
  std::vector<SequenceState> states(3, SequenceState::empty(c));
  std::vector<SequenceUsage> usage(3);
  const std::vector<std::vector<int32_t>> ids = {{1, 2, 3, 4, 5}, {6}, {7, 8}};
  std::vector<SeqStep> steps;
  for (size_t i = 0; i < 3; ++i)
    steps.push_back(SeqStep{&states[i], ids[i], LogitsWanted::kLast, nullptr, &usage[i]});
  REQUIRE(forward.run(steps).ok());
  const PassStats& p = forward.last_pass();
  CHECK(p.rows == 8);
  CHECK(p.sequences == 3);
  double compute = 0, wait = 0, bytes = 0;
  for (size_t i = 0; i < 3; ++i) {
    CHECK(usage[i].tokens == ids[i].size());
    CHECK(usage[i].passes == 1);
    CHECK(usage[i].max_batch == 3);
    CHECK(usage[i].compute_s == Approx(p.compute_s * static_cast<double>(ids[i].size()) / 8));
    compute += usage[i].compute_s;
    wait += usage[i].wait_s;
    bytes += usage[i].bytes_read;
  }
  CHECK(compute == Approx(p.compute_s));
  CHECK(wait == Approx(p.wait_s).margin(1e-12));
  CHECK(bytes == Approx(static_cast<double>(p.bytes_read())).margin(1e-6));
  // Resident: every layer is MoE past first_k_dense, and a pass of 8 rows needs at least
  // top_k distinct experts per MoE layer.
  for (int l = 0; l < c.layers; ++l)
    if (!c.is_dense(l)) CHECK(p.distinct_experts[static_cast<size_t>(l)] >= c.top_k);
}

// Heap bytes in use (arena and mmapped chunks).
uint64_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

TEST_CASE("the planner's activation and state estimate is what a batch really allocates",
          "[engine][batch][planner]") {
  const std::string dir = testing::golden_dir("tiny-mxfp4");
  for (int batch : {1, 4, 16}) {
    for (int chunk : {1, 8, 32}) {
      INFO("batch " << batch << ", prefill chunk " << chunk);
      ModelOptions o = options(0, batch, 40);
      o.plan.prefill_chunk = chunk;
      o.plan.all_logits = false;
      auto model = Model::open(dir, o);
      REQUIRE(model.ok());
      const ModelConfig& c = (*model)->config();
      const ActivationShape shape = planned_activation_shape(o.plan);
      CHECK(shape.rows == std::max(chunk, batch));
      const uint64_t estimate = activation_bytes(c, shape);
      const uint64_t states =
          static_cast<uint64_t>(batch) * sequence_state_bytes(c, o.plan.max_context);
      CHECK((*model)->plan().scratch_bytes == estimate);
      CHECK((*model)->plan().state_bytes == states);

      // A full batch at the planned shape, each sequence filled to max_context: first the
      // largest pass (a prefill of `rows` rows split over the sequences), then decode.
      const uint64_t before = heap_in_use();
      uint64_t allocated = 0;
      {
        Forward forward((*model)->config(), (*model)->weights(), ForwardOptions{shape.rows, batch, o.plan.max_context, false});
        // Nothing until its first pass: a Forward whose model only sweeps holds no pass buffers.
        CHECK(forward.activations().allocated_bytes() == 0);
        std::vector<SequenceState> st(static_cast<size_t>(batch), SequenceState::empty(c));
        int position = 0;
        while (position < o.plan.max_context) {
          const int per_seq =
              std::max(1, std::min(shape.rows / batch, o.plan.max_context - position));
          std::vector<std::vector<int32_t>> ids(
              st.size(), std::vector<int32_t>(static_cast<size_t>(per_seq), 5));
          std::vector<SeqStep> steps;
          for (size_t i = 0; i < st.size(); ++i) steps.push_back(SeqStep{&st[i], ids[i]});
          REQUIRE(forward.run(steps).ok());
          position += per_seq;
        }
        allocated = forward.activations().allocated_bytes();
        const uint64_t used = heap_in_use() - before;
        INFO("heap growth " << used << " bytes; estimate " << estimate << " + states " << states);
        // Everything the pass allocated is inside the estimate (a little slack for
        // bookkeeping vectors of a few hundred bytes each), and the buffers are the estimate
        // less the kernels' own scratch.
        CHECK(allocated == estimate - kernel_scratch_bytes(c, shape.rows));
#if !NJ_SANITIZED  // ASan's allocator keeps its heap out of mallinfo2()
        CHECK(used <= estimate + states + (64u << 10));
        CHECK(used >= allocated);
#endif
      }
    }
  }
}

}  // namespace
}  // namespace nj
