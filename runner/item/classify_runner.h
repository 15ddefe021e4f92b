// Running one claimed item of a classify job: the document between the template's fixed
// prefix and suffix, scored against the job's labels (jobs/label_trie.h).
//
//   prefix    restored from the job's prefix state (prefix_states.h); the first item of a
//             job (in any process) prefills the prefix once, saves it and records the work
//             in a `prefix_prefilled` event (never in an item's usage). With
//             ItemRunOptions::prefix_reuse off, every item feeds the prefix itself.
//   suffix    the item's prompt (document tokens + the template's suffix tokens) is fed in
//             chunks, checking stop and lease between them.
//   labels    the logits after the prompt score the trie's root; each further branching node
//             costs a constrained decode step per token on its path (teacher forcing from a
//             copy of the post-prompt state). Distinct first tokens: zero decode steps.
//   finish    the label's tokens as output, output_text = the label, and the details (label,
//             probabilities, margin, decode_steps, ...) with state 'done', in one transaction.
//
// A classify item is short and keeps no checkpoint: a stop, a crash or a lost lease simply
// redoes it from the prefix state.
#pragma once

#include "runner/item/item_runner.h"

namespace nj::runner {

// As run_item, for an item of a classify job.
Result<AttemptReport> run_classify_item(const ItemEnv& env, const Claim& claim);

}  // namespace nj::runner
