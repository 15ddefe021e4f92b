// Log-probabilities of generated tokens: log-softmax of the raw logits, top-k in order.
#include "engine/session/logprobs.h"

#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

namespace nj {
namespace {

TEST_CASE("logprobs are the log-softmax of the logits, most likely first", "[engine][logprobs]") {
  // Logits log(1..4) + 7 are the distribution 0.1, 0.2, 0.3, 0.4 (a shift changes nothing).
  const std::vector<float> logits = {std::log(1.0f) + 7, std::log(2.0f) + 7, std::log(3.0f) + 7,
                                     std::log(4.0f) + 7};
  const TokenLogprobs lp = token_logprobs(logits, 2, 2);
  CHECK(lp.logprob == Approx(std::log(0.3)).epsilon(1e-6));
  REQUIRE(lp.top.size() == 2);
  CHECK(lp.top[0].first == 3);
  CHECK(lp.top[0].second == Approx(std::log(0.4)).epsilon(1e-6));
  CHECK(lp.top[1].first == 2);
  CHECK(lp.top[1].second == lp.logprob);
  CHECK(token_logprobs(logits, 0, 0).top.empty());
  CHECK(token_logprobs(logits, 0, 99).top.size() == 4);  // at most the vocabulary
}

TEST_CASE("logprobs: ties go to the lower id, NaN is impossible, huge logits do not overflow",
          "[engine][logprobs]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {1.0f, 3.0f, nan, 3.0f};
  const TokenLogprobs lp = token_logprobs(logits, 3, 3);
  REQUIRE(lp.top.size() == 3);
  CHECK(lp.top[0].first == 1);
  CHECK(lp.top[1].first == 3);
  CHECK(lp.top[2].first == 0);
  CHECK(lp.top[0].second == Approx(std::log(std::exp(3.0) / (2 * std::exp(3.0) + std::exp(1.0)))));
  CHECK(std::isinf(token_logprobs(logits, 2, 0).logprob));
  const std::vector<float> big = {1e30f, 1e30f};
  CHECK(token_logprobs(big, 0, 0).logprob == Approx(std::log(0.5)));
}

}  // namespace
}  // namespace nj
