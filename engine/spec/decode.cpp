// SpeculativeDecoder: one tentative pass, verification, keep.
#include "engine/spec/decode.h"

namespace nj {

Result<Acceptance> SpeculativeDecoder::feed(Sampler& sampler, int32_t next, int room,
                                            const std::function<bool(int32_t)>& finishes,
                                            std::vector<int32_t>* out) {
  const int vocab = session_.model().config().vocab;
  PassLoad load;
  const std::span<const int32_t> fed =
      speculator_.feed(session_.state().tokens, next, room, cost_, &load);
  if (fed.size() == 1) {  // nothing drafted: a plain decode step
    NJ_RETURN_IF_ERROR(session_.feed(fed));
    return speculator_.verify(sampler, session_.last_logits(), vocab, finishes, out);
  }
  NJ_RETURN_IF_ERROR(session_.feed_tentative(fed, &logits_));
  const Acceptance a = speculator_.verify(sampler, logits_, vocab, finishes, out);
  NJ_RETURN_IF_ERROR(session_.keep(a.rows_to_keep()));
  return a;
}

}  // namespace nj
