// The chunked feed with its checks (see chunked_feed.h).
#include "runner/item/chunked_feed.h"

#include <algorithm>

#include "runner/item/clock.h"

namespace nj::runner {

FeedStep lease_and_stop(const ItemEnv& env) {
  if (env.lease.lost()) return FeedStep::kLost;
  if (env.stop.reason()) return FeedStep::kStopped;
  return FeedStep::kOk;
}

Result<FeedStep> feed_chunks(const ChunkedFeed& feed, std::span<const int32_t> ids,
                             const AfterChunk& after, std::vector<float>* rows) {
  const size_t chunk = static_cast<size_t>(std::max(1, feed.chunk));
  const int64_t total = feed.offset + static_cast<int64_t>(ids.size());
  for (size_t at = 0; at < ids.size(); at += chunk) {
    const size_t n = std::min(chunk, ids.size() - at);
    const auto t0 = Clock::now();
    Status s = feed_counted(feed.session, ids.subspan(at, n), rows, /*decode=*/false, feed.usage);
    feed.seconds += seconds_since(t0);
    if (!s.ok()) {
      feed.error = FeedError{s.message(), s.code() == StatusCode::kNonFinite};
      return FeedStep::kEngineError;
    }
    const int64_t fed = static_cast<int64_t>(at + n);
    feed.progress.feeding(feed.what, feed.offset + fed, total);
    NJ_ASSIGN_OR_RETURN(
        FeedStep step, after(fed, rows ? std::span<const float>(*rows) : std::span<const float>()));
    if (step != FeedStep::kOk) return step;
  }
  return FeedStep::kOk;
}

}  // namespace nj::runner
