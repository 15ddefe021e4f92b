// LockstepGenerator: builds each pass from the active sequences' next tokens.
#include "runner/run/lockstep.h"

#include <algorithm>

namespace nj::runner {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kNone: break;
  }
  return "none";
}

LockstepGenerator::LockstepGenerator(Forward& forward, int batch, int max_rows, int prefill_chunk,
                                     BatchSpeculation speculation)
    : forward_(forward),
      batch_(std::max(1, batch)),
      max_rows_(std::max(max_rows, std::max(1, batch) * (1 + std::max(0, speculation.draft_tokens)))),
      prefill_chunk_(std::max(1, prefill_chunk)),
      speculation_(speculation) {}

void LockstepGenerator::add(GenerationRequest request) { queue_.push_back(std::move(request)); }

bool LockstepGenerator::ends(Live& l, int32_t id) {
  if (id == l.request.eos) {
    l.result.finish = FinishReason::kStop;
    return true;
  }
  if (static_cast<int>(l.result.output.size()) >= l.request.max_tokens) {
    l.result.finish = FinishReason::kLength;
    return true;
  }
  return false;
}

bool LockstepGenerator::sample(Live& l) {
  const int32_t id = l.sampler.sample(l.state.last_logits);
  l.result.output.push_back(id);
  if (ends(l, id)) return true;
  l.next = id;
  return false;
}

Status LockstepGenerator::step(std::vector<GenerationResult>* finished) {
  // Fill the batch; a request for zero tokens finishes at once.
  while (static_cast<int>(active_.size()) < batch_ && !queue_.empty()) {
    GenerationRequest r = std::move(queue_.front());
    queue_.pop_front();
    if (r.max_tokens <= 0) {
      finished->push_back(GenerationResult{r.id, {}, FinishReason::kLength, {}});
      continue;
    }
    auto l = std::make_unique<Live>(Live{std::move(r), SequenceState::empty(forward_.config()),
                                         Sampler(SamplingParams{}), 0, -1, false, {}});
    l->sampler = Sampler(l->request.sampling);
    l->result.id = l->request.id;
    if (speculation_.draft_tokens > 0) {
      DraftLengthOptions dl;
      dl.max_draft_tokens = speculation_.draft_tokens;
      l->spec.emplace(std::make_unique<NgramDrafter>(), dl);
    }
    active_.push_back(std::move(l));
  }
  if (active_.empty()) return Status();

  // Decode rows first (one each, or with speculation the token and its drafts: drafts stop
  // one short of max_tokens, whose last token is sampled, never fed), then prefill chunks in
  // the rows left.
  std::vector<SeqStep> steps;
  std::vector<Live*> in_pass;
  int rows = 0;
  const size_t vocab = static_cast<size_t>(forward_.config().vocab);
  PassLoad load;
  for (auto& l : active_)
    if (l->fed == l->request.prompt.size()) {
      std::span<const int32_t> fed(&l->next, 1);
      if (l->spec) {
        const int room = l->request.max_tokens - static_cast<int>(l->result.output.size()) - 1;
        fed = l->spec->feed(l->state.tokens, l->next, room, speculation_.cost, &load);
      }
      l->tentative = fed.size() > 1;
      SeqStep step{&l->state, fed, LogitsWanted::kLast, nullptr, &l->result.usage};
      if (l->tentative) {
        l->logits.resize(fed.size() * vocab);
        step.logits = LogitsWanted::kAll;
        step.all_logits = l->logits.data();
        step.tentative = true;
      }
      steps.push_back(step);
      in_pass.push_back(l.get());
      rows += static_cast<int>(fed.size());
    }
  for (auto& l : active_) {
    if (l->fed == l->request.prompt.size() || rows >= max_rows_) continue;
    const size_t left = l->request.prompt.size() - l->fed;
    const size_t n = std::min({left, static_cast<size_t>(prefill_chunk_), static_cast<size_t>(max_rows_ - rows)});
    const bool last = n == left;
    steps.push_back(SeqStep{&l->state, std::span<const int32_t>(l->request.prompt).subspan(l->fed, n),
                            last ? LogitsWanted::kLast : LogitsWanted::kNone, nullptr, &l->result.usage});
    in_pass.push_back(l.get());
    rows += static_cast<int>(n);
  }
  NJ_RETURN_IF_ERROR(forward_.run(steps));

  for (size_t i = 0; i < in_pass.size(); ++i) {
    Live& l = *in_pass[i];
    if (l.fed < l.request.prompt.size()) {
      l.fed += steps[i].ids.size();
      if (l.fed < l.request.prompt.size()) continue;  // more prompt to come
    } else if (l.spec) {
      // Verification emits the drafts plain decoding would draw; the sequence keeps their
      // rows (a draft that ends it is, like plain decoding's last token, never fed).
      const std::span<const float> logits =
          l.tentative ? std::span<const float>(l.logits) : std::span<const float>(l.state.last_logits);
      auto finishes = [&](int32_t id) { return ends(l, id); };
      const Acceptance a =
          l.spec->verify(l.sampler, logits, static_cast<int>(vocab), finishes, &l.result.output);
      if (l.tentative) NJ_RETURN_IF_ERROR(forward_.keep(l.state, a.rows_to_keep()));
      l.result.speculation = l.spec->stats();
      if (a.finished) {
        l.finished = true;
        continue;
      }
    }
    l.finished = sample(l);
  }
  for (auto it = active_.begin(); it != active_.end();) {
    if ((*it)->finished) {
      finished->push_back(std::move((*it)->result));
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  return Status();
}

}  // namespace nj::runner
