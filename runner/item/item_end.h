// How an item's attempt ends before its finish, the same for every item kind (the generate
// runner, item_runner.h, and the classify runner, classify_runner.h):
//
//   stopped   a graceful stop (signal, deadline): the item goes back to the queue with the
//             work done so far, and a `released` event records why.
//   failed    an engine or input error: a failed attempt, or at once a failed item when the
//             error is final (every attempt would repeat it) or the attempts are used up.
//   lost      the lease is gone (cancelled, or taken over by another run): nothing is written.
//
// stopped and failed become lost when the store says the lease is gone meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "runner/item/item_runner.h"

namespace nj::runner {

// Speaks for one claimed item. `env` and `claim` must outlive it.
class ItemEnd {
 public:
  // `label` names the item in log lines ("job 3 item doc-7").
  ItemEnd(const ItemEnv& env, const Claim& claim, std::string label)
      : env_(env), claim_(claim), label_(std::move(label)) {}

  const std::string& label() const { return label_; }

  // The item was cancelled or taken over by another run: writes nothing. `generated`: new
  // output tokens in this attempt.
  AttemptReport lost(int64_t generated) const;

  // Puts the item back in the queue with `progress`. `detail` (a JSON object) goes into the
  // `released` event with "reason" added; `resumes` ends the log line (e.g. " at 5/64
  // tokens; it resumes from here"). Errors: the store's.
  Result<AttemptReport> stopped(const std::string& reason, nlohmann::json detail,
                             const Progress& progress, int64_t generated,
                             const std::string& resumes) const;

  // Records a failed attempt with `progress`; `final` fails the item at once. Errors: the
  // store's.
  Result<AttemptReport> failed(const std::string& error, bool final, const Progress& progress,
                            int64_t generated) const;

 private:
  const ItemEnv& env_;
  const Claim& claim_;
  std::string label_;
};

}  // namespace nj::runner
