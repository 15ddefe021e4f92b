// Speculative decoding of one sequence on a Session: the step that replaces plain
// decoding's "feed the token just chosen".
//
//   plain:        t = sample(last_logits); emit t; feed t
//   speculative:  t = sample(last_logits); emit t; feed t + drafts (one tentative pass);
//                 emit the drafts plain decoding would have drawn; keep their rows
//
// Afterwards the session, the sampler and the output are exactly where plain decoding would
// be after feeding the last emitted token (or, when a draft ended the generation, after
// choosing it): the next step samples as plain decoding does, a checkpoint saved now is a
// plain checkpoint, and nothing after this depends on whether speculation ran.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/model/sampler.h"
#include "engine/model/session.h"
#include "engine/spec/speculator.h"
#include "engine/util/status.h"

namespace nj {

// Not thread-safe. The session must outlive it and be created with
// SessionOptions::tentative_rows >= 1 + the speculator's most drafts (or grow on first use).
class SpeculativeDecoder {
 public:
  SpeculativeDecoder(Session& session, Speculator speculator, PassCost cost)
      : session_(session), speculator_(std::move(speculator)), cost_(cost) {}

  // Feeds `next` (the token just chosen and emitted) with drafts, at most `room` (the
  // tokens the sequence may still emit after `next`, less one). Accepted drafts are
  // appended to `out`; `finishes(token)` says whether the generation ends with one.
  // Errors are the session's (the state is then unspecified, as for Session::feed).
  Result<Acceptance> feed(Sampler& sampler, int32_t next, int room,
                          const std::function<bool(int32_t)>& finishes, std::vector<int32_t>* out);

  const SpeculationStats& stats() const { return speculator_.stats(); }

 private:
  Session& session_;
  Speculator speculator_;
  PassCost cost_;
  std::vector<float> logits_;  // [rows][vocab] of the last pass
};

}  // namespace nj
