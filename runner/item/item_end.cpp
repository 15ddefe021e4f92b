// The ends of an item's attempt short of its finish (see item_end.h).
#include "runner/item/item_end.h"

#include <spdlog/spdlog.h>

namespace nj::runner {

AttemptReport ItemEnd::lost(int64_t generated) const {
  spdlog::warn("{}: the item was cancelled or taken over by another run; leaving it", label_);
  return AttemptReport{ItemOutcome::kLostLease, std::nullopt, "lease lost", generated};
}

Result<AttemptReport> ItemEnd::stopped(const std::string& reason, nlohmann::json detail,
                                       const Progress& progress, int64_t generated,
                                       const std::string& resumes) const {
  detail["reason"] = reason;
  NJ_ASSIGN_OR_RETURN(bool owned,
                      env_.store.release_item(claim_.item.id, env_.owner, progress, detail.dump()));
  if (!owned) return lost(generated);
  spdlog::info("{}: stopped ({}){}", label_, reason, resumes);
  return AttemptReport{ItemOutcome::kStopped, ItemState::kQueued, reason, generated};
}

Result<AttemptReport> ItemEnd::failed(const std::string& error, bool final,
                                      const Progress& progress, int64_t generated) const {
  NJ_ASSIGN_OR_RETURN(auto state,
                      env_.store.fail_attempt(claim_.item.id, env_.owner, progress, error, final));
  if (!state) return lost(generated);
  if (*state == ItemState::kFailed)
    spdlog::error("{}: failed after {} attempts: {}", label_, claim_.item.attempts + 1, error);
  else
    spdlog::warn("{}: attempt failed ({} of {} allowed): {}", label_, claim_.item.attempts + 1,
                 claim_.job.max_attempts, error);
  return AttemptReport{ItemOutcome::kAttemptFailed, *state, error, generated};
}

}  // namespace nj::runner
