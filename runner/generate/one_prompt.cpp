// The decode loop of `generate` for one prompt (see one_prompt.h).
#include "runner/generate/one_prompt.h"

#include <memory>

#include "runner/item/clock.h"

namespace nj::runner {

void start_speculation(std::optional<SpeculativeDecoder<Session>>& spec, Session& session,
                       const Model& model, const std::string& mode, int planned_drafts,
                       const std::vector<int32_t>& oracle) {
  DraftLengthOptions dl;
  dl.max_draft_tokens = planned_drafts;
  std::unique_ptr<Drafter> drafter;
  if (mode == "oracle")
    drafter = std::make_unique<ScriptedDrafter>(static_cast<size_t>(session.position()), oracle);
  else
    drafter = std::make_unique<NgramDrafter>();
  spec.emplace(session, Speculator(std::move(drafter), dl), pass_cost(model.layout(), model.plan()));
}

Result<DecodedTokens> decode_prompt(Session& session, Sampler& sampler,
                                    SpeculativeDecoder<Session>* spec,
                                    jobs::ChatReplyReader* reply, int32_t eos, int max_tokens,
                                    bool save) {
  DecodedTokens d;
  std::vector<int32_t>& out = d.out;
  auto t_decode = Clock::now();
  // Called once for every emitted token, in order (the chat reader follows the reply).
  auto finishes = [&](int32_t id) {
    const bool ended = reply ? reply->push(id) : id == eos;
    return ended || static_cast<int>(out.size()) == max_tokens;
  };
  while (static_cast<int>(out.size()) < max_tokens) {
    const int32_t id = sampler.sample(session.last_logits());
    out.push_back(id);
    const bool last = finishes(id);
    if (last && !save) break;  // the last token needs no forward pass
    const int32_t one[1] = {id};
    if (last || !spec) {
      NJ_RETURN_IF_ERROR(session.feed(one));
      ++d.decode_steps;
      if (last) break;
      continue;
    }
    // Drafts stop one short of max_tokens: the last token is sampled, never fed.
    NJ_ASSIGN_OR_RETURN(auto accepted,
                        spec->feed(sampler, id, max_tokens - static_cast<int>(out.size()) - 1,
                                   finishes, &out));
    ++d.decode_steps;
    if (accepted.finished) {  // a draft ended the generation: plain decoding stops there too
      if (save) {
        const int32_t eos_one[1] = {out.back()};
        NJ_RETURN_IF_ERROR(session.feed(eos_one));
        ++d.decode_steps;
      }
      break;
    }
  }
  d.decode_s = seconds_since(t_decode);
  d.decoded = static_cast<double>(out.size()) - (save || out.empty() ? 0 : 1);
  return d;
}

}  // namespace nj::runner
