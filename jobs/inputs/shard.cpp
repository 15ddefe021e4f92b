// The shard function and the "I/N" syntax (formats in jobs/shard.h).
#include "jobs/inputs/shard.h"

#include <cassert>
#include <charconv>
#include <optional>

// Header-only: the hash is inlined here, so nightjar_jobs needs no link to libxxhash.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace nj::jobs {
namespace {

// A decimal number without sign, or nullopt.
std::optional<int> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != text.npos)
    return std::nullopt;
  int v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

}  // namespace

Result<Shard> parse_shard(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return invalid_argument("shard '" + std::string(text) + "': " + why);
  };
  const size_t slash = text.find('/');
  if (slash == text.npos) return bad("expected INDEX/COUNT, e.g. 0/3");
  const auto index = parse_count(text.substr(0, slash));
  const auto count = parse_count(text.substr(slash + 1));
  if (!index || !count) return bad("expected INDEX/COUNT with decimal numbers, e.g. 0/3");
  if (*count < 1 || *count > kMaxShards)
    return bad("the count must be 1.." + std::to_string(kMaxShards));
  if (*index >= *count) return bad("the index must be below the count (0-based)");
  return Shard{*index, *count};
}

uint64_t custom_id_hash(std::string_view custom_id) {
  return XXH64(custom_id.data(), custom_id.size(), 0);
}

int shard_of(std::string_view custom_id, int count) {
  assert(count >= 1);
  return static_cast<int>(custom_id_hash(custom_id) % static_cast<uint64_t>(count));
}

}  // namespace nj::jobs
