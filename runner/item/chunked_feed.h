// An item's tokens fed in prefill chunks with the checks `run` makes between them: the one
// loop of the generate runner's prompt and replay (item_runner.h) and the classify runner's
// prefix and document (classify_runner.h). Each chunk is one ItemSession::feed, whose passes
// engine/forward/batch.h's feed_in_chunks cuts and shares with the rest of the batch; between
// chunks the item sees a stop, a lost lease or a due checkpoint before it feeds more.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runner/item/item_runner.h"

namespace nj::runner {

// Where a chunked feed (or an item's wait) left off.
enum class FeedStep {
  kOk,           // everything fed (or nothing to stop for)
  kDiverged,     // a replayed token was not drawn again (the generate runner's check)
  kStopped,      // a graceful stop was asked for (StopControl::reason())
  kLost,         // the item's lease is gone
  kEngineError,  // the engine failed: FeedError says how
};

// The lease first (a lost item writes nothing, not even a stop), then a stop.
FeedStep lease_and_stop(const ItemEnv& env);

struct FeedError {
  std::string message;
  bool final = false;  // deterministic (non-finite values): every attempt would repeat it
};

// What a chunked feed works with. All references must outlive the feed.
struct ChunkedFeed {
  ItemSession& session;
  int chunk;                   // tokens per ItemSession::feed (ItemRunOptions::prefill_chunk)
  EngineUsage& usage;          // gains each chunk's share of its passes (feed_counted)
  double& seconds;             // gains the time spent feeding
  ProgressReporter& progress;  // told `what`, offset + fed of offset + ids.size() per chunk
  const char* what;            // "prompt", "replay", "prefix", "document"
  int64_t offset = 0;          // tokens of the same kind fed before `ids`
  FeedError& error;            // set on kEngineError
};

// Called after each chunk with the tokens of `ids` fed so far and the chunk's logits
// ([chunk tokens][vocab], empty unless the feed asked for rows); anything but kOk ends the
// feed with that step. Errors (a store write) end it too.
using AfterChunk = std::function<Result<FeedStep>(int64_t fed, std::span<const float> rows)>;

// Feeds `ids` chunk by chunk: each chunk's time into `seconds`, its usage into `usage`, then
// the progress line, then `after`. Returns kOk when every token was fed and every `after`
// said kOk; kEngineError (with `error` set) when a feed failed. `rows`: when given, each
// chunk's logits land there and `after` sees them.
Result<FeedStep> feed_chunks(const ChunkedFeed& feed, std::span<const int32_t> ids,
                             const AfterChunk& after, std::vector<float>* rows = nullptr);

}  // namespace nj::runner
