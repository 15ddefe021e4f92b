// Session: one sequence, fed in passes of at most prefill_chunk tokens.
#include "engine/model/session.h"

#include <algorithm>

namespace nj {

Session::Session(Model& model, SessionOptions options)
    : options_(options),
      forward_(model, ForwardOptions{std::max(1, options.prefill_chunk), 1,
                                     model.plan_options().max_context, options.record_routing,
                                     options.tentative_rows, options.kda_rollback}),
      state_(SequenceState::empty(model.config())) {}

Status Session::feed_tentative(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  all_logits->resize(ids.size() * static_cast<size_t>(forward_.model().config().vocab));
  SeqStep step{&state_, ids, LogitsWanted::kAll, all_logits->data()};
  step.tentative = true;
  return forward_.run(std::span<SeqStep>(&step, 1));
}

Status Session::feed(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  const size_t vocab = static_cast<size_t>(forward_.model().config().vocab);
  const size_t chunk = static_cast<size_t>(std::max(1, options_.prefill_chunk));
  if (all_logits) all_logits->assign(ids.size() * vocab, 0.0f);
  for (size_t i = 0; i < ids.size(); i += chunk) {
    const size_t n = std::min(ids.size() - i, chunk);
    const bool final_chunk = i + n == ids.size();
    SeqStep step;
    step.state = &state_;
    step.ids = ids.subspan(i, n);
    step.logits = all_logits ? LogitsWanted::kAll : final_chunk ? LogitsWanted::kLast : LogitsWanted::kNone;
    step.all_logits = all_logits ? all_logits->data() + i * vocab : nullptr;
    NJ_RETURN_IF_ERROR(forward_.run(std::span<SeqStep>(&step, 1)));
  }
  return Status();
}

}  // namespace nj
