#include "engine/util/status.h"

#include <catch2/catch.hpp>

namespace nj {
namespace {

Result<int> half(int v) {
  if (v % 2) return invalid_argument("odd value " + std::to_string(v));
  return v / 2;
}

Result<int> quarter(int v) {
  NJ_ASSIGN_OR_RETURN(int h, half(v));
  return half(h);
}

TEST_CASE("a Result carries either its value or the failing Status", "[util][status]") {
  REQUIRE(quarter(8).ok());
  CHECK(*quarter(8) == 2);
  auto bad = quarter(6);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message() == "odd value 3");
}

TEST_CASE("with_context prefixes the message and keeps the code", "[util][status]") {
  Status s = not_found("tensor 'x'").with_context("model.safetensors");
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK(s.message() == "model.safetensors: tensor 'x'");
  CHECK(s.to_string() == "not found: model.safetensors: tensor 'x'");
  CHECK(Status().with_context("ignored").ok());
}

TEST_CASE("a Result built from an OK status is an internal error, not a value", "[util][status]") {
  Result<int> r{Status()};
  CHECK_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInternal);
}

}  // namespace
}  // namespace nj
