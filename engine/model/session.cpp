// Session: one sequence, fed in passes of at most prefill_chunk tokens.
#include "engine/model/session.h"

#include <algorithm>

namespace nj {

Session::Session(Model& model, SessionOptions options)
    : options_{std::max(1, options.prefill_chunk), options.record_routing},
      forward_(model, ForwardOptions{options_.prefill_chunk, 1, model.plan_options().max_context,
                                     options.record_routing}),
      state_(SequenceState::empty(model.config())) {}

Status Session::feed(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  return feed_in_chunks(
      state_, ids, options_.prefill_chunk, forward_.model().config().vocab, all_logits, nullptr,
      [this](SeqStep& step) { return forward_.run(std::span<SeqStep>(&step, 1)); });
}

}  // namespace nj
