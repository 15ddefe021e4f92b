// Speculative decoding of one sequence: the step that replaces plain decoding's "feed the
// token just chosen". The one speculative step of `generate` (on an engine Session) and of
// `run` (on the runner's ItemSession, whose passes are shared with the rest of its batch).
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
#include <span>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/session/sampler.h"
#include "engine/speculative/speculator.h"
#include "engine/util/status.h"

namespace nj {

// SessionT is a sequence the decoder feeds: engine Session, or runner ItemSession. It has
//   Status feed(std::span<const int32_t> ids)             a plain pass
//   Status feed_tentative(ids, std::vector<float>* all)   a tentative pass (batch.h), all
//                                                         receiving [ids.size()][vocab]
//   Status keep(int rows)                                 settles it (Forward::keep)
//   const SequenceState& state() const; const std::vector<float>& last_logits() const;
//   const ModelConfig& config() const
// Not thread-safe. The session must outlive the decoder and take tentative passes of
// 1 + the speculator's most drafts rows (SessionOptions::tentative_rows, or a Forward
// planned with ForwardOptions::tentative_rows).
template <class SessionT>
class SpeculativeDecoder {
 public:
  SpeculativeDecoder(SessionT& session, Speculator speculator, PassCost cost)
      : session_(session), speculator_(std::move(speculator)), cost_(cost) {}

  // Feeds `next` (the token just chosen and emitted) with drafts, at most `room` (the
  // tokens the sequence may still emit after `next`, less one). Accepted drafts are
  // appended to `out`; `finishes(token)` says whether the generation ends with one.
  // Errors are the session's (the state is then unspecified, as for Session::feed).
  // The session is settled when this returns, whatever the outcome.
  Result<Acceptance> feed(Sampler& sampler, int32_t next, int room,
                          const std::function<bool(int32_t)>& finishes, std::vector<int32_t>* out) {
    const int vocab = session_.config().vocab;
    PassLoad load;
    const std::span<const int32_t> fed =
        speculator_.feed(session_.state().tokens, next, room, cost_, &load);
    if (fed.size() == 1) {  // nothing drafted: a plain decode step
      NJ_RETURN_IF_ERROR(session_.feed(fed));
      rows_ = 0;
      return speculator_.verify(sampler, session_.last_logits(), vocab, finishes, out);
    }
    NJ_RETURN_IF_ERROR(session_.feed_tentative(fed, &logits_));
    rows_ = static_cast<int>(fed.size());
    const Acceptance a = speculator_.verify(sampler, logits_, vocab, finishes, out);
    NJ_RETURN_IF_ERROR(session_.keep(a.rows_to_keep()));
    return a;
  }

  // The logits of the last tentative pass, [rows][vocab]: row i is the distribution the
  // i-th accepted draft was drawn from (its log-probabilities). Empty after a plain step.
  std::span<const float> pass_logits() const {
    return rows_ ? std::span<const float>(logits_) : std::span<const float>();
  }

  const SpeculationStats& stats() const { return speculator_.stats(); }

 private:
  SessionT& session_;
  Speculator speculator_;
  PassCost cost_;
  std::vector<float> logits_;  // [rows][vocab] of the last tentative pass
  int rows_ = 0;               // its rows (0: the last step was plain)
};

}  // namespace nj
