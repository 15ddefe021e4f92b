// `generate` for one prompt (the command's single-sequence form, runner/cli/cmd_generate.cpp):
// the decode loop, plain or speculative, that samples after the prompt until max_tokens,
// the end-of-sequence token or the end of a chat reply.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "engine/speculative/decode.h"
#include "jobs/chat/chat_reply.h"

namespace nj::runner {

// What the decode loop produced.
struct DecodedTokens {
  std::vector<int32_t> out;  // the generated tokens
  int decode_steps = 0;      // forward passes after the prompt's
  double decode_s = 0;
  // Tokens whose logits decoding computed (a pass may compute several with speculation).
  double decoded = 0;
};

// Speculative decoding for `session` (`mode` "ngram", or "oracle" with its scripted drafts
// `oracle`), at most `planned_drafts` drafts per pass, costed by the model's plan.
// REQUIRES: `spec` empty; `session` and `model` outlive it.
void start_speculation(std::optional<SpeculativeDecoder<Session>>& spec, Session& session,
                       const Model& model, const std::string& mode, int planned_drafts,
                       const std::vector<int32_t>& oracle);

// Samples and feeds until max_tokens tokens, `eos` (-1: none) or, with `reply`, the end of a
// chat reply. With `save` the last token is fed too (the saved state then continues after
// it). With `spec` a pass also feeds drafts; verification emits exactly the tokens the plain
// loop would (engine/speculative/verify.h), so the tokens, the RNG and the last state are the same.
// Errors: a pass's.
Result<DecodedTokens> decode_prompt(Session& session, Sampler& sampler,
                                    SpeculativeDecoder<Session>* spec,
                                    jobs::ChatReplyReader* reply, int32_t eos, int max_tokens,
                                    bool save);

}  // namespace nj::runner
