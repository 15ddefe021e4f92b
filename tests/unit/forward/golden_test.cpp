// The engine against the project's own float64 numpy reference (tests/golden/, written by
// tests/reference/make_golden.py): teacher forcing, greedy decode by full recompute, and
// incremental decode with carried state must agree on every token, logits within 1e-4.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/runtime/model.h"
#include "engine/ops/cpu.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "tests/unit/split_every_loop.h"

namespace nj {
namespace {

constexpr double kLogitTol = 1e-4;

struct Golden {
  std::string dir;
  std::vector<int32_t> prompt, greedy, forced;
  std::vector<std::vector<double>> logits;  // per position of prompt + greedy
};

Golden load_golden(const std::string& name) {
  Golden g;
  g.dir = std::string(NJ_SOURCE_DIR) + "/tests/golden/" + name;
  std::ifstream in(g.dir + "/expected.json");
  REQUIRE(in.good());
  auto j = nlohmann::json::parse(in);
  g.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  g.greedy = j["greedy_ids"].get<std::vector<int32_t>>();
  g.forced = j["teacher_forced_argmax"].get<std::vector<int32_t>>();
  g.logits = j["logits"].get<std::vector<std::vector<double>>>();
  return g;
}

std::unique_ptr<Model> open(const Golden& g) {
  auto m = Model::open(g.dir);
  INFO(m.status().to_string());
  REQUIRE(m.ok());
  return std::move(m).value();
}

double max_diff(const float* got, const std::vector<double>& want) {
  double d = 0;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(got[i]) - want[i]));
  return d;
}

const char* kFixtures[] = {"tiny-mxfp4", "tiny-bf16-flat", "tiny-sharded"};

TEST_CASE("teacher forcing matches the reference at every position", "[engine][golden]") {
  for (const char* name : kFixtures) {
    INFO("fixture " << name);
    Golden g = load_golden(name);
    auto model = open(g);
    std::vector<int32_t> seq = g.prompt;
    seq.insert(seq.end(), g.greedy.begin(), g.greedy.end());
    Session s(*model);
    std::vector<float> all;
    REQUIRE(s.feed(seq, &all).ok());
    const size_t V = static_cast<size_t>(model->config().vocab);
    double worst = 0;
    for (size_t t = 0; t < seq.size(); ++t) {
      INFO("position " << t);
      CHECK(argmax(std::span<const float>(&all[t * V], V)) == g.forced[t]);
      worst = std::max(worst, max_diff(&all[t * V], g.logits[t]));
    }
    INFO("max |logit - reference| = " << worst);
    CHECK(worst <= kLogitTol);
  }
}

TEST_CASE("greedy decode by full recompute matches the reference", "[engine][golden]") {
  for (const char* name : kFixtures) {
    INFO("fixture " << name);
    Golden g = load_golden(name);
    auto model = open(g);
    std::vector<int32_t> seq = g.prompt;
    for (size_t i = 0; i < g.greedy.size(); ++i) {
      Session s(*model);  // a fresh sequence each step: no carried state
      REQUIRE(s.feed(seq).ok());
      const int32_t next = argmax(s.last_logits());
      INFO("step " << i);
      REQUIRE(next == g.greedy[i]);
      seq.push_back(next);
    }
  }
}

TEST_CASE("incremental decode with carried KDA and MLA state matches the reference", "[engine][golden]") {
  for (const char* name : kFixtures) {
    INFO("fixture " << name);
    Golden g = load_golden(name);
    auto model = open(g);
    Session s(*model);
    REQUIRE(s.feed(g.prompt).ok());
    double worst = max_diff(s.last_logits().data(), g.logits[g.prompt.size() - 1]);
    for (size_t i = 0; i < g.greedy.size(); ++i) {
      const int32_t next = argmax(s.last_logits());
      INFO("step " << i);
      REQUIRE(next == g.greedy[i]);
      const int32_t one[1] = {next};
      REQUIRE(s.feed(one).ok());
      worst = std::max(worst, max_diff(s.last_logits().data(), g.logits[g.prompt.size() + i]));
    }
    INFO("max |logit - reference| = " << worst);
    CHECK(worst <= kLogitTol);
  }
}

// Logits of a full pass under the current process settings.
std::vector<float> run_all(Model& model, const std::vector<int32_t>& seq, int chunk) {
  Session s(model, SessionOptions{chunk});
  std::vector<float> all;
  REQUIRE(s.feed(seq, &all).ok());
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("logits are bit-identical across threads, SIMD levels and prefill chunking", "[engine][determinism]") {
  Golden g = load_golden("tiny-mxfp4");
  auto model = open(g);
  std::vector<int32_t> seq = g.prompt;
  seq.insert(seq.end(), g.greedy.begin(), g.greedy.end());
  const SimdLevel best = detect_simd_level();
  REQUIRE(force_simd_level(SimdLevel::kScalar).ok());
  omp_set_num_threads(1);
  const std::vector<float> reference = run_all(*model, seq, 64);
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (level > best) continue;
    REQUIRE(force_simd_level(level).ok());
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const testing::SplitEveryLoop split;  // (with 1 thread, no loop splits anyway)
      for (int chunk : {1, 7, 64}) {
        INFO("simd " << simd_level_name(level) << ", threads " << threads << ", chunk " << chunk);
        CHECK(same_bits(run_all(*model, seq, chunk), reference));
      }
    }
  }
  REQUIRE(force_simd_level(best).ok());
}

}  // namespace
}  // namespace nj
