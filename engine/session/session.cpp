// Session: one sequence, fed in passes of at most prefill_chunk tokens.
#include "engine/session/session.h"

#include <algorithm>

namespace nj {

Session::Session(Model& model, SessionOptions options)
    : model_(model),
      options_(options),
      forward_(model.config(), model.weights(), ForwardOptions{std::max(1, options.prefill_chunk), 1,
                                     model.plan_options().max_context, options.record_routing,
                                     options.tentative_rows, options.kda_rollback}),
      state_(SequenceState::empty(model.config())) {}

Status Session::feed_tentative(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  all_logits->resize(ids.size() * static_cast<size_t>(model_.config().vocab));
  SeqStep step{&state_, ids, LogitsWanted::kAll, all_logits->data()};
  step.tentative = true;
  return forward_.run(std::span<SeqStep>(&step, 1));
}

Status Session::feed(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  return feed_in_chunks(
      state_, ids, options_.prefill_chunk, model_.config().vocab, all_logits, nullptr,
      [this](SeqStep& step) { return forward_.run(std::span<SeqStep>(&step, 1)); });
}

}  // namespace nj
