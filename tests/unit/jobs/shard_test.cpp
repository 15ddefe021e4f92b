// The shard function of Slurm arrays (jobs/shard.h): stable, total, balanced; and the
// "I/N" syntax.
#include "jobs/inputs/shard.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

namespace nj::jobs {
namespace {

std::vector<std::string> doc_ids(int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back("doc-" + std::to_string(i));
  return ids;
}

TEST_CASE("the custom_id hash is XXH64 with seed 0 (published test vectors)", "[jobs][shard]") {
  // xxHash's reference values for "" and "a": the function is the specified one, not ours.
  CHECK(custom_id_hash("") == 0xef46db3751d8e999ull);
  CHECK(custom_id_hash("a") == 0xd24ec4f1a98c6e5bull);
}

TEST_CASE("shards are stable: pinned assignments never change", "[jobs][shard]") {
  // An array already running must keep its assignment across nightjar versions.
  CHECK(custom_id_hash("doc-001") == 0x95ce009a9b51d998ull);
  CHECK(shard_of("doc-001", 3) == 1);
  CHECK(shard_of("doc-001", 7) == 4);
  CHECK(shard_of("item-0", 7) == 2);
  CHECK(shard_of("ticket-42", 3) == 1);
  CHECK(shard_of("\xc3\xa9-\xc3\xbc", 7) == 1);  // UTF-8 bytes, as given
  CHECK(shard_of("anything", 1) == 0);
}

TEST_CASE("shards are total: every id is in exactly one shard, whatever the order",
          "[jobs][shard]") {
  auto ids = doc_ids(10000);
  for (int count : {1, 2, 3, 7, 64}) {
    std::vector<int> first;
    for (const auto& id : ids) {
      int owners = 0;
      for (int i = 0; i < count; ++i) owners += shard_of(id, count) == i;
      REQUIRE(owners == 1);
      first.push_back(shard_of(id, count));
    }
    // The same ids in another order get the same shards.
    std::vector<size_t> perm(ids.size());
    for (size_t k = 0; k < perm.size(); ++k) perm[k] = k;
    std::shuffle(perm.begin(), perm.end(), std::mt19937(count));
    for (size_t k : perm) REQUIRE(shard_of(ids[k], count) == first[k]);
  }
}

TEST_CASE("shards are balanced within 10 % on 10k ids", "[jobs][shard]") {
  for (const std::string prefix : {"doc-", "ticket/2026-11-30/", "req_"}) {
    std::vector<std::string> ids;
    for (int i = 0; i < 10000; ++i) ids.push_back(prefix + std::to_string(i));
    for (int count : {2, 3, 4, 5, 7, 8, 10, 16}) {
      std::vector<int> sizes(count, 0);
      for (const auto& id : ids) ++sizes[shard_of(id, count)];
      const double expected = 10000.0 / count;
      const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
      INFO(prefix << " into " << count << " shards: " << *lo << ".." << *hi);
      CHECK(*lo >= 0.9 * expected);
      CHECK(*hi <= 1.1 * expected);
    }
  }
}

TEST_CASE("shard syntax: INDEX/COUNT, 0-based, count 1..100000", "[jobs][shard]") {
  auto s = parse_shard("2/3");
  REQUIRE(s.ok());
  CHECK(s->index == 2);
  CHECK(s->count == 3);
  CHECK(s->to_string() == "2/3");
  CHECK(parse_shard("0/1").ok());
  CHECK(parse_shard("99999/100000").ok());
  for (const char* bad : {"", "3", "3/3", "-1/3", "1/0", "1/", "/3", "a/b", "1/3/4", " 1/3",
                          "0/100001", "1.0/3", "+1/3"}) {
    INFO(bad);
    auto r = parse_shard(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(std::string("'") + bad + "'") != std::string::npos);
  }
}

}  // namespace
}  // namespace nj::jobs
