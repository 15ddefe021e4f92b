// Verification: which drafted tokens plain decoding would have produced.
//
// A speculative pass feeds a sequence's next token t and drafts d1..dk, and takes the
// logits after each of them: row 0 predicts the token after t, row i the one after d_i.
// Plain decoding would draw its next token from row 0; if that is d1, its next from row 1;
// and so on. So each draft is checked by drawing exactly what plain decoding would draw
// (greedy: the argmax; sampling: the sequence's own Sampler, one draw, from the exact
// distribution), in order, stopping at the first draw that differs from the draft.
//
// The differing draw is then undone (the sampler's RNG goes back to where it was before
// it): the sequence keeps the rows up to the last accepted token, so its state's
// last_logits are the very logits that draw came from, and its next plain step draws the
// same token again with the same RNG state. Every state, RNG and output token is thus one
// that plain decoding passes through: checkpoints, resume and replay need nothing new.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/session/sampler.h"

namespace nj {

struct Acceptance {
  int drafted = 0;
  int accepted = 0;       // drafts plain decoding would have produced, in order
  bool finished = false;  // the last accepted draft ended the generation
  // Rows of the pass the sequence keeps (Forward::keep): t's and every accepted draft's,
  // except that a draft that ends the generation is, like plain decoding's last token,
  // never fed.
  int rows_to_keep() const { return finished ? accepted : accepted + 1; }
};

// logits: [1 + drafts.size()][vocab], row i after the pass's i-th token. Accepted drafts are
// appended to `out` in order; after each, `finishes(token)` says whether the generation ends
// with it (end-of-sequence, length), which stops verification. The sampler's RNG advances
// by exactly the draws of the accepted drafts.
Acceptance accept_drafts(Sampler& sampler, std::span<const float> logits, int vocab,
                         std::span<const int32_t> drafts,
                         const std::function<bool(int32_t)>& finishes, std::vector<int32_t>* out);

}  // namespace nj
