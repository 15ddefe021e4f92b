// The label trie and classification math on synthetic logits (no model).
#include "jobs/spec/label_trie.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

namespace nj::jobs {
namespace {

// A logits row of `vocab` entries, all `base` except the given (token, value) pairs.
std::vector<float> row(int vocab, std::initializer_list<std::pair<int, float>> set,
                       float base = 0.0f) {
  std::vector<float> r(static_cast<size_t>(vocab), base);
  for (auto [t, v] : set) r[static_cast<size_t>(t)] = v;
  return r;
}

double softmax_at(const std::vector<float>& r, int t) {
  double sum = 0;
  for (float v : r) sum += std::exp(static_cast<double>(v));
  return std::exp(static_cast<double>(r[static_cast<size_t>(t)])) / sum;
}

TEST_CASE("labels with distinct first tokens need no decode step and score from the root",
          "[jobs][classify]") {
  auto trie = LabelTrie::build({{5}, {7, 8}, {9}}, {"billing", "feature request", "bug"});
  REQUIRE(trie.ok());
  CHECK(trie->branch_paths().empty());
  CHECK(trie->feed_paths().empty());
  const auto root = row(16, {{5, 2.0f}, {7, 1.0f}, {9, -1.0f}, {3, 4.0f}});
  auto s = trie->score(root, {});
  REQUIRE(s.probabilities.size() == 3);
  const double a = std::exp(2.0), b = std::exp(1.0), c = std::exp(-1.0);
  CHECK(s.probabilities[0] == Approx(a / (a + b + c)).epsilon(1e-12));
  CHECK(s.probabilities[1] == Approx(b / (a + b + c)).epsilon(1e-12));
  CHECK(std::accumulate(s.probabilities.begin(), s.probabilities.end(), 0.0) ==
        Approx(1.0).epsilon(1e-12));
  CHECK(s.best == 0);
  CHECK(s.margin == Approx((a - b) / (a + b + c)).epsilon(1e-12));
  // The forced second token of "feature request" does not count: token 3's mass at the root
  // (outside the labels) does not either.
}

TEST_CASE("shared first tokens are scored at the branching node reached by teacher forcing",
          "[jobs][classify]") {
  // "feature request" = 7 8, "feature idea" = 7 4 10, "bug" = 9, "billing" = 5 6 (forced 6).
  auto trie = LabelTrie::build({{7, 8}, {7, 4, 10}, {9}, {5, 6}},
                               {"feature request", "feature idea", "bug", "billing"});
  REQUIRE(trie.ok());
  REQUIRE(trie->branch_paths() == std::vector<std::vector<int32_t>>{{7}});
  REQUIRE(trie->feed_paths() == std::vector<std::vector<int32_t>>{{7}});
  CHECK(trie->branch_index(std::vector<int32_t>{7}) == 0);
  CHECK(trie->branch_index(std::vector<int32_t>{7, 4}) == -1);  // one child: forced
  CHECK(trie->branch_index(std::vector<int32_t>{5}) == -1);
  CHECK(trie->branch_index(std::vector<int32_t>{}) == -1);

  const auto root = row(12, {{7, 3.0f}, {9, 1.0f}, {5, 0.5f}});
  const auto after7 = row(12, {{8, 0.25f}, {4, 1.5f}, {11, 5.0f}});
  std::vector<std::span<const float>> branch = {after7};
  auto s = trie->score(root, branch);
  // Independent computation: product of full-softmax probabilities at branching nodes.
  const double fr = softmax_at(root, 7) * softmax_at(after7, 8);
  const double fi = softmax_at(root, 7) * softmax_at(after7, 4);
  const double bug = softmax_at(root, 9), billing = softmax_at(root, 5);
  const double z = fr + fi + bug + billing;
  CHECK(s.probabilities[0] == Approx(fr / z).epsilon(1e-12));
  CHECK(s.probabilities[1] == Approx(fi / z).epsilon(1e-12));
  CHECK(s.probabilities[2] == Approx(bug / z).epsilon(1e-12));
  CHECK(s.probabilities[3] == Approx(billing / z).epsilon(1e-12));
  // "bug" wins: the mass after "feature" goes mostly to token 11, outside the labels.
  CHECK(s.best == 2);
  CHECK(s.margin == Approx((bug - billing) / z).epsilon(1e-12));
  CHECK(s.log_scores[2] == Approx(std::log(bug)).epsilon(1e-12));
}

TEST_CASE("nested branching nodes are all reached by the deepest feed paths", "[jobs][classify]") {
  auto trie = LabelTrie::build({{1, 2, 3}, {1, 2, 4}, {1, 5}, {6}}, {"a", "b", "c", "d"});
  REQUIRE(trie.ok());
  CHECK(trie->branch_paths() == std::vector<std::vector<int32_t>>{{1}, {1, 2}});
  CHECK(trie->feed_paths() == std::vector<std::vector<int32_t>>{{1, 2}});
  const auto root = row(8, {{1, 1.0f}, {6, 0.0f}});
  const auto n1 = row(8, {{2, 2.0f}, {5, 0.0f}});
  const auto n12 = row(8, {{3, 0.0f}, {4, 0.0f}});
  std::vector<std::span<const float>> branch = {n1, n12};
  auto s = trie->score(root, branch);
  CHECK(s.probabilities[0] == Approx(s.probabilities[1]));  // equal logits at the last branch
  CHECK(std::accumulate(s.probabilities.begin(), s.probabilities.end(), 0.0) ==
        Approx(1.0).epsilon(1e-12));
  const double pa = softmax_at(root, 1) * softmax_at(n1, 2) * softmax_at(n12, 3);
  const double pc = softmax_at(root, 1) * softmax_at(n1, 5);
  CHECK(s.probabilities[0] / s.probabilities[2] == Approx(pa / pc).epsilon(1e-12));
}

TEST_CASE("a tie picks the first label and leaves a zero margin", "[jobs][classify]") {
  auto trie = LabelTrie::build({{1}, {2}}, {"x", "y"});
  REQUIRE(trie.ok());
  auto s = trie->score(row(4, {}), {});
  CHECK(s.best == 0);
  CHECK(s.margin == 0.0);
  CHECK(s.probabilities[0] == 0.5);
}

TEST_CASE("a single label gets probability one and margin one", "[jobs][classify]") {
  auto trie = LabelTrie::build({{3, 4}}, {"only"});
  REQUIRE(trie.ok());
  auto s = trie->score(row(8, {{3, -5.0f}}), {});
  CHECK(s.probabilities == std::vector<double>{1.0});
  CHECK(s.margin == 1.0);
}

TEST_CASE("labels that tokenize to nothing, repeat or prefix another are rejected by name",
          "[jobs][classify]") {
  auto empty = LabelTrie::build({{1}, {}}, {"a", "blank"});
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.status().message(), Catch::Contains("'blank' tokenizes to nothing"));
  auto same = LabelTrie::build({{1, 2}, {1, 2}}, {"a", "b"});
  REQUIRE_FALSE(same.ok());
  CHECK_THAT(same.status().message(), Catch::Contains("'a' and 'b' have the same tokens"));
  auto prefix = LabelTrie::build({{1, 2, 3}, {1, 2}}, {"bug report", "bug"});
  REQUIRE_FALSE(prefix.ok());
  CHECK_THAT(prefix.status().message(),
             Catch::Contains("label 'bug' is a token prefix of label 'bug report'"));
}

TEST_CASE("log_softmax_at is stable for large logits", "[jobs][classify]") {
  const auto r = row(3, {{0, 1000.0f}, {1, 999.0f}, {2, -1000.0f}});
  CHECK(log_softmax_at(r, 0) == Approx(-std::log1p(std::exp(-1.0))).epsilon(1e-12));
  CHECK(std::isfinite(log_softmax_at(r, 2)));
}

}  // namespace
}  // namespace nj::jobs
